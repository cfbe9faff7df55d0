package state

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A private PostgreSQL cluster shared by the package's tests: started on first use
// (initdb + postgres on a free loopback port, trust authentication, fsync off, run as the
// postgres user when the tests run as root) and stopped by its PID in TestMain. Each test
// gets its own schema, so tests stay independent.
var pgTest struct {
	once sync.Once
	url  string
	err  error
	root string
	cmd  *exec.Cmd
	done chan struct{}
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopTestPostgres()
	os.Exit(code)
}

// testPostgresURL returns the URL of the shared cluster, starting it if needed.
func testPostgresURL(t testing.TB) string {
	t.Helper()
	pgTest.once.Do(func() { pgTest.url, pgTest.err = startTestPostgres() })
	if pgTest.err != nil {
		t.Fatalf("private PostgreSQL cluster: %v", pgTest.err)
	}
	return pgTest.url
}

var pgSchemaSeq atomic.Int64

// newTestSchema returns a schema name no other test uses.
func newTestSchema() string {
	return fmt.Sprintf("ckpt_%d_%d", os.Getpid(), pgSchemaSeq.Add(1))
}

func pgTestBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(m) == 0 {
		return "", fmt.Errorf("%s not found: install PostgreSQL (apt-get install postgresql)", name)
	}
	return m[len(m)-1], nil
}

// asPostgres makes cmd run as the postgres system user when we are root (the server refuses
// to run as root) and hands it root.
func asPostgres(cmd *exec.Cmd, root string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return nil
}

func startTestPostgres() (string, error) {
	initdb, err := pgTestBin("initdb")
	if err != nil {
		return "", err
	}
	server, err := pgTestBin("postgres")
	if err != nil {
		return "", err
	}
	root, err := os.MkdirTemp("", "rsql-state-pg-")
	if err != nil {
		return "", err
	}
	pgTest.root = root
	data := filepath.Join(root, "data")
	init := exec.Command(initdb, "-D", data, "-U", "rsql", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if err := asPostgres(init, root); err != nil {
		return "", err
	}
	if out, err := init.CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logf, err := os.Create(filepath.Join(root, "server.log"))
	if err != nil {
		return "", err
	}
	srv := exec.Command(server, "-D", data, "-p", strconv.Itoa(port), "-k", root,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=100")
	srv.Stdout, srv.Stderr = logf, logf
	if err := asPostgres(srv, root); err != nil {
		return "", err
	}
	if err := srv.Start(); err != nil {
		return "", fmt.Errorf("start postgres: %w", err)
	}
	pgTest.cmd, pgTest.done = srv, make(chan struct{})
	go func() { srv.Wait(); close(pgTest.done) }()
	url := fmt.Sprintf("postgres://rsql@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, url)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return url, nil
		}
		select {
		case <-pgTest.done:
			log, _ := os.ReadFile(filepath.Join(root, "server.log"))
			return "", fmt.Errorf("postgres exited during start-up:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("postgres did not accept connections within 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopTestPostgres sends SIGINT (fast shutdown) to the server's PID and removes its files.
func stopTestPostgres() {
	if pgTest.cmd != nil {
		pgTest.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-pgTest.done:
		case <-time.After(30 * time.Second):
			pgTest.cmd.Process.Kill()
			<-pgTest.done
		}
	}
	if pgTest.root != "" {
		os.RemoveAll(pgTest.root)
	}
}

// openTestPostgres opens a client of schema on the shared cluster, closed at cleanup.
func openTestPostgres(t testing.TB, schema string) *PostgresCheckpointStore {
	t.Helper()
	s, err := OpenPostgres(context.Background(), testPostgresURL(t), PostgresOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// crashPostgresCommit makes s's next commit lose its server process after its writes and
// before COMMIT, as a crash of either side would.
func crashPostgresCommit(t testing.TB, s *PostgresCheckpointStore) {
	var once sync.Once
	s.beforeCommit = func(pid uint32) error {
		var err error
		once.Do(func() {
			conn, cerr := pgx.Connect(context.Background(), testPostgresURL(t))
			if cerr != nil {
				err = cerr
				return
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, int64(pid))
		})
		return err
	}
}

// TestPostgresSchemaRace opens several clients of a fresh schema at once: the advisory lock
// must make every one of them succeed, and the tables must then work.
func TestPostgresSchemaRace(t *testing.T) {
	url := testPostgresURL(t)
	schema := newTestSchema()
	const n = 6
	stores := make([]*PostgresCheckpointStore, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stores[i], errs[i] = OpenPostgres(context.Background(), url, PostgresOptions{Schema: schema, MaxConns: 2})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	ctx := context.Background()
	g1, err := stores[0].Acquire(ctx, "j", "s", "a")
	if err != nil {
		t.Fatal(err)
	}
	g2, err := stores[n-1].Acquire(ctx, "j", "s", "b")
	if err != nil {
		t.Fatal(err)
	}
	if g1 != 1 || g2 != 2 {
		t.Fatalf("generations across clients of one schema: %d, %d; want 1, 2", g1, g2)
	}
}

func TestPostgresOptions(t *testing.T) {
	for _, bad := range []string{"Rsql", "a-b", "x;drop", "1abc"} {
		if _, err := OpenPostgres(context.Background(), "postgres://127.0.0.1:1/x", PostgresOptions{Schema: bad}); err == nil {
			t.Errorf("schema %q accepted", bad)
		}
	}
	if _, err := OpenPostgres(context.Background(), "postgres://%zz", PostgresOptions{}); err == nil {
		t.Error("bad url accepted")
	}
}
