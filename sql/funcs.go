package sql

import (
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// FuncDef is one scalar function of the registry: everything about it lives here — the
// names it answers to, its type rule (argument checking, implicit casts, result type), the
// evaluator it compiles to, and its line in docs/sql.md's function table (which a test
// keeps equal to FunctionTable()). Operators (+, =, AND, ...) are not in the registry;
// they are typed in types.go and compiled in compile.go.
type FuncDef struct {
	Name    string   // canonical name, upper case
	Aliases []string // other accepted names, upper case
	Sig     string   // the call as documented, e.g. "LEFT(s, n)"
	Doc     string   // the notes of the docs line (Markdown)
	Group   string   // the section of the table: string, math, time, json, conditional, other
	// Check validates the bound arguments and returns the result type and the arguments to
	// keep (possibly wrapped in implicit casts). Errors are *Error (42804, 42883, 22023).
	Check func(args []Expr) (Type, []Expr, error)
	// Build compiles the call, given its arguments' evaluators.
	Build func(c *Call, args []Evaluator) (Evaluator, error)
	// Volatile: the value may change between calls with equal arguments (NOW, RANDOM); such
	// calls are never folded to constants.
	Volatile bool
	// Hidden keeps the function out of the documented table (internal helpers).
	Hidden bool
	// Bind, set for a name the binder shapes itself (TRIM's FROM forms, EXTRACT's unit,
	// ||, the session constants, the window bounds, ...), binds a call by any of the
	// entry's names from the parsed call; it returns a nil Expr and no error to leave the
	// call to the ordinary path (bound arguments, then Check).
	Bind func(b *binder, f *ast.FuncCallExpr) (Expr, error)
	// Unlisted marks an entry that only reserves a name the binder answers through Bind (a
	// session constant, a piece of syntax): it is no function of the documented table, so
	// FunctionTable, SHOW FUNCTIONS and DESCRIBE FUNCTION skip it, and a call Bind leaves
	// goes on as a call of an unknown name (a user function, else 42883).
	Unlisted bool
	// Syntax, on an Unlisted entry, marks a name the grammar's forms use (IF, POSITION,
	// TUMBLE_START, ...) rather than a session constant: CheckFunctionName calls it "a
	// built-in name" rather than "function ... is built in".
	Syntax bool
	// Inline, set for user functions written in SQL, returns the expression that replaces
	// a call (its body over the arguments Check returned); Build is then not used.
	Inline func(args []Expr) (Expr, error)
	// Nulls says how the function treats NULL arguments; the zero value, NullStrict, is
	// the common case. Constant folding reads it (strictCall).
	Nulls NullRule
}

// NullRule is how a function treats NULL arguments.
type NullRule uint8

const (
	// NullStrict: any NULL argument makes the result NULL.
	NullStrict NullRule = iota
	// NullConsumes: the function looks at NULL arguments itself (COALESCE skips them,
	// CONCAT leaves them out), so a NULL argument says nothing about the result.
	NullConsumes
	// NullFirstArg: the result is NULL when the first argument is; a NULL elsewhere says
	// nothing (NULLIF(NULL, x) is NULL, NULLIF(x, NULL) is x).
	NullFirstArg
)

var (
	funcRegistry = map[string]*FuncDef{}
	funcByAlias  = map[string]*FuncDef{}
)

// register adds definitions to the registry; a name given twice is a programming error.
func register(defs ...*FuncDef) {
	for _, d := range defs {
		for _, n := range append([]string{d.Name}, d.Aliases...) {
			if _, dup := funcByAlias[n]; dup {
				panic("sql: function " + n + " registered twice")
			}
			funcByAlias[n] = d
		}
		funcRegistry[d.Name] = d
	}
}

// LookupFunc returns the registered function called name (any accepted spelling,
// case-insensitive).
func LookupFunc(name string) (*FuncDef, bool) {
	d, ok := funcByAlias[strings.ToUpper(name)]
	return d, ok
}

// lookupName is LookupFunc for a name as written: an Unlisted entry answers only to its
// own spelling in lower or upper case, as the binder's name checks always did (not to a
// name that only upper-cases to it, like "ıf").
func lookupName(name string) (*FuncDef, bool) {
	d, ok := LookupFunc(name)
	if ok && d.Unlisted && strings.ToLower(name) != strings.ToLower(d.Name) {
		return nil, false
	}
	return d, ok
}

// Funcs returns the registered functions ordered by group and name.
func Funcs() []*FuncDef {
	out := make([]*FuncDef, 0, len(funcRegistry))
	for _, d := range funcRegistry {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		gi, gj := groupOrder(out[i].Group), groupOrder(out[j].Group)
		if gi != gj {
			return gi < gj
		}
		return out[i].Name < out[j].Name
	})
	return out
}

var groups = []string{"conditional", "string", "math", "time", "json", "other"}

func groupOrder(g string) int {
	for i, x := range groups {
		if x == g {
			return i
		}
	}
	return len(groups)
}

// FunctionTable renders the registry as docs/sql.md's function table (Markdown).
func FunctionTable() string {
	var b strings.Builder
	b.WriteString("| function | kind | notes |\n|---|---|---|\n")
	for _, d := range Funcs() {
		if d.Hidden || d.Unlisted {
			continue
		}
		sig := d.Sig
		if len(d.Aliases) > 0 {
			sig += " (also " + strings.Join(d.Aliases, ", ") + ")"
		}
		b.WriteString("| " + mdCode(sig) + " | " + d.Group + " | " + d.Doc + " |\n")
	}
	return b.String()
}

func mdCode(s string) string { return "`" + strings.ReplaceAll(s, "|", `\|`) + "`" }

// isVolatile reports whether fn is a registered volatile function.
func isVolatile(fn string) bool {
	d, ok := funcByAlias[fn]
	return ok && d.Volatile
}

// volatileCall reports whether c calls a volatile function, built-in or user-defined.
func volatileCall(c *Call) bool {
	if c.Def != nil {
		return c.Def.Volatile
	}
	return isVolatile(c.Func)
}

// CallsVolatile reports whether e calls a volatile function anywhere: two computations of
// e over one row may differ.
func CallsVolatile(e Expr) bool {
	volatile := false
	Walk(e, func(x Expr) bool {
		if c, ok := x.(*Call); ok && volatileCall(c) {
			volatile = true
		}
		return !volatile
	})
	return volatile
}

// ---- argument rules shared by the definitions ----

// argCount checks the number of arguments.
func argCount(fn string, args []Expr, min, max int) error { return argc(fn, args, min, max) }

// noFunc is PostgreSQL's 42883: no function of that name takes these argument types.
func noFunc(fn string, args []Expr) *Error {
	ts := make([]string, len(args))
	for i, a := range args {
		ts[i] = a.Type().String()
	}
	return Errorf(CodeUndefinedFunction, "function %s(%s) does not exist: check the argument types", strings.ToLower(fn), strings.Join(ts, ", "))
}

// textArg accepts VARCHAR, JSON (as its text) and NULL.
func textArg(fn string, args []Expr, i int) (Expr, error) {
	switch args[i].Type().Kind {
	case KindVarchar, KindNull:
		return args[i], nil
	case KindJSON:
		return &Cast{Arg: args[i], T: TypeVarchar}, nil
	}
	return nil, noFunc(fn, args)
}

// intArg accepts INT or BIGINT, NULL, or a string literal holding an integer; the result
// is BIGINT-valued (INT values are read through I alike).
func intArg(fn string, args []Expr, i int) (Expr, error) {
	e := args[i]
	switch e.Type().Kind {
	case KindInt, KindBigInt, KindNull:
		return e, nil
	case KindVarchar:
		if l, ok := e.(*Literal); ok {
			v, err := CastValue(l.V, TypeInt)
			if err != nil {
				return nil, err
			}
			return &Literal{V: v, T: TypeInt}, nil
		}
	}
	return nil, noFunc(fn, args)
}

// doubleArg accepts any number (converted to DOUBLE), NULL, or a numeric string literal.
func doubleArg(fn string, args []Expr, i int) (Expr, error) {
	return toType(fn, args, i, TypeDouble)
}

// numericArg accepts integers and DECIMAL (converted to DECIMAL), NULL, or a string
// literal holding a number.
func numericArg(fn string, args []Expr, i int) (Expr, error) {
	if args[i].Type().Kind == KindDouble {
		return nil, noFunc(fn, args)
	}
	return toType(fn, args, i, TypeNumeric)
}

// timestampArg accepts a TIMESTAMP, NULL or a string literal holding a timestamp.
func timestampArg(fn string, args []Expr, i int) (Expr, error) {
	e, _, err := coerceTimestampArg(args[i])
	if err != nil {
		return nil, noFunc(fn, args)
	}
	return e, nil
}

// toType converts argument i to t along PostgreSQL's implicit casts: integers → DECIMAL →
// DOUBLE, and a string literal (PostgreSQL's untyped literal) to anything.
func toType(fn string, args []Expr, i int, t Type) (Expr, error) {
	e := args[i]
	k := e.Type().Kind
	switch {
	case k == t.Kind && (k != KindDecimal || t.Precision == 0):
		return e, nil
	case k == KindNull:
		return &Literal{V: Null, T: t}, nil
	case k == KindVarchar:
		if l, ok := e.(*Literal); ok {
			v, err := CastValue(l.V, t)
			if err != nil {
				return nil, err
			}
			return &Literal{V: v, T: t}, nil
		}
	case implicitNumeric(k, t.Kind):
		if l, ok := e.(*Literal); ok {
			v, err := CastValue(l.V, t)
			if err == nil {
				return &Literal{V: v, T: t}, nil
			}
		}
		return &Cast{Arg: e, T: t}, nil
	}
	return nil, noFunc(fn, args)
}

// implicitNumeric reports whether PostgreSQL converts from to to implicitly.
func implicitNumeric(from, to Kind) bool {
	r1, r2 := numRank(from), numRank(to)
	return r1 > 0 && r2 > 0 && r1 <= r2
}

// sameTypeArgs unifies all arguments to one type (GREATEST, COALESCE, NULLIF, ...),
// inserting implicit casts.
func sameTypeArgs(fn string, args []Expr) (Type, []Expr, error) {
	ts := make([]Type, len(args))
	for i, a := range args {
		ts[i] = a.Type()
	}
	t, ok := Unify(ts...)
	if !ok {
		return TypeNull, nil, typeMismatch("%s types %s cannot be matched", fn, joinTypes(ts))
	}
	out := make([]Expr, len(args))
	for i, a := range args {
		out[i] = coerceExpr(a, t)
	}
	return t, out, nil
}

func joinTypes(ts []Type) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, " and ")
}

// coerceExpr converts e to t when their kinds differ (numeric promotion, string literals,
// NULL); otherwise e is returned.
func coerceExpr(e Expr, t Type) Expr {
	et := e.Type()
	if et.Kind == t.Kind || t.Kind == KindNull {
		return e
	}
	if l, ok := e.(*Literal); ok {
		if v, err := CastValue(l.V, t); err == nil {
			return &Literal{V: v, T: t}
		}
	}
	if et.Kind == KindInt && t.Kind == KindBigInt {
		return &Cast{Arg: e, T: t}
	}
	return &Cast{Arg: e, T: t}
}

// strict1 builds the evaluator of a one-argument function that is NULL on NULL input.
func strict1(a Evaluator, f func(Value) Value) Evaluator {
	return func(r Row) Value {
		v := a(r)
		if v.K == KindNull {
			return v
		}
		return f(v)
	}
}

// strict2 is strict1 for two arguments.
func strict2(a, b Evaluator, f func(x, y Value) Value) Evaluator {
	return func(r Row) Value {
		x, y := a(r), b(r)
		if x.K == KindNull || y.K == KindNull {
			return nullOf(x, y)
		}
		return f(x, y)
	}
}

// strictN is strict1 for any number of arguments.
func strictN(args []Evaluator, f func(vs []Value) Value) Evaluator {
	return func(r Row) Value {
		var buf [4]Value
		vs := buf[:0]
		isNull := false
		for _, a := range args {
			v := a(r)
			if v.K == KindNull {
				if v.S != "" {
					return v
				}
				isNull = true
			}
			vs = append(vs, v)
		}
		if isNull {
			return Null
		}
		return f(vs)
	}
}
