package planner

import "rsql/sql"

// validate checks that every expression of a plan reads only columns its input has, with
// the kind the input has there (a ColumnRef of kind NULL is not checked), and that window
// time columns are TIMESTAMP columns of the input.
func validate(l LogicalNode) error {
	for _, c := range l.Children() {
		if err := validate(c); err != nil {
			return err
		}
	}
	var in sql.Schema
	if ch := l.Children(); len(ch) >= 1 {
		in = ch[0].Schema()
	}
	check := func(es ...sql.Expr) error {
		for _, e := range es {
			var bad error
			sql.Walk(e, func(x sql.Expr) bool {
				c, ok := x.(*sql.ColumnRef)
				if !ok || bad != nil {
					return bad == nil
				}
				switch {
				case c.Index < 0 || c.Index >= len(in):
					bad = errorf(sql.CodeInternal, "%s reads column %s (#%d) of a %d-column row", l, c.Name, c.Index, len(in))
				case c.T.Kind != sql.KindNull && c.T.Kind != in[c.Index].Type.Kind:
					bad = errorf(sql.CodeInternal, "%s reads column %s (#%d) as %s but it is %s %s", l, c.Name, c.Index, c.T, in[c.Index].Name, in[c.Index].Type)
				}
				return bad == nil
			})
			if bad != nil {
				return bad
			}
		}
		return nil
	}
	checkTime := func(w *sql.Window) error {
		if w.TimeCol < 0 || w.TimeCol >= len(in) || in[w.TimeCol].Type.Kind != sql.KindTimestamp {
			return errorf(sql.CodeInternal, "%s: window time column #%d is not a TIMESTAMP of its input", l, w.TimeCol)
		}
		if w.Kind == sql.WindowGiven && (w.EndCol < 0 || w.EndCol >= len(in) || in[w.EndCol].Type.Kind != sql.KindTimestamp) {
			return errorf(sql.CodeInternal, "%s: window end column #%d is not a TIMESTAMP of its input", l, w.EndCol)
		}
		return nil
	}
	switch n := l.(type) {
	case *Scan:
		for _, c := range n.Columns {
			if c < 0 || c >= len(n.Relation.Schema) {
				return errorf(sql.CodeInternal, "scan of %s reads column #%d", n.Relation.Name, c)
			}
		}
	case *Filter:
		return check(n.Pred)
	case *Project:
		if len(n.Names) != len(n.Exprs) {
			return errorf(sql.CodeInternal, "projection with %d names for %d expressions", len(n.Names), len(n.Exprs))
		}
		return check(n.Exprs...)
	case *WindowAssign:
		return checkTime(&n.Window)
	case *TableFunc:
		return check(n.Args...)
	case *Aggregate:
		if err := check(n.Keys...); err != nil {
			return err
		}
		for _, g := range n.Aggs {
			if g.Arg != nil {
				if err := check(g.Arg); err != nil {
					return err
				}
			}
		}
		if n.Window != nil {
			return checkTime(n.Window)
		}
	case *Union:
		for i, c := range n.Inputs {
			cs := c.Schema()
			if len(cs) != len(n.Out) {
				return errorf(sql.CodeInternal, "union input %d has %d columns, the union %d", i, len(cs), len(n.Out))
			}
			for k := range cs {
				if cs[k].Type.Kind != n.Out[k].Type.Kind && cs[k].Type.Kind != sql.KindNull {
					return errorf(sql.CodeInternal, "union input %d column %d is %s, the union's %s", i, k, cs[k].Type, n.Out[k].Type)
				}
			}
		}
	case *Join:
		if len(n.LeftKeys) != len(n.RightKeys) || len(n.LeftKeys) == 0 {
			return errorf(sql.CodeInternal, "%s: %d left keys, %d right keys", l, len(n.LeftKeys), len(n.RightKeys))
		}
		in = n.Schema()
		if n.Residual != nil {
			if err := check(n.Residual); err != nil {
				return err
			}
		}
	case *TopN:
		if err := check(n.Partition...); err != nil {
			return err
		}
		for _, k := range n.Order {
			if err := check(k.Expr); err != nil {
				return err
			}
		}
	case *Over:
		if err := check(n.Partition...); err != nil {
			return err
		}
		for _, k := range n.Order {
			if err := check(k.Expr); err != nil {
				return err
			}
		}
		for _, c := range n.Calls {
			if c.Agg.Arg != nil {
				if err := check(c.Agg.Arg); err != nil {
					return err
				}
			}
		}
	case *Sort:
		for _, k := range n.Keys {
			if err := check(k.Expr); err != nil {
				return err
			}
		}
	}
	return nil
}
