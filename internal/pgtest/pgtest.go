package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	// URL connects as the superuser rsql to database postgres.
	URL    string
	root   string
	server string // the postgres binary
	port   int
	cmd    *exec.Cmd
	done   chan struct{}
	// settings are extra server settings ("name=value"), each passed as -c.
	settings []string
}

// bin finds a PostgreSQL server binary (initdb, postgres) of the installed version.
func bin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(m) == 0 {
		return "", fmt.Errorf("%s not found: install PostgreSQL (apt-get install postgresql)", name)
	}
	return m[len(m)-1], nil
}

// asPostgres makes cmd run as the postgres system user when we are root, and hands it root.
func asPostgres(cmd *exec.Cmd, root string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root and there is no postgres user to run the server as: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return fmt.Errorf("the postgres user's uid %q is not a number: %w", u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return fmt.Errorf("the postgres user's gid %q is not a number: %w", u.Gid, err)
	}
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return nil
}

// Start initialises and starts a cluster and waits until it accepts connections.
func Start() (*Cluster, error) { return StartWith() }

// StartWith is Start with extra server settings, each "name=value" (wal_level=logical).
func StartWith(settings ...string) (*Cluster, error) {
	initdb, err := bin("initdb")
	if err != nil {
		return nil, err
	}
	server, err := bin("postgres")
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "rsql-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{root: root, settings: settings}
	data := filepath.Join(root, "data")
	init := exec.Command(initdb, "-D", data, "-U", "rsql", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if err := asPostgres(init, root); err != nil {
		c.Stop()
		return nil, err
	}
	if out, err := init.CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.Stop()
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c.server, c.port = server, port
	c.URL = fmt.Sprintf("postgres://rsql@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := c.StartServer(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// StartServer starts the server of a cluster whose server was stopped with StopServer, on
// the same data directory and port, and waits until it accepts connections. While the
// server was down another socket may have taken the port (an outgoing connection's
// ephemeral port is drawn from the same range): the start is retried for a while.
func (c *Cluster) StartServer() error {
	var err error
	for try := 0; try < 40; try++ {
		if err = c.startServer(); err == nil || !strings.Contains(err.Error(), "Address already in use") {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

// HoldPort keeps the stopped server's port bound until release is called, refusing the
// connections it gets (they are accepted and closed at once, so clients see the database
// down): nothing else can take the port while a test keeps the database away.
func (c *Cluster) HoldPort() (release func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(c.port))
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	return func() { ln.Close() }, nil
}

func (c *Cluster) startServer() error {
	root := c.root
	logf, err := os.OpenFile(filepath.Join(root, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	srv := exec.Command(c.server, "-D", filepath.Join(root, "data"), "-p", strconv.Itoa(c.port), "-k", root,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=100")
	for _, set := range c.settings {
		srv.Args = append(srv.Args, "-c", set)
	}
	srv.Stdout, srv.Stderr = logf, logf
	if err := asPostgres(srv, root); err != nil {
		logf.Close()
		return err
	}
	if err := srv.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	c.cmd, c.done = srv, done
	go func() { srv.Wait(); logf.Close(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.URL)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(root, "server.log"))
			return fmt.Errorf("postgres exited during start-up:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			c.StopServer()
			return fmt.Errorf("postgres did not accept connections within 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopServer stops the server by its PID (SIGINT: fast shutdown, which ends the sessions
// connected to it) and waits for it, keeping its data directory and port for StartServer.
func (c *Cluster) StopServer() { c.stopWith(syscall.SIGINT) }

// CrashServer stops the server by its PID the way a crash does (SIGQUIT: immediate
// shutdown — the processes exit at once, without a shutdown checkpoint, and the next start
// replays the WAL to recover) and waits for it, keeping its data directory and port for
// StartServer.
func (c *Cluster) CrashServer() { c.stopWith(syscall.SIGQUIT) }

// stopWith sends sig to the server and waits for it to exit (SIGKILL after 30 s).
func (c *Cluster) stopWith(sig syscall.Signal) {
	if c.cmd == nil {
		return
	}
	select {
	case <-c.done:
	default:
		c.cmd.Process.Signal(sig)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	}
}

// Stop sends SIGINT (fast shutdown) to the server's PID, waits for it, and removes its files.
func (c *Cluster) Stop() {
	c.StopServer()
	if c.root != "" {
		os.RemoveAll(c.root)
	}
}
