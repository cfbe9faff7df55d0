package sql

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

func utc(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// compileDateFormat compiles a MySQL DATE_FORMAT format once. Supported specifiers:
// %Y %y %m %c %d %e %H %k %h %I %l %i %s %S %f %p %M %b %W %a %j %T %r %D %w %v %x %%;
// any other %c yields c. unit is the span of time (ms, from the epoch) within which the
// output stays the same: the finest of the format's fields, a day for fields of days and
// coarser (UTC has no daylight saving); 1 with microseconds.
func compileDateFormat(format string) (f func(ms int64) string, unit int64) {
	type part struct {
		lit  string
		spec byte
	}
	var parts []part
	var lit strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			lit.WriteByte(format[i])
			continue
		}
		i++
		switch c := format[i]; c {
		case 'Y', 'y', 'm', 'c', 'd', 'e', 'H', 'k', 'h', 'I', 'l', 'i', 's', 'S', 'f', 'p', 'M', 'b', 'W', 'a', 'j', 'T', 'r', 'D', 'w', 'v', 'x':
			if lit.Len() > 0 {
				parts = append(parts, part{lit: lit.String()})
				lit.Reset()
			}
			parts = append(parts, part{spec: c})
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		parts = append(parts, part{lit: lit.String()})
	}
	unit = 86_400_000
	for _, p := range parts {
		switch p.spec {
		case 'f':
			unit = 1
		case 's', 'S', 'T', 'r':
			unit = min(unit, 1_000)
		case 'i':
			unit = min(unit, 60_000)
		case 'H', 'k', 'h', 'I', 'l', 'p':
			unit = min(unit, 3_600_000)
		}
	}
	return func(ms int64) string {
		t := utc(ms)
		b := make([]byte, 0, 32)
		pad := func(n, w int) {
			s := strconv.Itoa(n)
			for i := len(s); i < w; i++ {
				b = append(b, '0')
			}
			b = append(b, s...)
		}
		h12 := func() int {
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			return h
		}
		ampm := func() string {
			if t.Hour() < 12 {
				return "AM"
			}
			return "PM"
		}
		for _, p := range parts {
			if p.spec == 0 {
				b = append(b, p.lit...)
				continue
			}
			switch p.spec {
			case 'Y':
				pad(t.Year(), 4)
			case 'y':
				pad(t.Year()%100, 2)
			case 'm':
				pad(int(t.Month()), 2)
			case 'c':
				pad(int(t.Month()), 1)
			case 'd':
				pad(t.Day(), 2)
			case 'e':
				pad(t.Day(), 1)
			case 'H':
				pad(t.Hour(), 2)
			case 'k':
				pad(t.Hour(), 1)
			case 'h', 'I':
				pad(h12(), 2)
			case 'l':
				pad(h12(), 1)
			case 'i':
				pad(t.Minute(), 2)
			case 's', 'S':
				pad(t.Second(), 2)
			case 'f':
				pad(t.Nanosecond()/1000, 6)
			case 'p':
				b = append(b, ampm()...)
			case 'M':
				b = append(b, t.Month().String()...)
			case 'b':
				b = append(b, t.Month().String()[:3]...)
			case 'W':
				b = append(b, t.Weekday().String()...)
			case 'a':
				b = append(b, t.Weekday().String()[:3]...)
			case 'j':
				pad(t.YearDay(), 3)
			case 'T':
				pad(t.Hour(), 2)
				b = append(b, ':')
				pad(t.Minute(), 2)
				b = append(b, ':')
				pad(t.Second(), 2)
			case 'r':
				pad(h12(), 2)
				b = append(b, ':')
				pad(t.Minute(), 2)
				b = append(b, ':')
				pad(t.Second(), 2)
				b = append(b, ' ')
				b = append(b, ampm()...)
			case 'D':
				d := t.Day()
				pad(d, 1)
				switch {
				case d >= 11 && d <= 13:
					b = append(b, "th"...)
				case d%10 == 1:
					b = append(b, "st"...)
				case d%10 == 2:
					b = append(b, "nd"...)
				case d%10 == 3:
					b = append(b, "rd"...)
				default:
					b = append(b, "th"...)
				}
			case 'w':
				pad(int(t.Weekday()), 1)
			case 'v':
				_, w := t.ISOWeek()
				pad(w, 2)
			case 'x':
				y, _ := t.ISOWeek()
				pad(y, 4)
			}
		}
		return string(b)
	}, unit
}

// memoDateFormat is f remembering its last result for the unit of time it falls in:
// timestamps of a stream come in order, and a day's or a minute's rows format alike
// (Nexmark q16 formats every bid's day and minute).
func memoDateFormat(f func(int64) string, unit int64) func(int64) string {
	if unit <= 1 {
		return f
	}
	var last lastResult[int64, string]
	return func(ms int64) string {
		k := floorDiv(ms, unit)
		if s, ok := last.get(k); ok {
			return s
		}
		s := f(ms)
		last.put(k, s)
		return s
	}
}

// lastResult is the last result an evaluator computed and the input it was for, for
// evaluators that see one input row after row; safe for concurrent use.
type lastResult[K comparable, V any] struct {
	p atomic.Pointer[keyedResult[K, V]]
}

type keyedResult[K comparable, V any] struct {
	key K
	val V
}

func (l *lastResult[K, V]) get(k K) (v V, ok bool) {
	if r := l.p.Load(); r != nil && r.key == k {
		return r.val, true
	}
	return v, false
}

func (l *lastResult[K, V]) put(k K, v V) { l.p.Store(&keyedResult[K, V]{key: k, val: v}) }

// jsonStep is one step of a JSON path: an object key or an array index.
type jsonStep struct {
	key     string
	index   int  // -1 for a key step
	isIndex bool // an index step that may be negative (from the end)
}

// parseJSONPath parses the MySQL path subset $, .key, ."quoted key", [n].
func parseJSONPath(p string) ([]jsonStep, error) {
	bad := func(why string) ([]jsonStep, error) {
		return nil, Errorf(CodeInvalidValue, "invalid JSON path %s: %s", quoteString(p), why)
	}
	s := strings.TrimSpace(p)
	if !strings.HasPrefix(s, "$") {
		return bad("it must start with $")
	}
	s = s[1:]
	var steps []jsonStep
	for len(s) > 0 {
		switch s[0] {
		case '.':
			s = s[1:]
			if strings.HasPrefix(s, `"`) {
				end := strings.IndexByte(s[1:], '"')
				if end < 0 {
					return bad("unterminated quoted key")
				}
				steps = append(steps, jsonStep{key: s[1 : 1+end], index: -1})
				s = s[end+2:]
				continue
			}
			n := 0
			for n < len(s) && s[n] != '.' && s[n] != '[' {
				n++
			}
			if n == 0 {
				return bad("empty key")
			}
			if s[:n] == "*" {
				return bad("wildcards are not supported")
			}
			steps = append(steps, jsonStep{key: s[:n], index: -1})
			s = s[n:]
		case '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return bad("unterminated [")
			}
			i, err := strconv.Atoi(strings.TrimSpace(s[1:end]))
			if err != nil || i < 0 {
				return bad("array index must be a non-negative integer")
			}
			steps = append(steps, jsonStep{index: i})
			s = s[end+1:]
		default:
			return bad("expected . or [")
		}
	}
	return steps, nil
}

// jsonExtract returns the raw JSON text at path inside doc, without decoding the rest.
func jsonExtract(doc string, path []jsonStep) (string, bool) {
	i := skipWS(doc, 0)
	for _, st := range path {
		if i >= len(doc) {
			return "", false
		}
		if st.index < 0 {
			if doc[i] != '{' {
				return "", false
			}
			i = skipWS(doc, i+1)
			found := false
			for i < len(doc) && doc[i] != '}' {
				kEnd, ok := skipString(doc, i)
				if !ok {
					return "", false
				}
				key := doc[i+1 : kEnd-1]
				match := key == st.key
				if !match && strings.IndexByte(key, '\\') >= 0 {
					var k string
					if json.Unmarshal([]byte(doc[i:kEnd]), &k) == nil {
						match = k == st.key
					}
				}
				i = skipWS(doc, kEnd)
				if i >= len(doc) || doc[i] != ':' {
					return "", false
				}
				i = skipWS(doc, i+1)
				if match {
					found = true
					break
				}
				end, ok := skipValue(doc, i)
				if !ok {
					return "", false
				}
				i = skipWS(doc, end)
				if i < len(doc) && doc[i] == ',' {
					i = skipWS(doc, i+1)
				}
			}
			if !found {
				return "", false
			}
		} else {
			if doc[i] != '[' {
				return "", false
			}
			i = skipWS(doc, i+1)
			for n := 0; ; n++ {
				if i >= len(doc) || doc[i] == ']' {
					return "", false
				}
				if n == st.index {
					break
				}
				end, ok := skipValue(doc, i)
				if !ok {
					return "", false
				}
				i = skipWS(doc, end)
				if i < len(doc) && doc[i] == ',' {
					i = skipWS(doc, i+1)
				}
			}
		}
	}
	end, ok := skipValue(doc, i)
	if !ok {
		return "", false
	}
	return doc[i:end], true
}

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the JSON string starting at s[i] == '"'.
func skipString(s string, i int) (int, bool) {
	if i >= len(s) || s[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index after the JSON value starting at s[i].
func skipValue(s string, i int) (int, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				e, ok := skipString(s, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\t' && s[j] != '\n' && s[j] != '\r' {
		j++
	}
	if j == i {
		return 0, false
	}
	return j, true
}

// jsonUnquote turns a JSON string into its text; other JSON values are returned as their
// text, and JSON null gives ok=false (SQL NULL).
func jsonUnquote(s string) (string, bool) {
	t := strings.TrimSpace(s)
	if t == "null" {
		return "", false
	}
	if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' {
		if strings.IndexByte(t, '\\') < 0 {
			return t[1 : len(t)-1], true
		}
		var out string
		if err := json.Unmarshal([]byte(t), &out); err == nil {
			return out, true
		}
	}
	return s, true
}
