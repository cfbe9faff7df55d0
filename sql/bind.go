package sql

import (
	"fmt"
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
	ctx := &bindCtx{input: s.input, rw: s.rw, params: s.Params, syntax: s.syntax, tvfs: s.tvfs, tfns: s.tfns, cat: cat, emitPos: s.emitPos}
	b := ctx.newBinder()
	markUserAggs(s.stmt, cat)
	q, err = b.bindQuery(s.stmt)
	if err != nil {
		return nil, err
	}
	q.Text = s.Text
	q.Emit = s.Emit
	top := q // the query block the statement's clauses belong to
	if f, ok := q.From.(*FromQuery); ok && f.Query.Hidden > 0 {
		top = f.Query // q drops its hidden ORDER BY columns (wrapHidden)
		top.Emit = s.Emit
	}
	if q.Emit == EmitOnClose && top.Window == nil {
		b.pos = s.emitPos
		return nil, b.errf(CodeNotSupported, "EMIT ON WINDOW CLOSE needs a window (TUMBLE, HOP or SESSION)")
	}
	return q, nil
}

// bindCtx is what every query block of a statement shares.
type bindCtx struct {
	input   string
	rw      *rewrite
	params  []Value
	syntax  []streamSyntax
	tvfs    []*windowCall
	tfns    []*tableCall
	cat     Catalog
	emitPos int
	// ctes are the common table expressions in scope, innermost last.
	ctes []cteDef
	// windows numbers the windows of the statement (ColAttr.Window).
	windows int
}

type cteDef struct {
	name string
	q    *Query
}

func (c *bindCtx) newBinder() *binder {
	return &binder{ctx: c, input: c.input, rw: c.rw, params: c.params, syntax: c.syntax, mode: modeInput, pos: c.rw.srcStart}
}

type bindMode uint8

const (
	modeConst bindMode = iota // no columns (VALUES)
	modeInput                 // over the input row
	modeAgg                   // over the aggregate row
)

// binder binds one query block (a SELECT, with its FROM).
type binder struct {
	ctx    *bindCtx
	input  string
	rw     *rewrite
	params []Value
	syntax []streamSyntax // the pre-pass's placeholder calls, by N of __rsql_N
	mode   bindMode
	pos    int // offset (in the input) of the node being bound, for errors

	// FROM
	from     From
	fromName string   // for messages
	relNames []string // names a column may be qualified with (one relation)
	// quals, for a join, are the names each column of the scope may be qualified with.
	quals  [][]string
	base   Schema // the FROM's row
	scope  Schema // the input row: base, plus window_start/window_end of a TUMBLE/HOP table function
	attrs  []ColAttr
	tvf    *windowCall
	window *Window

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

// bindQuery binds a SELECT or a set operation (UNION ALL), with its WITH clause.
func (b *binder) bindQuery(n ast.Node) (*Query, error) {
	switch x := n.(type) {
	case *ast.SelectStmt:
		return b.bindSelect(x)
	case *ast.SetOprStmt:
		return b.bindSetOpr(x.With, x.SelectList, x.OrderBy, x.Limit)
	case *ast.SetOprSelectList:
		return b.bindSetOpr(x.With, x, x.OrderBy, x.Limit)
	case *ast.SubqueryExpr:
		return b.bindQuery(x.Query)
	}
	return nil, b.errf(CodeNotSupported, "this kind of query is not supported here")
}

// withCTEs binds a WITH clause: each common table expression is bound in order (it may read
// the ones before it) and is in scope until pop is called.
func (b *binder) withCTEs(w *ast.WithClause) (pop func(), err error) {
	n := len(b.ctx.ctes)
	pop = func() { b.ctx.ctes = b.ctx.ctes[:n] }
	if w == nil {
		return pop, nil
	}
	if w.IsRecursive {
		b.setPos(w)
		return pop, b.errf(CodeNotSupported, "WITH RECURSIVE is not supported")
	}
	for _, c := range w.CTEs {
		b.setPos(c)
		q, err := b.ctx.newBinder().bindQuery(c.Query)
		if err != nil {
			pop()
			return pop, err
		}
		if len(c.ColNameList) > 0 {
			if len(c.ColNameList) != len(q.Names) {
				pop()
				return pop, b.errf(CodeSyntax, "WITH %s names %d columns but its query has %d", c.Name.O, len(c.ColNameList), len(q.Names))
			}
			cq := *q
			cq.Names = make([]string, len(q.Names))
			for i, cn := range c.ColNameList {
				cq.Names[i] = cn.O
			}
			q = &cq
		}
		b.ctx.ctes = append(b.ctx.ctes, cteDef{name: c.Name.L, q: q})
	}
	return pop, nil
}

func (b *binder) cte(name string) (*Query, bool) {
	for i := len(b.ctx.ctes) - 1; i >= 0; i-- {
		if b.ctx.ctes[i].name == strings.ToLower(name) {
			return b.ctx.ctes[i].q, true
		}
	}
	return nil, false
}

// bindSetOpr binds UNION ALL (and refuses UNION, EXCEPT, INTERSECT): a query reading the
// union of its inputs, with the first input's column names and types every input can be
// cast to.
func (b *binder) bindSetOpr(with *ast.WithClause, list *ast.SetOprSelectList, order *ast.OrderByClause, limit *ast.Limit) (*Query, error) {
	pop, err := b.withCTEs(with)
	if err != nil {
		return nil, err
	}
	defer pop()
	var inputs []*Query
	var add func(l *ast.SetOprSelectList) error
	add = func(l *ast.SetOprSelectList) error {
		if l.With != nil {
			pop2, err := b.withCTEs(l.With)
			if err != nil {
				return err
			}
			defer pop2()
		}
		for i, n := range l.Selects {
			var op *ast.SetOprType
			switch x := n.(type) {
			case *ast.SelectStmt:
				op = x.AfterSetOperator
			case *ast.SetOprSelectList:
				op = x.AfterSetOperator
			}
			if i > 0 && op != nil && *op != ast.UnionAll {
				b.setPos(n)
				if *op == ast.Union {
					return b.errf(CodeNotSupported, "UNION (without ALL) needs de-duplication state over an unbounded stream: use UNION ALL, and SELECT DISTINCT over window columns to de-duplicate per window")
				}
				return b.errf(CodeNotSupported, "%s is not supported: use UNION ALL", op.String())
			}
			if x, ok := n.(*ast.SetOprSelectList); ok && x.OrderBy == nil && x.Limit == nil && x.With == nil {
				if err := add(x); err != nil {
					return err
				}
				continue
			}
			q, err := b.ctx.newBinder().bindQuery(n)
			if err != nil {
				return err
			}
			inputs = append(inputs, q)
		}
		return nil
	}
	if err := add(list); err != nil {
		return nil, err
	}
	if len(inputs) == 1 && order == nil && limit == nil {
		return inputs[0], nil
	}
	u := &FromUnion{Inputs: inputs}
	first := inputs[0]
	u.Types = make([]Type, len(first.Select))
	for i, e := range first.Select {
		u.Types[i] = e.Type()
	}
	for k, in := range inputs[1:] {
		if len(in.Select) != len(first.Select) {
			b.setPos(list.Selects[k+1])
			return nil, b.errf(CodeSyntax, "each UNION query must have the same number of columns: the first has %d, query %d has %d", len(first.Select), k+2, len(in.Select))
		}
		for i, e := range in.Select {
			t, ok := unionType(u.Types[i], e.Type())
			if !ok {
				b.setPos(list.Selects[k+1])
				return nil, b.errf(CodeTypeMismatch, "UNION types %s and %s cannot be matched (column %d, %s)", u.Types[i], e.Type(), i+1, first.Names[i])
			}
			u.Types[i] = t
		}
	}
	q := &Query{From: u, Limit: -1}
	attrs := make([]ColAttr, len(u.Types))
	for i := range attrs {
		attrs[i] = first.attr(i)
		for _, in := range inputs[1:] {
			a := in.attr(i)
			attrs[i].Time = attrs[i].Time && a.Time
			if a.Window != attrs[i].Window || a.End != attrs[i].End {
				attrs[i].Window, attrs[i].End = 0, false
			}
		}
	}
	for i, t := range u.Types {
		q.Select = append(q.Select, &ColumnRef{Index: i, Name: first.Names[i], T: t})
		q.Names = append(q.Names, first.Names[i])
	}
	q.Attrs = attrs
	if err := b.orderLimit(q, order, limit, nil); err != nil {
		return nil, err
	}
	return q, nil
}

// unionType is the type a UNION column takes from two inputs' types.
func unionType(a, b Type) (Type, bool) {
	switch {
	case a.Kind == KindNull:
		return b, true
	case b.Kind == KindNull || a == b:
		return a, true
	case a.Kind == b.Kind && a.Kind != KindDecimal:
		return a, true
	case a.Kind.IsNumeric() && b.Kind.IsNumeric():
		switch {
		case a.Kind == KindDouble || b.Kind == KindDouble:
			return TypeDouble, true
		case a.Kind == KindDecimal || b.Kind == KindDecimal:
			scale := max(a.Scale, b.Scale)
			return Type{Kind: KindDecimal, Precision: 18, Scale: scale}, true
		default:
			return TypeBigInt, true
		}
	}
	return a, false
}

// attr is ColAttr of output column i (none when unknown).
func (q *Query) attr(i int) ColAttr {
	if i < len(q.Attrs) {
		return q.Attrs[i]
	}
	return ColAttr{}
}

func (b *binder) bindSelect(sel *ast.SelectStmt) (*Query, error) {
	q := &Query{Limit: -1}
	switch {
	case sel.SelectIntoOpt != nil:
		return nil, b.errf(CodeNotSupported, "SELECT ... INTO is not supported: use INSERT INTO or CREATE STREAM ... AS")
	case len(sel.WindowSpecs) > 0:
		return nil, b.errf(CodeNotSupported, "WINDOW clauses are not supported: use TUMBLE, HOP or SESSION")
	case sel.Kind != ast.SelectStmtKindSelect:
		return nil, b.errf(CodeNotSupported, "only SELECT queries are supported here")
	}
	pop, err := b.withCTEs(sel.With)
	if err != nil {
		return nil, err
	}
	defer pop()
	if err := b.bindFrom(sel); err != nil {
		return nil, err
	}
	q.From = b.from
	q.Distinct = sel.Distinct

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
	if b.window != nil && b.window.id == 0 {
		b.ctx.windows++
		b.window.id = b.ctx.windows
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
				if c.Name == ChangeColumn {
					continue // a table's change column is read by name only
				}
				if t := f.WildCard.Table.O; t != "" && b.quals != nil {
					ok := false
					for _, q := range b.quals[i] {
						ok = ok || strings.EqualFold(q, t)
					}
					if !ok {
						continue
					}
				}
				q.Select = append(q.Select, &ColumnRef{Index: i, Name: c.Name, T: c.Type})
				q.Names = append(q.Names, c.Name)
			}
			continue
		}
		if wf, ok := f.Expr.(*ast.WindowFuncExpr); ok && strings.EqualFold(wf.Name, "row_number") {
			if err := b.rowNumber(q, wf); err != nil {
				return nil, err
			}
			q.Select = append(q.Select, &Literal{V: Value{K: KindNull}, T: TypeBigInt})
			name := f.AsName.O
			if name == "" {
				name = "row_number"
			}
			q.Names = append(q.Names, name)
			continue
		}
		if wf, ok := f.Expr.(*ast.WindowFuncExpr); ok && overAggNames[strings.ToUpper(wf.Name)] {
			if aggregated {
				b.setPos(wf)
				return nil, b.errf(CodeNotSupported, "%s() OVER in a query that aggregates (GROUP BY or aggregates) is not supported: aggregate in a derived table and apply the window in the query over it", strings.ToUpper(wf.Name))
			}
			call, err := b.overAgg(q, wf)
			if err != nil {
				return nil, err
			}
			q.Select = append(q.Select, &Literal{V: Value{K: KindNull}, T: call.T})
			name := f.AsName.O
			if name == "" {
				name = strings.ToLower(wf.Name)
			}
			q.Names = append(q.Names, name)
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
	q.Attrs = b.outputAttrs(q)
	if q.Distinct && q.RowNumber != nil {
		b.setPos(sel)
		return nil, b.errf(CodeNotSupported, "SELECT DISTINCT with ROW_NUMBER() is not supported")
	}
	if q.Over != nil {
		b.setPos(sel)
		switch {
		case q.RowNumber != nil:
			return nil, b.errf(CodeNotSupported, "ROW_NUMBER() and aggregates OVER a window in one query are not supported: compute one in a derived table")
		case q.Distinct:
			return nil, b.errf(CodeNotSupported, "SELECT DISTINCT with aggregates OVER a window is not supported: apply DISTINCT in a query over it")
		case sel.OrderBy != nil || sel.Limit != nil:
			return nil, b.errf(CodeNotSupported, "ORDER BY and LIMIT in a query with aggregates OVER a window are not supported: order or limit in a query over it")
		}
	}
	if err := b.orderLimit(q, sel.OrderBy, sel.Limit, sel); err != nil {
		return nil, err
	}
	return wrapHidden(q), nil
}

// byItems takes the NULLS FIRST/LAST markers (synNulls, rewrite.go) out of an ORDER BY
// list: the items and, for each, its NullsOrder.
func (b *binder) byItems(items []*ast.ByItem) ([]*ast.ByItem, []NullsOrder, error) {
	var out []*ast.ByItem
	var nulls []NullsOrder
	for _, it := range items {
		if f, ok := it.Expr.(*ast.FuncCallExpr); ok {
			if syn := syntaxOf(b.syntax, f); syn != nil && syn.kind == synNulls {
				if len(out) == 0 || nulls[len(nulls)-1] != NullsDefault {
					b.setPos(f)
					return nil, nil, b.errf(CodeSyntax, "NULLS FIRST or NULLS LAST must follow an ORDER BY item")
				}
				nulls[len(nulls)-1] = NullsLast
				if syn.text {
					nulls[len(nulls)-1] = NullsFirst
				}
				continue
			}
		}
		out = append(out, it)
		nulls = append(nulls, NullsDefault)
	}
	return out, nulls, nil
}

// orderLimit binds ORDER BY, LIMIT and OFFSET. An ORDER BY item is a result column (by
// name or position) or an expression of them; else, as in PostgreSQL, an expression over
// the select list's own input (sel, nil for a UNION), computed as a hidden column the
// query drops after sorting (wrapHidden).
func (b *binder) orderLimit(q *Query, order *ast.OrderByClause, limit *ast.Limit, sel *ast.SelectStmt) error {
	if order != nil {
		out := q.OutputSchema()
		ob := &binder{ctx: b.ctx, input: b.input, rw: b.rw, params: b.params, syntax: b.syntax, mode: modeInput,
			from: &FromNothing{}, fromName: "the query's result", base: out, scope: out, clause: "ORDER BY"}
		items, nulls, err := b.byItems(order.Items)
		if err != nil {
			return err
		}
		for k, it := range items {
			ob.setPos(it.Expr)
			var e Expr
			if pe, ok := it.Expr.(*ast.PositionExpr); ok {
				if pe.P != nil || pe.N < 1 || pe.N > len(out) {
					return ob.errf(CodeUnknownColumn, "ORDER BY position %d is not in the select list", pe.N)
				}
				e = &ColumnRef{Index: pe.N - 1, Name: out[pe.N-1].Name, T: out[pe.N-1].Type}
			} else if sel != nil && q.Aggregated && hasAgg(it.Expr) {
				// An aggregate the select list may not compute: over the groups.
				var err error
				if e, err = b.hiddenSortColumn(q, sel, it.Expr); err != nil {
					return err
				}
			} else {
				var err error
				if e, err = ob.expr(it.Expr); err != nil {
					se, ok := err.(*Error)
					if !ok || se.Code != CodeUnknownColumn && se.Code != CodeUnknownTable {
						return err
					}
					if sel == nil {
						se.Message += " (ORDER BY of a UNION reads its result columns: order by one of them)"
						return err
					}
					if e, err = b.hiddenSortColumn(q, sel, it.Expr); err != nil {
						return err
					}
				}
			}
			q.OrderBy = append(q.OrderBy, SortKey{Expr: e, Desc: it.Desc, Nulls: nulls[k]})
		}
	}
	if limit != nil {
		saved := b.mode
		b.mode = modeConst
		defer func() { b.mode = saved }()
		intOf := func(n ast.ExprNode, what string) (int64, error) {
			b.setPos(n)
			e, err := b.expr(n)
			if err != nil {
				return 0, err
			}
			v, err := Eval(e, nil)
			if err != nil {
				return 0, b.at(err)
			}
			if !v.K.IsInteger() || v.I < 0 {
				return 0, b.errf(CodeTypeMismatch, "%s must be a non-negative integer", what)
			}
			return v.I, nil
		}
		if limit.Count != nil {
			n, err := intOf(limit.Count, "LIMIT")
			if err != nil {
				return err
			}
			if n != math.MaxInt64 { // noLimit: OFFSET alone, LIMIT ALL (rewrite.go)
				q.Limit = n
			}
		}
		if limit.Offset != nil {
			n, err := intOf(limit.Offset, "OFFSET")
			if err != nil {
				return err
			}
			q.Offset = n
		}
	}
	return nil
}

// hiddenSortColumn binds an ORDER BY expression that is not over the result columns
// over the select list's input (in the select list's mode: over the groups when the query
// aggregates): a select-list column that computes the same, or else a hidden column it
// appends to the select list; it returns a reference to the column. q.Hidden counts the
// hidden ones.
func (b *binder) hiddenSortColumn(q *Query, sel *ast.SelectStmt, n ast.ExprNode) (Expr, error) {
	b.setPos(n)
	switch {
	case q.Distinct:
		return nil, b.errf(CodeInvalidColumnReference, "for SELECT DISTINCT, ORDER BY expressions must appear in the select list")
	case q.RowNumber != nil:
		return nil, b.errf(CodeNotSupported, "ORDER BY an expression not in the select list of a query with ROW_NUMBER() is not supported: select it")
	}
	saved := b.clause
	b.clause = "ORDER BY"
	e, err := b.expr(n)
	b.clause = saved
	if err != nil {
		return nil, err
	}
	// An expression the select list computes is that column (ORDER BY t.col).
	ks := keyString(e)
	for i, s := range q.Select[:len(q.Select)-q.Hidden] {
		if keyString(s) == ks {
			return &ColumnRef{Index: i, Name: q.Names[i], T: s.Type()}, nil
		}
	}
	q.Select = append(q.Select, e)
	q.Names = append(q.Names, fmt.Sprintf("%ssort_%d", syntaxPrefix, q.Hidden))
	q.Hidden++
	q.Aggs = b.aggs
	q.Attrs = b.outputAttrs(q)
	i := len(q.Select) - 1
	return &ColumnRef{Index: i, Name: q.Names[i], T: e.Type()}, nil
}

// wrapHidden returns a query that reads q, sorted and limited with its hidden ORDER BY
// columns, and gives its other columns: the hidden ones are dropped after sorting.
func wrapHidden(q *Query) *Query {
	if q.Hidden == 0 {
		return q
	}
	n := len(q.Select) - q.Hidden
	out := &Query{From: &FromQuery{Query: q, Name: syntaxPrefix + "sorted"}, Limit: -1}
	for i := 0; i < n; i++ {
		out.Select = append(out.Select, &ColumnRef{Index: i, Name: q.Names[i], T: q.Select[i].Type()})
		out.Names = append(out.Names, q.Names[i])
	}
	out.Attrs = append([]ColAttr(nil), q.Attrs[:min(n, len(q.Attrs))]...)
	return out
}

// rowNumber binds ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) of the select list;
// its expressions are over the same row as the select list.
func (b *binder) rowNumber(q *Query, wf *ast.WindowFuncExpr) error {
	b.setPos(wf)
	switch {
	case q.RowNumber != nil:
		return b.errf(CodeNotSupported, "only one ROW_NUMBER() per query")
	case len(wf.Args) > 0:
		return b.errf(CodeSyntax, "ROW_NUMBER() takes no arguments")
	case wf.Spec.Name.O != "" || wf.Spec.Ref.O != "":
		return b.errf(CodeNotSupported, "named windows are not supported: write OVER (PARTITION BY ... ORDER BY ...)")
	case wf.Spec.Frame != nil:
		return b.errf(CodeNotSupported, "window frames are not supported with ROW_NUMBER()")
	case wf.Spec.OrderBy == nil:
		return b.errf(CodeNotSupported, "ROW_NUMBER() needs ORDER BY in its OVER clause")
	}
	rn := &RowNumber{Col: len(q.Select)}
	if wf.Spec.PartitionBy != nil {
		for _, it := range wf.Spec.PartitionBy.Items {
			e, err := b.expr(it.Expr)
			if err != nil {
				return err
			}
			rn.Partition = append(rn.Partition, e)
			rn.PartAttrs = append(rn.PartAttrs, b.rowAttr(q, e))
		}
	}
	items, nulls, err := b.byItems(wf.Spec.OrderBy.Items)
	if err != nil {
		return err
	}
	for k, it := range items {
		e, err := b.expr(it.Expr)
		if err != nil {
			return err
		}
		rn.Order = append(rn.Order, SortKey{Expr: e, Desc: it.Desc, Nulls: nulls[k]})
		rn.OrderAttrs = append(rn.OrderAttrs, b.rowAttr(q, e))
	}
	q.RowNumber = rn
	return nil
}

// overAggNames are the aggregates that may run over a window of rows (AGG(x) OVER (...)).
var overAggNames = map[string]bool{"AVG": true, "SUM": true, "COUNT": true, "MIN": true, "MAX": true}

// overAgg binds an aggregate over a window of rows, AGG(x) OVER (PARTITION BY ... ORDER BY
// ... ROWS BETWEEN n PRECEDING AND CURRENT ROW), of the select list (docs/sql.md, "Window
// aggregates"); every such call of a query must name the same window. Its expressions are
// over the input row.
func (b *binder) overAgg(q *Query, wf *ast.WindowFuncExpr) (AggCall, error) {
	fn := strings.ToUpper(wf.Name)
	b.setPos(wf)
	spec := wf.Spec
	switch {
	case spec.Name.O != "" || spec.Ref.O != "":
		return AggCall{}, b.errf(CodeNotSupported, "named windows are not supported: write OVER (PARTITION BY ... ORDER BY ... ROWS BETWEEN n PRECEDING AND CURRENT ROW)")
	case wf.Distinct:
		return AggCall{}, b.errf(CodeNotSupported, "%s(DISTINCT ...) OVER a window is not supported", fn)
	case wf.IgnoreNull || wf.FromLast:
		return AggCall{}, b.errf(CodeNotSupported, "IGNORE NULLS and FROM LAST are not supported")
	case spec.OrderBy == nil:
		return AggCall{}, b.errf(CodeNotSupported, "%s() OVER needs ORDER BY in its window (and ROWS BETWEEN n PRECEDING AND CURRENT ROW)", fn)
	case spec.Frame == nil:
		return AggCall{}, b.errf(CodeNotSupported, "%s() OVER (... ORDER BY ...) without a frame means RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW, which is not supported: write ROWS BETWEEN n PRECEDING AND CURRENT ROW", fn)
	case spec.Frame.Type != ast.Rows:
		return AggCall{}, b.errf(CodeNotSupported, "only ROWS frames are supported in OVER (RANGE and GROUPS are not): write ROWS BETWEEN n PRECEDING AND CURRENT ROW")
	}
	start, end := spec.Frame.Extent.Start, spec.Frame.Extent.End
	if end.Type != ast.CurrentRow || start.Type == ast.Following || start.UnBounded || start.Unit != 0 {
		return AggCall{}, b.errf(CodeNotSupported, "the frame must be ROWS BETWEEN n PRECEDING AND CURRENT ROW (or ROWS n PRECEDING) with a constant n; other frames are not supported")
	}
	var preceding int64
	if start.Type == ast.Preceding {
		saved := b.mode
		b.mode = modeConst
		e, err := b.expr(start.Expr)
		b.mode = saved
		if err != nil {
			return AggCall{}, err
		}
		v, err := Eval(e, nil)
		if err != nil {
			return AggCall{}, b.at(err)
		}
		switch {
		case v.K == KindNull:
			b.setPos(wf)
			return AggCall{}, b.errf(CodeInvalidFrameOffset, "frame starting offset must not be NULL")
		case !v.K.IsInteger():
			b.setPos(wf)
			return AggCall{}, b.errf(CodeTypeMismatch, "argument of ROWS must be an integer, not %s", e.Type())
		case v.I < 0:
			b.setPos(wf)
			return AggCall{}, b.errf(CodeInvalidFrameOffset, "frame starting offset must not be negative")
		}
		preceding = v.I
	}
	saved := b.mode
	b.mode = modeInput
	defer func() { b.mode = saved }()
	w := &Over{Preceding: preceding}
	if spec.PartitionBy != nil {
		for _, it := range spec.PartitionBy.Items {
			e, err := b.expr(it.Expr)
			if err != nil {
				return AggCall{}, err
			}
			w.Partition = append(w.Partition, e)
		}
	}
	items, nulls, err := b.byItems(spec.OrderBy.Items)
	if err != nil {
		return AggCall{}, err
	}
	for k, it := range items {
		if nulls[k] != NullsDefault {
			b.setPos(it.Expr)
			return AggCall{}, b.errf(CodeNotSupported, "NULLS FIRST/LAST in the ORDER BY of an aggregate OVER a window is not supported: nulls sort last ascending and first descending")
		}
		e, err := b.expr(it.Expr)
		if err != nil {
			return AggCall{}, err
		}
		w.Order = append(w.Order, SortKey{Expr: e, Desc: it.Desc})
	}
	var parts []string
	for _, e := range w.Partition {
		parts = append(parts, e.String())
	}
	var order []string
	for _, k := range w.Order {
		t := k.Expr.String()
		if k.Desc {
			t += " DESC"
		}
		order = append(order, t)
	}
	w.Text = fmt.Sprintf("PARTITION BY %s ORDER BY %s ROWS BETWEEN %d PRECEDING AND CURRENT ROW", strings.Join(parts, ", "), strings.Join(order, ", "), preceding)
	if len(w.Partition) == 0 {
		w.Text = fmt.Sprintf("ORDER BY %s ROWS BETWEEN %d PRECEDING AND CURRENT ROW", strings.Join(order, ", "), preceding)
	}
	if q.Over != nil && q.Over.Text != w.Text {
		b.setPos(wf)
		return AggCall{}, b.errf(CodeNotSupported, "aggregates OVER different windows in one query are not supported (%s; %s): compute one in a derived table", q.Over.Text, w.Text)
	}
	def, ok := LookupAgg(fn)
	if !ok {
		return AggCall{}, b.errf(CodeNotSupported, "aggregate %s is not supported OVER a window", fn)
	}
	for _, a := range wf.Args {
		if hasAgg(a) || hasWindowFunc(a) {
			b.setPos(a)
			return AggCall{}, b.errf(CodeGrouping, "aggregate calls cannot be nested in a window aggregate")
		}
	}
	args, err := b.exprs(wf.Args)
	if err != nil {
		return AggCall{}, err
	}
	b.setPos(wf)
	star := false
	if def.Star && len(args) == 1 {
		if l, ok := args[0].(*Literal); ok && l.V.K != KindNull {
			star, args = true, nil
		}
	}
	call, err := BindAggCall(def, args, false, star)
	if err != nil {
		return AggCall{}, b.at(err)
	}
	if q.Over == nil {
		q.Over = w
	}
	q.Over.Calls = append(q.Over.Calls, OverCall{Col: len(q.Select), Agg: call})
	return call, nil
}

// hasWindowFunc reports whether the tree holds a window function call.
func hasWindowFunc(n ast.Node) bool {
	v := &windowFuncFinder{}
	n.Accept(v)
	return v.found
}

type windowFuncFinder struct{ found bool }

func (v *windowFuncFinder) Enter(n ast.Node) (ast.Node, bool) {
	if _, ok := n.(*ast.WindowFuncExpr); ok {
		v.found = true
	}
	return n, v.found
}
func (v *windowFuncFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// rowAttr is the ColAttr of an expression over the row the select list reads (the input
// row, or the aggregate row when the query aggregates): a column's, or none.
func (b *binder) rowAttr(q *Query, e Expr) ColAttr {
	c, ok := e.(*ColumnRef)
	if !ok {
		return ColAttr{}
	}
	if b.mode != modeAgg {
		if c.Index < len(b.attrs) {
			return b.attrs[c.Index]
		}
		return ColAttr{}
	}
	probe := &Query{GroupBy: b.keys, Window: b.window, Aggregated: true, Aggs: b.aggs, Emit: q.Emit,
		Select: []Expr{c}}
	return b.outputAttrs(probe)[0]
}

// outputAttrs derives the output columns' ColAttr: a column that passes an input column
// through keeps its attribute; the window bounds of a windowed aggregation are a window of
// their own, and its window_end is an event-time attribute (a window's row is emitted
// before the watermark that closed it moves on).
func (b *binder) outputAttrs(q *Query) []ColAttr {
	out := make([]ColAttr, len(q.Select))
	var aggRow []ColAttr // attributes of the aggregate row
	if q.Aggregated {
		aggRow = make([]ColAttr, len(q.GroupBy)+b.nWin+len(q.Aggs))
		for i, k := range q.GroupBy {
			if c, ok := k.(*ColumnRef); ok && c.Index < len(b.attrs) {
				aggRow[i] = b.attrs[c.Index]
				aggRow[i].Time = false // rows of a group come when it changes, not in time order
			}
		}
		if w := q.Window; w != nil && q.Emit != EmitChanges {
			aggRow[len(q.GroupBy)] = ColAttr{Window: w.id}
			aggRow[len(q.GroupBy)+1] = ColAttr{Window: w.id, End: true, Time: true}
		}
	}
	for i, e := range q.Select {
		c, ok := e.(*ColumnRef)
		if !ok {
			continue
		}
		if q.Aggregated {
			if c.Index < len(aggRow) {
				out[i] = aggRow[c.Index]
			}
		} else if c.Index < len(b.attrs) {
			out[i] = b.attrs[c.Index]
		}
	}
	return out
}

func (b *binder) knownQualifier(t string) bool {
	for _, n := range b.relNames {
		if strings.EqualFold(n, t) {
			return true
		}
	}
	for _, qs := range b.quals {
		for _, n := range qs {
			if strings.EqualFold(n, t) {
				return true
			}
		}
	}
	return false
}

// lookupColumn finds a column of the scope by name and, when given, qualifier: its index,
// or -1. Two columns of a join that match are ambiguous (42702).
func (b *binder) lookupColumn(qual, name string) (int, error) {
	found := -1
	for i, c := range b.scope {
		if !strings.EqualFold(c.Name, name) {
			continue
		}
		if b.quals == nil {
			// One relation whose columns share a name: a derived table or view with two
			// count columns, as PostgreSQL allows in a result.
			if found >= 0 {
				return -1, b.errf(CodeAmbiguousColumn, "column reference %q is ambiguous: %s has more than one column named %s (give them distinct aliases with AS)", name, b.fromName, name)
			}
			found = i
			continue
		}
		if qual != "" {
			ok := false
			for _, q := range b.quals[i] {
				ok = ok || strings.EqualFold(q, qual)
			}
			if !ok {
				continue
			}
		}
		if found >= 0 {
			return -1, b.errf(CodeAmbiguousColumn, "column reference %s is ambiguous: qualify it with its relation's name", name)
		}
		found = i
	}
	return found, nil
}

// keyString identifies an expression for matching group keys: its text with each column
// reference's index (a join may have two columns of one name).
func keyString(e Expr) string {
	r, _ := Transform(e, func(x Expr) (Expr, error) {
		if c, ok := x.(*ColumnRef); ok {
			return &ColumnRef{Index: c.Index, Name: c.Name + "#" + strconv.Itoa(c.Index), T: c.T}, nil
		}
		return x, nil
	})
	return r.String()
}

// bindFrom resolves FROM: a stream or view, a common table expression, or a derived table,
// optionally through a window table function.
func (b *binder) bindFrom(sel *ast.SelectStmt) error {
	if sel.From == nil || sel.From.TableRefs == nil {
		// SELECT without FROM: constants and session functions (version(), ...), which
		// clients send on connect. The query reads one empty row (Query.IsConstant).
		b.from, b.fromName = &FromNothing{}, "the query"
		return nil
	}
	j := sel.From.TableRefs
	if j.Right != nil {
		return b.bindJoinFrom(j)
	}
	ts, ok := j.Left.(*ast.TableSource)
	if !ok {
		if inner, ok := j.Left.(*ast.Join); ok {
			return b.bindJoinFrom(inner)
		}
		return b.errf(CodeNotSupported, "this FROM clause is not supported")
	}
	return b.bindTableSource(ts)
}

// bindTableSource binds one relation of FROM (a stream, table or view, a CTE, a derived
// table; through a window table function or not) as the binder's FROM.
func (b *binder) bindTableSource(ts *ast.TableSource) error {
	alias := ts.AsName.O
	var tvf *windowCall
	if i, ok := tvfIndex(alias); ok && i < len(b.ctx.tvfs) {
		tvf = b.ctx.tvfs[i]
		alias = tvf.alias
	}
	var attrs []ColAttr
	switch src := ts.Source.(type) {
	case *ast.TableName:
		b.setPos(src)
		name := src.Name.O
		pos := b.findWord(name)
		if tvf != nil {
			pos = tvf.pos
		}
		if src.Schema.O != "" {
			b.pos = pos
			return b.errf(CodeNotSupported, "schema-qualified names are not supported: %s.%s", src.Schema.O, name)
		}
		if q, ok := b.cte(name); ok {
			b.from = &FromQuery{Query: q, Name: name}
			attrs = append([]ColAttr(nil), q.Attrs...)
		} else {
			rel, ok := b.ctx.cat.Relation(name)
			if !ok || rel == nil {
				b.pos = pos
				return b.errf(CodeUnknownTable, "unknown stream or view %s", name)
			}
			b.from = &FromRelation{Rel: rel}
			attrs = make([]ColAttr, len(rel.Schema))
			if rel.EventTime >= 0 && rel.EventTime < len(attrs) {
				attrs[rel.EventTime].Time = true
			}
			name = rel.Name
		}
		b.fromName = name
		b.relNames = []string{name, src.Name.O}
		if alias != "" {
			b.relNames = []string{alias}
		}
	case *ast.SelectStmt, *ast.SetOprStmt:
		q, err := b.ctx.newBinder().bindQuery(src)
		if err != nil {
			return err
		}
		b.from = &FromQuery{Query: q, Name: alias}
		attrs = append([]ColAttr(nil), q.Attrs...)
		b.fromName = "the subquery"
		if alias != "" {
			b.fromName = alias
			b.relNames = []string{alias}
		}
	default:
		return b.errf(CodeNotSupported, "joins are not supported")
	}
	b.base = b.from.Schema()
	b.scope = b.base
	for len(attrs) < len(b.base) {
		attrs = append(attrs, ColAttr{})
	}
	b.attrs = attrs
	if w := tvf; w != nil {
		b.tvf = w
		i := b.base.Index(w.timeCol)
		b.pos = w.timePos
		if i < 0 {
			return b.errf(CodeUnknownColumn, "column %s does not exist in %s", w.timeCol, b.fromName)
		}
		if k := b.base[i].Type.Kind; k != KindTimestamp {
			return b.errf(CodeTypeMismatch, "window time column %s must be TIMESTAMP, not %s", w.timeCol, k)
		}
		if err := b.checkEventTime(i); err != nil {
			return err
		}
		b.ctx.windows++
		b.window = &Window{Kind: w.kind, TimeCol: i, Size: w.size, Slide: w.slide, Gap: w.gap, TVF: true, id: b.ctx.windows}
		for _, wc := range []string{"window_start", "window_end"} {
			if b.base.Index(wc) >= 0 {
				b.pos = w.pos
				n := w.kind.String()
				return b.errf(CodeNotSupported, "%s already has a column %s: use GROUP BY %s(...) with %s_START/%s_END instead of the table function", b.fromName, wc, n, n, n)
			}
		}
		if w.kind != WindowSession {
			sc := make(Schema, 0, len(b.base)+2)
			sc = append(sc, b.base...)
			sc = append(sc, Column{Name: "window_start", Type: TypeTimestamp}, Column{Name: "window_end", Type: TypeTimestamp})
			b.scope = sc
			b.attrs = append(b.attrs, ColAttr{Window: b.window.id}, ColAttr{Window: b.window.id, End: true})
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

// checkEventTime refuses a window over column col when the FROM has an event-time
// attribute (a WATERMARK FOR column, passed through) and col is not one.
func (b *binder) checkEventTime(col int) error {
	if col < len(b.attrs) && b.attrs[col].Time {
		return nil
	}
	for i, a := range b.attrs {
		if a.Time && i < len(b.base) {
			if rel, ok := b.from.(*FromRelation); ok && rel.Rel.EventTime == i {
				return b.errf(CodeNotSupported, "windows must use the event-time column %s declared by WATERMARK FOR", b.base[i].Name)
			}
			return b.errf(CodeNotSupported, "windows must use an event-time column of %s (%s): the WATERMARK FOR column passed through, or the window_end of an inner windowed aggregation", b.fromName, b.base[i].Name)
		}
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
		if k, f := syntaxKindOf(b.syntax, n); k == synWindow {
			if err := b.groupWindow(f, syntaxOf(b.syntax, f).window); err != nil {
				return err
			}
			continue
		}
		if c, ok := n.(*ast.ColumnNameExpr); ok && b.tvf != nil {
			nm := c.Name.Name.L
			if (nm == "window_start" || nm == "window_end") && b.base.Index(nm) < 0 {
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
		s := keyString(e)
		dup := false
		for _, k := range b.keyStr {
			dup = dup || k == s
		}
		if !dup {
			b.keys = append(b.keys, e)
			b.keyStr = append(b.keyStr, s)
		}
	}
	b.givenWindow()
	return nil
}

// givenWindow makes GROUP BY over both bounds of one window of the FROM (window_start and
// window_end of an inner windowed aggregation or window table function) an aggregation over
// that window: it closes when the watermark passes its end. The two keys become the
// window.
func (b *binder) givenWindow() {
	if b.window != nil {
		return
	}
	start, end := -1, -1
	for i, k := range b.keys {
		c, ok := k.(*ColumnRef)
		if !ok || c.Index >= len(b.attrs) || b.attrs[c.Index].Window == 0 {
			continue
		}
		a := b.attrs[c.Index]
		if a.End && end < 0 {
			end = i
		} else if !a.End && start < 0 {
			start = i
		}
	}
	if start < 0 || end < 0 {
		return
	}
	sc, ec := b.keys[start].(*ColumnRef), b.keys[end].(*ColumnRef)
	if b.attrs[sc.Index].Window != b.attrs[ec.Index].Window {
		return
	}
	b.window = &Window{Kind: WindowGiven, TimeCol: sc.Index, EndCol: ec.Index, id: b.attrs[sc.Index].Window}
	var keys []Expr
	var strs []string
	for i, k := range b.keys {
		if i != start && i != end {
			keys = append(keys, k)
			strs = append(strs, b.keyStr[i])
		}
	}
	b.keys, b.keyStr = keys, strs
}

// groupWindow binds GROUP BY TUMBLE(ts, size) | HOP(ts, slide, size) | SESSION(ts, gap).
func (b *binder) groupWindow(f *ast.FuncCallExpr, kind WindowKind) error {
	name, want := windowUsage(kind)
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

// windowKindOf returns the window of TUMBLE_START and friends.
func windowKindOf(fn string) WindowKind {
	switch fn {
	case "tumble_start", "tumble_end":
		return WindowTumble
	case "hop_start", "hop_end":
		return WindowHop
	}
	return WindowSession
}

// windowUsage returns the name of a group-by window function and its number of
// arguments.
func windowUsage(k WindowKind) (string, int) {
	switch k {
	case WindowTumble:
		return "TUMBLE", 2
	case WindowHop:
		return "HOP", 3
	}
	return "SESSION", 2
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
	i := b.base.Index(c.Name.Name.O)
	if i < 0 {
		return 0, nil, b.errf(CodeUnknownColumn, "column %s does not exist in %s", c.Name.Name.O, b.fromName)
	}
	if k := b.base[i].Type.Kind; k != KindTimestamp {
		return 0, nil, b.errf(CodeTypeMismatch, "window time column %s must be TIMESTAMP, not %s", c.Name.Name.O, k)
	}
	if err := b.checkEventTime(i); err != nil {
		return 0, nil, err
	}
	var sizes []int64
	for _, a := range f.Args[1:] {
		b.setPos(a)
		k, iv := syntaxKindOf(b.syntax, a)
		if k != synInterval {
			return 0, nil, b.errf(CodeSyntax, "%s sizes are INTERVAL 'n' UNIT: %s", name, usage)
		}
		ms := syntaxOf(b.syntax, iv).ms
		if ms <= 0 {
			return 0, nil, b.errf(CodeInvalidValue, "%s sizes must be positive", name)
		}
		sizes = append(sizes, ms)
	}
	return i, sizes, nil
}

// fieldName is the output name of a select field: its alias, or the name PostgreSQL
// gives the expression (pgColumnName).
func (b *binder) fieldName(f *ast.SelectField, e Expr) string {
	if f.AsName.O != "" {
		return f.AsName.O
	}
	if _, ok := f.Expr.(*ast.ColumnNameExpr); ok {
		if r, ok := e.(*ColumnRef); ok {
			return r.Name
		}
	}
	name, _ := b.pgColumnName(f.Expr)
	return name
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
			if b.window != nil && b.window.Kind != WindowGiven && (lname == "window_start" || lname == "window_end") && b.base.Index(name) < 0 {
				i := len(b.keys)
				if lname == "window_end" {
					i++
				}
				return &ColumnRef{Index: i, Name: lname, T: TypeTimestamp}, nil
			}
			if i, err := b.lookupColumn(c.Name.Table.O, name); err != nil {
				return nil, err
			} else if i < 0 {
				return nil, b.errf(CodeUnknownColumn, "column %s does not exist in %s", name, b.fromName)
			}
			return nil, b.errf(CodeGrouping, "column %s must appear in GROUP BY or be used in an aggregate function", name)
		}
	}
	i, err := b.lookupColumn(c.Name.Table.O, name)
	if err != nil {
		return nil, err
	}
	if i < 0 {
		if lname := strings.ToLower(name); (lname == "window_start" || lname == "window_end") && b.window != nil {
			return nil, b.errf(CodeGrouping, "%s is only available after GROUP BY (aggregation) for this window", lname)
		}
		return nil, b.errf(CodeUnknownColumn, "column %s does not exist in %s", name, b.fromName)
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
			if c, ok := e.(*ColumnRef); ok && err == nil && b.window != nil && b.window.Kind == WindowGiven {
				switch c.Index {
				case b.window.TimeCol:
					return &ColumnRef{Index: len(b.keys), Name: c.Name, T: TypeTimestamp}, nil
				case b.window.EndCol:
					return &ColumnRef{Index: len(b.keys) + 1, Name: c.Name, T: TypeTimestamp}, nil
				}
			}
			if err == nil {
				s := keyString(e)
				for i, k := range b.keyStr {
					if s == k {
						name := b.keys[i].String()
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
			if isIntOrDecimalOrNull(l.Type().Kind) && isIntOrDecimalOrNull(r.Type().Kind) {
				return b.call("DIV", l, r) // PostgreSQL's div(numeric, numeric)
			}
			return nil, b.errf(CodeTypeMismatch, "DIV needs integer or NUMERIC operands, not %s and %s", l.Type(), r.Type())
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
					return &Literal{V: Double(-l.V.F()), T: l.T}, nil
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
		// a ~ 'pattern' (the pre-pass writes it as REGEXP); a ~* 'p' has a synRegexpCI
		// placeholder around 'p'.
		a, err := b.expr(x.Expr)
		if err != nil {
			return nil, err
		}
		op := "REGEXP"
		pat := x.Pattern
		if k, f := syntaxKindOf(b.syntax, pat); k == synRegexpCI && len(f.Args) == 1 {
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
		return nil, b.errf(CodeNotSupported, "window function calls (OVER) are supported as whole select items only: ROW_NUMBER() in a derived table, and AVG, SUM, COUNT, MIN, MAX OVER (PARTITION BY ... ORDER BY ... ROWS BETWEEN n PRECEDING AND CURRENT ROW)")
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

func isIntOrDecimalOrNull(k Kind) bool { return isIntOrNull(k) || k == KindDecimal }

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
			v, _ := NumericFromString(strconv.FormatUint(u, 10)) // a uint64's decimal text always parses
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
