package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Aggregations over aggregations (docs/sql.md, "Changelogs"): the outer GROUP BY takes the
// inner one's changes back as they come, and its answer is PostgreSQL's over the same rows.

// aggOverAggCases: the SELECT run by rsql and PostgreSQL alike.
var aggOverAggCases = []struct{ name, query string }{
	{"users_per_count", `SELECT n, COUNT(*) AS users FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x GROUP BY n`},
	{"count_stats", `SELECT SUM(n) AS total, MIN(n) AS lo, MAX(n) AS hi, COUNT(*) AS users, COUNT(DISTINCT n) AS counts FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x`},
	{"having_over_inner", `SELECT n, COUNT(*) AS users, MAX(q) AS q FROM (SELECT user_id, COUNT(*) AS n, SUM(qty) AS q FROM orders GROUP BY user_id HAVING COUNT(*) >= 3) x GROUP BY n HAVING COUNT(*) > 1`},
	// Sums of many distinct values (more than a set keeps before its bitmap, sql/intvalues.go),
	// retracted and added again as the users' sums change.
	{"distinct_sums", `SELECT COUNT(DISTINCT q) AS sums, COUNT(DISTINCT n) AS counts FROM (SELECT user_id, COUNT(*) AS n, SUM(qty) AS q FROM orders GROUP BY user_id) x`},
	// COUNT(DISTINCT) calls over one column, unfiltered and filtered, share one set of values
	// (a family, exec/agg_family.go), two families here.
	{"distinct_families", `SELECT category, COUNT(DISTINCT user_id) AS users, COUNT(DISTINCT CASE WHEN qty > 4 THEN user_id END) AS bulk_users, COUNT(*) AS n, COUNT(DISTINCT CASE WHEN qty = 0 THEN user_id ELSE NULL END) AS zero_users, COUNT(DISTINCT qty) AS qtys, COUNT(DISTINCT CASE WHEN user_id < 'u5' THEN qty END) AS low_qtys FROM orders GROUP BY category`},
	// Conditions shared by a SUM, a family member and another SUM, computed once per row
	// (sql.CompileConds), the family fed from its column and the conditions.
	{"shared_conditions", `SELECT category, SUM(CASE WHEN qty > 4 THEN 1 ELSE 0 END) AS bulk, COUNT(DISTINCT CASE WHEN qty > 4 THEN user_id END) AS bulk_users, SUM(CASE WHEN qty > 4 THEN qty END) AS bulk_qty, COUNT(DISTINCT user_id) AS users FROM orders GROUP BY category`},
	{"distinct_counts", `SELECT DISTINCT n FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x`},
	{"category_spread", `SELECT category, MIN(spent) AS lo, MAX(spent) AS hi, AVG(orders) AS per_user FROM (SELECT category, user_id, COUNT(*) AS orders, SUM(qty) AS spent FROM orders GROUP BY category, user_id) x GROUP BY category`},
}

// Over files: the inner aggregation answers once (its input is bounded), the outer one
// aggregates its final rows; and a global aggregation over no rows has its one row.
func TestAggregateOverAggregateFilesMatchPostgres(t *testing.T) {
	bin := buildRsql(t)
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	orders := genEvents(31)[:20_000]
	loadTable(t, conn, "orders", orders)
	dir := t.TempDir()
	writeEvents(t, filepath.Join(dir, "orders.jsonl"), orders)
	cases := []windowCase{{name: "empty_global", rsql: `SELECT COUNT(*) AS n, SUM(qty) AS q, MIN(amount) AS lo FROM orders WHERE qty < 0`,
		postgres: `SELECT COUNT(*) AS n, SUM(qty) AS q, MIN(amount) AS lo FROM orders WHERE qty < 0`}}
	for _, c := range aggOverAggCases {
		cases = append(cases, windowCase{name: c.name, rsql: c.query, postgres: c.query})
	}
	var script strings.Builder
	script.WriteString(ordersDDL)
	for _, c := range cases {
		fmt.Fprintf(&script, "CREATE STREAM %s WITH (connector = 'file', path = '%s.jsonl', format = 'json') AS\n%s;\n", c.name, c.name, c.rsql)
	}
	if err := os.WriteFile(filepath.Join(dir, "pipeline.sql"), []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", "pipeline.sql", "--data-dir", "data", "--format", "json")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rsql -f pipeline.sql: %v\n%s", err, out)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { compareFileCase(t, conn, dir, c) })
	}
}

// Over a topic: each case is a materialized view, fed in batches (so the inner aggregation
// retracts its users' old counts again and again) across a restart of the server and a
// kill -9; each
// view ends with PostgreSQL's rows over the same orders.
func TestAggregateOverAggregateViewsMatchPostgres(t *testing.T) {
	pg := startPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ref, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close(context.Background())
	if _, err := ref.Exec(ctx, `CREATE TABLE orders (user_id text, category text, qty int)`); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	srv, addr := startServerIn(t, dir)
	connect := func(addr string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, "postgres://rsql@"+addr+"/rsql?sslmode=disable")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	run := func(conn *pgx.Conn, q string) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%.200s: %v", q, err)
		}
	}
	conn := connect(addr)
	run(conn, "CREATE STREAM orders (user_id VARCHAR, category VARCHAR, qty INT) WITH (queues = 2)")
	for _, c := range aggOverAggCases {
		run(conn, "CREATE MATERIALIZED VIEW "+c.name+" AS "+c.query)
	}

	r := rand.New(rand.NewSource(41))
	insert := func(conn *pgx.Conn, n int) {
		t.Helper()
		var vals []string
		for i := 0; i < n; i++ {
			// Few users, many orders each: counts move a lot, users change groups often.
			vals = append(vals, fmt.Sprintf("('u%d', 'c%d', %d)", r.Intn(120), r.Intn(4), r.Intn(9)))
		}
		list := strings.Join(vals, ", ")
		run(conn, "INSERT INTO orders VALUES "+list)
		if _, err := ref.Exec(ctx, "INSERT INTO orders VALUES "+list); err != nil {
			t.Fatal(err)
		}
	}
	check := func(conn *pgx.Conn, stage string, empty bool) {
		t.Helper()
		for _, c := range aggOverAggCases {
			want := queryRows(t, ctx, ref, c.query)
			if len(want) == 0 && !empty {
				t.Fatalf("%s: PostgreSQL has no rows: the case tests nothing", c.name)
			}
			var got []string
			deadline := time.Now().Add(60 * time.Second)
			for {
				got = queryRows(t, ctx, conn, "SELECT * FROM "+c.name)
				if strings.Join(got, "\n") == strings.Join(want, "\n") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s, view %s:\n%s\nPostgreSQL:\n%s", stage, c.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	// Before any order the global aggregation has its one row, as in PostgreSQL.
	check(conn, "before any order", true)
	for i := 0; i < 4; i++ {
		insert(conn, 400)
	}
	check(conn, "before the restart", false)
	if err := srv.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	srv, addr = startServerIn(t, dir)
	conn = connect(addr)
	for i := 0; i < 4; i++ {
		insert(conn, 400)
	}
	check(conn, "after the restart", false)
	// Killed while it works: each job resumes from its last checkpoint, exactly once.
	for i := 0; i < 3; i++ {
		insert(conn, 400)
	}
	time.Sleep(time.Duration(r.Intn(300)) * time.Millisecond)
	srv.Kill()
	_, addr = startServerIn(t, dir)
	conn = connect(addr)
	insert(conn, 400)
	check(conn, "after kill -9", false)
}

// queryRows runs q and returns its rows as sorted text, numbers canonical (canonNumber)
// so that rsql's and PostgreSQL's types compare.
func queryRows(t *testing.T, ctx context.Context, conn *pgx.Conn, q string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
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
			switch x := normalizePG(v).(type) {
			case nil:
				parts[i] = "NULL"
			case string:
				parts[i] = x
			default:
				parts[i] = canonNumber(x)
			}
		}
		out = append(out, strings.Join(parts, ","))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	sort.Strings(out)
	return out
}
