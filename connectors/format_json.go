package connectors

// The JSON lines format.
//
// Decoding is a hand-written scanner over the top-level object rather than a reflection
// decoder (encoding/json or goccy/go-json into a map or struct): a record's fields are
// parsed straight into the typed values of the reused row, so a record costs no
// allocation beyond the VARCHAR/JSON strings it yields, and keys are matched to columns
// without building a map. Nested objects and arrays (kept as raw text in JSON columns, or
// skipped when no column wants them) are delimited by the scanner and validated with
// goccy/go-json's Valid, the fastest validator among the JSON libraries rsql already uses.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"

	"rsql/sql"
)

// maxJSONDepth bounds the nesting of objects and arrays inside a record.
const maxJSONDepth = 1000

type jsonFormat struct {
	schema sql.Schema
	// op is the change column (a last column named sql.ChangeColumn, as an updating
	// query's rows and a table's records have) or -1: Encode leaves it out when NULL (an
	// insert), so an insert is written as the row alone (docs/sql.md, "Changelogs").
	op      int
	keys    [][]byte // `"name":` per column, for Encode
	names   [][]byte // column names, for matching keys
	seen    []bool
	scratch []byte // unescaped strings
}

func newJSONFormat(schema sql.Schema) *jsonFormat {
	f := &jsonFormat{schema: schema, seen: make([]bool, len(schema)), op: changeColumn(schema)}
	for _, c := range schema {
		k := appendJSONString(nil, c.Name)
		f.keys = append(f.keys, append(k, ':'))
		f.names = append(f.names, []byte(c.Name))
	}
	return f
}

// errMalformed is the reason of a record that is not one JSON object.
func malformed(format string, args ...any) *DecodeError {
	return &DecodeError{Reason: "malformed JSON: " + fmt.Sprintf(format, args...)}
}

func skipWS(b []byte, p int) int {
	for p < len(b) {
		switch b[p] {
		case ' ', '\t', '\n', '\r':
			p++
		default:
			return p
		}
	}
	return p
}

// Decode parses one JSON object into row.
func (f *jsonFormat) Decode(body []byte, row sql.Row) (sql.Row, error) {
	n := len(f.schema)
	if cap(row) >= n {
		row = row[:n]
	} else {
		row = make(sql.Row, n)
	}
	for i := range f.seen {
		f.seen[i] = false
	}
	p := skipWS(body, 0)
	if p >= len(body) || body[p] != '{' {
		if p >= len(body) {
			return row, &DecodeError{Reason: "empty record: expected a JSON object"}
		}
		return row, &DecodeError{Reason: fmt.Sprintf("record is not a JSON object (starts with %q)", body[p])}
	}
	p = skipWS(body, p+1)
	if p < len(body) && body[p] == '}' {
		p++
	} else {
		hint := 0
		for {
			if p >= len(body) {
				return row, malformed("unexpected end of record")
			}
			if body[p] != '"' {
				return row, malformed("expected a field name at byte %d", p+1)
			}
			key, next, err := f.readString(body, p)
			if err != nil {
				return row, malformed("field name at byte %d: %s", p+1, err.Error())
			}
			p = skipWS(body, next)
			if p >= len(body) || body[p] != ':' {
				return row, malformed("expected ':' after field name %q at byte %d", key, p+1)
			}
			p = skipWS(body, p+1)
			col := f.lookup(key, hint)
			if col < 0 {
				p, err = skipJSONValue(body, p)
				if err != nil {
					return row, malformed("field %q: %s", key, err.Error())
				}
			} else {
				p, err = f.decodeValue(body, p, col, row)
				if err != nil {
					return row, err
				}
				f.seen[col] = true
				hint = col + 1
			}
			p = skipWS(body, p)
			if p >= len(body) {
				return row, malformed("unexpected end of record")
			}
			if body[p] == ',' {
				p = skipWS(body, p+1)
				continue
			}
			if body[p] == '}' {
				p++
				break
			}
			return row, malformed("expected ',' or '}' at byte %d", p+1)
		}
	}
	if p = skipWS(body, p); p != len(body) {
		return row, malformed("unexpected data after the object at byte %d", p+1)
	}
	for i, s := range f.seen {
		if !s {
			row[i] = sql.Null
		}
	}
	return row, nil
}

// lookup finds the column of key, trying the column after the previous match first
// (records usually list fields in schema order), then an exact match, then a
// case-insensitive one.
func (f *jsonFormat) lookup(key []byte, hint int) int {
	if hint < len(f.names) && string(f.names[hint]) == string(key) {
		return hint
	}
	for i, name := range f.names {
		if string(name) == string(key) {
			return i
		}
	}
	for i, name := range f.names {
		if equalFoldASCII(name, key) {
			return i
		}
	}
	return -1
}

func equalFoldASCII(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x >= 0x80 || y >= 0x80 {
			// Non-ASCII: fall back to Unicode folding for the whole name.
			return equalFoldUnicode(a, b)
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func equalFoldUnicode(a, b []byte) bool {
	return sql.Schema{{Name: string(a)}}.Index(string(b)) == 0
}

func jsonKindOf(c byte) string {
	switch {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return "invalid JSON"
}

// decodeValue parses the value at body[p] into row[col] and returns the position after it.
func (f *jsonFormat) decodeValue(body []byte, p, col int, row sql.Row) (int, error) {
	c := f.schema[col]
	fieldErr := func(reason string) error { return &DecodeError{Field: c.Name, Reason: reason} }
	wrongType := func() error {
		return fieldErr("expected " + c.Type.String() + ", got " + jsonKindOf(body[p]))
	}
	if p >= len(body) {
		return p, malformed("unexpected end of record")
	}
	ch := body[p]
	if ch == 'n' {
		end, err := expectLiteral(body, p, "null")
		if err != nil {
			return p, fieldErr(err.Error())
		}
		row[col] = sql.Null
		return end, nil
	}
	switch c.Type.Kind {
	case sql.KindBool:
		switch ch {
		case 't':
			end, err := expectLiteral(body, p, "true")
			if err != nil {
				return p, fieldErr(err.Error())
			}
			row[col] = sql.Bool(true)
			return end, nil
		case 'f':
			end, err := expectLiteral(body, p, "false")
			if err != nil {
				return p, fieldErr(err.Error())
			}
			row[col] = sql.Bool(false)
			return end, nil
		}
		return p, wrongType()
	case sql.KindInt, sql.KindBigInt:
		end, isInt, err := scanJSONNumber(body, p)
		if err != nil {
			if ch == '-' || (ch >= '0' && ch <= '9') {
				return p, fieldErr(err.Error())
			}
			return p, wrongType()
		}
		if !isInt {
			return p, fieldErr("expected " + c.Type.String() + ", got the non-integer " + quoteShort(body[p:end]))
		}
		v, reason := parseIntText(body[p:end], c.Type.Kind)
		if reason != "" {
			return p, fieldErr(reason)
		}
		row[col] = sql.Value{K: c.Type.Kind, I: v}
		return end, nil
	case sql.KindDouble:
		end, _, err := scanJSONNumber(body, p)
		if err != nil {
			if ch == '-' || (ch >= '0' && ch <= '9') {
				return p, fieldErr(err.Error())
			}
			return p, wrongType()
		}
		v, perr := strconv.ParseFloat(bytesString(body[p:end]), 64)
		if perr != nil && (math.IsInf(v, 0) || !errors.Is(perr, strconv.ErrRange)) {
			return p, fieldErr("number " + quoteShort(body[p:end]) + " out of range for DOUBLE")
		}
		row[col] = sql.Double(v)
		return end, nil
	case sql.KindDecimal:
		var text []byte
		var end int
		if ch == '"' {
			s, next, err := f.readString(body, p)
			if err != nil {
				return p, fieldErr(err.Error())
			}
			text, end = s, next
		} else {
			e, _, err := scanJSONNumber(body, p)
			if err != nil {
				if ch == '-' || (ch >= '0' && ch <= '9') {
					return p, fieldErr(err.Error())
				}
				return p, wrongType()
			}
			text, end = body[p:e], e
		}
		v, reason := decodeDecimal(text, c.Type)
		if reason != "" {
			return p, fieldErr(reason)
		}
		row[col] = v
		return end, nil
	case sql.KindVarchar:
		if ch != '"' {
			return p, wrongType()
		}
		s, end, err := f.readString(body, p)
		if err != nil {
			return p, fieldErr(err.Error())
		}
		row[col] = sql.Value{K: sql.KindVarchar, S: reuseString(row[col], sql.KindVarchar, s)}
		return end, nil
	case sql.KindTimestamp:
		if ch == '"' {
			s, end, err := f.readString(body, p)
			if err != nil {
				return p, fieldErr(err.Error())
			}
			ms, ok := parseTimestampText(s)
			if !ok {
				return p, fieldErr("invalid timestamp " + quoteShort(s) + ": expected RFC 3339 such as 2026-11-30T05:00:10Z or epoch milliseconds")
			}
			row[col] = sql.Timestamp(ms)
			return end, nil
		}
		end, isInt, err := scanJSONNumber(body, p)
		if err != nil {
			if ch == '-' || (ch >= '0' && ch <= '9') {
				return p, fieldErr(err.Error())
			}
			return p, wrongType()
		}
		if !isInt {
			return p, fieldErr("timestamp " + quoteShort(body[p:end]) + " is not whole epoch milliseconds")
		}
		ms, reason := parseIntText(body[p:end], sql.KindBigInt)
		if reason != "" || ms < minTimestampMs || ms > maxTimestampMs {
			return p, fieldErr("timestamp " + quoteShort(body[p:end]) + " ms is outside years 1-9999")
		}
		row[col] = sql.Timestamp(ms)
		return end, nil
	case sql.KindJSON:
		end, err := skipJSONValue(body, p)
		if err != nil {
			return p, fieldErr(err.Error())
		}
		row[col] = sql.Value{K: sql.KindJSON, S: reuseString(row[col], sql.KindJSON, body[p:end])}
		return end, nil
	}
	return p, fieldErr("type " + c.Type.String() + " is not supported in JSON records")
}

func expectLiteral(b []byte, p int, lit string) (int, error) {
	if len(b)-p < len(lit) || string(b[p:p+len(lit)]) != lit {
		end := min(p+len(lit), len(b))
		return p, fmt.Errorf("invalid literal %s", quoteShort(b[p:end]))
	}
	return p + len(lit), nil
}

// scanJSONNumber checks the JSON number at b[p] and returns its end and whether it is an
// integer (no fraction or exponent).
func scanJSONNumber(b []byte, p int) (end int, isInt bool, err error) {
	i := p
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return p, false, errors.New("invalid number")
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return p, false, fmt.Errorf("invalid value starting with %q", b[p])
	}
	isInt = true
	if i < len(b) && b[i] == '.' {
		isInt = false
		i++
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return p, false, fmt.Errorf("invalid number %s", quoteShort(b[p:i]))
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		isInt = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return p, false, fmt.Errorf("invalid number %s", quoteShort(b[p:i]))
		}
	}
	return i, isInt, nil
}

// readString reads the JSON string starting at b[p] (a '"') and returns its content and
// the position after the closing quote. The content is a subslice of b when the string
// has no escapes, else f.scratch (valid until the next call). Invalid UTF-8 becomes
// U+FFFD, as encoding/json does, so that decoded text always encodes back unchanged.
func (f *jsonFormat) readString(b []byte, p int) ([]byte, int, error) {
	i := p + 1
	// Skip 8 bytes at a time while none is special (a quote, a backslash, a control
	// character or a non-ASCII byte); the loop below looks at the rest byte by byte.
	for i+8 <= len(b) && !specialByte8(binary.LittleEndian.Uint64(b[i:])) {
		i += 8
	}
	ascii := true
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s := b[p+1 : i]
			if !ascii && !utf8.Valid(s) {
				return f.unescape(b, p)
			}
			return s, i + 1, nil
		case c == '\\':
			return f.unescape(b, p)
		case c < 0x20:
			return nil, i, fmt.Errorf("control character %#x in string", c)
		case c >= 0x80:
			ascii = false
		}
		i++
	}
	return nil, i, errors.New("unterminated string")
}

// specialByte8 reports whether one of the 8 bytes in x is '"', '\\', below 0x20 or
// 0x80 and above (the zero-byte and less-than tests of "Bit Twiddling Hacks").
func specialByte8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return (x|(x-ones*0x20)&^x|(q-ones)&^q|(bs-ones)&^bs)&highs != 0
}

// unescape is readString's slow path.
func (f *jsonFormat) unescape(b []byte, p int) ([]byte, int, error) {
	out := f.scratch[:0]
	i := p + 1
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			f.scratch = out
			return out, i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return nil, i, errors.New("unterminated string")
			}
			e := b[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(b, i)
				if !ok {
					return nil, i, errors.New(`invalid \u escape in string`)
				}
				i += 4
				if utf16IsSurrogate(r) {
					r2, ok2 := rune(-1), false
					if i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
						r2, ok2 = hex4(b, i+2)
					}
					if ok2 && r >= 0xD800 && r < 0xDC00 && r2 >= 0xDC00 && r2 < 0xE000 {
						r = (r-0xD800)<<10 + (r2 - 0xDC00) + 0x10000
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				return nil, i, fmt.Errorf("invalid escape \\%c in string", e)
			}
		case c < 0x20:
			return nil, i, fmt.Errorf("control character %#x in string", c)
		case c < 0x80:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, b[i:i+size]...)
			}
			i += size
		}
	}
	f.scratch = out
	return nil, i, errors.New("unterminated string")
}

func utf16IsSurrogate(r rune) bool { return r >= 0xD800 && r < 0xE000 }

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// skipJSONString returns the position after the JSON string at b[p], checking escapes.
func skipJSONString(b []byte, p int) (int, error) {
	i := p + 1
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, errors.New("unterminated string")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(b, i+2); !ok {
					return i, errors.New(`invalid \u escape in string`)
				}
				i += 6
			default:
				return i, fmt.Errorf("invalid escape \\%c in string", b[i+1])
			}
		case c < 0x20:
			return i, fmt.Errorf("control character %#x in string", c)
		default:
			i++
		}
	}
	return i, errors.New("unterminated string")
}

// skipJSONValue returns the position after the JSON value at b[p], checking it is valid.
func skipJSONValue(b []byte, p int) (int, error) {
	if p >= len(b) {
		return p, errors.New("unexpected end of record")
	}
	switch c := b[p]; {
	case c == '"':
		return skipJSONString(b, p)
	case c == 't':
		return expectLiteral(b, p, "true")
	case c == 'f':
		return expectLiteral(b, p, "false")
	case c == 'n':
		return expectLiteral(b, p, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		end, _, err := scanJSONNumber(b, p)
		return end, err
	case c == '{' || c == '[':
		// Find the matching bracket, then let the validator check the grammar inside.
		depth := 0
		i := p
		for i < len(b) {
			switch b[i] {
			case '{', '[':
				depth++
				if depth > maxJSONDepth {
					return p, fmt.Errorf("nested deeper than %d levels", maxJSONDepth)
				}
				i++
			case '}', ']':
				depth--
				i++
				if depth == 0 {
					if !gojson.Valid(b[p:i]) {
						return p, errors.New("invalid nested JSON value")
					}
					return i, nil
				}
			case '"':
				end, err := skipJSONString(b, i)
				if err != nil {
					return p, err
				}
				i = end
			default:
				i++
			}
		}
		return p, errors.New("unterminated object or array")
	default:
		return p, fmt.Errorf("invalid value starting with %q", c)
	}
}

// Encode appends row as one JSON object with the schema's names as keys, in order.
func (f *jsonFormat) Encode(dst []byte, row sql.Row) ([]byte, error) {
	if len(row) != len(f.schema) {
		return dst, fmt.Errorf("json: row has %d values, schema has %d columns", len(row), len(f.schema))
	}
	dst = append(dst, '{')
	for i, c := range f.schema {
		if i == f.op && row[i].K == sql.KindNull {
			continue
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, f.keys[i]...)
		v := row[i]
		switch v.K {
		case sql.KindNull:
			dst = append(dst, "null"...)
		case sql.KindBool:
			dst = strconv.AppendBool(dst, v.I != 0)
		case sql.KindInt, sql.KindBigInt, sql.KindInterval:
			dst = strconv.AppendInt(dst, v.I, 10)
		case sql.KindDouble:
			if math.IsNaN(v.F()) || math.IsInf(v.F(), 0) {
				return dst, sql.Errorf(sql.CodeNumericOutOfRange, "json: column %s: %v has no JSON number", c.Name, v.F())
			}
			dst = appendFloat(dst, v.F())
		case sql.KindDecimal:
			if v.S != "" {
				if v.S == "NaN" || v.S == "Infinity" || v.S == "-Infinity" {
					return dst, sql.Errorf(sql.CodeNumericOutOfRange, "json: column %s: %s has no JSON number", c.Name, v.S)
				}
				dst = append(dst, v.S...)
				break
			}
			dst = appendDecimal(dst, v.I, v.Scale)
		case sql.KindVarchar:
			dst = appendJSONString(dst, v.S)
		case sql.KindTimestamp:
			if err := checkTimestamp(c.Name, v.I); err != nil {
				return dst, fmt.Errorf("json: %w", err)
			}
			dst = append(dst, '"')
			dst = appendTimestamp(dst, v.I)
			dst = append(dst, '"')
		case sql.KindJSON:
			if !gojson.Valid([]byte(v.S)) {
				return dst, fmt.Errorf("json: column %s: value is not valid JSON: %s", c.Name, quoteShort([]byte(v.S)))
			}
			dst = append(dst, v.S...)
		default:
			return dst, fmt.Errorf("json: column %s: cannot encode a %s value", c.Name, v.K)
		}
	}
	return append(dst, '}'), nil
}

// appendDecimal appends u scaled by 10^scale as decimal text.
func appendDecimal(dst []byte, u int64, scale uint8) []byte {
	if scale == 0 {
		return strconv.AppendInt(dst, u, 10)
	}
	var abs uint64
	if u < 0 {
		dst = append(dst, '-')
		abs = uint64(-(u + 1)) + 1
	} else {
		abs = uint64(u)
	}
	var buf [24]byte
	digits := strconv.AppendUint(buf[:0], abs, 10)
	for len(digits) <= int(scale) {
		digits = append([]byte{'0'}, digits...)
	}
	k := len(digits) - int(scale)
	dst = append(dst, digits[:k]...)
	dst = append(dst, '.')
	return append(dst, digits[k:]...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
