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
		`CREATE TABLE sink.big_orders (order_id bigint PRIMARY KEY, user_id text, amount float8 CHECK (amount < 190))`,
	} {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// pgSinkCases are the sink tables and the PostgreSQL queries over orders that compute
// what they must hold (totals rounded: a sum of doubles depends on its order). The rows of
// big_orders with an amount of 190 or more are refused by the table's CHECK constraint.
var pgSinkCases = []struct{ table, want string }{
	{`SELECT user_id, n, round(total::numeric, 6) FROM sink.user_totals`,
		`SELECT user_id, count(*), round(sum(amount)::numeric, 6) FROM orders GROUP BY user_id`},
	{`SELECT user_id, n, round(total::numeric, 6) FROM sink.band`,
		`SELECT user_id, count(*), round(sum(amount)::numeric, 6) FROM orders GROUP BY user_id HAVING count(*) BETWEEN 140 AND 155`},
	{`SELECT category, n, q FROM cat_totals`,
		`SELECT category, count(*), sum(qty) FROM orders GROUP BY category`},
	{`SELECT order_id, user_id, round(amount::numeric, 6) FROM sink.big_orders`,
		`SELECT order_id, user_id, round(amount::numeric, 6) FROM orders WHERE amount > 90 AND amount < 190`},
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

// TestPostgresSinkTopicsKilled: the same per-key aggregates, HAVING band and append-only
// filter over a topic, into PostgreSQL tables, with the rsql server killed with SIGKILL
// three times while it writes, and the database stopped for a few seconds. At the end the tables equal PostgreSQL's queries over every
// order produced: nothing lost; the rows a CHECK constraint refuses are in the orders'
// dead-letter topic with PostgreSQL's message; no append-only row was inserted
// twice (a second insert of a key would be refused by the table's primary key and land in
// the dead-letter topic too). The progress table holds the epochs applied.
func TestPostgresSinkTopicsKilled(t *testing.T) {
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { conn.Close(ctx) }()
	loadEvents(t, conn, nil)
	pgSinkTables(t, conn)
	s := newJobsServer(t)
	s.sql(`CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP, category VARCHAR, qty INT)
  WITH (topic = 'orders', queues = 2, dlq_topic = 'orders_dlq');` + pgSinkDDL(pg.URL))
	all := genEvents(62)[:30_000]
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	// 15 rounds of 2000 orders: each user's count grows by about 10 a round, so keys enter
	// the band (140 to 155) in one checkpoint epoch and leave it in a later one.
	const rounds, per = 15, 2000
	for round := 0; round < rounds; round++ {
		evs := all[round*per : (round+1)*per]
		rows := make([][]any, len(evs))
		for i, e := range evs {
			rows[i] = []any{e.OrderID, e.UserID, e.Amount, e.TsMs, e.Category, e.Qty, e.Late}
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"orders"}, []string{"order_id", "user_id", "amount", "ts", "category", "qty", "late"}, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
		produceTo(t, s.ns, "orders", evs)
		switch {
		case round%4 == 2 && round < 12:
			time.Sleep(time.Duration(200+r.Intn(800)) * time.Millisecond)
			s.p.Kill()
			s.start()
		case round == 8:
			// The database goes away for a while: the jobs wait for it and go on.
			pg.StopServer()
			release, err := pg.HoldPort()
			if err != nil {
				t.Fatal(err)
			}
			conn.Close(ctx)
			time.Sleep(3 * time.Second)
			release()
			if err := pg.StartServer(); err != nil {
				t.Fatal(err)
			}
			if conn, err = pgx.Connect(ctx, pg.URL); err != nil {
				t.Fatal(err)
			}
		default:
			time.Sleep(400 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, c := range pgSinkCases {
		for {
			d := pgDiff(t, conn, c.table, c.want)
			if d == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s differs from %s:\n%s\nserver stderr:\n%s", c.table, c.want, d, s.p.Stderr.String())
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	// Keys left the band: rows of sink.band were deleted (the statistics of the sink's
	// sessions reach pg_stat_user_tables within a second or so).
	for deadline := time.Now().Add(20 * time.Second); ; {
		var dels int64
		if err := conn.QueryRow(ctx, `SELECT n_tup_del FROM pg_stat_user_tables WHERE schemaname = 'sink' AND relname = 'band'`).Scan(&dels); err != nil {
			t.Fatal(err)
		}
		if dels > 0 {
			t.Logf("%d rows deleted from sink.band", dels)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no row was deleted from sink.band: no key left the band, the test does not test deletes")
		}
		time.Sleep(200 * time.Millisecond)
		conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
	}
	if n := pgCount(t, conn, `SELECT * FROM rsql_sink_progress`); n == 0 {
		t.Errorf("the progress table is empty")
	}
	// A terminated job's progress rows leave the table; the other jobs' stay.
	var job string
	if err := conn.QueryRow(ctx, `SELECT min(job) FROM rsql_sink_progress`).Scan(&job); err != nil {
		t.Fatal(err)
	}
	others := pgCount(t, conn, `SELECT * FROM rsql_sink_progress WHERE job <> '`+job+`'`)
	s.sql("TERMINATE JOB " + job)
	for deadline := time.Now().Add(20 * time.Second); pgCount(t, conn, `SELECT * FROM rsql_sink_progress WHERE job = '`+job+`'`) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the progress rows of terminated job %s are left\n%s", job, s.p.Stderr.String())
		}
	}
	if n := pgCount(t, conn, `SELECT * FROM rsql_sink_progress WHERE job <> '`+job+`'`); n != others || n == 0 {
		t.Fatalf("%d progress rows of the other jobs, %d before", n, others)
	}
	// The dead-letter topic holds each order the CHECK constraint refused, with
	// PostgreSQL's message (at least once: an epoch whose transaction did not commit
	// reports its refused rows again), and no other row (a duplicate insert would be
	// refused by the primary key and land there too).
	out, errOut, err := runRsql(t, "", "consume", "orders_dlq", "--from-beginning", "--idle-exit", "2s", "--namesrv-addr", s.ns)
	if err != nil {
		t.Fatalf("consume orders_dlq: %v\n%s", err, errOut)
	}
	got := map[int64]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec struct {
			Error struct{ Code, Message string }
			Row   struct {
				OrderID int64 `json:"order_id"`
			}
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("dead letter %q: %v", l, err)
		}
		if rec.Error.Code != "23514" || !strings.Contains(rec.Error.Message, "big_orders_amount_check") {
			t.Errorf("dead letter %q: want 23514 with the constraint's name", l)
		}
		got[rec.Row.OrderID]++
	}
	want := 0
	for _, e := range all {
		if e.Amount >= 190 {
			want++
			if got[e.OrderID] == 0 {
				t.Errorf("order %d (amount %v) is not in the dead-letter topic", e.OrderID, e.Amount)
			}
		}
	}
	if want == 0 || len(got) != want {
		t.Errorf("%d orders in the dead-letter topic, want the %d the constraint refuses", len(got), want)
	}
}
