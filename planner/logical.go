package planner

import (
	"strconv"
	"strings"

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
// value per aggregate. Window.TimeCol is an index into the input row.
type Aggregate struct {
	Input  LogicalNode
	Keys   []sql.Expr
	Window *sql.Window
	Aggs   []sql.AggCall
	Emit   EmitMode
}

// Limit stops after N rows.
type Limit struct {
	Input LogicalNode
	N     int64
}

// Sink delivers the rows: to the stream named Stream, or to the client when Stream is "".
type Sink struct {
	Input  LogicalNode
	Stream string
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
	return out
}
func (l *Limit) Schema() sql.Schema { return l.Input.Schema() }
func (s *Sink) Schema() sql.Schema  { return s.Input.Schema() }

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
	return b.String()
}
func (l *Limit) String() string { return "Limit " + strconv.FormatInt(l.N, 10) }
func (s *Sink) String() string {
	if s.Stream == "" {
		return "Sink client columns=[" + strings.Join(s.Schema().Names(), ", ") + "]"
	}
	return "Sink " + s.Stream + " columns=[" + strings.Join(s.Schema().Names(), ", ") + "]"
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

// Logical builds the logical plan of a bound query, unoptimized: Scan of every column, then
// window assignment (table-valued TUMBLE/HOP without aggregation), WHERE, aggregation,
// HAVING, the select list, LIMIT, and a Sink to the client. The aggregate of a table-valued
// window assigns windows itself, so window_start/window_end listed in GROUP BY become the
// aggregate's window, not keys.
func Logical(q *sql.Query) (LogicalNode, error) {
	if q == nil || q.From == nil {
		return nil, errorf(sql.CodeInternal, "query has no FROM relation")
	}
	if len(q.Names) != len(q.Select) {
		return nil, errorf(sql.CodeInternal, "query has %d select expressions but %d names", len(q.Select), len(q.Names))
	}
	rel := q.From
	n := len(rel.Schema)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	var node LogicalNode = &Scan{Relation: rel, Columns: all}

	w := q.Window
	if w != nil {
		if w.TimeCol < 0 || w.TimeCol >= n {
			return nil, errorf(sql.CodeInternal, "window time column #%d is outside stream %s", w.TimeCol, rel.Name)
		}
		if err := checkWindow(w); err != nil {
			return nil, err
		}
	}
	// tvfCols is true when the input row carries window_start/window_end at n, n+1.
	// (A binder may also refer to a SESSION's window_start/window_end at n, n+1 in GROUP BY.)
	tvfCols := w != nil && w.TVF
	isWindowCol := func(i int) bool { return tvfCols && (i == n || i == n+1) }

	if !q.Aggregated {
		if w != nil {
			if !w.TVF || w.Kind == sql.WindowSession {
				return nil, errorf(sql.CodeNotSupported, "%s windows need an aggregation (GROUP BY)", windowName(w.Kind))
			}
			node = &WindowAssign{Input: node, Window: *w}
		}
		if q.Where != nil {
			node = &Filter{Input: node, Pred: q.Where}
		}
		node = &Project{Input: node, Exprs: q.Select, Names: q.Names}
	} else {
		// A WHERE conjunct that reads only window_start/window_end filters whole windows,
		// and the window is part of every group's identity: it becomes a filter over the
		// aggregate row (windowPreds). One that mixes window and other columns cannot be
		// evaluated before the aggregate assigns windows.
		var rowPreds, windowPreds []sql.Expr
		if q.Where != nil {
			for _, p := range conjuncts(q.Where) {
				win, other := false, false
				for _, c := range sql.ColumnsUsed(p) {
					if isWindowCol(c) {
						win = true
					} else {
						other = true
					}
				}
				switch {
				case win && other:
					return nil, errorf(sql.CodeNotSupported, "WHERE condition %s mixes window_start/window_end with other columns of an aggregated window; use HAVING", p)
				case win:
					windowPreds = append(windowPreds, p)
				default:
					rowPreds = append(rowPreds, p)
				}
			}
		}
		node = withFilter(node, rowPreds)
		emit := EmitChanges
		switch q.Emit {
		case sql.EmitDefault:
			if w != nil {
				emit = EmitOnClose
			}
		case sql.EmitOnClose:
			if w == nil {
				return nil, errorf(sql.CodeNotSupported, "EMIT ON WINDOW CLOSE needs a window")
			}
			emit = EmitOnClose
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
				m[i] = nk + c.Index - n
				continue
			}
			for _, c := range sql.ColumnsUsed(k) {
				if isWindowCol(c) {
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
		aggs := make([]sql.AggCall, len(q.Aggs))
		for i, g := range q.Aggs {
			m[at+i] = nk + i
			if g.Arg != nil {
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
			aggs[i] = g
		}
		var win *sql.Window
		if w != nil {
			c := *w
			win = &c
		}
		node = &Aggregate{Input: node, Keys: keys, Window: win, Aggs: aggs, Emit: emit}
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
		sel := make([]sql.Expr, len(q.Select))
		for i, e := range q.Select {
			r, err := sql.RemapColumns(e, m)
			if err != nil {
				return nil, wrapf(err, "select list")
			}
			sel[i] = r
		}
		node = &Project{Input: node, Exprs: sel, Names: q.Names}
	}
	if q.Limit >= 0 {
		node = &Limit{Input: node, N: q.Limit}
	}
	return &Sink{Input: node}, nil
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
