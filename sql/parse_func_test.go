package sql

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCreateFunction(t *testing.T) {
	cases := []struct {
		text string
		want CreateFunction
	}{
		{"CREATE FUNCTION eur(usd DOUBLE) RETURNS DOUBLE AS 'usd * 0.908'",
			CreateFunction{Name: "eur", Params: Schema{{"usd", TypeDouble}}, Returns: TypeDouble, Language: "sql", Body: "usd * 0.908"}},
		{"create or replace function risk(amount DOUBLE, country VARCHAR) RETURNS INT LANGUAGE javascript AS $$ if (amount > 1000 && country !== 'DE') return 3; return 1; $$",
			CreateFunction{Name: "risk", OrReplace: true, Params: Schema{{"amount", TypeDouble}, {"country", TypeVarchar}}, Returns: TypeInt,
				Language: "javascript", Body: " if (amount > 1000 && country !== 'DE') return 3; return 1; "}},
		{"CREATE FUNCTION IF NOT EXISTS f() RETURNS BIGINT AS $body$ 1 $$ 2 $body$ LANGUAGE js WITH (timeout = '50ms')",
			CreateFunction{Name: "f", IfNotExists: true, Returns: TypeBigInt, Language: "javascript", Body: " 1 $$ 2 ",
				Options: map[string]string{"timeout": "50ms"}}},
		{"CREATE FUNCTION w(x INT) RETURNS INT LANGUAGE wasm AS 'm.wasm' WITH (export = 'twice')",
			CreateFunction{Name: "w", Params: Schema{{"x", TypeInt}}, Returns: TypeInt, Language: "wasm", Body: "m.wasm",
				Options: map[string]string{"export": "twice"}}},
		{"CREATE AGGREGATE wavg(v DOUBLE, w DOUBLE) RETURNS DOUBLE LANGUAGE javascript AS $$ {create() {return 0}} $$",
			CreateFunction{Name: "wavg", Aggregate: true, Params: Schema{{"v", TypeDouble}, {"w", TypeDouble}}, Returns: TypeDouble,
				Language: "javascript", Body: " {create() {return 0}} "}},
	}
	for _, c := range cases {
		st, err := Parse(c.text)
		if err != nil {
			t.Errorf("%s: %v", c.text, err)
			continue
		}
		got, ok := st[0].(*CreateFunction)
		if !ok {
			t.Errorf("%s: parsed as %T", c.text, st[0])
			continue
		}
		want := c.want
		want.Src = Src{Text: c.text, Pos: 0}
		want.BodyPos = strings.Index(c.text, want.Body)
		want.input = c.text
		if want.Options == nil {
			want.Options = map[string]string{}
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.text, *got, want)
		}
		if got.Body != c.text[got.BodyPos:got.BodyPos+len(got.Body)] {
			t.Errorf("%s: BodyPos %d does not point at the body", c.text, got.BodyPos)
		}
	}
}

func TestParseFunctionStatementsErrors(t *testing.T) {
	cases := []struct{ text, code, msg string }{
		{"CREATE FUNCTION f(x INT) RETURNS INT", "42601", "expected AS followed by the function body"},
		{"CREATE FUNCTION f(x INT, x INT) RETURNS INT AS 'x'", "42701", "parameter x is declared twice"},
		{"CREATE FUNCTION f(x INT) RETURNS INT LANGUAGE python AS 'x'", "0A000", "language python is not supported"},
		{"CREATE FUNCTION f(x INT) RETURNS INT AS 'x' AS 'y'", "42601", "AS is given twice"},
		{"CREATE FUNCTION f(x INT) RETURNS INT AS x", "42601", "the function body as a string"},
		{"CREATE FUNCTION f(x INT) RETURNS INT AS $$ x", "42601", "unterminated dollar-quoted string"},
		{"CREATE OR REPLACE FUNCTION IF NOT EXISTS f() RETURNS INT AS '1'", "42601", "cannot be combined"},
		{"DROP FUNCTION f(INT, VARCHAR", "42601", "expected \",\""},
	}
	for _, c := range cases {
		_, err := Parse(c.text)
		e, ok := err.(*Error)
		if !ok || e.Code != c.code || !strings.Contains(e.Message, c.msg) || e.Line == 0 {
			t.Errorf("%s: got %v, want %s ... %s with a position", c.text, err, c.code, c.msg)
		}
	}
}

func TestParseFunctionDropShowDescribe(t *testing.T) {
	st, err := Parse("DROP FUNCTION IF EXISTS eur(DOUBLE); DROP AGGREGATE wavg; SHOW FUNCTIONS; DESCRIBE FUNCTION eur; DESC AGGREGATE wavg; DESCRIBE orders")
	if err != nil {
		t.Fatal(err)
	}
	d0, d1 := st[0].(*Drop), st[1].(*Drop)
	if d0.Kind != DropFunction || d0.Name != "eur" || !d0.IfExists || d1.Kind != DropAggregate || d1.Name != "wavg" {
		t.Errorf("drops: %+v %+v", d0, d1)
	}
	if s := st[2].(*ShowStmt); s.What != ShowFunctions {
		t.Errorf("show: %+v", s)
	}
	if d := st[3].(*Describe); !d.Function || d.Name != "eur" {
		t.Errorf("describe function: %+v", d)
	}
	if d := st[4].(*Describe); !d.Function || d.Name != "wavg" {
		t.Errorf("describe aggregate: %+v", d)
	}
	if d := st[5].(*Describe); d.Function || d.Name != "orders" {
		t.Errorf("describe stream: %+v", d)
	}
}

func TestComplete(t *testing.T) {
	for text, want := range map[string]bool{
		"SELECT 1;": true,
		"SELECT 1":  false,
		"SELECT ';": false,
		"CREATE FUNCTION f() RETURNS INT LANGUAGE javascript AS $$\n let a = 1;\n":               false,
		"CREATE FUNCTION f() RETURNS INT LANGUAGE javascript AS $$\n let a = 1;\n return a; $$;": true,
		"SELECT 1; -- done": true,
		"SELECT 1; /* open": false,
	} {
		if got := Complete(text); got != want {
			t.Errorf("Complete(%q) = %v", text, got)
		}
	}
}

// Numbers the parser reads as integers are errors when they are not whole numbers or do not
// fit, instead of reading as 0 or the largest int.
func TestParseIntegerWords(t *testing.T) {
	for text, want := range map[string]string{
		"SELECT CAST(a AS DECIMAL(1.5)) FROM t":     "a whole number",
		"SELECT CAST(a AS DECIMAL(10, 2.5)) FROM t": "a whole number",
		"SELECT $99999999999999999999999 FROM t":    "too large",
	} {
		if _, err := Parse(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", text, err, want)
		}
	}
}
