package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pull queries that fix a keyed view's key (k = c, k IN (...), every column of a composite
// key, with other conditions) look the keys up (docs/sql.md, "Point lookups"), and answer
// as PostgreSQL does over a table of the same rows: for 20 000 keys of a BIGINT key, a
// VARCHAR key and a composite (VARCHAR, INT) key, keys present and absent, NULL, and
// constants of other types.
func TestPointLookupsMatchPostgres(t *testing.T) {
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	evs := genEvents(5)[:20_000]
	loadTable(t, conn, "orders", evs)
	views := []string{
		"per_order AS SELECT order_id, COUNT(*) AS n, SUM(qty) AS q FROM orders GROUP BY order_id",
		"per_user AS SELECT user_id, COUNT(*) AS n, MAX(amount) AS top FROM orders GROUP BY user_id",
		"per_cat_qty AS SELECT category, qty, COUNT(*) AS n FROM orders GROUP BY category, qty",
	}
	for _, v := range views {
		if _, err := conn.Exec(ctx, "CREATE TABLE "+strings.Replace(strings.Replace(v, "SUM(qty)", "SUM(qty)::bigint", 1), "COUNT(*)", "COUNT(*)::bigint", 1)); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	files := filepath.Join(dir, "data", "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, filepath.Join(files, "orders.jsonl"), evs)
	srv, addr := startServerIn(t, filepath.Join(dir, "data"))
	defer srv.Stop()
	rc, err := pgx.Connect(ctx, "postgres://rsql@"+addr+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	// The views read a topic of 4 queues (fed from the file), so their rows are in several
	// splits of their stages.
	stmts := []string{fmt.Sprintf(`CREATE STREAM orders_file (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP, category VARCHAR, qty INT)
		WITH (connector = 'file', path = '%s', format = 'json')`, filepath.Join(files, "orders.jsonl")),
		"CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP, category VARCHAR, qty INT) WITH (queues = 4)",
		"SET offset_reset = 'earliest'",
		"INSERT INTO orders SELECT * FROM orders_file",
	}
	for _, v := range views {
		stmts = append(stmts, "CREATE MATERIALIZED VIEW "+v)
	}
	for _, st := range stmts {
		if _, err := rc.Exec(ctx, st, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, v := range []string{"per_order", "per_user", "per_cat_qty"} {
		for {
			var total int64
			err := rc.QueryRow(ctx, "SELECT SUM(n) FROM "+v, pgx.QueryExecModeSimpleProtocol).Scan(&total)
			if err == nil && total == int64(len(evs)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("view %s holds %d of %d orders (err %v)", v, total, len(evs), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	r := rand.New(rand.NewSource(1))
	queries := []string{
		"SELECT * FROM per_order WHERE order_id = NULL",
		"SELECT * FROM per_order WHERE order_id = 0",
		"SELECT * FROM per_order WHERE order_id = 17.0",
		"SELECT * FROM per_order WHERE order_id = 17.5",
		"SELECT * FROM per_order WHERE order_id = '18'",
		"SELECT * FROM per_order WHERE order_id IN (1, 2, 3, NULL, 19999, 20000, 20001, 99999999) ORDER BY order_id",
		"SELECT * FROM per_order WHERE order_id IN (5, 6, 7) AND q > 4 ORDER BY order_id",
		"SELECT * FROM per_user WHERE user_id = 'u1'",
		"SELECT * FROM per_user WHERE user_id = 'nobody'",
		"SELECT * FROM per_user WHERE user_id IN ('u2', 'u3', 'u3', 'x') ORDER BY user_id",
		"SELECT * FROM per_cat_qty WHERE category = 'c' AND qty = 3",
		"SELECT * FROM per_cat_qty WHERE category = 'c' AND qty = CAST(3 AS BIGINT)",
		"SELECT * FROM per_cat_qty WHERE qty IN (1, 2, 99) AND category IN ('a', 'b', 'q') ORDER BY category, qty",
		"SELECT * FROM per_cat_qty WHERE category = 'c' AND qty = 3.0 AND n > 1",
		"SELECT * FROM per_cat_qty WHERE category = 'c' ORDER BY qty",
	}
	for i := 0; i < 300; i++ {
		queries = append(queries, fmt.Sprintf("SELECT * FROM per_order WHERE order_id = %d", r.Intn(20_100)))
	}
	for i := 0; i < 50; i++ {
		queries = append(queries, fmt.Sprintf("SELECT user_id, n FROM per_user WHERE user_id = 'u%d'", r.Intn(260)))
	}
	empty := 0
	for _, q := range queries {
		want := orderedRows(t, conn, q)
		got := orderedRows(t, rc, q)
		if len(want) == 0 {
			empty++
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\nrsql: %q\nPostgreSQL: %q", q, first(got, 12), first(want, 12))
		}
	}
	if empty == 0 || empty > len(queries)/2 {
		t.Errorf("%d of %d queries found no row: the keys do not test presence and absence both", empty, len(queries))
	}
	plan := strings.Join(orderedRows(t, rc, "EXPLAIN SELECT * FROM per_cat_qty WHERE category = 'c' AND qty = 3"), "\n")
	if !strings.Contains(plan, "Lookup view per_cat_qty by key") {
		t.Errorf("EXPLAIN of a point lookup:\n%s", plan)
	}
}
