package sql

import (
	"bytes"
	"math"
	"strconv"
	"time"
)

// AppendText appends v's PostgreSQL text output form: what psql prints and what
// CONCAT and || use (booleans t/f, doubles in PostgreSQL's shortest form, timestamps as
// 2024-02-29 12:34:56.789, DECIMAL with all digits of its scale). NULL appends nothing.
func AppendText(dst []byte, v Value) []byte {
	switch v.K {
	case KindNull:
		return dst
	case KindBool:
		if v.I != 0 {
			return append(dst, 't')
		}
		return append(dst, 'f')
	case KindInt, KindBigInt:
		return strconv.AppendInt(dst, v.I, 10)
	case KindDouble:
		return AppendFloat8(dst, v.F())
	case KindDecimal:
		if v.S != "" {
			return append(dst, v.S...)
		}
		return append(dst, FormatDecimal(v.I, v.Scale)...)
	case KindVarchar, KindJSON:
		return append(dst, v.S...)
	case KindTimestamp:
		return AppendTimestampText(dst, v.I)
	case KindInterval:
		return AppendIntervalText(dst, v.I)
	}
	return dst
}

// Text returns AppendText as a string.
func Text(v Value) string {
	switch v.K {
	case KindVarchar, KindJSON:
		return v.S
	}
	return string(AppendText(nil, v))
}

// AppendFloat8 prints f as PostgreSQL does (extra_float_digits = 1): the shortest exact
// digits, in exponent form when the decimal exponent is below -4 or at least 15; NaN,
// Infinity, -Infinity; -0.
func AppendFloat8(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0"...)
		}
		return append(dst, '0')
	}
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	i := bytes.LastIndexByte(e, 'e')
	exp := 0
	for _, c := range e[i+2:] {
		exp = exp*10 + int(c-'0')
	}
	if e[i+1] == '-' {
		exp = -exp
	}
	if exp < -4 || exp >= 15 {
		return append(dst, e...)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// AppendTimestampText prints epoch milliseconds as PostgreSQL prints a timestamp:
// YYYY-MM-DD HH:MM:SS[.fff] (fraction without trailing zeros).
func AppendTimestampText(dst []byte, ms int64) []byte {
	t := time.UnixMilli(ms).UTC()
	y, mo, d := t.Date()
	bc := y <= 0
	if bc {
		y = 1 - y // year 0 is 1 BC
	}
	dst = appendPad(dst, y, 4)
	dst = append(dst, '-')
	dst = appendPad(dst, int(mo), 2)
	dst = append(dst, '-')
	dst = appendPad(dst, d, 2)
	dst = append(dst, ' ')
	dst = appendPad(dst, t.Hour(), 2)
	dst = append(dst, ':')
	dst = appendPad(dst, t.Minute(), 2)
	dst = append(dst, ':')
	dst = appendPad(dst, t.Second(), 2)
	if frac := t.Nanosecond() / 1e6; frac != 0 {
		dst = append(dst, '.')
		dst = appendPad(dst, frac, 3)
		for dst[len(dst)-1] == '0' {
			dst = dst[:len(dst)-1]
		}
	}
	if bc {
		dst = append(dst, " BC"...)
	}
	return dst
}

// AppendIntervalText prints milliseconds as PostgreSQL prints an interval:
// [N day[s] ][-]HH:MM:SS[.fff].
func AppendIntervalText(dst []byte, ms int64) []byte {
	days := ms / 86400000
	rest := ms % 86400000
	if days != 0 {
		dst = strconv.AppendInt(dst, days, 10)
		if days == 1 || days == -1 {
			dst = append(dst, " day"...)
		} else {
			dst = append(dst, " days"...)
		}
		if rest == 0 {
			return dst
		}
		dst = append(dst, ' ')
	}
	if rest < 0 {
		dst = append(dst, '-')
		rest = -rest
	}
	dst = appendPad(dst, int(rest/3600000), 2)
	dst = append(dst, ':')
	dst = appendPad(dst, int(rest/60000%60), 2)
	dst = append(dst, ':')
	dst = appendPad(dst, int(rest/1000%60), 2)
	if f := int(rest % 1000); f != 0 {
		dst = append(dst, '.')
		dst = appendPad(dst, f, 3)
		for dst[len(dst)-1] == '0' {
			dst = dst[:len(dst)-1]
		}
	}
	return dst
}

func appendPad(dst []byte, n, w int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], int64(n), 10)
	for i := len(s); i < w; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// Timestamps in expressions have PostgreSQL's range, from its Julian day 0 (November 24,
// 4714 BC in the proleptic Gregorian calendar: astronomical year -4713) to 294276 AD (the
// record formats write years 1 through 9999 only: a sink refuses the others as bad rows).
var (
	minTimestampMs = time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxTimestampMs = time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() - 1
)

// checkTimestamp returns v, or an error value when the timestamp is outside PostgreSQL's
// range.
func checkTimestamp(ms int64) Value {
	if ms < minTimestampMs || ms > maxTimestampMs {
		return ErrorValue(CodeDatetimeOverflow, "timestamp out of range")
	}
	return Timestamp(ms)
}
