package filter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// kind is the type of a value, after Java's: int and long are distinct (an integer literal
// in the int range is an int), property values are strings.
type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kLong
	kDouble
	kString
)

type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
}

var (
	vNull  = value{}
	vTrue  = value{k: kBool, b: true}
	vFalse = value{k: kBool}
)

func boolValue(b bool) value {
	if b {
		return vTrue
	}
	return vFalse
}

func (v value) numeric() bool { return v.k == kInt || v.k == kLong || v.k == kDouble }

// errEval is wrapped by every evaluation error.
var errEval = errors.New("filter: evaluation failed")

func evalErr(f string, a ...any) error {
	return fmt.Errorf("%w: %s", errEval, fmt.Sprintf(f, a...))
}

// Getter returns a message property (TAGS, KEYS and user properties alike).
type Getter func(name string) (string, bool)

// node is an expression tree node. isBool marks what RocketMQ calls a boolean expression
// (a comparison, a logical operator, TRUE/FALSE/NULL, a property cast to boolean).
type node interface {
	eval(get Getter) (value, error)
	String() string
}

type constant struct{ v value }

func (c constant) eval(Getter) (value, error) { return c.v, nil }
func (c constant) String() string {
	switch c.v.k {
	case kNull:
		return "NULL"
	case kBool:
		if c.v.b {
			return "TRUE"
		}
		return "FALSE"
	case kInt, kLong:
		return strconv.FormatInt(c.v.i, 10)
	case kDouble:
		s := strconv.FormatFloat(c.v.f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return s
	}
	return quote(c.v.s)
}

type property struct{ name string }

func (p property) eval(get Getter) (value, error) {
	if s, ok := get(p.name); ok {
		return value{k: kString, s: s}, nil
	}
	return vNull, nil
}
func (p property) String() string { return p.name }

// boolCast is a property used where a boolean is expected: TRUE only if the value is a
// boolean, which a property (a string) never is; NULL when the property is missing.
type boolCast struct{ x node }

func (c boolCast) eval(get Getter) (value, error) {
	v, err := c.x.eval(get)
	if err != nil || v.k == kNull {
		return vNull, err
	}
	return boolValue(v.k == kBool && v.b), nil
}
func (c boolCast) String() string { return c.x.String() }

type not struct{ x node }

func (n not) eval(get Getter) (value, error) {
	v, err := n.x.eval(get)
	if err != nil || v.k != kBool {
		return vNull, err
	}
	return boolValue(!v.b), nil
}
func (n not) String() string { return "(NOT " + n.x.String() + ")" }

type negate struct{ x node }

func (n negate) eval(get Getter) (value, error) {
	v, err := n.x.eval(get)
	if err != nil {
		return vNull, err
	}
	switch v.k {
	case kInt:
		return value{k: kInt, i: int64(-int32(v.i))}, nil
	case kLong:
		return value{k: kLong, i: -v.i}, nil
	case kDouble:
		return value{k: kDouble, f: -v.f}, nil
	}
	return vNull, nil
}
func (n negate) String() string { return "(- " + n.x.String() + ")" }

type logic struct {
	and  bool
	l, r node
}

func (n logic) eval(get Getter) (value, error) {
	lv, err := n.l.eval(get)
	if err != nil {
		return vNull, err
	}
	if lv.k == kBool && lv.b != n.and {
		return lv, nil // FALSE AND ..., TRUE OR ...
	}
	rv, err := n.r.eval(get)
	if err != nil {
		return vNull, err
	}
	if rv.k == kBool && rv.b != n.and {
		return rv, nil
	}
	if lv.k != kBool || rv.k != kBool {
		return vNull, nil
	}
	return boolValue(n.and), nil
}
func (n logic) String() string {
	op := " OR "
	if n.and {
		op = " AND "
	}
	return "(" + n.l.String() + op + n.r.String() + ")"
}

type cmpOp uint8

const (
	opEq cmpOp = iota
	opGt
	opGe
	opLt
	opLe
)

var cmpSymbols = [...]string{"=", ">", ">=", "<", "<="}

type comparison struct {
	op   cmpOp
	l, r node
}

func (n comparison) eval(get Getter) (value, error) {
	if n.op == opEq {
		lv, err := n.l.eval(get)
		if err != nil {
			return vNull, err
		}
		rv, err := n.r.eval(get)
		if err != nil {
			return vNull, err
		}
		if (lv.k == kNull) != (rv.k == kNull) {
			if lv.k == kNull {
				return vNull, nil
			}
			return vFalse, nil
		}
		if lv.k == kNull || equal(lv, rv) {
			return vTrue, nil
		}
		c, err := compare(lv, rv)
		if err != nil {
			return vNull, err
		}
		return boolValue(c == 0), nil
	}
	lv, err := n.l.eval(get)
	if err != nil || lv.k == kNull {
		return vNull, err
	}
	rv, err := n.r.eval(get)
	if err != nil || rv.k == kNull {
		return vNull, err
	}
	if lv.k == kString && rv.k == kString {
		lf, err1 := javaParseDouble(lv.s)
		rf, err2 := javaParseDouble(rv.s)
		if err1 != nil || err2 != nil {
			return vNull, evalErr("cannot compare strings %s and %s with %s", quote(lv.s), quote(rv.s), cmpSymbols[n.op])
		}
		lv, rv = value{k: kDouble, f: lf}, value{k: kDouble, f: rf}
	}
	c, err := compare(lv, rv)
	if err != nil {
		return vNull, err
	}
	switch n.op {
	case opGt:
		return boolValue(c > 0), nil
	case opGe:
		return boolValue(c >= 0), nil
	case opLt:
		return boolValue(c < 0), nil
	}
	return boolValue(c <= 0), nil
}
func (n comparison) String() string {
	return "(" + n.l.String() + " " + cmpSymbols[n.op] + " " + n.r.String() + ")"
}

// isNull is x IS NULL (RocketMQ: x = NULL without the checks).
type isNull struct{ x node }

func (n isNull) eval(get Getter) (value, error) {
	v, err := n.x.eval(get)
	if err != nil {
		return vNull, err
	}
	return boolValue(v.k == kNull), nil
}
func (n isNull) String() string { return "(" + n.x.String() + " IS NULL)" }

type in struct {
	x      property
	set    map[string]bool
	list   []string
	negate bool
}

func (n in) eval(get Getter) (value, error) {
	v, err := n.x.eval(get)
	if err != nil || v.k != kString {
		return vNull, err
	}
	return boolValue(n.set[v.s] != n.negate), nil
}
func (n in) String() string {
	var sb strings.Builder
	sb.WriteString("(" + n.x.String())
	if n.negate {
		sb.WriteString(" NOT")
	}
	sb.WriteString(" IN (")
	for i, s := range n.list {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(quote(s))
	}
	sb.WriteString("))")
	return sb.String()
}

// strMatch is [NOT] CONTAINS / STARTSWITH / ENDSWITH: FALSE (not NULL) for a missing or
// non-string value or an empty pattern, negated or not.
type strMatch struct {
	x       node
	op      tokKind
	pattern string
	negate  bool
}

func (n strMatch) eval(get Getter) (value, error) {
	v, err := n.x.eval(get)
	if err != nil {
		return vNull, err
	}
	if n.pattern == "" || v.k != kString {
		return vFalse, nil
	}
	var ok bool
	switch n.op {
	case tContains:
		ok = strings.Contains(v.s, n.pattern)
	case tStartsWith:
		ok = strings.HasPrefix(v.s, n.pattern)
	default:
		ok = strings.HasSuffix(v.s, n.pattern)
	}
	return boolValue(ok != n.negate), nil
}
func (n strMatch) String() string {
	op := map[tokKind]string{tContains: "CONTAINS", tStartsWith: "STARTSWITH", tEndsWith: "ENDSWITH"}[n.op]
	if n.negate {
		op = "NOT " + op
	}
	return "(" + n.x.String() + " " + op + " " + quote(n.pattern) + ")"
}

// equal is Java's equals: same type and value (doubles by bits, so NaN equals NaN).
func equal(a, b value) bool {
	if a.k != b.k {
		return false
	}
	switch a.k {
	case kBool:
		return a.b == b.b
	case kInt, kLong:
		return a.i == b.i
	case kDouble:
		if math.IsNaN(a.f) || math.IsNaN(b.f) {
			return math.IsNaN(a.f) && math.IsNaN(b.f)
		}
		return math.Float64bits(a.f) == math.Float64bits(b.f)
	case kString:
		return a.s == b.s
	}
	return true
}

// compare orders two non-null values as RocketMQ does: numbers are widened to the wider
// type, a string beside a number or a boolean is converted to it (an error if it does
// not convert), other mixed types compare as "less".
func compare(a, b value) (int, error) {
	if a.k != b.k {
		var err error
		switch {
		case a.k == kBool:
			if b.k == kString {
				return 0, evalErr("cannot compare a boolean with the string %s", quote(b.s))
			}
			return -1, nil
		case a.numeric() && b.numeric():
			if a.k == kDouble || b.k == kDouble {
				a, b = toDouble(a), toDouble(b)
			} else {
				a.k, b.k = kLong, kLong
			}
		case a.numeric() && b.k == kString:
			b, err = convert(b.s, a.k)
		case a.k == kString && (b.numeric() || b.k == kBool):
			a, err = convert(a.s, b.k)
		default:
			return -1, nil
		}
		if err != nil {
			return 0, err
		}
	}
	switch a.k {
	case kBool:
		return cmpBool(a.b, b.b), nil
	case kInt, kLong:
		return cmpInt(a.i, b.i), nil
	case kDouble:
		return javaCompareDouble(a.f, b.f), nil
	case kString:
		return strings.Compare(a.s, b.s), nil
	}
	return 0, nil
}

func toDouble(v value) value {
	if v.k == kDouble {
		return v
	}
	return value{k: kDouble, f: float64(v.i)}
}

// convert parses a property value as the given type.
func convert(s string, k kind) (value, error) {
	switch k {
	case kInt:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return vNull, evalErr("%s is not an int", quote(s))
		}
		return value{k: kInt, i: n}, nil
	case kLong:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return vNull, evalErr("%s is not a long", quote(s))
		}
		return value{k: kLong, i: n}, nil
	case kDouble:
		f, err := javaParseDouble(s)
		if err != nil {
			return vNull, err
		}
		return value{k: kDouble, f: f}, nil
	case kBool:
		return boolValue(strings.EqualFold(s, "true")), nil
	}
	return vNull, evalErr("no conversion")
}

// javaParseDouble reads a number the way Java's Double.valueOf does (surrounding control
// characters and spaces trimmed, an optional f/F/d/D suffix, NaN and Infinity spelled so).
func javaParseDouble(s string) (float64, error) {
	t := strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	body := strings.TrimLeft(t, "+-")
	switch body {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		if strings.HasPrefix(t, "-") {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	}
	if n := len(t); n > 1 && strings.ContainsRune("fFdD", rune(t[n-1])) && !strings.HasPrefix(strings.ToLower(body), "0x") {
		t = t[:n-1]
	}
	if len(t) == 0 || strings.ContainsAny(t, "_iInN") || len(t)-len(strings.TrimLeft(t, "+-")) > 1 {
		return 0, evalErr("%s is not a number", quote(s))
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, evalErr("%s is not a number", quote(s))
	}
	return f, nil
}

// javaCompareDouble is Double.compare: -0.0 < 0.0, NaN above everything and equal to itself.
func javaCompareDouble(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	ab, bb := int64(math.Float64bits(a)), int64(math.Float64bits(b))
	if math.IsNaN(a) {
		ab = 0x7ff8000000000000
	}
	if math.IsNaN(b) {
		bb = 0x7ff8000000000000
	}
	return cmpInt(ab, bb)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
