package tests

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Joins from psql: a table's versions and a stream's rows inserted through psql, a pull
// query over the table, and a push query that joins each order with its user's version at
// the order's time (a temporal join) until its LIMIT.
func TestPsqlJoins(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatal("psql is needed (apt-get install postgresql-client)")
	}
	_, addr := startServer(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := psqlCmd(addr, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("psql %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("-c", `CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts) WITH (queues = 1, idle_timeout = '0s')`,
		"-c", `CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts) WITH (queues = 1, idle_timeout = '0s')`,
		"-c", `INSERT INTO users VALUES ('u1', 'gold', '2026-11-30T05:00:00Z'), ('u2', 'basic', '2026-11-30T05:00:00Z'),
  ('u1', 'silver', '2026-11-30T05:00:10Z')`)
	if got, want := run("-A", "-t", "-c", "SELECT user_id, tier FROM users ORDER BY user_id"), "u1|silver\nu2|basic\n"; got != want {
		t.Errorf("pull query over the table printed %q, want %q", got, want)
	}

	push := psqlCmd(addr, "-A", "-t", "-c", "SET offset_reset = 'earliest'", "-c",
		`SELECT o.order_id, u.tier FROM orders o JOIN users FOR SYSTEM_TIME AS OF o.ts AS u
  ON o.user_id = u.user_id LIMIT 3`)
	var out syncBuffer
	push.Stdout, push.Stderr = &out, &out
	if err := push.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- push.Wait() }()
	// Orders before and after u1's second version; the table's watermark must pass an
	// order's time before it is joined, so a last version moves it on.
	run("-c", `INSERT INTO orders VALUES (1, 'u1', '2026-11-30T05:00:05Z'), (2, 'u2', '2026-11-30T05:00:06Z'),
  (3, 'u1', '2026-11-30T05:00:11Z')`)
	run("-c", `INSERT INTO users VALUES ('u3', 'basic', '2026-11-30T05:01:00Z')`)
	run("-c", `INSERT INTO orders VALUES (4, 'u3', '2026-11-30T05:01:00Z')`)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("push query: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		push.Process.Kill()
		t.Fatalf("the join's push query did not return after 3 rows:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || lines[0] != "SET" {
		t.Fatalf("push query printed %q", out.String())
	}
	got := append([]string(nil), lines[1:]...)
	want := map[string]bool{"1|gold": true, "2|basic": true, "3|silver": true}
	for _, l := range got {
		if !want[l] {
			t.Errorf("push query row %q, want the rows %v", l, want)
		}
		delete(want, l)
	}
}
