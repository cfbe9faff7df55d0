package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkPostgresCDC: a postgres-cdc table read into a materialized view (COUNT and SUM
// per user) while PostgreSQL commits 200,000 inserts and then 100,000 updates (each update
// a delete and an insert: 400,000 changes) in transactions of 2,000 rows, with on_truncate
// = 'delete' (the table's latest versions kept above the source) and 'error' (none).
// Reports the changes per second from the first insert until the view holds the last
// update, and per CPU-second of the rsql server process (PostgreSQL's own CPU is not in
// it; on 2 cores the two compete).
//
//	go test ./tests/ -run '^$' -bench BenchmarkPostgresCDC -benchtime 1x -count 3
func BenchmarkPostgresCDC(b *testing.B) {
	for _, mode := range []string{"delete", "error"} {
		b.Run("on_truncate="+mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchPostgresCDC(b, mode)
			}
		})
	}
}

func benchPostgresCDC(b *testing.B, onTruncate string) {
	b.StopTimer()
	ctx := context.Background()
	pg := startPostgresLogical(b)
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(q string) {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE orders (order_id bigint PRIMARY KEY, user_id text, qty int); ALTER TABLE orders REPLICA IDENTITY FULL`)
	s := &jobsServer{dir: b.TempDir(), pg: freePort(b), ns: freePort(b), br: freePort(b), http: freePort(b)}
	s.p = startProc(b, buildRsql(b), "server", "--data-dir", s.dir, "--pg-addr", s.pg,
		"--namesrv-addr", s.ns, "--broker-addr", s.br, "--http-addr", s.http)
	defer s.p.Kill()
	waitListening(b, s.p, s.pg)
	if out, errOut, err := runRsql(b, "", "--server", s.pg, "-c", fmt.Sprintf(`CREATE TABLE orders (order_id BIGINT PRIMARY KEY, user_id VARCHAR, qty INT)
  WITH (connector = 'postgres-cdc', url = '%s', create_slot = true, on_truncate = '%s');
CREATE MATERIALIZED VIEW per_user AS SELECT user_id, COUNT(*) AS n, SUM(qty) AS qty FROM orders GROUP BY user_id;`, pg.URL, onTruncate)); err != nil {
		b.Fatalf("rsql -c: %v\n%s\n%s", err, out, errOut)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE active`).Scan(&n); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the job did not start replication\n%s", s.p.Stderr.String())
		}
	}
	rconn, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		b.Fatal(err)
	}
	defer rconn.Close(ctx)
	const rows, tx = 200000, 2000
	var wantQty int64
	for g := int64(0); g < rows; g++ {
		wantQty += g % 50
		if g%2 == 0 {
			wantQty++
		}
	}
	pid := s.p.Cmd.Process.Pid
	c0 := serverCPU(b, pid)
	start := time.Now()
	b.StartTimer()
	for i := 0; i < rows; i += tx {
		exec(fmt.Sprintf(`INSERT INTO orders SELECT g, 'u' || (g %% 1000), g %% 50 FROM generate_series(%d, %d) g`, i, i+tx-1))
	}
	for i := 0; i < rows; i += 2 * tx {
		exec(fmt.Sprintf(`UPDATE orders SET qty = qty + 1 WHERE order_id BETWEEN %d AND %d AND order_id %% 2 = 0`, i, i+2*tx-1))
	}
	want := fmt.Sprintf("%d %d", rows, wantQty)
	got := ""
	for got != want {
		var n, qty *int64
		if err := rconn.QueryRow(ctx, `SELECT SUM(n), SUM(qty) FROM per_user`, pgx.QueryExecModeSimpleProtocol).Scan(&n, &qty); err != nil && !strings.Contains(err.Error(), "no rows") {
			b.Fatal(err)
		}
		if n != nil && qty != nil {
			got = fmt.Sprintf("%d %d", *n, *qty)
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("the view holds %q, want %q\n%s", got, want, s.p.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	el := time.Since(start)
	cpu := serverCPU(b, pid) - c0
	const changes = rows + rows
	b.ReportMetric(changes/el.Seconds(), "changes/s")
	b.ReportMetric(changes/cpu.Seconds(), "changes/cpu-s")
}
