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
	// NaN sorts before every number and equals itself.
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return -1
	}
	return 1
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
		sa, sb := decScale(a), decScale(b)
		s := sa
		if sb > s {
			s = sb
		}
		x, ok1 := rescaleInt(a.I, sa, s)
		y, ok2 := rescaleInt(b.I, sb, s)
		if !ok1 || !ok2 {
			return cmpFloat(a.AsFloat(), b.AsFloat())
		}
		return cmpInt(x, y)
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
			return a.F == b.F || (math.IsNaN(a.F) && math.IsNaN(b.F))
		case KindDecimal:
			if a.Scale == b.Scale {
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
	for ; from < to; from++ {
		if x > math.MaxInt64/10 || x < math.MinInt64/10 {
			return 0, false
		}
		x *= 10
	}
	return x, true
}

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
			if f := v.F; f == math.Trunc(f) && f >= -9.2e18 && f <= 9.2e18 {
				x = uint64(int64(f))
			} else {
				x = math.Float64bits(f)
			}
		case KindDecimal:
			p := int64(Pow10(v.Scale))
			if v.Scale <= 18 && v.I%p == 0 {
				x = uint64(v.I / p)
			} else {
				x = math.Float64bits(v.AsFloat())
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
func AppendKey(dst []byte, v Value) []byte {
	dst = append(dst, byte(v.K))
	switch v.K {
	case KindNull:
		return dst
	case KindDouble:
		b := math.Float64bits(v.F)
		if v.F == 0 {
			b = 0 // -0 == +0
		}
		if b&(1<<63) != 0 {
			b = ^b
		} else {
			b |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(dst, b)
	case KindDecimal:
		dst = append(dst, v.Scale)
		return binary.BigEndian.AppendUint64(dst, uint64(v.I)^(1<<63))
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

// CastValue converts v to type t. NULL casts to NULL. It fails, with PostgreSQL's codes, when
// the value cannot be represented: 22P02 for text that is not a number, boolean, timestamp
// or valid JSON; 22003 for a number out of the type's range; 42846 for a kind that does not
// convert to t at all.
func CastValue(v Value, t Type) (Value, error) {
	if v.K == KindNull {
		return Null, nil
	}
	text := v.K == KindVarchar || v.K == KindJSON
	fail := func(code string) (Value, error) {
		return Null, Errorf(code, "cannot cast %s %s to %s", v.K, quoteString(v.String()), t)
	}
	// bad is a failure of a kind that converts: text that does not parse, or a value out of
	// range.
	bad := func() (Value, error) {
		if text {
			return fail(CodeInvalidText)
		}
		return fail(CodeOutOfRange)
	}
	switch t.Kind {
	case KindNull:
		return Null, nil
	case KindBool:
		switch {
		case v.K == KindBool:
			return v, nil
		case intLike(v.K) || v.K == KindDecimal:
			return Bool(v.I != 0), nil
		case v.K == KindDouble:
			return Bool(v.F != 0), nil
		case v.K == KindVarchar || v.K == KindJSON:
			switch strings.ToLower(strings.TrimSpace(v.S)) {
			case "true", "t", "1", "yes", "y", "on":
				return Bool(true), nil
			case "false", "f", "0", "no", "n", "off":
				return Bool(false), nil
			}
			return bad()
		}
		return fail(CodeCannotCoerce)
	case KindInt, KindBigInt:
		var i int64
		switch {
		case intLike(v.K):
			i = v.I
		case v.K == KindDouble:
			f := math.Round(v.F)
			if math.IsNaN(f) || f < -9.223372036854775e18 || f > 9.223372036854775e18 {
				return bad()
			}
			i = int64(f)
		case v.K == KindDecimal:
			i = roundScaled(v.I, v.Scale, 0)
		case v.K == KindVarchar || v.K == KindJSON:
			s := strings.TrimSpace(v.S)
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				f, ferr := strconv.ParseFloat(s, 64)
				if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 9.2e18 {
					return bad()
				}
				n = int64(math.Round(f))
			}
			i = n
		default:
			return fail(CodeCannotCoerce)
		}
		if t.Kind == KindInt {
			if i < math.MinInt32 || i > math.MaxInt32 {
				return bad()
			}
			return Int(i), nil
		}
		return BigInt(i), nil
	case KindDouble:
		switch {
		case v.K == KindVarchar || v.K == KindJSON:
			f, err := strconv.ParseFloat(strings.TrimSpace(v.S), 64)
			if err != nil {
				return bad()
			}
			return Double(f), nil
		case kindClass(v.K) == 1:
			return Double(v.AsFloat()), nil
		}
		return fail(CodeCannotCoerce)
	case KindDecimal:
		var u int64
		var ok bool
		switch {
		case intLike(v.K):
			u, ok = rescaleInt(v.I, 0, t.Scale)
		case v.K == KindDecimal:
			if v.Scale <= t.Scale {
				u, ok = rescaleInt(v.I, v.Scale, t.Scale)
			} else {
				u, ok = roundScaled(v.I, v.Scale, t.Scale), true
			}
		case v.K == KindDouble:
			f := math.Round(v.F * Pow10(t.Scale))
			ok = !math.IsNaN(f) && math.Abs(f) < 9.2e18
			u = int64(f)
		case v.K == KindVarchar || v.K == KindJSON:
			u, ok = parseDecimal(strings.TrimSpace(v.S), t.Scale)
		default:
			return fail(CodeCannotCoerce)
		}
		if !ok {
			return bad()
		}
		if t.Precision > 0 && t.Precision < 19 {
			lim := int64(Pow10(t.Precision))
			if u >= lim || u <= -lim {
				return bad()
			}
		}
		return Decimal(u, t.Scale), nil
	case KindVarchar:
		if v.K == KindVarchar {
			return v, nil
		}
		return Varchar(v.String()), nil
	case KindTimestamp:
		switch {
		case intLike(v.K):
			return Timestamp(v.I), nil
		case v.K == KindDouble || v.K == KindDecimal:
			return Timestamp(int64(math.Round(v.AsFloat()))), nil
		case v.K == KindVarchar || v.K == KindJSON:
			s := strings.Trim(strings.TrimSpace(v.S), `"`)
			if ms, ok := ParseTimestamp(s); ok {
				return Timestamp(ms), nil
			}
			return bad()
		}
		return fail(CodeCannotCoerce)
	case KindJSON:
		switch v.K {
		case KindJSON:
			return v, nil
		case KindVarchar:
			if !json.Valid([]byte(v.S)) {
				return bad()
			}
			return JSONValue(v.S), nil
		case KindTimestamp:
			return JSONValue(strconv.Quote(FormatTimestamp(v.I))), nil
		case KindDouble:
			if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
				return bad()
			}
		}
		return JSONValue(v.String()), nil
	case KindInterval:
		if intLike(v.K) {
			return Interval(v.I), nil
		}
		return fail(CodeCannotCoerce)
	}
	return fail(CodeCannotCoerce)
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
