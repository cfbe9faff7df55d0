package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// benchServer is an `rsql server` a benchmark runs on free loopback ports with a fresh data
// directory, and a connection to it over the Postgres wire.
type benchServer struct {
	cmd                      *exec.Cmd
	pid                      int
	pgAddr, nsAddr, httpAddr string
	stderr                   bytes.Buffer
	conn                     *pgx.Conn
}

// startBenchServer starts bin (this binary when "") as `rsql server` on data directory
// dir/data with extra arguments, and connects to it.
func startBenchServer(ctx context.Context, bin, dir string, extra ...string) (*benchServer, error) {
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		bin = self
	}
	addrs := make([]string, 4)
	for i := range addrs {
		var err error
		if addrs[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	s := &benchServer{pgAddr: addrs[0], nsAddr: addrs[1], httpAddr: addrs[3]}
	args := append([]string{"server", "--data-dir", filepath.Join(dir, "data"), "--pg-addr", s.pgAddr,
		"--namesrv-addr", s.nsAddr, "--broker-addr", addrs[2], "--http-addr", s.httpAddr}, extra...)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.pid = s.cmd.Process.Pid
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err := pgx.Connect(ctx, "postgres://rsql@"+s.pgAddr+"/rsql?sslmode=disable&default_query_exec_mode=simple_protocol")
		if err == nil {
			s.conn = conn
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("rsql server did not accept connections: %v\n%s", err, s.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop closes the connection and stops the server (SIGTERM, then SIGKILL after 30 s).
func (s *benchServer) stop() {
	if s.conn != nil {
		s.conn.Close(context.Background())
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}
