package sql

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"rsql/internal/pgtest"
)

// resultNameCases are select-list expressions over orders and the name PostgreSQL 15
// gives each result column (checked against PostgreSQL by TestResultNamesMatchPostgres).
var resultNameCases = []struct{ expr, name string }{
	{"COUNT(*)", "count"},
	{"count(DISTINCT user_id)", "count"},
	{"SUM(qty)", "sum"},
	{"MAX(amount)", "max"},
	{"MIN(ts)", "min"},
	{"AVG(price)", "avg"},
	{"COUNT(*) * 2 + 1", "?column?"},
	{"upper(user_id)", "upper"},
	{"UPPER('a')", "upper"},
	{"1 + 1", "?column?"},
	{"user_id", "user_id"},
	{"orders.user_id", "user_id"},
	{"(qty)", "qty"},
	{"CAST(qty AS BIGINT)", "qty"},
	{"CAST(1 AS BIGINT)", "int8"},
	{"qty::VARCHAR", "qty"},
	{"'1'::INT", "int4"},
	{"'1'::INTEGER", "int4"},
	{"'x'::TEXT", "text"},
	{"CAST(amount + 1 AS DOUBLE PRECISION)", "float8"},
	{"CAST(1.5 AS NUMERIC(10,2))", "numeric"},
	{"CAST(1 AS BOOLEAN)", "bool"},
	{"CASE WHEN vip THEN 1 ELSE 0 END", "case"},
	{"CASE WHEN vip THEN 1 ELSE qty END", "qty"},
	{"CASE WHEN vip THEN 1 END", "case"},
	{"COALESCE(qty, 0)", "coalesce"},
	{"NULLIF(qty, 0)", "nullif"},
	{"GREATEST(qty, 1)", "greatest"},
	{"TRIM(user_id)", "btrim"},
	{"TRIM(LEADING 'x' FROM user_id)", "ltrim"},
	{"TRIM(TRAILING FROM user_id)", "rtrim"},
	{"SUBSTRING(user_id FROM 1 FOR 2)", "substring"},
	{"POSITION('a' IN user_id)", "position"},
	{"EXTRACT(YEAR FROM ts)", "extract"},
	{"ts + INTERVAL '1' DAY", "?column?"},
	{"INTERVAL '1' DAY", "interval"},
	{"TIMESTAMP '2026-01-01 00:00:00'", "timestamp"},
	{"user_id || 'x'", "?column?"},
	{"CONCAT(user_id, 'x')", "concat"},
	{"payload->'a'", "?column?"},
	{"payload->>'a'", "?column?"},
	{"qty IS NULL", "?column?"},
	{"qty BETWEEN 1 AND 2", "?column?"},
	{"user_id LIKE 'a%'", "?column?"},
	{"NOT vip", "?column?"},
	{"-qty", "?column?"},
	{"true", "?column?"},
	{"NULL", "?column?"},
	{"'x'", "?column?"},
	{"MOD(qty, 3)", "mod"},
	{"qty % 3", "?column?"},
	{"ABS(amount)", "abs"},
	{"ROUND(amount)", "round"},
	{"LOWER(user_id) IS DISTINCT FROM 'x'", "?column?"},
	{"NOW()", "now"},
	{"LENGTH(user_id)", "length"},
	{"DATE_TRUNC('day', ts)", "date_trunc"},
	{"qty AS n", "n"},
}

func TestResultColumnNames(t *testing.T) {
	cat := newTestCatalog()
	for _, c := range resultNameCases {
		text := "SELECT " + c.expr + " FROM orders"
		sts, err := Parse(text)
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		q, err := Bind(sts[0].(*Select), cat)
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		if q.Names[0] != c.name {
			t.Errorf("%s: column named %q, want %q", text, q.Names[0], c.name)
		}
	}
}

// TestResultNamesMatchPostgres: PostgreSQL names each case's column as the table says.
func TestResultNamesMatchPostgres(t *testing.T) {
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
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (order_id bigint, user_id text, amount float8, ts timestamp,
		price numeric(10,2), qty int, payload jsonb, vip bool)`); err != nil {
		t.Fatal(err)
	}
	for _, c := range resultNameCases {
		text := "SELECT " + c.expr + " FROM orders"
		rows, err := conn.Query(ctx, text)
		if err != nil {
			t.Errorf("PostgreSQL: %s: %v", text, err)
			continue
		}
		fds := rows.FieldDescriptions()
		rows.Close()
		if len(fds) != 1 || fds[0].Name != c.name {
			var names []string
			for _, f := range fds {
				names = append(names, f.Name)
			}
			t.Errorf("PostgreSQL names %s: %s, the table says %q", text, strings.Join(names, ", "), c.name)
		}
	}
}

// TestDuplicateResultNames: two columns of a derived table named alike (two unaliased
// counts) are ambiguous when read by that name, as in PostgreSQL, and fine otherwise.
func TestDuplicateResultNames(t *testing.T) {
	cat := newTestCatalog()
	bind := func(text string) (*Query, error) {
		sts, err := Parse(text)
		if err != nil {
			return nil, err
		}
		return Bind(sts[0].(*Select), cat)
	}
	q, err := bind("SELECT COUNT(*), COUNT(qty) FROM orders")
	if err != nil || strings.Join(q.Names, ",") != "count,count" {
		t.Fatalf("two counts: %v %v", q, err)
	}
	if _, err := bind("SELECT count FROM (SELECT COUNT(*), COUNT(qty) FROM orders) x"); err == nil || err.(*Error).Code != CodeAmbiguousColumn {
		t.Errorf("reading one of two count columns: %v, want 42702", err)
	}
	if q, err := bind("SELECT * FROM (SELECT COUNT(*), COUNT(qty) FROM orders) x"); err != nil || len(q.Names) != 2 {
		t.Errorf("SELECT * over two count columns: %v", err)
	}
	if q, err := bind("SELECT count + 1 AS c, max FROM (SELECT COUNT(*), MAX(amount) FROM orders GROUP BY user_id) x"); err != nil || strings.Join(q.Names, ",") != "c,max" {
		t.Errorf("reading an inner aggregate by its name: %v", err)
	}
	if _, err := bind("SELECT user_id, COUNT(*) FROM orders GROUP BY user_id ORDER BY count"); err != nil {
		t.Errorf("ORDER BY a generated name: %v", err)
	}
}
