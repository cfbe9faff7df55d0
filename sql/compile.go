package sql

import (
	"math"
	"strings"
	"unicode/utf8"
)

// Evaluator is a compiled expression: called once per row.
type Evaluator = func(Row) Value

// Compile turns a bound expression into a closure. The tree is walked once here; the closure
// does no type dispatch that could be decided now and allocates only when it builds a new
// string. A constant subtree (no column, no NOW()) is evaluated once.
//
// Rows must hold, in each column, a value of the column's kind or NULL (the compiled code
// reads the payload field of the declared kind).
//
// Run-time failures (division by zero, overflow, a CAST that cannot convert its value, a
// value out of a function's domain) give an error value (ErrorValue) carrying the
// SQLSTATE and message PostgreSQL would raise for the row; it propagates like NULL and is
// checked by the operator that finishes the row.
func Compile(e Expr) (Evaluator, error) {
	if e == nil {
		return nil, Errorf(CodeInternal, "compile: nil expression")
	}
	e, failed, err := foldConstants(e)
	if err != nil {
		return nil, err
	}
	if failed.S != "" {
		// A constant part fails: as in PostgreSQL, whose planner evaluates constant
		// subexpressions beforehand, the expression fails wherever it is evaluated.
		return func(Row) Value { return failed }, nil
	}
	return compileExpr(e)
}

// foldConstants replaces every constant subtree (no column, no volatile call) by its
// value. failed is the error value of a constant subtree that cannot be computed.
func foldConstants(e Expr) (Expr, Value, error) {
	e, err := pruneCase(e)
	if err != nil {
		return nil, Null, err
	}
	failed := Null
	out, err := Transform(e, func(x Expr) (Expr, error) {
		if _, ok := x.(*Literal); ok || failed.S != "" {
			return x, nil
		}
		if c, ok := x.(*Call); ok && volatileCall(c) {
			return x, nil
		}
		if c, ok := x.(*Call); ok && (c.Func == "AND" || c.Func == "OR") {
			// x AND FALSE is FALSE, x OR TRUE is TRUE, whatever x does (PostgreSQL folds them).
			for _, ch := range c.Args {
				if l, ok := ch.(*Literal); ok && l.V.K == KindBool && (l.V.I != 0) == (c.Func == "OR") {
					return &Literal{V: l.V, T: TypeBool}, nil
				}
			}
		}
		if c, ok := x.(*Call); ok && strictCall(c) {
			// As PostgreSQL's planner: a strict call with a NULL constant argument is NULL,
			// whatever its other arguments would do.
			for _, ch := range c.Args {
				if l, ok := ch.(*Literal); ok && l.V.K == KindNull && l.V.S == "" {
					return &Literal{V: Null, T: c.T}, nil
				}
			}
		}
		for _, ch := range x.Children() {
			if _, ok := ch.(*Literal); !ok {
				return x, nil
			}
		}
		if _, ok := x.(*ColumnRef); ok {
			return x, nil
		}
		f, err := compileExpr(x)
		if err != nil {
			return nil, err
		}
		v := f(nil)
		if v.IsError() {
			failed = v
			return x, nil
		}
		return &Literal{V: v, T: x.Type()}, nil
	})
	return out, failed, err
}

// pruneCase drops the branches of searched CASE expressions whose condition is a constant
// FALSE or NULL, and the branches after a constant TRUE one, as PostgreSQL's planner does
// before it evaluates constants (so a failing constant in a dead branch fails nothing).
func pruneCase(e Expr) (Expr, error) {
	return Transform(e, func(x Expr) (Expr, error) {
		c, ok := x.(*Case)
		if !ok || c.Operand != nil {
			return x, nil
		}
		n := &Case{T: c.T, Else: c.Else}
		changed := false
		for i, w := range c.Whens {
			if !IsConstant(w) {
				n.Whens = append(n.Whens, w)
				n.Thens = append(n.Thens, c.Thens[i])
				continue
			}
			f, err := compileExpr(w)
			if err != nil {
				return nil, err
			}
			v := f(nil)
			switch {
			case v.IsError():
				n.Whens = append(n.Whens, w)
				n.Thens = append(n.Thens, c.Thens[i])
				continue
			case v.Truth():
				changed = true
				n.Else = c.Thens[i]
				if len(n.Whens) == 0 {
					return coerceExpr(n.Else, c.T), nil
				}
				return n, nil
			}
			changed = true // FALSE or NULL: the branch never runs
		}
		if !changed {
			return x, nil
		}
		if len(n.Whens) == 0 {
			if n.Else == nil {
				return &Literal{V: Null, T: c.T}, nil
			}
			return coerceExpr(n.Else, c.T), nil
		}
		return n, nil
	})
}

// strictCall reports whether c returns NULL whenever an argument is NULL: operators other
// than the NULL-consuming ones below, and functions by their registry entry's Nulls.
func strictCall(c *Call) bool {
	switch c.Func {
	case "AND", "OR", "IS DISTINCT FROM", "IS NOT DISTINCT FROM":
		return false
	}
	d, ok := LookupFunc(c.Func)
	if !ok {
		return true
	}
	switch d.Nulls {
	case NullConsumes:
		return false
	case NullFirstArg:
		l, ok := c.Args[0].(*Literal)
		return ok && l.V.K == KindNull && l.V.S == ""
	}
	return true
}

// compileExpr compiles e whose constant parts are already folded.
func compileExpr(e Expr) (Evaluator, error) {
	if _, isLit := e.(*Literal); !isLit && IsConstant(e) {
		f, err := compile(e)
		if err != nil {
			return nil, err
		}
		v := f(nil)
		return func(Row) Value { return v }, nil
	}
	return compile(e)
}

// MustCompile is Compile for expressions known to be valid (tests, constant folding); it
// panics on error.
func MustCompile(e Expr) Evaluator {
	f, err := Compile(e)
	if err != nil {
		panic(err)
	}
	return f
}

// Eval compiles and evaluates a constant expression (for INSERT ... VALUES); a value that
// cannot be computed is returned as its *Error.
func Eval(e Expr, row Row) (Value, error) {
	f, err := Compile(e)
	if err != nil {
		return Null, err
	}
	v := f(row)
	if e := v.AsError(); e != nil {
		return Null, e
	}
	return v, nil
}

func compileAll(es []Expr) ([]Evaluator, error) {
	out := make([]Evaluator, len(es))
	for i, e := range es {
		f, err := compileExpr(e)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

func compile(e Expr) (Evaluator, error) {
	switch n := e.(type) {
	case *Literal:
		v := n.V
		return func(Row) Value { return v }, nil
	case *ColumnRef:
		i := n.Index
		if i < 0 {
			return nil, Errorf(CodeInternal, "compile: column %s has no index", n.Name)
		}
		return func(r Row) Value { return r[i] }, nil
	case *Call:
		return compileCall(n)
	case *Cast:
		f, err := compileExpr(n.Arg)
		if err != nil {
			return nil, err
		}
		t := n.T
		from := n.Arg.Type().Kind
		if from == t.Kind && t.Kind != KindDecimal && t.Kind != KindInt {
			return f, nil
		}
		if from.IsInteger() && t.Kind == KindBigInt {
			return func(r Row) Value {
				v := f(r)
				if v.K != KindNull {
					v.K = KindBigInt
				}
				return v
			}, nil
		}
		if from.IsInteger() && t.Kind == KindDouble {
			return func(r Row) Value {
				v := f(r)
				if v.K == KindNull {
					return v
				}
				return Double(float64(v.I))
			}, nil
		}
		return func(r Row) Value {
			v := f(r)
			if v.K == KindNull {
				return v
			}
			out, err := CastValue(v, t)
			if err != nil {
				return errValue(err.(*Error))
			}
			return out
		}, nil
	case *IsNull:
		f, err := compileExpr(n.Arg)
		if err != nil {
			return nil, err
		}
		if n.Not {
			return func(r Row) Value {
				v := f(r)
				if v.K == KindNull && v.S != "" {
					return v
				}
				return Bool(v.K != KindNull)
			}, nil
		}
		return func(r Row) Value {
			v := f(r)
			if v.K == KindNull && v.S != "" {
				return v
			}
			return Bool(v.K == KindNull)
		}, nil
	case *Between:
		return compileBetween(n)
	case *In:
		return compileIn(n)
	case *Like:
		return compileLike(n)
	case *Case:
		return compileCase(n)
	case *memoRef:
		return compileMemoRef(n)
	}
	return nil, Errorf(CodeInternal, "compile: unknown expression %T", e)
}

func compileCase(n *Case) (Evaluator, error) {
	if n.Operand == nil {
		if op, lits, ok := sameOperandEquals(n.Whens); ok {
			// CASE WHEN e = 'a' THEN ... WHEN e = 'b' ... is CASE e WHEN 'a' ...: e is
			// computed once per row, not once per WHEN.
			m := *n
			m.Operand, m.Whens = op, lits
			return compileCase(&m)
		}
	}
	whens, err := compileAll(n.Whens)
	if err != nil {
		return nil, err
	}
	thens := make([]Evaluator, len(n.Thens))
	for i, t := range n.Thens {
		f, err := compileExpr(t)
		if err != nil {
			return nil, err
		}
		thens[i] = coerceTo(f, t.Type(), n.T)
	}
	els, err := compileElse(n)
	if err != nil {
		return nil, err
	}
	if n.Operand != nil {
		op, err := compileExpr(n.Operand)
		if err != nil {
			return nil, err
		}
		return func(r Row) Value {
			x := op(r)
			if x.K == KindNull && x.S != "" {
				return x
			}
			if x.K != KindNull {
				for i, w := range whens {
					y := w(r)
					if y.K == KindNull && y.S != "" {
						return y
					}
					if y.K != KindNull && Compare(x, y) == 0 {
						return thens[i](r)
					}
				}
			}
			return els(r)
		}, nil
	}
	return func(r Row) Value {
		for i, w := range whens {
			c := w(r)
			if c.K == KindBool && c.I != 0 {
				return thens[i](r)
			}
			if c.K == KindNull && c.S != "" {
				return c
			}
		}
		return els(r)
	}, nil
}

// compileElse compiles the ELSE of a CASE, NULL when it has none.
func compileElse(n *Case) (Evaluator, error) {
	if n.Else == nil {
		return func(Row) Value { return Null }, nil
	}
	f, err := compileExpr(n.Else)
	if err != nil {
		return nil, err
	}
	return coerceTo(f, n.Else.Type(), n.T), nil
}

// sameOperandEquals reports whether every WHEN of a searched CASE compares one expression
// (the same on each, calling no volatile function) with a non-NULL literal of exactly its
// type, among those whose = is Compare's equality (VARCHAR, INT, BIGINT, BOOLEAN); it
// returns the expression and the literals, the simple CASE's operand and WHENs.
func sameOperandEquals(whens []Expr) (Expr, []Expr, bool) {
	if len(whens) < 2 {
		return nil, nil, false
	}
	var op Expr
	lits := make([]Expr, len(whens))
	for i, w := range whens {
		c, ok := w.(*Call)
		if !ok || c.Func != "=" || len(c.Args) != 2 {
			return nil, nil, false
		}
		e, l := c.Args[0], c.Args[1]
		lit, isLit := l.(*Literal)
		if !isLit {
			if lit, isLit = e.(*Literal); !isLit {
				return nil, nil, false
			}
			e = l
		}
		switch k := e.Type().Kind; {
		case lit.V.IsNull() || lit.T.Kind != k:
			return nil, nil, false
		case k != KindVarchar && k != KindInt && k != KindBigInt && k != KindBool:
			return nil, nil, false
		}
		if i == 0 {
			op = e
		} else if !SameExpr(op, e) {
			return nil, nil, false
		}
		lits[i] = lit
	}
	return op, lits, !CallsVolatile(op)
}

// coerceTo wraps f so that its values have type to (numeric promotion for CASE/COALESCE).
func coerceTo(f Evaluator, from, to Type) Evaluator {
	if from.Kind == to.Kind && (to.Kind != KindDecimal || from.Scale == to.Scale) || from.Kind == KindNull {
		if to.Kind == KindBigInt && from.Kind == KindInt {
			return func(r Row) Value { v := f(r); v.K = KindBigInt; return v }
		}
		return f
	}
	if from.Kind == KindInt && to.Kind == KindBigInt {
		return func(r Row) Value {
			v := f(r)
			if v.K == KindInt {
				v.K = KindBigInt
			}
			return v
		}
	}
	return func(r Row) Value {
		v := f(r)
		if v.K == KindNull {
			return v
		}
		out, err := CastValue(v, to)
		if err != nil {
			return errValue(err.(*Error))
		}
		return out
	}
}

func compileBetween(n *Between) (Evaluator, error) {
	a, lo, hi := n.Arg, n.Lo, n.Hi
	var err error
	if a, lo, err = coerceForCompare(a, lo); err != nil {
		return nil, err
	}
	if a, hi, err = coerceForCompare(a, hi); err != nil {
		return nil, err
	}
	fa, err := compileExpr(a)
	if err != nil {
		return nil, err
	}
	flo, err := compileExpr(lo)
	if err != nil {
		return nil, err
	}
	fhi, err := compileExpr(hi)
	if err != nil {
		return nil, err
	}
	not := n.Not
	return func(r Row) Value {
		x, l := fa(r), flo(r)
		if x.K != KindNull && l.K != KindNull {
			// a BETWEEN l AND h is a >= l AND a <= h: decided without h when a < l.
			if Compare(x, l) < 0 {
				return Bool(not)
			}
		}
		h := fhi(r)
		if x.K == KindNull || l.K == KindNull || h.K == KindNull {
			if e := nullOf(nullOf(x, l), h); e.S != "" {
				return e
			}
		}
		if x.K == KindNull {
			return Null
		}
		// x >= l AND x <= h, three-valued.
		c1, c2 := Null, Null
		if l.K != KindNull {
			c1 = Bool(Compare(x, l) >= 0)
		}
		if h.K != KindNull {
			c2 = Bool(Compare(x, h) <= 0)
		}
		v := and3(c1, c2)
		if not && v.K != KindNull {
			v.I ^= 1
		}
		return v
	}, nil
}

func and3(a, b Value) Value {
	if (a.K == KindBool && a.I == 0) || (b.K == KindBool && b.I == 0) {
		return Bool(false)
	}
	if a.K == KindNull || b.K == KindNull {
		return Null
	}
	return Bool(true)
}

func compileIn(n *In) (Evaluator, error) {
	fa, err := compileExpr(n.Arg)
	if err != nil {
		return nil, err
	}
	not := n.Not
	// All-constant list: a set for the common kinds.
	consts := make([]Value, 0, len(n.List))
	allConst := true
	hasNull := false
	for _, e := range n.List {
		_, b, err := coerceForCompare(n.Arg, e)
		if err != nil {
			return nil, err
		}
		if !IsConstant(b) {
			allConst = false
			break
		}
		v, err := Eval(b, nil)
		if err != nil {
			return nil, err
		}
		if v.K == KindNull {
			hasNull = true
			continue
		}
		consts = append(consts, v)
	}
	result := func(found bool) Value {
		if found {
			return Bool(!not)
		}
		if hasNull {
			return Null
		}
		return Bool(not)
	}
	if allConst {
		k := n.Arg.Type().Kind
		sameKind := true
		for _, v := range consts {
			if v.K != k && !(intLike(v.K) && intLike(k)) {
				sameKind = false
			}
		}
		switch {
		case sameKind && (k == KindVarchar || k == KindJSON):
			return inSet(fa, consts, func(v Value) string { return v.S }, result), nil
		case sameKind && intLike(k):
			return inSet(fa, consts, func(v Value) int64 { return v.I }, result), nil
		}
		return func(r Row) Value {
			x := fa(r)
			if x.K == KindNull {
				return x
			}
			for _, v := range consts {
				if Compare(x, v) == 0 {
					return result(true)
				}
			}
			return result(false)
		}, nil
	}
	// Constant elements are tried before the others (PostgreSQL splits the list the same
	// way: a constant match decides the result whatever the other elements would do).
	var consts2, others []Expr
	for _, e := range n.List {
		_, b, err := coerceForCompare(n.Arg, e)
		if err != nil {
			return nil, err
		}
		if IsConstant(b) {
			consts2 = append(consts2, b)
		} else {
			others = append(others, b)
		}
	}
	list := make([]Evaluator, 0, len(n.List))
	for _, b := range append(consts2, others...) {
		f, err := compileExpr(b)
		if err != nil {
			return nil, err
		}
		list = append(list, f)
	}
	return func(r Row) Value {
		x := fa(r)
		if x.K == KindNull {
			return x
		}
		sawNull := false
		for _, f := range list {
			v := f(r)
			if v.K == KindNull {
				if v.S != "" {
					return v
				}
				sawNull = true
			} else if Compare(x, v) == 0 {
				return Bool(!not)
			}
		}
		if sawNull {
			return Null
		}
		return Bool(not)
	}, nil
}

func compileLike(n *Like) (Evaluator, error) {
	fa, err := compileExpr(n.Arg)
	if err != nil {
		return nil, err
	}
	esc := n.Escape
	if esc == 0 {
		esc = '\\'
	}
	not := n.Not
	wrap := func(m bool) Value { return Bool(m != not) }
	if IsConstant(n.Pattern) {
		p, err := Eval(n.Pattern, nil)
		if err != nil {
			return nil, err
		}
		if p.K == KindNull {
			return func(Row) Value { return p }, nil
		}
		if bad := likeEndsInEscape(p.S, esc); bad.S != "" {
			// PostgreSQL fails only when matching reaches the trailing escape: when the
			// pattern before it matches a prefix of the text.
			prefix := CompileLike(strings.TrimSuffix(p.S, string(esc))+"%", esc)
			return func(r Row) Value {
				x := fa(r)
				if x.K == KindNull {
					return x
				}
				if !prefix(x.S) {
					return wrap(false)
				}
				return bad
			}, nil
		}
		m := CompileLike(p.S, esc)
		return func(r Row) Value {
			x := fa(r)
			if x.K == KindNull {
				return x
			}
			return wrap(m(x.S))
		}, nil
	}
	fp, err := compileExpr(n.Pattern)
	if err != nil {
		return nil, err
	}
	return func(r Row) Value {
		x, p := fa(r), fp(r)
		if x.K == KindNull || p.K == KindNull {
			return nullOf(x, p)
		}
		if bad := likeEndsInEscape(p.S, esc); bad.S != "" {
			if !CompileLike(strings.TrimSuffix(p.S, string(esc))+"%", esc)(x.S) {
				return wrap(false)
			}
			return bad
		}
		return wrap(CompileLike(p.S, esc)(x.S))
	}, nil
}

// likeEndsInEscape returns an error value when pattern ends in an unescaped escape
// character (PostgreSQL: 22025), else NULL.
func likeEndsInEscape(pattern string, esc rune) Value {
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		if rs[i] == esc {
			if i == len(rs)-1 {
				return ErrorValue(CodeInvalidEscape, "LIKE pattern must not end with escape character")
			}
			i++
		}
	}
	return Null
}

// CompileLike compiles a LIKE pattern into a matcher: % any run, _ one character, esc
// quotes the next character.
func CompileLike(pattern string, esc rune) func(string) bool {
	type tok struct {
		any  bool // %
		one  bool // _
		lit  string
		runs int
	}
	var toks []tok
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			toks = append(toks, tok{lit: lit.String()})
			lit.Reset()
		}
	}
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == esc && i+1 < len(rs):
			i++
			lit.WriteRune(rs[i])
		case c == '%':
			flush()
			if len(toks) == 0 || !toks[len(toks)-1].any {
				toks = append(toks, tok{any: true})
			}
		case c == '_':
			flush()
			toks = append(toks, tok{one: true})
		default:
			lit.WriteRune(c)
		}
	}
	flush()
	// Fast paths.
	switch {
	case len(toks) == 0:
		return func(s string) bool { return s == "" }
	case len(toks) == 1 && toks[0].any:
		return func(string) bool { return true }
	case len(toks) == 1 && toks[0].lit != "":
		l := toks[0].lit
		return func(s string) bool { return s == l }
	case len(toks) == 2 && toks[0].lit != "" && toks[1].any:
		l := toks[0].lit
		return func(s string) bool { return strings.HasPrefix(s, l) }
	case len(toks) == 2 && toks[0].any && toks[1].lit != "":
		l := toks[1].lit
		return func(s string) bool { return strings.HasSuffix(s, l) }
	case len(toks) == 3 && toks[0].any && toks[1].lit != "" && toks[2].any:
		l := toks[1].lit
		return func(s string) bool { return strings.Contains(s, l) }
	}
	// General: greedy with backtracking to the last %, linear in practice.
	return func(s string) bool {
		ti, si := 0, 0
		starT, starS := -1, 0
		for {
			if ti < len(toks) {
				t := toks[ti]
				switch {
				case t.any:
					starT, starS = ti, si
					ti++
					continue
				case t.one:
					if si < len(s) {
						_, w := utf8.DecodeRuneInString(s[si:])
						si += w
						ti++
						continue
					}
				default:
					if strings.HasPrefix(s[si:], t.lit) {
						si += len(t.lit)
						ti++
						continue
					}
				}
			} else if si == len(s) {
				return true
			}
			if starT < 0 || starS >= len(s) {
				return false
			}
			_, w := utf8.DecodeRuneInString(s[starS:])
			starS += w
			ti, si = starT+1, starS
		}
	}
}

func compileCall(c *Call) (Evaluator, error) {
	args, err := compileAll(c.Args)
	if err != nil {
		return nil, err
	}
	if c.Def != nil {
		return c.Def.Build(c, args)
	}
	if d, ok := funcRegistry[c.Func]; ok {
		return d.Build(c, args)
	}
	switch c.Func {
	case "+", "-", "*", "/", "%", "MOD":
		return compileArith(c, args)
	case "NEG":
		f := args[0]
		switch c.T.Kind {
		case KindDouble:
			return func(r Row) Value {
				v := f(r)
				if v.K == KindNull {
					return v
				}
				return Double(-v.F())
			}, nil
		case KindDecimal:
			return func(r Row) Value {
				v := f(r)
				if v.K == KindNull {
					return v
				}
				return NumericSub(Value{K: KindDecimal}, v)
			}, nil
		}
		k := c.T.Kind
		return func(r Row) Value {
			v := f(r)
			if v.K == KindNull {
				return v
			}
			if v.I == math.MinInt64 || k == KindInt && v.I == math.MinInt32 {
				return ErrorValue(CodeNumericOutOfRange, outOfRange(k))
			}
			v.I = -v.I
			v.K = k
			return v
		}, nil
	case "=", "<>", "<", "<=", ">", ">=":
		return compileCompare(c.Func, c.Args[0], c.Args[1], args[0], args[1]), nil
	case "IS DISTINCT FROM", "IS NOT DISTINCT FROM":
		a, b := args[0], args[1]
		distinct := c.Func == "IS DISTINCT FROM"
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				if e := nullOf(x, y); e.S != "" {
					return e
				}
				return Bool((x.K == KindNull) != (y.K == KindNull) == distinct)
			}
			return Bool((Compare(x, y) != 0) == distinct)
		}, nil
	case "||":
		a, b := args[0], args[1]
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			return Varchar(castText(x) + castText(y))
		}, nil
	case "REGEXP", "IREGEXP":
		flags := ""
		if c.Func == "IREGEXP" {
			flags = "i"
		}
		a, p := args[0], args[1]
		if l, ok := c.Args[1].(*Literal); ok && l.V.K == KindVarchar {
			re, _, rerr := compileRegexp(l.V.S, flags)
			return func(r Row) Value {
				x := a(r)
				if x.K == KindNull {
					return x
				}
				if rerr != nil {
					return errValue(rerr)
				}
				return Bool(re.MatchString(x.S))
			}, nil
		}
		return strict2(a, p, func(x, y Value) Value {
			re, _, rerr := compileRegexp(y.S, flags)
			if rerr != nil {
				return errValue(rerr)
			}
			return Bool(re.MatchString(x.S))
		}), nil
	case "AND":
		a, b := args[0], args[1]
		return func(r Row) Value {
			x := a(r)
			if x.K == KindBool && x.I == 0 || x.K == KindNull && x.S != "" {
				return x
			}
			y := b(r)
			if y.K == KindBool && y.I == 0 || y.K == KindNull && y.S != "" {
				return y
			}
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			return Bool(true)
		}, nil
	case "OR":
		a, b := args[0], args[1]
		return func(r Row) Value {
			x := a(r)
			if x.K == KindBool && x.I != 0 || x.K == KindNull && x.S != "" {
				return x
			}
			y := b(r)
			if y.K == KindBool && y.I != 0 || y.K == KindNull && y.S != "" {
				return y
			}
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			return Bool(false)
		}, nil
	case "NOT":
		a := args[0]
		return func(r Row) Value {
			x := a(r)
			if x.K == KindNull {
				return x
			}
			return Bool(x.I == 0)
		}, nil
	}
	return nil, Errorf(CodeNotSupported, "function %s is not supported", c.Func)
}

// castText is a value cast to text as PostgreSQL's || does (booleans as true/false).
func castText(v Value) string {
	if v.K == KindBool {
		if v.I != 0 {
			return "true"
		}
		return "false"
	}
	return Text(v)
}

// compileCompare specializes a comparison for the argument kinds.
func compileCompare(op string, ea, eb Expr, a, b Evaluator) Evaluator {
	code := cmpOpCode(op)
	test := func(c int) bool { return cmpTest(code, c) }
	ka, kb := ea.Type().Kind, eb.Type().Kind
	// A column against a constant: the hot filter path reads the row in place.
	if col, ok := ea.(*ColumnRef); ok && col.Index >= 0 {
		if lit, ok := eb.(*Literal); ok && lit.V.K != KindNull {
			if f := compareColumnConst(col.Index, ka, lit.V, code); f != nil {
				return f
			}
		}
	}
	if lit, ok := eb.(*Literal); ok && lit.V.K != KindNull {
		k := lit.V
		switch {
		case ka == KindDouble && kindClass(k.K) == 1:
			x := k.AsFloat()
			switch op {
			case ">":
				if x == x { // not NaN; NaN is above every number
					return func(r Row) Value {
						v := a(r)
						if v.K == KindNull {
							return v
						}
						return Bool(v.F() > x || v.F() != v.F())
					}
				}
			case "<":
				if x == x {
					return func(r Row) Value {
						v := a(r)
						if v.K == KindNull {
							return v
						}
						return Bool(v.F() < x)
					}
				}
			}
			return func(r Row) Value {
				v := a(r)
				if v.K == KindNull {
					return v
				}
				return Bool(test(cmpFloat(v.F(), x)))
			}
		case intLike(ka) && intLike(k.K):
			x := k.I
			return func(r Row) Value {
				v := a(r)
				if v.K == KindNull {
					return v
				}
				return Bool(test(cmpInt(v.I, x)))
			}
		case (ka == KindVarchar || ka == KindJSON) && (k.K == KindVarchar || k.K == KindJSON):
			x := k.S
			if op == "=" {
				return func(r Row) Value {
					v := a(r)
					if v.K == KindNull {
						return v
					}
					return Bool(v.S == x)
				}
			}
			return func(r Row) Value {
				v := a(r)
				if v.K == KindNull {
					return v
				}
				return Bool(test(strings.Compare(v.S, x)))
			}
		}
	}
	switch {
	case intLike(ka) && intLike(kb):
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			return Bool(test(cmpInt(x.I, y.I)))
		}
	case ka == KindDouble && kb == KindDouble:
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			return Bool(test(cmpFloat(x.F(), y.F())))
		}
	}
	return func(r Row) Value {
		x, y := a(r), b(r)
		if x.K == KindNull || y.K == KindNull {
			return nullOf(x, y)
		}
		return Bool(test(Compare(x, y)))
	}
}

func compileArith(c *Call, args []Evaluator) (Evaluator, error) {
	a, b := args[0], args[1]
	op := c.Func
	if op == "MOD" {
		op = "%"
	}
	switch c.T.Kind {
	case KindBigInt, KindInt:
		if f := fastIntArith(op, c.T.Kind, a, b); f != nil {
			return f, nil
		}
		k := c.T.Kind
		if op == "/" {
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return nullOf(x, y)
				}
				if y.I == 0 {
					return ErrorValue(CodeDivisionByZero, "division by zero")
				}
				if y.I == -1 {
					return intResult(k, -x.I, x.I != math.MinInt64)
				}
				return Value{K: k, I: x.I / y.I}
			}, nil
		}
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			if y.I == 0 {
				return ErrorValue(CodeDivisionByZero, "division by zero")
			}
			if y.I == -1 {
				return Value{K: k}
			}
			return Value{K: k, I: x.I % y.I}
		}, nil
	case KindDouble:
		if f := fastDoubleArith(op, a, b); f != nil {
			return f, nil
		}
		if op == "/" {
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return nullOf(x, y)
				}
				xf, yf := x.AsFloat(), y.AsFloat()
				if yf == 0 && !math.IsNaN(xf) {
					return ErrorValue(CodeDivisionByZero, "division by zero")
				}
				return checkFloat(xf/yf, math.IsInf(xf, 0) || math.IsInf(yf, 0), xf != 0 && !math.IsInf(yf, 0))
			}, nil
		}
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			yf := y.AsFloat()
			if yf == 0 {
				return ErrorValue(CodeDivisionByZero, "division by zero")
			}
			return Double(math.Mod(x.AsFloat(), yf))
		}, nil
	case KindDecimal:
		switch op {
		case "+", "-":
			neg := op == "-"
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return nullOf(x, y)
				}
				// Fast path: both held in 64 bits (integers count as scale 0).
				if x.S == "" && y.S == "" && x.K != KindDouble && y.K != KindDouble {
					sx, sy := decScale(x), decScale(y)
					xi, yi := x.I, y.I
					ok := true
					if sx < sy {
						xi, ok = rescaleInt(xi, sx, sy)
						sx = sy
					} else if sy < sx {
						yi, ok = rescaleInt(yi, sy, sx)
					}
					if neg {
						yi = -yi
						ok = ok && y.I != math.MinInt64
					}
					if s := xi + yi; ok && (s > xi) == (yi > 0) {
						return Value{K: KindDecimal, I: s, Scale: sx}
					}
				}
				if neg {
					return NumericSub(x, y)
				}
				return NumericAdd(x, y)
			}, nil
		case "*":
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return nullOf(x, y)
				}
				if x.S == "" && y.S == "" && x.K != KindDouble && y.K != KindDouble {
					if s := decScale(x) + decScale(y); s <= maxSmallScale {
						if p, ok := mulInt(x.I, y.I); ok {
							return Value{K: KindDecimal, I: p, Scale: s}
						}
					}
				}
				return NumericMul(x, y)
			}, nil
		}
		f := NumericMod
		if op == "/" {
			f = NumericDiv
		}
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			return f(x, y)
		}, nil
	case KindTimestamp, KindInterval:
		k := c.T.Kind
		switch op {
		case "+", "-":
			neg := op == "-"
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return nullOf(x, y)
				}
				yi := y.I
				if neg {
					yi = -yi
				}
				s := x.I + yi
				if (s > x.I) != (yi > 0) {
					return ErrorValue(CodeDatetimeOverflow, "timestamp out of range")
				}
				if k == KindTimestamp {
					return checkTimestamp(s)
				}
				return Value{K: k, I: s}
			}, nil
		case "*":
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return nullOf(x, y)
				}
				v, ok := mulInt(x.I, y.I)
				if !ok {
					return ErrorValue(CodeNumericOutOfRange, "interval out of range")
				}
				return Value{K: k, I: v}
			}, nil
		case "/":
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return nullOf(x, y)
				}
				if y.I == 0 {
					return ErrorValue(CodeDivisionByZero, "division by zero")
				}
				return Value{K: k, I: x.I / y.I}
			}, nil
		}
	}
	return nil, Errorf(CodeInternal, "compile: operator %s of type %s", c.Func, c.T)
}

// intResult is v as an INT or BIGINT, or the out-of-range error when !ok or an INT does
// not fit 32 bits.
func intResult(k Kind, v int64, ok bool) Value {
	if !ok || k == KindInt && v != int64(int32(v)) {
		return ErrorValue(CodeNumericOutOfRange, outOfRange(k))
	}
	return Value{K: k, I: v}
}

func mulInt(x, y int64) (int64, bool) {
	if x == 0 || y == 0 {
		return 0, true
	}
	p := x * y
	if p/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
		return 0, false
	}
	return p, true
}

func byteOffset(s string, chars int64) int {
	i := 0
	for ; chars > 0 && i < len(s); chars-- {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return i
}

// compareColumnConst compares column i of the row with the constant k without copying
// the row's value.
func compareColumnConst(i int, ka Kind, k Value, code uint8) Evaluator {
	switch {
	case ka == KindDouble && kindClass(k.K) == 1:
		x := k.AsFloat()
		return func(r Row) Value {
			v := &r[i]
			if v.K == KindNull {
				return Null
			}
			return Bool(cmpTest(code, cmpFloat(v.F(), x)))
		}
	case intLike(ka) && intLike(k.K):
		x := k.I
		return func(r Row) Value {
			v := &r[i]
			if v.K == KindNull {
				return Null
			}
			return Bool(cmpTest(code, cmpInt(v.I, x)))
		}
	case (ka == KindVarchar || ka == KindJSON) && (k.K == KindVarchar || k.K == KindJSON):
		x := k.S
		return func(r Row) Value {
			v := &r[i]
			if v.K == KindNull {
				return Null
			}
			return Bool(cmpTest(code, strings.Compare(v.S, x)))
		}
	}
	return nil
}

// cmpOpCode numbers the comparison operators for cmpTest.
func cmpOpCode(op string) uint8 {
	switch op {
	case "=":
		return 0
	case "<>":
		return 1
	case "<":
		return 2
	case "<=":
		return 3
	case ">":
		return 4
	}
	return 5 // >=
}

// cmpTest applies comparison code to a three-way result.
func cmpTest(code uint8, c int) bool {
	switch code {
	case 0:
		return c == 0
	case 1:
		return c != 0
	case 2:
		return c < 0
	case 3:
		return c <= 0
	case 4:
		return c > 0
	}
	return c >= 0
}

// fastIntArith specializes integer + - * per operator and result kind (no indirect call
// per row). Overflow (of 32 bits for INT, as PostgreSQL's int4) is an error value.
func fastIntArith(op string, k Kind, a, b Evaluator) Evaluator {
	if k == KindInt {
		var f func(x, y int64) int64
		switch op {
		case "+":
			f = func(x, y int64) int64 { return x + y }
		case "-":
			f = func(x, y int64) int64 { return x - y }
		case "*":
			f = func(x, y int64) int64 { return x * y }
		default:
			return nil
		}
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			s := f(x.I, y.I) // operands are 32-bit: no 64-bit overflow
			if s != int64(int32(s)) {
				return ErrorValue(CodeNumericOutOfRange, "integer out of range")
			}
			return Value{K: KindInt, I: s}
		}
	}
	switch op {
	case "+":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			s := x.I + y.I
			if (s > x.I) != (y.I > 0) {
				return ErrorValue(CodeNumericOutOfRange, "bigint out of range")
			}
			return Value{K: k, I: s}
		}
	case "-":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			s := x.I - y.I
			if (s < x.I) != (y.I > 0) {
				return ErrorValue(CodeNumericOutOfRange, "bigint out of range")
			}
			return Value{K: k, I: s}
		}
	case "*":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			p, ok := mulInt(x.I, y.I)
			if !ok {
				return ErrorValue(CodeNumericOutOfRange, "bigint out of range")
			}
			return Value{K: k, I: p}
		}
	}
	return nil
}

// fastDoubleArith specializes DOUBLE + - * per operator: a finite result that overflows to
// infinity (or a product that underflows to zero) is an error value, as in PostgreSQL.
func fastDoubleArith(op string, a, b Evaluator) Evaluator {
	switch op {
	case "+", "-":
		neg := op == "-"
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			xf, yf := x.AsFloat(), y.AsFloat()
			if neg {
				yf = -yf
			}
			s := xf + yf
			if math.IsInf(s, 0) && !math.IsInf(xf, 0) && !math.IsInf(yf, 0) {
				return ErrorValue(CodeNumericOutOfRange, "value out of range: overflow")
			}
			return Double(s)
		}
	case "*":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return nullOf(x, y)
			}
			xf, yf := x.AsFloat(), y.AsFloat()
			p := xf * yf
			if math.IsInf(p, 0) && !math.IsInf(xf, 0) && !math.IsInf(yf, 0) {
				return ErrorValue(CodeNumericOutOfRange, "value out of range: overflow")
			}
			if p == 0 && xf != 0 && yf != 0 {
				return ErrorValue(CodeNumericOutOfRange, "value out of range: underflow")
			}
			return Double(p)
		}
	}
	return nil
}

// inSet compiles x IN (constants) as a hash-set lookup on the payload field key picks.
func inSet[K comparable](fa Evaluator, consts []Value, key func(Value) K, result func(bool) Value) Evaluator {
	set := make(map[K]struct{}, len(consts))
	for _, v := range consts {
		set[key(v)] = struct{}{}
	}
	return func(r Row) Value {
		x := fa(r)
		if x.K == KindNull {
			return x
		}
		_, ok := set[key(x)]
		return result(ok)
	}
}
