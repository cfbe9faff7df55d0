package sql

import (
	"math"
	"strconv"
	"strings"
)

// Typing rules (documented in docs/sql.md):
//   - integer op integer is BIGINT; with a DECIMAL the result is DECIMAL; with a DOUBLE it is
//     DOUBLE. "/" follows the same rule (integer division truncates toward zero, as in
//     PostgreSQL); DECIMAL division keeps the larger scale plus 4 (at most 18).
//   - TIMESTAMP ± INTERVAL is TIMESTAMP, TIMESTAMP - TIMESTAMP is INTERVAL,
//     INTERVAL ± INTERVAL is INTERVAL, INTERVAL * integer is INTERVAL.
//   - comparisons need comparable kinds: numeric with numeric, VARCHAR with VARCHAR, and
//     so on; a VARCHAR literal compared with a TIMESTAMP is converted at bind time.
//   - the NULL literal fits every type.

// numRank orders the numeric kinds for promotion.
func numRank(k Kind) int {
	switch k {
	case KindInt:
		return 1
	case KindBigInt:
		return 2
	case KindDecimal:
		return 3
	case KindDouble:
		return 4
	}
	return 0
}

// promote returns the common numeric type of a and b for arithmetic.
func promote(a, b Type) Type {
	ra, rb := numRank(a.Kind), numRank(b.Kind)
	r, t := ra, a
	if rb > ra {
		r, t = rb, b
	}
	switch r {
	case 2:
		return TypeBigInt
	case 1:
		if a.Kind == KindInt && b.Kind == KindInt {
			return TypeInt
		}
		return TypeBigInt
	case 3:
		return TypeNumeric
	}
	return t
}

// typeMismatch builds a 42804 error.
func typeMismatch(format string, args ...any) *Error {
	return Errorf(CodeTypeMismatch, format, args...)
}

// Unify returns the common type of the given types for CASE, COALESCE and IN: the NULL
// type fits everything, numeric kinds promote, other kinds must match.
func Unify(ts ...Type) (Type, bool) {
	out := TypeNull
	for _, t := range ts {
		switch {
		case t.Kind == KindNull:
		case out.Kind == KindNull:
			out = t
		case out.Kind.IsNumeric() && t.Kind.IsNumeric():
			if out.Kind == t.Kind && out.Kind != KindDecimal {
				continue
			}
			if out.Kind == KindDecimal && t.Kind == KindDecimal && out == t {
				continue
			}
			out = promote(out, t)
		case out.Kind == t.Kind:
		case out.Kind == KindVarchar && t.Kind == KindJSON, out.Kind == KindJSON && t.Kind == KindVarchar:
			out = TypeVarchar
		default:
			return TypeNull, false
		}
	}
	return out, true
}

// comparable reports whether values of a and b can be compared.
func comparableKinds(a, b Kind) bool {
	if a == KindNull || b == KindNull {
		return true
	}
	if a.IsNumeric() && b.IsNumeric() {
		return true
	}
	if (a == KindVarchar || a == KindJSON) && (b == KindVarchar || b == KindJSON) {
		return true
	}
	return a == b
}

// coerceForCompare converts a VARCHAR literal compared with a TIMESTAMP (or a numeric
// string literal compared with a number) at bind time.
func coerceForCompare(a, b Expr) (Expr, Expr, error) {
	conv := func(lit Expr, to Type) (Expr, error) {
		l, ok := lit.(*Literal)
		if !ok || l.V.K != KindVarchar {
			return lit, nil
		}
		v, err := CastValue(l.V, to)
		if err != nil {
			return nil, err
		}
		return &Literal{V: v, T: to}, nil
	}
	var err error
	ta, tb := a.Type(), b.Type()
	if ta.Kind == KindVarchar && (tb.Kind == KindTimestamp || tb.Kind.IsNumeric() || tb.Kind == KindBool) {
		a, err = conv(a, tb)
	} else if tb.Kind == KindVarchar && (ta.Kind == KindTimestamp || ta.Kind.IsNumeric() || ta.Kind == KindBool) {
		b, err = conv(b, ta)
	}
	return a, b, err
}

// numericLiteral turns a VARCHAR literal holding a number into a BIGINT or DOUBLE literal
// when the other operand of an arithmetic operator is numeric: a string literal, or a
// parameter a client sent as text, reads as PostgreSQL's untyped literal does.
func numericLiteral(e, other Expr) Expr {
	l, ok := e.(*Literal)
	if !ok || l.V.K != KindVarchar || !other.Type().Kind.IsNumeric() {
		return e
	}
	s := strings.TrimSpace(l.V.S)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return &Literal{V: BigInt(i), T: TypeBigInt}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return &Literal{V: Double(f), T: TypeDouble}
	}
	return e
}

// NewCall checks the arguments of an operator or function and returns the typed call.
// Errors are *Error with code 42804 (type mismatch), 42883-like misuse reported as 42804, or
// 0A000 for an unknown function.
func NewCall(fn string, args ...Expr) (Expr, error) {
	fn = strings.ToUpper(fn)
	if d, ok := funcByAlias[fn]; ok {
		t, args, err := d.Check(args)
		if err != nil {
			return nil, err
		}
		return &Call{Func: d.Name, Args: args, T: t}, nil
	}
	t, args, err := callType(fn, args)
	if err != nil {
		return nil, err
	}
	return &Call{Func: fn, Args: args, T: t}, nil
}

func argc(fn string, args []Expr, min, max int) error {
	if len(args) < min || (max >= 0 && len(args) > max) {
		switch {
		case min == max:
			return typeMismatch("%s takes %d argument(s), got %d", fn, min, len(args))
		case max < 0:
			return typeMismatch("%s takes at least %d argument(s), got %d", fn, min, len(args))
		}
		return typeMismatch("%s takes %d to %d arguments, got %d", fn, min, max, len(args))
	}
	return nil
}

func isNumOrNull(k Kind) bool  { return k.IsNumeric() || k == KindNull }
func isStrOrNull(k Kind) bool  { return k == KindVarchar || k == KindJSON || k == KindNull }
func isBoolOrNull(k Kind) bool { return k == KindBool || k == KindNull }

func callType(fn string, args []Expr) (Type, []Expr, error) {
	kinds := make([]Kind, len(args))
	for i, a := range args {
		kinds[i] = a.Type().Kind
	}
	switch fn {
	case "+", "-", "*", "/", "%", "MOD":
		if err := argc(fn, args, 2, 2); err != nil {
			return TypeNull, nil, err
		}
		args = []Expr{numericLiteral(args[0], args[1]), numericLiteral(args[1], args[0])}
		t, err := arithType(fn, args[0].Type(), args[1].Type())
		return t, args, err
	case "NEG":
		if err := argc(fn, args, 1, 1); err != nil {
			return TypeNull, nil, err
		}
		k := kinds[0]
		if !isNumOrNull(k) && k != KindInterval {
			return TypeNull, nil, typeMismatch("cannot negate %s", k)
		}
		t := args[0].Type()
		if t.Kind == KindNull {
			t = TypeInt
		}
		if t.Kind == KindDecimal {
			t = TypeNumeric
		}
		return t, args, nil
	case "=", "<>", "<", "<=", ">", ">=":
		if err := argc(fn, args, 2, 2); err != nil {
			return TypeNull, nil, err
		}
		a, b, err := coerceForCompare(args[0], args[1])
		if err != nil {
			return TypeNull, nil, err
		}
		if !comparableKinds(a.Type().Kind, b.Type().Kind) {
			return TypeNull, nil, typeMismatch("cannot compare %s with %s", a.Type(), b.Type())
		}
		return TypeBool, []Expr{a, b}, nil
	case "AND", "OR":
		if err := argc(fn, args, 2, 2); err != nil {
			return TypeNull, nil, err
		}
		for i, k := range kinds {
			if !isBoolOrNull(k) {
				return TypeNull, nil, typeMismatch("argument %d of %s must be BOOLEAN, not %s", i+1, fn, k)
			}
		}
		return TypeBool, args, nil
	case "NOT":
		if err := argc(fn, args, 1, 1); err != nil {
			return TypeNull, nil, err
		}
		if !isBoolOrNull(kinds[0]) {
			return TypeNull, nil, typeMismatch("argument of NOT must be BOOLEAN, not %s", kinds[0])
		}
		return TypeBool, args, nil
	case "IS DISTINCT FROM", "IS NOT DISTINCT FROM":
		if err := argc(fn, args, 2, 2); err != nil {
			return TypeNull, nil, err
		}
		a, b, err := coerceForCompare(args[0], args[1])
		if err != nil {
			return TypeNull, nil, err
		}
		if !comparableKinds(a.Type().Kind, b.Type().Kind) {
			return TypeNull, nil, typeMismatch("cannot compare %s with %s", a.Type(), b.Type())
		}
		return TypeBool, []Expr{a, b}, nil
	case "||":
		if err := argc(fn, args, 2, 2); err != nil {
			return TypeNull, nil, err
		}
		ka, kb := args[0].Type().Kind, args[1].Type().Kind
		if ka != KindVarchar && ka != KindNull && kb != KindVarchar && kb != KindNull {
			return TypeNull, nil, Errorf(CodeUndefinedFunction, "operator does not exist: %s || %s", args[0].Type(), args[1].Type())
		}
		return TypeVarchar, args, nil
	case "REGEXP", "IREGEXP":
		if err := argc(fn, args, 2, 2); err != nil {
			return TypeNull, nil, err
		}
		for i := range args {
			if !isStrOrNull(args[i].Type().Kind) {
				return TypeNull, nil, Errorf(CodeUndefinedFunction, "operator does not exist: %s ~ %s", args[0].Type(), args[1].Type())
			}
		}
		return TypeBool, args, nil
	}
	return TypeNull, nil, Errorf(CodeNotSupported, "function %s is not supported", fn)
}

// coerceTimestampArg accepts a TIMESTAMP expression, NULL, or a VARCHAR literal holding a
// timestamp.
func coerceTimestampArg(e Expr) (Expr, bool, error) {
	switch e.Type().Kind {
	case KindTimestamp, KindNull:
		return e, false, nil
	case KindVarchar:
		if l, ok := e.(*Literal); ok {
			v, err := CastValue(l.V, TypeTimestamp)
			if err != nil {
				return nil, false, err
			}
			return &Literal{V: v, T: TypeTimestamp}, true, nil
		}
	}
	return nil, false, typeMismatch("expected a TIMESTAMP, got %s", e.Type())
}

func arithType(fn string, a, b Type) (Type, error) {
	ka, kb := a.Kind, b.Kind
	if ka == KindNull && kb == KindNull {
		return TypeInt, nil
	}
	if ka == KindNull && kb == KindInterval {
		// NULL ± INTERVAL: the NULL stands for a timestamp (so COALESCE and CASE over it
		// unify with TIMESTAMP).
		return TypeTimestamp, nil
	}
	if ka == KindNull {
		ka, a = kb, b
	}
	if kb == KindNull {
		kb, b = ka, a
	}
	switch {
	case ka.IsNumeric() && kb.IsNumeric():
		return promote(a, b), nil
	case fn == "+" && ka == KindTimestamp && kb == KindInterval,
		fn == "+" && ka == KindInterval && kb == KindTimestamp,
		fn == "-" && ka == KindTimestamp && kb == KindInterval:
		return TypeTimestamp, nil
	case fn == "-" && ka == KindTimestamp && kb == KindTimestamp,
		(fn == "+" || fn == "-") && ka == KindInterval && kb == KindInterval,
		(fn == "*" || fn == "/") && ka == KindInterval && kb.IsInteger(),
		fn == "*" && ka.IsInteger() && kb == KindInterval:
		return TypeInterval, nil
	}
	return TypeNull, typeMismatch("operator %s does not apply to %s and %s", fn, a, b)
}

// ParseType maps a type name of docs/sql.md (case-insensitive; INTEGER, STRING, TEXT, FLOAT,
// REAL, BOOL, DATETIME are accepted as synonyms) to a Type.
func ParseType(name string, precision, scale int) (Type, error) {
	switch strings.ToUpper(name) {
	case "BOOLEAN", "BOOL":
		return TypeBool, nil
	case "INT", "INTEGER", "SMALLINT", "TINYINT", "MEDIUMINT", "INT4", "INT2":
		return TypeInt, nil
	case "BIGINT", "INT8":
		return TypeBigInt, nil
	case "DOUBLE", "FLOAT", "REAL", "DOUBLE PRECISION", "FLOAT8", "FLOAT4":
		return TypeDouble, nil
	case "DECIMAL", "NUMERIC", "DEC":
		if precision <= 0 {
			if scale > 0 {
				return TypeNull, Errorf(CodeInvalidValue, "NUMERIC scale %d needs a precision", scale)
			}
			return TypeNumeric, nil
		}
		if scale < 0 {
			scale = 0
		}
		if precision > 255 || scale > precision {
			return TypeNull, Errorf(CodeInvalidValue, "NUMERIC(%d,%d) is not supported: precision 1 to 255 and scale 0 to precision", precision, scale)
		}
		return Type{Kind: KindDecimal, Precision: uint8(precision), Scale: uint8(scale)}, nil
	case "VARCHAR", "STRING", "TEXT", "CHAR":
		return TypeVarchar, nil
	case "TIMESTAMP", "DATETIME":
		return TypeTimestamp, nil
	case "JSON":
		return TypeJSON, nil
	}
	return TypeNull, Errorf(CodeNotSupported, "type %s is not supported", name)
}
