package sql

import (
	"math"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// Bind resolves a parsed SELECT against the catalog and returns the bound query, with the
// row layouts documented on Query. Errors are *Error: 42P01 unknown stream, 42703 unknown
// column, 42804 type mismatch, 42803 grouping misuse, 0A000 unsupported construct; each
// carries the line and column of the offending part where known.
func Bind(s *Select, cat Catalog) (q *Query, err error) {
	if s == nil || s.stmt == nil {
		return nil, Errorf(CodeInternal, "bind: no parsed SELECT")
	}
	defer func() {
		if r := recover(); r != nil {
			q = nil
			err = Errorf(CodeInternal, "bind: %v", r)
		}
	}()
	b := &binder{input: s.input, rw: s.rw, params: s.Params, casts: s.casts, mode: modeInput, pos: s.rw.srcStart, cat: cat}
	markUserAggs(s.stmt, cat)
	return b.bindSelect(s, cat)
}

type bindMode uint8

const (
	modeConst bindMode = iota // no columns (VALUES)
	modeInput                 // over the input row
	modeAgg                   // over the aggregate row
)

type binder struct {
	input  string
	rw     *rewrite
	params []Value
	casts  []Type
	mode   bindMode
	pos    int     // offset (in the input) of the node being bound, for errors
	cat    Catalog // for user-defined functions (bindudf.go)

	// FROM
	rel      *Relation
	relNames []string // names a column may be qualified with
	scope    Schema   // the input row
	tvf      *windowCall
	window   *Window

	// aggregation
	keys    []Expr
	keyStr  []string
	nWin    int // 2 when the aggregate row has window_start/window_end
	aggs    []AggCall
	aggStr  []string
	inAgg   bool
	clause  string
	srcText string
}

// err builds an error at the current position.
func (b *binder) errf(code, format string, args ...any) *Error {
	return errAt(b.input, b.pos, code, format, args...)
}

// at gives a position to an error that has none.
func (b *binder) at(err error) error {
	if e, ok := err.(*Error); ok && e.Line == 0 {
		e.Pos = b.pos
		e.Line, e.Column = lineCol(b.input, b.pos)
	}
	return err
}

func (b *binder) setPos(n ast.Node) {
	if off := n.OriginTextPosition(); off > 0 {
		b.pos = b.rw.mapBack(off)
	}
}

func (b *binder) bindSelect(s *Select, cat Catalog) (*Query, error) {
	sel := s.stmt
	q := &Query{Emit: s.Emit, Limit: -1, Text: s.Text}
	switch {
	case sel.With != nil:
		return nil, b.errf(CodeNotSupported, "WITH (common table expressions) is not supported")
	case sel.Distinct:
		return nil, b.errf(CodeNotSupported, "SELECT DISTINCT is not supported: use GROUP BY")
	case sel.SelectIntoOpt != nil:
		return nil, b.errf(CodeNotSupported, "SELECT ... INTO is not supported: use INSERT INTO or CREATE STREAM ... AS")
	case len(sel.WindowSpecs) > 0:
		return nil, b.errf(CodeNotSupported, "WINDOW clauses are not supported: use TUMBLE, HOP or SESSION")
	case sel.Kind != ast.SelectStmtKindSelect:
		return nil, b.errf(CodeNotSupported, "only SELECT queries are supported here")
	case sel.OrderBy != nil:
		b.setPos(sel.OrderBy.Items[0].Expr)
		return nil, b.errf(CodeNotSupported, "ORDER BY is not supported: streams are unbounded")
	}
	if err := b.from(s, sel, cat); err != nil {
		return nil, err
	}
	q.From = b.rel

	// WHERE over the input row.
	if sel.Where != nil {
		b.clause = "WHERE"
		if hasAgg(sel.Where) {
			b.setPos(sel.Where)
			return nil, b.errf(CodeGrouping, "aggregate functions are not allowed in WHERE: use HAVING")
		}
		w, err := b.expr(sel.Where)
		if err != nil {
			return nil, err
		}
		if k := w.Type().Kind; k != KindBool && k != KindNull {
			b.setPos(sel.Where)
			return nil, b.errf(CodeTypeMismatch, "WHERE must be BOOLEAN, not %s", w.Type())
		}
		q.Where = w
	}

	// Aggregation?
	aggregated := sel.GroupBy != nil
	if sel.Having != nil {
		aggregated = true
	}
	for _, f := range sel.Fields.Fields {
		if f.Expr != nil && hasAgg(f.Expr) {
			aggregated = true
		}
	}
	if sel.GroupBy != nil {
		if err := b.groupBy(sel); err != nil {
			return nil, err
		}
	}
	if b.tvf != nil {
		b.window.TVF = true
	}
	if b.window != nil && b.window.Kind == WindowSession && !aggregated {
		b.pos = b.tvf.pos
		return nil, b.errf(CodeNotSupported, "SESSION windows need GROUP BY (aggregation)")
	}
	q.Window = b.window
	q.GroupBy = b.keys
	q.Aggregated = aggregated

	// Select list and HAVING.
	if aggregated {
		b.mode = modeAgg
		if b.window != nil {
			b.nWin = 2
		}
	}
	b.clause = "SELECT"
	for _, f := range sel.Fields.Fields {
		b.setPos(f)
		if f.WildCard != nil {
			if aggregated {
				return nil, b.errf(CodeGrouping, "SELECT * cannot be used with GROUP BY or aggregates: list the columns")
			}
			if t := f.WildCard.Table.O; t != "" && !b.knownQualifier(t) {
				return nil, b.errf(CodeUnknownTable, "unknown table %s in %s.*", t, t)
			}
			for i, c := range b.scope {
				q.Select = append(q.Select, &ColumnRef{Index: i, Name: c.Name, T: c.Type})
				q.Names = append(q.Names, c.Name)
			}
			continue
		}
		e, err := b.expr(f.Expr)
		if err != nil {
			return nil, err
		}
		q.Select = append(q.Select, e)
		q.Names = append(q.Names, b.fieldName(f, e))
	}
	if sel.Having != nil {
		b.clause = "HAVING"
		b.setPos(sel.Having.Expr)
		h, err := b.expr(sel.Having.Expr)
		if err != nil {
			return nil, err
		}
		if k := h.Type().Kind; k != KindBool && k != KindNull {
			b.setPos(sel.Having.Expr)
			return nil, b.errf(CodeTypeMismatch, "HAVING must be BOOLEAN, not %s", h.Type())
		}
		q.Having = h
	}
	q.Aggs = b.aggs

	if sel.Limit != nil {
		if sel.Limit.Offset != nil {
			b.setPos(sel.Limit.Offset)
			return nil, b.errf(CodeNotSupported, "LIMIT with OFFSET is not supported")
		}
		saved := b.mode
		b.mode = modeConst
		n, err := b.expr(sel.Limit.Count)
		b.mode = saved
		if err != nil {
			return nil, err
		}
		v, err := Eval(n, nil)
		if err != nil {
			return nil, b.at(err)
		}
		if !v.K.IsInteger() || v.I < 0 {
			return nil, b.errf(CodeTypeMismatch, "LIMIT must be a non-negative integer")
		}
		q.Limit = v.I
	}
	if q.Emit == EmitOnClose && q.Window == nil {
		b.pos = s.emitPos
		return nil, b.errf(CodeNotSupported, "EMIT ON WINDOW CLOSE needs a window (TUMBLE, HOP or SESSION)")
	}
	return q, nil
}

func (b *binder) knownQualifier(t string) bool {
	for _, n := range b.relNames {
		if strings.EqualFold(n, t) {
			return true
		}
	}
	return false
}

// from resolves FROM: one stream or view, optionally through a window table function.
func (b *binder) from(s *Select, sel *ast.SelectStmt, cat Catalog) error {
	if sel.From == nil || sel.From.TableRefs == nil {
		if s.tvf != nil {
			return b.errf(CodeNotSupported, "a query needs FROM a stream or view")
		}
		// SELECT without FROM: constants and session functions (version(), ...), which
		// clients send on connect. The query reads one empty row (Query.IsConstant).
		b.rel = &Relation{EventTime: -1}
		return nil
	}
	j := sel.From.TableRefs
	if j.Right != nil {
		return b.errf(CodeNotSupported, "joins are not supported")
	}
	ts, ok := j.Left.(*ast.TableSource)
	if !ok {
		return b.errf(CodeNotSupported, "joins are not supported")
	}
	tn, ok := ts.Source.(*ast.TableName)
	if !ok {
		return b.errf(CodeNotSupported, "subqueries in FROM are not supported")
	}
	b.setPos(tn)
	name := tn.Name.O
	pos := b.findWord(name)
	if s.tvf != nil {
		pos = s.tvf.pos
	}
	rel, ok := cat.Relation(name)
	if !ok || rel == nil {
		b.pos = pos
		return b.errf(CodeUnknownTable, "unknown stream or view %s", name)
	}
	b.rel = rel
	b.relNames = []string{rel.Name, name}
	if ts.AsName.O != "" {
		b.relNames = []string{ts.AsName.O}
	}
	b.scope = rel.Schema
	if w := s.tvf; w != nil {
		b.tvf = w
		i := rel.Schema.Index(w.timeCol)
		b.pos = w.timePos
		if i < 0 {
			return b.errf(CodeUnknownColumn, "column %s does not exist in %s", w.timeCol, rel.Name)
		}
		if k := rel.Schema[i].Type.Kind; k != KindTimestamp {
			return b.errf(CodeTypeMismatch, "window time column %s must be TIMESTAMP, not %s", w.timeCol, k)
		}
		if err := b.checkEventTime(i); err != nil {
			return err
		}
		b.window = &Window{Kind: w.kind, TimeCol: i, Size: w.size, Slide: w.slide, Gap: w.gap, TVF: true}
		for _, wc := range []string{"window_start", "window_end"} {
			if rel.Schema.Index(wc) >= 0 {
				b.pos = w.pos
				n := w.kind.String()
				return b.errf(CodeNotSupported, "%s already has a column %s: use GROUP BY %s(...) with %s_START/%s_END instead of the table function", rel.Name, wc, n, n, n)
			}
		}
		if w.kind != WindowSession {
			sc := make(Schema, 0, len(rel.Schema)+2)
			sc = append(sc, rel.Schema...)
			sc = append(sc, Column{Name: "window_start", Type: TypeTimestamp}, Column{Name: "window_end", Type: TypeTimestamp})
			b.scope = sc
		}
	}
	return nil
}

// findWord returns the input offset of the first bare word w in the statement, or the
// statement start.
func (b *binder) findWord(w string) int {
	toks, err := lex(b.input[b.rw.srcStart:b.rw.srcEnd])
	if err == nil {
		for i, t := range toks {
			if i > 0 && toks[i-1].is("FROM") && (t.Kind == tokIdent || t.Kind == tokQIdent) && strings.EqualFold(t.Val, w) {
				return b.rw.srcStart + t.Pos
			}
		}
	}
	return b.pos
}

func (b *binder) checkEventTime(col int) error {
	if et := b.rel.EventTime; et >= 0 && et != col {
		return b.errf(CodeNotSupported, "windows must use the event-time column %s declared by WATERMARK FOR", b.rel.Schema[et].Name)
	}
	return nil
}

// groupBy binds the GROUP BY items: keys over the input row; a TUMBLE/HOP/SESSION call
// sets the window; window_start/window_end of a window table function are the window.
func (b *binder) groupBy(sel *ast.SelectStmt) error {
	b.clause = "GROUP BY"
	for _, item := range sel.GroupBy.Items {
		n := item.Expr
		b.setPos(n)
		if hasAgg(n) {
			return b.errf(CodeGrouping, "aggregate functions are not allowed in GROUP BY")
		}
		if f, ok := n.(*ast.FuncCallExpr); ok {
			switch f.FnName.L {
			case "__rsql_tumble", "__rsql_hop", "__rsql_session":
				if err := b.groupWindow(f); err != nil {
					return err
				}
				continue
			}
		}
		if c, ok := n.(*ast.ColumnNameExpr); ok && b.tvf != nil {
			nm := c.Name.Name.L
			if (nm == "window_start" || nm == "window_end") && b.rel.Schema.Index(nm) < 0 {
				continue // the window itself
			}
		}
		// Ordinal (GROUP BY 1) or select alias.
		if pe, ok := n.(*ast.PositionExpr); ok {
			i := pe.N
			if pe.P != nil || i < 1 || i > len(sel.Fields.Fields) || sel.Fields.Fields[i-1].Expr == nil {
				return b.errf(CodeUnknownColumn, "GROUP BY position %d is not in the select list", i)
			}
			n = sel.Fields.Fields[i-1].Expr
		} else if c, ok := n.(*ast.ColumnNameExpr); ok && c.Name.Table.O == "" && b.scope.Index(c.Name.Name.O) < 0 {
			for _, f := range sel.Fields.Fields {
				if f.AsName.L != "" && f.AsName.L == c.Name.Name.L && f.Expr != nil {
					n = f.Expr
					break
				}
			}
		}
		e, err := b.expr(n)
		if err != nil {
			return err
		}
		if e.Type().Kind == KindJSON {
			return b.errf(CodeTypeMismatch, "cannot GROUP BY a JSON value: extract a field with ->> first")
		}
		s := e.String()
		dup := false
		for _, k := range b.keyStr {
			dup = dup || k == s
		}
		if !dup {
			b.keys = append(b.keys, e)
			b.keyStr = append(b.keyStr, s)
		}
	}
	return nil
}

// groupWindow binds GROUP BY TUMBLE(ts, size) | HOP(ts, slide, size) | SESSION(ts, gap).
func (b *binder) groupWindow(f *ast.FuncCallExpr) error {
	kind, name, want := windowKindOf(f.FnName.L)
	if b.window != nil {
		if b.tvf != nil {
			return b.errf(CodeNotSupported, "GROUP BY %s cannot be combined with a window table function in FROM", name)
		}
		return b.errf(CodeNotSupported, "only one window per query")
	}
	col, sizes, err := b.windowArgs(f, name, want)
	if err != nil {
		return err
	}
	w := &Window{Kind: kind, TimeCol: col}
	switch kind {
	case WindowTumble:
		w.Size = sizes[0]
	case WindowHop:
		w.Slide, w.Size = sizes[0], sizes[1]
	case WindowSession:
		w.Gap = sizes[0]
	}
	b.window = w
	return nil
}

func windowKindOf(fn string) (WindowKind, string, int) {
	switch strings.TrimPrefix(fn, "__rsql_") {
	case "tumble", "tumble_start", "tumble_end":
		return WindowTumble, "TUMBLE", 2
	case "hop", "hop_start", "hop_end":
		return WindowHop, "HOP", 3
	}
	return WindowSession, "SESSION", 2
}

// windowArgs binds (ts, interval...) of a group-by window function.
func (b *binder) windowArgs(f *ast.FuncCallExpr, name string, want int) (int, []int64, error) {
	usage := map[string]string{"TUMBLE": "TUMBLE(time_column, INTERVAL size)", "HOP": "HOP(time_column, INTERVAL slide, INTERVAL size)", "SESSION": "SESSION(time_column, INTERVAL gap)"}[name]
	if len(f.Args) != want {
		return 0, nil, b.errf(CodeSyntax, "%s takes %d arguments here: %s", name, want, usage)
	}
	c, ok := f.Args[0].(*ast.ColumnNameExpr)
	if !ok {
		return 0, nil, b.errf(CodeSyntax, "argument 1 of %s must be a column: %s", name, usage)
	}
	b.setPos(c)
	i := b.rel.Schema.Index(c.Name.Name.O)
	if i < 0 {
		return 0, nil, b.errf(CodeUnknownColumn, "column %s does not exist in %s", c.Name.Name.O, b.rel.Name)
	}
	if k := b.rel.Schema[i].Type.Kind; k != KindTimestamp {
		return 0, nil, b.errf(CodeTypeMismatch, "window time column %s must be TIMESTAMP, not %s", c.Name.Name.O, k)
	}
	if err := b.checkEventTime(i); err != nil {
		return 0, nil, err
	}
	var sizes []int64
	for _, a := range f.Args[1:] {
		b.setPos(a)
		iv, ok := a.(*ast.FuncCallExpr)
		if !ok || iv.FnName.L != "__rsql_interval" {
			return 0, nil, b.errf(CodeSyntax, "%s sizes are INTERVAL 'n' UNIT: %s", name, usage)
		}
		ms := iv.Args[0].(*driver.ValueExpr).GetInt64()
		if ms <= 0 {
			return 0, nil, b.errf(CodeInvalidValue, "%s sizes must be positive", name)
		}
		sizes = append(sizes, ms)
	}
	return i, sizes, nil
}

// fieldName is the output name of a select field: its alias, the column name, or its text
// as the user wrote it.
func (b *binder) fieldName(f *ast.SelectField, e Expr) string {
	if f.AsName.O != "" {
		return f.AsName.O
	}
	if c, ok := f.Expr.(*ast.ColumnNameExpr); ok {
		if r, ok := e.(*ColumnRef); ok {
			return r.Name
		}
		return c.Name.Name.O
	}
	text := f.Text()
	start := f.Offset
	if start >= 0 && start+len(text) <= len(b.rw.text) && len(text) > 0 {
		s := b.rw.mapBack(start)
		end := b.rw.mapEnd(start + len(text))
		if s < end && end <= len(b.input) {
			return b.input[s:end]
		}
	}
	if strings.Contains(text, "__rsql_") || text == "" {
		return e.String()
	}
	return text
}

// hasAgg reports whether the tree holds an aggregate call.
func hasAgg(n ast.Node) bool {
	v := &aggFinder{}
	n.Accept(v)
	return v.found
}

type aggFinder struct{ found bool }

func (v *aggFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch n.(type) {
	case *ast.AggregateFuncExpr:
		v.found = true
		return n, true
	case *ast.SubqueryExpr:
		return n, true
	}
	return n, v.found
}
func (v *aggFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// column resolves a column reference in the current mode.
func (b *binder) column(c *ast.ColumnNameExpr) (Expr, error) {
	b.setPos(c)
	name := c.Name.Name.O
	if t := c.Name.Table.O; t != "" && !b.knownQualifier(t) {
		return nil, b.errf(CodeUnknownTable, "unknown table %s in %s.%s", t, t, name)
	}
	if c.Name.Schema.O != "" {
		return nil, b.errf(CodeNotSupported, "schema-qualified names are not supported: %s", c.Name.String())
	}
	switch b.mode {
	case modeConst:
		return nil, b.errf(CodeUnknownColumn, "column %s cannot be used here: a constant is expected", name)
	case modeAgg:
		if !b.inAgg {
			lname := strings.ToLower(name)
			if b.window != nil && (lname == "window_start" || lname == "window_end") && b.rel.Schema.Index(name) < 0 {
				i := len(b.keys)
				if lname == "window_end" {
					i++
				}
				return &ColumnRef{Index: i, Name: lname, T: TypeTimestamp}, nil
			}
			if b.scope.Index(name) < 0 {
				return nil, b.errf(CodeUnknownColumn, "column %s does not exist in %s", name, b.rel.Name)
			}
			return nil, b.errf(CodeGrouping, "column %s must appear in GROUP BY or be used in an aggregate function", name)
		}
	}
	i := b.scope.Index(name)
	if i < 0 {
		if lname := strings.ToLower(name); (lname == "window_start" || lname == "window_end") && b.window != nil {
			return nil, b.errf(CodeGrouping, "%s is only available after GROUP BY (aggregation) for this window", lname)
		}
		return nil, b.errf(CodeUnknownColumn, "column %s does not exist in %s", name, b.rel.Name)
	}
	col := b.scope[i]
	return &ColumnRef{Index: i, Name: col.Name, T: col.Type}, nil
}

// expr binds one expression node in the current mode.
func (b *binder) expr(n ast.ExprNode) (Expr, error) {
	if n == nil {
		return nil, b.errf(CodeSyntax, "missing expression")
	}
	b.setPos(n)
	if b.mode == modeAgg && !b.inAgg {
		if a, ok := n.(*ast.AggregateFuncExpr); ok {
			return b.aggregate(a)
		}
		if !hasAgg(n) {
			// A whole group key, or a constant, is fine as is.
			saved := b.mode
			b.mode = modeInput
			e, err := b.expr(n)
			b.mode = saved
			b.setPos(n)
			if err == nil {
				s := e.String()
				for i, k := range b.keyStr {
					if s == k {
						name := k
						if c, ok := b.keys[i].(*ColumnRef); ok {
							name = c.Name
						}
						return &ColumnRef{Index: i, Name: name, T: b.keys[i].Type()}, nil
					}
				}
				if IsConstant(e) {
					return e, nil
				}
			}
		}
	}
	pos := b.pos
	e, err := b.node(n)
	if err != nil {
		return nil, err
	}
	b.pos = pos
	return e, nil
}

func (b *binder) exprs(ns []ast.ExprNode) ([]Expr, error) {
	out := make([]Expr, len(ns))
	for i, n := range ns {
		e, err := b.expr(n)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func (b *binder) call(fn string, args ...Expr) (Expr, error) {
	e, err := NewCall(fn, args...)
	if err != nil {
		return nil, b.at(err)
	}
	return e, nil
}

var binOps = map[opcode.Op]string{
	opcode.LogicAnd: "AND", opcode.LogicOr: "OR", opcode.EQ: "=", opcode.NE: "<>", opcode.LT: "<",
	opcode.LE: "<=", opcode.GT: ">", opcode.GE: ">=", opcode.Plus: "+", opcode.Minus: "-",
	opcode.Mul: "*", opcode.Div: "/", opcode.Mod: "%", opcode.IntDiv: "/",
	opcode.NullEQ: "IS NOT DISTINCT FROM",
}

func (b *binder) node(n ast.ExprNode) (Expr, error) {
	switch x := n.(type) {
	case *driver.ValueExpr:
		return b.value(x)
	case *ast.ColumnNameExpr:
		return b.column(x)
	case *ast.ParenthesesExpr:
		return b.expr(x.Expr)
	case *ast.BinaryOperationExpr:
		op, ok := binOps[x.Op]
		if !ok {
			return nil, b.errf(CodeNotSupported, "operator %s is not supported", x.Op)
		}
		l, err := b.expr(x.L)
		if err != nil {
			return nil, err
		}
		r, err := b.expr(x.R)
		if err != nil {
			return nil, err
		}
		b.setPos(x)
		if x.Op == opcode.IntDiv && (!isIntOrNull(l.Type().Kind) || !isIntOrNull(r.Type().Kind)) {
			return nil, b.errf(CodeTypeMismatch, "DIV needs integer operands, not %s and %s", l.Type(), r.Type())
		}
		return b.call(op, l, r)
	case *ast.UnaryOperationExpr:
		a, err := b.expr(x.V)
		if err != nil {
			return nil, err
		}
		b.setPos(x)
		switch x.Op {
		case opcode.Plus:
			if !isNumOrNull(a.Type().Kind) && a.Type().Kind != KindInterval {
				return nil, b.errf(CodeTypeMismatch, "unary + needs a number, not %s", a.Type())
			}
			return a, nil
		case opcode.Minus:
			if l, ok := a.(*Literal); ok {
				switch l.V.K {
				case KindBigInt, KindInt:
					if l.V.I != math.MinInt64 {
						return intLiteral(-l.V.I), nil
					}
				case KindDecimal:
					return &Literal{V: NumericSub(Value{K: KindDecimal}, l.V), T: l.T}, nil
				case KindInterval:
					if l.V.I != -l.V.I || l.V.I == 0 {
						v := l.V
						v.I = -v.I
						return &Literal{V: v, T: l.T}, nil
					}
				case KindDouble:
					return &Literal{V: Double(-l.V.F), T: l.T}, nil
				}
			}
			return b.call("NEG", a)
		case opcode.Not, opcode.Not2:
			return b.call("NOT", a)
		}
		return nil, b.errf(CodeNotSupported, "operator %s is not supported", x.Op)
	case *ast.IsNullExpr:
		a, err := b.expr(x.Expr)
		if err != nil {
			return nil, err
		}
		return &IsNull{Arg: a, Not: x.Not}, nil
	case *ast.IsTruthExpr:
		a, err := b.expr(x.Expr)
		if err != nil {
			return nil, err
		}
		if k := a.Type().Kind; k != KindBool && k != KindNull {
			return nil, b.errf(CodeTypeMismatch, "IS TRUE/FALSE needs a BOOLEAN, not %s", a.Type())
		}
		// x IS TRUE  = COALESCE(x, FALSE); x IS FALSE = COALESCE(NOT x, FALSE).
		if x.True == 0 {
			if a, err = b.call("NOT", a); err != nil {
				return nil, err
			}
		}
		e, err := b.call("COALESCE", a, NewLiteral(Bool(false)))
		if err != nil {
			return nil, err
		}
		if x.Not {
			return b.call("NOT", e)
		}
		return e, nil
	case *ast.BetweenExpr:
		a, err := b.expr(x.Expr)
		if err != nil {
			return nil, err
		}
		lo, err := b.expr(x.Left)
		if err != nil {
			return nil, err
		}
		hi, err := b.expr(x.Right)
		if err != nil {
			return nil, err
		}
		b.setPos(x)
		for _, o := range []*Expr{&lo, &hi} {
			var aa Expr
			if aa, *o, err = coerceForCompare(a, *o); err != nil {
				return nil, b.at(err)
			}
			_ = aa
			if !comparableKinds(a.Type().Kind, (*o).Type().Kind) {
				return nil, b.errf(CodeTypeMismatch, "cannot compare %s with %s in BETWEEN", a.Type(), (*o).Type())
			}
		}
		return &Between{Arg: a, Lo: lo, Hi: hi, Not: x.Not}, nil
	case *ast.PatternInExpr:
		if x.Sel != nil {
			return nil, b.errf(CodeNotSupported, "subqueries are not supported")
		}
		a, err := b.expr(x.Expr)
		if err != nil {
			return nil, err
		}
		list, err := b.exprs(x.List)
		if err != nil {
			return nil, err
		}
		b.setPos(x)
		for i := range list {
			if _, list[i], err = coerceForCompare(a, list[i]); err != nil {
				return nil, b.at(err)
			}
			if !comparableKinds(a.Type().Kind, list[i].Type().Kind) {
				return nil, b.errf(CodeTypeMismatch, "cannot compare %s with %s in IN", a.Type(), list[i].Type())
			}
		}
		return &In{Arg: a, List: list, Not: x.Not}, nil
	case *ast.PatternLikeOrIlikeExpr:
		a, err := b.expr(x.Expr)
		if err != nil {
			return nil, err
		}
		p, err := b.expr(x.Pattern)
		if err != nil {
			return nil, err
		}
		b.setPos(x)
		if !isStrOrNull(a.Type().Kind) || !isStrOrNull(p.Type().Kind) {
			return nil, b.errf(CodeTypeMismatch, "LIKE needs VARCHAR operands, not %s and %s", a.Type(), p.Type())
		}
		if !x.IsLike { // ILIKE
			if a, err = b.call("LOWER", a); err != nil {
				return nil, err
			}
			if p, err = b.call("LOWER", p); err != nil {
				return nil, err
			}
		}
		esc := rune(x.Escape)
		if esc == 0 {
			esc = '\\'
		}
		return &Like{Arg: a, Pattern: p, Escape: esc, Not: x.Not}, nil
	case *ast.PatternRegexpExpr:
		// a ~ 'pattern' (the pre-pass writes it as REGEXP); a ~* 'p' has __rsql_ci('p').
		a, err := b.expr(x.Expr)
		if err != nil {
			return nil, err
		}
		op := "REGEXP"
		pat := x.Pattern
		if f, ok := pat.(*ast.FuncCallExpr); ok && f.FnName.L == "__rsql_ci" && len(f.Args) == 1 {
			op, pat = "IREGEXP", f.Args[0]
		}
		p, err := b.expr(pat)
		if err != nil {
			return nil, err
		}
		b.setPos(x)
		e, err := b.call(op, a, p)
		if err != nil || !x.Not {
			return e, err
		}
		return b.call("NOT", e)
	case *ast.CaseExpr:
		return b.caseExpr(x)
	case *ast.FuncCallExpr:
		return b.funcCall(x)
	case *ast.AggregateFuncExpr:
		switch {
		case b.inAgg:
			return nil, b.errf(CodeGrouping, "aggregate calls cannot be nested")
		case b.mode == modeConst:
			return nil, b.errf(CodeGrouping, "aggregate functions are not allowed here")
		}
		return nil, b.errf(CodeGrouping, "aggregate functions are not allowed in %s", b.clause)
	case *ast.WindowFuncExpr:
		return nil, b.errf(CodeNotSupported, "window functions (OVER) are not supported: use TUMBLE, HOP or SESSION with GROUP BY")
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr:
		return nil, b.errf(CodeNotSupported, "subqueries are not supported")
	case *ast.FuncCastExpr:
		return nil, b.errf(CodeNotSupported, "CONVERT and BINARY are not supported: use CAST(x AS type)")
	case *ast.VariableExpr:
		return nil, b.errf(CodeNotSupported, "variables are not supported")
	case *ast.RowExpr:
		return nil, b.errf(CodeNotSupported, "row values are not supported")
	case *ast.DefaultExpr:
		return nil, b.errf(CodeNotSupported, "DEFAULT is not supported")
	}
	return nil, b.errf(CodeNotSupported, "this expression is not supported")
}

func isIntOrNull(k Kind) bool { return k.IsInteger() || k == KindNull }

func (b *binder) value(x *driver.ValueExpr) (Expr, error) {
	switch x.Kind() {
	case driver.KindNull:
		return &Literal{V: Null, T: TypeNull}, nil
	case driver.KindInt64:
		if mysql.HasIsBooleanFlag(x.Type.GetFlag()) {
			return NewLiteral(Bool(x.GetInt64() != 0)), nil
		}
		return intLiteral(x.GetInt64()), nil
	case driver.KindUint64:
		u := x.GetUint64()
		if u > 1<<63-1 {
			v, _ := NumericFromString(strconv.FormatUint(u, 10))
			return &Literal{V: v, T: TypeNumeric}, nil
		}
		return intLiteral(int64(u)), nil
	case driver.KindFloat64, driver.KindFloat32:
		// PostgreSQL: 1e3 is NUMERIC too (DOUBLE only when NUMERIC cannot hold it).
		if v, ok := NumericFromString(b.literalText(x)); ok {
			return &Literal{V: v, T: TypeNumeric}, nil
		}
		return NewLiteral(Double(x.GetFloat64())), nil
	case driver.KindString, driver.KindBytes:
		return NewLiteral(Varchar(x.GetString())), nil
	case driver.KindBinaryLiteral:
		return NewLiteral(Varchar(string(x.GetBinaryLiteral()))), nil
	case driver.KindMysqlDecimal:
		// PostgreSQL: a number with a point (or too large for BIGINT) is NUMERIC.
		s := b.literalText(x)
		v, ok := NumericFromString(s)
		if !ok {
			return nil, b.errf(CodeInvalidValue, "bad number %s", s)
		}
		return &Literal{V: v, T: TypeNumeric}, nil
	}
	return nil, b.errf(CodeNotSupported, "this literal is not supported")
}

// intLiteral types an integer constant as PostgreSQL does: INT when it fits 32 bits,
// else BIGINT.
func intLiteral(i int64) *Literal {
	if i == int64(int32(i)) {
		return NewLiteral(Int(i))
	}
	return NewLiteral(BigInt(i))
}

// literalText is the text of a numeric literal as the user wrote it (tidb's decimal
// type caps the digits it keeps).
func (b *binder) literalText(x *driver.ValueExpr) string {
	s := ""
	if x.Kind() == driver.KindMysqlDecimal {
		s = x.GetMysqlDecimal().String()
	} else {
		s = strconv.FormatFloat(x.GetFloat64(), 'g', -1, 64)
	}
	if off := x.OriginTextPosition(); b.rw != nil && off >= 0 && off < len(b.rw.text) {
		t := b.rw.text[off:]
		n := 0
		for n < len(t) && (t[n] >= '0' && t[n] <= '9' || t[n] == '.' || (t[n] == 'e' || t[n] == 'E') && n > 0 ||
			(t[n] == '+' || t[n] == '-') && n > 0 && (t[n-1] == 'e' || t[n-1] == 'E')) {
			n++
		}
		if n > 0 {
			if _, ok := NumericFromString(t[:n]); ok {
				return t[:n]
			}
		}
	}
	return s
}

func (b *binder) caseExpr(x *ast.CaseExpr) (Expr, error) {
	c := &Case{}
	var err error
	if x.Value != nil {
		if c.Operand, err = b.expr(x.Value); err != nil {
			return nil, err
		}
	}
	types := []Type{}
	for _, w := range x.WhenClauses {
		we, err := b.expr(w.Expr)
		if err != nil {
			return nil, err
		}
		if c.Operand != nil {
			if _, we, err = coerceForCompare(c.Operand, we); err != nil {
				return nil, b.at(err)
			}
			if !comparableKinds(c.Operand.Type().Kind, we.Type().Kind) {
				return nil, b.errf(CodeTypeMismatch, "CASE compares %s with %s", c.Operand.Type(), we.Type())
			}
		} else if k := we.Type().Kind; k != KindBool && k != KindNull {
			return nil, b.errf(CodeTypeMismatch, "CASE WHEN needs a BOOLEAN condition, not %s", we.Type())
		}
		te, err := b.expr(w.Result)
		if err != nil {
			return nil, err
		}
		c.Whens = append(c.Whens, we)
		c.Thens = append(c.Thens, te)
		types = append(types, te.Type())
	}
	if x.ElseClause != nil {
		if c.Else, err = b.expr(x.ElseClause); err != nil {
			return nil, err
		}
		types = append(types, c.Else.Type())
	}
	b.setPos(x)
	t, ok := Unify(types...)
	if !ok {
		return nil, b.errf(CodeTypeMismatch, "CASE branches have no common type")
	}
	c.T = t
	return c, nil
}

// aggregate binds an aggregate call (its arguments over the input row) and returns a
// reference to its slot in the aggregate row. The aggregate is a built-in of the registry
// (aggs.go) or a user aggregate of the catalog.
func (b *binder) aggregate(a *ast.AggregateFuncExpr) (Expr, error) {
	fn := strings.ToUpper(a.F)
	b.setPos(a)
	def, ok := b.lookupAgg(a.F)
	if !ok {
		return nil, b.errf(CodeNotSupported, "aggregate %s is not supported (COUNT, SUM, AVG, MIN, MAX are)", fn)
	}
	for _, arg := range a.Args {
		if hasAgg(arg) {
			b.setPos(arg)
			return nil, b.errf(CodeGrouping, "aggregate calls cannot be nested")
		}
	}
	saved := b.mode
	b.mode, b.inAgg = modeInput, true
	args, err := b.exprs(a.Args)
	b.mode, b.inAgg = saved, false
	if err != nil {
		return nil, err
	}
	b.setPos(a)
	// COUNT(*) (and COUNT of a constant) counts rows.
	star := false
	if def.Star && len(args) == 1 && !a.Distinct {
		if l, ok := args[0].(*Literal); ok && l.V.K != KindNull {
			star, args = true, nil
		}
	}
	call, err := BindAggCall(def, args, a.Distinct, star)
	if err != nil {
		return nil, b.at(err)
	}
	key := aggKey(call)
	idx := -1
	for i, k := range b.aggStr {
		if k == key {
			idx = i
		}
	}
	if idx < 0 {
		b.aggs = append(b.aggs, call)
		b.aggStr = append(b.aggStr, key)
		idx = len(b.aggs) - 1
	}
	return &ColumnRef{Index: len(b.keys) + b.nWin + idx, Name: key, T: call.T}, nil
}

// aggKey renders an aggregate call as SQL text (also its identity for deduplication).
func aggKey(c AggCall) string {
	switch {
	case c.Star:
		return "COUNT(*)"
	case c.Distinct:
		return c.Func + "(DISTINCT " + c.Arg.String() + ")"
	case c.Arg == nil:
		return c.Func + "()"
	}
	return c.Func + "(" + c.Arg.String() + ")"
}

// String renders an aggregate call as SQL text.
func (c AggCall) String() string { return aggKey(c) }
