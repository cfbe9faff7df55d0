package sql

import (
	"math"
	"regexp"
	"regexp/syntax"
	"strings"
	"time"
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
// Run-time failures never stop a row: division or MOD by zero, integer overflow, and a
// CAST that cannot convert its value give NULL.
func Compile(e Expr) (Evaluator, error) {
	if e == nil {
		return nil, Errorf(CodeInternal, "compile: nil expression")
	}
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

// Eval compiles and evaluates a constant expression (for INSERT ... VALUES).
func Eval(e Expr, row Row) (Value, error) {
	f, err := Compile(e)
	if err != nil {
		return Null, err
	}
	return f(row), nil
}

func compileAll(es []Expr) ([]Evaluator, error) {
	out := make([]Evaluator, len(es))
	for i, e := range es {
		f, err := Compile(e)
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
		f, err := Compile(n.Arg)
		if err != nil {
			return nil, err
		}
		t := n.T
		from := n.Arg.Type().Kind
		if from == t.Kind && t.Kind != KindDecimal && t.Kind != KindInt {
			return f, nil
		}
		return func(r Row) Value {
			v, err := CastValue(f(r), t)
			if err != nil {
				return Null
			}
			return v
		}, nil
	case *IsNull:
		f, err := Compile(n.Arg)
		if err != nil {
			return nil, err
		}
		if n.Not {
			return func(r Row) Value { return Bool(f(r).K != KindNull) }, nil
		}
		return func(r Row) Value { return Bool(f(r).K == KindNull) }, nil
	case *Between:
		return compileBetween(n)
	case *In:
		return compileIn(n)
	case *Like:
		return compileLike(n)
	case *Case:
		return compileCase(n)
	}
	return nil, Errorf(CodeInternal, "compile: unknown expression %T", e)
}

func compileCase(n *Case) (Evaluator, error) {
	whens, err := compileAll(n.Whens)
	if err != nil {
		return nil, err
	}
	thens := make([]Evaluator, len(n.Thens))
	for i, t := range n.Thens {
		f, err := Compile(t)
		if err != nil {
			return nil, err
		}
		thens[i] = coerceTo(f, t.Type(), n.T)
	}
	els := func(Row) Value { return Null }
	if n.Else != nil {
		f, err := Compile(n.Else)
		if err != nil {
			return nil, err
		}
		els = coerceTo(f, n.Else.Type(), n.T)
	}
	if n.Operand != nil {
		op, err := Compile(n.Operand)
		if err != nil {
			return nil, err
		}
		return func(r Row) Value {
			x := op(r)
			if x.K != KindNull {
				for i, w := range whens {
					if y := w(r); y.K != KindNull && Compare(x, y) == 0 {
						return thens[i](r)
					}
				}
			}
			return els(r)
		}, nil
	}
	return func(r Row) Value {
		for i, w := range whens {
			if w(r).Truth() {
				return thens[i](r)
			}
		}
		return els(r)
	}, nil
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
		v, err := CastValue(f(r), to)
		if err != nil {
			return Null
		}
		return v
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
	fa, err := Compile(a)
	if err != nil {
		return nil, err
	}
	flo, err := Compile(lo)
	if err != nil {
		return nil, err
	}
	fhi, err := Compile(hi)
	if err != nil {
		return nil, err
	}
	not := n.Not
	return func(r Row) Value {
		x, l, h := fa(r), flo(r), fhi(r)
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
	fa, err := Compile(n.Arg)
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
				return Null
			}
			for _, v := range consts {
				if Compare(x, v) == 0 {
					return result(true)
				}
			}
			return result(false)
		}, nil
	}
	list := make([]Evaluator, len(n.List))
	for i, e := range n.List {
		_, b, err := coerceForCompare(n.Arg, e)
		if err != nil {
			return nil, err
		}
		if list[i], err = Compile(b); err != nil {
			return nil, err
		}
	}
	return func(r Row) Value {
		x := fa(r)
		if x.K == KindNull {
			return Null
		}
		sawNull := false
		for _, f := range list {
			v := f(r)
			if v.K == KindNull {
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
	fa, err := Compile(n.Arg)
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
			return func(Row) Value { return Null }, nil
		}
		m := CompileLike(p.S, esc)
		return func(r Row) Value {
			x := fa(r)
			if x.K == KindNull {
				return Null
			}
			return wrap(m(x.S))
		}, nil
	}
	fp, err := Compile(n.Pattern)
	if err != nil {
		return nil, err
	}
	return func(r Row) Value {
		x, p := fa(r), fp(r)
		if x.K == KindNull || p.K == KindNull {
			return Null
		}
		return wrap(CompileLike(p.S, esc)(x.S))
	}, nil
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
					return Null
				}
				return Double(-v.AsFloat())
			}, nil
		}
		k := c.T.Kind
		return func(r Row) Value {
			v := f(r)
			if v.K == KindNull || v.I == math.MinInt64 {
				return Null
			}
			v.I = -v.I
			v.K = k
			return v
		}, nil
	case "=", "<>", "<", "<=", ">", ">=":
		return compileCompare(c.Func, c.Args[0], c.Args[1], args[0], args[1]), nil
	case "AND":
		a, b := args[0], args[1]
		return func(r Row) Value {
			x := a(r)
			if x.K == KindBool && x.I == 0 {
				return x
			}
			y := b(r)
			if y.K == KindBool && y.I == 0 {
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
			if x.K == KindBool && x.I != 0 {
				return x
			}
			y := b(r)
			if y.K == KindBool && y.I != 0 {
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
				return Null
			}
			return Bool(x.I == 0)
		}, nil
	case "COALESCE", "IFNULL":
		fs := make([]Evaluator, len(args))
		for i, f := range args {
			fs[i] = coerceTo(f, c.Args[i].Type(), c.T)
		}
		return func(r Row) Value {
			for _, f := range fs {
				if v := f(r); v.K != KindNull {
					return v
				}
			}
			return Null
		}, nil
	}
	if f := compileStringFunc(c, args); f != nil {
		return f, nil
	}
	if f := compileMathFunc(c, args); f != nil {
		return f, nil
	}
	return compileTimeJSONFunc(c, args)
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
				return func(r Row) Value {
					v := a(r)
					if v.K == KindNull {
						return Null
					}
					return Bool(v.F > x)
				}
			case "<":
				return func(r Row) Value {
					v := a(r)
					if v.K == KindNull {
						return Null
					}
					return Bool(v.F < x)
				}
			}
			return func(r Row) Value {
				v := a(r)
				if v.K == KindNull {
					return Null
				}
				return Bool(test(cmpFloat(v.F, x)))
			}
		case intLike(ka) && intLike(k.K):
			x := k.I
			return func(r Row) Value {
				v := a(r)
				if v.K == KindNull {
					return Null
				}
				return Bool(test(cmpInt(v.I, x)))
			}
		case (ka == KindVarchar || ka == KindJSON) && (k.K == KindVarchar || k.K == KindJSON):
			x := k.S
			if op == "=" {
				return func(r Row) Value {
					v := a(r)
					if v.K == KindNull {
						return Null
					}
					return Bool(v.S == x)
				}
			}
			return func(r Row) Value {
				v := a(r)
				if v.K == KindNull {
					return Null
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
				return Null
			}
			return Bool(test(cmpInt(x.I, y.I)))
		}
	case ka == KindDouble && kb == KindDouble:
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			return Bool(test(cmpFloat(x.F, y.F)))
		}
	}
	return func(r Row) Value {
		x, y := a(r), b(r)
		if x.K == KindNull || y.K == KindNull {
			return Null
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
		var f func(x, y int64) (int64, bool)
		switch op {
		case "+":
			f = func(x, y int64) (int64, bool) {
				s := x + y
				return s, (s > x) == (y > 0)
			}
		case "-":
			f = func(x, y int64) (int64, bool) {
				s := x - y
				return s, (s < x) == (y > 0)
			}
		case "*":
			f = mulInt
		case "/":
			f = func(x, y int64) (int64, bool) {
				if y == 0 || (x == math.MinInt64 && y == -1) {
					return 0, false
				}
				return x / y, true
			}
		default:
			f = func(x, y int64) (int64, bool) {
				if y == 0 {
					return 0, false
				}
				if y == -1 {
					return 0, true
				}
				return x % y, true
			}
		}
		k := c.T.Kind
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			v, ok := f(x.I, y.I)
			if !ok {
				return Null
			}
			return Value{K: k, I: v}
		}, nil
	case KindDouble:
		if f := fastDoubleArith(op, a, b); f != nil {
			return f, nil
		}
		var f func(x, y float64) (float64, bool)
		switch op {
		case "+":
			f = func(x, y float64) (float64, bool) { return x + y, true }
		case "-":
			f = func(x, y float64) (float64, bool) { return x - y, true }
		case "*":
			f = func(x, y float64) (float64, bool) { return x * y, true }
		case "/":
			f = func(x, y float64) (float64, bool) { return x / y, y != 0 }
		default:
			f = func(x, y float64) (float64, bool) { return math.Mod(x, y), y != 0 }
		}
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			v, ok := f(x.AsFloat(), y.AsFloat())
			if !ok {
				return Null
			}
			return Double(v)
		}, nil
	case KindDecimal:
		s := c.T.Scale
		switch op {
		case "+", "-", "%":
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return Null
				}
				xi, ok1 := rescaleInt(x.I, decScale(x), s)
				yi, ok2 := rescaleInt(y.I, decScale(y), s)
				if !ok1 || !ok2 {
					return Null
				}
				var v int64
				ok := true
				switch op {
				case "+":
					v = xi + yi
					ok = (v > xi) == (yi > 0)
				case "-":
					v = xi - yi
					ok = (v < xi) == (yi > 0)
				default:
					if yi == 0 {
						return Null
					}
					v = xi % yi
				}
				if !ok {
					return Null
				}
				return Decimal(v, s)
			}, nil
		case "*":
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return Null
				}
				v, ok := mulInt(x.I, y.I)
				if !ok {
					return Null
				}
				ps := decScale(x) + decScale(y)
				if ps > s {
					v = roundScaled(v, ps, s)
				}
				return Decimal(v, s)
			}, nil
		default: // "/"
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull || y.I == 0 {
					return Null
				}
				q := math.Round(x.AsFloat() / y.AsFloat() * Pow10(s))
				if math.Abs(q) > 9.2e18 {
					return Null
				}
				return Decimal(int64(q), s)
			}, nil
		}
	case KindTimestamp, KindInterval:
		k := c.T.Kind
		switch op {
		case "+":
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return Null
				}
				return Value{K: k, I: x.I + y.I}
			}, nil
		case "-":
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return Null
				}
				return Value{K: k, I: x.I - y.I}
			}, nil
		case "*":
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull {
					return Null
				}
				v, ok := mulInt(x.I, y.I)
				if !ok {
					return Null
				}
				return Value{K: k, I: v}
			}, nil
		case "/":
			return func(r Row) Value {
				x, y := a(r), b(r)
				if x.K == KindNull || y.K == KindNull || y.I == 0 {
					return Null
				}
				return Value{K: k, I: x.I / y.I}
			}, nil
		}
	}
	return nil, Errorf(CodeInternal, "compile: operator %s of type %s", c.Func, c.T)
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

func compileStringFunc(c *Call, args []Evaluator) Evaluator {
	str1 := func(fn func(string) string) Evaluator {
		a := args[0]
		return func(r Row) Value {
			v := a(r)
			if v.K == KindNull {
				return Null
			}
			return Varchar(fn(v.S))
		}
	}
	switch c.Func {
	case "LOWER":
		return str1(strings.ToLower)
	case "UPPER":
		return str1(strings.ToUpper)
	case "TRIM", "LTRIM", "RTRIM":
		left, right := c.Func != "RTRIM", c.Func != "LTRIM"
		var rem Evaluator
		if len(args) == 2 {
			rem = args[1]
		}
		a := args[0]
		return func(r Row) Value {
			v := a(r)
			if v.K == KindNull {
				return Null
			}
			cut := " "
			if rem != nil {
				x := rem(r)
				if x.K == KindNull {
					return Null
				}
				cut = x.S
			}
			return Varchar(trimRepeated(v.S, cut, left, right))
		}
	case "CONCAT":
		return func(r Row) Value {
			var buf [8]Value
			vals := buf[:0]
			for _, f := range args {
				v := f(r)
				if v.K == KindNull {
					return Null
				}
				vals = append(vals, v)
			}
			if len(vals) == 1 && vals[0].K == KindVarchar {
				return vals[0]
			}
			var b strings.Builder
			for _, v := range vals {
				if v.K == KindVarchar || v.K == KindJSON {
					b.WriteString(v.S)
				} else {
					b.WriteString(v.String())
				}
			}
			return Varchar(b.String())
		}
	case "LENGTH", "CHAR_LENGTH":
		a := args[0]
		return func(r Row) Value {
			v := a(r)
			if v.K == KindNull {
				return Null
			}
			return BigInt(int64(utf8.RuneCountInString(v.S)))
		}
	case "REPLACE":
		a, from, to := args[0], args[1], args[2]
		return func(r Row) Value {
			v, f, t := a(r), from(r), to(r)
			if v.K == KindNull || f.K == KindNull || t.K == KindNull {
				return Null
			}
			if f.S == "" {
				return Varchar(v.S)
			}
			return Varchar(strings.ReplaceAll(v.S, f.S, t.S))
		}
	case "REGEXP_EXTRACT":
		pattern := c.Args[1].(*Literal).V.S
		re := regexp.MustCompile(pattern) // checked when the call was typed
		need := requiredLiterals(pattern)
		a := args[0]
		var group Evaluator
		if len(args) == 3 {
			group = args[2]
		}
		return func(r Row) Value {
			v := a(r)
			if v.K == KindNull {
				return Null
			}
			g := 0
			if group != nil {
				gv := group(r)
				if gv.K == KindNull || gv.I < 0 || gv.I > int64(re.NumSubexp()) {
					return Null
				}
				g = int(gv.I)
			}
			for _, l := range need {
				if !strings.Contains(v.S, l) {
					return Null // no match can be without it: skip the regular expression
				}
			}
			m := re.FindStringSubmatchIndex(v.S)
			if m == nil || m[2*g] < 0 {
				return Null
			}
			return Varchar(v.S[m[2*g]:m[2*g+1]])
		}
	case "SPLIT_INDEX":
		a, sep, idx := args[0], args[1], args[2]
		return func(r Row) Value {
			v, d, i := a(r), sep(r), idx(r)
			if v.K == KindNull || d.K == KindNull || i.K == KindNull || d.S == "" || i.I < 0 {
				return Null
			}
			s := v.S
			for n := i.I; n > 0; n-- {
				k := strings.Index(s, d.S)
				if k < 0 {
					return Null
				}
				s = s[k+len(d.S):]
			}
			if k := strings.Index(s, d.S); k >= 0 {
				s = s[:k]
			}
			return Varchar(s)
		}
	case "SUBSTRING":
		a, p := args[0], args[1]
		var l Evaluator
		if len(args) == 3 {
			l = args[2]
		}
		return func(r Row) Value {
			v, pv := a(r), p(r)
			if v.K == KindNull || pv.K == KindNull {
				return Null
			}
			n := int64(-1)
			if l != nil {
				lv := l(r)
				if lv.K == KindNull {
					return Null
				}
				n = lv.I
			}
			return Varchar(substring(v.S, pv.I, n))
		}
	}
	return nil
}

// requiredLiterals are strings every match of the regular expression contains: the
// case-sensitive literals of its top-level concatenation (through capture groups). Testing
// them with strings.Contains rejects most non-matching inputs for a fraction of a match.
func requiredLiterals(pattern string) []string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	var out []string
	add := func(r *syntax.Regexp) {
		for r.Op == syntax.OpCapture {
			r = r.Sub[0]
		}
		if r.Op == syntax.OpLiteral && r.Flags&syntax.FoldCase == 0 {
			out = append(out, string(r.Rune))
		}
	}
	if re.Op == syntax.OpConcat {
		for _, sub := range re.Sub {
			add(sub)
		}
	} else {
		add(re)
	}
	return out
}

// trimRepeated removes repeated occurrences of cut from the start and/or end of s
// (MySQL TRIM semantics).
func trimRepeated(s, cut string, left, right bool) string {
	if cut == "" {
		return s
	}
	if left {
		for strings.HasPrefix(s, cut) {
			s = s[len(cut):]
		}
	}
	if right {
		for strings.HasSuffix(s, cut) {
			s = s[:len(s)-len(cut)]
		}
	}
	return s
}

// substring is SUBSTRING(s, pos, n) over characters: pos is 1-based, a negative pos counts
// from the end, pos 0 gives ”; n < 0 means to the end (only when n was omitted).
func substring(s string, pos, n int64) string {
	count := int64(utf8.RuneCountInString(s))
	if pos == 0 || (n < 0 && n != -1) {
		return ""
	}
	if pos < 0 {
		pos = count + pos + 1
		if pos < 1 {
			return ""
		}
	}
	if pos > count {
		return ""
	}
	start := byteOffset(s, pos-1)
	if n == -1 || pos-1+n >= count {
		return s[start:]
	}
	end := start + byteOffset(s[start:], n)
	return s[start:end]
}

func byteOffset(s string, chars int64) int {
	i := 0
	for ; chars > 0 && i < len(s); chars-- {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return i
}

func compileMathFunc(c *Call, args []Evaluator) Evaluator {
	if len(args) == 0 {
		return nil
	}
	a := args[0]
	k := c.T.Kind
	switch c.Func {
	case "ABS":
		return func(r Row) Value {
			v := a(r)
			switch v.K {
			case KindNull:
				return Null
			case KindDouble:
				return Double(math.Abs(v.F))
			}
			if v.I < 0 {
				if v.I == math.MinInt64 {
					return Null
				}
				v.I = -v.I
			}
			if v.K == KindInt {
				v.K = KindBigInt
			}
			return v
		}
	case "FLOOR", "CEIL", "CEILING":
		up := c.Func != "FLOOR"
		return func(r Row) Value {
			v := a(r)
			switch v.K {
			case KindNull:
				return Null
			case KindDouble:
				if up {
					return Double(math.Ceil(v.F))
				}
				return Double(math.Floor(v.F))
			case KindDecimal:
				p := int64(Pow10(v.Scale))
				q, rem := v.I/p, v.I%p
				if up && rem > 0 {
					q++
				} else if !up && rem < 0 {
					q--
				}
				return Decimal(q, 0)
			}
			v.K = k
			return v
		}
	case "ROUND":
		var d Evaluator
		if len(args) == 2 {
			d = args[1]
		}
		ts := c.T.Scale
		return func(r Row) Value {
			v := a(r)
			if v.K == KindNull {
				return Null
			}
			digits := int64(0)
			if d != nil {
				dv := d(r)
				if dv.K == KindNull {
					return Null
				}
				digits = dv.I
			}
			switch v.K {
			case KindDouble:
				if digits > 15 || digits < -18 {
					if digits > 15 {
						return v
					}
					return Double(0)
				}
				if digits >= 0 {
					p := Pow10(uint8(digits))
					return Double(math.Round(v.F*p) / p)
				}
				p := Pow10(uint8(-digits))
				return Double(math.Round(v.F/p) * p)
			case KindDecimal:
				if v.Scale > ts {
					return Decimal(roundScaled(v.I, v.Scale, ts), ts)
				}
				return v
			}
			// integers
			if digits < 0 && digits > -19 {
				p := int64(Pow10(uint8(-digits)))
				q, rem := v.I/p, v.I%p
				if rem >= (p+1)/2 {
					q++
				} else if -rem >= (p+1)/2 {
					q--
				}
				v.I = q * p
			} else if digits <= -19 {
				v.I = 0
			}
			v.K = k
			return v
		}
	}
	return nil
}

func compileTimeJSONFunc(c *Call, args []Evaluator) (Evaluator, error) {
	switch c.Func {
	case "NOW", "CURRENT_TIMESTAMP":
		return func(Row) Value { return Timestamp(time.Now().UnixMilli()) }, nil
	case "DATE_FORMAT":
		a := args[0]
		if lit, ok := c.Args[1].(*Literal); ok {
			if lit.V.K == KindNull {
				return func(Row) Value { return Null }, nil
			}
			layout := compileDateFormat(lit.V.S)
			return func(r Row) Value {
				v := a(r)
				if v.K == KindNull {
					return Null
				}
				return Varchar(layout(v.I))
			}, nil
		}
		fm := args[1]
		return func(r Row) Value {
			v, f := a(r), fm(r)
			if v.K == KindNull || f.K == KindNull {
				return Null
			}
			return Varchar(compileDateFormat(f.S)(v.I))
		}, nil
	case "EXTRACT":
		unit := c.Args[0].(*Literal).V.S
		f := extractUnits[unit]
		a := args[1]
		return func(r Row) Value {
			v := a(r)
			if v.K == KindNull {
				return Null
			}
			return BigInt(f(v.I))
		}, nil
	case "JSON_EXTRACT":
		path, err := parseJSONPath(c.Args[1].(*Literal).V.S)
		if err != nil {
			return nil, err
		}
		a := args[0]
		return func(r Row) Value {
			v := a(r)
			if v.K == KindNull {
				return Null
			}
			out, ok := jsonExtract(v.S, path)
			if !ok {
				return Null
			}
			return JSONValue(out)
		}, nil
	case "JSON_UNQUOTE":
		a := args[0]
		return func(r Row) Value {
			v := a(r)
			if v.K == KindNull {
				return Null
			}
			s, ok := jsonUnquote(v.S)
			if !ok {
				return Null
			}
			return Varchar(s)
		}, nil
	}
	return nil, Errorf(CodeNotSupported, "function %s is not supported", c.Func)
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
			return Bool(cmpTest(code, cmpFloat(v.F, x)))
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

// fastIntArith specializes integer + - * per operator (no indirect call per row).
func fastIntArith(op string, k Kind, a, b Evaluator) Evaluator {
	switch op {
	case "+":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			s := x.I + y.I
			if (s > x.I) != (y.I > 0) {
				return Null
			}
			return Value{K: k, I: s}
		}
	case "-":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			s := x.I - y.I
			if (s < x.I) != (y.I > 0) {
				return Null
			}
			return Value{K: k, I: s}
		}
	case "*":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			p, ok := mulInt(x.I, y.I)
			if !ok {
				return Null
			}
			return Value{K: k, I: p}
		}
	}
	return nil
}

// fastDoubleArith specializes DOUBLE + - * per operator.
func fastDoubleArith(op string, a, b Evaluator) Evaluator {
	switch op {
	case "+":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			return Double(x.AsFloat() + y.AsFloat())
		}
	case "-":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			return Double(x.AsFloat() - y.AsFloat())
		}
	case "*":
		return func(r Row) Value {
			x, y := a(r), b(r)
			if x.K == KindNull || y.K == KindNull {
				return Null
			}
			return Double(x.AsFloat() * y.AsFloat())
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
			return Null
		}
		_, ok := set[key(x)]
		return result(ok)
	}
}
