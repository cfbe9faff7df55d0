package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rsql/broker"
	"rsql/connectors"
)

// Which job errors pause and retry the job, and which fail it.
func TestRetryableErrors(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{connectors.Unavailable(errors.New("topic t: no route")), true},
		{fmt.Errorf("pull: %w", connectors.Unavailable(errors.New("request timeout"))), true},
		{fmt.Errorf("send: %w", broker.ErrNoSpace), true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{fmt.Errorf("checkpoint: %w", syscall.ENOSPC), true},
		{timeout, true},
		{fmt.Errorf("frame: %w", io.ErrUnexpectedEOF), true},
		{errors.New("record of 5 MiB is over the broker's limit"), false},
		{fmt.Errorf("open: %w", os.ErrNotExist), false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// The backoff doubles from a second and stays at its maximum.
func TestRetryDelay(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 8; n++ {
		got = append(got, retryDelay(n))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("retry delays %v, want %v seconds", got, want)
		}
	}
}

// A job that fails for a reason retrying cannot fix is FAILED with the reason; once the
// cause is fixed, RESUME JOB starts it again from its checkpoint, and nothing is lost or
// written twice. RESUME of a job that is
// neither paused, failed nor waiting to retry is refused.
func TestResumeFailedJob(t *testing.T) {
	te := newTestEngine(t, true)
	dir := te.path("out")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "live.jsonl")
	te.mustExec("SET offset_reset = 'earliest'")
	te.mustExec("CREATE STREAM ev (id BIGINT) WITH (queues = 1)")
	te.mustExec("CREATE STREAM live WITH (connector = 'file', path = '" + out + "', checkpoint_interval = '50ms') AS SELECT id FROM ev")
	te.mustExec("INSERT INTO ev VALUES (1), (2)")
	waitFor(t, "the first rows", func() bool { b, _ := os.ReadFile(out); return strings.Count(string(b), "\n") == 2 })
	te.mustExec("PAUSE JOB job-1")
	// A directory takes the place of the sink's file: the job cannot start, and retrying
	// will not help.
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	te.mustExec("INSERT INTO ev VALUES (3)")
	te.exec("RESUME JOB job-1") // fails now, or the job fails as it starts
	waitFor(t, "the job to fail", func() bool { return te.jobStates()["job-1"] == "FAILED" })
	te.wantCode("PAUSE JOB job-1", "22023", "FAILED")
	// Fixed: it starts again from its checkpoint and writes what it had not.
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	te.mustExec("RESUME JOB job-1")
	te.mustExec("INSERT INTO ev VALUES (4)")
	want := `{"id":1} {"id":2} {"id":3} {"id":4}`
	waitFor(t, "the rows after RESUME", func() bool { b, _ := os.ReadFile(out); return strings.Count(string(b), "\n") >= 4 })
	time.Sleep(200 * time.Millisecond)
	if st := te.jobStates()["job-1"]; st != "RUNNING" {
		t.Fatalf("after RESUME: %s, want RUNNING", st)
	}
	// The file sink owns its file: the new one holds the job's whole output, each row once.
	if got := readLines(t, out); strings.Join(got, " ") != want {
		t.Errorf("the file holds %q, want %s", got, want)
	}
	te.wantCode("RESUME JOB job-1", "22023", "RUNNING")
}
