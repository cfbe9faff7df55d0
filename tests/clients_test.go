package tests

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// psqlCmd runs psql against addr with the given arguments.
func psqlCmd(addr string, args ...string) *exec.Cmd {
	host, port, _ := strings.Cut(addr, ":")
	return exec.Command("psql", append([]string{"-h", host, "-p", port, "-U", "rsql", "-X", "-v", "ON_ERROR_STOP=1"}, args...)...)
}

// psql's side of what TestServerWithPsql does not show: a push query with LIMIT that
// returns once enough rows have arrived (two of its three rows are inserted after it
// started), and an error reported with its SQLSTATE.
func TestPsqlPushLimitAndSQLSTATE(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatal("psql is needed (apt-get install postgresql-client)")
	}
	srv, addr := startServer(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := psqlCmd(addr, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("psql %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("-c", "CREATE STREAM ticks (sym VARCHAR, px DOUBLE, ts TIMESTAMP) WITH (queues = 1)",
		"-c", "INSERT INTO ticks VALUES ('A', 1.5, '2026-11-30T05:00:00Z')")

	push := psqlCmd(addr, "-A", "-t", "-c", "SET offset_reset = 'earliest'", "-c", "SELECT sym, px FROM ticks LIMIT 3")
	var out syncBuffer
	push.Stdout, push.Stderr = &out, &out
	if err := push.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- push.Wait() }()
	// With one row in the stream the query cannot end: it waits for more. (It reads from the
	// earliest offset, so however late it starts, it sees all three rows.)
	select {
	case err := <-done:
		t.Fatalf("push query with LIMIT 3 ended with one row in the stream: %v\n%s", err, out.String())
	case <-time.After(time.Second):
	}
	run("-c", "INSERT INTO ticks VALUES ('B', 2.25, '2026-11-30T05:00:01Z'), ('C', 3, '2026-11-30T05:00:02Z')")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("push query: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		push.Process.Kill()
		t.Fatalf("push query with LIMIT 3 did not return after its third row:\n%s", out.String())
	}
	if got, want := out.String(), "SET\nA|1.5\nB|2.25\nC|3\n"; got != want {
		t.Errorf("push query printed %q, want %q", got, want)
	}

	// Errors carry their SQLSTATE (psql's verbose form shows it) and position.
	for _, c := range []struct{ stmt, code string }{
		{"SELECT nope FROM ticks", "42703"},
		{"SELECT sym FROM no_such_stream", "42P01"},
		{"SELEC sym FROM ticks", "42601"},
		{"CREATE STREAM ticks (a BIGINT)", "42710"},
	} {
		b, err := psqlCmd(addr, "-v", "VERBOSITY=verbose", "-c", c.stmt).CombinedOutput()
		if err == nil || !strings.Contains(string(b), "ERROR:  "+c.code+":") {
			t.Errorf("%s: want ERROR %s, got err=%v\n%s", c.stmt, c.code, err, b)
		}
	}
	// psql --single-transaction wraps the commands in BEGIN/COMMIT: they run, with the
	// notices saying there are no transactions.
	if out := run("--single-transaction", "-c", "INSERT INTO ticks VALUES ('D', 4, '2026-11-30T05:00:03Z')"); !strings.Contains(out, "INSERT 0 1") || !strings.Contains(out, "no transactions") {
		t.Errorf("psql --single-transaction printed:\n%s", out)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("server: %v", err)
	}
}

// pgx through the extended protocol (Parse/Bind/Describe/Execute): parameters, typed
// scanning of every column type, an error, and a push query cancelled through its context
// after which the same connection goes on.
func TestPgxExtendedProtocol(t *testing.T) {
	srv, addr := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig("postgres://rsql@" + addr + "/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	// A cancelled context sends a CancelRequest instead of closing the connection.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 10 * time.Second}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	mustExec := func(sql string, args ...any) pgconn.CommandTag {
		t.Helper()
		tag, err := conn.Exec(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return tag
	}
	mustExec("CREATE STREAM trades (id BIGINT, px DOUBLE, ts TIMESTAMP, sym VARCHAR, buy BOOLEAN) WITH (queues = 2)")
	t0 := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	// rsql types parameters it cannot infer as text: QueryExecModeExec lets pgx send each
	// argument's type with the statement (Parse with parameter OIDs), so Go values of any
	// type bind.
	exec := pgx.QueryExecModeExec
	if tag := mustExec("INSERT INTO trades VALUES ($1, $2, $3, $4, $5)", exec, int64(1), 10.5, t0, "AAA", true); tag.String() != "INSERT 0 1" {
		t.Errorf("INSERT tag = %q", tag)
	}
	mustExec("INSERT INTO trades VALUES ($1, $2, $3, $4, $5), (3, 0.125, '2026-11-30T05:00:02Z', 'CCC', true)",
		exec, int64(2), -7.25, t0.Add(time.Second), "BBB", false)
	mustExec("SET offset_reset = 'earliest'")
	// Drivers' transactions: BEGIN (with options), statements, COMMIT or ROLLBACK all work;
	// rsql has none, so the statements take effect when they run.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadWrite})
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	if _, err := tx.Exec(ctx, "CREATE STREAM tx_made (a BIGINT) WITH (queues = 1)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if tag := mustExec("DESCRIBE tx_made"); tag.String() != "DESCRIBE" {
		t.Errorf("the stream made inside a transaction: %q", tag)
	}

	type trade struct {
		id  int64
		px  float64
		ts  time.Time
		sym string
		buy bool
	}
	var got trade
	err = conn.QueryRow(ctx, "SELECT id, px, ts, sym, buy FROM trades WHERE sym = $1 AND id > $2 LIMIT 1", exec, "BBB", int64(1)).
		Scan(&got.id, &got.px, &got.ts, &got.sym, &got.buy)
	if err != nil {
		t.Fatal(err)
	}
	if want := (trade{2, -7.25, t0.Add(time.Second), "BBB", false}); got.id != want.id || got.px != want.px ||
		!got.ts.Equal(want.ts) || got.sym != want.sym || got.buy != want.buy {
		t.Errorf("row = %+v, want %+v", got, want)
	}

	// Rows of a push query with LIMIT, read as they come.
	rows, err := conn.Query(ctx, "SELECT id, px * 4 AS scaled FROM trades WHERE id <= $1 LIMIT 3", exec, int64(3))
	if err != nil {
		t.Fatal(err)
	}
	scaled := map[int64]float64{}
	for rows.Next() {
		var id int64
		var v float64
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		scaled[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(scaled) != 3 || scaled[1] != 42 || scaled[2] != -29 || scaled[3] != 0.5 {
		t.Errorf("scaled = %v, want {1: 42, 2: -29, 3: 0.5}", scaled)
	}

	// An error comes back as a PgError with its SQLSTATE; the connection stays usable.
	_, err = conn.Exec(ctx, "SELECT nope FROM trades WHERE id = $1", int64(1))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42703" {
		t.Errorf("unknown column: err = %v, want SQLSTATE 42703", err)
	}

	// A push query without LIMIT runs until its context is cancelled.
	qctx, qcancel := context.WithCancel(ctx)
	rows, err = conn.Query(qctx, "SELECT id FROM trades")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
		if n == 3 {
			qcancel()
		}
	}
	rows.Close()
	qcancel()
	if err := rows.Err(); err == nil {
		t.Error("cancelled push query ended without an error")
	} else if errors.As(err, &pe) && pe.Code != "57014" {
		t.Errorf("cancelled push query: SQLSTATE %s, want 57014", pe.Code)
	}
	if n < 3 {
		t.Errorf("push query gave %d rows before the cancel, want 3", n)
	}
	if conn.IsClosed() {
		t.Fatal("cancelling a push query closed the connection")
	}
	// The same connection, in pgx's default mode (a described, cached prepared statement;
	// a string argument binds as text).
	var sym string
	var ts time.Time
	if err := conn.QueryRow(ctx, "SELECT sym, ts FROM trades WHERE sym = $1 LIMIT 1", "CCC").Scan(&sym, &ts); err != nil ||
		sym != "CCC" || !ts.Equal(t0.Add(2*time.Second)) {
		t.Errorf("after the cancel: %v, %q %v", err, sym, ts)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("server: %v", err)
	}
}

// node-postgres (the `pg` package from the npm registry): connect, query, parameters, an
// error, columns read by name (named as PostgreSQL names them). The package is installed into tests/node by npm when missing.
func TestNodePostgres(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed (apt-get install nodejs npm, or scripts/deps.sh)")
	}
	dir := filepath.Join(repoRoot(), "tests", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "pg")); err != nil {
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--silent")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install pg: %v\n%s", err, out)
		}
	}
	srv, addr := startServer(t)
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("node", "client.js", host, port)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node client.js: %v\n%s", err, out)
	}
	want := "connected\n" +
		"inserted 1\n" +
		// pg reads BIGINT (int8) as a string unless told otherwise; DOUBLE is a number.
		"row string 8 cake number 8.5 true 2026-11-30T05:00:01.000Z\n" +
		// BEGIN and COMMIT work, each with a notice that there are no transactions.
		"transaction 2 true\n" +
		"error 42703 "
	if !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "nope") || !strings.HasSuffix(string(out), "after error tea\nnames key,rows,?column?,upper,int8 k 4 7 K\n") {
		t.Errorf("node client.js printed:\n%s\nwant it to start with:\n%s", out, want)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("server: %v", err)
	}
}

// rsql produce of a file on a terminal draws a progress bar (bytes, rate, time left) and ends
// with the summary line; every record arrives.
func TestProduceProgressOnTerminal(t *testing.T) {
	pgAddr, nsAddr := freePort(t), freePort(t)
	srv := startProc(t, buildRsql(t), "server", "--data-dir", t.TempDir(), "--pg-addr", pgAddr,
		"--namesrv-addr", nsAddr, "--broker-addr", freePort(t), "--http-addr", freePort(t))
	waitListening(t, srv, pgAddr)
	if out, _, err := runRsql(t, "", "--server", pgAddr, "-c", "CREATE STREAM big (n BIGINT, pad VARCHAR) WITH (queues = 2)"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	file := filepath.Join(t.TempDir(), "big.jsonl")
	var b strings.Builder
	const records = 20000
	for i := 0; i < records; i++ {
		b.WriteString(`{"n": ` + strconv.Itoa(i) + `, "pad": "` + strings.Repeat("x", 40) + `"}` + "\n")
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildRsql(t), "produce", "big", "--file", file, "--namesrv-addr", nsAddr)
	out, err := onTerminal(cmd, true)
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	// The bar's frames: "producing big  40% |████      | (512 kB/1.3 MB, 9 MB/s) [0s:1s]" (time
	// spent and left), the last one at 100% with the rate.
	if !strings.Contains(out, "producing big") || !regexp.MustCompile(`100% \|█+\| \([0-9.]+/1.3 MB, [0-9.]+ [kMG]?B/s\)`).MatchString(out) ||
		!regexp.MustCompile(`\[[0-9a-z.]+:[0-9a-z.]+\]`).MatchString(out) {
		t.Errorf("no progress bar with rate and time left on the terminal:\n%q", out)
	}
	if !regexp.MustCompile(`produced 20000 records \(\d+ bytes\) to big in [0-9.]+s \(\d+ records/s\)\n`).MatchString(out) {
		t.Errorf("no summary line:\n%q", out)
	}
	// Every record is in the topic: count them with a push query.
	got, errOut, err := runRsql(t, "", "--server", pgAddr, "--format", "json", "-c",
		"SET offset_reset = 'earliest'; SELECT n FROM big WHERE n = "+strconv.Itoa(records-1)+" LIMIT 1")
	if err != nil || got != `{"n":19999}`+"\n" {
		t.Errorf("last record: %v %q %s", err, got, errOut)
	}
	srv.Stop()
}
