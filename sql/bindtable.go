package sql

import (
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// tableCallOf recognizes the right side of a join the pre-pass made of a table function
// call: (SELECT __rsql_tfn_N(args)) AS t.
func (b *binder) tableCallOf(n ast.ResultSetNode) (*tableCall, *ast.FuncCallExpr, bool) {
	ts, ok := n.(*ast.TableSource)
	if !ok {
		return nil, nil, false
	}
	sel, ok := ts.Source.(*ast.SelectStmt)
	if !ok || sel.From != nil || sel.Fields == nil || len(sel.Fields.Fields) != 1 {
		return nil, nil, false
	}
	fc, ok := sel.Fields.Fields[0].Expr.(*ast.FuncCallExpr)
	if !ok {
		return nil, nil, false
	}
	rest, ok := strings.CutPrefix(fc.FnName.L, tfnCall)
	if !ok {
		return nil, nil, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || i >= len(b.ctx.tfns) {
		return nil, nil, false
	}
	return b.ctx.tfns[i], fc, true
}

// lookupTableFunc finds the table function called name: a built-in, else a user one.
func (b *binder) lookupTableFunc(name string) (*TableFuncDef, bool) {
	if d, ok := LookupTableFunc(name); ok {
		return d, true
	}
	if tc, ok := b.ctx.cat.(TableFuncCatalog); ok {
		return tc.TableFunction(name)
	}
	return nil, false
}

// bindLateral binds `left JOIN LATERAL f(args) AS t(c, ...)` (and JOIN UNNEST): the
// arguments are bound over the left side's row; the scope is the left side's columns,
// then the function's, qualified by t. CROSS JOIN and [INNER] JOIN ... ON TRUE give only
// the rows of the calls; LEFT JOIN ... ON TRUE also keeps a left row its call gives no
// rows for, with NULLs.
func (b *binder) bindLateral(j *ast.Join, tc *tableCall, fc *ast.FuncCallExpr) (From, Schema, [][]string, []ColAttr, error) {
	fail := func(pos int, code, format string, args ...any) (From, Schema, [][]string, []ColAttr, error) {
		b.pos = pos
		return nil, nil, nil, nil, b.errf(code, format, args...)
	}
	outer := false
	switch j.Tp {
	case ast.LeftJoin:
		outer = true
	case ast.RightJoin:
		return fail(tc.pos, CodeNotSupported, "RIGHT JOIN LATERAL is not supported: use CROSS JOIN LATERAL or LEFT JOIN LATERAL ... ON TRUE")
	}
	if j.Using != nil || j.NaturalJoin {
		return fail(tc.pos, CodeNotSupported, "a table function joins without USING or NATURAL: use CROSS JOIN LATERAL")
	}
	if j.On != nil {
		on, full, asof := stripJoinMarkers(b.syntax, j.On.Expr)
		if full || asof != nil || !isTrueLiteral(on) {
			b.setPos(j.On.Expr)
			return nil, nil, nil, nil, b.errf(CodeNotSupported, "a join with a table function takes ON TRUE only: put the condition in WHERE")
		}
	} else if outer {
		return fail(tc.pos, CodeSyntax, "LEFT JOIN LATERAL needs ON TRUE")
	}
	left, lname, lsch, lquals, lattrs, err := b.joinSide(j.Left)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	def, ok := b.lookupTableFunc(tc.name)
	fname := strings.ToLower(tc.name)
	if !ok {
		if d, scalar := LookupFunc(tc.name); scalar && !d.Unlisted {
			return fail(tc.pos, CodeWrongObjectType, "%s is a scalar function, not a table function: call it in the select list", fname)
		}
		if _, scalar := b.userFunc(tc.name); scalar {
			return fail(tc.pos, CodeWrongObjectType, "%s is a scalar function, not a table function: call it in the select list", fname)
		}
		return fail(tc.pos, CodeUndefinedFunction, "table function %s does not exist (SHOW FUNCTIONS lists them)", fname)
	}
	// The arguments, over the left side's row.
	cb := b.ctx.newBinder()
	cb.from, cb.base, cb.scope, cb.quals, cb.attrs = left, lsch, lsch, lquals, lattrs
	cb.fromName = lname
	if cb.fromName == "" {
		cb.fromName = "the join"
	}
	if len(lquals) > 0 && len(lquals[0]) > 0 && lname != "" {
		cb.relNames = lquals[0]
	}
	cb.clause = "the arguments of " + fname
	args := make([]Expr, len(fc.Args))
	for i, a := range fc.Args {
		b.setPos(a)
		if hasAgg(a) {
			return nil, nil, nil, nil, b.errf(CodeGrouping, "aggregate functions are not allowed in the arguments of a table function")
		}
		e, err := cb.expr(a)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		args[i] = e
	}
	cols, args, err := def.Check(args)
	if err != nil {
		b.pos = tc.pos
		if e, ok := err.(*Error); ok && e.Line == 0 {
			return nil, nil, nil, nil, b.at(err)
		}
		return nil, nil, nil, nil, err
	}
	cols = append(Schema(nil), cols...)
	if tc.ordinality {
		cols = append(cols, Column{Name: "ordinality", Type: TypeBigInt})
	}
	if len(tc.cols) > len(cols) {
		return fail(tc.colsPos, CodeSyntax, "%s gives %d column(s), but %d names are given", fname, len(cols), len(tc.cols))
	}
	seen := map[string]bool{}
	for i := range cols {
		if i < len(tc.cols) {
			cols[i].Name = tc.cols[i]
		}
		if seen[strings.ToLower(cols[i].Name)] {
			return fail(tc.colsPos, CodeDuplicateColumn, "column %s is named twice in %s", cols[i].Name, tc.alias)
		}
		seen[strings.ToLower(cols[i].Name)] = true
	}
	f := &FromLateral{Input: left, Func: def, Args: args, Cols: cols, Outer: outer, Ordinality: tc.ordinality, Name: tc.alias, InputAttrs: lattrs}
	scope := f.Schema()
	quals := append([][]string{}, lquals...)
	attrs := append([]ColAttr{}, lattrs...)
	for range cols {
		quals = append(quals, []string{tc.alias})
		attrs = append(attrs, ColAttr{})
	}
	return f, scope, quals, attrs, nil
}

// isTrueLiteral reports whether e is the literal TRUE (or 1, as the grammar reads TRUE).
func isTrueLiteral(e ast.ExprNode) bool {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			break
		}
		e = p.Expr
	}
	v, ok := e.(*test_driver.ValueExpr)
	if !ok {
		return false
	}
	switch x := v.GetValue().(type) {
	case int64:
		return x == 1
	case uint64:
		return x == 1
	}
	return false
}
