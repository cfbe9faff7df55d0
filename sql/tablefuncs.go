package sql

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Table functions: called in FROM after JOIN (`CROSS JOIN LATERAL f(args) AS t(c, ...)`,
// `CROSS JOIN UNNEST(...)`), one call over an input row gives zero or more rows, each
// appended to the input row (docs/sql.md, "Table functions"). The built-ins are below;
// user table functions come from the catalog (TableFuncCatalog).

// TableFuncDef is a table function.
type TableFuncDef struct {
	Name string // canonical name (upper case for built-ins)
	Sig  string // the call as documented
	Doc  string // the notes of the docs line (Markdown)
	// Check validates the bound arguments and returns the columns of the rows a call
	// gives and the arguments to keep (possibly wrapped in casts). Errors are *Error
	// (42883 for arguments no signature takes).
	Check func(args []Expr) (Schema, []Expr, error)
	// Build compiles a call given its arguments' evaluators. The result is used by one
	// goroutine.
	Build func(args []Evaluator) (TableEvaluator, error)
}

// TableEvaluator computes the rows of one call over the input row in: emit is called once
// per output row with its columns (the slice may be reused after emit returns). An error
// fails the input row, and is reported before the first emit (so that a caller may pass
// rows on as they come).
type TableEvaluator func(in Row, emit func(cols []Value)) *Error

// WithOrdinality returns f with one more column, numbering the rows of each call from 1
// (WITH ORDINALITY); ncols is f's number of columns.
func WithOrdinality(f TableEvaluator, ncols int) TableEvaluator {
	buf := make([]Value, ncols+1)
	var n int64
	var emit func([]Value)
	add := func(cols []Value) {
		n++
		copy(buf, cols)
		buf[ncols] = BigInt(n)
		emit(buf)
	}
	return func(in Row, e func([]Value)) *Error {
		n, emit = 0, e
		return f(in, add)
	}
}

// TableFuncCatalog is implemented by a Catalog that holds user table functions; the
// binder asks it for a name that is not a built-in table function.
type TableFuncCatalog interface {
	TableFunction(name string) (*TableFuncDef, bool)
}

// MaxTableRows bounds the rows one call of a table function gives (GENERATE_SERIES, a
// user function's array): more is an error (54000) for that row.
const MaxTableRows = 1 << 24

var tableFuncs = map[string]*TableFuncDef{}

func registerTable(defs ...*TableFuncDef) {
	for _, d := range defs {
		if _, dup := tableFuncs[d.Name]; dup {
			panic("sql: table function " + d.Name + " registered twice")
		}
		tableFuncs[d.Name] = d
	}
}

// LookupTableFunc returns the built-in table function called name (case-insensitive).
func LookupTableFunc(name string) (*TableFuncDef, bool) {
	d, ok := tableFuncs[strings.ToUpper(name)]
	return d, ok
}

// TableFuncs returns the built-in table functions by name.
func TableFuncs() []*TableFuncDef {
	out := make([]*TableFuncDef, 0, len(tableFuncs))
	for _, d := range tableFuncs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TableFuncTable renders the built-in table functions as the Markdown table of
// docs/sql.md ("Table functions").
func TableFuncTable() string {
	var b strings.Builder
	b.WriteString("| function | columns | notes |\n|---|---|---|\n")
	for _, d := range TableFuncs() {
		cols := ""
		if d.Name == "UNNEST" {
			cols = "`unnest` (one per argument)"
		} else if sch, _, err := d.Check(sampleArgs(d.Name)); err == nil {
			var cs []string
			for _, c := range sch {
				cs = append(cs, "`"+c.Name+"` "+c.Type.String())
			}
			cols = strings.Join(cs, ", ")
		}
		b.WriteString("| " + mdCode(d.Sig) + " | " + cols + " | " + d.Doc + " |\n")
	}
	return b.String()
}

// sampleArgs are arguments every signature of the built-in name takes (for the docs).
func sampleArgs(name string) []Expr {
	s := &Literal{V: Varchar("x"), T: TypeVarchar}
	switch name {
	case "GENERATE_SERIES":
		one := &Literal{V: Int(1), T: TypeInt}
		return []Expr{one, one}
	case "STRING_TO_TABLE", "REGEXP_SPLIT_TO_TABLE":
		return []Expr{s, s}
	}
	return []Expr{&Literal{V: JSONValue("[]"), T: TypeJSON}}
}

func init() {
	registerTable(
		&TableFuncDef{Name: "STRING_TO_TABLE", Sig: "STRING_TO_TABLE(s, delimiter [, null_string])",
			Doc:   "one row per field of s split at delimiter (a NULL delimiter: one row per character; an empty one: s whole); fields equal to null_string are NULL; NULL s: no rows",
			Check: oneColumn("string_to_table", TypeVarchar, func(args []Expr) ([]Expr, error) { return textArgs("STRING_TO_TABLE", args, 2, 3) }),
			Build: buildStringToTable},
		&TableFuncDef{Name: "REGEXP_SPLIT_TO_TABLE", Sig: "REGEXP_SPLIT_TO_TABLE(s, pattern [, flags])",
			Doc:   "one row per part of s between matches of pattern (Go RE2 syntax; flag `i` ignores case; a bad pattern fails the row, 2201B); NULL s: no rows",
			Check: oneColumn("regexp_split_to_table", TypeVarchar, func(args []Expr) ([]Expr, error) { return textArgs("REGEXP_SPLIT_TO_TABLE", args, 2, 3) }),
			Build: buildRegexpSplit},
		&TableFuncDef{Name: "UNNEST", Sig: "UNNEST(array [, array ...])",
			Doc:   "one row per element: a JSON array gives JSON elements, PostgreSQL array text (`{a,b,\"c d\",NULL}`, as REGEXP_MATCH returns) VARCHAR elements; several arrays side by side, the shorter ones padded with NULL; NULL: no rows; any other JSON value fails the row (22023)",
			Check: checkUnnest, Build: buildUnnest},
		&TableFuncDef{Name: "JSON_ARRAY_ELEMENTS", Sig: "JSON_ARRAY_ELEMENTS(j)",
			Doc:   "one row per element of the JSON array j, as JSON (PostgreSQL's); NULL: no rows; not an array fails the row (22023)",
			Check: oneColumn("value", TypeJSON, func(args []Expr) ([]Expr, error) { return jsonArgs("JSON_ARRAY_ELEMENTS", args) }),
			Build: func(args []Evaluator) (TableEvaluator, error) { return buildUnnestOf(args, []bool{true}, false), nil }},
		&TableFuncDef{Name: "JSON_ARRAY_ELEMENTS_TEXT", Sig: "JSON_ARRAY_ELEMENTS_TEXT(j)",
			Doc:   "JSON_ARRAY_ELEMENTS as text: strings unquoted, JSON null as NULL",
			Check: oneColumn("value", TypeVarchar, func(args []Expr) ([]Expr, error) { return jsonArgs("JSON_ARRAY_ELEMENTS_TEXT", args) }),
			Build: func(args []Evaluator) (TableEvaluator, error) { return buildUnnestOf(args, []bool{true}, true), nil }},
		&TableFuncDef{Name: "GENERATE_SERIES", Sig: "GENERATE_SERIES(start, stop [, step])",
			Doc:   "integers start, start+step, ... (BIGINT when an argument is) up to stop (down to stop for a negative step; default step 1; step 0 fails the row, 22023); at most 16,777,216 rows a call (54000); a NULL argument: no rows",
			Check: checkSeries, Build: buildSeries},
	)
}

// oneColumn is the Check of a function whose rows have one column, name of type t, and
// whose arguments args checks.
func oneColumn(name string, t Type, args func([]Expr) ([]Expr, error)) func([]Expr) (Schema, []Expr, error) {
	return func(in []Expr) (Schema, []Expr, error) {
		out, err := args(in)
		return Schema{{Name: name, Type: t}}, out, err
	}
}

// textArgs checks a call of text arguments (VARCHAR, JSON as text, NULL).
func textArgs(fn string, args []Expr, min, max int) ([]Expr, error) {
	if err := argCount(fn, args, min, max); err != nil {
		return nil, err
	}
	out := make([]Expr, len(args))
	for i := range args {
		e, err := textArg(fn, args, i)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// jsonArgs checks a call of one JSON argument (VARCHAR is read as JSON text).
func jsonArgs(fn string, args []Expr) ([]Expr, error) {
	if err := argCount(fn, args, 1, 1); err != nil {
		return nil, err
	}
	switch args[0].Type().Kind {
	case KindJSON, KindVarchar, KindNull:
		return args, nil
	}
	return nil, noFunc(fn, args)
}

// evalArgs evaluates args over in; a failing argument's error is returned.
func evalArgs(args []Evaluator, in Row, vs []Value) ([]Value, *Error) {
	vs = vs[:0]
	for _, a := range args {
		v := a(in)
		if v.K == KindNull && v.S != "" {
			return nil, v.AsError()
		}
		vs = append(vs, v)
	}
	return vs, nil
}

func buildStringToTable(args []Evaluator) (TableEvaluator, error) {
	var vs []Value
	var col [1]Value
	return func(in Row, emit func([]Value)) *Error {
		var err *Error
		if vs, err = evalArgs(args, in, vs); err != nil {
			return err
		}
		if vs[0].IsNull() {
			return nil
		}
		s := vs[0].S
		nullStr, hasNull := "", len(vs) > 2 && !vs[2].IsNull()
		if hasNull {
			nullStr = vs[2].S
		}
		field := func(f string) {
			if hasNull && f == nullStr {
				col[0] = Null
			} else {
				col[0] = Varchar(f)
			}
			emit(col[:])
		}
		switch {
		case vs[1].IsNull():
			for _, r := range s {
				field(string(r))
			}
		case s == "":
		case vs[1].S == "":
			field(s)
		default:
			for {
				i := strings.Index(s, vs[1].S)
				if i < 0 {
					field(s)
					break
				}
				field(s[:i])
				s = s[i+len(vs[1].S):]
			}
		}
		return nil
	}, nil
}

func buildRegexpSplit(args []Evaluator) (TableEvaluator, error) {
	var vs []Value
	var col [1]Value
	var lastPat, lastFlags string
	var re *regexp.Regexp
	return func(in Row, emit func([]Value)) *Error {
		var err *Error
		if vs, err = evalArgs(args, in, vs); err != nil {
			return err
		}
		if vs[0].IsNull() || vs[1].IsNull() || len(vs) > 2 && vs[2].IsNull() {
			return nil
		}
		flags := ""
		if len(vs) > 2 {
			flags = vs[2].S
		}
		if re == nil || vs[1].S != lastPat || flags != lastFlags {
			if strings.ContainsRune(flags, 'g') {
				return Errorf(CodeInvalidParameter, "regexp_split_to_table does not support the \"global\" option")
			}
			r, _, e := compileRegexp(vs[1].S, flags)
			if e != nil {
				return e
			}
			re, lastPat, lastFlags = r, vs[1].S, flags
		}
		s := vs[0].S
		// PostgreSQL's rule: an empty match at the start or end of s, or right after the
		// previous match, does not split.
		prev := 0
		for _, m := range re.FindAllStringIndex(s, -1) {
			if m[0] == m[1] && (m[0] == 0 || m[0] == len(s) || m[0] == prev) {
				continue
			}
			col[0] = Varchar(s[prev:m[0]])
			emit(col[:])
			prev = m[1]
		}
		col[0] = Varchar(s[prev:])
		emit(col[:])
		return nil
	}, nil
}

func checkUnnest(args []Expr) (Schema, []Expr, error) {
	if len(args) == 0 {
		return nil, nil, noFunc("UNNEST", args)
	}
	sch := make(Schema, len(args))
	for i, a := range args {
		name := "unnest"
		if i > 0 {
			name = "unnest_" + strconv.Itoa(i+1)
		}
		switch a.Type().Kind {
		case KindJSON:
			sch[i] = Column{Name: name, Type: TypeJSON}
		case KindVarchar, KindNull:
			sch[i] = Column{Name: name, Type: TypeVarchar}
		default:
			return nil, nil, noFunc("UNNEST", args)
		}
	}
	return sch, args, nil
}

func buildUnnest(args []Evaluator) (TableEvaluator, error) {
	// The kinds are known only from the values: a JSON value is a JSON array, text is
	// PostgreSQL array text.
	return buildUnnestOf(args, nil, false), nil
}

// buildUnnestOf unnests each argument side by side: json[i] (nil: by the value's kind)
// says whether argument i is a JSON array; text gives JSON elements as text.
func buildUnnestOf(args []Evaluator, json []bool, text bool) TableEvaluator {
	var vs []Value
	elems := make([][]Value, len(args))
	cols := make([]Value, len(args))
	return func(in Row, emit func([]Value)) *Error {
		var err *Error
		if vs, err = evalArgs(args, in, vs); err != nil {
			return err
		}
		n := 0
		for i, v := range vs {
			elems[i] = elems[i][:0]
			if v.IsNull() {
				continue
			}
			isJSON := v.K == KindJSON
			if json != nil {
				isJSON = json[i]
			}
			if isJSON {
				if elems[i], err = jsonElements(v.S, text, elems[i]); err != nil {
					return err
				}
			} else if elems[i], err = ParseArrayText(v.S, elems[i]); err != nil {
				return err
			}
			n = max(n, len(elems[i]))
		}
		for r := 0; r < n; r++ {
			for i := range cols {
				if r < len(elems[i]) {
					cols[i] = elems[i][r]
				} else {
					cols[i] = Null
				}
			}
			emit(cols)
		}
		return nil
	}
}

// JSONElements appends the elements of the JSON array doc to out as JSON values (each
// element's text, not checked further). A JSON value that is not an array is 22023, text
// that is not a JSON array 22032, more than MaxTableRows elements 54000.
func JSONElements(doc string, out []Value) ([]Value, *Error) { return jsonElements(doc, false, out) }

// jsonElements appends the elements of the JSON array doc to out (as JSON values, or as
// text when text is set).
func jsonElements(doc string, text bool, out []Value) ([]Value, *Error) {
	i := skipWS(doc, 0)
	if i >= len(doc) || doc[i] != '[' {
		if i < len(doc) && (doc[i] == '{' || doc[i] == '"' || doc[i] == 't' || doc[i] == 'f' || doc[i] == 'n' || doc[i] == '-' || doc[i] >= '0' && doc[i] <= '9') {
			return out, Errorf(CodeInvalidParameter, "cannot extract elements from a JSON value that is not an array")
		}
		return out, Errorf(CodeInvalidJSON, "invalid input syntax for type json")
	}
	i = skipWS(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return out, nil
	}
	for {
		end, ok := skipValue(doc, i)
		if !ok {
			return out, Errorf(CodeInvalidJSON, "invalid input syntax for type json")
		}
		e := doc[i:end]
		if text {
			if s, ok := jsonUnquote(e); ok {
				out = append(out, Varchar(s))
			} else {
				out = append(out, Null)
			}
		} else {
			out = append(out, JSONValue(e))
		}
		if len(out) > MaxTableRows {
			return out, Errorf(CodeProgramLimit, "an array of more than %d elements", MaxTableRows)
		}
		i = skipWS(doc, end)
		if i < len(doc) && doc[i] == ',' {
			i = skipWS(doc, i+1)
			continue
		}
		if i < len(doc) && doc[i] == ']' && skipWS(doc, i+1) == len(doc) {
			return out, nil
		}
		return out, Errorf(CodeInvalidJSON, "invalid input syntax for type json")
	}
}

// ParseArrayText appends the elements of a one-dimensional PostgreSQL array literal
// (`{a,b,"c \"d\"",NULL}`) to out as VARCHAR values (an unquoted NULL is NULL). Text
// that is not such a literal is 22P02, naming the offset.
func ParseArrayText(s string, out []Value) ([]Value, *Error) {
	bad := func(i int, what string) *Error {
		return Errorf(CodeInvalidText, "malformed array literal %q at byte %d: %s", truncateText(s, 64), i, what)
	}
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i >= len(s) || s[i] != '{' {
		return out, bad(i, `an array starts with "{"`)
	}
	i++
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i < len(s) && s[i] == '}' {
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i != len(s) {
			return out, bad(i, "text after the closing brace")
		}
		return out, nil
	}
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			return out, bad(i, "unexpected end")
		}
		switch s[i] {
		case '"':
			var b strings.Builder
			i++
			for {
				if i >= len(s) {
					return out, bad(i, "unterminated quoted element")
				}
				c := s[i]
				if c == '"' {
					i++
					break
				}
				if c == '\\' {
					i++
					if i >= len(s) {
						return out, bad(i, "unterminated quoted element")
					}
					c = s[i]
				}
				b.WriteByte(c)
				i++
			}
			out = append(out, Varchar(b.String()))
		case '{':
			return out, bad(i, "multidimensional arrays are not supported")
		case ',', '}':
			return out, bad(i, "an empty element")
		default:
			start := i
			var b strings.Builder
			for i < len(s) && s[i] != ',' && s[i] != '}' {
				c := s[i]
				if c == '"' || c == '{' {
					return out, bad(i, "a quote or brace inside an unquoted element")
				}
				if c == '\\' {
					i++
					if i >= len(s) {
						return out, bad(i, "unexpected end")
					}
					c = s[i]
				}
				b.WriteByte(c)
				i++
			}
			e := strings.TrimRight(b.String(), " \t\n\r\v\f")
			if strings.EqualFold(e, "NULL") && !strings.Contains(s[start:i], `\`) {
				out = append(out, Null)
			} else {
				out = append(out, Varchar(e))
			}
		}
		if len(out) > MaxTableRows {
			return out, Errorf(CodeProgramLimit, "an array of more than %d elements", MaxTableRows)
		}
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			return out, bad(i, "unexpected end")
		}
		if s[i] == ',' {
			i++
			continue
		}
		if s[i] != '}' {
			return out, bad(i, `expected "," or "}"`)
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i != len(s) {
			return out, bad(i, "text after the closing brace")
		}
		return out, nil
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// truncateText cuts s to at most n bytes on a character boundary, marking the cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func checkSeries(args []Expr) (Schema, []Expr, error) {
	if err := argCount("GENERATE_SERIES", args, 2, 3); err != nil {
		return nil, nil, err
	}
	t := TypeInt
	for _, a := range args {
		if a.Type().Kind == KindBigInt {
			t = TypeBigInt
		}
	}
	out := make([]Expr, len(args))
	for i := range args {
		e, err := intArg("GENERATE_SERIES", args, i)
		if err != nil {
			return nil, nil, err
		}
		out[i] = e
	}
	return Schema{{Name: "generate_series", Type: t}}, out, nil
}

func buildSeries(args []Evaluator) (TableEvaluator, error) {
	var vs []Value
	var col [1]Value
	return func(in Row, emit func([]Value)) *Error {
		var err *Error
		if vs, err = evalArgs(args, in, vs); err != nil {
			return err
		}
		for _, v := range vs {
			if v.IsNull() {
				return nil
			}
		}
		start, stop, step := vs[0].I, vs[1].I, int64(1)
		if len(vs) > 2 {
			step = vs[2].I
		}
		if step == 0 {
			return Errorf(CodeInvalidParameter, "step size cannot equal zero")
		}
		var n uint64
		switch {
		case step > 0 && stop >= start:
			n = (uint64(stop)-uint64(start))/uint64(step) + 1
		case step < 0 && stop <= start:
			n = (uint64(start)-uint64(stop))/(-uint64(step)) + 1
		}
		if n > MaxTableRows {
			return Errorf(CodeProgramLimit, "generate_series would give %d rows, more than %d", n, MaxTableRows)
		}
		k := KindInt
		for _, v := range vs {
			if v.K == KindBigInt {
				k = KindBigInt
			}
		}
		for i := uint64(0); i < n; i++ {
			col[0] = Value{K: k, I: start + int64(i)*step}
			emit(col[:])
		}
		return nil
	}, nil
}
