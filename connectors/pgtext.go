package connectors

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"rsql/sql"
)

// decodePGText converts the text PostgreSQL gives for a value (a column cast to text, in a
// session with TimeZone UTC and DateStyle ISO) into a value of the declared type t. A text
// that is not a value of t is an *sql.Error with PostgreSQL's code for it (22P02 bad
// text, 22003 out of range, 22007/22008 bad or out-of-range timestamp, 22032 bad JSON);
// the caller names the column and quotes the value.
func decodePGText(s string, t sql.Type) (sql.Value, *sql.Error) {
	switch t.Kind {
	case sql.KindVarchar:
		return sql.Varchar(s), nil
	case sql.KindJSON:
		if !json.Valid([]byte(s)) {
			return sql.Null, sql.Errorf(sql.CodeInvalidJSON, "invalid input syntax for type json: %s", quote(s))
		}
		return sql.JSONValue(s), nil
	case sql.KindInt, sql.KindBigInt:
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return castErr(sql.BigInt(n), t)
		}
		// numeric and floating columns: round as PostgreSQL's casts to an integer do.
		if d, ok := sql.NumericFromString(s); ok {
			return castErr(d, t)
		}
		return castErr(sql.Varchar(s), t)
	case sql.KindTimestamp:
		return pgTimestamp(s)
	case sql.KindBool, sql.KindDouble, sql.KindDecimal:
		return castErr(sql.Varchar(s), t)
	}
	return sql.Null, sql.Errorf(sql.CodeCannotCoerce, "cannot convert %s to %s", quote(s), t)
}

func castErr(v sql.Value, t sql.Type) (sql.Value, *sql.Error) {
	out, err := sql.CastValue(v, t)
	if err != nil {
		if se, ok := err.(*sql.Error); ok {
			return sql.Null, se
		}
		return sql.Null, sql.Errorf(sql.CodeInvalidText, "%v", err)
	}
	if out.IsError() {
		return sql.Null, out.AsError()
	}
	return out, nil
}

// pgTimestampLayouts are the ISO forms PostgreSQL prints timestamp, timestamptz (with the
// zone as +HH, +HH:MM) and date values in.
var pgTimestampLayouts = []string{
	"2006-01-02 15:04:05.999999999Z07",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02",
}

// pgTimestamp reads a timestamp, timestamptz or date as PostgreSQL prints it, to epoch
// milliseconds (microseconds are truncated toward the past, as rsql's TIMESTAMP keeps
// milliseconds).
func pgTimestamp(s string) (sql.Value, *sql.Error) {
	switch {
	case strings.HasSuffix(s, " BC"), strings.EqualFold(s, "infinity"), strings.EqualFold(s, "-infinity"):
		return sql.Null, sql.Errorf(sql.CodeDatetimeOverflow, "timestamp out of range: %s", quote(s))
	}
	for _, l := range pgTimestampLayouts {
		if tm, err := time.Parse(l, s); err == nil {
			if y := tm.UTC().Year(); y < 1 || y > 9999 {
				return sql.Null, sql.Errorf(sql.CodeDatetimeOverflow, "timestamp out of range: %s", quote(s))
			}
			us := tm.UnixMicro()
			ms := us / 1000
			if us%1000 < 0 {
				ms--
			}
			return sql.Timestamp(ms), nil
		}
	}
	return sql.Null, sql.Errorf(sql.CodeInvalidDatetime, "invalid input syntax for type timestamp: %s", quote(s))
}

// quote renders a value for an error message, shortened past 64 bytes.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}
