package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The broker's store on a full file system: a small tmpfs mounted for the test. Mounting
// needs root; without it these tests skip, and the same faults are covered through the
// store's file-system seam (broker.TestNoSpaceRefusesSendsKeepsReads, TestNoSpaceForTheIndex).

// mountSmallFS mounts a tmpfs of size (e.g. "48m") at dir, unmounted when the test ends.
func mountSmallFS(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a full disk is simulated with a small tmpfs, and mounting one needs root; the broker's tests inject ENOSPC through its file-system seam instead")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %s tmpfs at %s (%v: %s); the broker's tests inject ENOSPC through its file-system seam instead", size, dir, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fillFS writes dir/filler until the file system is full and returns a function that
// removes it (space returns).
func fillFS(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	f.Close()
	var st syscall.Statfs_t
	syscall.Statfs(dir, &st)
	t.Logf("file system at %s full: %d bytes free", dir, st.Bfree*uint64(st.Bsize))
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// consumeAllLines reads a topic from the beginning and returns its records.
func consumeAllLines(t *testing.T, ns, topic string) []string {
	t.Helper()
	out, errOut, err := runRsql(t, "", "consume", topic, "--from-beginning", "--idle-exit", "2s", "--namesrv-addr", ns)
	if err != nil {
		t.Fatalf("consume %s: %v\n%s", topic, err, errOut)
	}
	return lines(out)
}

func numberedRecords(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, `{"i":%d,"pad":"%s"}`+"\n", i, strings.Repeat("x", 200))
	}
	return b.String()
}

// TestBrokerFullDisk: `rsql broker` with its store on a small file system that fills up.
// Sends fail with an error the producer reports (no SIGBUS), reads go on, the broker
// restarts on the full file system, and once space returns sends succeed again, every
// record in place.
func TestBrokerFullDisk(t *testing.T) {
	dir := t.TempDir()
	mountSmallFS(t, filepath.Join(dir, "broker"), "24m")
	b := &rsqlBroker{dir: dir, NS: freePort(t), Addr: freePort(t), t: t, extra: []string{"--segment-size", "1MiB", "--flush", "sync"}}
	b.start()
	if _, errOut, err := runRsql(t, numberedRecords(0, 2000), "produce", "t", "--namesrv-addr", b.NS); err != nil {
		t.Fatalf("produce: %v\n%s", err, errOut)
	}
	free := fillFS(t, filepath.Join(dir, "broker"))
	// Sends now fail, with the reason.
	var errOut string
	var err error
	for i := 0; i < 20; i++ {
		_, errOut, err = runRsql(t, numberedRecords(2000+i*5000, 2000+(i+1)*5000), "produce", "t", "--namesrv-addr", b.NS)
		if err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(errOut, "no space") {
		t.Fatalf("produce on a full disk: %v\n%s\nbroker stderr:\n%s", err, errOut, b.p.Stderr.String())
	}
	select {
	case <-b.p.done:
		t.Fatalf("the broker died on a full disk: %v\n%s", b.p.err, b.p.Stderr.String())
	default:
	}
	before := consumeAllLines(t, b.NS, "t")
	if len(before) < 2000 {
		t.Fatalf("read %d records on the full disk, want at least 2000", len(before))
	}
	// A restart on the full disk: recovery must not die either.
	b.killAndRestart()
	if got := consumeAllLines(t, b.NS, "t"); len(got) != len(before) {
		t.Fatalf("after a restart on the full disk: %d records, before it %d", len(got), len(before))
	}
	free()
	if _, errOut, err := runRsql(t, numberedRecords(100000, 101000), "produce", "t", "--namesrv-addr", b.NS); err != nil {
		t.Fatalf("produce once space returned: %v\n%s", err, errOut)
	}
	got := consumeAllLines(t, b.NS, "t")
	if len(got) != len(before)+1000 {
		t.Fatalf("%d records at the end, want %d", len(got), len(before)+1000)
	}
	seen := map[string]bool{}
	for _, l := range got {
		if seen[l] {
			t.Fatalf("record twice: %.40s", l)
		}
		seen[l] = true
	}
	for i := 0; i < 2000; i++ {
		if !seen[fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", 200))] {
			t.Fatalf("record %d is missing", i)
		}
	}
}

// TestJobPausesOnFullDisk: `rsql server` with the bundled broker's store on a small file
// system. A job that cannot write for lack of space pauses (RETRYING, the reason shown)
// instead of failing or killing the server; the server restarts on the full disk; once space
// returns the job goes on from its checkpoint and its output is exactly the batch result.
// The input is on time: the job starts with nothing checkpointed, and a new job's split
// that delivers its first record more than a second after it opened holds no other back,
// so whether a record far behind is late could depend on that start on a loaded machine
// (docs/guarantees.md, "What is not guaranteed"); records late across restarts are the
// subject of TestJobSurvivesKill9.
func TestJobPausesOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	mountSmallFS(t, filepath.Join(dir, "broker"), "48m")
	evs := onTimeEvents(genEvents(53)[:40000])
	want, lastEnd := batchResult(evs)
	s := &jobsServer{t: t, dir: dir, pg: freePort(t), ns: freePort(t), br: freePort(t), http: freePort(t)}
	s.start()
	s.sql(jobsDDL)
	s.sql("PAUSE JOB job-1")
	produceEvents(t, s.ns, evs)
	free := fillFS(t, filepath.Join(dir, "broker"))
	s.sql("RESUME JOB job-1")
	waitJob := func(what string, ok func(state, errText string) bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			out := s.sql("SHOW JOBS")
			var state, errText string
			for _, l := range lines(out) {
				var r struct{ ID, State, Error string }
				if json.Unmarshal([]byte(l), &r) == nil && r.ID == "job-1" {
					state, errText = r.State, r.Error
				}
			}
			if ok(state, errText) {
				return
			}
			if state == "FAILED" || time.Now().After(deadline) {
				t.Fatalf("waiting for %s: job-1 is %s (%s)\nserver stderr:\n%s", what, state, errText, s.p.Stderr.String())
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	retrying := func(state, errText string) bool { return state == "RETRYING" && strings.Contains(errText, "no space") }
	waitJob("the job to pause for lack of space", retrying)
	// The broker serves reads meanwhile.
	if n := len(consumeAllLines(t, s.ns, "orders")); n != len(evs) {
		t.Fatalf("read %d input records on the full disk, want %d", n, len(evs))
	}
	// A restart on the full disk: the server comes back, the job pauses again.
	s.p.Kill()
	s.start()
	waitJob("the job to pause again after a restart on the full disk", retrying)
	free()
	waitJob("the job to run once space returned", func(state, _ string) bool { return state == "RUNNING" })
	waitWindowsClosed(t, s, lastEnd)
	got := consumedResult(t, s.ns)
	compareMultisets(t, "result after the disk was full", want, got)
	if t.Failed() {
		t.Logf("server stderr:\n%s", s.p.Stderr.String())
	}
}
