package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lookup joins into a private PostgreSQL (docs/sql.md, "Lookup joins"): generated orders
// joined with dimension tables of the database, compared row for row with PostgreSQL
// computing the same joins; then a job over a topic whose database is stopped mid-stream,
// updated after it comes back, and whose server is killed with SIGKILL.

// lookupUsers creates shop.users (users u0..u179 of the 200 the orders name: the others
// are absent) and prices (every category but f, quantities 0..7) in PostgreSQL.
func lookupUsers(t *testing.T, conn *pgx.Conn) {
	ctx := context.Background()
	for _, s := range []string{
		`CREATE SCHEMA shop`,
		`CREATE TABLE shop.users (user_id text PRIMARY KEY, tier text, country text, credit numeric(10,2), since timestamptz)`,
		`INSERT INTO shop.users SELECT 'u' || i, CASE WHEN i % 17 = 0 THEN NULL ELSE (ARRAY['bronze','silver','gold'])[i % 3 + 1] END,
		   (ARRAY['de','fr','us','jp','br'])[i % 5 + 1], (i * 7 % 200) + 0.5, '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 minute 0.25 second'
		   FROM generate_series(0, 179) i`,
		`CREATE TABLE prices (category text, qty int, price float8, PRIMARY KEY (category, qty))`,
		`INSERT INTO prices SELECT c, q, q * 1.25 + ascii(c) FROM unnest(ARRAY['a','b','c','d','e']) c, generate_series(0, 7) q`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func lookupDDL(url string) string {
	return ordersDDL + fmt.Sprintf(`
CREATE TABLE dim_users (user_id VARCHAR PRIMARY KEY, tier VARCHAR, country VARCHAR, credit DECIMAL(10,2), since TIMESTAMP)
  WITH (connector = 'postgres', url = '%[1]s', table = 'shop.users', cache_ttl = '60s', cache_rows = 1000);
CREATE TABLE dim_users_nocache (user_id VARCHAR PRIMARY KEY, tier VARCHAR, since TIMESTAMP)
  WITH (connector = 'postgres', url = '%[1]s', table = 'shop.users', cache_ttl = '0');
CREATE TABLE dim_prices (category VARCHAR, qty INT, price DOUBLE, PRIMARY KEY (category, qty))
  WITH (connector = 'postgres', url = '%[1]s', table = 'prices', cache_rows = 16);
`, url)
}

var lookupCases = []windowCase{
	{
		name: "lookup_inner",
		rsql: `SELECT o.order_id, o.user_id, u.tier, u.credit FROM orders o
  JOIN dim_users FOR SYSTEM_TIME AS OF PROCTIME() AS u ON o.user_id = u.user_id`,
		postgres: `SELECT o.order_id, o.user_id, u.tier, u.credit FROM orders o JOIN shop.users u ON o.user_id = u.user_id`,
	},
	{
		name: "lookup_left_residual",
		rsql: `SELECT o.order_id, u.tier, u.country FROM orders o
  LEFT JOIN dim_users u ON o.user_id = u.user_id AND o.amount < u.credit WHERE o.qty < 8`,
		postgres: `SELECT o.order_id, u.tier, u.country FROM orders o
  LEFT JOIN shop.users u ON o.user_id = u.user_id AND o.amount < u.credit WHERE o.qty < 8`,
	},
	{
		// Two lookups in a row, one of them on a two-column key, one without a cache.
		name: "lookup_chain_composite_nocache",
		rsql: `SELECT o.order_id, p.price, u.since FROM orders o
  JOIN dim_prices p ON o.category = p.category AND o.qty = p.qty
  LEFT JOIN dim_users_nocache u ON u.user_id = o.user_id`,
		postgres: `SELECT o.order_id, p.price, (extract(epoch FROM u.since) * 1000)::bigint AS since FROM orders o
  JOIN prices p ON o.category = p.category AND o.qty = p.qty LEFT JOIN shop.users u ON u.user_id = o.user_id`,
		tsCols: []string{"since"},
	},
	{
		// A window aggregation by a column of the table: the join runs before the exchange.
		name: "lookup_then_window",
		rsql: `SELECT u.country, window_start, COUNT(*) AS n, SUM(o.amount) AS total
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) o LEFT JOIN dim_users u ON o.user_id = u.user_id
  GROUP BY u.country, window_start, window_end`,
		postgres: `SELECT u.country, (o.ts / 10000) * 10000 AS window_start, COUNT(*) AS n, SUM(o.amount) AS total
  FROM orders o LEFT JOIN shop.users u ON o.user_id = u.user_id WHERE NOT o.late GROUP BY 1, 2`,
		tsCols: []string{"window_start"},
	},
}

// pgTransactions is the number of committed transactions of the database (each lookup
// query is one), once the statistics are flushed.
func pgTransactions(t *testing.T, conn *pgx.Conn) int64 {
	var n int64
	if err := conn.QueryRow(context.Background(), `SELECT pg_stat_force_next_flush(), xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(nil, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLookupJoinMatchesPostgres runs lookup joins (INNER, LEFT with a residual condition,
// a two-column key, a chain of two lookups, a window aggregation after a lookup) over a
// file of orders with `rsql -f` and compares each output with PostgreSQL's join of the
// same tables. The lookups are batched: the database sees far fewer queries than rows.
func TestLookupJoinMatchesPostgres(t *testing.T) {
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
	lookupUsers(t, conn)
	dir := t.TempDir()
	writeEvents(t, filepath.Join(dir, "orders.jsonl"), orders)
	var script strings.Builder
	script.WriteString(lookupDDL(pg.URL))
	for _, c := range lookupCases {
		fmt.Fprintf(&script, "CREATE STREAM %s WITH (connector = 'file', path = '%s.jsonl', format = 'json') AS\n%s;\n", c.name, c.name, c.rsql)
	}
	if err := os.WriteFile(filepath.Join(dir, "pipeline.sql"), []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	before := pgTransactions(t, conn)
	start := time.Now()
	cmd := exec.Command(bin, "-f", "pipeline.sql", "--data-dir", "data", "--format", "json")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rsql -f pipeline.sql: %v\n%s", err, out)
	}
	t.Logf("rsql -f ran %d lookup jobs in %v", len(lookupCases), time.Since(start))
	for _, c := range lookupCases {
		t.Run(c.name, func(t *testing.T) {
			compareFileCase(t, conn, dir, c)
		})
	}
	// Every order went through five lookups (one per job, two in the chain). The
	// connections of rsql -f are closed, so their statistics are flushed: wait for them.
	rows := int64(len(orders) * 5)
	var queries int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		queries = pgTransactions(t, conn) - before
		if queries > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d rows looked up with %d transactions of the database", rows, queries)
	if queries == 0 || queries > rows/100 {
		t.Errorf("the database committed %d transactions for %d looked-up rows: want some, and far fewer than rows (one query per batch)", queries, rows)
	}
}

// restartRow is one row of the enriched topic.
type restartRow struct {
	OrderID int64   `json:"order_id"`
	UserID  string  `json:"user_id"`
	Tier    *string `json:"tier"`
}

// TestLookupJoinDatabaseRestart: a lookup job over a topic keeps every row while its
// database is down (the rows wait, none goes out with NULLs, none is lost), goes on when
// the database is back, and once the cache's TTL has passed sees what was changed in the
// table after the restart. While it waits it can be paused and resumed. Then the rsql server is killed with SIGKILL while it processes
// more rows and restarted: every order is in the output exactly once, each with the tier
// PostgreSQL gives it. The lookup metrics show the failed queries and their retries.
func TestLookupJoinDatabaseRestart(t *testing.T) {
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`CREATE TABLE users (user_id text PRIMARY KEY, tier text)`,
		`INSERT INTO users SELECT 'u' || i, 'v1' FROM generate_series(0, 39) i`,
		`CREATE TABLE orders (order_id bigint PRIMARY KEY, user_id text)`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	s := newJobsServer(t)
	s.sql(fmt.Sprintf(`CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP, category VARCHAR, qty INT)
  WITH (topic = 'orders', queues = 2);
CREATE TABLE dim_users (user_id VARCHAR PRIMARY KEY, tier VARCHAR)
  WITH (connector = 'postgres', url = '%s', table = 'users', cache_ttl = '1s', lookup_timeout = '1s', retry_backoff_max = '300ms');
CREATE STREAM enriched WITH (queues = 1) AS
  SELECT o.order_id, o.user_id, u.tier FROM orders o LEFT JOIN dim_users FOR SYSTEM_TIME AS OF PROCTIME() AS u ON o.user_id = u.user_id;`, pg.URL))
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	var next int64
	gen := func(n int) []event {
		var evs []event
		for i := 0; i < n; i++ {
			next++
			evs = append(evs, event{OrderID: next, UserID: fmt.Sprintf("u%d", r.Intn(50)), TsMs: time.Now().UnixMilli(), Category: "a"})
		}
		return evs
	}
	load := func(evs []event) {
		rows := make([][]any, len(evs))
		for i, e := range evs {
			rows[i] = []any{e.OrderID, e.UserID}
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"orders"}, []string{"order_id", "user_id"}, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
	}
	// expected is PostgreSQL's tier for each order of (lo, hi], with the table as it is now.
	expected := func(lo, hi int64) map[int64]*string {
		rows, err := conn.Query(ctx, `SELECT o.order_id, u.tier FROM orders o LEFT JOIN users u ON o.user_id = u.user_id WHERE o.order_id > $1 AND o.order_id <= $2`, lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]*string{}
		for rows.Next() {
			var id int64
			var tier *string
			if err := rows.Scan(&id, &tier); err != nil {
				t.Fatal(err)
			}
			out[id] = tier
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return out
	}
	metric := func(name string) float64 {
		v, _ := metricValue(scrape(t, s.http), name, `table="dim_users"`)
		return v
	}
	waitOut := func(n float64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			v, _ := metricValue(scrape(t, s.http), "rsql_job_records_out_total")
			if v >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the job wrote %v rows, want %v\nserver stderr:\n%s", v, n, s.p.Stderr.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	evs := gen(1500)
	load(evs)
	produceTo(t, s.ns, "orders", evs)
	waitOut(1500)
	want1 := expected(0, 1500)
	time.Sleep(1200 * time.Millisecond) // the cache's entries expire: every next row needs the database

	// The database goes away: the next rows wait for it.
	pg.StopServer()
	release, err := pg.HoldPort() // the port stays ours while the database is away
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	evs = gen(1500)
	produceTo(t, s.ns, "orders", evs)
	time.Sleep(3 * time.Second)
	if v, _ := metricValue(scrape(t, s.http), "rsql_job_records_out_total"); v != 1500 {
		t.Errorf("while the database is down the job wrote %v rows, want the 1500 of before", v)
	}
	if metric("rsql_lookup_errors_total") == 0 || metric("rsql_lookup_retries_total") == 0 {
		t.Errorf("while the database is down: errors %v, retries %v, want both counted", metric("rsql_lookup_errors_total"), metric("rsql_lookup_retries_total"))
	}
	if out := s.sql("SHOW JOBS"); !strings.Contains(out, "RUNNING") {
		t.Errorf("SHOW JOBS while the database is down:\n%s", out)
	}
	// A job waiting for its database can still be stopped; resumed, it reads again from
	// its last checkpoint (its counters go on from that checkpoint's: 1500 rows out).
	pause := time.Now()
	s.sql("PAUSE JOB job-1")
	if d := time.Since(pause); d > 5*time.Second {
		t.Errorf("PAUSE JOB took %v while the job waited for its database", d)
	}
	s.sql("RESUME JOB job-1")

	// It comes back, and the table changes. The rows that waited are looked up before or
	// after the change.
	release()
	if err := pg.StartServer(); err != nil {
		t.Fatal(err)
	}
	if conn, err = pgx.Connect(ctx, pg.URL); err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	load(evs)
	want2old := expected(1500, 3000)
	if _, err := conn.Exec(ctx, `UPDATE users SET tier = 'v2'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO users VALUES ('u40', 'new')`); err != nil {
		t.Fatal(err)
	}
	want2new := expected(1500, 3000)
	waitOut(3000)
	time.Sleep(1500 * time.Millisecond) // the cache's TTL passes

	// More rows, all after the change; the server is killed while it processes them.
	evs = gen(1500)
	load(evs)
	want3 := expected(3000, 4500)
	produceTo(t, s.ns, "orders", evs)
	time.Sleep(time.Duration(r.Intn(800)) * time.Millisecond)
	queries, rowsIn := metric("rsql_lookup_queries_total"), metric("rsql_lookup_cache_hits_total")+metric("rsql_lookup_cache_misses_total")
	s.p.Kill()
	s.start()

	var got []restartRow
	deadline := time.Now().Add(60 * time.Second)
	for {
		got = got[:0]
		for _, l := range consumeAll(t, s.ns, "enriched") {
			var row restartRow
			if err := json.Unmarshal([]byte(l), &row); err != nil {
				t.Fatalf("enriched: %v: %s", err, l)
			}
			got = append(got, row)
		}
		if len(got) >= 4500 || time.Now().After(deadline) {
			break
		}
	}
	seen := map[int64]int{}
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	bad := 0
	for _, row := range got {
		seen[row.OrderID]++
		var ok bool
		switch {
		case row.OrderID <= 1500:
			ok = str(row.Tier) == str(want1[row.OrderID])
		case row.OrderID <= 3000:
			// Looked up after the restart, before or after the change.
			ok = str(row.Tier) == str(want2new[row.OrderID]) || str(row.Tier) == str(want2old[row.OrderID])
		default:
			ok = str(row.Tier) == str(want3[row.OrderID])
		}
		if !ok && bad < 5 {
			t.Errorf("order %d of %s: tier %s", row.OrderID, row.UserID, str(row.Tier))
		}
		if !ok {
			bad++
		}
	}
	for id := int64(1); id <= 4500; id++ {
		if seen[id] != 1 {
			t.Errorf("order %d is in the output %d times, want once", id, seen[id])
			break
		}
	}
	if len(got) != 4500 || bad > 0 {
		t.Errorf("%d rows, %d with a wrong tier; want 4500 rows, all right", len(got), bad)
	}
	t.Logf("before the kill: %v lookup queries for %v rows", queries, rowsIn)
	if queries == 0 || queries > rowsIn/4 {
		t.Errorf("%v lookup queries for %v rows: want far fewer queries than rows", queries, rowsIn)
	}
	if t.Failed() {
		t.Logf("server stderr:\n%s", s.p.Stderr.String())
	}
}
