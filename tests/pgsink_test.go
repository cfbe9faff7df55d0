package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL sink (docs/sql.md, "PostgreSQL sink"): updating queries written into
// tables of a private PostgreSQL, compared with PostgreSQL computing the same queries over
// the same rows.

// pgSinkTables creates the sink tables in PostgreSQL.
func pgSinkTables(t *testing.T, conn *pgx.Conn) {
	for _, s := range []string{
		`CREATE SCHEMA sink`,
		`CREATE TABLE sink.user_totals (user_id text PRIMARY KEY, n bigint, total float8)`,
		`CREATE TABLE sink.band (user_id text PRIMARY KEY, n bigint, total float8)`,
		`CREATE TABLE cat_totals (category text PRIMARY KEY, n bigint, q bigint)`,
		`CREATE TABLE sink.big_orders (order_id bigint PRIMARY KEY, user_id text, amount float8)`,
	} {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// pgSinkCases are the sink tables and the PostgreSQL queries over orders that compute
// what they must hold (totals rounded: a sum of doubles depends on its order).
var pgSinkCases = []struct{ table, want string }{
	{`SELECT user_id, n, round(total::numeric, 6) FROM sink.user_totals`,
		`SELECT user_id, count(*), round(sum(amount)::numeric, 6) FROM orders GROUP BY user_id`},
	{`SELECT user_id, n, round(total::numeric, 6) FROM sink.band`,
		`SELECT user_id, count(*), round(sum(amount)::numeric, 6) FROM orders GROUP BY user_id HAVING count(*) BETWEEN 140 AND 155`},
	{`SELECT category, n, q FROM cat_totals`,
		`SELECT category, count(*), sum(qty) FROM orders GROUP BY category`},
	{`SELECT order_id, user_id, round(amount::numeric, 6) FROM sink.big_orders`,
		`SELECT order_id, user_id, round(amount::numeric, 6) FROM orders WHERE amount > 90`},
}

func pgSinkDDL(url string) string {
	return fmt.Sprintf(`
CREATE TABLE user_totals (user_id VARCHAR PRIMARY KEY, n BIGINT, total DOUBLE)
  WITH (connector = 'postgres', url = '%[1]s', table = 'sink.user_totals');
CREATE TABLE band (user_id VARCHAR PRIMARY KEY, n BIGINT, total DOUBLE)
  WITH (connector = 'postgres', url = '%[1]s', table = 'sink.band');
CREATE TABLE big_orders (order_id BIGINT PRIMARY KEY, user_id VARCHAR, amount DOUBLE)
  WITH (connector = 'postgres', url = '%[1]s', table = 'sink.big_orders');
INSERT INTO user_totals SELECT user_id, COUNT(*), SUM(amount) FROM orders GROUP BY user_id;
INSERT INTO band SELECT user_id, COUNT(*), SUM(amount) FROM orders GROUP BY user_id HAVING COUNT(*) BETWEEN 140 AND 155;
INSERT INTO big_orders SELECT order_id, user_id, amount FROM orders WHERE amount > 90;
CREATE TABLE cat_totals WITH (connector = 'postgres', url = '%[1]s') AS
  SELECT category, COUNT(*) AS n, SUM(qty) AS q FROM orders GROUP BY category;
`, url)
}

// pgDiff returns the rows of got missing from want and those of want missing from got
// (a multiset difference computed by PostgreSQL), as text.
func pgDiff(t *testing.T, conn *pgx.Conn, got, want string) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []struct{ label, sql string }{
		{"extra", "(" + got + ") EXCEPT ALL (" + want + ")"},
		{"missing", "(" + want + ") EXCEPT ALL (" + got + ")"},
	} {
		rows, err := conn.Query(context.Background(), q.sql+" LIMIT 10")
		if err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		for rows.Next() {
			vals, _ := rows.Values()
			fmt.Fprintf(&b, "%s: %v\n", q.label, vals)
		}
		rows.Close()
	}
	return b.String()
}

func pgCount(t *testing.T, conn *pgx.Conn, q string) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM ("+q+") x").Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestPostgresSinkMatchesPostgres: per-key aggregates, a HAVING band that keys enter and
// leave as their counts grow, CREATE TABLE ... AS SELECT and an append-only filter, run
// with `rsql -f` over a file of orders into PostgreSQL tables, equal PostgreSQL's own
// queries over the same orders.
func TestPostgresSinkMatchesPostgres(t *testing.T) {
	bin := buildRsql(t)
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	orders := genEvents(61)[:30_000]
	loadEvents(t, conn, orders)
	pgSinkTables(t, conn)
	dir := t.TempDir()
	writeEvents(t, filepath.Join(dir, "orders.jsonl"), orders)
	if err := os.WriteFile(filepath.Join(dir, "pipeline.sql"), []byte(ordersDDL+pgSinkDDL(pg.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", "pipeline.sql", "--data-dir", "data")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rsql -f pipeline.sql: %v\n%s", err, out)
	}
	for _, c := range pgSinkCases {
		if d := pgDiff(t, conn, c.table, c.want); d != "" {
			t.Errorf("%s differs from %s:\n%s", c.table, c.want, d)
		}
		if pgCount(t, conn, c.want) == 0 {
			t.Errorf("%s: no rows to compare", c.want)
		}
	}
	// The band: keys left it (their count passed 155) and are not in the table.
	left := pgCount(t, conn, `SELECT user_id FROM orders GROUP BY user_id HAVING count(*) > 155`)
	if left == 0 {
		t.Errorf("no key left the band: the test does not test deletes")
	}
}
