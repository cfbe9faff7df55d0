package connectors

// The CSV format: one record per body, fields in schema order, no header line, quoting
// per RFC 4180. An empty unquoted field is NULL; a quoted empty field ("") is the empty
// string. Non-text fields may be padded with spaces.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"

	gojson "github.com/goccy/go-json"

	"rsql/sql"
)

type csvFormat struct {
	schema  sql.Schema
	scratch []byte
}

func newCSVFormat(schema sql.Schema) *csvFormat { return &csvFormat{schema: schema} }

// Decode parses one CSV record into row.
func (f *csvFormat) Decode(body []byte, row sql.Row) (sql.Row, error) {
	n := len(f.schema)
	if cap(row) >= n {
		row = row[:n]
	} else {
		row = make(sql.Row, n)
	}
	// A trailing line end is not part of the last field.
	if len(body) > 0 && body[len(body)-1] == '\n' {
		body = body[:len(body)-1]
		if len(body) > 0 && body[len(body)-1] == '\r' {
			body = body[:len(body)-1]
		}
	}
	p, col := 0, 0
	for {
		if col >= n {
			return row, &DecodeError{Reason: fmt.Sprintf("csv: more than %d fields", n)}
		}
		var field []byte
		quoted := false
		if p < len(body) && body[p] == '"' {
			quoted = true
			var err error
			field, p, err = f.readQuoted(body, p)
			if err != nil {
				return row, &DecodeError{Field: f.schema[col].Name, Reason: "csv: " + err.Error()}
			}
			if p < len(body) && body[p] != ',' {
				return row, &DecodeError{Field: f.schema[col].Name, Reason: fmt.Sprintf("csv: unexpected %q after a closing quote at byte %d", body[p], p+1)}
			}
		} else {
			end := bytes.IndexByte(body[p:], ',')
			if end < 0 {
				end = len(body)
			} else {
				end += p
			}
			field = body[p:end]
			if q := bytes.IndexByte(field, '"'); q >= 0 {
				return row, &DecodeError{Field: f.schema[col].Name, Reason: fmt.Sprintf("csv: quote inside an unquoted field at byte %d", p+q+1)}
			}
			p = end
		}
		if err := f.setField(row, col, field, quoted); err != nil {
			return row, err
		}
		col++
		if p >= len(body) {
			break
		}
		p++ // the comma
	}
	if col != n {
		return row, &DecodeError{Reason: fmt.Sprintf("csv: expected %d fields, got %d", n, col)}
	}
	return row, nil
}

// readQuoted reads the quoted field at b[p] and returns its content (a subslice of b when
// it holds no doubled quotes, else f.scratch) and the position after the closing quote.
func (f *csvFormat) readQuoted(b []byte, p int) ([]byte, int, error) {
	i := p + 1
	start := i
	out := f.scratch[:0]
	escaped := false
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return nil, len(b), errors.New("unterminated quoted field")
		}
		i += q
		if i+1 < len(b) && b[i+1] == '"' {
			out = append(out, b[start:i+1]...)
			escaped = true
			i += 2
			start = i
			continue
		}
		if !escaped {
			return b[start:i], i + 1, nil
		}
		out = append(out, b[start:i]...)
		f.scratch = out
		return out, i + 1, nil
	}
}

// looksInteger reports whether b is an optional sign followed by digits.
func looksInteger(b []byte) bool {
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		b = b[1:]
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

func trimSpaces(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func (f *csvFormat) setField(row sql.Row, col int, field []byte, quoted bool) error {
	c := f.schema[col]
	if len(field) == 0 && !quoted {
		row[col] = sql.Null
		return nil
	}
	fieldErr := func(reason string) error { return &DecodeError{Field: c.Name, Reason: reason} }
	switch c.Type.Kind {
	case sql.KindVarchar:
		row[col] = sql.Value{K: sql.KindVarchar, S: reuseString(row[col], sql.KindVarchar, field)}
		return nil
	}
	t := trimSpaces(field)
	if len(t) == 0 {
		return fieldErr("empty value for " + c.Type.String())
	}
	switch c.Type.Kind {
	case sql.KindBool:
		b, ok := parseBoolText(t)
		if !ok {
			return fieldErr("invalid BOOLEAN " + quoteShort(t))
		}
		row[col] = sql.Bool(b)
	case sql.KindInt, sql.KindBigInt:
		v, reason := parseIntText(t, c.Type.Kind)
		if reason != "" {
			return fieldErr(reason)
		}
		row[col] = sql.Value{K: c.Type.Kind, I: v}
	case sql.KindDouble:
		v, err := strconv.ParseFloat(bytesString(t), 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) && !math.IsInf(v, 0) {
				row[col] = sql.Double(v)
				return nil
			}
			if errors.Is(err, strconv.ErrRange) {
				return fieldErr("number " + quoteShort(t) + " out of range for DOUBLE")
			}
			return fieldErr("invalid DOUBLE " + quoteShort(t))
		}
		row[col] = sql.Double(v)
	case sql.KindDecimal:
		v, reason := decodeDecimal(t, c.Type)
		if reason != "" {
			return fieldErr(reason)
		}
		row[col] = v
	case sql.KindTimestamp:
		if looksInteger(t) {
			ms, reason := parseIntText(t, sql.KindBigInt)
			if reason != "" || ms < minTimestampMs || ms > maxTimestampMs {
				return fieldErr("timestamp " + quoteShort(t) + " ms is outside years 1-9999")
			}
			row[col] = sql.Timestamp(ms)
			return nil
		}
		ms, ok := parseTimestampText(t)
		if !ok {
			return fieldErr("invalid timestamp " + quoteShort(t) + ": expected RFC 3339 such as 2026-11-30T05:00:10Z or epoch milliseconds")
		}
		row[col] = sql.Timestamp(ms)
	case sql.KindJSON:
		if !gojson.Valid(t) {
			return fieldErr("invalid JSON " + quoteShort(t))
		}
		row[col] = sql.Value{K: sql.KindJSON, S: reuseString(row[col], sql.KindJSON, t)}
	default:
		return fieldErr("type " + c.Type.String() + " is not supported in CSV records")
	}
	return nil
}

// Encode appends row as one CSV record (no line end).
func (f *csvFormat) Encode(dst []byte, row sql.Row) ([]byte, error) {
	if len(row) != len(f.schema) {
		return dst, fmt.Errorf("csv: row has %d values, schema has %d columns", len(row), len(f.schema))
	}
	for i, c := range f.schema {
		if i > 0 {
			dst = append(dst, ',')
		}
		v := row[i]
		switch v.K {
		case sql.KindNull:
		case sql.KindBool:
			dst = strconv.AppendBool(dst, v.I != 0)
		case sql.KindInt, sql.KindBigInt, sql.KindInterval:
			dst = strconv.AppendInt(dst, v.I, 10)
		case sql.KindDouble:
			switch {
			case math.IsNaN(v.F()):
				dst = append(dst, "NaN"...)
			case math.IsInf(v.F(), 1):
				dst = append(dst, "+Inf"...)
			case math.IsInf(v.F(), -1):
				dst = append(dst, "-Inf"...)
			default:
				dst = appendFloat(dst, v.F())
			}
		case sql.KindDecimal:
			if v.S != "" {
				dst = append(dst, v.S...)
				break
			}
			dst = appendDecimal(dst, v.I, v.Scale)
		case sql.KindVarchar:
			dst = appendCSVString(dst, v.S)
		case sql.KindTimestamp:
			if err := checkTimestamp(c.Name, v.I); err != nil {
				return dst, fmt.Errorf("csv: %w", err)
			}
			dst = appendTimestamp(dst, v.I)
		case sql.KindJSON:
			dst = appendCSVString(dst, v.S)
		default:
			return dst, fmt.Errorf("csv: column %s: cannot encode a %s value", c.Name, v.K)
		}
	}
	return dst, nil
}

// appendCSVString appends s, quoted when it is empty (to tell it from NULL) or holds a
// comma, a quote or a line break.
func appendCSVString(dst []byte, s string) []byte {
	need := s == ""
	for i := 0; i < len(s) && !need; i++ {
		switch s[i] {
		case ',', '"', '\n', '\r':
			need = true
		}
	}
	if !need {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"')
}
