package sql

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// bindJoinFrom binds FROM a JOIN b ON c (and chains of joins): the scope is the left
// side's columns then the right's, each qualified by its side's name. The pre-pass turns
// FULL JOIN into a LEFT JOIN whose ON starts with a synFullJoin marker, and FOR SYSTEM_TIME
// AS OF e into a synAsOf marker of e at the start of the ON; both markers are taken out
// here.
func (b *binder) bindJoinFrom(j *ast.Join) error {
	f, scope, quals, attrs, err := b.bindJoin(j)
	if err != nil {
		return err
	}
	b.from, b.base, b.scope, b.quals, b.attrs = f, scope, scope, quals, attrs
	b.fromName = "the join"
	return nil
}

func (b *binder) bindJoin(j *ast.Join) (From, Schema, [][]string, []ColAttr, error) {
	if tc, fc, ok := b.tableCallOf(j.Right); ok {
		return b.bindLateral(j, tc, fc)
	}
	switch {
	case j.NaturalJoin:
		b.setPos(j)
		return nil, nil, nil, nil, b.errf(CodeNotSupported, "NATURAL JOIN is not supported: join with ON")
	case j.Using != nil:
		b.setPos(j)
		return nil, nil, nil, nil, b.errf(CodeNotSupported, "JOIN ... USING is not supported: join with ON a.c = b.c")
	case j.On == nil:
		b.setPos(j)
		return nil, nil, nil, nil, b.errf(CodeNotSupported, "joins need an ON condition: a cross join of streams is not supported")
	}
	left, lname, lsch, lquals, lattrs, err := b.joinSide(j.Left)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	right, rname, rsch, rquals, rattrs, err := b.joinSide(j.Right)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	fj := &FromJoin{Left: left, Right: right, LeftName: lname, RightName: rname, LeftAttrs: lattrs, RightAttrs: rattrs}
	switch j.Tp {
	case ast.LeftJoin:
		fj.Kind = JoinLeft
	case ast.RightJoin:
		fj.Kind = JoinRight
	}
	on, full, asof := stripJoinMarkers(b.syntax, j.On.Expr)
	if full {
		fj.Kind = JoinFull
	}
	scope := append(append(Schema{}, lsch...), rsch...)
	quals := append(append([][]string{}, lquals...), rquals...)
	attrs := append(append([]ColAttr{}, lattrs...), rattrs...)
	// Bind the ON condition (and AS OF) over the joined row.
	cb := b.ctx.newBinder()
	cb.from, cb.base, cb.scope, cb.quals, cb.attrs, cb.fromName = fj, scope, scope, quals, attrs, "the join"
	cb.clause = "ON"
	if on != nil {
		b.setPos(on)
		if hasAgg(on) {
			return nil, nil, nil, nil, b.errf(CodeGrouping, "aggregate functions are not allowed in ON")
		}
		e, err := cb.expr(on)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if k := e.Type().Kind; k != KindBool && k != KindNull {
			return nil, nil, nil, nil, b.errf(CodeTypeMismatch, "ON must be BOOLEAN, not %s", e.Type())
		}
		fj.On = e
	}
	if asof != nil {
		e, err := cb.expr(asof)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		fj.AsOf = e
	}
	return fj, scope, quals, attrs, nil
}

// joinSide binds one side of a join: a relation (through a window table function: a
// derived query assigning windows) or a nested join.
func (b *binder) joinSide(n ast.ResultSetNode) (From, string, Schema, [][]string, []ColAttr, error) {
	switch x := n.(type) {
	case *ast.Join:
		if x.Right == nil {
			return b.joinSide(x.Left)
		}
		f, sch, quals, attrs, err := b.bindJoin(x)
		return f, "", sch, quals, attrs, err
	case *ast.TableSource:
		cb := b.ctx.newBinder()
		if err := cb.bindTableSource(x); err != nil {
			return nil, "", nil, nil, nil, err
		}
		name := cb.fromName
		if len(cb.relNames) > 0 {
			name = cb.relNames[0]
		}
		from := cb.from
		if cb.window != nil {
			// TUMBLE(x, ...) AS a: a derived query giving x's rows with their windows.
			if cb.window.Kind == WindowSession {
				cb.pos = cb.tvf.pos
				return nil, "", nil, nil, nil, cb.errf(CodeNotSupported, "SESSION windows need GROUP BY: join the aggregated sessions as a derived table")
			}
			q := &Query{From: cb.from, Window: cb.window, Limit: -1, Attrs: cb.attrs}
			for i, c := range cb.scope {
				q.Select = append(q.Select, &ColumnRef{Index: i, Name: c.Name, T: c.Type})
				q.Names = append(q.Names, c.Name)
			}
			from = &FromQuery{Query: q, Name: name}
		}
		sch := from.Schema()
		quals := make([][]string, len(sch))
		for i := range quals {
			quals[i] = cb.relNames
			if len(quals[i]) == 0 && name != "" {
				quals[i] = []string{name}
			}
		}
		attrs := append([]ColAttr(nil), cb.attrs...)
		for len(attrs) < len(sch) {
			attrs = append(attrs, ColAttr{})
		}
		return from, name, sch, quals, attrs[:len(sch)], nil
	}
	return nil, "", nil, nil, nil, b.errf(CodeNotSupported, "this join input is not supported")
}

// stripJoinMarkers takes the pre-pass's markers out of an ON condition: synFullJoin
// (FULL JOIN) and synAsOf of e (FOR SYSTEM_TIME AS OF e), found on the leftmost path of
// its ANDs and ORs. The rest of the condition is returned (nil: none).
func stripJoinMarkers(table []streamSyntax, e ast.ExprNode) (rest ast.ExprNode, full bool, asof ast.ExprNode) {
	var strip func(e ast.ExprNode) ast.ExprNode
	strip = func(e ast.ExprNode) ast.ExprNode {
		switch x := e.(type) {
		case *ast.FuncCallExpr:
			switch k, _ := syntaxKindOf(table, x); k {
			case synFullJoin:
				full = true
				return nil
			case synAsOf:
				if len(x.Args) == 1 {
					asof = x.Args[0]
				}
				return nil
			}
		case *ast.BinaryOperationExpr:
			if x.Op == opcode.LogicAnd || x.Op == opcode.LogicOr {
				l := strip(x.L)
				if l == nil {
					if x.Op == opcode.LogicAnd {
						return strip(x.R)
					}
					return nil // TRUE OR x
				}
				x.L = l
			}
		case *ast.ParenthesesExpr:
			if in := strip(x.Expr); in == nil {
				return nil
			} else {
				x.Expr = in
			}
		}
		return e
	}
	return strip(e), full, asof
}
