package sql

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// extractUnit is one EXTRACT / DATE_PART unit: the value as a NUMERIC (PostgreSQL's EXTRACT
// type) computed from epoch milliseconds.
type extractUnit func(ms int64) Value

func intUnit(f func(t time.Time) int) extractUnit {
	return func(ms int64) Value { return Value{K: KindDecimal, I: int64(f(utc(ms)))} }
}

// extractUnitsPG maps unit names (singular and plural, upper case) to their function.
var extractUnitsPG = map[string]extractUnit{}

func init() {
	units := map[string]extractUnit{
		"YEAR": intUnit(func(t time.Time) int {
			if t.Year() <= 0 {
				return t.Year() - 1 // no year 0: 1 BC is -1
			}
			return t.Year()
		}),
		"ISOYEAR": intUnit(func(t time.Time) int { y, _ := t.ISOWeek(); return y }),
		"QUARTER": intUnit(func(t time.Time) int { return (int(t.Month())-1)/3 + 1 }),
		"MONTH":   intUnit(func(t time.Time) int { return int(t.Month()) }),
		"WEEK":    intUnit(func(t time.Time) int { _, w := t.ISOWeek(); return w }),
		"DAY":     intUnit(func(t time.Time) int { return t.Day() }),
		"DOW":     intUnit(func(t time.Time) int { return int(t.Weekday()) }),
		"ISODOW": intUnit(func(t time.Time) int {
			if t.Weekday() == time.Sunday {
				return 7
			}
			return int(t.Weekday())
		}),
		"DOY":        intUnit(func(t time.Time) int { return t.YearDay() }),
		"HOUR":       intUnit(func(t time.Time) int { return t.Hour() }),
		"MINUTE":     intUnit(func(t time.Time) int { return t.Minute() }),
		"DECADE":     intUnit(func(t time.Time) int { return t.Year() / 10 }),
		"CENTURY":    intUnit(func(t time.Time) int { return (t.Year() + 99) / 100 }),
		"MILLENNIUM": intUnit(func(t time.Time) int { return (t.Year() + 999) / 1000 }),
		"SECOND": func(ms int64) Value {
			t := utc(ms)
			return Value{K: KindDecimal, I: int64(t.Second())*1000000 + int64(t.Nanosecond()/1000), Scale: 6}
		},
		"MILLISECOND": func(ms int64) Value {
			t := utc(ms)
			return Value{K: KindDecimal, I: int64(t.Second())*1000000 + int64(t.Nanosecond()/1000), Scale: 3}
		},
		"MICROSECOND": func(ms int64) Value {
			t := utc(ms)
			return Value{K: KindDecimal, I: int64(t.Second())*1000000 + int64(t.Nanosecond()/1000)}
		},
		"EPOCH": func(ms int64) Value { return Value{K: KindDecimal, I: ms * 1000, Scale: 6} },
	}
	for name, f := range units {
		extractUnitsPG[name] = f
		extractUnitsPG[name+"S"] = f
	}
	extractUnitsPG["MILLISECONDS"] = units["MILLISECOND"]
	extractUnitsPG["MICROSECONDS"] = units["MICROSECOND"]
	extractUnitsPG["CENTURIES"] = units["CENTURY"]
	extractUnitsPG["MILLENNIA"] = units["MILLENNIUM"]

	register(
		&FuncDef{Name: "NOW", Aliases: []string{"CURRENT_TIMESTAMP", "LOCALTIMESTAMP", "LOCALTIME", "SYSDATE", "UTC_TIMESTAMP", "TRANSACTION_TIMESTAMP", "STATEMENT_TIMESTAMP", "CLOCK_TIMESTAMP", "PROCTIME"},
			Sig: "NOW()", Group: "time", Volatile: true,
			Doc: "processing time: the wall clock (UTC) when the row is evaluated, so a replayed job sees other values; use the event-time column for reproducible results",
			Check: func(args []Expr) (Type, []Expr, error) {
				return TypeTimestamp, nil, argCount("NOW", args, 0, 1)
			},
			Build: func(*Call, []Evaluator) (Evaluator, error) {
				return func(Row) Value { return Timestamp(time.Now().UnixMilli()) }, nil
			}},
		&FuncDef{Bind: bindExtract, Name: "EXTRACT", Sig: "EXTRACT(unit FROM ts)", Group: "time",
			Doc:   "NUMERIC, as PostgreSQL: YEAR ISOYEAR QUARTER MONTH WEEK (ISO) DAY DOW ISODOW DOY HOUR MINUTE SECOND (with the fraction) MILLISECOND(S) MICROSECOND(S) (seconds included) EPOCH DECADE CENTURY MILLENNIUM; UTC",
			Check: extractCheck("EXTRACT", TypeNumeric),
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				f := extractUnitsPG[c.Args[0].(*Literal).V.S]
				return strict1(args[1], func(v Value) Value { return f(v.I) }), nil
			}},
		&FuncDef{Name: "DATE_PART", Sig: "DATE_PART('unit', ts)", Group: "time", Doc: "EXTRACT as DOUBLE",
			Check: extractCheck("DATE_PART", TypeDouble),
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				f := extractUnitsPG[c.Args[0].(*Literal).V.S]
				return strict1(args[1], func(v Value) Value { return Double(NumericFloat(f(v.I))) }), nil
			}},
		&FuncDef{Name: "DATE_TRUNC", Sig: "DATE_TRUNC('unit', ts)", Group: "time",
			Doc: "ts truncated to MILLISECOND, SECOND, MINUTE, HOUR, DAY, WEEK (Monday), MONTH, QUARTER, YEAR, DECADE, CENTURY or MILLENNIUM; UTC",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("DATE_TRUNC", args, 2, 2); err != nil {
					return TypeNull, nil, err
				}
				l, ok := args[0].(*Literal)
				if !ok || l.V.K != KindVarchar {
					return TypeNull, nil, Errorf(CodeNotSupported, "DATE_TRUNC needs a constant unit such as 'hour'")
				}
				u := strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(l.V.S)), "S")
				if u == "MILLENNIA" {
					u = "MILLENNIUM"
				}
				if dateTrunc(u, 0) == nil {
					return TypeNull, nil, Errorf(CodeInvalidParameter, "unit %s not recognized for DATE_TRUNC", quoteString(l.V.S))
				}
				ts, err := timestampArg("DATE_TRUNC", args, 1)
				if err != nil {
					return TypeNull, nil, err
				}
				return TypeTimestamp, []Expr{NewLiteral(Varchar(u)), ts}, nil
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				u := c.Args[0].(*Literal).V.S
				return strict1(args[1], func(v Value) Value { return *dateTrunc(u, v.I) }), nil
			}},
		&FuncDef{Name: "TO_TIMESTAMP", Sig: "TO_TIMESTAMP(epoch_seconds)", Group: "time",
			Doc: "the TIMESTAMP (UTC) of a Unix time in seconds, rounded to milliseconds (PostgreSQL returns timestamptz); out of range is an error (22008)",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("TO_TIMESTAMP", args, 1, 1); err != nil {
					return TypeNull, nil, err
				}
				a, err := doubleArg("TO_TIMESTAMP", args, 0)
				return TypeTimestamp, []Expr{a}, err
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				return strict1(args[0], func(v Value) Value {
					if math.IsNaN(v.F()) || math.IsInf(v.F(), 0) || math.Abs(v.F()) > 1e13 {
						return ErrorValue(CodeDatetimeOverflow, "timestamp out of range")
					}
					return checkTimestamp(int64(math.Round(v.F() * 1000)))
				}), nil
			}},
		&FuncDef{Name: "TO_CHAR", Sig: "TO_CHAR(ts, format)", Group: "time",
			Doc: "PostgreSQL template patterns: YYYY YYY YY Y IYYY MM DD DDD D ID HH HH12 HH24 MI SS MS US AM PM A.M. P.M. Month MONTH month Mon MON mon Day DAY day Dy DY dy Q WW IW J, FM prefix, \"quoted text\"; UTC",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("TO_CHAR", args, 2, 2); err != nil {
					return TypeNull, nil, err
				}
				ts, err := timestampArg("TO_CHAR", args, 0)
				if err != nil {
					return TypeNull, nil, err
				}
				f, err := textArg("TO_CHAR", args, 1)
				return TypeVarchar, []Expr{ts, f}, err
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				if l, ok := c.Args[1].(*Literal); ok && l.V.K == KindVarchar {
					tpl := compileToChar(l.V.S)
					return strict1(args[0], func(v Value) Value { return Varchar(tpl(v.I)) }), nil
				}
				return strict2(args[0], args[1], func(x, f Value) Value { return Varchar(compileToChar(f.S)(x.I)) }), nil
			}},
		&FuncDef{Name: "DATE_FORMAT", Sig: "DATE_FORMAT(ts, format)", Group: "time",
			Doc: "MySQL specifiers `%Y %y %m %c %d %e %H %k %h %I %l %i %s %S %f %p %M %b %W %a %j %T %r %D %w %v %x %%`; other `%c` print `c`; UTC",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("DATE_FORMAT", args, 2, 2); err != nil {
					return TypeNull, nil, err
				}
				ts, err := timestampArg("DATE_FORMAT", args, 0)
				if err != nil {
					return TypeNull, nil, err
				}
				f, err := textArg("DATE_FORMAT", args, 1)
				return TypeVarchar, []Expr{ts, f}, err
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				if l, ok := c.Args[1].(*Literal); ok && l.V.K == KindVarchar {
					layout := memoDateFormat(compileDateFormat(l.V.S))
					return strict1(args[0], func(v Value) Value { return Varchar(layout(v.I)) }), nil
				}
				return strict2(args[0], args[1], func(x, f Value) Value {
					layout, _ := compileDateFormat(f.S)
					return Varchar(layout(x.I))
				}), nil
			}},
	)
}

func extractCheck(name string, result Type) func(args []Expr) (Type, []Expr, error) {
	return func(args []Expr) (Type, []Expr, error) {
		if err := argCount(name, args, 2, 2); err != nil {
			return TypeNull, nil, err
		}
		l, ok := args[0].(*Literal)
		if !ok || l.V.K != KindVarchar {
			return TypeNull, nil, typeMismatch("%s needs a constant unit", name)
		}
		u := strings.ToUpper(strings.TrimSpace(l.V.S))
		if _, ok := extractUnitsPG[u]; !ok {
			return TypeNull, nil, Errorf(CodeInvalidParameter, "unit %s not recognized for %s (use YEAR, QUARTER, MONTH, WEEK, DAY, DOW, ISODOW, DOY, HOUR, MINUTE, SECOND, MILLISECOND, MICROSECOND, EPOCH, ISOYEAR, DECADE, CENTURY, MILLENNIUM)", quoteString(l.V.S), name)
		}
		ts, err := timestampArg(name, args, 1)
		if err != nil {
			return TypeNull, nil, err
		}
		return result, []Expr{&Literal{V: Varchar(u), T: TypeVarchar}, ts}, nil
	}
}

// dateTrunc truncates ms to unit, or returns nil for an unknown unit.
func dateTrunc(unit string, ms int64) *Value {
	t := utc(ms)
	y, mo, d := t.Date()
	var out time.Time
	switch unit {
	case "MICROSECOND", "MILLISECOND":
		out = t
	case "SECOND":
		out = t.Truncate(time.Second)
	case "MINUTE":
		out = time.Date(y, mo, d, t.Hour(), t.Minute(), 0, 0, time.UTC)
	case "HOUR":
		out = time.Date(y, mo, d, t.Hour(), 0, 0, 0, time.UTC)
	case "DAY":
		out = time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
	case "WEEK":
		wd := (int(t.Weekday()) + 6) % 7
		out = time.Date(y, mo, d-wd, 0, 0, 0, 0, time.UTC)
	case "MONTH":
		out = time.Date(y, mo, 1, 0, 0, 0, 0, time.UTC)
	case "QUARTER":
		out = time.Date(y, (mo-1)/3*3+1, 1, 0, 0, 0, 0, time.UTC)
	case "YEAR":
		out = time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
	case "DECADE":
		out = time.Date(y/10*10, 1, 1, 0, 0, 0, 0, time.UTC)
	case "CENTURY":
		out = time.Date((y-1)/100*100+1, 1, 1, 0, 0, 0, 0, time.UTC)
	case "MILLENNIUM":
		out = time.Date((y-1)/1000*1000+1, 1, 1, 0, 0, 0, 0, time.UTC)
	default:
		return nil
	}
	v := checkTimestamp(out.UnixMilli())
	return &v
}

// compileToChar compiles a PostgreSQL TO_CHAR template for timestamps.
func compileToChar(format string) func(ms int64) string {
	type part struct {
		lit string
		pat string
		fm  bool
	}
	pats := []string{"A.M.", "P.M.", "a.m.", "p.m.", "HH24", "HH12", "IYYY", "YYYY", "MONTH", "Month", "month", "DDD",
		"YYY", "IYY", "MON", "Mon", "mon", "DAY", "Day", "day", "HH", "MI", "SS", "MS", "US", "AM", "PM", "am", "pm",
		"YY", "IY", "MM", "DD", "DY", "Dy", "dy", "ID", "WW", "IW", "TZ", "tz", "Y", "I", "D", "Q", "J"}
	var parts []part
	for i := 0; i < len(format); {
		if format[i] == '"' {
			j := i + 1
			var b strings.Builder
			for j < len(format) && format[j] != '"' {
				if format[j] == '\\' && j+1 < len(format) {
					j++
				}
				b.WriteByte(format[j])
				j++
			}
			parts = append(parts, part{lit: b.String()})
			i = j + 1
			continue
		}
		fm := false
		k := i
		if strings.HasPrefix(format[k:], "FM") || strings.HasPrefix(format[k:], "fm") {
			fm = true
			k += 2
		}
		matched := ""
		for _, p := range pats {
			if strings.HasPrefix(format[k:], p) {
				matched = p
				break
			}
		}
		if matched == "" {
			if fm {
				i = k
				continue
			}
			parts = append(parts, part{lit: format[i : i+1]})
			i++
			continue
		}
		parts = append(parts, part{pat: matched, fm: fm})
		i = k + len(matched)
	}
	return func(ms int64) string {
		t := utc(ms)
		var b []byte
		num := func(n, w int, fm bool) {
			if fm {
				w = 1
			}
			b = appendPad(b, n, w)
		}
		word := func(s string, fm bool) {
			b = append(b, s...)
			if !fm {
				for i := len(s); i < 9; i++ {
					b = append(b, ' ')
				}
			}
		}
		year := t.Year()
		if year <= 0 {
			year = 1 - year // 1 BC is year 0 in Go
		}
		for _, p := range parts {
			if p.pat == "" {
				b = append(b, p.lit...)
				continue
			}
			h12 := t.Hour() % 12
			if h12 == 0 {
				h12 = 12
			}
			iy, iw := t.ISOWeek()
			switch p.pat {
			case "YYYY":
				num(year, 4, p.fm)
			case "YYY":
				num(year%1000, 3, p.fm)
			case "YY":
				num(year%100, 2, p.fm)
			case "Y":
				num(year%10, 1, p.fm)
			case "IYYY":
				num(iy, 4, p.fm)
			case "IYY":
				num(iy%1000, 3, p.fm)
			case "IY":
				num(iy%100, 2, p.fm)
			case "I":
				num(iy%10, 1, p.fm)
			case "MM":
				num(int(t.Month()), 2, p.fm)
			case "DD":
				num(t.Day(), 2, p.fm)
			case "DDD":
				num(t.YearDay(), 3, p.fm)
			case "D":
				num(int(t.Weekday())+1, 1, p.fm)
			case "ID":
				num((int(t.Weekday())+6)%7+1, 1, p.fm)
			case "HH", "HH12":
				num(h12, 2, p.fm)
			case "HH24":
				num(t.Hour(), 2, p.fm)
			case "MI":
				num(t.Minute(), 2, p.fm)
			case "SS":
				num(t.Second(), 2, p.fm)
			case "MS":
				num(t.Nanosecond()/1e6, 3, p.fm)
			case "US":
				num(t.Nanosecond()/1e3, 6, p.fm)
			case "AM", "PM":
				b = append(b, map[bool]string{true: "AM", false: "PM"}[t.Hour() < 12]...)
			case "am", "pm":
				b = append(b, map[bool]string{true: "am", false: "pm"}[t.Hour() < 12]...)
			case "A.M.", "P.M.":
				b = append(b, map[bool]string{true: "A.M.", false: "P.M."}[t.Hour() < 12]...)
			case "a.m.", "p.m.":
				b = append(b, map[bool]string{true: "a.m.", false: "p.m."}[t.Hour() < 12]...)
			case "MONTH":
				word(strings.ToUpper(t.Month().String()), p.fm)
			case "Month":
				word(t.Month().String(), p.fm)
			case "month":
				word(strings.ToLower(t.Month().String()), p.fm)
			case "MON":
				b = append(b, strings.ToUpper(t.Month().String()[:3])...)
			case "Mon":
				b = append(b, t.Month().String()[:3]...)
			case "mon":
				b = append(b, strings.ToLower(t.Month().String()[:3])...)
			case "DAY":
				word(strings.ToUpper(t.Weekday().String()), p.fm)
			case "Day":
				word(t.Weekday().String(), p.fm)
			case "day":
				word(strings.ToLower(t.Weekday().String()), p.fm)
			case "DY":
				b = append(b, strings.ToUpper(t.Weekday().String()[:3])...)
			case "Dy":
				b = append(b, t.Weekday().String()[:3]...)
			case "dy":
				b = append(b, strings.ToLower(t.Weekday().String()[:3])...)
			case "Q":
				num((int(t.Month())-1)/3+1, 1, p.fm)
			case "WW":
				num((t.YearDay()-1)/7+1, 2, p.fm)
			case "IW":
				num(iw, 2, p.fm)
			case "J":
				b = strconv.AppendInt(b, floorDiv(ms, 86400000)+2440588, 10)
			case "TZ", "tz":
			}
		}
		return string(b)
	}
}
