package sql

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxStringBytes bounds strings that functions build (REPEAT, LPAD): PostgreSQL's limit is
// 1 GB; rsql's rows live in memory, so it stops at 64 MiB (54000).
const maxStringBytes = 64 << 20

const codeProgramLimit = "54000"

func textFn(name, sig, doc string, aliases []string, min, max int, build func(c *Call, args []Evaluator) (Evaluator, error), result Type, argKinds ...byte) *FuncDef {
	return &FuncDef{Name: name, Aliases: aliases, Sig: sig, Doc: doc, Group: "string", Build: build,
		Check: func(args []Expr) (Type, []Expr, error) {
			if err := argCount(name, args, min, max); err != nil {
				return TypeNull, nil, err
			}
			out := make([]Expr, len(args))
			for i := range args {
				k := byte('s')
				if i < len(argKinds) {
					k = argKinds[i]
				} else if len(argKinds) > 0 {
					k = argKinds[len(argKinds)-1]
				}
				var err error
				switch k {
				case 's':
					out[i], err = textArg(name, args, i)
				case 'i':
					out[i], err = intArg(name, args, i)
				}
				if err != nil {
					return TypeNull, nil, err
				}
			}
			return result, out, nil
		}}
}

func str1(f func(string) string) func(c *Call, args []Evaluator) (Evaluator, error) {
	return func(c *Call, args []Evaluator) (Evaluator, error) {
		return strict1(args[0], func(v Value) Value { return Varchar(f(v.S)) }), nil
	}
}

func init() {
	register(
		textFn("LOWER", "LOWER(s)", "lower case (Unicode)", []string{"LCASE"}, 1, 1, str1(strings.ToLower), TypeVarchar),
		textFn("UPPER", "UPPER(s)", "upper case (Unicode)", []string{"UCASE"}, 1, 1, str1(strings.ToUpper), TypeVarchar),
		textFn("REVERSE", "REVERSE(s)", "the characters in reverse order", nil, 1, 1, str1(reverseString), TypeVarchar),
		textFn("INITCAP", "INITCAP(s)", "first letter of each word upper case, the rest lower; words are runs of letters and digits", nil, 1, 1, str1(initcap), TypeVarchar),
		textFn("MD5", "MD5(s)", "hex MD5 digest of the UTF-8 bytes", nil, 1, 1, str1(func(s string) string {
			h := md5.Sum([]byte(s))
			return hex.EncodeToString(h[:])
		}), TypeVarchar),
		textFn("SHA256", "SHA256(s)", "hex SHA-256 digest of the UTF-8 bytes (PostgreSQL's takes and returns bytea: `encode(sha256(s::bytea), 'hex')`)", nil, 1, 1, str1(func(s string) string {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		}), TypeVarchar),
		textFn("LENGTH", "LENGTH(s)", "number of characters", []string{"CHAR_LENGTH", "CHARACTER_LENGTH"}, 1, 1, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict1(args[0], func(v Value) Value { return Int(int64(utf8.RuneCountInString(v.S))) }), nil
		}, TypeInt),
		textFn("OCTET_LENGTH", "OCTET_LENGTH(s)", "number of bytes (UTF-8)", nil, 1, 1, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict1(args[0], func(v Value) Value { return Int(int64(len(v.S))) }), nil
		}, TypeInt),
		textFn("ASCII", "ASCII(s)", "code point of the first character (0 for '')", nil, 1, 1, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict1(args[0], func(v Value) Value {
				r, _ := utf8.DecodeRuneInString(v.S)
				if v.S == "" {
					r = 0
				}
				return Int(int64(r))
			}), nil
		}, TypeInt),
		textFn("CHR", "CHR(n)", "the character with code point n; 0 or an invalid code point is an error (54000)", nil, 1, 1, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict1(args[0], func(v Value) Value {
				switch {
				case v.I == 0:
					return ErrorValue(codeProgramLimit, "null character not permitted")
				case v.I < 0 || v.I > unicode.MaxRune || !utf8.ValidRune(rune(v.I)):
					return errorf(codeProgramLimit, "requested character too large for encoding: %d", v.I)
				}
				return Varchar(string(rune(v.I)))
			}), nil
		}, TypeVarchar, 'i'),
		textFn("STRPOS", "STRPOS(s, sub), POSITION(sub IN s)", "1-based character position of the first sub in s, 0 if none; `POSITION(sub IN s)` is the same", nil, 2, 2, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict2(args[0], args[1], func(x, y Value) Value {
				i := strings.Index(x.S, y.S)
				if i < 0 {
					return Int(0)
				}
				return Int(int64(utf8.RuneCountInString(x.S[:i])) + 1)
			}), nil
		}, TypeInt),
		textFn("STARTS_WITH", "STARTS_WITH(s, prefix)", "s begins with prefix", nil, 2, 2, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict2(args[0], args[1], func(x, y Value) Value { return Bool(strings.HasPrefix(x.S, y.S)) }), nil
		}, TypeBool),
		textFn("REPLACE", "REPLACE(s, from, to)", "every occurrence of from replaced by to (an empty from changes nothing)", nil, 3, 3, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strictN(args, func(vs []Value) Value {
				if vs[1].S == "" {
					return vs[0]
				}
				return Varchar(strings.ReplaceAll(vs[0].S, vs[1].S, vs[2].S))
			}), nil
		}, TypeVarchar),
		textFn("LEFT", "LEFT(s, n)", "the first n characters; n < 0: all but the last -n", nil, 2, 2, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict2(args[0], args[1], func(x, y Value) Value { return Varchar(leftRight(x.S, y.I, true)) }), nil
		}, TypeVarchar, 's', 'i'),
		textFn("RIGHT", "RIGHT(s, n)", "the last n characters; n < 0: all but the first -n", nil, 2, 2, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict2(args[0], args[1], func(x, y Value) Value { return Varchar(leftRight(x.S, y.I, false)) }), nil
		}, TypeVarchar, 's', 'i'),
		textFn("LPAD", "LPAD(s, n [, fill])", "s padded on the left with fill (default a space) to n characters, or cut to n", nil, 2, 3, buildPad(true), TypeVarchar, 's', 'i', 's'),
		textFn("RPAD", "RPAD(s, n [, fill])", "s padded on the right to n characters, or cut to n", nil, 2, 3, buildPad(false), TypeVarchar, 's', 'i', 's'),
		textFn("REPEAT", "REPEAT(s, n)", "s repeated n times ('' for n ≤ 0); results over 64 MiB are an error (54000)", nil, 2, 2, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strict2(args[0], args[1], func(x, y Value) Value {
				if y.I <= 0 || x.S == "" {
					return Varchar("")
				}
				if y.I > maxStringBytes/int64(len(x.S)) {
					return ErrorValue(codeProgramLimit, "requested length too large")
				}
				return Varchar(strings.Repeat(x.S, int(y.I)))
			}), nil
		}, TypeVarchar, 's', 'i'),
		textFn("SPLIT_PART", "SPLIT_PART(s, delimiter, n)", "the n-th field of s split on delimiter (n < 0 counts from the end; n = 0 is an error, 22023)", nil, 3, 3, func(c *Call, args []Evaluator) (Evaluator, error) {
			return strictN(args, func(vs []Value) Value { return splitPart(vs[0].S, vs[1].S, vs[2].I) }), nil
		}, TypeVarchar, 's', 's', 'i'),
		withBind(textFn("TRIM", "TRIM([BOTH | LEADING | TRAILING] [chars] FROM s), TRIM(s)", "removes the longest run of any of chars (default a space) from the ends", []string{"BTRIM"}, 1, 2, buildTrim(true, true), TypeVarchar), bindTrim),
		textFn("LTRIM", "LTRIM(s [, chars])", "TRIM(LEADING ...)", nil, 1, 2, buildTrim(true, false), TypeVarchar),
		textFn("RTRIM", "RTRIM(s [, chars])", "TRIM(TRAILING ...)", nil, 1, 2, buildTrim(false, true), TypeVarchar),
		textFn("REGEXP_REPLACE", "REGEXP_REPLACE(s, pattern, replacement [, flags])", "replaces the first match (every match with flag `g`; `i` ignores case); `\\1`..`\\9` and `\\&` in replacement; Go RE2 syntax (no back-references in patterns; a bad pattern is 2201B)", nil, 3, 4, buildRegexpReplace, TypeVarchar),
		textFn("REGEXP_MATCH", "REGEXP_MATCH(s, pattern [, flags])", "the first match's capture groups (the whole match without groups) as the text of a PostgreSQL array, `{a,b}`; NULL when nothing matches", nil, 2, 3, buildRegexpMatch, TypeVarchar),
		&FuncDef{Nulls: NullConsumes, Bind: bindPipes, Name: "CONCAT", Sig: "CONCAT(a, b, ...)", Group: "string", Doc: "any types as their text output (booleans t/f); NULL arguments are skipped",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("CONCAT", args, 1, -1); err != nil {
					return TypeNull, nil, err
				}
				return TypeVarchar, args, nil
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				return func(r Row) Value {
					var buf [64]byte
					b := buf[:0]
					for _, f := range args {
						v := f(r)
						if v.K == KindNull {
							if v.S != "" {
								return v
							}
							continue
						}
						b = AppendText(b, v)
					}
					return Varchar(string(b))
				}, nil
			}},
		&FuncDef{Nulls: NullConsumes, Name: "CONCAT_WS", Sig: "CONCAT_WS(sep, a, b, ...)", Group: "string", Doc: "CONCAT with sep between the non-NULL arguments",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("CONCAT_WS", args, 2, -1); err != nil {
					return TypeNull, nil, err
				}
				a0, err := textArg("CONCAT_WS", args, 0)
				if err != nil {
					return TypeNull, nil, err
				}
				return TypeVarchar, append([]Expr{a0}, args[1:]...), nil
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				return func(r Row) Value {
					sep := args[0](r)
					if sep.K == KindNull {
						return sep
					}
					var b []byte
					n := 0
					for _, f := range args[1:] {
						v := f(r)
						if v.K == KindNull {
							if v.S != "" {
								return v
							}
							continue
						}
						if n > 0 {
							b = append(b, sep.S...)
						}
						b = AppendText(b, v)
						n++
					}
					return Varchar(string(b))
				}, nil
			}},
		&FuncDef{Name: "SUBSTRING", Aliases: []string{"SUBSTR"}, Sig: "SUBSTRING(s, start [, count]), SUBSTRING(s FROM start FOR count)", Group: "string",
			Doc: "characters start .. start+count-1 (1-based; a start before 1 counts from the virtual position, as in PostgreSQL); a negative count is an error (22011)",
			Check: func(args []Expr) (Type, []Expr, error) {
				if err := argCount("SUBSTRING", args, 2, 3); err != nil {
					return TypeNull, nil, err
				}
				out := make([]Expr, len(args))
				var err error
				if out[0], err = textArg("SUBSTRING", args, 0); err != nil {
					return TypeNull, nil, err
				}
				for i := 1; i < len(args); i++ {
					if out[i], err = intArg("SUBSTRING", args, i); err != nil {
						return TypeNull, nil, err
					}
				}
				return TypeVarchar, out, nil
			},
			Build: func(c *Call, args []Evaluator) (Evaluator, error) {
				if len(args) == 2 {
					return strict2(args[0], args[1], func(x, y Value) Value { return substringPG(x.S, y.I, -1, false) }), nil
				}
				return strictN(args, func(vs []Value) Value { return substringPG(vs[0].S, vs[1].I, vs[2].I, true) }), nil
			}},
	)
}

func reverseString(s string) string {
	rs := []rune(s)
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return string(rs)
}

func initcap(s string) string {
	var b strings.Builder
	inWord := false
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if inWord {
				b.WriteRune(unicode.ToLower(r))
			} else {
				b.WriteRune(unicode.ToUpper(r))
			}
			inWord = true
		} else {
			b.WriteRune(r)
			inWord = false
		}
	}
	return b.String()
}

func leftRight(s string, n int64, left bool) string {
	count := int64(utf8.RuneCountInString(s))
	var k int64 // characters kept
	if n >= 0 {
		k = min(n, count)
	} else {
		k = max(count+n, 0)
	}
	if left {
		return s[:byteOffset(s, k)]
	}
	return s[byteOffset(s, count-k):]
}

func buildPad(left bool) func(c *Call, args []Evaluator) (Evaluator, error) {
	return func(c *Call, args []Evaluator) (Evaluator, error) {
		if len(args) == 2 {
			sp := func(Row) Value { return Varchar(" ") }
			args = append(args, sp)
		}
		return strictN(args, func(vs []Value) Value {
			s, n, fill := vs[0].S, vs[1].I, vs[2].S
			if n <= 0 {
				return Varchar("")
			}
			if n*4 > maxStringBytes {
				return ErrorValue(codeProgramLimit, "requested length too large")
			}
			count := int64(utf8.RuneCountInString(s))
			if count >= n {
				return Varchar(s[:byteOffset(s, n)])
			}
			if fill == "" {
				return Varchar(s)
			}
			fr := []rune(fill)
			pad := make([]rune, 0, n-count)
			for i := int64(0); i < n-count; i++ {
				pad = append(pad, fr[int(i)%len(fr)])
			}
			if left {
				return Varchar(string(pad) + s)
			}
			return Varchar(s + string(pad))
		}), nil
	}
}

func splitPart(s, delim string, n int64) Value {
	if n == 0 {
		return ErrorValue(CodeInvalidParameter, "field position must not be zero")
	}
	var parts []string
	if delim == "" {
		if s == "" {
			return Varchar("")
		}
		parts = []string{s}
	} else {
		parts = strings.Split(s, delim)
	}
	if s == "" {
		return Varchar("")
	}
	if n < 0 {
		n = int64(len(parts)) + n + 1
		if n < 1 {
			return Varchar("")
		}
	}
	if n > int64(len(parts)) {
		return Varchar("")
	}
	return Varchar(parts[n-1])
}

func buildTrim(left, right bool) func(c *Call, args []Evaluator) (Evaluator, error) {
	return func(c *Call, args []Evaluator) (Evaluator, error) {
		if len(args) == 1 {
			return strict1(args[0], func(v Value) Value { return Varchar(trimChars(v.S, " ", left, right)) }), nil
		}
		return strict2(args[0], args[1], func(x, y Value) Value { return Varchar(trimChars(x.S, y.S, left, right)) }), nil
	}
}

// trimChars removes the longest runs of characters in set from the start and/or end of s
// (PostgreSQL's btrim/ltrim/rtrim).
func trimChars(s, set string, left, right bool) string {
	if set == "" {
		return s
	}
	if left {
		s = strings.TrimLeft(s, set)
	}
	if right {
		s = strings.TrimRight(s, set)
	}
	return s
}

// substringPG is PostgreSQL's substring(s, start, count): characters from start to
// start+count-1 that exist; count < 0 is an error when given.
func substringPG(s string, start, count int64, hasCount bool) Value {
	if hasCount && count < 0 {
		return ErrorValue(CodeSubstringError, "negative substring length not allowed")
	}
	n := int64(utf8.RuneCountInString(s))
	first := max(start, 1)
	last := n // inclusive
	if hasCount {
		end := start + count - 1
		if count > 0 && end < start { // overflow
			end = n
		}
		last = min(end, n)
	}
	if first > last || first > n {
		return Varchar("")
	}
	b := byteOffset(s, first-1)
	e := b + byteOffset(s[b:], last-first+1)
	return Varchar(s[b:e])
}

// compileRegexp compiles a PostgreSQL-style pattern with flags (i: ignore case, g: global
// — returned separately).
func compileRegexp(pat, flags string) (*regexp.Regexp, bool, *Error) {
	global := false
	prefix := ""
	for _, f := range flags {
		switch f {
		case 'g':
			global = true
		case 'i':
			prefix = "(?i)"
		case 'c':
		default:
			return nil, false, Errorf(CodeInvalidParameter, "invalid regular expression option: %q", string(f))
		}
	}
	re, err := regexp.Compile(prefix + pat)
	if err != nil {
		return nil, false, Errorf(CodeInvalidRegex, "invalid regular expression: %v", err)
	}
	return re, global, nil
}

// regexpArgs returns how to get a call's compiled pattern: compiled once at build time
// when the pattern and flags are constants, else per row.
func regexpArgs(c *Call, args []Evaluator, patIdx int) func(r Row, vs []Value) (*regexp.Regexp, bool, Value) {
	flagIdx := patIdx + 1
	if c.Func == "REGEXP_REPLACE" {
		flagIdx = patIdx + 2
	}
	perRow := func(r Row, vs []Value) (*regexp.Regexp, bool, Value) {
		flags := ""
		if len(vs) > flagIdx {
			flags = vs[flagIdx].S
		}
		re, g, err := compileRegexp(vs[patIdx].S, flags)
		if err != nil {
			return nil, false, errValue(err)
		}
		return re, g, Null
	}
	if !IsConstant(c.Args[patIdx]) || len(c.Args) > flagIdx && !IsConstant(c.Args[flagIdx]) {
		return perRow
	}
	vs := make([]Value, len(args))
	vs[patIdx] = args[patIdx](nil)
	if len(args) > flagIdx {
		vs[flagIdx] = args[flagIdx](nil)
	}
	if vs[patIdx].K == KindNull || len(args) > flagIdx && vs[flagIdx].K == KindNull {
		return perRow
	}
	re, g, ev := perRow(nil, vs)
	return func(Row, []Value) (*regexp.Regexp, bool, Value) { return re, g, ev }
}

func buildRegexpReplace(c *Call, args []Evaluator) (Evaluator, error) {
	get := regexpArgs(c, args, 1)
	return strictN(args, func(vs []Value) Value {
		re, global, ev := get(nil, vs)
		if re == nil {
			return ev
		}
		repl := pgReplacement(vs[2].S)
		s := vs[0].S
		if global {
			return Varchar(re.ReplaceAllString(s, repl))
		}
		loc := re.FindStringSubmatchIndex(s)
		if loc == nil {
			return Varchar(s)
		}
		out := re.ExpandString(nil, repl, s, loc)
		return Varchar(s[:loc[0]] + string(out) + s[loc[1]:])
	}), nil
}

// pgReplacement turns PostgreSQL's \1..\9 and \& into Go's ${1} and ${0}; $ is literal.
func pgReplacement(r string) string {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '$':
			b.WriteString("$$")
		case c == '\\' && i+1 < len(r) && r[i+1] >= '1' && r[i+1] <= '9':
			b.WriteString("${" + string(r[i+1]) + "}")
			i++
		case c == '\\' && i+1 < len(r) && r[i+1] == '&':
			b.WriteString("${0}")
			i++
		case c == '\\' && i+1 < len(r) && r[i+1] == '\\':
			b.WriteByte('\\')
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func buildRegexpMatch(c *Call, args []Evaluator) (Evaluator, error) {
	get := regexpArgs(c, args, 1)
	return strictN(args, func(vs []Value) Value {
		re, _, ev := get(nil, vs)
		if re == nil {
			return ev
		}
		m := re.FindStringSubmatch(vs[0].S)
		if m == nil {
			return Null
		}
		if len(m) > 1 {
			m = m[1:]
		}
		return Varchar(arrayText(m))
	}), nil
}

// arrayText renders strings as a PostgreSQL text array literal: {a,"b c",NULL}.
func arrayText(xs []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		if x == "" || strings.ContainsAny(x, `{},"\ `) || strings.EqualFold(x, "NULL") {
			b.WriteByte('"')
			b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(x))
			b.WriteByte('"')
		} else {
			b.WriteString(x)
		}
	}
	b.WriteByte('}')
	return b.String()
}
