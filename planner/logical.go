package planner

import (
	"strconv"
	"strings"

	"rsql/connectors/options"
	"rsql/sql"
)

// LogicalNode is one node of a logical plan. Plans are immutable trees: a rewrite builds new
// nodes with WithChildren and never mutates a node it was given. Every node produces rows whose
// layout Schema describes; expressions of a node are over its input's Schema.
type LogicalNode interface {
	// Schema is the layout of the rows the node produces.
	Schema() sql.Schema
	Children() []LogicalNode
	// WithChildren returns a copy of the node over the given inputs (same count as Children).
	WithChildren(children []LogicalNode) LogicalNode
	// String describes the node alone (not its inputs), for EXPLAIN.
	String() string
}

// Scan reads a stream. Its rows hold Columns (indexes into Relation.Schema), in that order.
type Scan struct {
	Relation *sql.Relation
	Columns  []int
	// Snapshot: the relation is read up to its current end, once (a pull query's table).
	Snapshot bool
}

// Filter keeps the rows for which Pred is TRUE.
type Filter struct {
	Input LogicalNode
	Pred  sql.Expr
}

// Project computes one output column per expression.
type Project struct {
	Input LogicalNode
	Exprs []sql.Expr
	Names []string
}

// WindowAssign appends window_start and window_end to each input row: one output row per
// window the row's time falls in (a table-valued TUMBLE or HOP selected without aggregation).
// Window.TimeCol is an index into the input row.
type WindowAssign struct {
	Input  LogicalNode
	Window sql.Window
}

// Aggregate groups its input by Keys (and by window when Window is set) and computes Aggs.
// Its rows are: the key values, then window_start and window_end when windowed, then one
// value per aggregate. Window.TimeCol (and EndCol for a WindowGiven) index the input row.
// TTL and EmitNew are those of AggregateNode.
type Aggregate struct {
	Input   LogicalNode
	Keys    []sql.Expr
	Window  *sql.Window
	Aggs    []sql.AggCall
	Emit    EmitMode
	TTL     int64
	EmitNew bool
	// Changes is how its rows change (set by Changelog): an updating aggregation's row ends
	// with the change column. Retracting: its input is updating (its change column is the
	// input row's last).
	Changes    ChangeMode
	Retracting bool
}

// Limit skips Offset rows then stops after N more (N < 0: no limit).
type Limit struct {
	Input  LogicalNode
	N      int64
	Offset int64
}

// Union passes the rows of every input (UNION ALL); the inputs' rows have the layout Out.
type Union struct {
	Inputs []LogicalNode
	Out    sql.Schema
}

// TopNMode says when a TopN emits.
type TopNMode uint8

const (
	// TopNWindow: partitions hold one window (its window_end at column WindowEnd); the
	// first N rows of each are emitted, numbered, when the window closes.
	TopNWindow TopNMode = iota
	// DedupFirst: the first row of each partition by the event time at column Time,
	// emitted once the watermark passes it.
	DedupFirst
	// DedupLast: the last row of each partition by the event time at column Time: each
	// row later than the partition's current one is emitted as its new value.
	DedupLast
	// TopNBounded: the input ends; every partition's first N rows are emitted at its end.
	TopNBounded
	// TopNChanges: partitions hold the whole stream; whenever a partition's first N rows
	// change, the rows that left are deleted and the rows that entered inserted (a Retract
	// changelog, docs/sql.md "Changelogs"). The input may be updating.
	TopNChanges
	// TableVersions: a table's changelog read by a continuous query becomes its latest
	// versions. Partitions are the primary key; the input row ends with the table's change
	// column. A version whose time (column Time; -1: none, every version is later) is not
	// older than its key's current one replaces it: the current row is deleted and the new
	// one inserted, or only deleted when the new version is a delete. The output is a
	// Retract changelog keyed by the primary key, its row the input's with the change
	// column rewritten.
	TableVersions
)

func (m TopNMode) String() string {
	return [...]string{"window", "dedup-first", "dedup-last", "bounded", "changes", "versions"}[m]
}

// TopN keeps the first N rows of each partition (rows with equal Partition values) in
// Order, and writes each kept row's number (1..N) into column RowNumber (when >= 0). Its
// rows have its input's layout.
type TopN struct {
	Input     LogicalNode
	Partition []sql.Expr
	Order     []sql.SortKey
	N         int64
	RowNumber int
	Mode      TopNMode
	WindowEnd int   // TopNWindow
	Time      int   // DedupFirst, DedupLast
	TTL       int64 // DedupFirst, DedupLast: forget a partition this long behind the watermark
	// Latest: among rows equal in Order the one read last comes first (a table's versions).
	Latest bool
	// Changes is how its rows change (set by Changelog; TopNChanges: Retract, its row then
	// ends with the change column); Retracting: its input is updating (TopNChanges only).
	Changes    ChangeMode
	Retracting bool
	// AtSource: a table's latest versions kept right above the scan of its source's
	// changes, in the source's one split (no exchange): its input may hold a truncation of
	// the table (sql.OpTruncate; truncatingScan).
	AtSource bool
}

// Over computes aggregates over a window of rows: for each row, each call of Calls over
// the rows of its partition (equal Partition values) from Preceding rows before it to it,
// in Order (rows equal in Order are ordered by their values), written into the row's
// column Calls[i].Col (AGG(x) OVER (PARTITION BY ... ORDER BY ... ROWS BETWEEN n PRECEDING
// AND CURRENT ROW)). Its rows have its input's layout; the calls' arguments are over it.
//
// Over a bounded input (Bounded) every row is emitted once, with its value, when the input
// ends. Otherwise its rows change (Changes is Retract, set by Changelog): a row that
// arrives or leaves changes the values of the rows after it in its frame, whose old rows
// are deleted and new ones inserted; Retracting: the input is updating.
type Over struct {
	Input      LogicalNode
	Partition  []sql.Expr
	Order      []sql.SortKey
	Preceding  int64
	Calls      []sql.OverCall
	Bounded    bool
	Changes    ChangeMode
	Retracting bool
}

// Sort orders the rows of a bounded input by Keys (nulls last ascending, first
// descending, as PostgreSQL); it emits them all when the input ends.
type Sort struct {
	Input LogicalNode
	Keys  []sql.SortKey
	// Changes (set by Changelog) is the mode of an updating input, whose changes the sort
	// applies (a retract input's deletes remove an equal row, an upsert input's rows
	// replace their Key's): it emits the final rows, without the change column.
	Changes ChangeMode
	Key     []int
}

// Sink delivers the rows: to the stream named Stream, or to the client when Stream is "".
// Changes and Key (set by Changelog) say how its rows change and, for an updating input,
// the columns that key them (the change column is the row's last).
type Sink struct {
	Input   LogicalNode
	Stream  string
	Changes ChangeMode
	Key     []int
	// Multiset: the sink holds the rows as a multiset (a materialized view), so a retract
	// changelog without a key can go there (a delete takes back one equal row).
	Multiset bool
}

// Schema implementations.

func (s *Scan) Schema() sql.Schema {
	out := make(sql.Schema, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = s.Relation.Schema[c]
	}
	return out
}
func (f *Filter) Schema() sql.Schema { return f.Input.Schema() }
func (p *Project) Schema() sql.Schema {
	out := make(sql.Schema, len(p.Exprs))
	for i, e := range p.Exprs {
		out[i] = sql.Column{Name: p.Names[i], Type: e.Type()}
	}
	return out
}
func (w *WindowAssign) Schema() sql.Schema {
	in := w.Input.Schema()
	out := make(sql.Schema, 0, len(in)+2)
	out = append(out, in...)
	return append(out, windowColumns...)
}
func (a *Aggregate) Schema() sql.Schema {
	out := make(sql.Schema, 0, len(a.Keys)+2+len(a.Aggs))
	for _, k := range a.Keys {
		out = append(out, sql.Column{Name: exprName(k), Type: k.Type()})
	}
	if a.Window != nil {
		out = append(out, windowColumns...)
	}
	for _, g := range a.Aggs {
		out = append(out, sql.Column{Name: aggText(g), Type: g.T})
	}
	if a.Changes != AppendOnly {
		out = append(out, changeColumn)
	}
	return out
}

// changeColumn is the change column of an updating relation's rows (docs/sql.md,
// "Changelogs"): NULL for an insert, "delete" for a delete.
var changeColumn = sql.Column{Name: sql.ChangeColumn, Type: sql.TypeVarchar}

func (l *Limit) Schema() sql.Schema { return l.Input.Schema() }
func (u *Union) Schema() sql.Schema { return u.Out }
func (t *TopN) Schema() sql.Schema {
	in := t.Input.Schema()
	if t.Changes != AppendOnly && !t.Retracting && t.Mode != TableVersions {
		return append(append(sql.Schema{}, in...), changeColumn)
	}
	return in
}
func (s *Sort) Schema() sql.Schema {
	in := s.Input.Schema()
	if s.Changes != AppendOnly {
		return in[:len(in)-1]
	}
	return in
}
func (o *Over) Schema() sql.Schema {
	in := o.Input.Schema()
	switch {
	case o.Changes != AppendOnly && !o.Retracting:
		return append(append(sql.Schema{}, in...), changeColumn)
	case o.Changes == AppendOnly && o.Retracting:
		// Over a bounded input the rows are final: the input's changes are applied.
		return in[:len(in)-1]
	}
	return in
}
func (s *Sink) Schema() sql.Schema { return s.Input.Schema() }

var windowColumns = sql.Schema{
	{Name: "window_start", Type: sql.TypeTimestamp},
	{Name: "window_end", Type: sql.TypeTimestamp},
}

func exprName(e sql.Expr) string {
	if c, ok := e.(*sql.ColumnRef); ok {
		return c.Name
	}
	return e.String()
}

// Children implementations.

func (s *Scan) Children() []LogicalNode         { return nil }
func (f *Filter) Children() []LogicalNode       { return []LogicalNode{f.Input} }
func (p *Project) Children() []LogicalNode      { return []LogicalNode{p.Input} }
func (w *WindowAssign) Children() []LogicalNode { return []LogicalNode{w.Input} }
func (a *Aggregate) Children() []LogicalNode    { return []LogicalNode{a.Input} }
func (l *Limit) Children() []LogicalNode        { return []LogicalNode{l.Input} }
func (u *Union) Children() []LogicalNode        { return u.Inputs }
func (t *TopN) Children() []LogicalNode         { return []LogicalNode{t.Input} }
func (s *Sort) Children() []LogicalNode         { return []LogicalNode{s.Input} }
func (o *Over) Children() []LogicalNode         { return []LogicalNode{o.Input} }
func (s *Sink) Children() []LogicalNode         { return []LogicalNode{s.Input} }

// WithChildren implementations.

func (s *Scan) WithChildren(_ []LogicalNode) LogicalNode { return s }
func (f *Filter) WithChildren(c []LogicalNode) LogicalNode {
	n := *f
	n.Input = c[0]
	return &n
}
func (p *Project) WithChildren(c []LogicalNode) LogicalNode {
	n := *p
	n.Input = c[0]
	return &n
}
func (w *WindowAssign) WithChildren(c []LogicalNode) LogicalNode {
	n := *w
	n.Input = c[0]
	return &n
}
func (a *Aggregate) WithChildren(c []LogicalNode) LogicalNode {
	n := *a
	n.Input = c[0]
	return &n
}
func (l *Limit) WithChildren(c []LogicalNode) LogicalNode {
	n := *l
	n.Input = c[0]
	return &n
}
func (u *Union) WithChildren(c []LogicalNode) LogicalNode {
	n := *u
	n.Inputs = append([]LogicalNode(nil), c...)
	return &n
}
func (t *TopN) WithChildren(c []LogicalNode) LogicalNode {
	n := *t
	n.Input = c[0]
	return &n
}
func (o *Over) WithChildren(c []LogicalNode) LogicalNode {
	n := *o
	n.Input = c[0]
	return &n
}
func (s *Sort) WithChildren(c []LogicalNode) LogicalNode {
	n := *s
	n.Input = c[0]
	return &n
}
func (s *Sink) WithChildren(c []LogicalNode) LogicalNode {
	n := *s
	n.Input = c[0]
	return &n
}

// String implementations (one line per node, inputs not included).

func (s *Scan) String() string {
	return "Scan " + s.Relation.Name + " columns=[" + strings.Join(s.Schema().Names(), ", ") + "]"
}
func (f *Filter) String() string { return "Filter " + f.Pred.String() }
func (p *Project) String() string {
	parts := make([]string, len(p.Exprs))
	for i, e := range p.Exprs {
		parts[i] = aliased(e, p.Names[i])
	}
	return "Project " + strings.Join(parts, ", ")
}
func (w *WindowAssign) String() string {
	return "WindowAssign " + windowText(w.Window, w.Input.Schema())
}
func (a *Aggregate) String() string {
	var b strings.Builder
	b.WriteString("Aggregate keys=[")
	b.WriteString(joinExprs(a.Keys))
	b.WriteString("]")
	if a.Window != nil {
		b.WriteString(" window=" + windowText(*a.Window, a.Input.Schema()))
	}
	b.WriteString(" aggs=[")
	for i, g := range a.Aggs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(aggText(g))
	}
	b.WriteString("] emit=" + a.Emit.String())
	if a.TTL > 0 {
		b.WriteString(" state-ttl=" + intervalText(a.TTL))
	}
	if a.EmitNew {
		b.WriteString(" emit-new")
	}
	if a.Retracting {
		b.WriteString(" retracting")
	}
	if a.Changes != AppendOnly {
		b.WriteString(" changes=" + a.Changes.String())
	}
	return b.String()
}
func (l *Limit) String() string {
	s := "Limit " + strconv.FormatInt(l.N, 10)
	if l.N < 0 {
		s = "Limit all"
	}
	if l.Offset > 0 {
		s += " offset " + strconv.FormatInt(l.Offset, 10)
	}
	return s
}
func (u *Union) String() string {
	return "Union all columns=[" + strings.Join(u.Out.Names(), ", ") + "]"
}
func (t *TopN) String() string {
	s := "TopN " + strconv.FormatInt(t.N, 10) + " mode=" + t.Mode.String() + " partition=[" + joinExprs(t.Partition) + "] order=[" + sortText(t.Order) + "]"
	if t.Latest {
		s += " ties=last-read"
	}
	if t.Retracting {
		s += " retracting"
	}
	return s
}
func (s *Sort) String() string {
	if s.Changes != AppendOnly && len(s.Keys) == 0 {
		return "Fold " + s.Changes.String()
	}
	if s.Changes != AppendOnly {
		return "Sort " + sortText(s.Keys) + " folding " + s.Changes.String()
	}
	return "Sort " + sortText(s.Keys)
}
func (o *Over) String() string {
	s := "Over " + overCallsText(o.Calls) + " " + overWindowText(o.Partition, o.Order, o.Preceding)
	if o.Bounded {
		s += " bounded"
	}
	if o.Retracting {
		s += " retracting"
	}
	return s
}

func overCallsText(calls []sql.OverCall) string {
	parts := make([]string, len(calls))
	for i, c := range calls {
		parts[i] = aggText(c.Agg)
	}
	return strings.Join(parts, ", ")
}

func overWindowText(part []sql.Expr, order []sql.SortKey, preceding int64) string {
	return "partition=[" + joinExprs(part) + "] order=[" + sortText(order) + "] rows=" + strconv.FormatInt(preceding, 10) + "-preceding"
}

func sortText(keys []sql.SortKey) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k.Expr.String()
		if k.Desc {
			parts[i] += " DESC"
		}
		switch k.Nulls {
		case sql.NullsFirst:
			parts[i] += " NULLS FIRST"
		case sql.NullsLast:
			parts[i] += " NULLS LAST"
		}
	}
	return strings.Join(parts, ", ")
}
func (s *Sink) String() string {
	name := s.Stream
	if name == "" {
		name = "client"
	}
	out := "Sink " + name + " columns=[" + strings.Join(s.Schema().Names(), ", ") + "]"
	if s.Changes != AppendOnly {
		out += " changes=" + s.Changes.String()
	}
	return out
}

func aliased(e sql.Expr, name string) string {
	t := e.String()
	if name == "" || strings.EqualFold(name, t) {
		return t
	}
	return t + " AS " + name
}

func joinExprs(es []sql.Expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.String()
	}
	return strings.Join(parts, ", ")
}

// aggText renders an aggregate call as SQL text, e.g. SUM(amount) or COUNT(DISTINCT user_id).
func aggText(g sql.AggCall) string {
	switch {
	case isStar(g):
		return "COUNT(*)"
	case g.Arg == nil:
		return g.Func + "()"
	case g.Distinct:
		return g.Func + "(DISTINCT " + g.Arg.String() + ")"
	}
	return g.Func + "(" + g.Arg.String() + ")"
}

// isStar reports whether g is COUNT(*) (also an argument-less call of an aggregate that
// takes *).
func isStar(g sql.AggCall) bool {
	if g.Star {
		return true
	}
	def, ok := g.Aggregate()
	return g.Arg == nil && ok && def.Star
}

// windowText renders a window over rows of schema in, e.g. TUMBLE(ts, INTERVAL '10' SECOND).
func windowText(w sql.Window, in sql.Schema) string {
	col := "#" + strconv.Itoa(w.TimeCol)
	if w.TimeCol >= 0 && w.TimeCol < len(in) {
		col = in[w.TimeCol].Name
	}
	switch w.Kind {
	case sql.WindowTumble:
		return "TUMBLE(" + col + ", " + intervalText(w.Size) + ")"
	case sql.WindowHop:
		return "HOP(" + col + ", " + intervalText(w.Slide) + ", " + intervalText(w.Size) + ")"
	case sql.WindowSession:
		return "SESSION(" + col + ", " + intervalText(w.Gap) + ")"
	case sql.WindowGiven:
		end := "#" + strconv.Itoa(w.EndCol)
		if w.EndCol >= 0 && w.EndCol < len(in) {
			end = in[w.EndCol].Name
		}
		return "WINDOW(" + col + ", " + end + ")"
	}
	return "WINDOW?(" + col + ")"
}

func intervalText(ms int64) string { return sql.NewLiteral(sql.Interval(ms)).String() }

// Logical builds the logical plan of a bound query, unoptimized, with no session options
// (see LogicalWith).
func Logical(q *sql.Query) (LogicalNode, error) { return LogicalWith(q, Options{}) }

// LogicalWith builds the logical plan of a bound query, unoptimized. Each query block is
// its FROM (a Scan, the plan of a derived table or CTE, a Union of queries), then window
// assignment (table-valued TUMBLE/HOP without aggregation), WHERE, aggregation, HAVING,
// the select list, DISTINCT, ORDER BY and LIMIT; a Sink to the client ends the plan. The
// aggregate of a window (a table function's, or the window_start and window_end of the
// FROM grouped together) assigns or reads windows itself, so window_start/window_end listed
// in GROUP BY become the aggregate's window, not keys. A derived table with ROW_NUMBER()
// becomes a TopN, with the enclosing query's filter on the row number.
func LogicalWith(q *sql.Query, opts Options) (LogicalNode, error) {
	if q == nil || q.From == nil {
		return nil, errorf(sql.CodeInternal, "query has no FROM relation")
	}
	b := &logicalBuilder{opts: opts}
	n, err := b.query(q, nil)
	if err != nil {
		return nil, err
	}
	return &Sink{Input: n}, nil
}

type logicalBuilder struct {
	opts Options
}

// from builds the plan of a FROM, and the column attributes of its rows. where is the
// enclosing query's WHERE: the filter on a derived table's row number is taken from it (the
// rest is returned).
func (b *logicalBuilder) from(f sql.From, where sql.Expr) (LogicalNode, sql.Expr, error) {
	switch f := f.(type) {
	case *sql.FromRelation:
		rel := f.Rel
		all := make([]int, len(rel.Schema))
		for i := range all {
			all[i] = i
		}
		if b.opts.Pull && rel.IsTable {
			return latestVersions(rel, all), where, nil
		}
		if v := tableVersions(rel, all); v != nil {
			return v, where, nil
		}
		return &Scan{Relation: rel, Columns: all}, where, nil
	case *sql.FromNothing:
		return &Scan{Relation: constantRelation, Columns: nil}, where, nil
	case *sql.FromQuery:
		if f.Query.RowNumber != nil {
			return b.topN(f.Query, where)
		}
		n, err := b.query(f.Query, nil)
		return n, where, err
	case *sql.FromJoin:
		left, _, err := b.joinSide(f.Left)
		if err != nil {
			return nil, nil, err
		}
		right, _, err := b.joinSide(f.Right)
		if err != nil {
			return nil, nil, err
		}
		j, err := b.join(f, left, right)
		if err != nil {
			return nil, nil, err
		}
		// A table the join does not read as a table itself (on the left of a join that is
		// not an exact regular one) is its latest versions, as in a FROM of its own; the
		// layout of its rows stays the same.
		if jn, ok := j.(*Join); ok && jn.LeftTable == nil && !b.opts.Pull {
			if lrel, ok := f.Left.(*sql.FromRelation); ok {
				if v := tableVersionsOf(lrel.Rel, jn.Left); v != nil {
					jn.Left = v
				}
			}
		}
		return j, where, err
	case *sql.FromLateral:
		in, _, err := b.from(f.Input, nil)
		if err != nil {
			return nil, nil, err
		}
		return &TableFunc{Input: in, Func: f.Func, Args: f.Args, Cols: f.Cols, Outer: f.Outer, Ordinality: f.Ordinality, Name: f.Name}, where, nil
	case *sql.FromUnion:
		u := &Union{Out: f.Schema()}
		for _, in := range f.Inputs {
			n, err := b.query(in, nil)
			if err != nil {
				return nil, nil, err
			}
			// Cast each input's columns to the union's types.
			sch := n.Schema()
			var exprs []sql.Expr
			var names []string
			cast := false
			for i, t := range f.Types {
				var e sql.Expr = &sql.ColumnRef{Index: i, Name: sch[i].Name, T: sch[i].Type}
				if sch[i].Type != t && sch[i].Type.Kind != sql.KindNull {
					e, cast = &sql.Cast{Arg: e, T: t}, true
				} else if sch[i].Type.Kind == sql.KindNull {
					e, cast = &sql.Literal{V: sql.Null, T: t}, true
				}
				exprs = append(exprs, e)
				names = append(names, f.Schema()[i].Name)
			}
			if cast {
				n = &Project{Input: n, Exprs: exprs, Names: names}
			}
			u.Inputs = append(u.Inputs, n)
		}
		return u, where, nil
	}
	return nil, nil, errorf(sql.CodeInternal, "unknown FROM %T", f)
}

// constantRelation is the FROM of a query without FROM: one empty row.
var constantRelation = &sql.Relation{Name: "", EventTime: -1, Options: map[string]string{"connector": "values"}}

// query builds one query block; extra are expressions over the same row as the select list,
// appended to the output as hidden columns (a TopN's keys).
func (b *logicalBuilder) query(q *sql.Query, extra []sql.Expr) (LogicalNode, error) {
	if len(q.Names) != len(q.Select) {
		return nil, errorf(sql.CodeInternal, "query has %d select expressions but %d names", len(q.Select), len(q.Names))
	}
	if q.Over != nil {
		if len(extra) > 0 {
			return nil, errorf(sql.CodeNotSupported, "ROW_NUMBER() over a query with aggregates OVER a window is not supported")
		}
		return b.over(q)
	}
	node, where, err := b.from(q.From, q.Where)
	if err != nil {
		return nil, err
	}
	n := len(node.Schema())
	fromName := "the subquery"
	if r, ok := q.From.(*sql.FromRelation); ok {
		fromName = r.Rel.Name
	}

	w := q.Window
	if w != nil {
		if w.TimeCol < 0 || w.TimeCol >= n || w.Kind == sql.WindowGiven && (w.EndCol < 0 || w.EndCol >= n) {
			return nil, errorf(sql.CodeInternal, "window time column #%d is outside %s", w.TimeCol, fromName)
		}
		if err := checkWindow(w); err != nil {
			return nil, err
		}
	}
	// tvfCols is true when the input row carries window_start/window_end at n, n+1.
	// (A binder may also refer to a SESSION's window_start/window_end at n, n+1 in GROUP BY.)
	if w != nil {
		if j := timelessJoin(node); j != nil {
			return nil, errorf(sql.CodeNotSupported, "a %s window over %s: its rows come when their second side arrives, so their times are not event times and rows would be late (as in Flink SQL); window each input before joining, or bound the join by time (an interval join)", windowName(w.Kind), joinWhat(j))
		}
	}
	tvfCols := w != nil && w.TVF
	isWindowCol := func(i int) bool {
		switch {
		case tvfCols:
			return i == n || i == n+1
		case w != nil && w.Kind == sql.WindowGiven:
			return i == w.TimeCol || i == w.EndCol
		}
		return false
	}
	windowPos := func(i int) int { // 0 for window_start, 1 for window_end
		if tvfCols {
			return i - n
		}
		if i == w.EndCol {
			return 1
		}
		return 0
	}
	sel := append(append([]sql.Expr(nil), q.Select...), extra...)
	names := append([]string(nil), q.Names...)
	for _, e := range extra {
		names = append(names, exprName(e))
	}

	if !q.Aggregated {
		if w != nil {
			if !w.TVF || w.Kind == sql.WindowSession {
				return nil, errorf(sql.CodeNotSupported, "%s windows need an aggregation (GROUP BY)", windowName(w.Kind))
			}
			node = &WindowAssign{Input: node, Window: *w}
		}
		if where != nil {
			node = &Filter{Input: node, Pred: where}
		}
		node = &Project{Input: node, Exprs: sel, Names: names}
	} else {
		// A WHERE conjunct that reads only window_start/window_end filters whole windows,
		// and the window is part of every group's identity: it becomes a filter over the
		// aggregate row (windowPreds). One that mixes window and other columns cannot be
		// evaluated before the aggregate assigns windows.
		var rowPreds, windowPreds []sql.Expr
		if where != nil {
			for _, p := range conjuncts(where) {
				win, other := false, false
				for _, c := range sql.ColumnsUsed(p) {
					if isWindowCol(c) {
						win = true
					} else {
						other = true
					}
				}
				switch {
				case win && other && tvfCols:
					return nil, errorf(sql.CodeNotSupported, "WHERE condition %s mixes window_start/window_end with other columns of an aggregated window; use HAVING", p)
				case win && tvfCols:
					windowPreds = append(windowPreds, p)
				default:
					rowPreds = append(rowPreds, p)
				}
			}
		}
		node = withFilter(node, rowPreds)
		emit := sql.EmitChanges
		switch q.Emit {
		case sql.EmitDefault:
			if w != nil {
				emit = sql.EmitOnClose
			} else if bounded(node) {
				// A GROUP BY over a bounded input (a view's rows in a pull query, files)
				// answers once, like PostgreSQL: each group when the input ends.
				emit = sql.EmitOnClose
			}
		case sql.EmitOnClose:
			if w == nil {
				return nil, errorf(sql.CodeNotSupported, "EMIT ON WINDOW CLOSE needs a window")
			}
			emit = sql.EmitOnClose
		}
		// The aggregate row of the query: GroupBy values, [ws, we], aggs. Ours drops the
		// window columns from the keys; m maps the query's layout to ours.
		var keys []sql.Expr
		nk := 0
		for _, k := range q.GroupBy {
			if c, ok := k.(*sql.ColumnRef); !ok || !isWindowCol(c.Index) {
				nk++
			}
		}
		width := len(q.GroupBy) + len(q.Aggs)
		if w != nil {
			width += 2
		}
		m := make([]int, width)
		for i, k := range q.GroupBy {
			if c, ok := k.(*sql.ColumnRef); ok && isWindowCol(c.Index) {
				m[i] = nk + windowPos(c.Index)
				continue
			}
			for _, c := range sql.ColumnsUsed(k) {
				if isWindowCol(c) && tvfCols {
					return nil, errorf(sql.CodeNotSupported, "GROUP BY expression %s over window_start/window_end", k)
				}
			}
			m[i] = len(keys)
			keys = append(keys, k)
		}
		at := len(q.GroupBy)
		if w != nil {
			m[at], m[at+1] = nk, nk+1
			at += 2
			nk += 2
		}
		aggs := make([]sql.AggCall, 0, len(q.Aggs))
		for i, g := range q.Aggs {
			if c, ok := g.Arg.(*sql.ColumnRef); ok && tvfCols && w != nil && isWindowCol(c.Index) && !g.Distinct {
				// The group's own window bound: the same in every row of the group.
				switch strings.ToUpper(g.Func) {
				case "MIN", "MAX":
					m[at+i] = nk - 2 + windowPos(c.Index)
					continue
				case "COUNT":
					g.Arg, g.Star = nil, true // never NULL
				}
			}
			m[at+i] = nk + len(aggs)
			if g.Arg != nil && tvfCols {
				for _, c := range sql.ColumnsUsed(g.Arg) {
					if isWindowCol(c) {
						return nil, errorf(sql.CodeNotSupported, "aggregate %s over window_start/window_end", aggText(g))
					}
				}
			}
			t, err := aggResultType(g)
			if err != nil {
				return nil, err
			}
			g.T = t
			aggs = append(aggs, g)
		}
		var win *sql.Window
		if w != nil {
			c := *w
			win = &c
		}
		agg := &Aggregate{Input: node, Keys: keys, Window: win, Aggs: aggs, Emit: emit}
		if win == nil && emit == sql.EmitChanges && !bounded(node) {
			agg.TTL = b.opts.StateTTL
		}
		node = agg
		var post []sql.Expr
		if len(windowPreds) > 0 {
			wm := make([]int, n+2)
			for i := range wm {
				wm[i] = -1
			}
			wm[n], wm[n+1] = len(keys), len(keys)+1
			for _, p := range windowPreds {
				r, err := sql.RemapColumns(p, wm)
				if err != nil {
					return nil, wrapf(err, "WHERE")
				}
				post = append(post, r)
			}
		}
		if q.Having != nil {
			h, err := sql.RemapColumns(q.Having, m)
			if err != nil {
				return nil, wrapf(err, "HAVING")
			}
			post = append(post, h)
		}
		node = withFilter(node, post)
		out := make([]sql.Expr, len(sel))
		for i, e := range sel {
			r, err := sql.RemapColumns(e, m)
			if err != nil {
				return nil, wrapf(err, "select list")
			}
			out[i] = r
		}
		node = &Project{Input: node, Exprs: out, Names: names}
	}
	if q.Distinct {
		var err error
		if node, err = b.distinct(q, node); err != nil {
			return nil, err
		}
	}
	if len(q.OrderBy) > 0 {
		if !bounded(node) {
			return nil, errorf(sql.CodeNotSupported, "ORDER BY needs a bounded input (a query over a materialized view or a file): a stream never ends, so its rows cannot be sorted")
		}
		node = &Sort{Input: node, Keys: q.OrderBy}
	}
	if q.Offset > 0 && !bounded(node) && len(q.OrderBy) == 0 {
		return nil, errorf(sql.CodeNotSupported, "OFFSET over a stream skips rows in arrival order: use it with ORDER BY over a bounded input")
	}
	if q.Limit >= 0 || q.Offset > 0 {
		node = &Limit{Input: node, N: q.Limit, Offset: q.Offset}
	}
	return node, nil
}

// distinct makes SELECT DISTINCT an aggregation over every output column: per window when
// the output holds both bounds of one window (it then emits each row once when the window
// closes), else over an unbounded stream each row once, the first time it is seen (with a
// state TTL, state older than the TTL is forgotten, so a row may come again).
func (b *logicalBuilder) distinct(q *sql.Query, node LogicalNode) (LogicalNode, error) {
	sch := node.Schema()
	width := len(q.Select)
	start, end := -1, -1
	for i := 0; i < width; i++ {
		a := attrOf(q, i)
		if a.Window == 0 {
			continue
		}
		if a.End && end < 0 {
			end = i
		} else if !a.End && start < 0 {
			start = i
		}
	}
	if start < 0 || end < 0 || attrOf(q, start).Window != attrOf(q, end).Window {
		// Not both bounds of one window: the window columns are plain keys.
		start, end = -1, -1
	}
	var keys []sql.Expr
	m := make([]int, width)
	for i := 0; i < width; i++ {
		if i == start || i == end {
			continue
		}
		m[i] = len(keys)
		keys = append(keys, &sql.ColumnRef{Index: i, Name: sch[i].Name, T: sch[i].Type})
	}
	agg := &Aggregate{Input: node, Keys: keys, Emit: sql.EmitOnClose}
	switch {
	case start >= 0 && end >= 0:
		agg.Window = &sql.Window{Kind: sql.WindowGiven, TimeCol: start, EndCol: end}
		m[start], m[end] = len(keys), len(keys)+1
	case bounded(node):
	default:
		// Over a stream: each distinct row once, when first seen (exact: every distinct row
		// is kept, like a GROUP BY's groups), or with a state TTL forgotten once older than
		// that (a row may then come again). Over an updating input it follows its changes
		// (planner.Changelog).
		agg.Emit, agg.TTL, agg.EmitNew = sql.EmitChanges, b.opts.StateTTL, true
	}
	out := make([]sql.Expr, width)
	names := make([]string, width)
	aggSch := agg.Schema()
	for i := range out {
		out[i] = &sql.ColumnRef{Index: m[i], Name: aggSch[m[i]].Name, T: aggSch[m[i]].Type}
		names[i] = sch[i].Name
	}
	return &Project{Input: agg, Exprs: out, Names: names}, nil
}

func attrOf(q *sql.Query, i int) sql.ColAttr {
	if i < len(q.Attrs) {
		return q.Attrs[i]
	}
	return sql.ColAttr{}
}

// topN builds a derived table whose select list has ROW_NUMBER() OVER (PARTITION BY p ORDER
// BY o): the query's rows with the partition and order keys as hidden columns, a TopN
// keeping the first N rows of each partition (N from the enclosing WHERE's rn <= N,
// rn < N or rn = 1), then the hidden columns dropped. Supported shapes:
//   - window Top-N: the partition holds window_start and window_end of one window; each
//     window's top N rows are emitted, numbered, when the window closes;
//   - deduplication: no window, ORDER BY an event-time column, rn = 1: ascending keeps the
//     first row of each key (emitted once the watermark passes its time), descending the
//     last (each newer row is emitted as the key's new value); both need SET state_ttl.
func (b *logicalBuilder) topN(q *sql.Query, where sql.Expr) (LogicalNode, sql.Expr, error) {
	rn := q.RowNumber
	// The filter on the row number.
	var rest []sql.Expr
	limit := int64(-1)
	if where != nil {
		for _, p := range conjuncts(where) {
			if n, ok := rowNumberBound(p, rn.Col); ok && limit < 0 {
				limit = n
				continue
			}
			rest = append(rest, p)
		}
	}
	if limit < 0 {
		return nil, nil, errorf(sql.CodeNotSupported, "ROW_NUMBER() is supported in a derived table whose enclosing query keeps the first rows: WHERE %s <= N (window Top-N) or %s = 1 (deduplication)", q.Names[rn.Col], q.Names[rn.Col])
	}
	extra := make([]sql.Expr, 0, len(rn.Partition)+len(rn.Order))
	extra = append(extra, rn.Partition...)
	for _, k := range rn.Order {
		extra = append(extra, k.Expr)
	}
	in, err := b.query(q, extra)
	if err != nil {
		return nil, nil, err
	}
	sch := in.Schema()
	base := len(q.Select)
	t := &TopN{Input: in, N: limit, RowNumber: rn.Col, WindowEnd: -1, Time: -1}
	for i := range rn.Partition {
		c := base + i
		t.Partition = append(t.Partition, &sql.ColumnRef{Index: c, Name: sch[c].Name, T: sch[c].Type})
	}
	for i, k := range rn.Order {
		c := base + len(rn.Partition) + i
		t.Order = append(t.Order, sql.SortKey{Expr: &sql.ColumnRef{Index: c, Name: sch[c].Name, T: sch[c].Type}, Desc: k.Desc, Nulls: k.Nulls})
	}
	// Window Top-N: the partition holds both bounds of one window.
	ws, we := -1, -1
	for i := range rn.Partition {
		a := rn.PartitionAttr(i)
		if a.Window == 0 {
			continue
		}
		if a.End {
			if we < 0 {
				we = i
			}
		} else if ws < 0 {
			ws = i
		}
	}
	switch {
	case ws >= 0 && we >= 0 && rn.PartitionAttr(ws).Window == rn.PartitionAttr(we).Window:
		t.Mode, t.WindowEnd = TopNWindow, base+we
	case bounded(in) && aggregatesWithoutWindow(in):
		// A bounded input answers once: every partition's first N rows at its end, exact
		// whatever order the rows come in — an aggregate without a window emits its rows
		// when its input ends, not in event-time order, so a deduplication by event time
		// would take them as late.
		t.Mode = TopNBounded
	case len(rn.Order) == 1 && rn.OrderAttr(0).Time && limit == 1 && !bounded(in) && timelessJoin(in) != nil:
		return nil, nil, errorf(sql.CodeNotSupported, "a deduplication by event time over %s: its rows come when their second side arrives, so their times are not event times; deduplicate each input before joining", joinWhat(timelessJoin(in)))
	case len(rn.Order) == 1 && rn.OrderAttr(0).Time && limit == 1 && (!bounded(in) || !rn.Order[0].Desc):
		// (Over a bounded input a deduplication keeping the last row answers once, at the
		// end: TopNBounded. Keeping the first, late rows stay late, as in a stream.)
		t.Time = base + len(rn.Partition)
		t.Mode = DedupFirst
		if rn.Order[0].Desc {
			t.Mode = DedupLast
		}
		// Without a state TTL every key is kept (one row each), as a GROUP BY keeps its
		// groups.
		t.TTL = b.opts.StateTTL
	case bounded(in):
		t.Mode = TopNBounded
	default:
		// A Top-N over the whole stream: its rows change as rows arrive (and leave).
		t.Mode = TopNChanges
	}
	// Drop the hidden columns.
	out := make([]sql.Expr, base)
	for i := range out {
		out[i] = &sql.ColumnRef{Index: i, Name: sch[i].Name, T: sch[i].Type}
	}
	return &Project{Input: t, Exprs: out, Names: q.Names}, and(rest), nil
}

// over builds a query whose select list has aggregates over a window of rows (sql.Over):
// the query's rows with the partition keys, order keys and the calls' arguments as hidden
// columns, an Over computing the calls into their placeholder columns, then the hidden
// columns dropped.
func (b *logicalBuilder) over(q *sql.Query) (LogicalNode, error) {
	w := q.Over
	extra := append([]sql.Expr(nil), w.Partition...)
	for _, k := range w.Order {
		extra = append(extra, k.Expr)
	}
	argAt := make([]int, len(w.Calls))
	for i, c := range w.Calls {
		argAt[i] = -1
		if c.Agg.Arg != nil {
			argAt[i] = len(q.Select) + len(extra)
			extra = append(extra, c.Agg.Arg)
		}
	}
	inner := *q
	inner.Over = nil
	in, err := b.query(&inner, extra)
	if err != nil {
		return nil, err
	}
	sch := in.Schema()
	base := len(q.Select)
	o := &Over{Input: in, Preceding: w.Preceding, Bounded: bounded(in)}
	for i := range w.Partition {
		o.Partition = append(o.Partition, colRef(sch, base+i))
	}
	for i, k := range w.Order {
		o.Order = append(o.Order, sql.SortKey{Expr: colRef(sch, base+len(w.Partition)+i), Desc: k.Desc})
	}
	for i, c := range w.Calls {
		g := c.Agg
		if argAt[i] >= 0 {
			g.Arg = colRef(sch, argAt[i])
		}
		t, err := aggResultType(g)
		if err != nil {
			return nil, err
		}
		g.T = t
		o.Calls = append(o.Calls, sql.OverCall{Col: c.Col, Agg: g})
	}
	out := make([]sql.Expr, base)
	for i := range out {
		out[i] = colRef(sch, i)
	}
	return &Project{Input: o, Exprs: out, Names: q.Names}, nil
}

// timelessJoin returns a join in n whose rows' times are not event times — a regular join,
// or an interval join bounded by a left column (only its lower bound holds the watermark)
// — unless an aggregation sits between it and n's top; nil when there is none.
func timelessJoin(n LogicalNode) *Join {
	switch x := n.(type) {
	case *Join:
		if x.Mode == JoinRegular || x.Mode == JoinInterval && x.HasUntil {
			return x
		}
	case *Aggregate:
		return nil
	}
	for _, c := range n.Children() {
		if j := timelessJoin(c); j != nil {
			return j
		}
	}
	return nil
}

func joinWhat(j *Join) string {
	if j.Mode == JoinRegular {
		return "a regular join"
	}
	return "a join bounded by a column of its left side"
}

// aggregatesWithoutWindow reports whether a plan holds an aggregation without a window.
func aggregatesWithoutWindow(n LogicalNode) bool {
	if a, ok := n.(*Aggregate); ok && a.Window == nil {
		return true
	}
	for _, c := range n.Children() {
		if aggregatesWithoutWindow(c) {
			return true
		}
	}
	return false
}

// rowNumberBound recognizes rn <= N, rn < N, rn = 1 (and the mirrored forms) over column
// col; it returns N (the number of rows kept).
func rowNumberBound(p sql.Expr, col int) (int64, bool) {
	c, ok := p.(*sql.Call)
	if !ok || len(c.Args) != 2 {
		return 0, false
	}
	op := c.Func
	l, r := c.Args[0], c.Args[1]
	if _, ok := r.(*sql.ColumnRef); ok {
		l, r = r, l
		switch op {
		case "<=":
			op = ">="
		case ">=":
			op = "<="
		case "<":
			op = ">"
		case ">":
			op = "<"
		}
	}
	ref, ok := l.(*sql.ColumnRef)
	if !ok || ref.Index != col {
		return 0, false
	}
	v, ok := evalConstant(r)
	if !ok || !v.K.IsInteger() {
		return 0, false
	}
	switch op {
	case "<=":
		return v.I, v.I >= 1
	case "<":
		return v.I - 1, v.I >= 2
	case "=":
		return 1, v.I == 1
	}
	return 0, false
}

// latestVersions is a table's current contents: of each key's versions (the rows of its
// changelog), the one with the greatest version time — among equal times the one read last
// — unless it is a delete.
func latestVersions(rel *sql.Relation, all []int) LogicalNode {
	var n LogicalNode = &Scan{Relation: rel, Columns: all, Snapshot: true}
	part := make([]sql.Expr, len(rel.PrimaryKey))
	for i, c := range rel.PrimaryKey {
		part[i] = colRef(rel.Schema, c)
	}
	var order []sql.SortKey
	if rel.EventTime >= 0 {
		order = []sql.SortKey{{Expr: colRef(rel.Schema, rel.EventTime), Desc: true}}
	}
	n = &TopN{Input: n, Partition: part, Order: order, N: 1, RowNumber: -1, Mode: TopNBounded, Latest: true}
	if op := rel.Schema.Index(sql.ChangeColumn); op >= 0 {
		n = &Filter{Input: n, Pred: notDelete(colRef(rel.Schema, op))}
	}
	return n
}

// joinSide builds one side of a join: a table is left as its changelog (its Scan), which
// the join reads as a table (its latest versions, a version valid at a time, or lookups).
func (b *logicalBuilder) joinSide(f sql.From) (LogicalNode, sql.Expr, error) {
	if r, ok := f.(*sql.FromRelation); ok && r.Rel.IsTable && !b.opts.Pull {
		all := make([]int, len(r.Rel.Schema))
		for i := range all {
			all[i] = i
		}
		return &Scan{Relation: r.Rel, Columns: all}, nil, nil
	}
	return b.from(f, nil)
}

// tableVersions is a table read by a continuous query: its changelog made its latest
// versions (TopN TableVersions), a Retract changelog keyed by its primary key; nil when rel
// is not a table read as a changelog (one without a change column).
func tableVersions(rel *sql.Relation, all []int) LogicalNode {
	return tableVersionsOf(rel, &Scan{Relation: rel, Columns: all})
}

// tableVersionsOf puts the TopN of tableVersions over scan, the whole rows of table rel.
func tableVersionsOf(rel *sql.Relation, scan LogicalNode) LogicalNode {
	if !rel.IsTable || len(rel.PrimaryKey) == 0 || rel.Schema.Index(sql.ChangeColumn) != len(rel.Schema)-1 {
		return nil
	}
	if kind, ok := options.Lookup(rel.Connector()); ok && kind.Changelog {
		// Its connector reads the changes of its rows already (scanChanges).
		return nil
	}
	part := make([]sql.Expr, len(rel.PrimaryKey))
	for i, c := range rel.PrimaryKey {
		part[i] = colRef(rel.Schema, c)
	}
	return &TopN{Input: scan, Partition: part, N: 1, RowNumber: -1, WindowEnd: -1, Time: rel.EventTime,
		Mode: TableVersions, Latest: true}
}

func colRef(s sql.Schema, i int) *sql.ColumnRef {
	return &sql.ColumnRef{Index: i, Name: s[i].Name, T: s[i].Type}
}

// snapshot reports whether a plan reads only materialized views' current rows, tables'
// latest versions and constants: a pull query, which answers once.
func snapshot(n LogicalNode) bool {
	if s, ok := n.(*Scan); ok {
		return s.Snapshot || s.Relation.IsView || s.Relation.Connector() == "values"
	}
	ch := n.Children()
	if len(ch) == 0 {
		return false
	}
	for _, c := range ch {
		if !snapshot(c) {
			return false
		}
	}
	return true
}

// bounded reports whether a plan's input ends: every scan reads a file, a view's snapshot or
// constants.
func bounded(n LogicalNode) bool {
	if s, ok := n.(*Scan); ok {
		return s.Snapshot || s.Relation.Bounded()
	}
	ch := n.Children()
	if len(ch) == 0 {
		return false
	}
	for _, c := range ch {
		if !bounded(c) {
			return false
		}
	}
	return true
}

func checkWindow(w *sql.Window) error {
	switch w.Kind {
	case sql.WindowTumble:
		if w.Size <= 0 {
			return errorf(sql.CodeInvalidValue, "TUMBLE size must be positive")
		}
	case sql.WindowHop:
		if w.Size <= 0 || w.Slide <= 0 {
			return errorf(sql.CodeInvalidValue, "HOP slide and size must be positive")
		}
	case sql.WindowSession:
		if w.Gap <= 0 {
			return errorf(sql.CodeInvalidValue, "SESSION gap must be positive")
		}
	case sql.WindowGiven:
	default:
		return errorf(sql.CodeInternal, "unknown window kind %d", w.Kind)
	}
	return nil
}

func windowName(k sql.WindowKind) string {
	switch k {
	case sql.WindowTumble:
		return "TUMBLE"
	case sql.WindowHop:
		return "HOP"
	case sql.WindowSession:
		return "SESSION"
	}
	return "unknown"
}

// aggResultType is the result type of an aggregate per its registration's type rule
// (sql.AggDef.Check). A type the binder already computed is kept when it agrees (it may
// carry a DECIMAL precision); a disagreeing one is an internal error, since downstream
// expressions were typed with it.
func aggResultType(g sql.AggCall) (sql.Type, error) {
	def, ok := g.Aggregate()
	if !ok {
		return sql.Type{}, errorf(sql.CodeNotSupported, "aggregate %s", g.Func)
	}
	t := sql.TypeBigInt // COUNT(*)
	if !isStar(g) {
		var err error
		if t, _, err = def.Check(g.Args(), g.Distinct); err != nil {
			return t, wrapf(err, "aggregate %s", aggText(g))
		}
	}
	if g.T.Kind == sql.KindNull {
		return t, nil
	}
	if g.T.Kind != t.Kind || (t.Kind == sql.KindDecimal && g.T.Scale != t.Scale) {
		return t, errorf(sql.CodeInternal, "%s: bound type %s, planner type %s", aggText(g), g.T, t)
	}
	return g.T, nil
}

// notDelete is the predicate of a version that is not a delete: its change column (op) is
// NULL or not one of delete, d (any case) — as the join operator reads it.
func notDelete(op sql.Expr) sql.Expr {
	lower := &sql.Call{Func: "LOWER", Args: []sql.Expr{op}, T: sql.TypeVarchar}
	return &sql.Call{Func: "OR", T: sql.TypeBool, Args: []sql.Expr{
		&sql.IsNull{Arg: op},
		&sql.In{Arg: lower, Not: true, List: []sql.Expr{
			&sql.Literal{V: sql.Varchar("delete"), T: sql.TypeVarchar},
			&sql.Literal{V: sql.Varchar("d"), T: sql.TypeVarchar},
		}},
	}}
}
