package sql

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// The names the binder answers itself (bindfunc.go): their registry entries carry a Bind
// hook in place of the ordinary binding. TRIM, EXTRACT and CONCAT are functions of the
// table with a Bind hook on their own entries (funcs_string.go, funcs_time.go); the
// entries here are Unlisted: they reserve a name without being a documented function.

// ServerVersion is what version() returns; clients parse it as PostgreSQL's.
var ServerVersion = "PostgreSQL 15.0 (rsql)"

func init() {
	// The session information functions clients call on connect; each binds to a
	// constant when called without arguments.
	session := func(name string, v func() string) *FuncDef {
		return &FuncDef{Name: name, Unlisted: true, Bind: func(b *binder, f *ast.FuncCallExpr) (Expr, error) {
			if len(f.Args) != 0 {
				return nil, nil
			}
			return NewLiteral(Varchar(v())), nil
		}}
	}
	syntax := func(name string, bind func(b *binder, f *ast.FuncCallExpr) (Expr, error)) *FuncDef {
		return &FuncDef{Name: name, Unlisted: true, Syntax: true, Bind: bind}
	}
	public := func() string { return "public" }
	db := func() string { return "rsql" }
	register(
		session("VERSION", func() string { return ServerVersion }),
		session("CURRENT_SCHEMA", public),
		session("SCHEMA", public),
		session("CURRENT_DATABASE", db),
		session("DATABASE", db),
		session("CURRENT_USER", db),
		session("SESSION_USER", db),
		session("USER", db),

		syntax("IF", bindIf),
		syntax("LOCATE", bindPosition),
		syntax("POSITION", bindPosition),
		// TUMBLE(...), HOP(...), SESSION(...) belong in GROUP BY or FROM: the pre-pass
		// rewrites them (streamSyntaxCall); a call that reaches the binder is unknown.
		syntax("TUMBLE", nil),
		syntax("HOP", nil),
		syntax("SESSION", nil),
		syntax("TUMBLE_START", (*binder).windowBound),
		syntax("TUMBLE_END", (*binder).windowBound),
		syntax("HOP_START", (*binder).windowBound),
		syntax("HOP_END", (*binder).windowBound),
		syntax("SESSION_START", (*binder).windowBound),
		syntax("SESSION_END", (*binder).windowBound),
	)
}

// withBind sets d's Bind hook.
func withBind(d *FuncDef, bind func(b *binder, f *ast.FuncCallExpr) (Expr, error)) *FuncDef {
	d.Bind = bind
	return d
}

// bindIf binds IF(condition, then, else) as a CASE.
func bindIf(b *binder, f *ast.FuncCallExpr) (Expr, error) {
	if len(f.Args) != 3 {
		return nil, b.errf(CodeSyntax, "IF(condition, then, else) takes 3 arguments")
	}
	args, err := b.exprs(f.Args)
	if err != nil {
		return nil, err
	}
	b.setPos(f)
	if k := args[0].Type().Kind; k != KindBool && k != KindNull {
		return nil, b.errf(CodeTypeMismatch, "IF needs a BOOLEAN condition, not %s", args[0].Type())
	}
	t, ok := Unify(args[1].Type(), args[2].Type())
	if !ok {
		return nil, b.errf(CodeTypeMismatch, "IF branches have no common type (%s, %s)", args[1].Type(), args[2].Type())
	}
	return &Case{Whens: args[:1], Thens: args[1:2], Else: args[2], T: t}, nil
}

// bindPosition binds POSITION(sub IN s) (and LOCATE(sub, s)) as STRPOS(s, sub); other
// argument counts are left as calls of an unknown name.
func bindPosition(b *binder, f *ast.FuncCallExpr) (Expr, error) {
	if len(f.Args) != 2 {
		return nil, nil
	}
	args, err := b.exprs(f.Args)
	if err != nil {
		return nil, err
	}
	b.setPos(f)
	return b.call("STRPOS", args[1], args[0])
}

// bindPipes binds a || b (tidb's pipes-as-concat, which parses as a call of concat); the
// CONCAT function itself was renamed by the pre-pass and reaches its entry through
// streamSyntaxCall.
func bindPipes(b *binder, f *ast.FuncCallExpr) (Expr, error) {
	if f.FnName.L != "concat" {
		return nil, nil
	}
	args, err := b.exprs(f.Args)
	if err != nil {
		return nil, err
	}
	b.setPos(f)
	if len(args) == 0 {
		return nil, b.errf(CodeSyntax, "|| needs two operands")
	}
	e := args[0]
	for _, a := range args[1:] {
		if e, err = b.call("||", e, a); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// bindExtract binds EXTRACT(unit FROM ts), the unit becoming a string argument.
func bindExtract(b *binder, f *ast.FuncCallExpr) (Expr, error) {
	if f.FnName.L != "extract" {
		return nil, nil
	}
	if len(f.Args) != 2 {
		return nil, b.errf(CodeSyntax, "EXTRACT(unit FROM timestamp)")
	}
	u, ok := f.Args[0].(*ast.TimeUnitExpr)
	if !ok {
		return nil, b.errf(CodeSyntax, "EXTRACT(unit FROM timestamp)")
	}
	a, err := b.expr(f.Args[1])
	if err != nil {
		return nil, err
	}
	b.setPos(f)
	return b.call("EXTRACT", NewLiteral(Varchar(u.Unit.String())), a)
}

// bindTrim binds TRIM's forms (see trim); BTRIM, the entry's other name, is an ordinary
// call.
func bindTrim(b *binder, f *ast.FuncCallExpr) (Expr, error) {
	if f.FnName.L != "trim" {
		return nil, nil
	}
	return b.trim(f)
}

// bindJSONGet leaves a call of JSON_GET or JSON_GET_TEXT by name to the user functions:
// only the -> and ->> operators (streamSyntaxCall) reach the built-ins.
func bindJSONGet(b *binder, f *ast.FuncCallExpr) (Expr, error) { return b.unknownCall(f) }
