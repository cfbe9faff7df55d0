package tests

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startServerIn runs `rsql server` on data directory dir and free loopback ports.
func startServerIn(t *testing.T, dir string) (*proc, string) {
	t.Helper()
	pgAddr := freePort(t)
	p := startProc(t, buildRsql(t), "server", "--data-dir", dir, "--pg-addr", pgAddr,
		"--namesrv-addr", freePort(t), "--broker-addr", freePort(t), "--http-addr", freePort(t))
	waitListening(t, p, pgAddr)
	return p, pgAddr
}

// A materialized view answers pull queries with its current rows, keeps them up to date,
// and has them all again after the server restarts.
func TestMaterializedViewPullQueriesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	srv, addr := startServerIn(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	connect := func(addr string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, "postgres://rsql@"+addr+"/rsql?sslmode=disable")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	exec := func(conn *pgx.Conn, q string) {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// waitCount polls the view until user's row has count n and total sum.
	waitCount := func(conn *pgx.Conn, user string, n int64, sum float64) {
		t.Helper()
		var gotN int64
		var gotSum float64
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			err = conn.QueryRow(ctx, "SELECT n, total FROM user_counts WHERE user_id = $1", user).Scan(&gotN, &gotSum)
			if err == nil && gotN == n && gotSum == sum {
				return
			}
		}
		t.Fatalf("view row of %s: n=%d total=%v (%v), want n=%d total=%v", user, gotN, gotSum, err, n, sum)
	}

	conn := connect(addr)
	exec(conn, "CREATE STREAM orders (user_id VARCHAR, amount DOUBLE) WITH (queues = 2)")
	exec(conn, "CREATE MATERIALIZED VIEW user_counts AS SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY user_id")
	exec(conn, "INSERT INTO orders VALUES ('u1', 1.5), ('u2', 10), ('u1', 2.5), ('u3', 7)")
	waitCount(conn, "u1", 2, 4)
	waitCount(conn, "u2", 1, 10)

	if err := srv.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	_, addr = startServerIn(t, dir)
	conn = connect(addr)
	// A clean stop leaves the job RUNNING, so it starts again with the server.
	rows, err := conn.Query(ctx, "SHOW JOBS", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	job, err := pgx.CollectOneRow(rows, pgx.RowToMap)
	if err != nil || job["state"] != "RUNNING" {
		t.Fatalf("after a restart SHOW JOBS gives %v (%v), want the view's job RUNNING", job["state"], err)
	}
	waitCount(conn, "u1", 2, 4)
	waitCount(conn, "u3", 1, 7)
	exec(conn, "INSERT INTO orders VALUES ('u3', 1)")
	waitCount(conn, "u3", 2, 8)
	waitCount(conn, "u2", 1, 10)
}
