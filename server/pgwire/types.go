package pgwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"rsql/sql"
)

// Postgres type OIDs the front end speaks.
const (
	oidUnknown     = 0
	oidBool        = 16
	oidBytea       = 17
	oidChar        = 18
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidBPChar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestampTZ = 1184
	oidInterval    = 1186
	oidNumeric     = 1700
	oidJSONB       = 3802
)

// Wire format codes.
const (
	formatText   = 0
	formatBinary = 1
)

// pgEpochMs is 2000-01-01T00:00:00Z, the epoch of binary timestamps, in Unix milliseconds.
const pgEpochMs = 946684800000

// typeOID returns the Postgres type OID, the type size and the type modifier of a column type.
func typeOID(t sql.Type) (oid uint32, size int16, mod int32) {
	switch t.Kind {
	case sql.KindBool:
		return oidBool, 1, -1
	case sql.KindInt:
		return oidInt4, 4, -1
	case sql.KindBigInt:
		return oidInt8, 8, -1
	case sql.KindDouble:
		return oidFloat8, 8, -1
	case sql.KindDecimal:
		if t.Precision > 0 {
			return oidNumeric, -1, (int32(t.Precision)<<16 | int32(t.Scale)) + 4
		}
		return oidNumeric, -1, -1
	case sql.KindTimestamp:
		return oidTimestamp, 8, -1
	case sql.KindJSON:
		return oidJSON, -1, -1
	case sql.KindInterval:
		return oidInterval, 16, -1
	}
	return oidText, -1, -1 // VARCHAR, and NULL-typed expressions
}

// oidKind maps a parameter type OID to the SQL type its values become; ok is false for an
// OID the front end does not know (its values are passed as VARCHAR text).
// KindOfOID is the SQL kind of a PostgreSQL type OID, for clients of the wire protocol
// (VARCHAR for an OID rsql does not know).
func KindOfOID(oid uint32) sql.Kind {
	k, _ := oidKind(oid)
	return k
}

func oidKind(oid uint32) (sql.Kind, bool) {
	switch oid {
	case oidBool:
		return sql.KindBool, true
	case oidInt2, oidInt4:
		return sql.KindInt, true
	case oidInt8:
		return sql.KindBigInt, true
	case oidFloat4, oidFloat8:
		return sql.KindDouble, true
	case oidNumeric:
		return sql.KindDecimal, true
	case oidText, oidVarchar, oidBPChar, oidChar, oidName:
		return sql.KindVarchar, true
	case oidTimestamp, oidTimestampTZ, oidDate:
		return sql.KindTimestamp, true
	case oidJSON, oidJSONB:
		return sql.KindJSON, true
	}
	return sql.KindVarchar, false
}

// appendDataRow appends one DataRow message for row. formats holds one format code per
// column (already expanded).
func appendDataRow(dst []byte, row sql.Row, cols sql.Schema, formats []int16) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 'D', 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(cols)))
	for i, c := range cols {
		var v sql.Value
		if i < len(row) {
			v = row[i]
		}
		if v.IsNull() {
			dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32) // -1: NULL
			continue
		}
		lenPos := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		var err error
		if formats[i] == formatBinary {
			dst, err = appendBinary(dst, v, c.Type)
		} else {
			dst = AppendText(dst, v, c.Type)
		}
		if err != nil {
			return dst[:start], fmt.Errorf("column %s: %w", c.Name, err)
		}
		binary.BigEndian.PutUint32(dst[lenPos:], uint32(len(dst)-lenPos-4))
	}
	binary.BigEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-1))
	return dst, nil
}

// AppendText appends the Postgres text form of v (a value of a column of type t).
func AppendText(dst []byte, v sql.Value, t sql.Type) []byte {
	switch v.K {
	case sql.KindBool:
		if v.I != 0 {
			return append(dst, 't')
		}
		return append(dst, 'f')
	case sql.KindInt, sql.KindBigInt:
		if t.Kind == sql.KindDouble {
			return sql.AppendFloat8(dst, float64(v.I))
		}
		return strconv.AppendInt(dst, v.I, 10)
	case sql.KindDouble:
		if t.Kind == sql.KindInt || t.Kind == sql.KindBigInt {
			return strconv.AppendInt(dst, int64(v.F()), 10)
		}
		return sql.AppendFloat8(dst, v.F())
	case sql.KindDecimal:
		return append(dst, sql.NumericText(v)...)
	case sql.KindVarchar, sql.KindJSON:
		return append(dst, v.S...)
	case sql.KindTimestamp:
		return appendTimestampText(dst, v.I)
	case sql.KindInterval:
		return appendIntervalText(dst, v.I)
	}
	return append(dst, v.String()...)
}

// appendTimestampText appends a TIMESTAMP (UTC) as PostgreSQL prints one:
// 'YYYY-MM-DD HH:MM:SS', a fraction only when it is not zero, without its trailing zeros,
// and ' BC' before year 1 (docs/clients.md, "Values as text").
func appendTimestampText(dst []byte, ms int64) []byte {
	return sql.AppendTimestampText(dst, ms)
}

// appendIntervalText appends an interval of ms milliseconds as Postgres prints one:
// "[-]D days HH:MM:SS[.mmm]".
func appendIntervalText(dst []byte, ms int64) []byte {
	neg := ms < 0
	u := uint64(ms)
	if neg {
		u = uint64(-(ms + 1)) + 1
	}
	days := u / 86400000
	rem := u % 86400000
	if days > 0 {
		if neg {
			dst = append(dst, '-')
		}
		dst = strconv.AppendUint(dst, days, 10)
		if days == 1 {
			dst = append(dst, " day "...)
		} else {
			dst = append(dst, " days "...)
		}
	}
	if neg {
		dst = append(dst, '-')
	}
	h, m, s, milli := rem/3600000, rem/60000%60, rem/1000%60, rem%1000
	dst = append(dst, byte('0'+h/10), byte('0'+h%10), ':', byte('0'+m/10), byte('0'+m%10), ':', byte('0'+s/10), byte('0'+s%10))
	if milli > 0 {
		dst = append(dst, '.', byte('0'+milli/100), byte('0'+milli/10%10), byte('0'+milli%10))
	}
	return dst
}

var errNoBinary = errors.New("no binary form")

// appendBinary appends the Postgres binary form of v as a value of a column of type t.
func appendBinary(dst []byte, v sql.Value, t sql.Type) ([]byte, error) {
	switch t.Kind {
	case sql.KindBool:
		if v.Truth() {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case sql.KindInt:
		i, ok := asInt(v)
		if !ok || i < math.MinInt32 || i > math.MaxInt32 {
			return dst, fmt.Errorf("value %s does not fit int4", v)
		}
		return binary.BigEndian.AppendUint32(dst, uint32(int32(i))), nil
	case sql.KindBigInt:
		i, ok := asInt(v)
		if !ok {
			return dst, fmt.Errorf("value %s is not an integer", v)
		}
		return binary.BigEndian.AppendUint64(dst, uint64(i)), nil
	case sql.KindDouble:
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(v.AsFloat())), nil
	case sql.KindDecimal:
		if v.K == sql.KindDecimal && v.S != "" {
			return appendNumericText(dst, v.S), nil
		}
		if v.K == sql.KindDecimal {
			return appendNumericBinary(dst, v.I, v.Scale), nil
		}
		if i, ok := asInt(v); ok {
			return appendNumericBinary(dst, i, 0), nil
		}
		return dst, fmt.Errorf("value %s is not a decimal", v)
	case sql.KindTimestamp:
		if v.K != sql.KindTimestamp {
			return dst, fmt.Errorf("value %s is not a timestamp", v)
		}
		return binary.BigEndian.AppendUint64(dst, uint64((v.I-pgEpochMs)*1000)), nil
	case sql.KindInterval:
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.I*1000))
		return append(dst, 0, 0, 0, 0, 0, 0, 0, 0), nil // days, months
	case sql.KindVarchar, sql.KindJSON, sql.KindNull:
		return AppendText(dst, v, t), nil
	}
	return dst, errNoBinary
}

func asInt(v sql.Value) (int64, bool) {
	switch v.K {
	case sql.KindInt, sql.KindBigInt, sql.KindBool:
		return v.I, true
	case sql.KindDecimal:
		if v.Scale == 0 {
			return v.I, true
		}
	}
	return 0, false
}

// appendNumericBinary appends u·10^-scale in the binary numeric format: ndigits, weight,
// sign, dscale (int16 each), then base-10000 digits, most significant first.
func appendNumericBinary(dst []byte, u int64, scale uint8) []byte {
	neg := u < 0
	abs := uint64(u)
	if neg {
		abs = uint64(-(u + 1)) + 1
	}
	// Split into integer and fraction parts in decimal, then group by four digits around
	// the decimal point.
	digits := strconv.FormatUint(abs, 10)
	for len(digits) <= int(scale) {
		digits = "0" + digits
	}
	intPart, frac := digits[:len(digits)-int(scale)], digits[len(digits)-int(scale):]
	return appendNumericDigits(dst, neg, intPart, frac)
}

// appendNumericText appends the binary form of a NUMERIC held as text (beyond 64 bits, or
// NaN / ±Infinity).
func appendNumericText(dst []byte, text string) []byte {
	special := map[string]uint16{"NaN": 0xC000, "Infinity": 0xD000, "-Infinity": 0xF000}
	if sign, ok := special[text]; ok {
		dst = binary.BigEndian.AppendUint16(dst, 0)
		dst = binary.BigEndian.AppendUint16(dst, 0)
		dst = binary.BigEndian.AppendUint16(dst, sign)
		return binary.BigEndian.AppendUint16(dst, 0)
	}
	neg := strings.HasPrefix(text, "-")
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(text, "-"), ".")
	return appendNumericDigits(dst, neg, intPart, frac)
}

// appendNumericDigits appends the binary numeric of the decimal digits intPart.frac.
func appendNumericDigits(dst []byte, neg bool, intPart, frac string) []byte {
	scale := len(frac)
	for len(intPart)%4 != 0 {
		intPart = "0" + intPart
	}
	for len(frac)%4 != 0 {
		frac += "0"
	}
	// intPart and frac hold decimal digits only: a NUMERIC's text is apd's plain 'f' form
	// (sql numericValue) or an integer's decimal text, so each four-digit group parses.
	var groups []uint16
	for i := 0; i < len(intPart); i += 4 {
		n, _ := strconv.Atoi(intPart[i : i+4])
		groups = append(groups, uint16(n))
	}
	weight := len(groups) - 1
	for i := 0; i < len(frac); i += 4 {
		n, _ := strconv.Atoi(frac[i : i+4])
		groups = append(groups, uint16(n))
	}
	// Drop leading zero groups (adjusting the weight) and trailing zero groups.
	for len(groups) > 0 && groups[0] == 0 {
		groups = groups[1:]
		weight--
	}
	for len(groups) > 0 && groups[len(groups)-1] == 0 {
		groups = groups[:len(groups)-1]
	}
	if len(groups) == 0 {
		weight = 0
	}
	sign := uint16(0)
	if neg && len(groups) > 0 {
		sign = 0x4000
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(groups)))
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(weight)))
	dst = binary.BigEndian.AppendUint16(dst, sign)
	dst = binary.BigEndian.AppendUint16(dst, uint16(scale))
	for _, g := range groups {
		dst = binary.BigEndian.AppendUint16(dst, g)
	}
	return dst
}

// decodeParam turns one Bind parameter into a value. oid is the parameter's type (0 when
// neither the client nor the executor said); a NULL parameter has data == nil.
func decodeParam(data []byte, oid uint32, format int16) (sql.Value, error) {
	if data == nil {
		return sql.Null, nil
	}
	kind, known := oidKind(oid)
	if format == formatBinary {
		if !known && oid != oidUnknown {
			return sql.Null, fmt.Errorf("binary parameters of type OID %d are not supported", oid)
		}
		if oid == oidUnknown {
			return sql.Null, errors.New("a binary parameter needs a type: give its OID in Parse")
		}
		return decodeBinaryParam(data, oid, kind)
	}
	if format != formatText {
		return sql.Null, fmt.Errorf("unknown parameter format code %d", format)
	}
	s := string(data)
	switch kind {
	case sql.KindBool:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "t", "true", "yes", "y", "on", "1":
			return sql.Bool(true), nil
		case "f", "false", "no", "n", "off", "0":
			return sql.Bool(false), nil
		}
		return sql.Null, fmt.Errorf("invalid input syntax for type boolean: %q", s)
	case sql.KindInt, sql.KindBigInt:
		bits := 64
		if kind == sql.KindInt {
			bits = 32
		}
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, bits)
		if err != nil {
			return sql.Null, fmt.Errorf("invalid input syntax for type %s: %q", strings.ToLower(kind.String()), s)
		}
		return sql.Value{K: kind, I: i}, nil
	case sql.KindDouble:
		t := strings.TrimSpace(s)
		switch strings.ToLower(t) {
		case "infinity", "+infinity":
			return sql.Double(math.Inf(1)), nil
		case "-infinity":
			return sql.Double(math.Inf(-1)), nil
		}
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return sql.Null, fmt.Errorf("invalid input syntax for type double precision: %q", s)
		}
		return sql.Double(f), nil
	case sql.KindDecimal:
		return parseDecimalParam(strings.TrimSpace(s))
	case sql.KindTimestamp:
		ms, ok := parseTimestampParam(s)
		if !ok {
			return sql.Null, fmt.Errorf("invalid input syntax for type timestamp: %q", s)
		}
		return sql.Timestamp(ms), nil
	case sql.KindJSON:
		return sql.JSONValue(s), nil
	}
	return sql.Varchar(s), nil
}

func decodeBinaryParam(data []byte, oid uint32, kind sql.Kind) (sql.Value, error) {
	need := func(n int) error {
		if len(data) != n {
			return fmt.Errorf("binary parameter of type OID %d has %d bytes, want %d", oid, len(data), n)
		}
		return nil
	}
	switch oid {
	case oidBool:
		if err := need(1); err != nil {
			return sql.Null, err
		}
		return sql.Bool(data[0] != 0), nil
	case oidInt2:
		if err := need(2); err != nil {
			return sql.Null, err
		}
		return sql.Int(int64(int16(binary.BigEndian.Uint16(data)))), nil
	case oidInt4:
		if err := need(4); err != nil {
			return sql.Null, err
		}
		return sql.Int(int64(int32(binary.BigEndian.Uint32(data)))), nil
	case oidInt8:
		if err := need(8); err != nil {
			return sql.Null, err
		}
		return sql.BigInt(int64(binary.BigEndian.Uint64(data))), nil
	case oidFloat4:
		if err := need(4); err != nil {
			return sql.Null, err
		}
		return sql.Double(float64(math.Float32frombits(binary.BigEndian.Uint32(data)))), nil
	case oidFloat8:
		if err := need(8); err != nil {
			return sql.Null, err
		}
		return sql.Double(math.Float64frombits(binary.BigEndian.Uint64(data))), nil
	case oidTimestamp, oidTimestampTZ:
		if err := need(8); err != nil {
			return sql.Null, err
		}
		us := int64(binary.BigEndian.Uint64(data))
		if us == math.MaxInt64 || us == math.MinInt64 {
			return sql.Null, errors.New("infinite timestamps are not supported")
		}
		ms := us / 1000
		if us%1000 < 0 {
			ms-- // floor
		}
		return sql.Timestamp(ms + pgEpochMs), nil
	case oidDate:
		if err := need(4); err != nil {
			return sql.Null, err
		}
		days := int64(int32(binary.BigEndian.Uint32(data)))
		return sql.Timestamp(days*86400000 + pgEpochMs), nil
	case oidNumeric:
		return decodeNumericBinary(data)
	case oidJSONB:
		if len(data) == 0 || data[0] != 1 {
			return sql.Null, errors.New("unsupported jsonb binary version")
		}
		return sql.JSONValue(string(data[1:])), nil
	}
	if kind == sql.KindJSON {
		return sql.JSONValue(string(data)), nil
	}
	return sql.Varchar(string(data)), nil
}

// decodeNumericBinary reads the binary numeric format into a DECIMAL value (at most 18
// fraction digits, and it must fit an int64 once scaled).
func decodeNumericBinary(data []byte) (sql.Value, error) {
	if len(data) < 8 {
		return sql.Null, errors.New("binary numeric parameter too short")
	}
	ndigits := int(binary.BigEndian.Uint16(data))
	weight := int(int16(binary.BigEndian.Uint16(data[2:])))
	sign := binary.BigEndian.Uint16(data[4:])
	dscale := int(binary.BigEndian.Uint16(data[6:]))
	if len(data) != 8+2*ndigits {
		return sql.Null, errors.New("binary numeric parameter has the wrong length")
	}
	if sign == 0xC000 {
		return sql.Null, errors.New("NaN is not a DECIMAL")
	}
	if sign != 0 && sign != 0x4000 {
		return sql.Null, errors.New("infinite numeric values are not DECIMALs")
	}
	if dscale > 18 {
		return sql.Null, fmt.Errorf("numeric parameter has %d fraction digits, more than 18", dscale)
	}
	// value·10^dscale = Σ digit_i · 10^(4·(weight-i) + dscale)
	var acc int64
	for i := 0; i < ndigits; i++ {
		g := int64(binary.BigEndian.Uint16(data[8+2*i:]))
		if g > 9999 {
			return sql.Null, errors.New("binary numeric parameter has an invalid digit")
		}
		e := 4*(weight-i) + dscale
		switch {
		case e < 0:
			if e < -4 || g%pow10i(-e) != 0 {
				return sql.Null, errors.New("binary numeric parameter has more digits than its scale")
			}
			g /= pow10i(-e)
		case e > 18:
			if g != 0 {
				return sql.Null, errors.New("numeric parameter is out of range")
			}
		default:
			p := pow10i(e)
			if g > (math.MaxInt64-acc)/p {
				return sql.Null, errors.New("numeric parameter is out of range")
			}
			g *= p
		}
		acc += g
	}
	if sign == 0x4000 {
		acc = -acc
	}
	return sql.Decimal(acc, uint8(dscale)), nil
}

func pow10i(e int) int64 {
	p := int64(1)
	for ; e > 0; e-- {
		p *= 10
	}
	return p
}

// parseDecimalParam parses decimal text into a DECIMAL value whose scale is the number of
// fraction digits given (at most 18).
func parseDecimalParam(s string) (sql.Value, error) {
	bad := fmt.Errorf("invalid input syntax for type numeric: %q", s)
	if s == "" {
		return sql.Null, bad
	}
	neg := false
	t := s
	if t[0] == '-' || t[0] == '+' {
		neg = t[0] == '-'
		t = t[1:]
	}
	intPart, frac, _ := strings.Cut(t, ".")
	if intPart == "" && frac == "" {
		return sql.Null, bad
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > 18 {
		return sql.Null, fmt.Errorf("numeric %q has more than 18 fraction digits", s)
	}
	var u uint64
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return sql.Null, bad
		}
		if u > (math.MaxInt64-9)/10 {
			return sql.Null, fmt.Errorf("numeric %q is out of range", s)
		}
		u = u*10 + uint64(c-'0')
	}
	i := int64(u)
	if neg {
		i = -i
	}
	return sql.Decimal(i, uint8(len(frac))), nil
}

// parseTimestampParam accepts what sql.ParseTimestamp does plus Postgres' own output forms
// (a zone as +HH or +HH:MM:SS, a trailing " UTC").
func parseTimestampParam(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if ms, ok := sql.ParseTimestamp(s); ok {
		return ms, true
	}
	s = strings.TrimSuffix(s, " UTC")
	for _, layout := range []string{
		"2006-01-02 15:04:05.999999999-07",
		"2006-01-02 15:04:05.999999999-07:00:00",
		"2006-01-02T15:04:05.999999999-07",
		"2006-01-02 15:04:05.999999999",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), true
		}
	}
	return 0, false
}

// ScanText reports the highest $n placeholder in text and how many non-empty
// statements it holds, skipping quoted strings, quoted names and comments.
func ScanText(text string) (maxParam int, statements int) {
	nonEmpty := false
	i := 0
	for i < len(text) {
		c := text[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			nonEmpty = true
			i++
			for i < len(text) {
				if text[i] == c {
					if i+1 < len(text) && text[i+1] == c {
						i += 2
						continue
					}
					break
				}
				if text[i] == '\\' && c == '\'' {
					i++ // MySQL-style escapes in string literals
				}
				i++
			}
			i++
		case c == '-' && i+1 < len(text) && text[i+1] == '-':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				i = len(text)
			} else {
				i += end + 4
			}
		case c == '$' && i+1 < len(text) && text[i+1] >= '0' && text[i+1] <= '9':
			nonEmpty = true
			j := i + 1
			n := 0
			for j < len(text) && text[j] >= '0' && text[j] <= '9' {
				if n < 1<<20 {
					n = n*10 + int(text[j]-'0')
				}
				j++
			}
			maxParam = max(maxParam, n)
			i = j
		case c == ';':
			if nonEmpty {
				statements++
			}
			nonEmpty = false
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		default:
			nonEmpty = true
			i++
		}
	}
	if nonEmpty {
		statements++
	}
	return maxParam, statements
}

// returnsRows guesses from its first keyword whether a statement yields rows (used only
// when the executor cannot describe statements).
func returnsRows(text string) bool {
	t := strings.TrimLeft(text, " \t\r\n(")
	end := strings.IndexFunc(t, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') })
	if end >= 0 {
		t = t[:end]
	}
	switch strings.ToUpper(t) {
	case "SELECT", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "WITH", "VALUES", "TABLE":
		return true
	}
	return false
}
