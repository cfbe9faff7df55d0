package sql

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

// evalShow evaluates expr over evalRow and renders the result as "KIND text", "NULL" or
// "ERROR code".
func evalShow(t *testing.T, expr string) string {
	t.Helper()
	v, err := evalSQL(t, expr, evalRow)
	if err != nil {
		if e, ok := err.(*Error); ok {
			return "ERROR " + e.Code
		}
		return "ERROR " + err.Error()
	}
	if code, _, ok := v.Err(); ok {
		return "ERROR " + code
	}
	if v.IsNull() {
		return "NULL"
	}
	return v.K.String() + " " + Text(v)
}

// TestPostgresSemantics covers the defects where rsql differed from PostgreSQL 15; each
// expected value is PostgreSQL's.
func TestPostgresSemantics(t *testing.T) {
	cases := []struct{ expr, want string }{
		// ROUND with negative digits; half away from zero for NUMERIC, half to even for DOUBLE
		{"ROUND(14.9, -1)", "DECIMAL 10"},
		{"ROUND(15.5)", "DECIMAL 16"},
		{"ROUND(CAST(2.5 AS DOUBLE PRECISION))", "DOUBLE 2"},
		{"ROUND(CAST(3.5 AS DOUBLE PRECISION))", "DOUBLE 4"},
		{"ROUND(CAST(-0.5 AS DOUBLE PRECISION))", "DOUBLE -0"},
		{"ROUND(CAST(-2.5 AS DOUBLE PRECISION))", "DOUBLE -2"},
		// DIV with a NUMERIC operand is PostgreSQL's div(numeric, numeric): the truncated
		// quotient, computed exactly, integers converted
		{"CAST(7 AS NUMERIC) DIV CAST(2 AS BIGINT)", "DECIMAL 3"},
		{"CAST(7 AS BIGINT) DIV 2.5", "DECIMAL 2"},
		{"-7.5 DIV 2", "DECIMAL -3"},
		{"7 DIV -2.5", "DECIMAL -2"},
		{"0.5 DIV -2", "DECIMAL 0"},
		{"99999999999999999999999999.9999999999999999999 DIV 0.0000000000000000001", "DECIMAL 999999999999999999999999999999999999999999999"},
		{"1.0 DIV 0", "ERROR 22012"},
		{"CAST('NaN' AS NUMERIC) DIV 2", "DECIMAL NaN"},
		{"5 DIV CAST('Infinity' AS NUMERIC)", "DECIMAL 0"},
		{"CAST('-Infinity' AS NUMERIC) DIV 2", "DECIMAL -Infinity"},
		{"7 DIV 2", "INT 3"},
		{"ROUND(price, 1)", "DECIMAL 20.0"},
		{"TRUNC(-14.99, 1)", "DECIMAL -14.9"},
		{"CAST(CAST(2.5 AS DOUBLE PRECISION) AS BIGINT)", "BIGINT 2"},
		{"CAST(2.5 AS BIGINT)", "BIGINT 3"},
		// SUBSTRING: negative length is an error, start before 1 counts virtual positions
		{"SUBSTRING('hello', 2, -1)", "ERROR 22011"},
		{"SUBSTRING('hello', 0)", "VARCHAR hello"},
		{"SUBSTRING('hello', -1, 4)", "VARCHAR he"},
		{"SUBSTRING('hello' FROM 2 FOR 3)", "VARCHAR ell"},
		// TRIM removes any of the characters
		{"TRIM(BOTH 'ab' FROM 'abxba')", "VARCHAR x"},
		{"LTRIM('xxyhi', 'xy')", "VARCHAR hi"},
		// text to integer is strict
		{"CAST('3.5' AS BIGINT)", "ERROR 22P02"},
		{"CAST('1e3' AS BIGINT)", "ERROR 22P02"},
		{"CAST(' 42 ' AS INT)", "INT 42"},
		{"CAST('3000000000' AS INT)", "ERROR 22003"},
		// LIKE pattern ending in the escape character
		{`'a\' LIKE 'a\'`, "ERROR 22025"},
		{`'a\' LIKE 'a\\'`, "BOOLEAN t"},
		{"user_id LIKE 'u%'", "BOOLEAN t"},
		// arbitrary-precision NUMERIC and PostgreSQL's division scale
		{"0.1 / 3", "DECIMAL 0.03333333333333333333"},
		{"1 / 3.0", "DECIMAL 0.33333333333333333333"},
		{"123456789012345678901234567890 * 10", "DECIMAL 1234567890123456789012345678900"},
		{"99999999999999999999.5 + 0.5", "DECIMAL 100000000000000000000.0"},
		{"CAST('NaN' AS NUMERIC)", "DECIMAL NaN"},
		{"1.0 / 0", "ERROR 22012"},
		{"CAST(12345.678 AS NUMERIC(6,2))", "ERROR 22003"},
		{"CAST(1234.567 AS NUMERIC(6,2))", "DECIMAL 1234.57"},
		// CONCAT skips NULLs and prints booleans as t/f; || is NULL-strict and casts
		{"CONCAT(user_id, NULL, vip)", "VARCHAR u7t"},
		{"user_id || NULL", "NULL"},
		{"'x' || vip", "VARCHAR xtrue"},
		// EXTRACT is NUMERIC with the fraction
		{"EXTRACT(SECOND FROM ts)", "DECIMAL 10.250000"},
		{"EXTRACT(MICROSECOND FROM ts)", "DECIMAL 10250000"},
		{"EXTRACT(EPOCH FROM TIMESTAMP '2024-02-29 12:34:56.789')", "DECIMAL 1709210096.789000"},
		// text forms
		{"CAST(TIMESTAMP '2024-02-29 12:34:56.789' AS VARCHAR)", "VARCHAR 2024-02-29 12:34:56.789"},
		{"CAST(CAST(1e10 AS DOUBLE PRECISION) AS VARCHAR)", "VARCHAR 10000000000"},
		{"CAST(CAST(1e15 AS DOUBLE PRECISION) AS VARCHAR)", "VARCHAR 1e+15"},
		{"CAST(vip AS VARCHAR)", "VARCHAR true"},
		// INT arithmetic overflows as int4
		{"qty * 1000000000", "ERROR 22003"},
		{"CAST(qty AS BIGINT) * 1000000000", "BIGINT 3000000000"},
		{"2147483647 + 1", "ERROR 22003"},
		// NaN and Infinity
		{"CAST('Infinity' AS DOUBLE PRECISION)", "DOUBLE Infinity"},
		{"CAST('-inf' AS DOUBLE PRECISION)", "DOUBLE -Infinity"},
		{"CAST('nan' AS DOUBLE PRECISION) = CAST('NaN' AS DOUBLE PRECISION)", "BOOLEAN t"},
		{"CAST('1e300' AS DOUBLE PRECISION) * CAST('1e300' AS DOUBLE PRECISION)", "ERROR 22003"},
		{"amount * CAST('1e308' AS DOUBLE PRECISION)", "ERROR 22003"},
		// NULL - INTERVAL binds as a timestamp
		{"COALESCE(NULL - INTERVAL '1' DAY, ts)", "TIMESTAMP 2026-11-30 05:00:10.25"},
		{"ts - INTERVAL '1' DAY", "TIMESTAMP 2026-11-29 05:00:10.25"},
		{"TIMESTAMP '0001-01-01 00:00:00' - INTERVAL '2' DAY", "TIMESTAMP 0001-12-30 00:00:00 BC"},
		{"TIMESTAMP '0001-01-01 00:00:00' - INTERVAL '2000000' DAY", "ERROR 22008"},
		{"EXTRACT(YEAR FROM TIMESTAMP '0001-01-01 00:00:00' - INTERVAL '1' DAY)", "DECIMAL -1"},
		// text in PostgreSQL's output form reads back: years past 9999, BC, over its range
		{"CAST('10000-01-01 00:00:00' AS TIMESTAMP)", "TIMESTAMP 10000-01-01 00:00:00"},
		{"CAST('12000-02-29 10:00:00.25' AS TIMESTAMP)", "TIMESTAMP 12000-02-29 10:00:00.25"},
		{"CAST('10000-01-01T00:00:00Z' AS TIMESTAMP)", "TIMESTAMP 10000-01-01 00:00:00"},
		{"CAST('4713-01-01 00:00:00 BC' AS TIMESTAMP)", "TIMESTAMP 4713-01-01 00:00:00 BC"},
		{"EXTRACT(YEAR FROM CAST('4713-01-01 00:00:00 BC' AS TIMESTAMP))", "DECIMAL -4713"},
		{"CAST('0005-02-29 00:00:00 BC' AS TIMESTAMP)", "TIMESTAMP 0005-02-29 00:00:00 BC"},
		{"CAST('0004-02-29 00:00:00 BC' AS TIMESTAMP)", "ERROR 22007"},
		{"TIMESTAMP '294276-12-31 23:59:59'", "TIMESTAMP 294276-12-31 23:59:59"},
		{"CAST('294277-01-01 00:00:00' AS TIMESTAMP)", "ERROR 22008"},
		{"CAST('4714-11-24 00:00:00 BC' AS TIMESTAMP)", "TIMESTAMP 4714-11-24 00:00:00 BC"},
		{"CAST('4714-11-23 23:59:59.999 BC' AS TIMESTAMP)", "ERROR 22008"},
		{"TIMESTAMP '294276-12-31 00:00:00' + INTERVAL '2' DAY", "ERROR 22008"},
		// errors propagate through NULL-consuming constructs
		{"COALESCE(1 / (qty - 3), 5)", "ERROR 22012"},
		{"(1 / (qty - 3)) IS NULL", "ERROR 22012"},
		{"CASE WHEN qty > 0 THEN 1 ELSE 1 / 0 END", "ERROR 22012"},
		{"FALSE AND 1 / (qty - 3) = 1", "BOOLEAN f"},
	}
	for _, c := range cases {
		if got := evalShow(t, c.expr); got != c.want {
			t.Errorf("%s = %s, want %s", c.expr, got, c.want)
		}
	}
}

// TestNewFunctions checks each function the registry added against PostgreSQL's result.
func TestNewFunctions(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"NULLIF(qty, 3)", "NULL"},
		{"NULLIF(qty, 4)", "INT 3"},
		{"GREATEST(1, qty, 2.5)", "DECIMAL 3"},
		{"LEAST('b', user_id, NULL)", "VARCHAR b"},
		{"qty IS DISTINCT FROM NULL", "BOOLEAN t"},
		{"NULL IS NOT DISTINCT FROM NULL", "BOOLEAN t"},
		{"qty IS NOT DISTINCT FROM 3 AND vip", "BOOLEAN t"},
		{"REPLACE('abcabc', 'b', 'XY')", "VARCHAR aXYcaXYc"},
		{"POSITION('c' IN 'abc')", "INT 3"},
		{"STRPOS('héllo', 'l')", "INT 3"},
		{"LEFT('héllo', -2)", "VARCHAR hél"},
		{"RIGHT('héllo', 2)", "VARCHAR lo"},
		{"LPAD('7', 3, '0')", "VARCHAR 007"},
		{"RPAD('abcdef', 3)", "VARCHAR abc"},
		{"REPEAT('ab', 3)", "VARCHAR ababab"},
		{"REVERSE('héllo')", "VARCHAR olléh"},
		{"INITCAP('hELLO wORLD-foo')", "VARCHAR Hello World-Foo"},
		{"SPLIT_PART('a,b,c', ',', -1)", "VARCHAR c"},
		{"SPLIT_PART('a,b,c', ',', 0)", "ERROR 22023"},
		{"ASCII('é')", "INT 233"},
		{"CHR(223)", "VARCHAR ß"},
		{"CHR(0)", "ERROR 54000"},
		{"MD5('abc')", "VARCHAR 900150983cd24fb0d6963f7d28e17f72"},
		{"SHA256('abc')", "VARCHAR ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"OCTET_LENGTH('héllo')", "INT 6"},
		{"REGEXP_REPLACE('banana', 'a(n)', '<\\1>', 'g')", "VARCHAR b<n><n>a"},
		{"REGEXP_MATCH('foobarbequebaz', '(bar)(beque)')", "VARCHAR {bar,beque}"},
		{"user_id ~ '^u[0-9]$'", "BOOLEAN t"},
		{"user_id !~ '^u'", "BOOLEAN f"},
		{"user_id ~* '^U'", "BOOLEAN t"},
		{"user_id ~ '('", "ERROR 2201B"},
		{"STARTS_WITH(user_id, 'u')", "BOOLEAN t"},
		{"SIGN(-2.5)", "DECIMAL -1"},
		{"SIGN(amount)", "DOUBLE 1"},
		{"POWER(2, 10)", "DOUBLE 1024"},
		{"POWER(0, -1)", "ERROR 2201F"},
		{"SQRT(16)", "DOUBLE 4"},
		{"SQRT(-1)", "ERROR 2201F"},
		{"CBRT(27)", "DOUBLE 3"},
		{"EXP(0)", "DOUBLE 1"},
		{"LN(0)", "ERROR 2201E"},
		{"LOG(100)", "DOUBLE 2"},
		{"LOG(2, 8)", "DOUBLE 3"},
		{"TRUNC(amount)", "DOUBLE 12"},
		{"ROUND(SIN(0) + COS(0) + TAN(0))", "DOUBLE 1"},
		{"ATAN2(1, 1) * 4 = PI()", "BOOLEAN t"},
		{"RANDOM() >= 0 AND RANDOM() < 1", "BOOLEAN t"},
		{"DATE_TRUNC('hour', ts)", "TIMESTAMP 2026-11-30 05:00:00"},
		{"DATE_TRUNC('week', ts)", "TIMESTAMP 2026-11-30 00:00:00"},
		{"DATE_PART('second', ts)", "DOUBLE 10.25"},
		{"TO_TIMESTAMP(1709210096.789)", "TIMESTAMP 2024-02-29 12:34:56.789"},
		{"TO_CHAR(TIMESTAMP '2024-02-29 12:34:56.789', 'YYYY-MM-DD HH24:MI:SS.MS')", "VARCHAR 2024-02-29 12:34:56.789"},
		{"TO_CHAR(TIMESTAMP '2024-02-29 12:34:56.789', 'Day, Mon DD HH12 AM Q')", "VARCHAR Thursday , Feb 29 12 PM 1"},
		{"TO_CHAR(TIMESTAMP '2024-02-29 12:34:56.789', 'FMDay \"the\" DDD')", "VARCHAR Thursday the 060"},
		{"payload -> 'a' -> 'b' ->> 1", "VARCHAR x"},
		{"payload -> 'a' -> 'b' -> -2", "JSON 10"},
		{"payload ->> 's'", `VARCHAR he said "hi"`},
		{"payload ->> 'n'", "NULL"},
		{"JSON_EXTRACT_PATH_TEXT(payload, 'a', 'b', '0')", "VARCHAR 10"},
		{"JSON_EXTRACT_PATH(payload, 'a')", `JSON {"b": [10, "x"]}`},
		{"CAST(ts AS VARCHAR)::TIMESTAMP = ts", "BOOLEAN t"},
		{"'42'::INT + 1", "INT 43"},
		{"CONCAT_WS('-', 'a', NULL, 'b')", "VARCHAR a-b"},
	}
	for _, c := range cases {
		if got := evalShow(t, c.expr); got != c.want {
			t.Errorf("%s = %s, want %s", c.expr, got, c.want)
		}
	}
}

// TestFunctionTableInDocs keeps docs/sql.md's function table equal to the registry.
func TestFunctionTableInDocs(t *testing.T) {
	b, err := readDoc()
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- functions -->\n", "<!-- /functions -->"
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/sql.md has no %q ... %q section", begin, end)
	}
	want := FunctionTable()
	if got := s[i+len(begin) : j]; got != want {
		if *rewriteGolden {
			if err := writeDoc(s[:i+len(begin)] + want + s[j:]); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/sql.md's function table differs from the registry; run go test ./sql -run TestFunctionTableInDocs -rewrite\n--- registry:\n%s", want)
	}
	for _, d := range Funcs() {
		if !d.Hidden && !d.Unlisted && (d.Doc == "" || d.Sig == "") {
			t.Errorf("function %s has no documentation line", d.Name)
		}
	}
}

// TestAggregateTableInDocs keeps docs/sql.md's aggregate table equal to the registry.
func TestAggregateTableInDocs(t *testing.T) {
	b, err := readDoc()
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- aggregates -->\n", "<!-- /aggregates -->"
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/sql.md has no %q ... %q section", begin, end)
	}
	want := AggregateTable()
	if got := s[i+len(begin) : j]; got != want {
		if *rewriteGolden {
			if err := writeDoc(s[:i+len(begin)] + want + s[j:]); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/sql.md's aggregate table differs from the registry; run go test ./sql -run TestAggregateTableInDocs -rewrite\n--- registry:\n%s", want)
	}
}

func readDoc() ([]byte, error) { return os.ReadFile("../docs/sql.md") }

func writeDoc(s string) error { return os.WriteFile("../docs/sql.md", []byte(s), 0o644) }

// The 64-bit division fast path agrees with the arbitrary-precision path digit for digit.
func TestNumericDivFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		a := r.Int64N(2000000001) - 1000000000
		b := r.Int64N(20000001) - 10000000
		if i%3 == 0 {
			a = r.Int64() >> r.UintN(63)
		}
		if b == 0 {
			continue
		}
		sa, sb := uint8(r.UintN(10)), uint8(r.UintN(10))
		fast, ok := smallDiv(a, sa, b, sb)
		if !ok {
			continue
		}
		var x, y apd.Decimal
		slow := numericDiv(decimalOf(Decimal(a, sa), &x), decimalOf(Decimal(b, sb), &y))
		if Text(fast) != Text(slow) {
			t.Fatalf("%s / %s: fast %s, apd %s", Text(Decimal(a, sa)), Text(Decimal(b, sb)), Text(fast), Text(slow))
		}
	}
}

// Constant folding makes a strict call with a NULL constant argument NULL, and leaves the
// calls that look at NULLs themselves (the registry entry's Nulls) to run.
func TestNullRuleFolding(t *testing.T) {
	for expr, null := range map[string]bool{
		"COALESCE(NULL, 1)": false, "IFNULL(NULL, 1)": false, "GREATEST(NULL, 2)": false, "LEAST(NULL, 2)": false,
		"CONCAT(NULL, 'a')": false, "CONCAT_WS(',', NULL, 'a')": false, "NULLIF(1, NULL)": false,
		"NULLIF(NULL, 1)": true, "UPPER(NULL)": true, "ABS(NULL)": true,
	} {
		if got := evalShow(t, expr); (got == "NULL") != null || strings.HasPrefix(got, "ERROR") {
			t.Errorf("%s = %s", expr, got)
		}
	}
}
