package sql

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// intLike reports whether v's payload is the integer I with no scale: INT, BIGINT,
// BOOLEAN, TIMESTAMP and INTERVAL compare with each other by I.
func intLike(k Kind) bool {
	return k == KindInt || k == KindBigInt || k == KindBool || k == KindTimestamp || k == KindInterval
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

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	}
	// NaN sorts after every number and equals itself (PostgreSQL's order).
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	}
	return -1
}

// kindClass groups kinds that compare with each other.
func kindClass(k Kind) int {
	switch {
	case k == KindNull:
		return 0
	case intLike(k) || k == KindDecimal || k == KindDouble:
		return 1
	case k == KindVarchar || k == KindJSON:
		return 2
	}
	return 3
}

// Compare orders two values: NULL first (NULL equals NULL), numeric kinds compared by value
// across kinds (INT, BIGINT, DECIMAL, DOUBLE; TIMESTAMP, INTERVAL and BOOLEAN by their
// integer payload), VARCHAR and JSON bytewise. Values of incomparable kinds are ordered by
// kind class so that Compare is a total order.
func Compare(a, b Value) int {
	if a.K == KindNull || b.K == KindNull {
		switch {
		case a.K == b.K:
			return 0
		case a.K == KindNull:
			return -1
		}
		return 1
	}
	ca, cb := kindClass(a.K), kindClass(b.K)
	if ca != cb {
		return cmpInt(int64(ca), int64(cb))
	}
	switch ca {
	case 1:
		switch {
		case intLike(a.K) && intLike(b.K):
			return cmpInt(a.I, b.I)
		case a.K == KindDouble || b.K == KindDouble:
			return cmpFloat(a.AsFloat(), b.AsFloat())
		}
		// DECIMAL with DECIMAL or an integer.
		return NumericCompare(a, b)
	case 2:
		return strings.Compare(a.S, b.S)
	}
	return cmpInt(a.I, b.I)
}

// Equal reports whether Compare(a, b) == 0: NULL equals NULL, as grouping needs.
func Equal(a, b Value) bool {
	if a.K == b.K {
		switch a.K {
		case KindNull:
			return true
		case KindVarchar, KindJSON:
			return a.S == b.S
		case KindDouble:
			return a.F() == b.F() || (math.IsNaN(a.F()) && math.IsNaN(b.F()))
		case KindDecimal:
			if a.Scale == b.Scale && a.S == "" && b.S == "" {
				return a.I == b.I
			}
		default:
			return a.I == b.I
		}
	}
	return Compare(a, b) == 0
}

// EqualRows reports whether two rows are element-wise Equal.
func EqualRows(a, b Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func decScale(v Value) uint8 {
	if v.K == KindDecimal {
		return v.Scale
	}
	return 0
}

// rescaleInt converts an integer scaled by 10^from to one scaled by 10^to (to >= from),
// reporting overflow.
func rescaleInt(x int64, from, to uint8) (int64, bool) {
	if from >= to {
		return x, true
	}
	d := to - from
	if d > 18 {
		return 0, x == 0
	}
	p := pow10i[d]
	if x > math.MaxInt64/p || x < math.MinInt64/p {
		return 0, false
	}
	return x * p, true
}

// pow10i holds 10^0 .. 10^18.
var pow10i = func() (t [19]int64) {
	t[0] = 1
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 10
	}
	return
}()

const (
	hashOffset = 14695981039346656037
	hashPrime  = 1099511628211
)

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// HashValue folds v into the running hash h (start with HashSeed). The hash is deterministic
// across processes and consistent with Equal: values that are Equal hash alike (an integral
// DOUBLE or DECIMAL hashes like the integer).
func HashValue(h uint64, v Value) uint64 {
	switch kindClass(v.K) {
	case 0:
		return mix64(h ^ 0x9e3779b97f4a7c15)
	case 1:
		var x uint64
		switch v.K {
		case KindDouble:
			if f := v.F(); f == math.Trunc(f) && f >= -9.2e18 && f <= 9.2e18 {
				x = uint64(int64(f))
			} else {
				x = math.Float64bits(f)
			}
		case KindDecimal:
			p := int64(Pow10(v.Scale))
			if v.S == "" && v.Scale <= 18 && v.I%p == 0 {
				x = uint64(v.I / p)
			} else if f := v.AsFloat(); v.S != "" && f == math.Trunc(f) && f >= -9.2e18 && f <= 9.2e18 {
				x = uint64(int64(f))
			} else {
				x = math.Float64bits(f)
			}
		default:
			x = uint64(v.I)
		}
		return mix64(h ^ x + 0x632be59bd9b4e019)
	case 2:
		for i := 0; i < len(v.S); i++ {
			h ^= uint64(v.S[i])
			h *= hashPrime
		}
		return mix64(h ^ uint64(len(v.S)))
	}
	return mix64(h ^ uint64(v.I) ^ 0x5bd1e995)
}

// HashSeed is the initial value for HashValue.
const HashSeed uint64 = hashOffset

// HashRow hashes the values of r in order.
func HashRow(r Row) uint64 {
	h := HashSeed
	for _, v := range r {
		h = HashValue(h, v)
	}
	return h
}

// AppendKey appends a deterministic byte encoding of v to dst, for use in state-store keys.
// Two values of the same column type encode alike exactly when they are Equal.
// The encoding is: one tag byte, then for integers, timestamps, intervals and booleans
// 8 bytes big-endian with the sign bit flipped (so byte order is numeric order), for
// DOUBLE its order-preserving 8 bytes, for DECIMAL the scale byte then 8 bytes, for
// VARCHAR/JSON the bytes with 0x00 escaped as 0x00 0xFF and terminated by 0x00 0x01.
// DECIMAL is encoded in its canonical form (trailing fraction zeros removed, so 1.5 and
// 1.50 encode alike): the scale byte then 8 bytes, or for a number beyond 64 bits 0xFF
// and its canonical text terminated by 0x00 0x01.
func AppendKey(dst []byte, v Value) []byte {
	dst = append(dst, byte(v.K))
	switch v.K {
	case KindNull:
		return dst
	case KindDouble:
		b := math.Float64bits(v.F())
		if v.F() == 0 {
			b = 0 // -0 == +0
		}
		if b&(1<<63) != 0 {
			b = ^b
		} else {
			b |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(dst, b)
	case KindDecimal:
		i, sc, text := numericCanonical(v)
		if text != "" {
			dst = append(dst, 0xFF)
			dst = append(dst, text...)
			return append(dst, 0, 1)
		}
		dst = append(dst, sc)
		return binary.BigEndian.AppendUint64(dst, uint64(i)^(1<<63))
	case KindVarchar, KindJSON:
		for i := 0; i < len(v.S); i++ {
			c := v.S[i]
			dst = append(dst, c)
			if c == 0 {
				dst = append(dst, 0xFF)
			}
		}
		return append(dst, 0, 1)
	}
	return binary.BigEndian.AppendUint64(dst, uint64(v.I)^(1<<63))
}

// CastValue converts v to type t as PostgreSQL's casts do. It fails with 22P02 for text
// that is not a value of the type (CAST('3.5' AS BIGINT), CAST('abc' AS INT), text that
// is not JSON) and 22003 for a number out of the type's range. NULL casts to NULL.
func CastValue(v Value, t Type) (Value, error) {
	if v.K == KindNull {
		return v, nil
	}
	badText := func(typ string) (Value, error) {
		return Null, Errorf(CodeInvalidText, "invalid input syntax for type %s: %s", typ, quoteString(v.S))
	}
	switch t.Kind {
	case KindNull:
		return Null, nil
	case KindBool:
		switch {
		case v.K == KindBool:
			return v, nil
		case intLike(v.K):
			return Bool(v.I != 0), nil
		case v.K == KindDecimal:
			return Bool(NumericCompare(v, Value{K: KindDecimal}) != 0), nil
		case v.K == KindDouble:
			return Bool(v.F() != 0), nil
		case v.K == KindVarchar || v.K == KindJSON:
			if b, ok := parseBool(v.S); ok {
				return Bool(b), nil
			}
			return badText("boolean")
		}
	case KindInt, KindBigInt:
		var i int64
		switch {
		case intLike(v.K):
			i = v.I
		case v.K == KindDouble:
			f := math.RoundToEven(v.F())
			if math.IsNaN(f) || f < -9.223372036854775e18 || f >= 9.223372036854775e18 {
				return Null, Errorf(CodeNumericOutOfRange, "%s", outOfRange(t.Kind))
			}
			i = int64(f)
		case v.K == KindDecimal:
			n, ok := numericToInt(v)
			if !ok {
				return Null, Errorf(CodeNumericOutOfRange, "%s", outOfRange(t.Kind))
			}
			i = n
		case v.K == KindVarchar || v.K == KindJSON:
			s := strings.TrimSpace(v.S)
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
					return Null, Errorf(CodeNumericOutOfRange, "value %s is out of range for type %s", quoteString(v.S), pgTypeName(t))
				}
				return badText(pgTypeName(t))
			}
			i = n
		default:
			return Null, Errorf(CodeCannotCoerce, "cannot cast %s to %s", v.K, t)
		}
		if t.Kind == KindInt {
			if i < math.MinInt32 || i > math.MaxInt32 {
				return Null, Errorf(CodeNumericOutOfRange, "integer out of range")
			}
			return Int(i), nil
		}
		return BigInt(i), nil
	case KindDouble:
		switch {
		case v.K == KindVarchar || v.K == KindJSON:
			f, ok, rangeErr := parseFloat8(v.S)
			if rangeErr {
				return Null, Errorf(CodeNumericOutOfRange, "%s is out of range for type double precision", quoteString(v.S))
			}
			if !ok {
				return badText("double precision")
			}
			return Double(f), nil
		case v.K == KindDecimal:
			f := NumericFloat(v)
			if math.IsInf(f, 0) && !numericSpecial(v) {
				return Null, Errorf(CodeNumericOutOfRange, "value out of range: overflow")
			}
			return Double(f), nil
		case kindClass(v.K) == 1:
			return Double(v.AsFloat()), nil
		}
	case KindDecimal:
		out, err := castToDecimal(v, t)
		if err != nil {
			return Null, err
		}
		return out, nil
	case KindVarchar:
		switch v.K {
		case KindVarchar:
			return v, nil
		case KindBool:
			return Varchar(castText(v)), nil
		}
		return Varchar(Text(v)), nil
	case KindTimestamp:
		switch {
		case intLike(v.K):
			return Timestamp(v.I), nil
		case v.K == KindDouble || v.K == KindDecimal:
			f := v.AsFloat()
			if math.IsNaN(f) || math.Abs(f) > 9e18 {
				return Null, Errorf(CodeDatetimeOverflow, "timestamp out of range")
			}
			return Timestamp(int64(math.Round(f))), nil
		case v.K == KindVarchar || v.K == KindJSON:
			s := strings.Trim(strings.TrimSpace(v.S), `"`)
			if ms, ok := ParseTimestamp(s); ok {
				if tv := checkTimestamp(ms); tv.IsError() {
					return Null, tv.AsError()
				}
				return Timestamp(ms), nil
			}
			return Null, Errorf(CodeInvalidDatetime, "invalid input syntax for type timestamp: %s", quoteString(v.S))
		}
	case KindJSON:
		switch v.K {
		case KindJSON:
			return v, nil
		case KindVarchar:
			if !json.Valid([]byte(v.S)) {
				return Null, Errorf(CodeInvalidText, "invalid input syntax for type json: %s", quoteString(v.S))
			}
			return JSONValue(v.S), nil
		case KindTimestamp:
			return JSONValue(strconv.Quote(FormatTimestamp(v.I))), nil
		case KindBool:
			return JSONValue(castText(v)), nil
		case KindDouble:
			if math.IsNaN(v.F()) || math.IsInf(v.F(), 0) {
				return Null, Errorf(CodeInvalidValue, "cannot cast %s to JSON: JSON has no such number", Text(v))
			}
		case KindDecimal:
			if numericSpecial(v) {
				return Null, Errorf(CodeInvalidValue, "cannot cast %s to JSON: JSON has no such number", Text(v))
			}
		}
		return JSONValue(Text(v)), nil
	case KindInterval:
		if intLike(v.K) {
			return Interval(v.I), nil
		}
	}
	return Null, Errorf(CodeCannotCoerce, "cannot cast %s to %s", v.K, t)
}

// pgTypeName is the PostgreSQL name of t, for messages.
func pgTypeName(t Type) string {
	switch t.Kind {
	case KindInt:
		return "integer"
	case KindBigInt:
		return "bigint"
	case KindDouble:
		return "double precision"
	case KindDecimal:
		return "numeric"
	case KindBool:
		return "boolean"
	case KindVarchar:
		return "text"
	}
	return strings.ToLower(t.String())
}

// parseBool accepts PostgreSQL's boolean input: true/false, yes/no, on/off, 1/0 and
// unique prefixes of them (t, f, y, n, tr, ...), case-insensitive, trimmed.
func parseBool(s string) (bool, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "1":
		return true, true
	case "0":
		return false, true
	case "o", "":
		return false, false
	}
	for _, w := range []string{"true", "yes", "on"} {
		if strings.HasPrefix(w, s) && (w != "on" || len(s) == 2) {
			return true, true
		}
	}
	for _, w := range []string{"false", "no", "off"} {
		if strings.HasPrefix(w, s) && (w != "off" || len(s) >= 2) {
			return false, true
		}
	}
	return false, false
}

// parseFloat8 is PostgreSQL's float8in: decimal numbers with optional exponent, NaN,
// [+-]Infinity / [+-]inf (case-insensitive), surrounded by spaces. rangeErr reports a
// number too large or too small (but not zero) for a double.
func parseFloat8(s string) (f float64, ok, rangeErr bool) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "nan":
		return math.NaN(), true, false
	case "infinity", "+infinity", "inf", "+inf":
		return math.Inf(1), true, false
	case "-infinity", "-inf":
		return math.Inf(-1), true, false
	}
	if s == "" {
		return 0, false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, false, false
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, false, true
		}
		return 0, false, false
	}
	if f == 0 {
		// An underflow to zero of a nonzero mantissa is out of range in PostgreSQL.
		for i := 0; i < len(s) && s[i] != 'e' && s[i] != 'E'; i++ {
			if s[i] >= '1' && s[i] <= '9' {
				return 0, false, true
			}
		}
	}
	return f, true, false
}

// roundScaled rounds x (scaled by 10^from) to scale to (< from), half away from zero.
func roundScaled(x int64, from, to uint8) int64 {
	for ; from > to; from-- {
		q, r := x/10, x%10
		if from == to+1 {
			if r >= 5 {
				q++
			} else if r <= -5 {
				q--
			}
		}
		x = q
	}
	return x
}

// parseDecimal parses [+-]digits[.digits] (or a float in exponent form) into an integer
// scaled by 10^scale, rounding extra fraction digits half away from zero.
func parseDecimal(s string, scale uint8) (int64, bool) {
	if s == "" {
		return 0, false
	}
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		s = s[1:]
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if strings.ContainsAny(s, "eE") || (intPart == "" && frac == "") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, false
		}
		f = math.Round(f * Pow10(scale))
		if math.Abs(f) > 9.2e18 {
			return 0, false
		}
		if neg {
			f = -f
		}
		return int64(f), true
	}
	_ = hasDot
	var u int64
	digits := 0
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return 0, false
			}
		}
	}
	for i := 0; i < len(intPart); i++ {
		if u > (math.MaxInt64-9)/10 {
			return 0, false
		}
		u = u*10 + int64(intPart[i]-'0')
	}
	round := false
	for i := 0; i < len(frac); i++ {
		if digits == int(scale) {
			round = frac[i] >= '5'
			break
		}
		if u > (math.MaxInt64-9)/10 {
			return 0, false
		}
		u = u*10 + int64(frac[i]-'0')
		digits++
	}
	for ; digits < int(scale); digits++ {
		if u > math.MaxInt64/10 {
			return 0, false
		}
		u *= 10
	}
	if round {
		u++
	}
	if neg {
		u = -u
	}
	return u, true
}
