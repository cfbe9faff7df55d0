package sql

import (
	"regexp"
	"strings"
	"testing"
)

func bindText(t *testing.T, text string) (*Query, error) {
	t.Helper()
	st, err := Parse(text)
	if err != nil {
		return nil, err
	}
	return Bind(st[0].(*Select), newTestCatalog())
}

// A lateral call binds its arguments over the left side's row and appends the function's
// columns, named by the alias's column list, qualified by the alias.
func TestBindLateral(t *testing.T) {
	q, err := bindText(t, "SELECT o.order_id, t.tag, tag FROM orders AS o CROSS JOIN LATERAL string_to_table(o.user_id, ',') AS t(tag) WHERE t.tag <> ''")
	if err != nil {
		t.Fatal(err)
	}
	f, ok := q.From.(*FromLateral)
	if !ok {
		t.Fatalf("FROM is %T", q.From)
	}
	if f.Func.Name != "STRING_TO_TABLE" || f.Outer || f.Name != "t" || len(f.Cols) != 1 || f.Cols[0].Name != "tag" || f.Cols[0].Type != TypeVarchar {
		t.Fatalf("lateral: %s", dumpFrom(f))
	}
	if c, ok := f.Args[0].(*ColumnRef); !ok || c.Index != 1 {
		t.Fatalf("the first argument is %s, want user_id#1", exprRefs(f.Args[0]))
	}
	width := len(newTestCatalog()["orders"].Schema)
	for i, e := range q.Select[1:] {
		if c, ok := e.(*ColumnRef); !ok || c.Index != width {
			t.Errorf("select %d = %s, want the function's column #%d", i+1, exprRefs(e), width)
		}
	}
	// UNNEST without alias: the default name; LEFT JOIN ... ON TRUE is outer; chained calls
	// see the columns of the calls before them.
	q, err = bindText(t, "SELECT unnest, n FROM orders CROSS JOIN UNNEST(payload) LEFT JOIN LATERAL generate_series(1, qty) AS g(n) ON TRUE")
	if err != nil {
		t.Fatal(err)
	}
	outer, ok := q.From.(*FromLateral)
	if !ok || !outer.Outer || outer.Func.Name != "GENERATE_SERIES" || outer.Cols[0].Type != TypeInt {
		t.Fatalf("FROM: %s", dumpFrom(q.From))
	}
	inner, ok := outer.Input.(*FromLateral)
	if !ok || inner.Func.Name != "UNNEST" || inner.Cols[0].Name != "unnest" || inner.Cols[0].Type != TypeJSON {
		t.Fatalf("inner: %s", dumpFrom(outer.Input))
	}
	// WITH ORDINALITY adds a BIGINT column, named last in the alias's list.
	q, err = bindText(t, "SELECT t.n, t.tag FROM orders CROSS JOIN LATERAL string_to_table(user_id, ',') WITH ORDINALITY t(tag, n)")
	if err != nil {
		t.Fatal(err)
	}
	if f := q.From.(*FromLateral); !f.Ordinality || len(f.Cols) != 2 || f.Cols[1].Name != "n" || f.Cols[1].Type != TypeBigInt {
		t.Fatalf("WITH ORDINALITY: %s", dumpFrom(q.From))
	}
	if _, err := bindText(t, "SELECT ordinality FROM orders CROSS JOIN UNNEST(payload) WITH ORDINALITY"); err != nil {
		t.Fatal(err)
	}
	// The left side may be a join.
	if _, err := bindText(t, "SELECT o.order_id, v FROM orders o JOIN clicks c ON o.user_id = c.url CROSS JOIN LATERAL string_to_table(c.url, '/') AS s(v)"); err != nil {
		t.Fatal(err)
	}
}

// Errors name the SQLSTATE and where.
func TestBindLateralErrors(t *testing.T) {
	cases := []struct{ text, code, at string }{
		{"SELECT * FROM orders CROSS JOIN LATERAL string_to_table(amount, ',') AS t(x)", CodeUndefinedFunction, "string_to_table(amount"},
		{"SELECT * FROM orders CROSS JOIN LATERAL generate_series(1, user_id) AS t(x)", CodeUndefinedFunction, "generate_series("},
		{"SELECT * FROM orders CROSS JOIN LATERAL nope(user_id) AS t(x)", CodeUndefinedFunction, "nope("},
		{"SELECT * FROM orders CROSS JOIN LATERAL upper(user_id) AS t(x)", CodeWrongObjectType, "upper("},
		{"SELECT * FROM orders CROSS JOIN LATERAL string_to_table(nothere, ',') AS t(x)", CodeUnknownColumn, "nothere"},
		{"SELECT * FROM orders CROSS JOIN LATERAL string_to_table(user_id, ',') AS t(x, y)", CodeSyntax, "x, y"},
		{"SELECT * FROM orders CROSS JOIN UNNEST(amount) AS t(x)", CodeUndefinedFunction, "UNNEST(amount"},
		{"SELECT * FROM orders JOIN LATERAL string_to_table(user_id, ',') AS t(x) ON x = 'a'", CodeNotSupported, "x = 'a'"},
		{"SELECT * FROM orders CROSS JOIN LATERAL string_to_table(user_id, ',') AS t(x) WHERE x > 1", CodeTypeMismatch, "x > 1"},
		{"SELECT * FROM orders CROSS JOIN LATERAL string_to_table(user_id, ',') AS t(x) WHERE y = 'a'", CodeUnknownColumn, "y = 'a'"},
	}
	for _, c := range cases {
		_, err := bindText(t, c.text)
		e, ok := err.(*Error)
		if !ok {
			t.Errorf("%s: %v, want %s", c.text, err, c.code)
			continue
		}
		want := strings.Index(c.text, c.at)
		if e.Code != c.code || e.Pos != want {
			t.Errorf("%s: %s at %d (%s), want %s at %d", c.text, e.Code, e.Pos, e.Message, c.code, want)
		}
	}
}

// callTable runs a built-in table function on constant arguments.
func callTable(t *testing.T, name string, args ...Value) ([][]Value, *Error) {
	t.Helper()
	d, ok := LookupTableFunc(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	exprs := make([]Expr, len(args))
	evals := make([]Evaluator, len(args))
	for i, a := range args {
		ty := TypeVarchar
		switch a.K {
		case KindBigInt, KindInt, KindJSON:
			ty = Type{Kind: a.K}
		}
		exprs[i] = &ColumnRef{Index: i, Name: "a", T: ty}
		evals[i] = func(r Row) Value { return r[i] }
	}
	if _, _, err := d.Check(exprs); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	f, err := d.Build(evals)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]Value
	e := f(Row(args), func(cols []Value) { out = append(out, append([]Value(nil), cols...)) })
	return out, e
}

func texts(rows [][]Value) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		if r[0].IsNull() {
			out[i] = "<null>"
		} else {
			out[i] = r[0].S
		}
	}
	return out
}

// The splitting functions against Go's strings and regexp packages over generated input.
func TestSplitFunctionsAgainstGo(t *testing.T) {
	parts := []string{"", "a", "bc", "d e", "ü", ",", "x,y"}
	for i := 0; i < 400; i++ {
		var fs []string
		for k := 0; k <= i%5; k++ {
			fs = append(fs, parts[(i*7+k*3)%len(parts)])
		}
		s := strings.Join(fs, ";")
		got, err := callTable(t, "STRING_TO_TABLE", Varchar(s), Varchar(";"))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Split(s, ";")
		if s == "" {
			want = []string{}
		}
		if strings.Join(texts(got), "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Fatalf("string_to_table(%q, ';') = %q, want %q", s, texts(got), want)
		}
		got, err = callTable(t, "REGEXP_SPLIT_TO_TABLE", Varchar(s), Varchar(";+"))
		if err != nil {
			t.Fatal(err)
		}
		want = regexp.MustCompile(";+").Split(s, -1)
		if strings.Join(texts(got), "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Fatalf("regexp_split_to_table(%q, ';+') = %q, want %q", s, texts(got), want)
		}
	}
	// NULL delimiter: characters; null_string; NULL input: no rows.
	got, _ := callTable(t, "STRING_TO_TABLE", Varchar("aüb"), Null)
	if strings.Join(texts(got), "|") != "a|ü|b" {
		t.Errorf("by character: %q", texts(got))
	}
	got, _ = callTable(t, "STRING_TO_TABLE", Varchar("a,-,b"), Varchar(","), Varchar("-"))
	if strings.Join(texts(got), "|") != "a|<null>|b" {
		t.Errorf("null_string: %q", texts(got))
	}
	if got, _ := callTable(t, "STRING_TO_TABLE", Null, Varchar(",")); len(got) != 0 {
		t.Errorf("NULL: %q", texts(got))
	}
	if _, err := callTable(t, "REGEXP_SPLIT_TO_TABLE", Varchar("a"), Varchar("(")); err == nil || err.Code != CodeInvalidRegex {
		t.Errorf("bad pattern: %v", err)
	}
}

func TestUnnestAndSeries(t *testing.T) {
	got, err := callTable(t, "UNNEST", JSONValue(`[1, "a", {"b": [2]}, null]`), Varchar(`{x,"y z","q\"",NULL}`), Varchar("{}"))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"1", "x", "<null>"}, {`"a"`, "y z", "<null>"}, {`{"b": [2]}`, `q"`, "<null>"}, {"null", "<null>", "<null>"}}
	if len(got) != len(want) {
		t.Fatalf("unnest: %v", got)
	}
	for i, r := range got {
		for j, v := range r {
			s := v.S
			if v.IsNull() {
				s = "<null>"
			}
			if s != want[i][j] {
				t.Errorf("row %d col %d = %q, want %q", i, j, s, want[i][j])
			}
		}
	}
	if _, err := callTable(t, "UNNEST", JSONValue(`{"a":1}`)); err == nil || err.Code != CodeInvalidParameter {
		t.Errorf("unnest of an object: %v", err)
	}
	if _, err := callTable(t, "UNNEST", Varchar(`{a,{b}}`)); err == nil || err.Code != CodeInvalidText {
		t.Errorf("unnest of a nested array: %v", err)
	}
	got, _ = callTable(t, "JSON_ARRAY_ELEMENTS_TEXT", JSONValue(`["a\"b", 2, null]`))
	if strings.Join(texts(got), "|") != `a"b|2|<null>` {
		t.Errorf("json_array_elements_text: %q", texts(got))
	}
	for _, c := range []struct{ start, stop, step int64 }{{1, 10, 1}, {10, 1, -3}, {5, 4, 1}, {-7, 7, 5}, {0, 0, 2}} {
		got, err := callTable(t, "GENERATE_SERIES", BigInt(c.start), BigInt(c.stop), BigInt(c.step))
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for v := c.start; c.step > 0 && v <= c.stop || c.step < 0 && v >= c.stop; v += c.step {
			want = append(want, v)
		}
		if len(got) != len(want) {
			t.Fatalf("generate_series%v: %d rows, want %d", c, len(got), len(want))
		}
		for i := range want {
			if got[i][0].I != want[i] || got[i][0].K != KindBigInt {
				t.Errorf("generate_series%v row %d = %v, want %d", c, i, got[i][0], want[i])
			}
		}
	}
	if _, err := callTable(t, "GENERATE_SERIES", BigInt(0), BigInt(1<<40)); err == nil || err.Code != CodeProgramLimit {
		t.Errorf("a huge series: %v", err)
	}
	if _, err := callTable(t, "GENERATE_SERIES", BigInt(0), BigInt(1), BigInt(0)); err == nil || err.Code != CodeInvalidParameter {
		t.Errorf("step 0: %v", err)
	}
}

// FuzzArrayText: the array literal reader never panics, and what it reads back from
// text it was given the elements of is those elements.
func FuzzArrayText(f *testing.F) {
	f.Add(`{a,b,"c d",NULL}`)
	f.Add(`{"x\"y",\\z}`)
	f.Add(`{}`)
	f.Add(`{{1,2},{3}}`)
	f.Fuzz(func(t *testing.T, s string) {
		vals, err := ParseArrayText(s, nil)
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteByte('{')
		for i, v := range vals {
			if i > 0 {
				b.WriteByte(',')
			}
			if v.IsNull() {
				b.WriteString("NULL")
				continue
			}
			b.WriteByte('"')
			b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v.S))
			b.WriteByte('"')
		}
		b.WriteByte('}')
		again, err := ParseArrayText(b.String(), nil)
		if err != nil || len(again) != len(vals) {
			t.Fatalf("%q read back from %q: %v %v", b.String(), s, again, err)
		}
		for i := range vals {
			if again[i] != vals[i] {
				t.Fatalf("element %d: %v, then %v", i, vals[i], again[i])
			}
		}
	})
}

// TestTableFunctionTableInDocs keeps docs/sql.md's table of built-in table functions equal
// to the registry.
func TestTableFunctionTableInDocs(t *testing.T) {
	b, err := readDoc()
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- table-functions -->\n", "<!-- /table-functions -->"
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/sql.md has no %q ... %q section", begin, end)
	}
	want := TableFuncTable()
	if got := s[i+len(begin) : j]; got != want {
		if *rewriteGolden {
			if err := writeDoc(s[:i+len(begin)] + want + s[j:]); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/sql.md's table function table differs from the registry; run go test ./sql -run TestTableFunctionTableInDocs -rewrite\n--- registry:\n%s", want)
	}
	for _, d := range TableFuncs() {
		if d.Doc == "" || d.Sig == "" {
			t.Errorf("table function %s has no documentation line", d.Name)
		}
	}
}

// The comma form, stream syntax inside the arguments, and quoted aliases.
func TestBindLateralForms(t *testing.T) {
	q, err := bindText(t, `SELECT i.item->>'sku', "T"."X" FROM orders AS o, LATERAL json_array_elements(o.payload->'items') AS i(item) CROSS JOIN LATERAL string_to_table(o.user_id::VARCHAR, '-') "T"("X")`)
	if err != nil {
		t.Fatal(err)
	}
	outer, ok := q.From.(*FromLateral)
	if !ok || outer.Name != "T" || outer.Cols[0].Name != "X" {
		t.Fatalf("FROM: %s", dumpFrom(q.From))
	}
	inner, ok := outer.Input.(*FromLateral)
	if !ok || inner.Func.Name != "JSON_ARRAY_ELEMENTS" || !strings.Contains(exprRefs(inner.Args[0]), "payload#6") {
		t.Fatalf("inner: %s", dumpFrom(outer.Input))
	}
}

func TestWithOrdinality(t *testing.T) {
	d, _ := LookupTableFunc("STRING_TO_TABLE")
	f, err := d.Build([]Evaluator{func(r Row) Value { return r[0] }, func(Row) Value { return Varchar(",") }})
	if err != nil {
		t.Fatal(err)
	}
	f = WithOrdinality(f, 1)
	for _, s := range []string{"a,b,c", "x", "p,q"} {
		var got []string
		if err := f(Row{Varchar(s)}, func(cols []Value) { got = append(got, cols[0].S+"#"+cols[1].String()) }); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, p := range strings.Split(s, ",") {
			want = append(want, p+"#"+BigInt(int64(i+1)).String())
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
}
