package tests

// Shared harness for end-to-end tests: the rsql binary is built once per test run (or taken
// from $RSQL_BIN), and processes are started on free loopback ports and stopped by PID.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildDir  string
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "rsql-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// repoRoot is the module root (the parent of tests/).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// buildRsql returns the path of the rsql binary, building ./cmd/rsql once per test run.
// Set RSQL_BIN to test a binary built elsewhere.
func buildRsql(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("RSQL_BIN"); p != "" {
			buildPath = p
			return
		}
		buildPath = filepath.Join(buildDir, "rsql")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/rsql")
		cmd.Dir = repoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/rsql: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// handedPorts holds every address freePort has returned in this process.
var handedPorts sync.Map

// freePort returns a loopback address with a port that was free a moment ago and that no
// earlier call returned: the kernel may hand a closed port out again, and two servers of
// one test given the same port fail to start (a standalone broker took the port picked a
// moment before for an instance's Postgres wire).
func freePort(t testing.TB) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, dup := handedPorts.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
	t.Fatal("freePort: no port the kernel offered was new in 100 tries")
	return ""
}

// proc is a process started by startProc.
type proc struct {
	Cmd    *exec.Cmd
	Stdout *syncBuffer
	Stderr *syncBuffer
	done   chan struct{}
	err    error
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProc starts bin with args; the process is killed (by PID) when the test ends if it
// is still running.
func startProc(t testing.TB, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{Cmd: exec.Command(bin, args...), Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Stdout, p.Stderr
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.Kill() })
	return p
}

// Stop sends SIGTERM and waits up to 30 s, then SIGKILL.
func (p *proc) Stop() error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	syscall.Kill(p.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(30 * time.Second):
		p.Kill()
		return fmt.Errorf("pid %d did not stop on SIGTERM", p.Cmd.Process.Pid)
	}
}

// Kill sends SIGKILL (kill -9) and waits for the process to go.
func (p *proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Wait waits for the process to exit by itself, up to d.
func (p *proc) Wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("pid %d still running after %v", p.Cmd.Process.Pid, d)
	}
}

// waitListening waits until addr accepts connections or the process exits.
func waitListening(t testing.TB, p *proc, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		select {
		case <-p.done:
			t.Fatalf("process exited before listening on %s: %v\nstderr:\n%s", addr, p.err, p.Stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("nothing listens on %s after 30 s\nstderr:\n%s", addr, p.Stderr.String())
}

// listensOrTaken waits until addr accepts connections (true), or reports false when the
// process exited because one of its addresses was taken meanwhile (free ports are only
// free when chosen: another test's process may bind one first); any other failure fails t.
func listensOrTaken(t testing.TB, p *proc, addr string) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		select {
		case <-p.done:
			if strings.Contains(p.Stderr.String(), "address already in use") {
				return false
			}
			t.Fatalf("process exited before listening on %s: %v\nstderr:\n%s", addr, p.err, p.Stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("nothing listens on %s after 30 s\nstderr:\n%s", addr, p.Stderr.String())
	return false
}

// runRsql runs the rsql binary to completion and returns stdout, stderr and the error.
func runRsql(t testing.TB, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(buildRsql(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	return out.String(), errb.String(), err
}
