package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Queries that compose — derived tables, CTEs, UNION ALL of two streams, chained
// aggregation, window Top-N, deduplication, DISTINCT — over generated, disordered orders
// (with late records) and payments, each compared row for row with PostgreSQL computing
// the same result over the on-time records.

// genPayments makes the second stream: one payment every 40 ms of event time, disordered
// by up to disorderMs, no late records.
func genPayments(seed int64, n int) []event {
	r := rand.New(rand.NewSource(seed))
	out := make([]event, n)
	for i := range out {
		out[i] = event{OrderID: int64(1_000_000 + i), UserID: fmt.Sprintf("u%d", r.Intn(nUsers)),
			Amount: float64(r.Intn(20000)) / 100, TsMs: baseMs + int64(i)*40 - r.Int63n(disorderMs),
			Category: "p", Qty: r.Intn(5)}
	}
	return out
}

// loadTable copies events into a new PostgreSQL table name (ts as epoch ms).
func loadTable(t *testing.T, conn *pgx.Conn, name string, evs []event) {
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `CREATE TABLE `+name+` (order_id bigint, user_id text, amount double precision,
		ts bigint, category text, qty int, late bool)`); err != nil {
		t.Fatal(err)
	}
	rows := make([][]any, len(evs))
	for i, e := range evs {
		rows[i] = []any{e.OrderID, e.UserID, e.Amount, e.TsMs, e.Category, e.Qty, e.Late}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{name},
		[]string{"order_id", "user_id", "amount", "ts", "category", "qty", "late"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
}

var paymentsDDL = `CREATE STREAM payments (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = 'payments.jsonl', format = 'json');
`

// compositionCases: late says whether a late order reaches the job's windowed operator
// (nil: the job judges no lateness).
var compositionCases = []windowCase{
	{
		name: "derived_filter",
		rsql: `SELECT user_id, window_start, n FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end) t WHERE n >= 2`,
		postgres: `SELECT user_id, window_start, n FROM (SELECT user_id, (ts/10000)*10000 AS window_start, COUNT(*) AS n
  FROM orders WHERE NOT late GROUP BY 1, 2) t WHERE n >= 2`,
		tsCols: []string{"window_start"},
		late:   func(event) bool { return true },
	},
	{
		name: "cte_tvf",
		rsql: `WITH big AS (SELECT user_id, ts, amount FROM orders WHERE amount > 100)
SELECT user_id, window_start, window_end, COUNT(*) AS n, MAX(amount) AS m
FROM TUMBLE(big, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end`,
		postgres: `WITH big AS (SELECT user_id, ts, amount FROM orders WHERE amount > 100 AND NOT late)
SELECT user_id, (ts/10000)*10000 AS window_start, (ts/10000)*10000+10000 AS window_end, COUNT(*) AS n, MAX(amount) AS m
FROM big GROUP BY 1, 2, 3`,
		tsCols: []string{"window_start", "window_end"},
		late:   func(e event) bool { return e.Amount > 100 },
	},
	{
		name: "union_all",
		rsql: `SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(qty) AS q
FROM TUMBLE((SELECT user_id, ts, qty FROM orders UNION ALL SELECT user_id, ts, qty FROM payments), ts, INTERVAL '10' SECOND)
GROUP BY user_id, window_start, window_end`,
		postgres: `SELECT user_id, (ts/10000)*10000 AS window_start, (ts/10000)*10000+10000 AS window_end, COUNT(*) AS n, SUM(qty) AS q
FROM (SELECT user_id, ts, qty FROM orders WHERE NOT late UNION ALL SELECT user_id, ts, qty FROM payments) u GROUP BY 1, 2, 3`,
		tsCols: []string{"window_start", "window_end"},
		late:   func(event) bool { return true },
	},
	{
		name: "chained_aggregation",
		rsql: `SELECT window_start, window_end, MAX(n) AS top, COUNT(*) AS users, SUM(n) AS total
FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n FROM TUMBLE(orders, ts, INTERVAL '10' SECOND)
      GROUP BY user_id, window_start, window_end) x
GROUP BY window_start, window_end`,
		postgres: `SELECT window_start, window_end, MAX(n) AS top, COUNT(*) AS users, SUM(n) AS total
FROM (SELECT user_id, (ts/10000)*10000 AS window_start, (ts/10000)*10000+10000 AS window_end, COUNT(*) AS n
      FROM orders WHERE NOT late GROUP BY 1, 2, 3) x GROUP BY 1, 2`,
		tsCols: []string{"window_start", "window_end"},
		late:   func(event) bool { return true },
	},
	{
		name: "window_top_n",
		rsql: `SELECT user_id, window_start, window_end, n, q, rn FROM (
  SELECT user_id, window_start, window_end, n, q,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC, q DESC, user_id) AS rn
  FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(qty) AS q
        FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end) a) b
WHERE rn <= 3`,
		postgres: `SELECT user_id, window_start, window_end, n, q, rn FROM (
  SELECT user_id, window_start, window_end, n, q,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC, q DESC, user_id) AS rn
  FROM (SELECT user_id, (ts/60000)*60000 AS window_start, (ts/60000)*60000+60000 AS window_end, COUNT(*) AS n, SUM(qty) AS q
        FROM orders WHERE NOT late GROUP BY 1, 2, 3) a) b
WHERE rn <= 3`,
		tsCols: []string{"window_start", "window_end"},
		late:   func(event) bool { return true },
	},
	{
		name: "window_dedup_first",
		rsql: `SELECT order_id, user_id, window_start FROM (
  SELECT order_id, user_id, window_start, window_end,
         ROW_NUMBER() OVER (PARTITION BY user_id, window_start, window_end ORDER BY ts, order_id) AS rn
  FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE)) x
WHERE rn = 1`,
		postgres: `SELECT order_id, user_id, window_start FROM (
  SELECT order_id, user_id, (ts/60000)*60000 AS window_start,
         ROW_NUMBER() OVER (PARTITION BY user_id, (ts/60000)*60000 ORDER BY ts, order_id) AS rn
  FROM orders WHERE NOT late) x
WHERE rn = 1`,
		tsCols: []string{"window_start"},
		late:   func(event) bool { return true },
	},
	{
		name: "dedup_first_ttl",
		rsql: `SELECT order_id, user_id, ts FROM (
  SELECT order_id, user_id, ts, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn FROM orders) x
WHERE rn = 1`,
		postgres: `SELECT order_id, user_id, ts FROM (
  SELECT order_id, user_id, ts, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts, order_id) AS rn
  FROM orders WHERE NOT late) x
WHERE rn = 1`,
		tsCols: []string{"ts"},
		late:   func(event) bool { return true },
	},
	{
		name: "distinct_window",
		rsql: `SELECT DISTINCT category, window_start, window_end FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE) WHERE qty > 7`,
		postgres: `SELECT DISTINCT category, (ts/60000)*60000 AS window_start, (ts/60000)*60000+60000 AS window_end
  FROM orders WHERE NOT late AND qty > 7`,
		tsCols: []string{"window_start", "window_end"},
		late:   func(e event) bool { return e.Qty > 7 },
	},
	{
		name:     "distinct_ttl",
		rsql:     `SELECT DISTINCT user_id FROM payments WHERE qty = 4`,
		postgres: `SELECT DISTINCT user_id FROM payments WHERE qty = 4`,
	},
}

func TestCompositionMatchesPostgres(t *testing.T) {
	bin := buildRsql(t)
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	orders, payments := genEvents(7), genPayments(8, nEvents/2)
	loadTable(t, conn, "orders", orders)
	loadTable(t, conn, "payments", payments)

	dir := t.TempDir()
	writeEvents(t, filepath.Join(dir, "orders.jsonl"), orders)
	writeEvents(t, filepath.Join(dir, "payments.jsonl"), payments)
	var script strings.Builder
	script.WriteString(ordersDDL)
	script.WriteString(paymentsDDL)
	// State without a natural end (deduplication and DISTINCT over a whole stream) needs a
	// TTL; one day is longer than the input.
	script.WriteString("SET state_ttl = '1 day';\n")
	for _, c := range compositionCases {
		fmt.Fprintf(&script, "CREATE STREAM %s WITH (connector = 'file', path = '%s.jsonl', format = 'json') AS\n%s;\n", c.name, c.name, c.rsql)
	}
	if err := os.WriteFile(filepath.Join(dir, "pipeline.sql"), []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", "pipeline.sql", "--data-dir", "data", "--format", "json")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rsql -f pipeline.sql: %v\n%s", err, out)
	}
	lates := lateSummary.FindAllStringSubmatch(string(out), -1)
	lateGot := map[int]int{}
	for _, m := range lates {
		n, _ := strconv.Atoi(m[1])
		lateGot[n-1], _ = strconv.Atoi(m[2])
	}
	for i, c := range compositionCases {
		t.Run(c.name, func(t *testing.T) {
			lateWant := 0
			for _, e := range orders {
				if e.Late && c.late != nil && c.late(e) {
					lateWant++
				}
			}
			// Late rows are counted once per job: a row late for an inner window is not
			// counted again by the operators above it.
			if got, ok := lateGot[i]; !ok || got != lateWant {
				t.Errorf("late=%d, want %d\n%s", got, lateWant, out)
			}
			compareFileCase(t, conn, dir, c)
		})
	}
}
