package sql

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Kind is the SQL type of a value or a column.
type Kind uint8

// The SQL types of docs/sql.md. KindNull is the type of the NULL literal only; a column is never
// of KindNull. KindInterval exists only inside expressions (ts + INTERVAL ...).
const (
	KindNull Kind = iota
	KindBool
	KindInt    // INT: 32-bit in the catalog, held as int64
	KindBigInt // BIGINT
	KindDouble
	KindDecimal // DECIMAL(p,s): held as an int64 scaled by 10^s
	KindVarchar
	KindTimestamp // milliseconds since the Unix epoch, UTC
	KindJSON      // JSON text
	KindInterval  // milliseconds
)

var kindNames = [...]string{"NULL", "BOOLEAN", "INT", "BIGINT", "DOUBLE", "DECIMAL", "VARCHAR", "TIMESTAMP", "JSON", "INTERVAL"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "UNKNOWN"
}

// IsNumeric reports whether k is INT, BIGINT, DOUBLE or DECIMAL.
func (k Kind) IsNumeric() bool {
	return k == KindInt || k == KindBigInt || k == KindDouble || k == KindDecimal
}

// IsInteger reports whether k is INT or BIGINT.
func (k Kind) IsInteger() bool { return k == KindInt || k == KindBigInt }

// Type is a column type: a Kind plus, for DECIMAL, its precision and scale.
type Type struct {
	Kind      Kind
	Precision uint8
	Scale     uint8
}

func (t Type) String() string {
	if t.Kind == KindDecimal && t.Precision == 0 {
		return "NUMERIC"
	}
	if t.Kind == KindDecimal {
		return "DECIMAL(" + strconv.Itoa(int(t.Precision)) + "," + strconv.Itoa(int(t.Scale)) + ")"
	}
	return t.Kind.String()
}

// Types of the plain kinds, for convenience.
var (
	TypeNull      = Type{Kind: KindNull}
	TypeBool      = Type{Kind: KindBool}
	TypeInt       = Type{Kind: KindInt}
	TypeBigInt    = Type{Kind: KindBigInt}
	TypeDouble    = Type{Kind: KindDouble}
	TypeVarchar   = Type{Kind: KindVarchar}
	TypeTimestamp = Type{Kind: KindTimestamp}
	TypeJSON      = Type{Kind: KindJSON}
	TypeInterval  = Type{Kind: KindInterval}
	// TypeNumeric is NUMERIC without precision: any value, each with its own scale.
	TypeNumeric = Type{Kind: KindDecimal}
)

// Value is one SQL value. Which field holds the payload depends on K:
// Bool (I = 0 or 1), Int/BigInt/Timestamp/Interval (I), Double (the bits of its float64 in
// I, read by F), Varchar/JSON (S).
// DECIMAL is I scaled by 10^Scale when it fits (Scale ≤ 18), else its decimal text in S
// (numeric.go). A value of kind NULL with S set is a run-time error (ErrorValue): the
// SQLSTATE code and message of why the row's value could not be computed.
//
// Four fields in 32 bytes, so that the compiler keeps a Value in registers between the
// expressions that compute it and their callers (docs/architecture.md, "Values").
type Value struct {
	K     Kind
	Scale uint8
	I     int64
	S     string
}

// F is the float64 of a DOUBLE (meaningless for the other kinds).
func (v Value) F() float64 { return math.Float64frombits(uint64(v.I)) }

// Null is the SQL NULL.
var Null = Value{}

// IsNull reports whether v is NULL. An error value (ErrorValue) is NULL too: code that
// does not look for errors treats a failed value as unknown.
func (v Value) IsNull() bool { return v.K == KindNull }

// ErrorValue is the value of an expression that failed for this row: PostgreSQL raises an
// error for the row, rsql carries the error in the value. Its kind is NULL, so every strict
// function (NULL in, NULL out) passes it on at no extra cost on the hot path; constructs
// that consume NULLs (IS NULL, COALESCE, CASE, AND/OR, ...) pass it on instead of
// consuming it. The operator that finishes a row (filter, projection, aggregation input,
// sink) checks for it once and routes the row to the bad-record path with the message.
// code is a five-character SQLSTATE.
func ErrorValue(code, msg string) Value {
	return Value{K: KindNull, S: code + msg}
}

// errorf builds an ErrorValue with a formatted message.
func errorf(code, format string, args ...any) Value {
	return ErrorValue(code, fmt.Sprintf(format, args...))
}

// IsError reports whether v is an ErrorValue.
func (v Value) IsError() bool { return v.K == KindNull && len(v.S) >= 5 }

// Err returns the SQLSTATE code and message of an ErrorValue; ok is false for other values.
func (v Value) Err() (code, msg string, ok bool) {
	if v.K != KindNull || len(v.S) < 5 {
		return "", "", false
	}
	return v.S[:5], v.S[5:], true
}

// AsError returns the *Error of an ErrorValue, or nil.
func (v Value) AsError() *Error {
	if e, ok := v.errOf(); ok {
		return e
	}
	return nil
}

func (v Value) errOf() (*Error, bool) {
	code, msg, ok := v.Err()
	if !ok {
		return nil, false
	}
	return &Error{Code: code, Message: msg, Pos: -1}, true
}

// errValue converts an *Error to an ErrorValue.
func errValue(e *Error) Value { return ErrorValue(e.Code, e.Message) }

// nullOf returns the error among a and b when there is one, else NULL: the result of a
// strict function when an argument is NULL.
func nullOf(a, b Value) Value {
	if a.K == KindNull && a.S != "" {
		return a
	}
	if b.K == KindNull && b.S != "" {
		return b
	}
	return Null
}

// firstError returns the first ErrorValue of vs.
func firstError(vs []Value) (Value, bool) {
	for _, v := range vs {
		if v.K == KindNull && v.S != "" {
			return v, true
		}
	}
	return Null, false
}

// RowError returns the first ErrorValue of r as an *Error (with the column's position in
// the message's context left to the caller), or nil.
func RowError(r Row) *Error {
	for _, v := range r {
		if v.K == KindNull && v.S != "" {
			return v.AsError()
		}
	}
	return nil
}

// Constructors.
func Bool(b bool) Value {
	if b {
		return Value{K: KindBool, I: 1}
	}
	return Value{K: KindBool}
}
func Int(i int64) Value              { return Value{K: KindInt, I: i} }
func BigInt(i int64) Value           { return Value{K: KindBigInt, I: i} }
func Double(f float64) Value         { return Value{K: KindDouble, I: int64(math.Float64bits(f))} }
func Varchar(s string) Value         { return Value{K: KindVarchar, S: s} }
func Timestamp(ms int64) Value       { return Value{K: KindTimestamp, I: ms} }
func JSONValue(s string) Value       { return Value{K: KindJSON, S: s} }
func Interval(ms int64) Value        { return Value{K: KindInterval, I: ms} }
func Decimal(u int64, s uint8) Value { return Value{K: KindDecimal, I: u, Scale: s} }

// Truth reports whether v is TRUE (NULL and FALSE are not).
func (v Value) Truth() bool { return v.K == KindBool && v.I != 0 }

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// Pow10 returns 10^s as a float64 for s <= 18.
func Pow10(s uint8) float64 {
	if int(s) < len(pow10) {
		return pow10[s]
	}
	return math.Pow(10, float64(s))
}

// AsFloat returns a numeric value as float64 (0 for non-numeric kinds).
func (v Value) AsFloat() float64 {
	switch v.K {
	case KindDouble:
		return v.F()
	case KindDecimal:
		if v.S != "" {
			return NumericFloat(v)
		}
		return float64(v.I) / Pow10(v.Scale)
	case KindInt, KindBigInt, KindTimestamp, KindInterval, KindBool:
		return float64(v.I)
	}
	return 0
}

// FormatTimestamp renders epoch milliseconds as RFC 3339 UTC with milliseconds,
// e.g. 2026-11-30T05:00:10.000Z.
func FormatTimestamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// ParseTimestamp accepts RFC 3339 (with or without fraction or zone: a missing zone means
// UTC) and "YYYY-MM-DD HH:MM:SS[.fff]" and returns epoch milliseconds. As in PostgreSQL's
// own output (AppendTimestampText), the year may have more than four digits and the text
// may end in " BC" (year 1 BC is year 0); the caller checks the range.
func ParseTimestamp(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	for _, layout := range tsLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), true
		}
	}
	return parseWideYear(s)
}

// parseWideYear parses a timestamp whose year has more than four digits or that ends in
// " BC": the rest is parsed with a four-digit year of the same leap-ness, then moved to the
// year (proleptic Gregorian, as PostgreSQL's calendar).
func parseWideYear(s string) (int64, bool) {
	bc := false
	if n := len(s); n > 3 && strings.EqualFold(s[n-3:], " BC") {
		bc, s = true, strings.TrimSpace(s[:n-3])
	}
	dash := strings.IndexByte(s, '-')
	if dash < 4 || dash > 9 || (dash == 4 && !bc) {
		return 0, false
	}
	year := 0
	for _, c := range s[:dash] {
		if c < '0' || c > '9' {
			return 0, false
		}
		year = year*10 + int(c-'0')
	}
	if bc {
		if year == 0 {
			return 0, false
		}
		year = 1 - year
	}
	stand := "2001" // a year of the same leap-ness, so February 29 parses when it exists
	if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		stand = "2000"
	}
	for _, layout := range tsLayouts {
		if t, err := time.Parse(layout, stand+s[dash:]); err == nil {
			return time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location()).UnixMilli(), true
		}
	}
	return 0, false
}

var tsLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02",
}

// FormatDecimal renders an int64 scaled by 10^scale.
func FormatDecimal(u int64, scale uint8) string {
	if scale == 0 {
		return strconv.FormatInt(u, 10)
	}
	neg := u < 0
	var abs uint64
	if neg {
		abs = uint64(-u)
	} else {
		abs = uint64(u)
	}
	digits := strconv.FormatUint(abs, 10)
	for len(digits) <= int(scale) {
		digits = "0" + digits
	}
	out := digits[:len(digits)-int(scale)] + "." + digits[len(digits)-int(scale):]
	if neg {
		out = "-" + out
	}
	return out
}

// String renders v as SQL text output (NULL as "NULL").
func (v Value) String() string {
	switch v.K {
	case KindNull:
		if _, msg, ok := v.Err(); ok {
			return "ERROR: " + msg
		}
		return "NULL"
	case KindBool:
		if v.I != 0 {
			return "true"
		}
		return "false"
	case KindInt, KindBigInt:
		return strconv.FormatInt(v.I, 10)
	case KindDouble:
		return strconv.FormatFloat(v.F(), 'g', -1, 64)
	case KindDecimal:
		return NumericText(v)
	case KindVarchar, KindJSON:
		return v.S
	case KindTimestamp:
		return FormatTimestamp(v.I)
	case KindInterval:
		return (time.Duration(v.I) * time.Millisecond).String()
	}
	return "?"
}

// Row is one record's values, in schema order.
type Row []Value

// Column is a named, typed column of a schema.
type Column struct {
	Name string
	Type Type
}

// Schema is the ordered columns of a stream or of an operator's output.
type Schema []Column

// Index returns the position of the column named name (case-insensitive), or -1.
func (s Schema) Index(name string) int {
	for i, c := range s {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// Names returns the column names.
func (s Schema) Names() []string {
	out := make([]string, len(s))
	for i, c := range s {
		out[i] = c.Name
	}
	return out
}
