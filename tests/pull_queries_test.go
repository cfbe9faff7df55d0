package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pull queries over materialized views are ordinary queries over the views' current rows:
// WHERE, GROUP BY with aggregates, DISTINCT, ORDER BY, LIMIT/OFFSET, COUNT(*) — each result
// compared, in order, with PostgreSQL computing it over a table of the same rows; and psql
// runs one as a user would.
func TestPullQueriesMatchPostgres(t *testing.T) {
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	evs := genEvents(11)[:20_000]
	loadTable(t, conn, "orders", evs)
	if _, err := conn.Exec(ctx, `CREATE TABLE per_user AS
		SELECT user_id, COUNT(*) AS n, SUM(qty)::bigint AS q, MAX(amount) AS top FROM orders GROUP BY user_id`); err != nil {
		t.Fatal(err)
	}

	// The file lies in the server's file root (the data directory's files/).
	dir := t.TempDir()
	files := filepath.Join(dir, "data", "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, filepath.Join(files, "orders.jsonl"), evs)
	srv, addr := startServerIn(t, filepath.Join(dir, "data"))
	defer srv.Stop()
	rsqlURL := "postgres://rsql@" + addr + "/rsql?sslmode=disable"
	rc, err := pgx.Connect(ctx, rsqlURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	for _, st := range []string{
		fmt.Sprintf(`CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP, category VARCHAR, qty INT)
			WITH (connector = 'file', path = '%s', format = 'json')`, filepath.Join(files, "orders.jsonl")),
		`CREATE MATERIALIZED VIEW per_user AS SELECT user_id, COUNT(*) AS n, SUM(qty) AS q, MAX(amount) AS top FROM orders GROUP BY user_id`,
	} {
		if _, err := rc.Exec(ctx, st, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	// The view's job reads the whole file: wait until every user's count is in.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var total int64
		err := rc.QueryRow(ctx, "SELECT SUM(n) FROM per_user", pgx.QueryExecModeSimpleProtocol).Scan(&total)
		if err == nil && total == int64(len(evs)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view holds %d of %d orders (err %v)", total, len(evs), err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	queries := []string{
		"SELECT user_id, n FROM per_user ORDER BY user_id",
		"SELECT user_id, n, q FROM per_user WHERE n > 95 ORDER BY n DESC, user_id LIMIT 10 OFFSET 3",
		"SELECT COUNT(*) AS users FROM per_user",
		"SELECT n % 10 AS bucket, COUNT(*) AS users, SUM(q) AS q, MAX(top) AS top FROM per_user GROUP BY n % 10 ORDER BY bucket",
		"SELECT DISTINCT q % 3 AS r FROM per_user ORDER BY r",
		"SELECT user_id, top FROM per_user WHERE user_id LIKE 'u1%' ORDER BY top DESC, user_id LIMIT 5",
		"SELECT 1 + 1 AS two",
	}
	for _, q := range queries {
		want := orderedRows(t, conn, q)
		got := orderedRows(t, rc, q)
		if len(want) == 0 {
			t.Errorf("%s: PostgreSQL returned no rows: the case tests nothing", q)
			continue
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\nrsql (%d rows):\n%s\nPostgreSQL (%d rows):\n%s", q, len(got), strings.Join(first(got, 12), "\n"),
				len(want), strings.Join(first(want, 12), "\n"))
		}
	}

	// psql, as a user runs it.
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("psql", "-h", host, "-p", port, "-U", "rsql", "-X", "-A", "-t", "-F", ",",
		"-c", "SELECT user_id, n FROM per_user ORDER BY user_id LIMIT 3").CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	want := orderedRows(t, conn, "SELECT user_id, n FROM per_user ORDER BY user_id LIMIT 3")
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		lines = append(lines, strings.ReplaceAll(l, ",", " "))
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("psql printed:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
}

// orderedRows runs a query and renders its rows, in order, one line each.
func orderedRows(t *testing.T, conn *pgx.Conn, q string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = canonNumber(normalizePG(v))
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
