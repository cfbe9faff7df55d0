package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgCluster is a private PostgreSQL server started for a test: its own data directory, a free
// loopback port, trust authentication, fsync off. It is stopped by its PID when the test ends.
type pgCluster struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

// pgBin finds a PostgreSQL server binary (initdb, postgres) of the installed version.
func pgBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return "", fmt.Errorf("%s not found: install PostgreSQL (apt-get install postgresql)", name)
	}
	return matches[len(matches)-1], nil
}

// asPostgresUser makes cmd run as the "postgres" system user when the test runs as root,
// since the server refuses to run as root.
func asPostgresUser(t testing.TB, cmd *exec.Cmd, dirs ...string) {
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root and there is no postgres user to run the server as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range dirs {
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
}

func freeTCPPort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startPostgres starts a private cluster and returns it; it is stopped at test cleanup.
func startPostgres(t testing.TB) *pgCluster {
	t.Helper()
	initdb, err := pgBin("initdb")
	if err != nil {
		t.Fatal(err)
	}
	postgres, err := pgBin("postgres")
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "rsql-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	data := filepath.Join(root, "data")

	init := exec.Command(initdb, "-D", data, "-U", "rsql", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	asPostgresUser(t, init, root)
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freeTCPPort(t)
	logf, err := os.Create(filepath.Join(root, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(postgres, "-D", data, "-p", strconv.Itoa(port), "-k", root,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=50")
	srv.Stdout, srv.Stderr = logf, logf
	asPostgresUser(t, srv, root)
	if err := srv.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	c := &pgCluster{cmd: srv, done: make(chan struct{}),
		URL: fmt.Sprintf("postgres://rsql@127.0.0.1:%d/postgres?sslmode=disable", port)}
	go func() { srv.Wait(); close(c.done) }()
	t.Cleanup(c.stop)

	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.URL)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return c
		}
		select {
		case <-c.done:
			log, _ := os.ReadFile(filepath.Join(root, "server.log"))
			t.Fatalf("postgres exited during start-up:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not accept connections within 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGINT (fast shutdown) to the server's PID and waits for it to exit.
func (c *pgCluster) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}
