package tests

// The attacks of docs/security.md against a real `rsql server`, each with what it must do
// now: fail the one request or connection, and keep serving everyone else.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// secureServer is an rsql server started for a test, with its addresses.
type secureServer struct {
	p        *proc
	pg, http string
	dataDir  string
}

// startServerWith starts `rsql server` on free loopback ports with extra flags.
func startServerWith(t *testing.T, extra ...string) *secureServer {
	t.Helper()
	s := &secureServer{pg: freePort(t), http: freePort(t), dataDir: t.TempDir()}
	args := append([]string{"server", "--data-dir", s.dataDir, "--pg-addr", s.pg,
		"--namesrv-addr", freePort(t), "--broker-addr", freePort(t), "--http-addr", s.http}, extra...)
	s.p = startProc(t, buildRsql(t), args...)
	waitListening(t, s.p, s.pg)
	return s
}

// alive fails the test unless the process still runs and /healthz says ok.
func (s *secureServer) alive(t *testing.T) {
	t.Helper()
	select {
	case <-s.p.done:
		t.Fatalf("the server exited: %v\nstderr:\n%s", s.p.err, s.p.Stderr.String())
	default:
	}
	resp, err := http.Get("http://" + s.http + "/healthz")
	if err != nil {
		t.Fatalf("/healthz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Fatalf("/healthz: %d %q", resp.StatusCode, body)
	}
}

func pgxConnect(ctx context.Context, addr, user, password, sslmode string) (*pgx.Conn, error) {
	host, port, _ := net.SplitHostPort(addr)
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s@%s:%s/rsql?sslmode=%s", user, host, port, sslmode))
	if err != nil {
		return nil, err
	}
	cfg.Password = password
	return pgx.ConnectConfig(ctx, cfg)
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// selectOne fails the test unless a new connection runs SELECT 1.
func selectOne(t *testing.T, ctx context.Context, addr, user, password string) {
	t.Helper()
	c, err := pgxConnect(ctx, addr, user, password, "prefer")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("SELECT 1: %d, %v", n, err)
	}
}

func sumOfOnes(n int) string { return "SELECT 1" + strings.Repeat("+1", n-1) + " AS n" }

// The deep expression: `SELECT 1+1+...+1` with a million terms (2 MB) used to overflow the
// binder's stack and kill the process. It fails with 54001 now, as do a 5,000-deep one and
// one of too many nodes, over the simple and the extended protocol and from psql; the
// session and the server go on.
func TestAttackDeepExpression(t *testing.T) {
	s := startServerWith(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgxConnect(ctx, s.pg, "rsql", "", "disable")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range []struct{ what, text string }{
		{"1 M terms", sumOfOnes(1_000_000)},
		{"5000 terms", sumOfOnes(5000)},
		{"5000 parentheses", "SELECT " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000)},
		{"60000 columns", "SELECT " + strings.Repeat("1, ", 60_000) + "1"},
	} {
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeDescribeExec} {
			_, err := c.Exec(ctx, q.text, mode)
			if sqlState(err) != "54001" {
				t.Fatalf("%s (mode %v): %v, want 54001", q.what, mode, err)
			}
		}
	}
	var n int
	if err := c.QueryRow(ctx, sumOfOnes(900)).Scan(&n); err != nil || n != 900 {
		t.Fatalf("900 terms on the same session: %d, %v", n, err)
	}
	file := filepath.Join(t.TempDir(), "deep.sql")
	if err := os.WriteFile(file, []byte(sumOfOnes(1_000_000)+";\nSELECT 42 AS answer;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := psqlCmd(s.pg, "-v", "ON_ERROR_STOP=0", "-v", "VERBOSITY=verbose", "-A", "-t", "-f", file).CombinedOutput()
	if !strings.Contains(string(out), "54001") || !strings.Contains(string(out), "\n42\n") {
		t.Fatalf("psql -f with a 1 M-term statement then SELECT 42:\n%s", out)
	}
	s.alive(t)
	selectOne(t, ctx, s.pg, "rsql", "")
}

// The file descriptors run out: the Postgres port used to stop accepting for good (Serve
// returned on "too many open files" while /healthz said ok). With a lowered limit
// (prlimit on the running server) and connections held until accepting fails, then
// released, the server accepts again.
func TestAttackFileDescriptorExhaustion(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Fatal("prlimit is needed (util-linux)")
	}
	s := startServerWith(t)
	pid := s.p.Cmd.Process.Pid
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	limit := len(fds) + 30
	if out, err := exec.Command("prlimit", "--pid", strconv.Itoa(pid), fmt.Sprintf("--nofile=%d:%d", limit, limit)).CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v\n%s", err, out)
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// Hold connections until the server logs that accepting fails (the kernel still
	// completes connections into the listen backlog).
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.p.Stderr.String(), "accept failed; retrying") {
		if time.Now().After(deadline) {
			t.Fatalf("accepting never failed with %d connections held and a limit of %d fds\nstderr:\n%s", len(held), limit, s.p.Stderr.String())
		}
		if len(held) < 200 {
			c, err := net.DialTimeout("tcp", s.pg, 2*time.Second)
			if err == nil {
				held = append(held, c)
			}
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !strings.Contains(s.p.Stderr.String(), "too many open files") {
		t.Errorf("the accept error logged is not EMFILE:\n%s", s.p.Stderr.String())
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The server notices the closed connections, frees their descriptors and accepts the
	// connections waiting in the backlog, then ours.
	var conn *pgx.Conn
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err = pgxConnect(cctx, s.pg, "rsql", "", "disable")
		ccancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the Postgres port did not accept again after the descriptors came back: %v\nstderr:\n%s", err, s.p.Stderr.String())
		}
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("SELECT 1 after recovery: %v", err)
	}
	if !strings.Contains(s.p.Stderr.String(), "accepting again") {
		t.Errorf("the recovery was not logged:\n%s", s.p.Stderr.String())
	}
	s.alive(t)
}

// Slow start-up packets: 200 connections that send their start-up packet a byte at a time
// used to stay open for ever. With --startup-timeout 2s the server closes each of them; a
// client connecting meanwhile is told 53300 cleanly (or served, once they are cut), and
// one connecting after is served.
func TestAttackSlowStartup(t *testing.T) {
	s := startServerWith(t, "--startup-timeout", "2s")
	startup := []byte{0, 0, 0, 19, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'x', 0, 0, 0, 0, 0}
	const n = 200
	var wg sync.WaitGroup
	notCut := make(chan error, n)
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", s.pg, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			defer c.Close()
			// Dribble the packet; the server must hang up long before it is whole.
			go func() {
				for _, b := range startup {
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(500 * time.Millisecond)
				}
			}()
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, err := io.ReadAll(c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				notCut <- fmt.Errorf("a slow client was not disconnected in 60 s")
			}
		}(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if c, err := pgxConnect(ctx, s.pg, "rsql", "", "disable"); err == nil {
		c.Close(ctx)
	} else if sqlState(err) != "53300" {
		t.Fatalf("a client during the attack: %v, want 53300 or a connection", err)
	}
	wg.Wait()
	close(notCut)
	for err := range notCut {
		t.Fatal(err)
	}
	if !strings.Contains(s.p.Stderr.String(), "did not finish starting up in time") {
		t.Errorf("the timeouts were not logged:\n%s", s.p.Stderr.String())
	}
	selectOne(t, ctx, s.pg, "rsql", "")
	s.alive(t)
}

// Past --max-connections a client is refused with 53300 (psql shows PostgreSQL's text).
func TestAttackTooManyConnections(t *testing.T) {
	s := startServerWith(t, "--max-connections", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var conns []*pgx.Conn
	for i := 0; i < 3; i++ {
		c, err := pgxConnect(ctx, s.pg, "rsql", "", "disable")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	out, err := psqlCmd(s.pg, "-c", "SELECT 1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "too many clients") {
		t.Fatalf("a fourth client: %v\n%s", err, out)
	}
	conns[0].Close(ctx)
	for i := 0; ; i++ {
		out, err := psqlCmd(s.pg, "-A", "-t", "-c", "SELECT 7").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) == "7" {
			break
		}
		if i > 100 {
			t.Fatalf("after one left: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range conns[1:] {
		c.Close(ctx)
	}
}

// nodeDir returns tests/node with node-postgres installed (by npm when missing).
func nodeDir(t *testing.T) string {
	t.Helper()
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
	return dir
}

// nodeAuth runs tests/node/auth.js and returns its one line.
func nodeAuth(t *testing.T, addr, user, password string, ssl ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("node", append([]string{"auth.js", host, port, user, password}, ssl...)...)
	cmd.Dir = nodeDir(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node auth.js: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// psqlAs runs psql as user with password (PGPASSWORD) and connection options.
func psqlAs(addr, user, password string, conninfo string, args ...string) (string, error) {
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("psql", append([]string{fmt.Sprintf("host=%s port=%s user=%s dbname=rsql %s", host, port, user, conninfo),
		"-X", "-w", "-v", "ON_ERROR_STOP=1", "-A", "-t"}, args...)...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Passwords: any user and password used to be accepted. With --auth scram-sha-256 a wrong
// password (or an unknown user) is refused with 28P01 by psql, pgx and node-postgres; the
// right one works for all three, and for the rsql CLI with RSQL_PASSWORD.
func TestAttackWrongPassword(t *testing.T) {
	s := startServerWith(t, "--auth", "scram-sha-256", "--admin-password", "adm1n-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range []struct{ user, pw string }{{"rsql", "wrong"}, {"mallory", "adm1n-secret"}} {
		if _, err := pgxConnect(ctx, s.pg, c.user, c.pw, "disable"); sqlState(err) != "28P01" {
			t.Errorf("pgx as %s with %q: %v, want 28P01", c.user, c.pw, err)
		}
		out, err := psqlAs(s.pg, c.user, c.pw, "", "-c", "SELECT 1")
		if err == nil || !strings.Contains(out, fmt.Sprintf("password authentication failed for user %q", c.user)) {
			t.Errorf("psql as %s with %q: %v\n%s", c.user, c.pw, err, out)
		}
		if got := nodeAuth(t, s.pg, c.user, c.pw); !strings.HasPrefix(got, "error 28P01 ") {
			t.Errorf("node-postgres as %s with %q: %s", c.user, c.pw, got)
		}
	}
	if out, err := psqlAs(s.pg, "rsql", "", "", "-c", "SELECT 1"); err == nil {
		t.Errorf("psql without a password connected:\n%s", out)
	}
	selectOne(t, ctx, s.pg, "rsql", "adm1n-secret")
	if out, err := psqlAs(s.pg, "rsql", "adm1n-secret", "", "-c", "SELECT 2"); err != nil || strings.TrimSpace(out) != "2" {
		t.Errorf("psql with the right password: %v\n%s", err, out)
	}
	if got := nodeAuth(t, s.pg, "rsql", "adm1n-secret"); got != "ok 42 false" {
		t.Errorf("node-postgres with the right password: %s", got)
	}
	if !strings.Contains(s.p.Stderr.String(), "password authentication failed") {
		t.Errorf("failed logins are not logged:\n%s", s.p.Stderr.String())
	}
	cmd := exec.Command(buildRsql(t), "--server", s.pg, "-c", "SELECT 3 AS n", "--format", "json")
	cmd.Env = append(os.Environ(), "RSQL_PASSWORD=adm1n-secret")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `"n":3`) {
		t.Errorf("rsql --server with RSQL_PASSWORD: %v\n%s", err, out)
	}
	cmd = exec.Command(buildRsql(t), "--server", s.pg, "-c", "SELECT 3")
	cmd.Env = append(os.Environ(), "RSQL_PASSWORD=nope")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "RSQL_PASSWORD") {
		t.Errorf("rsql --server with a wrong password: %v\n%s", err, out)
	}
}

// A server with scram-sha-256 and no admin password makes the first admin with a generated
// password, printed once; started again, it keeps it.
func TestGeneratedAdminPassword(t *testing.T) {
	s := startServerWith(t, "--auth", "scram-sha-256")
	m := regexp.MustCompile(`created the admin user "rsql" with the password (\S+)`).FindStringSubmatch(s.p.Stderr.String())
	if m == nil {
		t.Fatalf("no generated password printed:\n%s", s.p.Stderr.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	selectOne(t, ctx, s.pg, "rsql", m[1])
	if err := s.p.Stop(); err != nil {
		t.Fatal(err)
	}
	again := startProc(t, buildRsql(t), "server", "--data-dir", s.dataDir, "--pg-addr", s.pg,
		"--namesrv-addr", freePort(t), "--broker-addr", freePort(t), "--http-addr", freePort(t), "--auth", "scram-sha-256")
	waitListening(t, again, s.pg)
	if strings.Contains(again.Stderr.String(), "created the admin user") {
		t.Fatalf("a second admin password was generated:\n%s", again.Stderr.String())
	}
	selectOne(t, ctx, s.pg, "rsql", m[1])
}

// trust is for loopback only: a server told to trust clients on another address refuses to
// start (before it listens).
func TestTrustRefusedOffLoopback(t *testing.T) {
	out, stderr, err := runRsql(t, "", "server", "--data-dir", t.TempDir(), "--auth", "trust", "--pg-addr", "0.0.0.0:0",
		"--namesrv-addr", freePort(t), "--broker-addr", freePort(t), "--http-addr", freePort(t))
	if err == nil || !strings.Contains(stderr, "loopback") {
		t.Fatalf("rsql server --auth trust --pg-addr 0.0.0.0: %v\n%s%s", err, out, stderr)
	}
}

// TLS: --tls-self-signed generates a certificate; psql, pgx and node-postgres connect with
// sslmode=require and verify-full (against that certificate); with --tls-require a client
// without TLS is refused.
func TestTLSClients(t *testing.T) {
	s := startServerWith(t, "--tls-self-signed", "--tls-require", "--auth", "scram-sha-256", "--admin-password", "pw")
	m := regexp.MustCompile(`self-signed TLS certificate (\S+) `).FindStringSubmatch(s.p.Stderr.String())
	if m == nil {
		t.Fatalf("the certificate's path is not printed:\n%s", s.p.Stderr.String())
	}
	cert := m[1]
	_, port, _ := net.SplitHostPort(s.pg)
	localhost := "localhost:" + port
	for _, conninfo := range []string{"sslmode=require", "sslmode=verify-full sslrootcert=" + cert} {
		out, err := psqlAs(localhost, "rsql", "pw", conninfo, "-c", "SELECT 5")
		if err != nil || strings.TrimSpace(out) != "5" {
			t.Errorf("psql %s: %v\n%s", conninfo, err, out)
		}
	}
	if out, err := psqlAs(s.pg, "rsql", "pw", "sslmode=disable", "-c", "SELECT 5"); err == nil || !strings.Contains(out, "only TLS") {
		t.Errorf("psql sslmode=disable with --tls-require: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgxConnect(ctx, localhost, "rsql", "pw", "verify-full&sslrootcert="+cert)
	if err != nil {
		t.Fatalf("pgx verify-full: %v", err)
	}
	c.Close(ctx)
	if got := nodeAuth(t, localhost, "rsql", "pw", "verify-full", cert); got != "ok 42 true" {
		t.Errorf("node-postgres verify-full: %s", got)
	}
	if got := nodeAuth(t, s.pg, "rsql", "pw", "require"); got != "ok 42 true" {
		t.Errorf("node-postgres require: %s", got)
	}
}

// Files: `CREATE STREAM pw ... path = '/etc/passwd'` used to read any file, and a file sink
// wrote anywhere. Now paths outside the file roots (the data directory's files/ by
// default), and links out of them, are refused with 42501 naming the roots.
func TestAttackFilesOutsideRoots(t *testing.T) {
	s := startServerWith(t)
	root := filepath.Join(s.dataDir, "files")
	if err := os.WriteFile(filepath.Join(root, "in.csv"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "passwd.csv")); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "written.jsonl")
	for _, stmt := range []string{
		"CREATE STREAM pw (line VARCHAR) WITH (connector = 'file', path = '/etc/passwd', format = 'csv')",
		"CREATE STREAM pw (line VARCHAR) WITH (connector = 'file', path = '../../../../../../etc/passwd', format = 'csv')",
		"CREATE STREAM pw (line VARCHAR) WITH (connector = 'file', path = 'passwd.csv', format = 'csv')",
		"CREATE STREAM w (line VARCHAR) WITH (path = '" + outside + "')",
	} {
		out, err := psqlCmd(s.pg, "-v", "VERBOSITY=verbose", "-c", stmt).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "42501") || !strings.Contains(string(out), root) {
			t.Errorf("%s:\n%v\n%s", stmt, err, out)
		}
	}
	if _, err := os.Stat(outside); err == nil {
		t.Error("a file sink wrote outside the roots")
	}
	out, err := psqlCmd(s.pg, "-c", "CREATE STREAM src_lines (line VARCHAR) WITH (path = 'in.csv', format = 'csv')",
		"-c", "CREATE STREAM copy WITH (path = 'out/copy.csv', format = 'csv') AS SELECT line FROM src_lines").CombinedOutput()
	if err != nil {
		t.Fatalf("inside the root: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(filepath.Join(root, "out", "copy.csv"))
		if string(data) == "hello\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy inside the root holds %q", data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Roles: a read-only user may query but not CREATE, INSERT, DROP, TERMINATE a job or
// manage users (42501); an admin may.
func TestAttackReadOnlyUser(t *testing.T) {
	s := startServerWith(t, "--auth", "scram-sha-256", "--admin-password", "adm")
	admin := func(stmts ...string) {
		t.Helper()
		var args []string
		for _, st := range stmts {
			args = append(args, "-c", st)
		}
		if out, err := psqlAs(s.pg, "rsql", "adm", "", args...); err != nil {
			t.Fatalf("admin: %v\n%s", err, out)
		}
	}
	admin("CREATE USER viewer WITH PASSWORD 'view-pw' READ ONLY",
		"CREATE STREAM ev (id BIGINT) WITH (queues = 1)",
		"CREATE STREAM ev2 AS SELECT id FROM ev",
		"INSERT INTO ev VALUES (1)")
	for _, stmt := range []string{"CREATE STREAM x (a BIGINT)", "TERMINATE JOB job-1", "PAUSE JOB job-1", "INSERT INTO ev VALUES (2)",
		"DROP STREAM ev2", "CREATE USER eve WITH PASSWORD 'e' ADMIN", "ALTER USER viewer ADMIN", "DROP USER rsql"} {
		out, err := psqlAs(s.pg, "viewer", "view-pw", "", "-v", "VERBOSITY=verbose", "-c", stmt)
		if err == nil || !strings.Contains(out, "42501") || !strings.Contains(out, "read-only") {
			t.Errorf("read-only %s: %v\n%s", stmt, err, out)
		}
	}
	out, err := psqlAs(s.pg, "viewer", "view-pw", "", "-c", "SHOW JOBS", "-c", "SHOW STREAMS", "-c", "DESCRIBE ev",
		"-c", "SET offset_reset = 'earliest'", "-c", "SELECT id FROM ev LIMIT 1")
	if err != nil || !strings.Contains(out, "|RUNNING|") || !strings.HasSuffix(strings.TrimSpace(out), "1") {
		t.Errorf("read-only reading: %v\n%s", err, out)
	}
	admin("TERMINATE JOB job-1")
}
