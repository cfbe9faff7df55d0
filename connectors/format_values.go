package connectors

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"rsql/sql"
)

// NewFormat returns the record format called name ("json", "csv" or "debezium-json",
// case-insensitive; and "nexmark", the messages of the nexmark source, which decodes only)
// bound to schema. A last column named sql.ChangeColumn is the change column of an updating
// query's rows or a table's records (docs/sql.md, "Changelogs").
func NewFormat(name string, schema sql.Schema) (Format, error) {
	for _, c := range schema {
		switch c.Type.Kind {
		case sql.KindBool, sql.KindInt, sql.KindBigInt, sql.KindDouble, sql.KindDecimal,
			sql.KindVarchar, sql.KindTimestamp, sql.KindJSON:
		default:
			return nil, fmt.Errorf("format %s: column %s: type %s cannot be stored in a record", name, c.Name, c.Type)
		}
	}
	switch strings.ToLower(name) {
	case "json", "":
		return newJSONFormat(schema), nil
	case "csv":
		return newCSVFormat(schema), nil
	case "debezium-json":
		return newDebeziumFormat(schema), nil
	case "nexmark":
		return newNexmarkFormat(schema), nil
	}
	return nil, fmt.Errorf("unknown format %q: use json, csv or debezium-json", name)
}

// bytesString views b as a string without copying. The result must not outlive b's
// contents and must not be kept: use it only for parsing.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// reuseString returns prev when it already holds the bytes of b (saving an allocation
// for repeated values such as keys), else a new string.
func reuseString(prev sql.Value, kind sql.Kind, b []byte) string {
	if prev.K == kind && prev.S == bytesString(b) {
		return prev.S
	}
	return string(b)
}

// Bounds of a TIMESTAMP that formats as RFC 3339 (years 0001 to 9999), epoch milliseconds.
const (
	minTimestampMs = -62135596800000
	maxTimestampMs = 253402300799999
)

// parseIntText parses a decimal integer (optional sign, digits only) into an int64,
// checking the range of kind (INT is 32-bit).
func parseIntText(b []byte, kind sql.Kind) (int64, string) {
	if len(b) == 0 {
		return 0, "empty value for " + kind.String()
	}
	i := 0
	neg := false
	if b[0] == '-' || b[0] == '+' {
		neg = b[0] == '-'
		i++
	}
	if i == len(b) {
		return 0, "invalid integer " + quoteShort(b)
	}
	var u uint64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, "invalid integer " + quoteShort(b)
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, "integer " + quoteShort(b) + " out of range for " + kind.String()
		}
		u = u*10 + uint64(c-'0')
	}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if kind == sql.KindInt {
		lo, hi = math.MinInt32, math.MaxInt32
	}
	var v int64
	if neg {
		if u > uint64(-(lo+1))+1 {
			return 0, "integer " + quoteShort(b) + " out of range for " + kind.String()
		}
		if u > 0 {
			v = -int64(u-1) - 1
		}
	} else {
		if u > uint64(hi) {
			return 0, "integer " + quoteShort(b) + " out of range for " + kind.String()
		}
		v = int64(u)
	}
	return v, ""
}

// decodeDecimal reads a NUMERIC field: NUMERIC(p,s) with p ≤ 18 on the int64 fast path,
// anything else (unconstrained NUMERIC, larger precisions, NaN) as PostgreSQL's numeric
// input (sql.CastValue).
func decodeDecimal(b []byte, t sql.Type) (sql.Value, string) {
	if t.Precision > 0 && t.Precision <= 18 {
		v, reason := parseDecimalText(b, t)
		return sql.Decimal(v, t.Scale), reason
	}
	v, err := sql.CastValue(sql.Varchar(string(b)), t)
	if err != nil {
		return sql.Null, err.(*sql.Error).Message
	}
	return v, ""
}

// parseDecimalText parses a decimal number (sign, digits, optional fraction, optional
// exponent) into an int64 scaled by 10^t.Scale, rounding extra fraction digits half away
// from zero, and checks t's precision (when set) and the int64 range.
func parseDecimalText(b []byte, t sql.Type) (int64, string) {
	bad := func() (int64, string) { return 0, "invalid DECIMAL " + quoteShort(b) }
	if len(b) == 0 {
		return 0, "empty value for DECIMAL"
	}
	i := 0
	neg := false
	if b[i] == '-' || b[i] == '+' {
		neg = b[i] == '-'
		i++
	}
	// Collect significant digits and the position of the decimal point.
	var digits [40]byte
	nd := 0     // digits kept (leading zeros dropped)
	dp := 0     // decimal exponent adjustment: value = 0.digits * 10^? — tracked as point position
	seen := 0   // digits seen at all
	trunc := -1 // first dropped digit when more than 40 significant digits, for rounding
	sawDot := false
	for ; i < len(b); i++ {
		c := b[i]
		if c == '.' {
			if sawDot {
				return bad()
			}
			sawDot = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		seen++
		if nd == 0 && c == '0' {
			if sawDot {
				dp--
			}
			continue
		}
		if nd < len(digits) {
			digits[nd] = c - '0'
			nd++
		} else if trunc < 0 {
			trunc = int(c - '0')
		}
		if !sawDot {
			dp++
		}
	}
	if seen == 0 {
		return bad()
	}
	// When there were more digits than kept, the integer digits beyond len(digits) still
	// counted in dp above (only when before the point), which is what we want.
	exp := 0
	if i < len(b) {
		if b[i] != 'e' && b[i] != 'E' {
			return bad()
		}
		i++
		eneg := false
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			eneg = b[i] == '-'
			i++
		}
		if i == len(b) {
			return bad()
		}
		for ; i < len(b); i++ {
			c := b[i]
			if c < '0' || c > '9' {
				return bad()
			}
			if exp < 10000 {
				exp = exp*10 + int(c-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	// value = 0.d1d2...dn * 10^(dp+exp); we want round(value * 10^scale).
	point := dp + exp + int(t.Scale) // number of digits before the point after scaling
	if nd == 0 {
		return 0, ""
	}
	outOfRange := func() (int64, string) {
		return 0, "value " + quoteShort(b) + " out of range for " + t.String()
	}
	if point > 19 {
		return outOfRange()
	}
	var u uint64
	for k := 0; k < point; k++ {
		d := uint64(0)
		if k < nd {
			d = uint64(digits[k])
		}
		if u > (math.MaxUint64-9)/10 {
			return outOfRange()
		}
		u = u*10 + d
	}
	// Rounding on the first dropped digit.
	roundDigit := 0
	switch {
	case point < 0:
		roundDigit = 0
	case point < nd:
		roundDigit = int(digits[point])
	case point == nd && trunc >= 0:
		roundDigit = trunc
	}
	if roundDigit >= 5 {
		u++
	}
	if u > math.MaxInt64 {
		return outOfRange()
	}
	if t.Precision > 0 && t.Precision < 19 && u >= uint64(math.Pow10(int(t.Precision))) {
		return outOfRange()
	}
	v := int64(u)
	if neg {
		v = -v
	}
	return v, ""
}

// parseBoolText accepts true/false, t/f, yes/no, 1/0 in any case.
func parseBoolText(b []byte) (bool, bool) {
	switch strings.ToLower(bytesString(b)) {
	case "true", "t", "yes", "y", "1":
		return true, true
	case "false", "f", "no", "n", "0":
		return false, true
	}
	return false, false
}

// parseTimestampText parses an RFC 3339 timestamp (or the other forms of
// sql.ParseTimestamp) into epoch milliseconds. The common form
// YYYY-MM-DD[T ]HH:MM:SS[.fff][Z|±HH:MM] is parsed without allocating.
func parseTimestampText(b []byte) (int64, bool) {
	if ms, ok, decided := fastTimestamp(b); decided {
		return ms, ok && ms >= minTimestampMs && ms <= maxTimestampMs
	}
	ms, ok := sql.ParseTimestamp(bytesString(b))
	return ms, ok && ms >= minTimestampMs && ms <= maxTimestampMs
}

func digits2(b []byte, i int) (int, bool) {
	if b[i] < '0' || b[i] > '9' || b[i+1] < '0' || b[i+1] > '9' {
		return 0, false
	}
	return int(b[i]-'0')*10 + int(b[i+1]-'0'), true
}

// fastTimestamp handles the common layouts; decided is false when b has another shape
// and the slow general parser should try.
func fastTimestamp(b []byte) (ms int64, ok, decided bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != 't' && b[10] != ' ') || b[13] != ':' || b[16] != ':' {
		return 0, false, false
	}
	y1, ok1 := digits2(b, 0)
	y2, ok2 := digits2(b, 2)
	mo, ok3 := digits2(b, 5)
	d, ok4 := digits2(b, 8)
	h, ok5 := digits2(b, 11)
	mi, ok6 := digits2(b, 14)
	s, ok7 := digits2(b, 17)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) {
		return 0, false, false
	}
	y := y1*100 + y2
	if mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || s > 59 {
		return 0, false, true
	}
	i := 19
	frac := 0
	if i < len(b) && b[i] == '.' {
		i++
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if n < 3 {
				frac = frac*10 + int(b[i]-'0')
			}
			n++
			i++
		}
		if n == 0 {
			return 0, false, false
		}
		for ; n < 3; n++ {
			frac *= 10
		}
	}
	offset := 0
	switch {
	case i == len(b):
	case b[i] == 'Z' || b[i] == 'z':
		i++
	case (b[i] == '+' || b[i] == '-') && len(b)-i == 6 && b[i+3] == ':':
		oh, okh := digits2(b, i+1)
		om, okm := digits2(b, i+4)
		if !okh || !okm || oh > 23 || om > 59 {
			return 0, false, true
		}
		offset = (oh*60 + om) * 60
		if b[i] == '-' {
			offset = -offset
		}
		i += 6
	default:
		return 0, false, false
	}
	if i != len(b) {
		return 0, false, false
	}
	secs := daysFromCivil(y, mo, d)*86400 + int64(h*3600+mi*60+s) - int64(offset)
	return secs*1000 + int64(frac), true, true
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian date.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, m, d int) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	yy := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		yy++
	}
	return int(yy), m, d
}

// appendTimestamp appends ms as RFC 3339 UTC with milliseconds, the same text as
// sql.FormatTimestamp, without allocating. ms must be within the RFC 3339 year range.
func appendTimestamp(dst []byte, ms int64) []byte {
	secs := ms / 1000
	milli := ms % 1000
	if milli < 0 {
		milli += 1000
		secs--
	}
	days := secs / 86400
	rem := secs % 86400
	if rem < 0 {
		rem += 86400
		days--
	}
	y, m, d := civilFromDays(days)
	dst = appendDigits(dst, y, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, m, 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, d, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, int(rem/3600), 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, int(rem%3600/60), 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, int(rem%60), 2)
	dst = append(dst, '.')
	dst = appendDigits(dst, int(milli), 3)
	return append(dst, 'Z')
}

func appendDigits(dst []byte, v, width int) []byte {
	var buf [8]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[:width]...)
}

// appendFloat appends f as the shortest text that parses back to f, in plain decimal
// notation for ordinary magnitudes and exponent notation for very large or small ones
// (as JavaScript prints numbers). NaN and infinities are the caller's concern.
func appendFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	fmtc := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmtc = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, fmtc, -1, 64)
	if fmtc == 'e' {
		// 1e-09 → 1e-9, as JavaScript prints it.
		n := len(dst) - start
		if n >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-3] == '-' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst
}

// checkTimestamp reports an encode error for a TIMESTAMP that has no RFC 3339 text.
func checkTimestamp(col string, ms int64) error {
	if ms < minTimestampMs || ms > maxTimestampMs {
		return sql.Errorf(sql.CodeDatetimeOverflow, "column %s: timestamp %d ms is outside years 1-9999", col, ms)
	}
	return nil
}

func quoteShort(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "..."
	}
	return strconv.Quote(string(b))
}
