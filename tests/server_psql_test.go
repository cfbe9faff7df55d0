package tests

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startServer runs `rsql server` on free loopback ports and returns it with its
// Postgres-wire address.
func startServer(t *testing.T) (*proc, string) {
	t.Helper()
	pgAddr := freePort(t)
	p := startProc(t, buildRsql(t), "server", "--data-dir", t.TempDir(), "--pg-addr", pgAddr,
		"--namesrv-addr", freePort(t), "--broker-addr", freePort(t), "--http-addr", freePort(t))
	waitListening(t, p, pgAddr)
	return p, pgAddr
}

// The server as psql meets it: DDL, INSERT ... VALUES, SHOW, an error with its SQLSTATE, and
// a push query with LIMIT over the stream's topic.
func TestServerWithPsql(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatal("psql is needed (apt-get install postgresql-client)")
	}
	srv, addr := startServer(t)
	host, port, _ := strings.Cut(addr, ":")
	psql := func(args ...string) (string, error) {
		cmd := exec.Command("psql", append([]string{"-h", host, "-p", port, "-U", "rsql", "-X", "-v", "ON_ERROR_STOP=1"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := psql("-c", "CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP) WITH (queues = 2)",
		"-c", "INSERT INTO orders VALUES (1, 'u1', 9.5, '2026-11-30T05:00:00Z'), (2, 'u2', 3, '2026-11-30T05:00:01Z')",
		"-c", "SHOW STREAMS")
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	for _, want := range []string{"CREATE STREAM", "INSERT 0 2", "orders | broker"} {
		if !strings.Contains(out, want) {
			t.Errorf("psql output lacks %q:\n%s", want, out)
		}
	}
	// What clients ask on connect, and the broker's topics.
	out, err = psql("-A", "-t", "-c", "SELECT version()", "-c", "SELECT current_schema()", "-c", "SHOW TOPICS")
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	for _, want := range []string{"PostgreSQL 15.0", "public", "orders|2|2"} {
		if !strings.Contains(out, want) {
			t.Errorf("psql output lacks %q:\n%s", want, out)
		}
	}
	// psql's catalog queries get a clear "not supported" that says what to use instead.
	out, err = psql("-v", "VERBOSITY=verbose", "-c", `\d`)
	if err == nil || !strings.Contains(out, "0A000") || !strings.Contains(out, "SHOW STREAMS") {
		t.Errorf(`psql \d: err=%v\n%s`, err, out)
	}
	out, err = psql("-c", "SELECT nope FROM orders")
	if err == nil || !strings.Contains(out, "nope") {
		t.Errorf("unknown column: err=%v\n%s", err, out)
	}

	// Typed columns over pgx, reading the topic from the beginning.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+addr+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET offset_reset = 'earliest'"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT order_id, user_id, amount * 2 AS dbl, ts FROM orders LIMIT 2", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]float64{}
	for rows.Next() {
		var id int64
		var user string
		var dbl float64
		var ts time.Time
		if err := rows.Scan(&id, &user, &dbl, &ts); err != nil {
			t.Fatal(err)
		}
		seen[id] = dbl
		if id == 1 && (user != "u1" || !ts.Equal(time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC))) {
			t.Errorf("row 1 = %q %v", user, ts)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[1] != 19 || seen[2] != 6 {
		t.Errorf("push query rows = %v, want {1: 19, 2: 6}", seen)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("rsql server did not stop cleanly on SIGTERM: %v\n%s", err, srv.Stderr.String())
	}
}
