package planner

import (
	"strconv"
	"strings"

	"rsql/connectors/options"

	"rsql/sql"
)

// JoinMode is how a join keeps state and when it emits (docs/sql.md, "Joins").
type JoinMode uint8

const (
	// JoinInterval: both sides are streams and the ON bounds the right side's event time
	// around the left's (Lower <= right - left <= Upper). Rows are kept while a match is
	// possible; an outer row is emitted with NULLs when the watermark passes its interval.
	JoinInterval JoinMode = iota
	// JoinWindow: both sides carry one window (window_start, window_end in the keys); the
	// matches of a window are emitted when it closes on the watermark.
	JoinWindow
	// JoinTemporal: the right side is a versioned table; each left row is joined with the
	// version valid at its event time (the greatest version time <= it), emitted once the
	// watermark has passed it.
	JoinTemporal
	// JoinCurrent: FOR SYSTEM_TIME AS OF a processing time (PROCTIME()) with a table read
	// from a topic: each left row is joined with the key's version current when it arrives
	// — the greatest version time read so far (RightTime; NULL the greatest), a delete
	// included — (not deterministic; append-only, as a lookup join).
	JoinCurrent
	// JoinRegular: no time bound. Without a state TTL it is exact: each side's rows are kept
	// until they are deleted (a retract input's deletes; a table's new version or delete
	// of its key replaces the key's row), every match is emitted when its second row
	// arrives and retracted when one of its rows is deleted, and an outer side's row
	// without a match is emitted with NULLs, retracted when its first match arrives (see
	// the output's change mode, Join.Changes). With a state TTL (two streams, inner only)
	// rows are forgotten after it: an approximation with bounded state.
	JoinRegular
	// JoinLookup: the right side is a table in an external database, looked up by key for
	// each left row (cached).
	JoinLookup
)

func (m JoinMode) String() string {
	return [...]string{"interval", "window", "temporal", "current", "regular", "lookup"}[m]
}

// Join joins Left and Right on LeftKeys = RightKeys (each over its side's row, of the same
// types), then Residual over the joined row (Left's columns, then Right's). Its row is the
// joined row; a side an outer join leaves unmatched is NULLs.
type Join struct {
	Left, Right         LogicalNode
	Kind                sql.JoinKind
	Mode                JoinMode
	LeftKeys, RightKeys []sql.Expr
	Residual            sql.Expr
	// JoinInterval: column LeftTime of the left row, RightTime of the right row, and
	// Lower <= right - left <= Upper (milliseconds; LowerOpen/UpperOpen make them strict).
	// An exact regular join: a table side's version time (-1: none).
	LeftTime, RightTime  int
	Lower, Upper         int64
	LowerOpen, UpperOpen bool
	// JoinInterval with HasUntil: the upper bound is a column of the left row instead of a
	// constant (right's time <= left's column LeftUntil, as in B.t BETWEEN A.t AND
	// A.expires): a left row is kept until the watermark passes its own bound, and that
	// comparison is part of Residual, so matches are exact.
	HasUntil  bool
	LeftUntil int
	// JoinWindow: the window_end column of each side's row.
	LeftEnd, RightEnd int
	// JoinTemporal, JoinLookup, and JoinRegular with a table: the right side is Table; AsOf
	// is the left column of the time the version must be valid at (temporal); RightTime
	// the table's version time; RightOp its change column (-1: none). A regular join with
	// a table joins each key's latest version (the table is an upsert input keyed by its
	// primary key, the join's right keys).
	Table *sql.Relation
	// LeftTable: an exact regular join's left side is a table (its latest versions, keyed by
	// its primary key, the join's left keys); LeftOp is its change column (-1: none).
	LeftTable *sql.Relation
	LeftOp    int
	// Lookup are the options of a JoinLookup's Table, parsed when the join is planned.
	Lookup  options.LookupOptions
	AsOf    int
	RightOp int
	TTL     int64
	// LeftName and RightName name the sides in EXPLAIN (their aliases, or left/right).
	LeftName, RightName string
	// Set by the changelog pass: LeftChanges and RightChanges say a side is a retract input,
	// its rows ending with their change column, which is not one of the join's columns;
	// Changes is the mode of the join's rows, which end with one change column when it is
	// not append-only (the sides' columns, then the change column).
	LeftChanges, RightChanges bool
	Changes                   ChangeMode
}

func (j *Join) Schema() sql.Schema {
	l, r := j.sides()
	out := append(append(sql.Schema{}, l...), r...)
	if j.Changes != AppendOnly {
		out = append(out, changeColumn)
	}
	return out
}

// sides are the columns each side gives the join (its change column left out).
func (j *Join) sides() (l, r sql.Schema) {
	l, r = j.Left.Schema(), j.Right.Schema()
	if j.LeftChanges {
		l = l[:len(l)-1]
	}
	if j.RightChanges {
		r = r[:len(r)-1]
	}
	return l, r
}
func (j *Join) Children() []LogicalNode { return []LogicalNode{j.Left, j.Right} }
func (j *Join) WithChildren(c []LogicalNode) LogicalNode {
	n := *j
	n.Left, n.Right = c[0], c[1]
	return &n
}
func (j *Join) String() string {
	var b strings.Builder
	b.WriteString("Join " + j.Kind.String() + " mode=" + j.Mode.String())
	l, r := j.sides()
	ln, rn := j.LeftName, j.RightName
	if ln == "" {
		ln = "left"
	}
	if rn == "" {
		rn = "right"
	}
	keys := make([]string, len(j.LeftKeys))
	for i := range j.LeftKeys {
		keys[i] = sideText(ln, j.LeftKeys[i]) + " = " + sideText(rn, j.RightKeys[i])
	}
	b.WriteString(" keys=[" + strings.Join(keys, ", ") + "]")
	lt, rt := ln+"."+colName(l, j.LeftTime), rn+"."+colName(r, j.RightTime)
	var state string
	switch j.Mode {
	case JoinInterval:
		if j.HasUntil {
			until := ln + "." + colName(l, j.LeftUntil)
			b.WriteString(" time=" + rt + " - " + lt + " >= " + intervalText(j.Lower) + ", " + rt + " <= " + until)
			state = ln + " rows until the watermark passes " + until + ", " +
				rn + " rows until it passes " + offsetText(rt, -j.Lower)
			break
		}
		b.WriteString(" time=" + rt + " - " + lt + " in " + boundText(j.Lower, j.LowerOpen, true) + ", " + boundText(j.Upper, j.UpperOpen, false))
		state = ln + " rows until the watermark passes " + offsetText(lt, j.Upper) + ", " +
			rn + " rows until it passes " + offsetText(rt, -j.Lower)
	case JoinWindow:
		b.WriteString(" window-end=" + ln + "." + colName(l, j.LeftEnd) + ", " + rn + "." + colName(r, j.RightEnd))
		state = "both sides' rows of a window until it closes"
		if d := dominanceOf(j); d != nil {
			name, row, keys := ln, l, j.LeftKeys
			if d.Side == 1 {
				name, row, keys = rn, r, j.RightKeys
			}
			what := name + "." + colName(row, d.HeldCol)
			if d.Key >= 0 {
				what = sideText(name, keys[d.Key])
			}
			ext := "MAX"
			if d.Sign < 0 {
				ext = "MIN"
			}
			state += "; of " + name + " only the rows at the running " + ext + " of " + what + " in their group"
		}
	case JoinTemporal:
		b.WriteString(" as-of=" + ln + "." + colName(l, j.AsOf) + " version-time=" + rt)
		state = ln + " rows until the watermark passes " + ln + "." + colName(l, j.AsOf) + ", the versions of " + rn + " from the one valid at the watermark"
	case JoinCurrent:
		state = "the current version of each key of " + rn
	case JoinRegular:
		switch {
		case j.TTL > 0:
			state = "both sides' rows for the state TTL"
		case j.Table != nil && j.LeftTable != nil:
			state = "the latest version of each key of " + ln + " and of " + rn
		case j.LeftTable != nil:
			state = "the latest version of each key of " + ln + ", " + rn + " rows until they are deleted"
		case j.Table != nil:
			state = ln + " rows until they are deleted, the latest version of each key of " + rn
		default:
			state = "both sides' rows until they are deleted"
		}
	case JoinLookup:
		b.WriteString(lookupText(j.Table, j.Lookup))
		state = "none: a cache of looked-up " + rn + " rows, not checkpointed"
	}
	if j.Residual != nil {
		b.WriteString(" residual=" + j.Residual.String())
	}
	if j.TTL > 0 {
		b.WriteString(" state-ttl=" + intervalText(j.TTL))
	}
	if state != "" {
		b.WriteString(" state=(" + state + ")")
	}
	if j.Changes != AppendOnly {
		b.WriteString(" changes=" + j.Changes.String())
	}
	return b.String()
}

// offsetText is base + ms as SQL text.
func offsetText(base string, ms int64) string {
	switch {
	case ms > 0:
		return base + " + " + intervalText(ms)
	case ms < 0:
		return base + " - " + intervalText(-ms)
	}
	return base
}

// sideText is a key expression of one side, its columns qualified by the side's name.
func sideText(name string, e sql.Expr) string {
	if c, ok := e.(*sql.ColumnRef); ok {
		return name + "." + c.String()
	}
	return e.String()
}

func colName(s sql.Schema, i int) string {
	if i >= 0 && i < len(s) {
		return s[i].Name
	}
	return "#" + strconv.Itoa(i)
}

func boundText(ms int64, open, lower bool) string {
	if lower {
		if open {
			return "(" + intervalText(ms)
		}
		return "[" + intervalText(ms)
	}
	if open {
		return intervalText(ms) + ")"
	}
	return intervalText(ms) + "]"
}

// join plans FROM a JOIN b ON c: the ON's conjuncts are sorted into equality keys (one side's
// expression = the other's), time bounds between the sides' event-time columns, window
// bounds, and the rest (Residual); the mode follows from what was found (JoinMode).
func (b *logicalBuilder) join(f *sql.FromJoin, left, right LogicalNode) (LogicalNode, error) {
	lw := len(left.Schema())
	lsch, rsch := left.Schema(), right.Schema()
	j := &Join{Left: left, Right: right, Kind: f.Kind, LeftName: f.LeftName, RightName: f.RightName, LeftTime: -1, RightTime: -1, LeftEnd: -1, RightEnd: -1, AsOf: -1, RightOp: -1, LeftOp: -1}
	side := func(e sql.Expr) int { // 0: left only, 1: right only, -1: both or none
		l, r := false, false
		for _, c := range sql.ColumnsUsed(e) {
			if c < lw {
				l = true
			} else {
				r = true
			}
		}
		switch {
		case l && !r:
			return 0
		case r && !l:
			return 1
		}
		return -1
	}
	shift := make([]int, lw+len(rsch)) // joined-row column -> right-row column
	for i := range shift {
		shift[i] = i - lw
	}
	rightExpr := func(e sql.Expr) (sql.Expr, error) { return sql.RemapColumns(e, shift) }
	var residual []sql.Expr
	lower, upper := int64(0), int64(0)
	haveLower, haveUpper := false, false
	untilCol := -1          // the left column bounding the right's time, when one does
	var untilRight sql.Expr // that bound's comparison (for EXPLAIN)
	_ = untilRight
	var lwin, rwin [2]int // [start, end] column of each side's window in the keys
	lwin, rwin = [2]int{-1, -1}, [2]int{-1, -1}
	attr := func(c int) sql.ColAttr {
		if c < lw {
			if c < len(f.LeftAttrs) {
				return f.LeftAttrs[c]
			}
			return sql.ColAttr{}
		}
		if c-lw < len(f.RightAttrs) {
			return f.RightAttrs[c-lw]
		}
		return sql.ColAttr{}
	}
	var conds []sql.Expr
	if f.On != nil {
		conds = conjuncts(f.On)
	}
	for _, c := range conds {
		// Equality between the sides.
		if call, ok := c.(*sql.Call); ok && call.Func == "=" && len(call.Args) == 2 {
			a, bb := call.Args[0], call.Args[1]
			sa, sb := side(a), side(bb)
			if sa == 1 && sb == 0 {
				a, bb, sa, sb = bb, a, sb, sa
			}
			if sa == 0 && sb == 1 {
				re, err := rightExpr(bb)
				if err != nil {
					return nil, wrapf(err, "join key")
				}
				lk, rk, err := matchKeyTypes(a, re)
				if err != nil {
					return nil, err
				}
				j.LeftKeys = append(j.LeftKeys, lk)
				j.RightKeys = append(j.RightKeys, rk)
				// A window bound of each side?
				if lc, ok := a.(*sql.ColumnRef); ok {
					if rc, ok := bb.(*sql.ColumnRef); ok {
						la, ra := attr(lc.Index), attr(rc.Index)
						if la.Window > 0 && ra.Window > 0 && la.End == ra.End {
							k := 0
							if la.End {
								k = 1
							}
							lwin[k], rwin[k] = lc.Index, rc.Index-lw
						}
					}
				}
				continue
			}
		}
		// An upper bound taken from a column of the left row (B.t <= A.expires, or B.t
		// BETWEEN A.t AND A.expires): kept in the residual, and the left row's end of life.
		if lo, col, rest, ok := untilBound(c, lw, attr); ok && (untilCol < 0 || untilCol == col) {
			okLo := true
			for _, bd := range lo {
				if j.LeftTime >= 0 && (bd.left != j.LeftTime || bd.right != j.RightTime) {
					okLo = false
				}
			}
			if okLo {
				for _, bd := range lo {
					j.LeftTime, j.RightTime = bd.left, bd.right
					if !haveLower || bd.value > lower || bd.value == lower && bd.open {
						lower, j.LowerOpen, haveLower = bd.value, bd.open, true
					}
				}
				untilCol, untilRight = col, rest
				residual = append(residual, rest)
				continue
			}
		}
		// A time bound between the sides' event-time columns.
		if bounds, ok := timeBounds(c, lw, attr); ok {
			for _, bd := range bounds {
				if j.LeftTime >= 0 && (bd.left != j.LeftTime || bd.right != j.RightTime) {
					ok = false
				}
			}
			if ok {
				for _, bd := range bounds {
					j.LeftTime, j.RightTime = bd.left, bd.right
					if bd.lower {
						if !haveLower || bd.value > lower || bd.value == lower && bd.open {
							lower, j.LowerOpen, haveLower = bd.value, bd.open, true
						}
					} else if !haveUpper || bd.value < upper || bd.value == upper && bd.open {
						upper, j.UpperOpen, haveUpper = bd.value, bd.open, true
					}
				}
				continue
			}
		}
		residual = append(residual, c)
	}
	if len(j.LeftKeys) == 0 {
		return nil, errorf(sql.CodeNotSupported, "a join of streams needs an equality between its two sides in ON (a.k = b.k): rows are matched by key")
	}
	j.Residual = and(residual)
	rrel, _ := f.Right.(*sql.FromRelation)
	switch {
	case rrel != nil && rrel.Rel.IsTable && b.opts.Pull && f.AsOf == nil && scannedTable(rrel.Rel):
		// A pull query reads the table's latest versions (latestVersions), a bounded
		// relation joined as any other.
		j.Mode = JoinRegular
	case rrel != nil && rrel.Rel.IsTable && !changelogScan(&Scan{Relation: rrel.Rel, Columns: []int{len(rrel.Rel.Schema) - 1}}):
		// (A table of a changelog connector, postgres-cdc, is a retract changelog joined
		// as any updating input: scanChanges.)
		if err := b.tableJoin(j, f, rrel.Rel, lw); err != nil {
			return nil, err
		}
	case f.AsOf != nil:
		return nil, errorf(sql.CodeNotSupported, "FOR SYSTEM_TIME AS OF joins a table (CREATE TABLE), not a stream")
	case lwin[0] >= 0 && lwin[1] >= 0 && attr(lwin[0]).Window == attr(lwin[1]).Window &&
		attr(rwin[0]+lw).Window == attr(rwin[1]+lw).Window:
		j.Mode, j.LeftEnd, j.RightEnd = JoinWindow, lwin[1], rwin[1]
	case haveLower && !haveUpper && untilCol >= 0 && f.Kind == sql.JoinInner && j.RightTime-lw == untilTimeOf(j, lw):
		// Bounded by the left row's own column: an interval join whose left rows live
		// until the watermark passes that column's value.
		j.Mode, j.Lower, j.Upper, j.HasUntil, j.LeftUntil = JoinInterval, lower, untilUpper, true, untilCol
		j.RightTime -= lw
	case haveLower && haveUpper:
		j.Mode, j.Lower, j.Upper = JoinInterval, lower, upper
		j.RightTime -= lw
		if lower > upper {
			return nil, errorf(sql.CodeInvalidValue, "the join's time bounds are empty: %s - %s must be at least %s and at most %s", rsch[j.RightTime].Name, lsch[j.LeftTime].Name, intervalText(lower), intervalText(upper))
		}
	default:
		// A regular join: exact, keeping each side's rows until they are deleted, unless a
		// state TTL trades exactness for bounded state.
		j.Mode = JoinRegular
		if b.opts.StateTTL > 0 {
			if f.Kind != sql.JoinInner {
				return nil, errorf(sql.CodeNotSupported, "a %s join of streams with a state TTL is not supported (only inner joins forget rows): RESET state_ttl for the exact join, or bound the join by time or windows", strings.ToUpper(f.Kind.String()))
			}
			j.TTL = b.opts.StateTTL
			j.LeftTime, j.RightTime = timeColumn(f.LeftAttrs), timeColumn(f.RightAttrs)
		}
	}
	if lrel, ok := f.Left.(*sql.FromRelation); ok && lrel.Rel.IsTable && j.Mode == JoinRegular && j.TTL <= 0 &&
		scannedTable(lrel.Rel) && !b.opts.Pull {
		// A table on the left of an exact regular join is its latest versions too (a pull
		// query's side is them already: latestVersions).
		t := lrel.Rel
		if err := matchesPrimaryKey(t, j.LeftKeys); err != nil {
			return nil, err
		}
		j.LeftTable, j.LeftOp = t, t.Schema.Index(sql.ChangeColumn)
	}
	switch {
	case j.Mode == JoinRegular && j.TTL <= 0:
		// Rows are kept until deleted, not by time; a table side's version time orders
		// its versions (a version older than its key's current one is not the latest).
		j.LeftTime, j.RightTime = -1, -1
		if j.LeftTable != nil {
			j.LeftTime = j.LeftTable.EventTime
		}
		if j.Table != nil {
			j.RightTime = j.Table.EventTime
		}
	case j.Mode == JoinCurrent:
		// The table's version time orders its versions: the version current when a left
		// row arrives is the key's latest read so far, not its last read.
		j.LeftTime, j.RightTime = -1, -1
		if j.Table != nil {
			j.RightTime = j.Table.EventTime
		}
	case j.Mode == JoinWindow, j.Mode == JoinLookup:
		j.LeftTime, j.RightTime = -1, -1
	case j.Mode == JoinTemporal:
		j.LeftTime = -1
	}
	return j, nil
}

// untilUpper is the Upper of a join bounded by a left column (HasUntil): no constant bound.
const untilUpper = int64(1) << 62

// untilTimeOf is the right time column (in the joined row's numbering, less lw) the
// interval's lower bound was found on.
func untilTimeOf(j *Join, lw int) int { return j.RightTime - lw }

// untilBound recognizes an upper bound of the right side's event time taken from a
// TIMESTAMP column of the left row: R <= L.c (or L.c >= R), or R BETWEEN <lower> AND L.c
// whose lower part is a time bound (returned). It returns the left column and the
// comparison R <= L.c, which stays in the residual.
func untilBound(c sql.Expr, lw int, attr func(int) sql.ColAttr) (lo []timeBound, col int, cmp sql.Expr, ok bool) {
	rightTime := func(e sql.Expr) bool {
		x, ok := e.(*sql.ColumnRef)
		return ok && x.Index >= lw && x.T.Kind == sql.KindTimestamp && attr(x.Index).Time
	}
	leftCol := func(e sql.Expr) (int, bool) {
		x, ok := e.(*sql.ColumnRef)
		if !ok || x.Index >= lw || x.T.Kind != sql.KindTimestamp {
			return 0, false
		}
		return x.Index, true
	}
	le := func(r, l sql.Expr) sql.Expr { return &sql.Call{Func: "<=", Args: []sql.Expr{r, l}, T: sql.TypeBool} }
	switch x := c.(type) {
	case *sql.Call:
		if len(x.Args) != 2 {
			return nil, 0, nil, false
		}
		a, b := x.Args[0], x.Args[1]
		switch x.Func {
		case "<=":
		case ">=":
			a, b = b, a
		default:
			return nil, 0, nil, false
		}
		if lc, ok := leftCol(b); ok && rightTime(a) {
			return nil, lc, c, true
		}
	case *sql.Between:
		if x.Not || !rightTime(x.Arg) {
			return nil, 0, nil, false
		}
		lc, ok := leftCol(x.Hi)
		if !ok {
			return nil, 0, nil, false
		}
		bounds, ok := timeBounds(&sql.Call{Func: ">=", Args: []sql.Expr{x.Arg, x.Lo}, T: sql.TypeBool}, lw, attr)
		if !ok {
			return nil, 0, nil, false
		}
		return bounds, lc, le(x.Arg, x.Hi), true
	}
	return nil, 0, nil, false
}

// timeColumn is the first event-time column of a side, or -1.
func timeColumn(attrs []sql.ColAttr) int {
	for i, a := range attrs {
		if a.Time {
			return i
		}
	}
	return -1
}

// tableJoin plans a join whose right side is a table: temporal (FOR SYSTEM_TIME AS OF the
// left's event time), regular (no AS OF: each key's latest version, the join's rows
// changing as the table does), or a lookup (a table of an external database, or AS OF a
// processing time).
func (b *logicalBuilder) tableJoin(j *Join, f *sql.FromJoin, t *sql.Relation, lw int) error {
	j.Table = t
	if f.Kind == sql.JoinRight || f.Kind == sql.JoinFull {
		return errorf(sql.CodeNotSupported, "a join with table %s keeps the stream's rows: INNER or LEFT JOIN only", t.Name)
	}
	if err := matchesPrimaryKey(t, j.RightKeys); err != nil {
		return err
	}
	j.RightOp = t.Schema.Index(sql.ChangeColumn)
	if t.Connector() != "broker" && t.Connector() != "kafka" && t.Connector() != "file" {
		return lookupJoin(j, f, t, lw)
	}
	asOf := -1
	if f.AsOf != nil {
		if c, ok := f.AsOf.(*sql.ColumnRef); ok && c.Index < lw && c.Index < len(f.LeftAttrs) && f.LeftAttrs[c.Index].Time {
			asOf = c.Index
		}
	}
	if asOf < 0 && t.Connector() == "file" {
		// A file is bounded: in processing time it is read whole when the job starts and
		// looked up by key (a side input), rather than raced against the stream. Its
		// deletes are applied as it is read: the join reads no change column.
		j.RightOp = -1
		return lookupJoin(j, f, t, lw)
	}
	if asOf >= 0 {
		if t.EventTime < 0 {
			return errorf(sql.CodeNotSupported, "FOR SYSTEM_TIME AS OF %s needs table %s to declare its version time (WATERMARK FOR ts AS ...)", f.AsOf, t.Name)
		}
		j.Mode, j.AsOf, j.RightTime = JoinTemporal, asOf, t.EventTime
		return nil
	}
	if f.AsOf != nil {
		// AS OF a processing time: the version current when the left row arrives.
		j.Mode = JoinCurrent
		return nil
	}
	j.Mode = JoinRegular
	return nil
}

// scannedTable reports whether table t is read by scanning its changelog (a topic or a file),
// not looked up in a database.
func scannedTable(t *sql.Relation) bool {
	switch t.Connector() {
	case "broker", "kafka", "file":
		return true
	}
	return false
}

// matchesPrimaryKey checks that a join's keys of table t's side are its primary key.
func matchesPrimaryKey(t *sql.Relation, keys []sql.Expr) error {
	if len(keys) != len(t.PrimaryKey) {
		return errorf(sql.CodeNotSupported, "a join with table %s matches its primary key (%s): ON must equate every key column, and only those", t.Name, pkNames(t))
	}
	for _, k := range keys {
		c, ok := unwrapCast(k).(*sql.ColumnRef)
		if !ok || !containsInt(t.PrimaryKey, c.Index) {
			return errorf(sql.CodeNotSupported, "a join with table %s matches its primary key (%s): %s is not a key column", t.Name, pkNames(t), k)
		}
	}
	return nil
}

func pkNames(t *sql.Relation) string {
	var names []string
	for _, c := range t.PrimaryKey {
		names = append(names, t.Schema[c].Name)
	}
	return strings.Join(names, ", ")
}

func unwrapCast(e sql.Expr) sql.Expr {
	if c, ok := e.(*sql.Cast); ok {
		return c.Arg
	}
	return e
}

func containsInt(list []int, x int) bool {
	for _, v := range list {
		if v == x {
			return true
		}
	}
	return false
}

// matchKeyTypes gives both sides of a join key one type, so equal values hash alike on
// both sides of the exchange.
func matchKeyTypes(l, r sql.Expr) (sql.Expr, sql.Expr, error) {
	lt, rt := l.Type(), r.Type()
	if lt == rt || lt.Kind == rt.Kind && lt.Kind != sql.KindDecimal {
		return l, r, nil
	}
	t, ok := joinKeyType(lt, rt)
	if !ok {
		return nil, nil, errorf(sql.CodeTypeMismatch, "join key %s = %s compares %s with %s", l, r, lt, rt)
	}
	if lt != t {
		l = &sql.Cast{Arg: l, T: t}
	}
	if rt != t {
		r = &sql.Cast{Arg: r, T: t}
	}
	return l, r, nil
}

func joinKeyType(a, b sql.Type) (sql.Type, bool) {
	switch {
	case a.Kind.IsNumeric() && b.Kind.IsNumeric():
		switch {
		case a.Kind == sql.KindDouble || b.Kind == sql.KindDouble:
			return sql.TypeDouble, true
		case a.Kind == sql.KindDecimal || b.Kind == sql.KindDecimal:
			return sql.Type{Kind: sql.KindDecimal}, true
		}
		return sql.TypeBigInt, true
	case a.Kind == b.Kind:
		return a, true
	}
	return a, false
}

// timeBound is one bound of right - left derived from a comparison.
type timeBound struct {
	left, right int // joined-row columns
	value       int64
	lower, open bool
}

// timeBounds reads a conjunct that bounds one side's event time by the other's: A op B
// with A and B each a time column of one side plus or minus an interval, or X BETWEEN Y
// AND Z. It returns the bounds on right - left.
func timeBounds(c sql.Expr, lw int, attr func(int) sql.ColAttr) ([]timeBound, bool) {
	var term func(e sql.Expr) (col int, off int64, ok bool)
	term = func(e sql.Expr) (col int, off int64, ok bool) {
		switch x := e.(type) {
		case *sql.ColumnRef:
			if x.T.Kind != sql.KindTimestamp || !attr(x.Index).Time {
				return 0, 0, false
			}
			return x.Index, 0, true
		case *sql.Call:
			if len(x.Args) != 2 || (x.Func != "+" && x.Func != "-") {
				return 0, 0, false
			}
			col, off, ok := term(x.Args[0])
			lit, isLit := x.Args[1].(*sql.Literal)
			if !ok || !isLit || lit.V.K != sql.KindInterval {
				return 0, 0, false
			}
			if x.Func == "+" {
				return col, off + lit.V.I, true
			}
			return col, off - lit.V.I, true
		}
		return 0, 0, false
	}
	// cmp: A op B as bounds on right - left.
	cmp := func(op string, a, b sql.Expr) ([]timeBound, bool) {
		ca, oa, ok1 := term(a)
		cb, ob, ok2 := term(b)
		if !ok1 || !ok2 || (ca < lw) == (cb < lw) {
			return nil, false
		}
		// Make A the right side: R + oa op L + ob  ->  R - L op ob - oa.
		if ca < lw {
			ca, cb, oa, ob = cb, ca, ob, oa
			op = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]
		}
		v := ob - oa
		switch op {
		case ">=":
			return []timeBound{{cb, ca, v, true, false}}, true
		case ">":
			return []timeBound{{cb, ca, v, true, true}}, true
		case "<=":
			return []timeBound{{cb, ca, v, false, false}}, true
		case "<":
			return []timeBound{{cb, ca, v, false, true}}, true
		case "=":
			return []timeBound{{cb, ca, v, true, false}, {cb, ca, v, false, false}}, true
		}
		return nil, false
	}
	switch x := c.(type) {
	case *sql.Call:
		if len(x.Args) == 2 {
			return cmp(x.Func, x.Args[0], x.Args[1])
		}
	case *sql.Between:
		if x.Not {
			return nil, false
		}
		lo, ok1 := cmp(">=", x.Arg, x.Lo)
		hi, ok2 := cmp("<=", x.Arg, x.Hi)
		if ok1 && ok2 {
			return append(lo, hi...), true
		}
	}
	return nil, false
}
