package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rsql/server/auth"
	"rsql/sql"
)

// The Postgres wire with the engine behind it: SCRAM-SHA-256 against the catalog's users,
// and /healthz reporting a wire listener that stopped.

// startPGServerWith serves ex with cfg on a loopback port.
func startPGServerWith(t *testing.T, ex Executor, cfg PGConfig) (*PGServer, string) {
	t.Helper()
	srv := NewPGServer(ex, cfg)
	ln := listenLoopback(t)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return srv, ln.Addr().String()
}

// connectAs opens a pgx connection with a user, password and sslmode.
func connectAs(ctx context.Context, addr, user, password, sslmode string) (*pgx.Conn, error) {
	host, port, _ := net.SplitHostPort(addr)
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s@%s:%s/rsql?sslmode=%s", user, host, port, sslmode))
	if err != nil {
		return nil, err
	}
	cfg.Password = password
	return pgx.ConnectConfig(ctx, cfg)
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// An engine with users alice (admin) and bob (read-only), served with SCRAM-SHA-256.
func startAuthServer(t *testing.T, cfg PGConfig) (*testEngine, string) {
	t.Helper()
	te := newTestEngine(t, true)
	for _, u := range []struct {
		name, pw string
		role     Role
	}{{"alice", "alice-pw", RoleAdmin}, {"bob", "bob-pw", RoleReadOnly}} {
		secret, err := auth.NewSecret(u.pw)
		if err != nil {
			t.Fatal(err)
		}
		if err := te.e.Catalog().AddUser(UserDef{Name: u.name, Role: u.role, Secret: secret}); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Auth, cfg.Users = AuthSCRAM, te.e.Catalog()
	_, addr := startPGServerWith(t, te.e, cfg)
	return te, addr
}

// SCRAM-SHA-256 with pgx: the right password connects and the session takes the user's
// role; a wrong one, an unknown user and a user without a password are refused with 28P01.
func TestPGSCRAMAuthentication(t *testing.T) {
	te, addr := startAuthServer(t, PGConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := te.e.Catalog().AddUser(UserDef{Name: "nopw", Role: RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ user, pw string }{{"alice", "wrong"}, {"nobody", "x"}, {"nopw", ""}, {"nopw", "x"}, {"bob", "alice-pw"}} {
		conn, err := connectAs(ctx, addr, c.user, c.pw, "disable")
		if err == nil {
			conn.Close(ctx)
			t.Fatalf("user %s with password %q connected", c.user, c.pw)
		}
		if code := pgCode(err); code != codeInvalidPassword && !(c.pw == "" && strings.Contains(err.Error(), "password")) {
			t.Errorf("user %s with password %q: %v (code %q), want 28P01", c.user, c.pw, err, code)
		}
	}
	alice, err := connectAs(ctx, addr, "alice", "alice-pw", "disable")
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close(ctx)
	if _, err := alice.Exec(ctx, "CREATE STREAM s (a BIGINT) WITH (queues = 1)"); err != nil {
		t.Fatalf("admin CREATE STREAM: %v", err)
	}
	bob, err := connectAs(ctx, addr, "bob", "bob-pw", "disable")
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close(ctx)
	if su := bob.PgConn().ParameterStatus("is_superuser"); su != "off" {
		t.Errorf("read-only user: is_superuser = %q", su)
	}
	var n int
	if err := bob.QueryRow(ctx, "SELECT 1 + 1").Scan(&n); err != nil || n != 2 {
		t.Fatalf("read-only SELECT: %d, %v", n, err)
	}
	for _, stmt := range []string{"CREATE STREAM t (a BIGINT)", "INSERT INTO s VALUES (1)", "DROP STREAM s",
		"TERMINATE JOB job-1", "CREATE USER eve WITH PASSWORD 'x'", "ALTER USER alice WITH PASSWORD 'x'", "ALTER USER bob ADMIN", "DROP USER alice"} {
		_, err := bob.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol)
		if pgCode(err) != codeInsufficientPrivilege {
			t.Errorf("read-only %s: %v, want 42501", stmt, err)
		}
	}
	// A read-only user may change its own password, and then logs in with the new one.
	if _, err := bob.Exec(ctx, "ALTER USER bob WITH PASSWORD 'bob-pw-2'", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("ALTER USER of one's own password: %v", err)
	}
	if c, err := connectAs(ctx, addr, "bob", "bob-pw-2", "disable"); err != nil {
		t.Fatalf("the new password: %v", err)
	} else {
		c.Close(ctx)
	}
	// The admin manages users; the last admin stays.
	for _, stmt := range []string{"CREATE USER carol WITH PASSWORD 'carol-pw' READ ONLY", "ALTER USER carol ADMIN", "DROP USER carol"} {
		if _, err := alice.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := alice.Exec(ctx, "DROP USER nopw", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Exec(ctx, "ALTER USER alice READ ONLY", pgx.QueryExecModeSimpleProtocol); pgCode(err) != codeObjectState {
		t.Fatalf("demoting the last admin: %v, want 55000", err)
	}
	if _, err := alice.Exec(ctx, "DROP USER alice", pgx.QueryExecModeSimpleProtocol); pgCode(err) != "55006" {
		t.Fatalf("dropping oneself: %v, want 55006", err)
	}
}

// fakeListener returns errs from Accept, one per call, then the connections of a real
// listener.
type fakeListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *fakeListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// nopExec is an Executor that runs nothing.
type nopExec struct{}

func (nopExec) Execute(context.Context, *Session, string, []sql.Value) ([]*Result, error) {
	return nil, nil
}

func listenLoopback(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// /healthz fails, naming the listener, once the Postgres-wire listener has stopped.
func TestHealthzReportsAStoppedListener(t *testing.T) {
	srv := NewPGServer(nopExec{}, PGConfig{})
	defer srv.Close()
	sys := &System{pg: srv}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		sys.healthz(rec, httptest.NewRequest("GET", "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != 200 || body != "ok\n" {
		t.Fatalf("healthy: %d %q", code, body)
	}
	broken := &fakeListener{Listener: listenLoopback(t), errs: []error{errors.New("bad file descriptor")}}
	srv.Serve(broken)
	if code, body := get(); code != 503 || !strings.Contains(body, "Postgres-wire listener") || !strings.Contains(body, "bad file descriptor") {
		t.Fatalf("after the listener stopped: %d %q", code, body)
	}
}

// TLS: SSLRequest is answered 'S' and pgx connects with sslmode=require and verify-full
// (the generated certificate names 127.0.0.1 and localhost); with RequireTLS a client that
// does not negotiate TLS is refused (28000).
func TestPGTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key, made, err := ensureSelfSigned(dir, "127.0.0.1")
	if err != nil || !made {
		t.Fatalf("self-signed: %v %v", made, err)
	}
	if _, _, again, _ := ensureSelfSigned(dir, "127.0.0.1"); again {
		t.Fatal("a valid certificate was made again")
	}
	tc, err := loadTLS(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	te := newTestEngine(t, false)
	_, addr := startPGServerWith(t, te.e, PGConfig{TLS: tc, RequireTLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, mode := range []string{"require", "verify-full&sslrootcert=" + cert} {
		c, err := connectAs(ctx, addr, "u", "", mode)
		if err != nil {
			t.Fatalf("sslmode=%s: %v", mode, err)
		}
		if _, ok := c.PgConn().Conn().(*tls.Conn); !ok {
			t.Errorf("sslmode=%s: the connection is not TLS", mode)
		}
		var n int
		if err := c.QueryRow(ctx, "select 1", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil || n != 1 {
			t.Fatalf("select 1 over TLS: %d %v", n, err)
		}
		c.Close(ctx)
	}
	if c, err := connectAs(ctx, addr, "u", "", "disable"); pgCode(err) != codeInvalidAuthorization {
		if c != nil {
			c.Close(ctx)
		}
		t.Fatalf("plain text with RequireTLS: %v, want 28000", err)
	}
}
