package sql

import (
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"testing"
)

// evalRow is the orders row the evaluation cases read:
// order_id=7, user_id='u7', amount=12.5, ts=2026-11-30T05:00:10.250Z (a Monday),
// price=19.99, qty=3, payload=JSON, vip=true.
var evalRow = Row{
	BigInt(7), Varchar("u7"), Double(12.5), Timestamp(1796014810250), Decimal(1999, 2), Int(3),
	JSONValue(`{"a": {"b": [10, "x"]}, "s": "he said \"hi\"", "n": null, "t": true}`), Bool(true),
}

// evalSQL binds "SELECT expr FROM orders" and evaluates it over row.
func evalSQL(t *testing.T, expr string, row Row) (Value, error) {
	t.Helper()
	sts, err := Parse("SELECT " + expr + " FROM orders")
	if err != nil {
		return Null, err
	}
	q, err := Bind(sts[0].(*Select), newTestCatalog())
	if err != nil {
		return Null, err
	}
	f, err := Compile(q.Select[0])
	if err != nil {
		return Null, err
	}
	v := f(row)
	if v.K != KindNull && v.K != q.Select[0].Type().Kind {
		t.Errorf("%s: value kind %s differs from the bound type %s", expr, v.K, q.Select[0].Type())
	}
	return v, nil
}

func show(v Value) string {
	if v.K == KindNull {
		return "NULL"
	}
	return v.K.String() + " " + v.String()
}

func TestEval(t *testing.T) {
	cases := []struct{ expr, want string }{
		// arithmetic and promotion
		{"1 + 2", "INT 3"},
		{"qty + 1", "INT 4"},
		{"qty * order_id", "BIGINT 21"},
		{"7 / 2", "INT 3"},
		{"-7 / 2", "INT -3"},
		{"7 % 3", "INT 1"},
		{"-7 % 3", "INT -1"},
		{"MOD(7, -3)", "INT 1"},
		{"7 DIV 2", "INT 3"},
		{"7 / 0", "NULL"},
		// a numeric string literal (or a parameter sent as text) in arithmetic reads as a number
		{"amount * '2'", "DOUBLE 25"},
		{"qty + '1.5'", "DOUBLE 4.5"},
		{"'4' - qty", "BIGINT 1"},
		{"7 % 0", "NULL"},
		{"amount / 0", "NULL"},
		{"amount * 2", "DOUBLE 25"},
		{"amount / 4", "DOUBLE 3.125"},
		{"amount + qty", "DOUBLE 15.5"},
		{"MOD(amount, 5)", "DOUBLE 2.5"},
		{"price + 1", "DECIMAL 20.99"},
		{"price - 0.005", "DECIMAL 19.985"},
		{"price * 2", "DECIMAL 39.98"},
		{"price * price", "DECIMAL 399.6001"},
		{"price / 4", "DECIMAL 4.9975000000000000"},
		{"price / 0", "NULL"},
		{"price + amount", "DOUBLE 32.489999999999995"},
		{"price % 3", "DECIMAL 1.99"},
		{"-price", "DECIMAL -19.99"},
		{"-qty", "INT -3"},
		{"- -5", "INT 5"},
		{"9223372036854775807 + 1", "NULL"},
		{"4611686018427387904 * 2", "NULL"},
		{"1.5 + 1", "DECIMAL 2.5"},
		{"1e2 + 1", "DECIMAL 101"},
		{"NULL + 1", "NULL"},
		// comparison, three-valued logic
		{"amount > 10", "BOOLEAN true"},
		{"amount > 12.5", "BOOLEAN false"},
		{"amount >= 12.5", "BOOLEAN true"},
		{"qty = 3.0", "BOOLEAN true"},
		{"price = 19.99", "BOOLEAN true"},
		{"price < amount", "BOOLEAN false"},
		{"price > 19.989", "BOOLEAN true"},
		{"user_id = 'u7'", "BOOLEAN true"},
		{"user_id <> 'u7'", "BOOLEAN false"},
		{"user_id < 'u8'", "BOOLEAN true"},
		{"user_id != 'x'", "BOOLEAN true"},
		{"ts > '2026-11-30T05:00:10Z'", "BOOLEAN true"},
		{"ts = '2026-11-30 05:00:10.250'", "BOOLEAN true"},
		{"ts < TIMESTAMP '2026-11-30T05:00:10.249Z'", "BOOLEAN false"},
		{"NULL = NULL", "NULL"},
		{"qty = NULL", "NULL"},
		{"TRUE AND NULL", "NULL"},
		{"FALSE AND NULL", "BOOLEAN false"},
		{"NULL AND FALSE", "BOOLEAN false"},
		{"TRUE OR NULL", "BOOLEAN true"},
		{"NULL OR FALSE", "NULL"},
		{"NOT NULL", "NULL"},
		{"NOT vip", "BOOLEAN false"},
		{"vip AND amount > 100", "BOOLEAN false"},
		{"vip OR amount > 100", "BOOLEAN true"},
		{"NULL IS NULL", "BOOLEAN true"},
		{"qty IS NULL", "BOOLEAN false"},
		{"qty IS NOT NULL", "BOOLEAN true"},
		{"NULL IS TRUE", "BOOLEAN false"},
		{"NULL IS NOT FALSE", "BOOLEAN true"},
		{"vip IS TRUE", "BOOLEAN true"},
		// BETWEEN, IN, LIKE
		{"qty BETWEEN 1 AND 3", "BOOLEAN true"},
		{"qty BETWEEN 4 AND 9", "BOOLEAN false"},
		{"qty NOT BETWEEN 4 AND 9", "BOOLEAN true"},
		{"qty BETWEEN NULL AND 2", "BOOLEAN false"},
		{"qty BETWEEN NULL AND 5", "NULL"},
		{"amount BETWEEN 12.5 AND 12.5", "BOOLEAN true"},
		{"ts BETWEEN '2026-11-30' AND '2026-12-01'", "BOOLEAN true"},
		{"qty IN (1, 2, 3)", "BOOLEAN true"},
		{"qty IN (1, 2)", "BOOLEAN false"},
		{"qty IN (1, NULL)", "NULL"},
		{"qty IN (3, NULL)", "BOOLEAN true"},
		{"qty NOT IN (1, 2)", "BOOLEAN true"},
		{"qty NOT IN (1, NULL)", "NULL"},
		{"user_id IN ('u1', 'u7')", "BOOLEAN true"},
		{"amount IN (12.5, 3)", "BOOLEAN true"},
		{"qty IN (order_id - 4, 9)", "BOOLEAN true"},
		{"NULL IN (1)", "NULL"},
		{"user_id LIKE 'u%'", "BOOLEAN true"},
		{"user_id LIKE 'u_'", "BOOLEAN true"},
		{"user_id LIKE '_'", "BOOLEAN false"},
		{"user_id LIKE '%7'", "BOOLEAN true"},
		{"user_id LIKE '%u%'", "BOOLEAN true"},
		{"user_id LIKE 'U%'", "BOOLEAN false"},
		{"user_id ILIKE 'U%'", "BOOLEAN true"},
		{"user_id NOT LIKE 'x%'", "BOOLEAN true"},
		{"'a%b' LIKE 'a\\%b'", "BOOLEAN true"},
		{"'axb' LIKE 'a\\%b'", "BOOLEAN false"},
		{"'abcbd' LIKE 'a%b_'", "BOOLEAN true"},
		{"'abcbde' LIKE 'a%b_'", "BOOLEAN false"},
		{"'héllo' LIKE 'h_llo'", "BOOLEAN true"},
		{"'' LIKE ''", "BOOLEAN true"},
		{"'a' LIKE ''", "BOOLEAN false"},
		{"'a|b' LIKE 'a||b' ESCAPE '|'", "BOOLEAN true"},
		{"NULL LIKE 'a'", "NULL"},
		{"user_id LIKE CONCAT('u', '%')", "BOOLEAN true"},
		// CASE, COALESCE, IF
		{"CASE WHEN amount > 100 THEN 'big' WHEN amount > 10 THEN 'mid' ELSE 'small' END", "VARCHAR mid"},
		{"CASE WHEN amount > 100 THEN 'big' END", "NULL"},
		{"CASE qty WHEN 1 THEN 'one' WHEN 3 THEN 'three' END", "VARCHAR three"},
		{"CASE qty WHEN 1 THEN 1 ELSE 2.5 END", "DECIMAL 2.5"},
		{"CASE WHEN NULL THEN 1 ELSE 2 END", "INT 2"},
		{"CASE qty WHEN 3 THEN qty END", "INT 3"},
		{"COALESCE(NULL, NULL, 'x')", "VARCHAR x"},
		{"COALESCE(NULL, qty, 2.5)", "DECIMAL 3"},
		{"COALESCE(NULL, NULL)", "NULL"},
		{"IFNULL(NULL, 4)", "INT 4"},
		{"IF(vip, 'y', 'n')", "VARCHAR y"},
		{"IF(NULL, 'y', 'n')", "VARCHAR n"},
		// CAST
		{"CAST(amount AS INT)", "INT 12"},
		{"CAST(12.4 AS BIGINT)", "BIGINT 12"},
		{"CAST(-2.5 AS BIGINT)", "BIGINT -3"},
		{"CAST(amount AS VARCHAR)", "VARCHAR 12.5"},
		{"CAST(user_id AS INT)", "NULL"},
		{"CAST(CONCAT('4', '2') AS INT)", "INT 42"},
		{"CAST(CONCAT(' 4.5', '') AS DOUBLE)", "DOUBLE 4.5"},
		{"CAST(price AS DECIMAL(10,1))", "DECIMAL 20.0"},
		{"CAST(price AS DECIMAL(3,2))", "NULL"},
		{"CAST(amount AS DECIMAL(6,3))", "DECIMAL 12.500"},
		{"CAST(price AS DOUBLE)", "DOUBLE 19.99"},
		{"CAST(ts AS VARCHAR)", "VARCHAR 2026-11-30 05:00:10.25"},
		{"CAST(ts AS BIGINT)", "BIGINT 1796014810250"},
		{"CAST(1796014810250 AS TIMESTAMP)", "TIMESTAMP 2026-11-30T05:00:10.250Z"},
		{"CAST('2026-11-30T05:00:00+01:00' AS TIMESTAMP)", "TIMESTAMP 2026-11-30T04:00:00.000Z"},
		{"CAST(CONCAT('no', 'pe') AS TIMESTAMP)", "NULL"},
		{"CAST('yes' AS BOOLEAN)", "BOOLEAN true"},
		{"CAST(0 AS BOOLEAN)", "BOOLEAN false"},
		{"CAST(vip AS INT)", "INT 1"},
		{"CAST('[1,2]' AS JSON)", "JSON [1,2]"},
		{"CAST(qty AS JSON)", "JSON 3"},
		{"CAST(user_id AS JSON)", "NULL"},
		{"CAST(order_id * 1000000000 AS INT)", "NULL"},
		{"CAST(NULL AS INT)", "NULL"},
		// strings
		{"LOWER('AbC')", "VARCHAR abc"},
		{"UPPER(user_id)", "VARCHAR U7"},
		{"LCASE('X')", "VARCHAR x"},
		{"CONCAT(user_id, '-', order_id, '-', amount)", "VARCHAR u7-7-12.5"},
		{"CONCAT(user_id, NULL)", "VARCHAR u7"},
		{"user_id || '!'", "VARCHAR u7!"},
		{"SUBSTRING('hello', 2)", "VARCHAR ello"},
		{"SUBSTRING('hello', 2, 3)", "VARCHAR ell"},
		{"SUBSTRING('hello' FROM 1 FOR 2)", "VARCHAR he"},
		{"SUBSTRING('hello', -3)", "VARCHAR hello"},
		{"SUBSTRING('hello', -3, 2)", "VARCHAR "},
		{"SUBSTRING('hello', 0)", "VARCHAR hello"},
		{"SUBSTRING('hello', 9)", "VARCHAR "},
		{"SUBSTRING('hello', 4, 100)", "VARCHAR lo"},
		{"SUBSTRING('héllo', 2, 2)", "VARCHAR él"},
		{"SUBSTR('hello', 2, 1)", "VARCHAR e"},
		{"LENGTH('héllo')", "INT 5"},
		{"LENGTH('')", "INT 0"},
		{"CHAR_LENGTH(user_id)", "INT 2"},
		{"TRIM('  a b  ')", "VARCHAR a b"},
		{"TRIM(LEADING 'x' FROM 'xxaxx')", "VARCHAR axx"},
		{"TRIM(TRAILING 'x' FROM 'xxaxx')", "VARCHAR xxa"},
		{"TRIM(BOTH 'ab' FROM 'ababcab')", "VARCHAR c"},
		{"LTRIM('  a ')", "VARCHAR a "},
		{"RTRIM('  a ')", "VARCHAR   a"},
		// math
		{"ABS(-5)", "INT 5"},
		{"ABS(qty - 10)", "INT 7"},
		{"ABS(-2.5)", "DECIMAL 2.5"},
		{"ABS(0 - amount)", "DOUBLE 12.5"},
		{"ROUND(amount)", "DOUBLE 12"},
		{"ROUND(-2.5e0)", "DECIMAL -3"},
		{"ROUND(1.2345e0, 2)", "DECIMAL 1.23"},
		{"ROUND(1234.5e0, -2)", "DECIMAL 1200"},
		{"ROUND(price, 1)", "DECIMAL 20.0"},
		{"ROUND(price)", "DECIMAL 20"},
		{"ROUND(1.25, 1)", "DECIMAL 1.3"},
		{"ROUND(-1.25, 1)", "DECIMAL -1.3"},
		{"ROUND(1250, -2)", "DECIMAL 1300"},
		{"ROUND(-1250, -2)", "DECIMAL -1300"},
		{"ROUND(1249, -2)", "DECIMAL 1200"},
		{"FLOOR(amount)", "DOUBLE 12"},
		{"FLOOR(-1.5)", "DECIMAL -2"},
		{"FLOOR(price)", "DECIMAL 19"},
		{"CEIL(price)", "DECIMAL 20"},
		{"CEILING(-1.5)", "DECIMAL -1"},
		{"CEIL(amount)", "DOUBLE 13"},
		{"FLOOR(qty)", "DOUBLE 3"},
		{"MOD(qty, 2)", "INT 1"},
		// time
		{"ts + INTERVAL '10' SECOND", "TIMESTAMP 2026-11-30T05:00:20.250Z"},
		{"ts - INTERVAL 1 DAY", "TIMESTAMP 2026-11-29T05:00:10.250Z"},
		{"ts + INTERVAL '1.5' MINUTE", "TIMESTAMP 2026-11-30T05:01:40.250Z"},
		{"ts + INTERVAL '250 milliseconds'", "TIMESTAMP 2026-11-30T05:00:10.500Z"},
		{"INTERVAL '2' HOUR + ts", "TIMESTAMP 2026-11-30T07:00:10.250Z"},
		{"ts - TIMESTAMP '2026-11-30 05:00:00'", "INTERVAL 10.25s"},
		{"EXTRACT(YEAR FROM ts)", "DECIMAL 2026"},
		{"EXTRACT(QUARTER FROM ts)", "DECIMAL 4"},
		{"EXTRACT(MONTH FROM ts)", "DECIMAL 11"},
		{"EXTRACT(WEEK FROM ts)", "DECIMAL 49"},
		{"EXTRACT(DAY FROM ts)", "DECIMAL 30"},
		{"EXTRACT(HOUR FROM ts)", "DECIMAL 5"},
		{"EXTRACT(MINUTE FROM ts)", "DECIMAL 0"},
		{"EXTRACT(SECOND FROM ts)", "DECIMAL 10.250000"},
		{"EXTRACT(MICROSECOND FROM ts)", "DECIMAL 10250000"},
		{"EXTRACT(YEAR FROM '1999-12-31')", "DECIMAL 1999"},
		{"DATE_FORMAT(ts, '%Y-%m-%d %H:%i:%s.%f')", "VARCHAR 2026-11-30 05:00:10.250000"},
		{"DATE_FORMAT(ts, '%W %a %M %b %D %e %c %y %j')", "VARCHAR Monday Mon November Nov 30th 30 11 26 334"},
		{"DATE_FORMAT(ts, '%h:%i %p|%r|%T|%k|%l|%w|%%|%q')", "VARCHAR 05:00 AM|05:00:10 AM|05:00:10|5|5|1|%|q"},
		{"DATE_FORMAT(ts + INTERVAL '13' HOUR, '%I %p %x-%v')", "VARCHAR 06 PM 2026-49"},
		{"DATE_FORMAT(NULL, '%Y')", "NULL"},
		// JSON
		{"payload->'$.a.b[0]'", "JSON 10"},
		{"payload->'$.a.b'", `JSON [10, "x"]`},
		{"payload->>'$.a.b[1]'", "VARCHAR x"},
		{"payload->'$.a.b[1]'", `JSON "x"`},
		{"payload->>'$.s'", `VARCHAR he said "hi"`},
		{"payload->>'$.n'", "NULL"},
		{"payload->'$.n'", "JSON null"},
		{"payload->'$.t'", "JSON true"},
		{"payload->'$.missing'", "NULL"},
		{"payload->'$.a.b[5]'", "NULL"},
		{"payload->'$.a.zz.b'", "NULL"},
		{"JSON_EXTRACT(payload, '$.a')", `JSON {"b": [10, "x"]}`},
		{"JSON_EXTRACT(payload, '$')", `JSON {"a": {"b": [10, "x"]}, "s": "he said \"hi\"", "n": null, "t": true}`},
		{"JSON_EXTRACT('[1, {\"k\": 2}]', '$[1].k')", "JSON 2"},
		{"JSON_EXTRACT('{\"a b\": 1}', '$.\"a b\"')", "JSON 1"},
		{"JSON_UNQUOTE('\"a\\nb\"')", "VARCHAR a\nb"},
		{"CAST(payload->>'$.a.b[0]' AS INT) + 1", "INT 11"},
	}
	for _, c := range cases {
		v, err := evalSQL(t, c.expr, evalRow)
		if err != nil {
			t.Errorf("%s: %s", c.expr, dumpErr(err))
			continue
		}
		if got := show(v); got != c.want {
			t.Errorf("%s = %s, want %s", c.expr, got, c.want)
		}
	}
}

func TestNowIsCurrent(t *testing.T) {
	v, err := evalSQL(t, "NOW()", evalRow)
	if err != nil {
		t.Fatal(err)
	}
	// NOW() is after the fixture's instant (2026-11-30) and within a century of it.
	if v.K != KindTimestamp || v.I < 1700000000000 || v.I > 5000000000000 {
		t.Fatalf("NOW() = %s", show(v))
	}
}

func TestCompare(t *testing.T) {
	cases := []struct {
		a, b Value
		want int
	}{
		{Null, Null, 0},
		{Null, Int(1), -1},
		{Int(1), Null, 1},
		{Int(1), BigInt(1), 0},
		{Int(1), Double(1.5), -1},
		{Decimal(150, 2), Double(1.5), 0},
		{Decimal(150, 2), Decimal(15, 1), 0},
		{Decimal(151, 2), Decimal(15, 1), 1},
		{BigInt(2), Decimal(199, 2), 1},
		{Double(math.NaN()), Double(0), 1}, // PostgreSQL: NaN above every number
		{Varchar("a"), Varchar("b"), -1},
		{Timestamp(5), Timestamp(4), 1},
		{Bool(false), Bool(true), -1},
	}
	for _, c := range cases {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", show(c.a), show(c.b), got, c.want)
		}
		if got := Compare(c.b, c.a); got != -c.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", show(c.b), show(c.a), got, -c.want)
		}
		if (c.want == 0) != Equal(c.a, c.b) {
			t.Errorf("Equal(%s, %s) disagrees with Compare", show(c.a), show(c.b))
		}
		if c.want == 0 && HashValue(HashSeed, c.a) != HashValue(HashSeed, c.b) {
			t.Errorf("equal values %s and %s hash differently", show(c.a), show(c.b))
		}
	}
	if HashRow(Row{Varchar("a"), Int(1)}) == HashRow(Row{Varchar("b"), Int(1)}) {
		t.Error("different rows hash alike")
	}
	// The hash is fixed across processes: this figure must never change, exchanges depend on it.
	if h := HashRow(Row{Varchar("u7"), BigInt(42)}); h != HashRow(Row{Varchar("u7"), Int(42)}) {
		t.Errorf("INT and BIGINT keys hash differently")
	}
}

func TestAppendKey(t *testing.T) {
	vals := []Value{Null, Bool(false), Bool(true), BigInt(-5), BigInt(0), BigInt(7), Double(-1.5), Double(0), Double(2),
		Varchar(""), Varchar("a"), Varchar("a\x00"), Varchar("ab"), Timestamp(10), Decimal(-100, 2), Decimal(5, 2)}
	seen := map[string]Value{}
	for _, v := range vals {
		k := string(AppendKey(nil, v))
		if prev, dup := seen[k]; dup {
			t.Errorf("%s and %s encode alike", show(prev), show(v))
		}
		seen[k] = v
	}
	// Same-kind order is byte order.
	pairs := [][2]Value{{BigInt(-5), BigInt(7)}, {Double(-1.5), Double(2)}, {Varchar("a"), Varchar("ab")}, {Varchar("a"), Varchar("a\x00")}}
	for _, p := range pairs {
		if string(AppendKey(nil, p[0])) >= string(AppendKey(nil, p[1])) {
			t.Errorf("key of %s does not sort before %s", show(p[0]), show(p[1]))
		}
	}
}

func TestCompileNoAllocs(t *testing.T) {
	exprs := []string{"amount > 10 AND qty < 5", "qty * 2 + order_id", "price + 1", "user_id = 'u7'",
		"ts + INTERVAL '1' SECOND", "CASE WHEN amount > 100 THEN 1 ELSE 0 END", "qty IN (1, 2, 3)",
		"user_id LIKE 'u%'", "COALESCE(qty, 0)", "EXTRACT(HOUR FROM ts)", "amount BETWEEN 1 AND 20"}
	for _, e := range exprs {
		sts, err := Parse("SELECT " + e + " FROM orders")
		if err != nil {
			t.Fatal(err)
		}
		q, err := Bind(sts[0].(*Select), newTestCatalog())
		if err != nil {
			t.Fatal(err)
		}
		f := MustCompile(q.Select[0])
		row := evalRow
		if n := testing.AllocsPerRun(200, func() { f(row) }); n != 0 {
			t.Errorf("%s allocates %.1f times per row", e, n)
		}
	}
}

func TestInsertRows(t *testing.T) {
	sts, err := Parse(`INSERT INTO orders (order_id, user_id, amount, ts, price) VALUES (1, 'u1', 9.5, '2026-11-30T05:00:00Z', 2.345), (2, NULL, -1, 1796014810250, '3')`)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := sts[0].(*Insert).Rows(newTestCatalog()["orders"].Schema)
	if err != nil {
		t.Fatal(dumpErr(err))
	}
	want := []Row{
		{BigInt(1), Varchar("u1"), Double(9.5), Timestamp(1796014800000), Decimal(235, 2), Null, Null, Null},
		{BigInt(2), Null, Double(-1), Timestamp(1796014810250), Decimal(300, 2), Null, Null, Null},
	}
	for i := range want {
		if !EqualRows(rows[i], want[i]) {
			t.Errorf("row %d = %v, want %v", i, rows[i], want[i])
		}
		for j := range want[i] {
			if rows[i][j].K != want[i][j].K {
				t.Errorf("row %d col %d kind %s, want %s", i, j, rows[i][j].K, want[i][j].K)
			}
		}
	}
	for _, bad := range []struct{ sql, code string }{
		{`INSERT INTO orders (nope) VALUES (1)`, CodeUnknownColumn},
		{`INSERT INTO orders (order_id) VALUES (1, 2)`, CodeSyntax},
		// PostgreSQL's codes: invalid text representation, numeric value out of range.
		{`INSERT INTO orders (order_id) VALUES ('x')`, "22P02"},
		{`INSERT INTO orders (qty) VALUES (99999999999)`, "22003"},
	} {
		sts, err := Parse(bad.sql)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sts[0].(*Insert).Rows(newTestCatalog()["orders"].Schema)
		if e, ok := err.(*Error); !ok || e.Code != bad.code {
			t.Errorf("%s: got %v, want code %s", bad.sql, err, bad.code)
		}
	}
}

func TestParams(t *testing.T) {
	sts, err := ParseParams("SELECT amount FROM orders WHERE user_id = $1 AND amount > $2", []Value{Varchar("u7"), Double(3)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := Bind(sts[0].(*Select), newTestCatalog())
	if err != nil {
		t.Fatal(dumpErr(err))
	}
	if !MustCompile(q.Where)(evalRow).Truth() {
		t.Errorf("WHERE %s is not true for the fixture row", q.Where)
	}
}

// TestLikeAgainstRegexp checks the LIKE matcher against an independent translation of
// every pattern over a small alphabet into a regular expression.
func TestLikeAgainstRegexp(t *testing.T) {
	alphabet := []string{"a", "b", "%", "_", "é"}
	var patterns []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		patterns = append(patterns, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(prefix+c, n-1)
		}
	}
	gen("", 4)
	inputs := []string{"", "a", "b", "ab", "ba", "aab", "abb", "bab", "abab", "é", "aé", "éb", "aaaa", "babab"}
	for _, p := range patterns {
		re := "^"
		for _, r := range p {
			switch r {
			case '%':
				re += ".*"
			case '_':
				re += "."
			default:
				re += regexp.QuoteMeta(string(r))
			}
		}
		rx := regexp.MustCompile(re + "$")
		m := CompileLike(p, '\\')
		for _, s := range inputs {
			if got, want := m(s), rx.MatchString(s); got != want {
				t.Errorf("%q LIKE %q = %v, want %v", s, p, got, want)
			}
		}
	}
}

// TestDecimalArithmetic checks DECIMAL + - * against exact rational arithmetic.
func TestDecimalArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		a := Decimal(rng.Int64N(2000000)-1000000, uint8(rng.IntN(4)))
		b := Decimal(rng.Int64N(2000000)-1000000, uint8(rng.IntN(4)))
		ra := new(big.Rat).SetFrac64(a.I, int64(Pow10(a.Scale)))
		rb := new(big.Rat).SetFrac64(b.I, int64(Pow10(b.Scale)))
		for _, op := range []string{"+", "-", "*"} {
			e, err := NewCall(op, NewLiteral(a), NewLiteral(b))
			if err != nil {
				t.Fatal(err)
			}
			got := MustCompile(&Call{Func: op, Args: []Expr{&ColumnRef{Index: 0, Name: "a", T: e.(*Call).Args[0].Type()}, &ColumnRef{Index: 1, Name: "b", T: e.(*Call).Args[1].Type()}}, T: e.Type()})(Row{a, b})
			want := new(big.Rat)
			switch op {
			case "+":
				want.Add(ra, rb)
			case "-":
				want.Sub(ra, rb)
			default:
				want.Mul(ra, rb)
			}
			if got.K != KindDecimal || got.String() != want.FloatString(int(got.Scale)) {
				t.Fatalf("%s %s %s = %s, want %s", a, op, b, show(got), want.FloatString(int(e.Type().Scale)))
			}
		}
		// Parsing the text form gives the value back.
		if u, ok := parseDecimal(a.String(), a.Scale); !ok || u != a.I {
			t.Fatalf("parseDecimal(%q) = %d, %v", a.String(), u, ok)
		}
	}
}
