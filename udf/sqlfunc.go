package udf

import (
	"rsql/sql"
)

// SQL functions: the body is an expression over the parameters, bound against the
// statement's catalog and put in place of each call (inlined), so a SQL function costs
// what its expression costs.

// Nester is implemented by a catalog that limits how deeply SQL functions inline into
// each other: Nest is called before fn's body is inlined and done after; a function that
// (through others) calls itself would otherwise never finish binding.
type Nester interface {
	Nest(fn string) (done func(), err error)
}

// bindSQLBody binds the body of SQL function spec, converted to its declared result type.
func bindSQLBody(spec Spec, cat sql.Catalog) (sql.Expr, error) {
	e, err := sql.BindFunctionBody(spec.Name, spec.Body, spec.Params, cat)
	if err != nil {
		return nil, err
	}
	r, err := sql.CoerceResult(spec.Name, e, spec.Returns)
	if se, ok := err.(*sql.Error); ok {
		return nil, sql.BodyErrorAt(spec.Body, 0, se.Code, "%s", se.Message)
	}
	return r, err
}

// inlineSQL is the expression a call of SQL function spec with args (already converted to
// the parameter types) stands for.
func inlineSQL(spec Spec, cat sql.Catalog, args []sql.Expr) (sql.Expr, error) {
	if n, ok := cat.(Nester); ok {
		done, err := n.Nest(spec.Name)
		if err != nil {
			return nil, err
		}
		defer done()
	}
	body, err := bindSQLBody(spec, cat)
	if err != nil {
		// The body was valid when the function was created; what it calls may have
		// changed since. The error is the call's (the binder places it there).
		if se, ok := err.(*sql.Error); ok {
			return nil, sql.Errorf(se.Code, "in SQL function %s: %s", spec.Name, se.Message)
		}
		return nil, err
	}
	return sql.Transform(body, func(x sql.Expr) (sql.Expr, error) {
		if c, ok := x.(*sql.ColumnRef); ok {
			if c.Index < 0 || c.Index >= len(args) {
				return nil, sql.Errorf(sql.CodeInternal, "SQL function %s reads parameter #%d of %d", spec.Name, c.Index, len(args))
			}
			return args[c.Index], nil
		}
		return x, nil
	})
}
