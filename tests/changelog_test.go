package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// An updating query written to a topic, through a real server and its broker: users enter
// the result with their first order and leave it with their third (a filter over a GROUP
// BY's count). The derived stream is a table keyed by user_id whose pull query, the
// changelog folded by key from the topic itself, and the same changelog written as
// debezium-json and read back as a TABLE all equal PostgreSQL's answer over the same rows.
func TestChangelogSinkMatchesPostgres(t *testing.T) {
	ctx := context.Background()
	conn := startPostgresConn(t)
	r := rand.New(rand.NewSource(61))
	var orders []event
	for i := 0; i < 4000; i++ {
		orders = append(orders, event{OrderID: int64(i + 1), UserID: fmt.Sprintf("u%d", r.Intn(1500)),
			Amount: float64(r.Intn(10000)) / 100, TsMs: baseMs + int64(i)*10, Category: "a", Qty: 1})
	}
	loadTable(t, conn, "orders", orders)
	_, want := pgRows(t, conn, `SELECT user_id, n FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x WHERE n < 3`)
	var ws []string
	for _, row := range want {
		ws = append(ws, fmt.Sprintf("%v=%v", row["user_id"], row["n"]))
	}
	if len(ws) < 300 || len(ws) > 1400 {
		t.Fatalf("%d users in the answer: the case tests little", len(ws))
	}

	s := newJobsServer(t)
	const query = `SELECT * FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x WHERE n < 3`
	s.sql(`CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'orders', queues = 4);
CREATE STREAM small_users WITH (queues = 2, checkpoint_interval = '200ms') AS ` + query + `;
CREATE STREAM small_users_dbz WITH (queues = 2, format = 'debezium-json', checkpoint_interval = '200ms') AS ` + query + `;`)
	produceTo(t, s.ns, "orders", orders)
	waitRecordsIn(t, s, int64(2*len(orders)))

	rs, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)
	pull := func(table string) []string {
		rows, err := rs.Query(ctx, "SELECT user_id, n FROM "+table, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatalf("pull query over %s: %v", table, err)
		}
		var out []string
		for rows.Next() {
			var u string
			var n int64
			if err := rows.Scan(&u, &n); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s=%d", u, n))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := func(a, b []string) bool {
		x, y := append([]string(nil), a...), append([]string(nil), b...)
		sort.Strings(x)
		sort.Strings(y)
		return strings.Join(x, " ") == strings.Join(y, " ")
	}
	for _, table := range []string{"small_users", "small_users_dbz"} {
		var got []string
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			if got = pull(table); same(got, ws) || time.Now().After(deadline) {
				break
			}
		}
		compareMultisets(t, "pull query over "+table, ws, got)
	}

	// The topic itself, folded by key: an insert is the row, a delete has "__op":"delete".
	latest := map[string]string{}
	deletes := 0
	for _, line := range consumeAll(t, s.ns, "small_users") {
		var m struct {
			UserID string `json:"user_id"`
			N      int64  `json:"n"`
			Op     string `json:"__op"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a change: %v: %s", err, line)
		}
		switch m.Op {
		case "delete":
			delete(latest, m.UserID)
			deletes++
		case "":
			latest[m.UserID] = fmt.Sprintf("%s=%d", m.UserID, m.N)
		default:
			t.Fatalf("change %q: %s", m.Op, line)
		}
	}
	var folded []string
	for _, v := range latest {
		folded = append(folded, v)
	}
	compareMultisets(t, "the changelog topic folded by key", ws, folded)
	if deletes == 0 {
		t.Error("no delete in the changelog, though users left the result")
	}
	for _, line := range consumeAll(t, s.ns, "small_users_dbz")[:1] {
		if !strings.HasPrefix(line, `{"before":`) || !strings.Contains(line, `"op":"`) {
			t.Errorf("not a Debezium change event: %s", line)
		}
	}
}
