package sql

import (
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// NUMERIC (DECIMAL) values follow PostgreSQL's numeric: arbitrary precision (up to 131072
// digits before the decimal point and 16383 after), each value with its own display scale,
// plus NaN, Infinity and -Infinity. Two representations, never both for one number:
//
//   - small: Value.I is the coefficient and Value.Scale (≤ maxSmallScale) the number of
//     digits after the point (12.50 is I=1250, Scale=2). Every value that fits is held so,
//     and the arithmetic on such values runs on int64 without allocating.
//   - big: Value.S holds the decimal text ("123456789012345678901234.5", "NaN",
//     "Infinity", "-Infinity"), Value.I and Value.Scale are zero. Arithmetic on it goes
//     through github.com/cockroachdb/apd (General Decimal Arithmetic).
//
// The rules of PostgreSQL's numeric.c: + and - keep the larger scale, * the sum of the
// scales, / the scale select_div_scale picks (at least 16 significant digits, at least
// the inputs' scales), results rounded half away from zero.

// maxSmallScale is the largest scale the small representation holds.
const maxSmallScale = 18

// PostgreSQL's limits on a numeric value.
const (
	numericMaxWeightDigits = 131072
	numericMaxScale        = 16383
	numericMaxDisplayScale = 1000
	numericMinSigDigits    = 16
)

// numCtx is the context of exact operations: its precision covers every value
// PostgreSQL's numeric can hold, so add, subtract, multiply, remainder and quantize never
// round except where asked to (Quantize, half away from zero).
var numCtx = &apd.Context{Precision: numericMaxWeightDigits + numericMaxScale + 16, MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent,
	Traps: apd.DefaultTraps &^ apd.Inexact &^ apd.Rounded, Rounding: apd.RoundHalfUp}

// isBigDecimal reports whether v is a DECIMAL in the big representation.
func isBigDecimal(v Value) bool { return v.K == KindDecimal && v.S != "" }

// decimalOf converts a DECIMAL (either form) or an integer value to an apd.Decimal.
func decimalOf(v Value, d *apd.Decimal) *apd.Decimal {
	if d == nil {
		d = new(apd.Decimal)
	}
	switch {
	case v.K == KindDecimal && v.S != "":
		if _, _, err := d.SetString(v.S); err != nil {
			d.Form = apd.NaN
		}
	case v.K == KindDecimal:
		d.SetFinite(v.I, -int32(v.Scale))
	case v.K == KindDouble:
		floatToDecimal(v.F(), d)
	default:
		d.SetFinite(v.I, 0)
	}
	return d
}

// floatToDecimal converts f as PostgreSQL's float8_numeric does: 15 significant digits.
func floatToDecimal(f float64, d *apd.Decimal) {
	switch {
	case math.IsNaN(f):
		d.Form = apd.NaN
		return
	case math.IsInf(f, 0):
		d.Form, d.Negative = apd.Infinite, f < 0
		return
	}
	s := strconv.FormatFloat(f, 'e', 14, 64)
	if _, _, err := d.SetString(s); err != nil {
		d.Form = apd.NaN
		return
	}
	// Drop trailing zeros PostgreSQL's %.15g would not print, but keep integers whole.
	d.Reduce(d)
	if d.Exponent > 0 {
		numCtx.Quantize(d, d, 0)
	}
}

// numericValue converts d to a Value in its canonical representation, or an error Value
// (22003) when it exceeds PostgreSQL's limits.
func numericValue(d *apd.Decimal) Value {
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		return Value{K: KindDecimal, S: "NaN"}
	case apd.Infinite:
		if d.Negative {
			return Value{K: KindDecimal, S: "-Infinity"}
		}
		return Value{K: KindDecimal, S: "Infinity"}
	}
	if d.Exponent > 0 {
		if _, err := numCtx.Quantize(d, d, 0); err != nil {
			return overflowNumeric()
		}
	}
	scale := -int64(d.Exponent)
	if scale > numericMaxScale {
		// Never reached by arithmetic (scales are bounded before), only by input text.
		return ErrorValue(CodeNumericOutOfRange, "value overflows numeric format")
	}
	if scale <= maxSmallScale && d.Coeff.IsInt64() {
		c := d.Coeff.Int64()
		if d.Negative {
			c = -c
		}
		if c == 0 {
			return Value{K: KindDecimal, Scale: uint8(scale)}
		}
		return Value{K: KindDecimal, I: c, Scale: uint8(scale)}
	}
	if d.NumDigits()-scale > numericMaxWeightDigits {
		return overflowNumeric()
	}
	if d.Coeff.Sign() == 0 {
		d.Negative = false
	}
	return Value{K: KindDecimal, S: d.Text('f')}
}

func overflowNumeric() Value {
	return ErrorValue(CodeNumericOutOfRange, "value overflows numeric format")
}

// NumericFromString parses PostgreSQL numeric input: [+-]digits[.digits][e[+-]digits],
// NaN, Infinity, -Infinity (case-insensitive), surrounded by optional spaces.
func NumericFromString(s string) (Value, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Null, false
	}
	// Fast path: plain [+-]digits[.digits] that fits.
	if u, sc, ok := parseSmallDecimal(s); ok {
		return Value{K: KindDecimal, I: u, Scale: sc}, true
	}
	switch strings.ToLower(s) {
	case "nan":
		return Value{K: KindDecimal, S: "NaN"}, true
	case "infinity", "+infinity", "inf", "+inf":
		return Value{K: KindDecimal, S: "Infinity"}, true
	case "-infinity", "-inf":
		return Value{K: KindDecimal, S: "-Infinity"}, true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return Null, false
		}
	}
	var d apd.Decimal
	if _, _, err := d.SetString(s); err != nil || d.Form != apd.Finite {
		return Null, false
	}
	if d.Exponent < -numericMaxScale || int64(d.Exponent) > numericMaxWeightDigits {
		return Null, false
	}
	v := numericValue(&d)
	if v.IsError() {
		return Null, false
	}
	return v, true
}

// parseSmallDecimal parses [+-]digits[.digits] with at most 18 digits in all.
func parseSmallDecimal(s string) (int64, uint8, bool) {
	i := 0
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		i++
	}
	var u int64
	digits, scale := 0, 0
	dot := false
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if digits == 18 {
				return 0, 0, false
			}
			u = u*10 + int64(c-'0')
			if u != 0 || dot {
				digits++
			}
			if dot {
				scale++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, 0, false
		}
	}
	if i == 0 || s[len(s)-1] == '.' && len(s) == 1 || digits == 0 && u == 0 && !strings.ContainsAny(s, "0123456789") {
		return 0, 0, false
	}
	if neg {
		u = -u
	}
	return u, uint8(scale), true
}

// NumericText renders a DECIMAL value as PostgreSQL does (all digits of its scale).
func NumericText(v Value) string {
	if v.S != "" {
		return v.S
	}
	return FormatDecimal(v.I, v.Scale)
}

// numericScale is the display scale of a DECIMAL value (0 for NaN and infinities).
func numericScale(v Value) int64 {
	if v.K != KindDecimal {
		return 0
	}
	if v.S == "" {
		return int64(v.Scale)
	}
	if _, frac, ok := strings.Cut(v.S, "."); ok {
		return int64(len(frac))
	}
	return 0
}

// NumericFloat returns v (a DECIMAL) as a float64.
func NumericFloat(v Value) float64 {
	if v.S == "" {
		return float64(v.I) / Pow10(v.Scale)
	}
	switch v.S {
	case "NaN":
		return math.NaN()
	case "Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	// v.S is a DECIMAL's text as apd writes it, which ParseFloat always reads; a value
	// beyond float64's range gives ±Inf with an error, and ±Inf is the answer wanted.
	f, _ := strconv.ParseFloat(v.S, 64)
	return f
}

// numericSpecial reports whether v is NaN or ±Infinity.
func numericSpecial(v Value) bool {
	return v.S == "NaN" || v.S == "Infinity" || v.S == "-Infinity"
}

// NumericAdd returns a + b for DECIMAL or integer operands (errors as Values). SUM over
// DECIMAL uses it.
func NumericAdd(a, b Value) Value { return numericArith('+', a, b) }

// NumericSub returns a - b.
func NumericSub(a, b Value) Value { return numericArith('-', a, b) }

// NumericMul returns a * b.
func NumericMul(a, b Value) Value { return numericArith('*', a, b) }

// NumericDiv returns a / b with PostgreSQL's result scale (22012 for division by zero).
func NumericDiv(a, b Value) Value { return numericArith('/', a, b) }

// NumericIntDiv returns PostgreSQL's div(a, b): the quotient of a / b truncated toward zero,
// computed exactly, as a NUMERIC of scale 0 (22012 for zero; NaN with NaN; Infinity over a
// finite number is Infinity with the quotient's sign, a finite number over Infinity 0).
func NumericIntDiv(a, b Value) Value {
	if a.K == KindNull || b.K == KindNull {
		return nullOf(a, b)
	}
	var x, y, z apd.Decimal
	decimalOf(a, &x)
	decimalOf(b, &y)
	switch {
	case x.Form == apd.NaN || y.Form == apd.NaN:
		return Value{K: KindDecimal, S: "NaN"}
	case y.Form == apd.Finite && y.IsZero():
		return ErrorValue(CodeDivisionByZero, "division by zero")
	case x.Form == apd.Infinite && y.Form == apd.Infinite:
		return Value{K: KindDecimal, S: "NaN"}
	case x.Form == apd.Infinite:
		if x.Negative != y.Negative {
			return Value{K: KindDecimal, S: "-Infinity"}
		}
		return Value{K: KindDecimal, S: "Infinity"}
	case y.Form == apd.Infinite:
		return Value{K: KindDecimal}
	}
	if _, err := numCtx.QuoInteger(&z, &x, &y); err != nil {
		return numericOpError(err)
	}
	z.Negative = z.Negative && !z.IsZero()
	return numericValue(&z)
}

// NumericMod returns a % b (the sign of a; 22012 for zero).
func NumericMod(a, b Value) Value { return numericArith('%', a, b) }

// smallScaled returns the coefficient of v (small DECIMAL or integer) at scale s.
func smallScaled(v Value, s uint8) (int64, bool) {
	return rescaleInt(v.I, decScale(v), s)
}

func numericArith(op byte, a, b Value) Value {
	if a.K == KindNull || b.K == KindNull {
		return nullOf(a, b)
	}
	if a.S == "" && b.S == "" && a.K != KindDouble && b.K != KindDouble {
		sa, sb := decScale(a), decScale(b)
		switch op {
		case '+', '-':
			s := max(sa, sb)
			x, ok1 := smallScaled(a, s)
			y, ok2 := smallScaled(b, s)
			if ok1 && ok2 {
				var r int64
				if op == '+' {
					r = x + y
					ok1 = (r > x) == (y > 0)
				} else {
					r = x - y
					ok1 = (r < x) == (y > 0)
				}
				if ok1 {
					return Value{K: KindDecimal, I: r, Scale: s}
				}
			}
		case '*':
			if s := int(sa) + int(sb); s <= maxSmallScale {
				if r, ok := mulInt(a.I, b.I); ok {
					return Value{K: KindDecimal, I: r, Scale: uint8(s)}
				}
			}
		}
	}
	if op == '/' && a.S == "" && b.S == "" && a.K != KindDouble && b.K != KindDouble {
		if v, ok := smallDiv(a.I, decScale(a), b.I, decScale(b)); ok {
			return v
		}
	}
	var x, y, z apd.Decimal
	decimalOf(a, &x)
	decimalOf(b, &y)
	switch op {
	case '+':
		if _, err := numCtx.Add(&z, &x, &y); err != nil {
			return numericOpError(err)
		}
	case '-':
		if _, err := numCtx.Sub(&z, &x, &y); err != nil {
			return numericOpError(err)
		}
	case '*':
		if _, err := numCtx.Mul(&z, &x, &y); err != nil {
			return numericOpError(err)
		}
		if s := -int64(z.Exponent); s > numericMaxDisplayScale && z.Form == apd.Finite {
			numCtx.Quantize(&z, &z, -numericMaxDisplayScale)
		}
	case '/':
		return numericDiv(&x, &y)
	case '%':
		if y.Form == apd.Finite && y.IsZero() {
			return ErrorValue(CodeDivisionByZero, "division by zero")
		}
		if x.Form != apd.Finite || y.Form != apd.Finite {
			if x.Form == apd.Finite && y.Form == apd.Infinite {
				return numericValue(&x)
			}
			return Value{K: KindDecimal, S: "NaN"}
		}
		if _, err := numCtx.Rem(&z, &x, &y); err != nil {
			return numericOpError(err)
		}
		if s := max(-x.Exponent, -y.Exponent, 0); -z.Exponent < s {
			numCtx.Quantize(&z, &z, -s)
		}
	}
	return numericValue(&z)
}

func numericOpError(err error) Value {
	return ErrorValue(CodeNumericOutOfRange, "value overflows numeric format")
}

// smallFirstDigitWeight is firstDigitWeight for the coefficient c at scale s.
func smallFirstDigitWeight(c int64, s uint8) (int64, int64) {
	u := c
	if u < 0 {
		u = -u
	}
	if u == 0 {
		return 0, 0
	}
	nd := int64(1)
	for p := int64(10); nd < 19 && u >= p; p *= 10 {
		nd++
	}
	e10 := nd - 1 - int64(s)
	w := e10 / 4
	if e10 < 0 && e10%4 != 0 {
		w--
	}
	k := e10 - 4*w + 1 // leading digits in the first base-10000 digit
	fd := u
	for i := nd; i > k; i-- {
		fd /= 10
	}
	for i := nd; i < k; i++ {
		fd *= 10
	}
	return w, fd
}

// smallDiv divides two 64-bit NUMERICs with PostgreSQL's scale on int64/128-bit
// arithmetic; ok is false when the operands or the result do not fit (then apd does it).
func smallDiv(a int64, sa uint8, b int64, sb uint8) (Value, bool) {
	if b == 0 {
		return ErrorValue(CodeDivisionByZero, "division by zero"), true
	}
	w1, f1 := smallFirstDigitWeight(a, sa)
	w2, f2 := smallFirstDigitWeight(b, sb)
	qw := w1 - w2
	if f1 <= f2 {
		qw--
	}
	rscale := max(numericMinSigDigits-qw*4, int64(sa), int64(sb), 0)
	// q = a·10^(rscale+sb-sa) / b, rounded half away from zero.
	k := rscale + int64(sb) - int64(sa)
	if rscale > maxSmallScale || k < 0 || k > 19 || a == math.MinInt64 || b == math.MinInt64 {
		return Null, false
	}
	neg := (a < 0) != (b < 0)
	ua, ub := uint64(a), uint64(b)
	if a < 0 {
		ua = uint64(-a)
	}
	if b < 0 {
		ub = uint64(-b)
	}
	p10 := uint64(1)
	for i := int64(0); i < k; i++ {
		p10 *= 10
	}
	hi, lo := bits.Mul64(ua, p10)
	if hi >= ub {
		return Null, false
	}
	q, rem := bits.Div64(hi, lo, ub)
	if rem >= ub-rem { // rem ≥ ub/2: round half away from zero
		q++
	}
	if q > math.MaxInt64 {
		return Null, false
	}
	r := int64(q)
	if neg {
		r = -r
	}
	return Value{K: KindDecimal, I: r, Scale: uint8(rscale)}, true
}

// firstDigitWeight returns PostgreSQL's base-10000 weight of the first digit of |d| and
// that digit (0, 0 for zero).
func firstDigitWeight(d *apd.Decimal) (int64, int64) {
	if d.Form != apd.Finite || d.IsZero() {
		return 0, 0
	}
	nd := d.NumDigits()
	e10 := nd - 1 + int64(d.Exponent) // exponent of the leading decimal digit
	w := e10 / 4
	if e10 < 0 && e10%4 != 0 {
		w--
	}
	// Leading digits belonging to the first base-10000 digit.
	k := e10 - 4*w + 1 // 1..4
	coeff := d.Coeff.Text(10)
	if int64(len(coeff)) > k {
		coeff = coeff[:k]
	}
	// coeff is at most four decimal digits of a non-negative coefficient: it cannot fail.
	fd, _ := strconv.ParseInt(coeff, 10, 64)
	for i := int64(len(coeff)); i < k; i++ {
		fd *= 10
	}
	return w, fd
}

// numericDiv divides with PostgreSQL's select_div_scale.
func numericDiv(x, y *apd.Decimal) Value {
	if y.Form == apd.Finite && y.IsZero() {
		return ErrorValue(CodeDivisionByZero, "division by zero")
	}
	if x.Form == apd.NaN || y.Form == apd.NaN {
		return Value{K: KindDecimal, S: "NaN"}
	}
	if x.Form == apd.Infinite {
		if y.Form == apd.Infinite {
			return Value{K: KindDecimal, S: "NaN"}
		}
		z := apd.Decimal{Form: apd.Infinite, Negative: x.Negative != y.Negative}
		return numericValue(&z)
	}
	if y.Form == apd.Infinite {
		return Value{K: KindDecimal}
	}
	w1, f1 := firstDigitWeight(x)
	w2, f2 := firstDigitWeight(y)
	qw := w1 - w2
	if f1 <= f2 {
		qw--
	}
	rscale := numericMinSigDigits - qw*4
	rscale = max(rscale, -int64(x.Exponent), -int64(y.Exponent), 0)
	rscale = min(rscale, numericMaxDisplayScale)
	// Enough digits for the integer part and rscale, plus guards; truncate, then round
	// half away from zero at rscale (truncation keeps the rounding decision exact).
	intDigits := (qw+1)*4 + 4
	prec := max(intDigits, 1) + rscale + 2
	ctx := &apd.Context{Precision: uint32(prec), MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent,
		Traps: apd.DefaultTraps &^ apd.Inexact &^ apd.Rounded, Rounding: apd.RoundDown}
	var z apd.Decimal
	if _, err := ctx.Quo(&z, x, y); err != nil {
		return numericOpError(err)
	}
	if _, err := numCtx.Quantize(&z, &z, -int32(rscale)); err != nil {
		return numericOpError(err)
	}
	return numericValue(&z)
}

// NumericRound rounds v to d digits after the point (d may be negative), half away from
// zero; trunc cuts instead. The result's scale is max(d, 0), as in PostgreSQL.
func NumericRound(v Value, d int64, trunc bool) Value {
	if v.K == KindNull {
		return v
	}
	if d > numericMaxDisplayScale {
		d = numericMaxDisplayScale
	}
	if d < -numericMaxWeightDigits {
		d = -numericMaxWeightDigits
	}
	if v.S == "" && d >= 0 {
		if d >= int64(v.Scale) {
			if d <= maxSmallScale {
				if x, ok := rescaleInt(v.I, v.Scale, uint8(d)); ok {
					return Value{K: KindDecimal, I: x, Scale: uint8(d)}
				}
			}
		} else if trunc {
			x := v.I
			for s := v.Scale; s > uint8(d); s-- {
				x /= 10
			}
			return Value{K: KindDecimal, I: x, Scale: uint8(d)}
		} else {
			return Value{K: KindDecimal, I: roundScaled(v.I, v.Scale, uint8(d)), Scale: uint8(d)}
		}
	}
	if numericSpecial(v) {
		return v
	}
	var x apd.Decimal
	decimalOf(v, &x)
	ctx := *numCtx
	if trunc {
		ctx.Rounding = apd.RoundDown
	}
	if _, err := ctx.Quantize(&x, &x, -int32(d)); err != nil {
		return numericOpError(err)
	}
	if d < 0 {
		ctx.Quantize(&x, &x, 0)
	}
	return numericValue(&x)
}

// NumericCompare orders two DECIMAL (or integer) values; NaN sorts after everything, as
// in PostgreSQL.
func NumericCompare(a, b Value) int {
	if a.S == "" && b.S == "" {
		sa, sb := decScale(a), decScale(b)
		s := max(sa, sb)
		x, ok1 := rescaleInt(a.I, sa, s)
		y, ok2 := rescaleInt(b.I, sb, s)
		if ok1 && ok2 {
			return cmpInt(x, y)
		}
	}
	an, bn := a.S == "NaN", b.S == "NaN"
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	var x, y apd.Decimal
	decimalOf(a, &x)
	decimalOf(b, &y)
	return x.Cmp(&y)
}

// castToDecimal converts v to DECIMAL(p,s) (p = 0: unconstrained), as PostgreSQL's
// numeric typmod coercion: round to s digits, then check the precision (22003).
func castToDecimal(v Value, t Type) (Value, *Error) {
	var out Value
	switch {
	case v.K == KindDecimal:
		out = v
	case v.K.IsInteger() || v.K == KindBool:
		out = Value{K: KindDecimal, I: v.I}
	case v.K == KindDouble:
		if v.F() == math.Trunc(v.F()) && math.Abs(v.F()) < 1e15 {
			out = Value{K: KindDecimal, I: int64(v.F())}
		} else {
			var d apd.Decimal
			floatToDecimal(v.F(), &d)
			out = numericValue(&d)
		}
	case v.K == KindVarchar || v.K == KindJSON:
		var ok bool
		if out, ok = NumericFromString(v.S); !ok {
			return Null, Errorf(CodeInvalidText, "invalid input syntax for type numeric: %s", quoteString(v.S))
		}
	default:
		return Null, Errorf(CodeTypeMismatch, "cannot cast %s to %s", v.K, t)
	}
	if t.Precision == 0 {
		return out, nil
	}
	if numericSpecial(out) {
		if out.S == "NaN" {
			return out, nil
		}
		return Null, Errorf(CodeNumericOutOfRange, "numeric field overflow: cannot hold an infinite value in %s", t)
	}
	// |out| < 10^(p-s); a value far too large is refused before rounding it.
	intDigits := int64(t.Precision) - int64(t.Scale)
	if out.S != "" {
		var d apd.Decimal
		decimalOf(out, &d)
		if !d.IsZero() && d.NumDigits()+int64(d.Exponent) > intDigits+1 {
			return Null, Errorf(CodeNumericOutOfRange, "numeric field overflow: a field with precision %d, scale %d must round to an absolute value less than 10^%d", t.Precision, t.Scale, intDigits)
		}
	}
	out = NumericRound(out, int64(t.Scale), false)
	if e, ok := out.errOf(); ok {
		return Null, e
	}
	if out.S == "" {
		lim, ok := rescaleInt(1, 0, uint8(min(int64(t.Precision), 19)))
		if int64(t.Precision) > 18 || !ok || (out.I < lim && out.I > -lim) {
			return out, nil
		}
	} else {
		var d apd.Decimal
		decimalOf(out, &d)
		if d.IsZero() || d.NumDigits()+int64(d.Exponent) <= intDigits {
			return out, nil
		}
	}
	return Null, Errorf(CodeNumericOutOfRange, "numeric field overflow: a field with precision %d, scale %d must round to an absolute value less than 10^%d", t.Precision, t.Scale, intDigits)
}

// numericToInt rounds v (DECIMAL) half away from zero to an int64.
func numericToInt(v Value) (int64, bool) {
	if v.S == "" {
		return roundScaled(v.I, v.Scale, 0), true
	}
	if numericSpecial(v) {
		return 0, false
	}
	r := NumericRound(v, 0, false)
	if r.S == "" && r.K == KindDecimal {
		return r.I, true
	}
	return 0, false
}

// numericCanonical returns the coefficient and scale of v with trailing fraction zeros
// removed, or the canonical text of a big value: equal numbers give equal results.
func numericCanonical(v Value) (int64, uint8, string) {
	if v.S == "" {
		i, s := v.I, v.Scale
		for s > 0 && i%10 == 0 {
			i /= 10
			s--
		}
		return i, s, ""
	}
	if numericSpecial(v) {
		return 0, 0, v.S
	}
	var d apd.Decimal
	decimalOf(v, &d)
	d.Reduce(&d)
	if d.Exponent > 0 {
		numCtx.Quantize(&d, &d, 0)
	}
	if w := numericValue(&d); w.S == "" && w.K == KindDecimal {
		return w.I, w.Scale, ""
	}
	return 0, 0, d.Text('f')
}
