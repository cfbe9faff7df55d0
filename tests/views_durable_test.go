package tests

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A materialized view's rows are committed with its job's checkpoints: a server killed with
// SIGKILL and started again answers its first pull queries with every row the views held,
// without replaying their input first — for a view keyed by its GROUP BY, one holding a
// multiset (a global Top-N) and one holding every row of an append-only query — and the
// views go on from there exactly (no row counted twice, none lost).
func TestViewRowsAreThereAtOnceAfterKill9(t *testing.T) {
	dir := t.TempDir()
	ns, br := freePort(t), freePort(t)
	start := func() (*proc, *pgx.Conn) {
		t.Helper()
		pgAddr := freePort(t)
		p := startProc(t, buildRsql(t), "server", "--data-dir", dir, "--pg-addr", pgAddr,
			"--namesrv-addr", ns, "--broker-addr", br, "--http-addr", freePort(t))
		waitListening(t, p, pgAddr)
		conn, err := pgx.Connect(context.Background(), "postgres://rsql@"+pgAddr+"/rsql?sslmode=disable")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return p, conn
	}
	ctx := context.Background()
	exec := func(conn *pgx.Conn, q string) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const users = 400
	// The orders, and what each view holds once it has read the first n of them.
	type order struct {
		user   string
		amount int
	}
	var orders []order
	for i := 0; i < 24000; i++ {
		orders = append(orders, order{fmt.Sprintf("u%03d", (i*7)%users), i % 97})
	}
	want := func(n int) (keyed, top, big string) {
		cnt, sum := map[string]int{}, map[string]int{}
		nBig, bigSum := 0, 0
		for _, o := range orders[:n] {
			cnt[o.user]++
			sum[o.user] += o.amount
			if o.amount > 90 {
				nBig++
				bigSum += o.amount
			}
		}
		total := 0
		var us []string
		for u, s := range sum {
			total += s
			us = append(us, u)
		}
		keyed = fmt.Sprintf("%d %d %d", len(cnt), n, total)
		sort.Slice(us, func(i, j int) bool {
			if sum[us[i]] != sum[us[j]] {
				return sum[us[i]] > sum[us[j]]
			}
			return us[i] < us[j]
		})
		var tops []string
		for i, u := range us[:3] {
			tops = append(tops, fmt.Sprintf("%s %d %d", u, sum[u], i+1))
		}
		return keyed, strings.Join(tops, ","), fmt.Sprintf("%d %d", nBig, bigSum)
	}
	pulls := []string{
		"SELECT COUNT(*), CAST(SUM(n) AS BIGINT), SUM(total) FROM by_user",
		"SELECT user_id, total, rn FROM top_users ORDER BY rn",
		"SELECT COUNT(*), SUM(amount) FROM big_orders",
	}
	// read runs the three pull queries once and gives their answers as want does.
	read := func(conn *pgx.Conn) [3]string {
		t.Helper()
		var out [3]string
		for i, q := range pulls {
			rows, err := conn.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			var lines []string
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				var f []string
				for _, v := range vals {
					s := fmt.Sprint(v)
					if x, ok := v.(float64); ok {
						s = strconv.FormatFloat(x, 'f', -1, 64)
					}
					if v == nil {
						s = "0" // SUM over no rows
					}
					f = append(f, s)
				}
				lines = append(lines, strings.Join(f, " "))
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			out[i] = strings.Join(lines, ",")
		}
		return out
	}
	waitFor := func(conn *pgx.Conn, n int) {
		t.Helper()
		k, tp, b := want(n)
		w := [3]string{k, tp, b}
		var got [3]string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got = read(conn); got == w {
				return
			}
		}
		t.Fatalf("after %d orders the views hold %q, want %q", n, got, w)
	}
	lines := func(os []order) string {
		var b strings.Builder
		for _, o := range os {
			fmt.Fprintf(&b, "{\"user_id\":%q,\"amount\":%d}\n", o.user, o.amount)
		}
		return b.String()
	}

	p, conn := start()
	exec(conn, "CREATE STREAM orders (user_id VARCHAR, amount DOUBLE) WITH (queues = 2)")
	exec(conn, "CREATE MATERIALIZED VIEW by_user AS SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY user_id")
	exec(conn, `CREATE MATERIALIZED VIEW top_users AS SELECT user_id, total, rn FROM (SELECT user_id, total,
  ROW_NUMBER() OVER (ORDER BY total DESC, user_id) AS rn FROM (SELECT user_id, SUM(amount) AS total FROM orders GROUP BY user_id) a) b WHERE rn <= 3`)
	exec(conn, "CREATE MATERIALIZED VIEW big_orders AS SELECT user_id, amount FROM orders WHERE amount > 90")
	half := len(orders) / 2
	if err := produceLines(ns, "orders", "user_id", lines(orders[:half])); err != nil {
		t.Fatal(err)
	}
	// A pull query sees committed rows only: once it shows all of them, they are in the
	// store.
	waitFor(conn, half)
	p.Kill()

	p, conn = start()
	k, tp, b := want(half)
	if got := read(conn); got != [3]string{k, tp, b} {
		t.Fatalf("the first pull queries after a restart give %q, want the rows the views held before, %q", got, [3]string{k, tp, b})
	}
	if err := produceLines(ns, "orders", "user_id", lines(orders[half:])); err != nil {
		t.Fatal(err)
	}
	waitFor(conn, len(orders))
	_ = p
}

// TestBenchViewRestart: `rsql bench view` builds a view of every key, closes the server and
// starts it again on the same data directory; its first pull query must give every key
// (the command fails otherwise), and the report says how long it took.
func TestBenchViewRestart(t *testing.T) {
	out, errOut, err := runRsql(t, "", "bench", "view", "--keys", "3000")
	if err != nil {
		t.Fatalf("bench view: %v\n%s\n%s", err, out, errOut)
	}
	if !strings.Contains(out, "reading every row (COUNT(*): 3000)") || !strings.Contains(out, "SELECT * of every row (3000 rows") {
		t.Fatalf("bench view reported:\n%s", out)
	}
}
