package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A TABLE over a topic, through a real server: a pull query reads its latest versions
// (deletes end a key), before and after new versions arrive; a join with the table FOR
// SYSTEM_TIME AS OF PROCTIME() takes the version current when each order reaches it — here,
// with the table loaded before any order, its latest. Both are compared with PostgreSQL.

const latestUsersPG = `SELECT DISTINCT ON (user_id) user_id, tier, ts, op FROM users ORDER BY user_id, ts DESC`

func TestTablePullQueryAndProcessingTimeJoin(t *testing.T) {
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	orders := genEvents(51)[:6_000]
	users := joinUsers(53, orders)
	loadTable(t, conn, "orders", orders)
	loadUsers(t, conn, users)

	s := newJobsServer(t)
	s.sql(`CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (topic = 'users', queues = 2);
CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'orders', queues = 4);
CREATE STREAM enriched WITH (queues = 2) AS
  SELECT o.order_id, u.tier FROM orders o LEFT JOIN users FOR SYSTEM_TIME AS OF PROCTIME() AS u ON o.user_id = u.user_id;`)
	if err := produceLines(s.ns, "users", "user_id", userLines(users)); err != nil {
		t.Fatal(err)
	}
	rs, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)

	checkPull := func(what string) {
		t.Helper()
		_, want := pgRows(t, conn, `SELECT user_id, tier, ts FROM (`+latestUsersPG+`) v WHERE op <> 'delete'`)
		var ws, gs []string
		for _, r := range want {
			ws = append(ws, fmt.Sprintf("%v %v %v", r["user_id"], r["tier"], r["ts"]))
		}
		rows, err := rs.Query(ctx, "SELECT user_id, tier, ts FROM users", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatalf("pull query: %v", err)
		}
		for rows.Next() {
			var u, tier string
			var ts time.Time
			if err := rows.Scan(&u, &tier, &ts); err != nil {
				t.Fatal(err)
			}
			gs = append(gs, fmt.Sprintf("%s %s %d", u, tier, ts.UnixMilli()))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(ws) < 100 {
			t.Fatalf("only %d live users: the case tests little", len(ws))
		}
		compareMultisets(t, what, ws, gs)
	}
	checkPull("pull query over the table")

	// The job reads the whole table before any order exists.
	waitRecordsIn(t, s, int64(len(users)))
	produceTo(t, s.ns, "orders", orders)
	waitRecordsIn(t, s, int64(len(users)+len(orders)))
	_, want := pgRows(t, conn, `SELECT o.order_id, CASE WHEN v.op = 'delete' THEN NULL ELSE v.tier END AS tier
  FROM orders o LEFT JOIN (`+latestUsersPG+`) v ON o.user_id = v.user_id`)
	var ws []string
	for _, r := range want {
		ws = append(ws, canon(t, []string{"order_id", "tier"}, r, nil))
	}
	var gs []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		gs = gs[:0]
		for _, line := range consumeAll(t, s.ns, "enriched") {
			var m map[string]any
			dec := json.NewDecoder(strings.NewReader(line))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("not a row: %v: %s", err, line)
			}
			gs = append(gs, canon(t, []string{"order_id", "tier"}, m, nil))
		}
		if len(gs) >= len(ws) || time.Now().After(deadline) {
			break
		}
	}
	compareMultisets(t, "orders joined with the current versions", ws, gs)

	// New versions: the pull query sees them.
	more := []userVersion{{UserID: "u1", Tier: "platinum", TsMs: baseMs + 10_000_000}, {UserID: "u2", Tier: "x", TsMs: baseMs + 10_000_000, Delete: true}}
	if err := produceLines(s.ns, "users", "user_id", userLines(more)); err != nil {
		t.Fatal(err)
	}
	loadUsers2(t, conn, more)
	checkPull("pull query after new versions")
}

// loadUsers2 appends versions to PostgreSQL's users table.
func loadUsers2(t *testing.T, conn *pgx.Conn, vs []userVersion) {
	for _, v := range vs {
		op := "upsert"
		if v.Delete {
			op = "delete"
		}
		if _, err := conn.Exec(context.Background(), `INSERT INTO users VALUES ($1, $2, $3, $4)`, v.UserID, v.Tier, v.TsMs, op); err != nil {
			t.Fatal(err)
		}
	}
}

// waitRecordsIn waits until the server's jobs have read n records in all (SHOW JOBS).
func waitRecordsIn(t *testing.T, s *jobsServer, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := jobsRecordsIn(s)
		if err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs read %d records, want %d (%v)", got, n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func jobsRecordsIn(s *jobsServer) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SHOW JOBS", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var total int64
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return 0, err
		}
		for i, fd := range rows.FieldDescriptions() {
			if fd.Name == "records_in" {
				n, _ := vals[i].(int64)
				total += n
			}
		}
	}
	return total, rows.Err()
}
