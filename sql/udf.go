package sql

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Support for user-defined functions (CREATE FUNCTION / CREATE AGGREGATE): the checks the
// statement needs from the dialect. Running them is the udf package's.

// CheckFunctionName checks that name can be the name of a user function: a call of it
// parses as an ordinary function call, and no built-in function or aggregate has it.
// Errors: 42723 (a built-in's name), 42602 (a name the grammar reserves).
func CheckFunctionName(name string) error {
	lname := strings.ToLower(name)
	d, builtin := lookupName(name)
	if builtin && !d.Unlisted {
		return Errorf(CodeDuplicateFunction, "function %s is built in: choose another name", lname)
	}
	if _, ok := LookupAgg(name); ok {
		return Errorf(CodeDuplicateFunction, "aggregate %s is built in: choose another name", lname)
	}
	if _, ok := LookupTableFunc(name); ok {
		return Errorf(CodeDuplicateFunction, "table function %s is built in: choose another name", lname)
	}
	if builtin { // a name the binder answers itself (funcs_binder.go)
		if d.Syntax {
			return Errorf(CodeDuplicateFunction, "%s is a built-in name: choose another name", lname)
		}
		return Errorf(CodeDuplicateFunction, "function %s is built in: choose another name", lname)
	}
	if strings.HasPrefix(lname, "__rsql_") || strings.ContainsAny(name, "\"`'$ ") {
		return Errorf(CodeInvalidName, "%q cannot name a function", name)
	}
	st, err := Parse("SELECT " + name + "(1)")
	if err == nil && len(st) == 1 {
		if s, ok := st[0].(*Select); ok {
			if sel, ok := any(s.stmt).(*ast.SelectStmt); ok && sel.Fields != nil && len(sel.Fields.Fields) == 1 {
				if f, ok := sel.Fields.Fields[0].Expr.(*ast.FuncCallExpr); ok && f.FnName.L == lname {
					return nil
				}
			}
		}
	}
	return Errorf(CodeInvalidName, "%s cannot name a function: the grammar reads a call of it as something else", lname)
}

// BindFunctionBody binds the body of a SQL function — one expression over the parameters
// params — against cat (the body may call other functions). name names the function in
// messages. The result reads parameter i as column i. An error positioned in the body
// has Pos, Line and Column relative to the body text (see CreateFunction.BodyError).
func BindFunctionBody(name, body string, params Schema, cat Catalog) (Expr, error) {
	const prefix = "SELECT "
	rel := &Relation{Name: name, Schema: params, EventTime: -1}
	text := prefix + body + "\nFROM " + quoteIdent(name)
	st, err := Parse(text)
	if err != nil {
		return nil, bodyErr(err, body, len(prefix))
	}
	bad := func() error {
		return Errorf(CodeSyntax, "the body of SQL function %s must be one expression over its parameters", name)
	}
	if len(st) != 1 {
		return nil, bad()
	}
	s, ok := st[0].(*Select)
	if !ok {
		return nil, bad()
	}
	sel, ok := any(s.stmt).(*ast.SelectStmt)
	if !ok || sel.Fields == nil || len(sel.Fields.Fields) != 1 || sel.Fields.Fields[0].WildCard != nil ||
		sel.Where != nil || sel.GroupBy != nil || sel.Having != nil || sel.OrderBy != nil || sel.Limit != nil ||
		sel.Distinct || sel.With != nil || s.Emit != EmitDefault || sel.From == nil || sel.From.TableRefs == nil ||
		sel.From.TableRefs.Right != nil {
		return nil, bad()
	}
	if ts, ok := sel.From.TableRefs.Left.(*ast.TableSource); !ok || ts.AsName.O != "" {
		return nil, bad()
	} else if tn, ok := ts.Source.(*ast.TableName); !ok || tn.Name.O != name {
		return nil, bad()
	}
	if hasAgg(sel.Fields.Fields[0].Expr) {
		return nil, Errorf(CodeGrouping, "the body of SQL function %s cannot aggregate: use CREATE AGGREGATE", name)
	}
	q, err := Bind(s, bodyCatalog{Catalog: cat, rel: rel})
	if err != nil {
		return nil, bodyErr(err, body, len(prefix))
	}
	if q.Aggregated || len(q.Select) != 1 {
		return nil, bad()
	}
	return q.Select[0], nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// bodyCatalog is cat with the parameters of a SQL function as the one relation.
type bodyCatalog struct {
	Catalog
	rel *Relation
}

func (c bodyCatalog) Relation(name string) (*Relation, bool) {
	if name == c.rel.Name {
		return c.rel, true
	}
	return nil, false
}

func (c bodyCatalog) Function(name string) (*FuncDef, bool) {
	if fc, ok := c.Catalog.(FuncCatalog); ok {
		return fc.Function(name)
	}
	return nil, false
}

func (c bodyCatalog) Aggregate(name string) (*AggDef, bool) {
	if fc, ok := c.Catalog.(FuncCatalog); ok {
		return fc.Aggregate(name)
	}
	return nil, false
}

// bodyErr moves the position of err from text (where the body starts at off) into the
// body; a position outside the body is dropped.
func bodyErr(err error, body string, off int) error {
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	c := *e
	if c.Pos >= off && c.Pos-off <= len(body) {
		c.Pos -= off
		c.Line, c.Column = lineCol(body, c.Pos)
	} else {
		c.Pos, c.Line, c.Column = -1, 0, 0
	}
	return &c
}

// BodyErrorAt returns an error positioned at byte offset off of a function body (for
// BodyError to place in the statement).
func BodyErrorAt(body string, off int, code, format string, args ...any) *Error {
	return errAt(body, off, code, format, args...)
}

// BodyError places an error positioned in the function's body (by BindFunctionBody or
// BodyErrorAt) in the text the statement was parsed from; other errors are returned as
// they are.
func (cf *CreateFunction) BodyError(err error) error {
	e, ok := err.(*Error)
	if !ok || e.Pos < 0 || cf.BodyPos < 0 || cf.input == "" {
		return err
	}
	c := *e
	c.Pos = cf.BodyPos + e.Pos
	if c.Pos > len(cf.input) {
		c.Pos = len(cf.input)
	}
	c.Line, c.Column = lineCol(cf.input, c.Pos)
	return &c
}

// CoerceArgs converts the arguments of a call of user function fn to its parameter types
// along PostgreSQL's implicit casts (integers → NUMERIC → DOUBLE, a string literal to
// anything, NULL to anything). A call with the wrong number of arguments or an argument
// that does not convert is 42883, as PostgreSQL reports it.
func CoerceArgs(fn string, args []Expr, params []Type) ([]Expr, error) {
	if len(args) != len(params) {
		return nil, noFunc(fn, args)
	}
	out := make([]Expr, len(args))
	for i := range args {
		e, err := toType(fn, args, i, params[i])
		if err != nil {
			if se, ok := err.(*Error); ok && se.Code != CodeUndefinedFunction {
				return nil, err
			}
			return nil, noFunc(fn, args)
		}
		if pt := params[i]; pt.Kind == KindDecimal && pt.Precision > 0 && e.Type() != pt {
			e = &Cast{Arg: e, T: pt}
		}
		out[i] = e
	}
	return out, nil
}

// CoerceResult converts the body of a SQL function to its declared result type t: an
// implicit cast, or an assignment cast between numbers (PostgreSQL's RETURNS rule).
// Other types are 42804.
func CoerceResult(fn string, e Expr, t Type) (Expr, error) {
	et := e.Type()
	switch {
	case et == t || et.Kind == KindNull:
		if et.Kind == KindNull {
			return &Literal{V: Null, T: t}, nil
		}
		return e, nil
	case et.Kind == t.Kind && t.Kind != KindDecimal:
		return e, nil
	case numRank(et.Kind) > 0 && numRank(t.Kind) > 0:
		return &Cast{Arg: e, T: t}, nil
	case et.Kind == KindVarchar && t.Kind == KindJSON, et.Kind == KindJSON && t.Kind == KindVarchar:
		return &Cast{Arg: e, T: t}, nil
	}
	return nil, typeMismatch("return type mismatch in function %s: its body is %s, it is declared to return %s", fn, et, t)
}
