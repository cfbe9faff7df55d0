package sql

// The differential test: a seeded generator of typed expressions over a fixed table with
// edge values, evaluated by rsql (Parse, Bind, Compile over the rows) and by a private
// PostgreSQL 15 (internal/pgtest), compared row by row. Doubles are compared with a relative
// tolerance of 1e-12; everything else by its PostgreSQL text form (JSON semantically).
// Every difference must be fixed or match a pattern of docs/sql.md's table of deliberate
// differences (a regular expression over the expression, a newline, and the description of
// the difference: "row N: PostgreSQL gives X, rsql fails (22008)").
//
//	go test ./sql -run TestDifferentialPostgres                  # 400 expressions
//	RSQL_PGDIFF_N=5000 go test ./sql -run TestDifferentialPostgres -v
//	RSQL_PGDIFF_SEED=7 ...                                       # another seed
//	RSQL_PGDIFF_SHOW=20 ...                                      # print up to 20 differences

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rsql/internal/pgtest"
)

// diffSchema is the table both engines read. PostgreSQL's column types are in pgType.
var diffSchema = Schema{
	{"id", TypeBigInt}, {"i", TypeInt}, {"b", TypeBigInt}, {"d", TypeDouble},
	{"n", Type{Kind: KindDecimal, Precision: 18, Scale: 4}}, {"s", TypeVarchar},
	{"ts", TypeTimestamp}, {"bo", TypeBool}, {"j", TypeJSON},
}

var diffPGTypes = []string{"bigint", "integer", "bigint", "double precision", "numeric(18,4)", "text",
	"timestamp", "boolean", "jsonb"}

// diffRows are the table's rows as SQL literals (PostgreSQL syntax) and as rsql Values.
type diffRow struct {
	lit  []string
	vals Row
}

func mustTS(s string) int64 {
	ms, ok := ParseTimestamp(s)
	if !ok {
		panic(s)
	}
	return ms
}

func diffTable() []diffRow {
	nul := "NULL"
	j1 := `{"a": {"b": [10, "x"]}, "s": "t", "n": null}`
	j2 := `{"k": [1, 2, 3], "s": "ÄÖ"}`
	return []diffRow{
		{[]string{"1", "0", "0", "0", "0", "''", "'1970-01-01 00:00:00'", "false", "'{}'"},
			Row{BigInt(1), Int(0), BigInt(0), Double(0), Decimal(0, 4), Varchar(""), Timestamp(0), Bool(false), JSONValue(`{}`)}},
		{[]string{"2", "2147483647", "9223372036854775807", "1e300", "99999999999999.9999", "'abc'", "'9999-12-31 23:59:59.999'", "true", "'" + j1 + "'"},
			Row{BigInt(2), Int(math.MaxInt32), BigInt(math.MaxInt64), Double(1e300), Decimal(999999999999999999, 4), Varchar("abc"), Timestamp(mustTS("9999-12-31 23:59:59.999")), Bool(true), JSONValue(j1)}},
		{[]string{"3", "-2147483648", "-9223372036854775808", "-1e-300", "-14.9", "'ÄÖü 日本'", "'0001-01-01 00:00:00'", nul, "'" + j2 + "'"},
			Row{BigInt(3), Int(math.MinInt32), BigInt(math.MinInt64), Double(-1e-300), Decimal(-149000, 4), Varchar("ÄÖü 日本"), Timestamp(mustTS("0001-01-01 00:00:00")), Null, JSONValue(j2)}},
		{[]string{"4", nul, nul, nul, nul, nul, nul, nul, nul},
			Row{BigInt(4), Null, Null, Null, Null, Null, Null, Null, Null}},
		{[]string{"5", "7", "-42", "'-0'", "0.1", "'  Hello World  '", "'2024-02-29 12:34:56.789'", "true", "'[1, \"two\", null]'"},
			Row{BigInt(5), Int(7), BigInt(-42), Double(math.Copysign(0, -1)), Decimal(1000, 4), Varchar("  Hello World  "), Timestamp(mustTS("2024-02-29 12:34:56.789")), Bool(true), JSONValue(`[1, "two", null]`)}},
		{[]string{"6", "-3", "3000000000", "2.5", "2.5", `'a%b_c\'`, "'2000-01-01 00:00:00'", "false", "'\"str\"'"},
			Row{BigInt(6), Int(-3), BigInt(3000000000), Double(2.5), Decimal(25000, 4), Varchar(`a%b_c\`), Timestamp(mustTS("2000-01-01 00:00:00")), Bool(false), JSONValue(`"str"`)}},
		{[]string{"7", "1", "1", "1e-300", "1.0005", "'ab,cd,,ef'", "'1999-12-31 23:59:59.5'", "true", "'{\"s\": \"u\"}'"},
			Row{BigInt(7), Int(1), BigInt(1), Double(1e-300), Decimal(10005, 4), Varchar("ab,cd,,ef"), Timestamp(mustTS("1999-12-31 23:59:59.5")), Bool(true), JSONValue(`{"s": "u"}`)}},
		{[]string{"8", "-1", "-1", "-123.456", "-0.0001", "'Straße ß'", "'1969-07-20 20:17:40'", "false", "'12.5'"},
			Row{BigInt(8), Int(-1), BigInt(-1), Double(-123.456), Decimal(-1, 4), Varchar("Straße ß"), Timestamp(mustTS("1969-07-20 20:17:40")), Bool(false), JSONValue(`12.5`)}},
	}
}

// exprGen generates expressions of a requested type, valid in PostgreSQL 15 and written in
// syntax rsql documents.
type exprGen struct{ r *rand.Rand }

func (g *exprGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

var genTypes = []string{"int", "bigint", "double", "numeric", "text", "bool", "ts"}

func (g *exprGen) gen(t string, depth int) string {
	if depth <= 0 || g.r.IntN(4) == 0 {
		return g.leaf(t)
	}
	d := depth - 1
	x := func(t string) string { return g.gen(t, d) }
	switch t {
	case "int":
		switch g.r.IntN(17) {
		case 0:
			return "(" + x("int") + " " + g.pick("+", "-", "*", "/", "%") + " " + x("int") + ")"
		case 1:
			return "ABS(" + x("int") + ")"
		case 2:
			return g.pick("LENGTH", "CHAR_LENGTH", "OCTET_LENGTH", "ASCII") + "(" + x("text") + ")"
		case 3:
			return "STRPOS(" + x("text") + ", " + x("text") + ")"
		case 4:
			return "POSITION(" + x("text") + " IN " + x("text") + ")"
		case 5:
			return "CAST(" + x(g.pick("bigint", "double", "numeric", "text")) + " AS INTEGER)"
		case 6:
			return g.pick("GREATEST", "LEAST", "COALESCE", "NULLIF") + "(" + x("int") + ", " + x("int") + ")"
		case 7:
			return "CASE WHEN " + x("bool") + " THEN " + x("int") + " ELSE " + x("int") + " END"
		case 8:
			return "-" + x("int")
		case 9:
			return "MOD(" + x("int") + ", " + x("int") + ")"
		}
		return g.leaf("int")
	case "bigint":
		switch g.r.IntN(9) {
		case 0:
			return "(" + x("bigint") + " " + g.pick("+", "-", "*", "/", "%") + " " + x(g.pick("int", "bigint")) + ")"
		case 1:
			return "ABS(" + x("bigint") + ")"
		case 2:
			return "CAST(" + x(g.pick("int", "double", "numeric", "text")) + " AS BIGINT)"
		case 3:
			return g.pick("GREATEST", "LEAST", "COALESCE") + "(" + x("bigint") + ", " + x("bigint") + ")"
		case 4:
			return "-" + x("bigint")
		}
		return g.leaf("bigint")
	case "double":
		switch g.r.IntN(16) {
		case 0:
			return "(" + x("double") + " " + g.pick("+", "-", "*", "/") + " " + x(g.pick("double", "int")) + ")"
		case 1:
			return g.pick("SQRT", "CBRT", "EXP", "LN", "LOG", "SIN", "COS", "TAN", "ABS", "SIGN", "FLOOR", "CEIL", "ROUND", "TRUNC") + "(" + x("double") + ")"
		case 2:
			return "POWER(" + x("double") + ", " + x("double") + ")"
		case 3:
			return "ATAN2(" + x("double") + ", " + x("double") + ")"
		case 4:
			return "CAST(" + x(g.pick("int", "bigint", "numeric", "text")) + " AS DOUBLE PRECISION)"
		case 5:
			return "DATE_PART('" + g.pick("year", "month", "day", "hour", "minute", "second", "dow", "doy", "epoch", "milliseconds") + "', " + x("ts") + ")"
		case 6:
			return "PI()"
		case 7:
			return "-" + x("double")
		}
		return g.leaf("double")
	case "numeric":
		switch g.r.IntN(14) {
		case 0:
			return "(" + x("numeric") + " " + g.pick("+", "-", "*", "/", "%") + " " + x(g.pick("numeric", "int", "bigint")) + ")"
		case 1:
			return "ROUND(" + x("numeric") + ", " + g.pick("-2", "-1", "0", "1", "2", "5") + ")"
		case 2:
			return g.pick("ROUND", "TRUNC", "FLOOR", "CEIL", "ABS", "SIGN") + "(" + x("numeric") + ")"
		case 3:
			return "TRUNC(" + x("numeric") + ", " + g.pick("-1", "0", "2") + ")"
		case 4:
			return "CAST(" + x(g.pick("int", "bigint", "double", "text")) + " AS NUMERIC)"
		case 5:
			return "EXTRACT(" + g.pick("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND", "QUARTER", "DOW", "DOY", "EPOCH") + " FROM " + x("ts") + ")"
		case 6:
			return "MOD(" + x("numeric") + ", " + x("numeric") + ")"
		case 7:
			return g.pick("GREATEST", "LEAST", "COALESCE") + "(" + x("numeric") + ", " + x("numeric") + ")"
		case 8:
			return "-" + x("numeric")
		}
		return g.leaf("numeric")
	case "text":
		switch g.r.IntN(26) {
		case 0:
			return g.pick("LOWER", "UPPER", "REVERSE", "INITCAP", "MD5", "LTRIM", "RTRIM", "TRIM") + "(" + x("text") + ")"
		case 1:
			return "CONCAT(" + x(g.pick(genTypes...)) + ", " + x(g.pick(genTypes...)) + ")"
		case 2:
			return "(" + x("text") + " || " + x("text") + ")"
		case 3:
			return "SUBSTRING(" + x("text") + ", " + g.smallInt() + ")"
		case 4:
			return "SUBSTRING(" + x("text") + ", " + g.smallInt() + ", " + g.smallInt() + ")"
		case 5:
			return "SUBSTRING(" + x("text") + " FROM " + g.smallInt() + " FOR " + g.smallInt() + ")"
		case 6:
			return "TRIM(" + g.pick("BOTH", "LEADING", "TRAILING") + " " + g.pick("'ab'", "' '", "'lo H'", "'é'") + " FROM " + x("text") + ")"
		case 7:
			return "REPLACE(" + x("text") + ", " + g.textLit() + ", " + g.textLit() + ")"
		case 8:
			return g.pick("LEFT", "RIGHT") + "(" + x("text") + ", " + g.smallInt() + ")"
		case 9:
			return g.pick("LPAD", "RPAD") + "(" + x("text") + ", " + g.pick("0", "3", "8", "-1") + g.pick("", ", 'xy'", ", ''") + ")"
		case 10:
			return "REPEAT(" + x("text") + ", " + g.pick("0", "2", "3", "-1") + ")"
		case 11:
			return "SPLIT_PART(" + x("text") + ", " + g.pick("','", "' '", "''", "'b'") + ", " + g.pick("1", "2", "3", "-1") + ")"
		case 12:
			return "CHR(" + g.pick("65", "223", "26085", "0") + ")"
		case 13:
			return "CAST(" + x(g.pick("int", "bigint", "double", "numeric", "bool", "ts")) + " AS VARCHAR)"
		case 14:
			return "REGEXP_REPLACE(" + x("text") + ", " + g.pick("'[aeiou]'", "'^ +| +$'", "'(b)(c)'", "'.'") + ", " + g.pick("'X'", "''", "'<\\1>'") + g.pick("", ", 'g'") + ")"
		case 15:
			return "TO_CHAR(" + x("ts") + ", " + g.pick("'YYYY-MM-DD'", "'YYYY-MM-DD HH24:MI:SS.MS'", "'HH12:MI AM'", "'Mon DD, YYYY'", "'DY Day MONTH'", "'YYYY\"Q\"Q WW DDD'") + ")"
		case 16:
			return "CASE WHEN " + x("bool") + " THEN " + x("text") + " ELSE " + x("text") + " END"
		case 17:
			return g.pick("COALESCE", "NULLIF", "GREATEST", "LEAST") + "(" + x("text") + ", " + x("text") + ")"
		case 18:
			return "(j ->> " + g.pick("'s'", "'a'", "'k'", "0", "1") + ")"
		case 19:
			return "JSONB_EXTRACT_PATH_TEXT(j, " + g.pick("'a', 'b'", "'s'", "'k'", "'a'") + ")"
		}
		return g.leaf("text")
	case "bool":
		switch g.r.IntN(14) {
		case 0, 1:
			ty := g.pick("int", "bigint", "double", "numeric", "text", "ts", "bool")
			return "(" + x(ty) + " " + g.pick("=", "<>", "<", "<=", ">", ">=") + " " + x(ty) + ")"
		case 2:
			return "(" + x("bool") + " " + g.pick("AND", "OR") + " " + x("bool") + ")"
		case 3:
			return "NOT " + x("bool")
		case 4:
			return "(" + x(g.pick(genTypes...)) + g.pick(" IS NULL", " IS NOT NULL") + ")"
		case 5:
			ty := g.pick("int", "numeric", "text", "bool")
			return "(" + x(ty) + g.pick(" IS DISTINCT FROM ", " IS NOT DISTINCT FROM ") + x(ty) + ")"
		case 6:
			ty := g.pick("int", "double", "text")
			return "(" + x(ty) + g.pick(" BETWEEN ", " NOT BETWEEN ") + x(ty) + " AND " + x(ty) + ")"
		case 7:
			ty := g.pick("int", "text", "numeric")
			return "(" + x(ty) + g.pick(" IN (", " NOT IN (") + x(ty) + ", " + x(ty) + ", " + g.leaf(ty) + "))"
		case 8:
			return "(" + x("text") + g.pick(" LIKE ", " NOT LIKE ", " ILIKE ") + g.pick("'a%'", "'%b_c%'", "'%\\\\'", "'_'", "'%ß'", "s") + ")"
		case 9:
			return "(" + x("text") + " ~ " + g.pick("'^a'", "'[0-9]+'", "'b.c'", "'ß$'") + ")"
		case 10:
			return "STARTS_WITH(" + x("text") + ", " + g.textLit() + ")"
		case 11:
			return "(" + x("bool") + g.pick(" IS TRUE", " IS NOT FALSE") + ")"
		}
		return g.leaf("bool")
	case "ts":
		switch g.r.IntN(7) {
		case 0:
			return "(" + x("ts") + " " + g.pick("+", "-") + " INTERVAL '" + g.pick("1", "2", "90") + "' " + g.pick("SECOND", "MINUTE", "HOUR", "DAY") + ")"
		case 1:
			return "DATE_TRUNC('" + g.pick("year", "quarter", "month", "week", "day", "hour", "minute", "second") + "', " + x("ts") + ")"
		case 2:
			return "CAST(TO_TIMESTAMP(" + x("double") + ") AS TIMESTAMP)"
		case 3:
			return g.pick("GREATEST", "LEAST", "COALESCE") + "(" + x("ts") + ", " + x("ts") + ")"
		case 4:
			return "CAST(" + x("text") + " AS TIMESTAMP)"
		}
		return g.leaf("ts")
	}
	panic(t)
}

func (g *exprGen) smallInt() string { return g.pick("-1", "0", "1", "2", "3", "5", "100") }

func (g *exprGen) textLit() string {
	return g.pick("'abc'", "''", "'ÄÖü 日本'", "' pad '", "'b'", "'1e3'", "'3.5'", "'42'", "' 12 '", "'2024-01-31 10:00:00'", "'NaN'", "'-Infinity'", "'t'", "'ß'", "'%'")
}

func (g *exprGen) leaf(t string) string {
	switch t {
	case "int":
		return g.pick("i", "i", "i", "0", "1", "-7", "42", "2147483647", "CAST(NULL AS INTEGER)")
	case "bigint":
		return g.pick("b", "b", "b", "9223372036854775807", "3000000000", "-42", "CAST(NULL AS BIGINT)")
	case "double":
		return g.pick("d", "d", "d", "CAST('1e300' AS DOUBLE PRECISION)", "CAST('-0' AS DOUBLE PRECISION)", "CAST(1.5 AS DOUBLE PRECISION)",
			"CAST('Infinity' AS DOUBLE PRECISION)", "CAST('NaN' AS DOUBLE PRECISION)", "CAST(0.1 AS DOUBLE PRECISION)")
	case "numeric":
		return g.pick("n", "n", "n", "1.5", "14.9", "0.1", "-2.5", "123456789012345678901234567890", "0.000001", "CAST(NULL AS NUMERIC)")
	case "text":
		return g.pick("s", "s", "s", g.textLit())
	case "bool":
		return g.pick("bo", "bo", "TRUE", "FALSE", "CAST(NULL AS BOOLEAN)")
	case "ts":
		return g.pick("ts", "ts", "ts", "TIMESTAMP '2024-02-29 12:34:56.789'", "TIMESTAMP '0001-01-01 00:00:00'", "TIMESTAMP '9999-12-31 23:59:59'")
	}
	panic(t)
}

// diffResult is one row's result: NULL, a value's PostgreSQL text, or an error.
type diffResult struct {
	null bool
	text string
	err  string // SQLSTATE (rsql: its code) when the row failed
}

// diffDeliberate reads the patterns of docs/sql.md's table of deliberate differences.
func diffDeliberate(t *testing.T) []*regexp.Regexp {
	b, err := os.ReadFile("../docs/sql.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "<!-- deliberate-differences -->")
	end := strings.Index(s, "<!-- /deliberate-differences -->")
	if start < 0 || end < start {
		return nil
	}
	var out []*regexp.Regexp
	for _, line := range strings.Split(s[start:end], "\n") {
		// A pattern's alternatives are written \| in the table: not a cell's end.
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
		if len(cells) < 3 {
			continue
		}
		p := strings.TrimSpace(cells[len(cells)-2])
		if !strings.HasPrefix(p, "`") || !strings.HasSuffix(p, "`") {
			continue
		}
		p = strings.ReplaceAll(strings.Trim(p, "`"), "\x00", "|")
		re, err := regexp.Compile(p)
		if err != nil {
			t.Fatalf("docs/sql.md deliberate difference pattern %q: %v", p, err)
		}
		out = append(out, re)
	}
	return out
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestDifferentialPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	cl, err := pgtest.Start()
	if err != nil {
		t.Skipf("no PostgreSQL: %v", err)
	}
	defer cl.Stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cl.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows := diffTable()
	cols := make([]string, len(diffSchema))
	for i, c := range diffSchema {
		cols[i] = c.Name + " " + diffPGTypes[i]
	}
	setup := []string{"SET TimeZone = 'UTC'", "SET extra_float_digits = 1",
		"CREATE TABLE t (" + strings.Join(cols, ", ") + ")"}
	for _, r := range rows {
		setup = append(setup, "INSERT INTO t VALUES ("+strings.Join(r.lit, ", ")+")")
	}
	for _, q := range setup {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The rsql rows must equal PostgreSQL's (the literals above and the Go values agree).
	for _, r := range rows {
		for c := range diffSchema {
			pg := pgRow(t, conn, "SELECT "+diffSchema[c].Name+" FROM t WHERE id = "+r.lit[0])
			if got := rsqlText(r.vals[c], diffSchema[c].Type); pg.null != r.vals[c].IsNull() || !pg.null && !sameText(pg.text, got, diffPGTypes[c]) {
				t.Fatalf("table row %s column %s: PostgreSQL %q, rsql %q", r.lit[0], diffSchema[c].Name, pg.text, got)
			}
		}
	}
	deliberate := diffDeliberate(t)
	n := envInt("RSQL_PGDIFF_N", 400)
	seed := uint64(envInt("RSQL_PGDIFF_SEED", 1))
	show := envInt("RSQL_PGDIFF_SHOW", 0)
	g := &exprGen{r: rand.New(rand.NewPCG(seed, 2026))}
	cat := testCatalog{"t": &Relation{Name: "t", Schema: diffSchema, EventTime: -1}}
	var total, agree, documented, rejected, wrong, failed, pgInvalid int
	var undocumented []string
	for k := 0; k < n; k++ {
		ty := genTypes[g.r.IntN(len(genTypes))]
		e := g.gen(ty, 1+g.r.IntN(4))
		pgRes, ok := pgEval(t, conn, e, len(rows))
		if !ok {
			pgInvalid++
			continue
		}
		total++
		rsRes, bindErr := rsqlEval(e, cat, rows)
		why := ""
		switch {
		case bindErr != nil:
			why = "rsql rejects: " + bindErr.Error()
			rejected++
		default:
			for i := range rows {
				if d := diffCompare(pgRes.res[i], rsRes[i], pgRes.typ); d != "" {
					why = fmt.Sprintf("row %d: %s", i+1, d)
					if rsRes[i].err != "" && pgRes.res[i].err == "" {
						failed++
					} else {
						wrong++
					}
					break
				}
			}
		}
		if why == "" {
			agree++
			continue
		}
		doc := false
		for _, re := range deliberate {
			if re.MatchString(e + "\n" + why) {
				doc = true
				break
			}
		}
		if doc {
			documented++
			continue
		}
		undocumented = append(undocumented, e+"\n    "+why)
	}
	t.Logf("differential test, seed %d: %d expressions PostgreSQL accepts (%d it rejects): %d agree (%.1f%%), %d documented differences, %d undocumented (rsql rejects %d, differs %d, fails a row %d)",
		seed, total, pgInvalid, agree, 100*float64(agree)/float64(max(total, 1)), documented, len(undocumented), rejected, wrong, failed)
	for i, u := range undocumented {
		if i >= max(show, 10) {
			break
		}
		t.Logf("difference: %s", u)
	}
	if os.Getenv("RSQL_PGDIFF_REPORT") == "" && len(undocumented) > 0 {
		t.Errorf("%d expressions differ from PostgreSQL without a documented reason (docs/sql.md, deliberate differences)", len(undocumented))
	}
}

type pgResults struct {
	typ string
	res []diffResult
}

// pgRow runs a one-value query and returns its result.
func pgRow(t *testing.T, conn *pgx.Conn, q string) diffResult {
	var s *string
	err := conn.QueryRow(context.Background(), q, pgx.QueryExecModeSimpleProtocol).Scan(&s)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return diffResult{err: pe.Code}
		}
		t.Fatalf("%s: %v", q, err)
	}
	if s == nil {
		return diffResult{null: true}
	}
	return diffResult{text: *s}
}

// pgEval evaluates e over every row; ok is false when PostgreSQL rejects the expression
// itself (a syntax or type error, not a per-row failure).
func pgEval(t *testing.T, conn *pgx.Conn, e string, n int) (pgResults, bool) {
	ctx := context.Background()
	var typ string
	sd, err := conn.Prepare(ctx, "", "SELECT ("+e+") FROM t")
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "42") || strings.HasPrefix(pe.Code, "0A") || pe.Code == "22023" && strings.Contains(pe.Message, "not recognized")) {
			return pgResults{}, false
		}
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v", e, err)
		}
	} else {
		typ = map[uint32]string{16: "boolean", 700: "real", 701: "double precision", 114: "json", 3802: "jsonb"}[sd.Fields[0].DataTypeOID]
	}
	out := pgResults{typ: typ, res: make([]diffResult, n)}
	for i := 0; i < n; i++ {
		out.res[i] = pgRow(t, conn, fmt.Sprintf("SELECT (%s)::text FROM t WHERE id = %d", e, i+1))
		if r := out.res[i]; strings.HasPrefix(r.err, "42") {
			return pgResults{}, false
		}
	}
	return out, true
}

// rsqlEval binds e over the table and evaluates it for every row.
func rsqlEval(e string, cat Catalog, rows []diffRow) (out []diffResult, err error) {
	sts, err := Parse("SELECT " + e + " FROM t")
	if err != nil {
		return nil, err
	}
	q, err := Bind(sts[0].(*Select), cat)
	if e, ok := err.(*Error); ok && (strings.HasPrefix(e.Code, "22") || strings.HasPrefix(e.Code, "54")) {
		// A constant that cannot be computed fails at bind time: as every row does.
		for range rows {
			out = append(out, diffResult{err: e.Code})
		}
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := Compile(q.Select[0])
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out = append(out, rsqlResult(f(r.vals), q.Select[0].Type()))
	}
	return out, nil
}

func rsqlResult(v Value, t Type) diffResult {
	if code, _, ok := v.Err(); ok {
		return diffResult{err: code}
	}
	if v.IsNull() {
		return diffResult{null: true}
	}
	return diffResult{text: rsqlText(v, t)}
}

// rsqlText is what a PostgreSQL client sees for v: its text form.
func rsqlText(v Value, _ Type) string {
	return string(AppendText(nil, v))
}

// diffCompare returns "" when the results agree, else what differs.
func diffCompare(pg, rs diffResult, typ string) string {
	switch {
	case pg.err != "" || rs.err != "":
		if pg.err != "" && rs.err != "" {
			return ""
		}
		if pg.err != "" {
			return fmt.Sprintf("PostgreSQL fails (%s), rsql gives %s", pg.err, rs.show())
		}
		return fmt.Sprintf("PostgreSQL gives %s, rsql fails (%s)", pg.show(), rs.err)
	case pg.null || rs.null:
		if pg.null && rs.null {
			return ""
		}
		return fmt.Sprintf("PostgreSQL %s, rsql %s", pg.show(), rs.show())
	}
	if sameText(pg.text, rs.text, typ) {
		return ""
	}
	return fmt.Sprintf("PostgreSQL %s, rsql %s", pg.show(), rs.show())
}

func (r diffResult) show() string {
	switch {
	case r.err != "":
		return "error " + r.err
	case r.null:
		return "NULL"
	}
	return strconv.Quote(r.text)
}

func sameText(pg, rs, typ string) bool {
	if pg == rs {
		return true
	}
	switch typ {
	case "boolean":
		return pg == "true" && rs == "t" || pg == "false" && rs == "f"
	case "double precision", "real":
		a, err1 := strconv.ParseFloat(pg, 64)
		b, err2 := strconv.ParseFloat(rs, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
			return math.IsNaN(a) && math.IsNaN(b) || a == b
		}
		return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
	case "json", "jsonb":
		var a, b any
		if json.Unmarshal([]byte(pg), &a) != nil || json.Unmarshal([]byte(rs), &b) != nil {
			return false
		}
		return reflect.DeepEqual(a, b)
	}
	return false
}

// Every row of docs/sql.md's table of deliberate differences gives its pattern, one with
// alternatives (\| in the table) included.
func TestDeliberateDifferencePatterns(t *testing.T) {
	b, err := os.ReadFile("../docs/sql.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	table := s[strings.Index(s, "<!-- deliberate-differences -->"):strings.Index(s, "<!-- /deliberate-differences -->")]
	rows := strings.Count(table, "\n| ") - 1 // the header row
	pats := diffDeliberate(t)
	if len(pats) != rows {
		t.Fatalf("%d patterns from %d rows", len(pats), rows)
	}
	for _, c := range []string{"SQRT(n)", "LPAD(x, CAST(n AS BIGINT))"} {
		found := false
		for _, p := range pats {
			found = found || p.MatchString(c)
		}
		if !found {
			t.Errorf("no pattern matches %s", c)
		}
	}
}
