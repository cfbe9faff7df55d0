package planner

import (
	"strings"

	"rsql/connectors/options"
	"rsql/sql"
)

// ChangeMode is how the rows of a relation change as input arrives (docs/sql.md,
// "Changelogs").
type ChangeMode uint8

const (
	// AppendOnly: rows are only ever added. The row has no change column.
	AppendOnly ChangeMode = iota
	// Upsert: the row's last column is the change column (sql.ChangeColumn). A row whose
	// change is a delete (sql.IsDelete) removes its key's row; any other row is its key's
	// new row, replacing the one before. The key is known (the planner derives it: a GROUP
	// BY's keys).
	Upsert
	// Retract: the row's last column is the change column. A delete removes one row equal
	// to it (but for the change column); any other row adds one. An update is the delete of
	// the old row followed by the insert of the new one.
	Retract
)

func (m ChangeMode) String() string {
	return [...]string{"append-only", "upsert", "retract"}[m]
}

// changes is what the changelog pass knows of a relation: its mode and, when known, a key
// (columns, change column excluded) no two of its current rows share. An empty non-nil key
// means at most one row (a global aggregate).
type changes struct {
	mode ChangeMode
	key  []int
}

func (c changes) updating() bool { return c.mode != AppendOnly }

// Changelog infers the change mode of every relation of an optimized plan, adds the change
// column to the rows of updating relations, and refuses (0A000, naming the operator and
// why) every combination of an operator and an updating input that rsql does not compute
// exactly. Each operator's case states what it accepts and what it produces:
//
//   - a scan is append-only (a table read as a stream is its changelog, rows with their
//     change column as a plain column);
//   - a GROUP BY without a window that emits changes produces an updating relation keyed by
//     its group keys: upsert when everything up to the sink only passes the keys along,
//     retract (the old row's delete before the new row) when an operator above needs whole
//     rows; over an updating input it retracts (COUNT, SUM, AVG, MIN, MAX and the
//     aggregates sql.AggDef.Retractable marks) — a windowed aggregation does not;
//   - a filter and a projection accept a retract input (a projection an upsert input when
//     it keeps the key) and keep the mode;
//   - a sink accepts any mode; a stream sink of an updating relation needs its key (the
//     changelog's message key), but a materialized view (Sink.Multiset) takes a retract
//     changelog without one, as a multiset;
//   - a regular join without a state TTL (INNER, LEFT, RIGHT, FULL) accepts retract inputs
//     and a table's changelog (each key's latest version): it is append-only when it is
//     inner and both inputs are append-only streams, retract otherwise (an outer join
//     retracts its NULL-padded rows when their first match arrives); interval, window,
//     temporal, lookup and TTL-bounded regular joins take append-only input only;
//   - a table read by a continuous query outside a join that reads it as a table is its
//     latest versions (TopN TableVersions over its changelog): retract, keyed by its
//     primary key;
//   - a Top-N over the whole stream (ROW_NUMBER() without a window, TopNChanges) accepts
//     append-only and retract inputs and produces retract; deduplication keeping the last
//     row produces retract keyed by its partition (a replaced row is taken back); a window
//     Top-N or a deduplication over an updating input becomes that Top-N (TopNChanges);
//   - aggregates over a window of rows (AVG(x) OVER (... ROWS BETWEEN n PRECEDING AND
//     CURRENT ROW), Over) accept append-only and retract inputs; over a stream they produce
//     retract (a row arriving or leaving changes the values of the rows after it in its
//     frame), over a bounded input append-only (each row once, at the end);
//   - UNION ALL of updating and append-only inputs is retract (the append-only rows are
//     inserts);
//   - over a bounded input an updating relation is folded into its final rows (a Sort
//     applying the changes, foldChanges) before ORDER BY sorts it, LIMIT takes its first
//     rows and a one-off query's client sink receives it;
//   - LIMIT passes the changes of a push query over a stream (the first N changes); every
//     other operator (window Top-N, deduplication, window assignment, table functions)
//     takes append-only input only.
func Changelog(l LogicalNode) (LogicalNode, error) {
	n, _, err := changelog(l, false)
	return n, err
}

// foldChanges is in, an updating relation of a bounded plan, folded into its final rows
// when its input ends: a Sort without keys applying the changes.
func foldChanges(in LogicalNode, ch changes) LogicalNode {
	return &Sort{Input: in, Changes: ch.mode, Key: ch.key}
}

// refuse is the error of an operator that cannot take an updating input.
func refuse(op string, in changes, why string) error {
	return errorf(sql.CodeNotSupported, "%s over a relation whose rows change (%s: the result of a GROUP BY without a window, or of an operator over one) is not supported: %s", op, in.mode, why)
}

// changelog rewrites n (see Changelog); upsertOK says n's consumer takes an upsert input,
// so an aggregation need not emit its old rows' deletes.
func changelog(n LogicalNode, upsertOK bool) (LogicalNode, changes, error) {
	switch n := n.(type) {
	case *Sink:
		in, ch, err := changelog(n.Input, true)
		if err != nil {
			return nil, ch, err
		}
		if ch.updating() && n.Stream == "" && !n.Multiset && bounded(n.Input) {
			// A one-off query over bounded input (files, views' current rows) answers
			// with its final rows, as PostgreSQL does, not the changes on the way.
			in, ch = foldChanges(in, ch), changes{}
		}
		if ch.updating() && n.Stream != "" && ch.key == nil && !(n.Multiset && ch.mode == Retract) {
			return nil, ch, errorf(sql.CodeNotSupported, "the rows of this query change as input arrives, but it selects no key to write them by: select every GROUP BY column (the key of the changelog written to %s); a changelog without a key (a Top-N, a UNION ALL of changes, aggregates OVER a window of a stream's rows) can be a materialized view", n.Stream)
		}
		s := *n
		s.Input, s.Changes, s.Key = in, ch.mode, ch.key
		return &s, ch, nil

	case *Scan:
		ch := scanChanges(n)
		if truncatingScan(n) {
			if ch.key == nil {
				return nil, ch, errorf(sql.CodeInternal, "the scan of table %s lacks its primary key", n.Relation.Name)
			}
			// A TRUNCATE of the table deletes the rows its latest versions hold.
			part := make([]sql.Expr, len(ch.key))
			for i, c := range ch.key {
				part[i] = colRef(n.Schema(), c)
			}
			return &TopN{Input: n, Partition: part, N: 1, RowNumber: -1, WindowEnd: -1, Time: -1,
				Mode: TableVersions, Latest: true, Changes: Retract, AtSource: true}, ch, nil
		}
		return n, ch, nil

	case *Filter:
		in, ch, err := changelog(n.Input, false)
		if err != nil {
			return nil, ch, err
		}
		f := *n
		f.Input = in
		return &f, ch, nil

	case *Project:
		in, ch, err := changelog(n.Input, upsertOK)
		if err != nil {
			return nil, ch, err
		}
		if !ch.updating() {
			if in == n.Input {
				return n, ch, nil
			}
			p := *n
			p.Input = in
			return &p, ch, nil
		}
		key := projectKey(n.Exprs, ch.key)
		if ch.mode == Upsert && key == nil {
			// The key does not reach the consumer: it needs whole rows.
			if in, ch, err = changelog(n.Input, false); err != nil {
				return nil, ch, err
			}
		}
		sch := in.Schema()
		op := len(sch) - 1
		p := &Project{Input: in,
			Exprs: append(append([]sql.Expr(nil), n.Exprs...), &sql.ColumnRef{Index: op, Name: sql.ChangeColumn, T: sch[op].Type}),
			Names: append(append([]string(nil), n.Names...), sql.ChangeColumn)}
		return p, changes{mode: ch.mode, key: key}, nil

	case *Aggregate:
		in, ch, err := changelog(n.Input, false)
		if err != nil {
			return nil, ch, err
		}
		a := *n
		a.Input = in
		if ch.updating() {
			if n.Window != nil {
				return nil, ch, refuse("a windowed aggregation ("+windowName(n.Window.Kind)+")", ch, "aggregate it without a window, or window the input before it changes")
			}
			for _, g := range n.Aggs {
				if def, ok := g.Aggregate(); !ok || !def.Retractable(g) {
					return nil, ch, refuse("aggregate "+aggText(g), ch, "it cannot take back a row it has counted (the built-in aggregates can; a JavaScript aggregate can when its body defines retract(state, args...))")
				}
			}
			a.Retracting, a.TTL, a.EmitNew = true, 0, false
		}
		switch {
		case n.Window == nil && (n.Emit == EmitChanges && !(n.EmitNew && !ch.updating())):
			a.Changes = Retract
			if upsertOK {
				a.Changes = Upsert
			}
		case ch.updating():
			// An aggregation over a changing input that answers once (a bounded input,
			// EMIT ON CLOSE): its rows are final.
			a.Changes = AppendOnly
		}
		if !a.Changes.updatingMode() {
			return &a, changes{}, nil
		}
		key := make([]int, len(n.Keys))
		for i := range key {
			key[i] = i
		}
		return &a, changes{mode: a.Changes, key: key}, nil

	case *TopN:
		if n.Mode == TableVersions {
			t := *n
			t.Changes = Retract
			return &t, changes{mode: Retract, key: keyColumns(n.Partition)}, nil
		}
		if n.Mode == TopNChanges {
			in, ch, err := changelog(n.Input, false)
			if err != nil {
				return nil, ch, err
			}
			t := *n
			t.Input, t.Retracting, t.Changes = in, ch.updating(), Retract
			return &t, changes{mode: Retract}, nil
		}
		if n.Mode == TopNWindow || n.Mode == TopNBounded || n.Mode == DedupFirst || n.Mode == DedupLast {
			in, ch, err := changelog(n.Input, false)
			if err != nil {
				return nil, ch, err
			}
			if ch.updating() {
				// Over a changing input a window's (a partition's) first rows change as
				// well: the Top-N of the whole stream keeps every row of each partition
				// and takes back the rows that leave the first N. Exact; its state is not
				// bounded by windows or a TTL.
				t := *n
				t.Input, t.Mode, t.Retracting, t.Changes = in, TopNChanges, true, Retract
				t.TTL, t.WindowEnd, t.Time, t.Latest = 0, -1, -1, false
				return &t, changes{mode: Retract}, nil
			}
			if n.Mode == DedupLast {
				// Each row later than its partition's current one replaces it: an upsert
				// keyed by the partition where the consumer takes one, else the old row
				// is taken back.
				t := *n
				t.Input, t.Changes = in, Retract
				if upsertOK {
					t.Changes = Upsert
				}
				return &t, changes{mode: t.Changes, key: firstOfEqual(in, keyColumns(n.Partition))}, nil
			}
			// Append-only over append-only input (its input's pass is done: not again below).
			t := *n
			t.Input = in
			return &t, changes{}, nil
		}

	case *Over:
		in, ch, err := changelog(n.Input, false)
		if err != nil {
			return nil, ch, err
		}
		o := *n
		o.Input, o.Retracting = in, ch.updating()
		if n.Bounded {
			// Every row once, with its value, when the input ends.
			return &o, changes{}, nil
		}
		// Each output row is one input row with its values: an input's key keys it too.
		o.Changes = Retract
		return &o, changes{mode: Retract, key: ch.key}, nil

	case *Join:
		return changelogJoin(n)

	case *Union:
		ins := make([]LogicalNode, len(n.Inputs))
		chs := make([]changes, len(n.Inputs))
		any := false
		for i, c := range n.Inputs {
			in, ch, err := changelog(c, false)
			if err != nil {
				return nil, ch, err
			}
			ins[i], chs[i] = in, ch
			any = any || ch.updating()
		}
		u := *n
		u.Inputs = ins
		if !any {
			return &u, changes{}, nil
		}
		// UNION ALL of changelogs is their Retract union: an append-only input's rows are
		// inserts.
		for i, in := range ins {
			if chs[i].updating() {
				continue
			}
			sch := in.Schema()
			exprs := make([]sql.Expr, 0, len(sch)+1)
			names := make([]string, 0, len(sch)+1)
			for k, c := range sch {
				exprs, names = append(exprs, colRef(sch, k)), append(names, c.Name)
			}
			exprs = append(exprs, &sql.Literal{V: sql.Null, T: sql.TypeVarchar})
			u.Inputs[i] = &Project{Input: in, Exprs: exprs, Names: append(names, sql.ChangeColumn)}
		}
		u.Out = append(append(sql.Schema{}, n.Out...), changeColumn)
		return &u, changes{mode: Retract}, nil

	case *Sort:
		in, ch, err := changelog(n.Input, true)
		if err != nil {
			return nil, ch, err
		}
		s := *n
		s.Input = in
		if ch.updating() {
			if !bounded(n.Input) {
				return nil, ch, refuse("ORDER BY", ch, "a stream's rows cannot be sorted")
			}
			s.Changes, s.Key = ch.mode, ch.key
		}
		return &s, changes{}, nil

	case *Limit:
		in, ch, err := changelog(n.Input, upsertOK)
		if err != nil {
			return nil, ch, err
		}
		if ch.updating() && bounded(n.Input) {
			// Over a bounded input the limit takes the first of the final rows.
			in, ch = foldChanges(in, ch), changes{}
		}
		if ch.updating() && !upsertOK {
			return nil, ch, refuse("LIMIT", ch, "a limit keeps the first rows, and which rows are first changes")
		}
		l := *n
		l.Input = in
		return &l, ch, nil
	}
	// The operators that take append-only input only.
	kids := n.Children()
	out := make([]LogicalNode, len(kids))
	changed := false
	for i, c := range kids {
		in, ch, err := changelog(c, false)
		if err != nil {
			return nil, ch, err
		}
		if ch.updating() {
			return nil, ch, refuse(operatorName(n), ch, "only append-only input is supported here yet")
		}
		out[i] = in
		changed = changed || in != c
	}
	if changed {
		n = n.WithChildren(out)
	}
	return n, changes{}, nil
}

func (m ChangeMode) updatingMode() bool { return m != AppendOnly }

// changelogJoin is the changelog pass of a join (see Changelog).
func changelogJoin(n *Join) (LogicalNode, changes, error) {
	l, lch, err := changelog(n.Left, false)
	if err != nil {
		return nil, lch, err
	}
	r, rch, err := changelog(n.Right, false)
	if err != nil {
		return nil, rch, err
	}
	// A changelog table's scan (scanChanges) carries its change column among the columns
	// the join was bound with; the join takes an updating side's last column as its change
	// column, so the side gets a copy of it to take and keeps the bound columns.
	l, r = ownChangeColumn(n.Left, l, lch), ownChangeColumn(n.Right, r, rch)
	exact := n.Mode == JoinRegular && n.TTL <= 0
	for _, ch := range []changes{lch, rch} {
		if !ch.updating() || exact {
			continue
		}
		why := "its rows are joined as they arrive and never taken back: join the changing relation with a regular join (no time bound, no FOR SYSTEM_TIME AS OF)"
		if n.Mode == JoinRegular {
			why = "with a state TTL a join forgets rows rather than taking them back: RESET state_ttl for the exact join"
		}
		return nil, ch, refuse(operatorName(n), ch, why)
	}
	j := *n
	j.Left, j.Right = l, r
	j.LeftChanges, j.RightChanges = lch.updating(), rch.updating()
	j.Changes = AppendOnly
	if exact && (n.Kind != sql.JoinInner || j.LeftChanges || j.RightChanges || n.Table != nil || n.LeftTable != nil) {
		// Outer rows are taken back when their match arrives, matches when a row goes, and
		// a table's matches when its key gets a new version.
		j.Changes = Retract
	}
	if j.Changes == AppendOnly && l == n.Left && r == n.Right {
		return n, changes{}, nil
	}
	if j.Changes == AppendOnly {
		return &j, changes{}, nil
	}
	ls, _ := j.sides()
	return &j, changes{mode: j.Changes, key: joinKey(&j, lch.key, rch.key, len(ls))}, nil
}

// joinKey is a key of an updating join's rows (columns of the joined row), or nil: the
// union of both sides' keys (a table's is its primary key, the join keys of its side); or
// one side's key alone when the other side is a table, of which a row matches one row at
// most (its key), and the join does not emit the table's unmatched rows.
func joinKey(j *Join, lk, rk []int, lw int) []int {
	if j.LeftTable != nil {
		lk = keyColumns(j.LeftKeys)
	}
	if j.Table != nil {
		rk = keyColumns(j.RightKeys)
	}
	shift := func(k []int) []int {
		out := make([]int, len(k))
		for i, c := range k {
			out[i] = c + lw
		}
		return out
	}
	switch {
	case lk != nil && j.Table != nil && (j.Kind == sql.JoinInner || j.Kind == sql.JoinLeft):
		return append([]int{}, lk...)
	case rk != nil && j.LeftTable != nil && (j.Kind == sql.JoinInner || j.Kind == sql.JoinRight):
		return shift(rk)
	case lk != nil && rk != nil:
		return append(append([]int{}, lk...), shift(rk)...)
	}
	return nil
}

// keyColumns are the columns of a side's join keys, or nil when one is not a column.
func keyColumns(keys []sql.Expr) []int {
	out := make([]int, 0, len(keys))
	for _, k := range keys {
		c, ok := unwrapCast(k).(*sql.ColumnRef)
		if !ok {
			return nil
		}
		out = append(out, c.Index)
	}
	return out
}

// firstOfEqual maps each key column of n's rows to the first column of n that holds the
// same value — the same expression of a projection (a Top-N's partition columns are copies
// of the query's, after them) — so the key survives a projection of the query's columns.
func firstOfEqual(n LogicalNode, key []int) []int {
	p, ok := n.(*Project)
	if !ok || key == nil {
		return key
	}
	out := make([]int, len(key))
	for i, c := range key {
		out[i] = c
		for j := 0; j < c && c < len(p.Exprs); j++ {
			if sql.SameExpr(p.Exprs[j], p.Exprs[c]) {
				out[i] = j
				break
			}
		}
	}
	return out
}

// projectKey maps key (columns of a projection's input) to the projection's output: nil
// when a key column is not passed through as is.
func projectKey(exprs []sql.Expr, key []int) []int {
	if key == nil {
		return nil
	}
	out := make([]int, 0, len(key))
	for _, k := range key {
		found := -1
		for i, e := range exprs {
			if c, ok := e.(*sql.ColumnRef); ok && c.Index == k {
				found = i
				break
			}
		}
		if found < 0 {
			return nil
		}
		out = append(out, found)
	}
	return out
}

// operatorName names an operator in an error.
func operatorName(n LogicalNode) string {
	switch n := n.(type) {
	case *Join:
		if n.Kind == sql.JoinInner {
			return "an inner join (" + n.Mode.String() + ")"
		}
		return "a " + n.Kind.String() + " join (" + n.Mode.String() + ")"
	case *TopN:
		switch n.Mode {
		case DedupFirst, DedupLast:
			return "deduplication (ROW_NUMBER() = 1)"
		}
		return "Top-N (ROW_NUMBER())"
	case *Union:
		return "UNION ALL"
	case *Sort:
		return "ORDER BY"
	case *Over:
		return "aggregates OVER a window"
	case *WindowAssign:
		return "a window (" + windowName(n.Window.Kind) + ")"
	case *TableFunc:
		return "table function " + n.Func.Name
	}
	s := n.String()
	if i := strings.IndexByte(s, ' '); i > 0 {
		s = s[:i]
	}
	return s
}

// scanChanges is the change mode of a scan: a table whose connector reads the changes of
// its rows (options.Kind.Changelog: postgres-cdc) is a retract changelog keyed by its
// primary key, its change column last; every other scan is append-only.
func scanChanges(n *Scan) changes {
	if !changelogScan(n) {
		return changes{}
	}
	rel := n.Relation
	key := make([]int, 0, len(rel.PrimaryKey))
	for _, k := range rel.PrimaryKey {
		at := -1
		for i, c := range n.Columns {
			if c == k {
				at = i
			}
		}
		if at < 0 {
			return changes{mode: Retract}
		}
		key = append(key, at)
	}
	return changes{mode: Retract, key: key}
}

// truncatingScan reports whether n reads the changes of a table whose source may truncate
// it (a postgres-cdc table with on_truncate = 'delete', the default): its latest versions
// are kept above the scan (Changelog), which turns a truncation into deletes of the rows
// they hold, and the scan keeps the primary key's columns (PruneColumns).
func truncatingScan(n *Scan) bool {
	if !changelogScan(n) {
		return false
	}
	del, err := options.TruncateDeletes(n.Relation.Options)
	return err == nil && del
}

// changelogScan reports whether n reads a table of a changelog connector with its change
// column (kept by PruneColumns) last.
func changelogScan(n *Scan) bool {
	rel := n.Relation
	if rel == nil || !rel.IsTable || n.Snapshot {
		return false
	}
	kind, ok := options.Lookup(rel.Connector())
	if !ok || !kind.Changelog {
		return false
	}
	op := rel.Schema.Index(sql.ChangeColumn)
	return op >= 0 && len(n.Columns) > 0 && n.Columns[len(n.Columns)-1] == op
}

// ownChangeColumn is side (before) as rewritten (after) with its change column moved past
// a NULL in its place, when it was updating already as bound: its change column was among
// its bound columns (a changelog table's scan).
func ownChangeColumn(before, after LogicalNode, ch changes) LogicalNode {
	bs := before.Schema()
	if !ch.updating() || len(bs) == 0 || bs[len(bs)-1].Name != sql.ChangeColumn {
		return after
	}
	sch := after.Schema()
	exprs := make([]sql.Expr, 0, len(sch)+1)
	names := make([]string, 0, len(sch)+1)
	for k, c := range sch[:len(sch)-1] {
		exprs, names = append(exprs, colRef(sch, k)), append(names, c.Name)
	}
	// The bound column stays, always NULL: the join matches a delete with the row it takes
	// back by all of the side's columns, and the change column differs between the two.
	exprs = append(exprs, &sql.Literal{V: sql.Null, T: sql.TypeVarchar}, colRef(sch, len(sch)-1))
	names = append(names, sql.ChangeColumn, sql.ChangeColumn)
	return &Project{Input: after, Exprs: exprs, Names: names}
}
