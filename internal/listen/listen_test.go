package listen

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestTemporary(t *testing.T) {
	wrap := func(errno syscall.Errno) error {
		return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
	}
	for _, err := range []error{wrap(syscall.EMFILE), wrap(syscall.ENFILE), wrap(syscall.ECONNABORTED), wrap(syscall.ENOBUFS), fmt.Errorf("x: %w", wrap(syscall.EMFILE))} {
		if !Temporary(err) {
			t.Errorf("%v is not temporary", err)
		}
	}
	for _, err := range []error{nil, net.ErrClosed, fmt.Errorf("accept: %w", net.ErrClosed), errors.New("broken"), wrap(syscall.EBADF), wrap(syscall.EINVAL)} {
		if Temporary(err) {
			t.Errorf("%v is temporary", err)
		}
	}
}

// Retry pauses longer each time up to a second, logs the first failure and every 100th,
// and Accepted starts over.
func TestBackoff(t *testing.T) {
	var b Backoff
	var logs []string
	logf := func(msg string, args ...any) { logs = append(logs, msg) }
	emfile := os.NewSyscallError("accept4", syscall.EMFILE)
	if b.Retry(errors.New("broken"), logf) {
		t.Fatal("retried a permanent error")
	}
	for i := 0; i < 3; i++ {
		if !b.Retry(emfile, logf) {
			t.Fatal("did not retry EMFILE")
		}
	}
	if b.delay != 4*firstDelay || len(logs) != 1 {
		t.Fatalf("after 3 retries: delay %v, %d log lines", b.delay, len(logs))
	}
	// The pause stops growing at a second; the 100th failure is logged again.
	b.delay, b.failed = maxDelay*3/4, 100
	b.Retry(emfile, logf)
	if b.delay != maxDelay || len(logs) != 2 {
		t.Fatalf("delay %v (want the cap %v), %d log lines", b.delay, maxDelay, len(logs))
	}
	b.Accepted(logf)
	if b.delay != 0 || b.failed != 0 || logs[len(logs)-1] != "accepting again" {
		t.Fatalf("after Accepted: %+v %v", b, logs)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5432": true, "127.8.9.1:1": true, "[::1]:80": true, "localhost:9": true,
		"[::ffff:127.0.0.1]:1": true, "10.0.0.1:5432": false, "0.0.0.0:5432": false,
		"[::]:5432": false, "example.com:1": false, "127.0.0.1": false, "": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
