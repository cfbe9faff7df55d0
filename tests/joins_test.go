package tests

import (
	"context"
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

// Joins over generated, disordered streams — orders, their payments, and a versioned table
// of users — each compared row for row with PostgreSQL computing the same join over the
// on-time records. Payments fall around their order's time, some exactly on the interval's
// ends; user versions fall exactly on some orders' times; some versions delete their key.

// joinPayments makes about one payment per order, at the order's time plus an offset
// between -6 s and +12 s (every fifth exactly 0 or exactly +10 s, the interval's ends), for
// a fifth of the orders two payments, for a tenth none.
func joinPayments(seed int64, orders []event) []event {
	r := rand.New(rand.NewSource(seed))
	var out []event
	for _, o := range orders {
		if o.Late || r.Intn(10) == 0 {
			continue
		}
		n := 1 + r.Intn(5)/4
		for k := 0; k < n; k++ {
			off := int64(r.Intn(18_001)) - 6_000
			switch r.Intn(5) {
			case 0:
				off = 0
			case 1:
				off = 10_000
			}
			out = append(out, event{OrderID: o.OrderID, UserID: o.UserID, Amount: float64(r.Intn(10000)) / 100,
				TsMs: o.TsMs + off, Category: "p", Qty: r.Intn(3)})
		}
	}
	// The stream arrives in time order, with the same bounded disorder as the orders.
	sortByTime(out, r)
	return out
}

// sortByTime orders events by time, then moves each a little (less than disorderMs).
func sortByTime(evs []event, r *rand.Rand) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].TsMs < evs[j-1].TsMs; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
	for i := range evs {
		j := i + r.Intn(20)
		if j < len(evs) && evs[j].TsMs-evs[i].TsMs < disorderMs {
			evs[i], evs[j] = evs[j], evs[i]
		}
	}
}

// userVersion is one record of the versioned users table.
type userVersion struct {
	UserID, Tier string
	TsMs         int64
	Delete       bool
}

// joinUsers makes versions of the users over the orders' time span: a first version of
// each user before the first order, then changes (one in 12 a delete), a third of them at
// exactly the time of one of the user's orders. No two versions of a user share a time.
func joinUsers(seed int64, orders []event) []userVersion {
	r := rand.New(rand.NewSource(seed))
	var out []userVersion
	seen := map[string]map[int64]bool{}
	add := func(v userVersion) {
		if seen[v.UserID] == nil {
			seen[v.UserID] = map[int64]bool{}
		}
		if seen[v.UserID][v.TsMs] {
			return
		}
		seen[v.UserID][v.TsMs] = true
		out = append(out, v)
	}
	for u := 0; u < nUsers; u++ {
		add(userVersion{UserID: fmt.Sprintf("u%d", u), Tier: "bronze", TsMs: baseMs - 60_000 + int64(u)})
	}
	tiers := []string{"bronze", "silver", "gold"}
	for i, o := range orders {
		if o.Late || i%40 != 0 {
			continue
		}
		ts := o.TsMs - int64(r.Intn(30_000))
		if r.Intn(3) == 0 {
			ts = o.TsMs
		}
		add(userVersion{UserID: o.UserID, Tier: tiers[r.Intn(3)], TsMs: ts, Delete: r.Intn(12) == 0})
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].TsMs < out[j-1].TsMs; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func writeUsers(t *testing.T, path string, vs []userVersion) {
	if err := os.WriteFile(path, []byte(userLines(vs)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func loadUsers(t *testing.T, conn *pgx.Conn, vs []userVersion) {
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `CREATE TABLE users (user_id text, tier text, ts bigint, op text)`); err != nil {
		t.Fatal(err)
	}
	rows := make([][]any, len(vs))
	for i, v := range vs {
		op := "upsert"
		if v.Delete {
			op = "delete"
		}
		rows[i] = []any{v.UserID, v.Tier, v.TsMs, op}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"users"}, []string{"user_id", "tier", "ts", "op"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
}

const joinDDL = `CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = 'orders.jsonl', format = 'json');
CREATE STREAM payments (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = 'payments.jsonl', format = 'json');
CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = 'users.jsonl', format = 'json');
SET state_ttl = '1 day';
`

// onTime are the PostgreSQL relations of the on-time records.
const onTime = `WITH o AS (SELECT * FROM orders WHERE NOT late), p AS (SELECT * FROM payments) `

var joinCases = []windowCase{
	{
		name: "interval_inner",
		rsql: `SELECT o.order_id, o.user_id, p.amount, p.ts AS paid FROM orders o JOIN payments p
  ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '10' SECOND`,
		postgres: onTime + `SELECT o.order_id, o.user_id, p.amount, p.ts AS paid FROM o JOIN p
  ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + 10000`,
		tsCols: []string{"paid"},
	},
	{
		name: "interval_left_strict",
		rsql: `SELECT o.order_id, p.amount FROM orders o LEFT JOIN payments p
  ON o.order_id = p.order_id AND p.ts > o.ts - INTERVAL '5' SECOND AND p.ts < o.ts + INTERVAL '10' SECOND`,
		postgres: onTime + `SELECT o.order_id, p.amount FROM o LEFT JOIN p
  ON o.order_id = p.order_id AND p.ts > o.ts - 5000 AND p.ts < o.ts + 10000`,
	},
	{
		name: "interval_right",
		rsql: `SELECT o.order_id AS oid, p.order_id AS pid, p.amount FROM orders o RIGHT JOIN payments p
  ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '10' SECOND`,
		postgres: onTime + `SELECT o.order_id AS oid, p.order_id AS pid, p.amount FROM o RIGHT JOIN p
  ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + 10000`,
	},
	{
		name: "interval_full_residual",
		rsql: `SELECT o.order_id AS oid, p.order_id AS pid FROM orders o FULL OUTER JOIN payments p
  ON o.order_id = p.order_id AND o.ts <= p.ts AND p.ts <= o.ts + INTERVAL '10' SECOND AND p.amount > 20`,
		postgres: onTime + `SELECT o.order_id AS oid, p.order_id AS pid FROM o FULL OUTER JOIN p
  ON o.order_id = p.order_id AND o.ts <= p.ts AND p.ts <= o.ts + 10000 AND p.amount > 20`,
	},
	{
		name: "window_join",
		rsql: `SELECT a.user_id, a.window_start, a.n, b.m FROM
  (SELECT user_id, window_start, window_end, COUNT(*) AS n FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end) a
  JOIN
  (SELECT user_id, window_start, window_end, COUNT(*) AS m FROM TUMBLE(payments, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end) b
  ON a.user_id = b.user_id AND a.window_start = b.window_start AND a.window_end = b.window_end`,
		postgres: onTime + `SELECT a.user_id, a.window_start, a.n, b.m FROM
  (SELECT user_id, (ts/60000)*60000 AS window_start, COUNT(*) AS n FROM o GROUP BY 1, 2) a
  JOIN (SELECT user_id, (ts/60000)*60000 AS window_start, COUNT(*) AS m FROM p GROUP BY 1, 2) b
  ON a.user_id = b.user_id AND a.window_start = b.window_start`,
		tsCols: []string{"window_start"},
	},
	{
		name: "window_join_full",
		rsql: `SELECT a.window_start AS ws, b.window_start AS wp, a.n, b.m FROM
  (SELECT window_start, window_end, COUNT(*) AS n FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE) WHERE qty = 3 GROUP BY window_start, window_end) a
  FULL JOIN
  (SELECT window_start, window_end, COUNT(*) AS m FROM TUMBLE(payments, ts, INTERVAL '1' MINUTE) WHERE amount > 99.5 GROUP BY window_start, window_end) b
  ON a.window_start = b.window_start AND a.window_end = b.window_end`,
		postgres: onTime + `SELECT a.window_start AS ws, b.window_start AS wp, a.n, b.m FROM
  (SELECT (ts/60000)*60000 AS window_start, COUNT(*) AS n FROM o WHERE qty = 3 GROUP BY 1) a
  FULL JOIN (SELECT (ts/60000)*60000 AS window_start, COUNT(*) AS m FROM p WHERE amount > 99.5 GROUP BY 1) b
  ON a.window_start = b.window_start`,
		tsCols: []string{"ws", "wp"},
	},
	{
		name: "temporal_inner",
		rsql: `SELECT o.order_id, u.tier FROM orders o JOIN users FOR SYSTEM_TIME AS OF o.ts AS u ON o.user_id = u.user_id`,
		postgres: onTime + `SELECT o.order_id, v.tier FROM o JOIN LATERAL (SELECT tier, op FROM users u
  WHERE u.user_id = o.user_id AND u.ts <= o.ts ORDER BY u.ts DESC LIMIT 1) v ON v.op <> 'delete'`,
	},
	{
		name: "temporal_left",
		rsql: `SELECT o.order_id, u.tier, u.ts AS since FROM orders o LEFT JOIN users FOR SYSTEM_TIME AS OF o.ts AS u ON o.user_id = u.user_id`,
		postgres: onTime + `SELECT o.order_id, CASE WHEN v.op = 'delete' THEN NULL ELSE v.tier END AS tier,
  CASE WHEN v.op = 'delete' THEN NULL ELSE v.ts END AS since
  FROM o LEFT JOIN LATERAL (SELECT tier, op, ts FROM users u
  WHERE u.user_id = o.user_id AND u.ts <= o.ts ORDER BY u.ts DESC LIMIT 1) v ON true`,
		tsCols: []string{"since"},
	},
	{
		name: "interval_then_temporal",
		rsql: `SELECT o.order_id, p.amount, u.tier FROM orders o JOIN payments p
  ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '10' SECOND
  JOIN users FOR SYSTEM_TIME AS OF o.ts AS u ON o.user_id = u.user_id`,
		postgres: onTime + `SELECT o.order_id, p.amount, v.tier FROM o JOIN p
  ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + 10000
  JOIN LATERAL (SELECT tier, op FROM users u WHERE u.user_id = o.user_id AND u.ts <= o.ts ORDER BY u.ts DESC LIMIT 1) v ON v.op <> 'delete'`,
	},
	{
		name: "window_over_interval",
		rsql: `SELECT window_start, COUNT(*) AS n, SUM(paid) AS paid FROM TUMBLE(
  (SELECT o.order_id, o.ts, p.amount AS paid FROM orders o JOIN payments p
   ON o.order_id = p.order_id AND p.ts BETWEEN o.ts - INTERVAL '5' SECOND AND o.ts + INTERVAL '10' SECOND),
  ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end`,
		postgres: onTime + `SELECT (o.ts/60000)*60000 AS window_start, COUNT(*) AS n, SUM(p.amount) AS paid FROM o JOIN p
  ON o.order_id = p.order_id AND p.ts BETWEEN o.ts - 5000 AND o.ts + 10000 GROUP BY 1`,
		tsCols: []string{"window_start"},
	},
	{
		name:     "regular_ttl",
		rsql:     `SELECT o.order_id, p.amount FROM orders o JOIN payments p ON o.order_id = p.order_id WHERE p.amount > 90`,
		postgres: `SELECT o.order_id, p.amount FROM orders o JOIN payments p ON o.order_id = p.order_id WHERE p.amount > 90`,
	},
}

func TestJoinsMatchPostgres(t *testing.T) {
	bin := buildRsql(t)
	conn := startPostgresConn(t)
	orders := genEvents(31)[:40_000]
	payments := joinPayments(32, orders)
	users := joinUsers(33, orders)
	loadTable(t, conn, "orders", orders)
	loadTable(t, conn, "payments", payments)
	loadUsers(t, conn, users)

	dir := t.TempDir()
	if d := os.Getenv("RSQL_JOIN_DIR"); d != "" { // keep the inputs and outputs to look at

		dir = d
	}
	writeEvents(t, filepath.Join(dir, "orders.jsonl"), orders)
	writeEvents(t, filepath.Join(dir, "payments.jsonl"), payments)
	writeUsers(t, filepath.Join(dir, "users.jsonl"), users)
	var script strings.Builder
	script.WriteString(joinDDL)
	for _, c := range joinCases {
		fmt.Fprintf(&script, "CREATE STREAM %s WITH (connector = 'file', path = '%s.jsonl', format = 'json') AS\n%s;\n", c.name, c.name, c.rsql)
	}
	if err := os.WriteFile(filepath.Join(dir, "pipeline.sql"), []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command(bin, "-f", "pipeline.sql", "--data-dir", "data", "--format", "json")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rsql -f pipeline.sql: %v\n%s", err, out)
	}
	t.Logf("rsql -f ran %d join jobs in %v", len(joinCases), time.Since(start))
	for _, c := range joinCases {
		t.Run(c.name, func(t *testing.T) {
			compareFileCase(t, conn, dir, c)
		})
	}
}
