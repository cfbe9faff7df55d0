package tests

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// jobStates runs SHOW JOBS with rsql -c (args name the server or the data directory) and
// returns each job's state.
func jobStates(t *testing.T, args ...string) map[string]string {
	t.Helper()
	out, errOut, err := runRsql(t, "", append(args, "-c", "SHOW JOBS")...)
	if err != nil {
		t.Fatalf("rsql -c SHOW JOBS: %v\n%s\n%s", err, out, errOut)
	}
	states := map[string]string{}
	for _, l := range lines(out) {
		var r struct {
			ID    string `json:"id"`
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("SHOW JOBS line %q: %v", l, err)
		}
		states[r.ID] = r.State
	}
	return states
}

// TestShowJobsOnStoppedServerChangesNothing: `rsql -c "SHOW JOBS" --data-dir D` on the data
// directory of a stopped server runs an engine of its own, without a broker, which cannot
// run the server's jobs over topics. The jobs stay RUNNING, as recorded, and the server,
// started again, runs them.
func TestShowJobsOnStoppedServerChangesNothing(t *testing.T) {
	s := newJobsServer(t)
	s.sql(`CREATE STREAM clicks (id BIGINT, page VARCHAR) WITH (queues = 2);
CREATE STREAM home WITH (queues = 1) AS SELECT id FROM clicks WHERE page = 'home';`)
	if err := s.p.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if st := jobStates(t, "--data-dir", s.dir); st["job-1"] != "RUNNING" {
			t.Fatalf("SHOW JOBS on the stopped server's directory (run %d): %v", i+1, st)
		}
	}
	s.start()
	if st := jobStates(t, "--server", s.pg); st["job-1"] != "RUNNING" {
		t.Fatalf("after the server started again: %v", st)
	}
	// It runs: rows inserted now come out.
	s.sql("INSERT INTO clicks VALUES (1, 'home'), (2, 'away'), (3, 'home')")
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, _ := runRsql(t, "", "consume", "home", "--from-beginning", "--idle-exit", "2s", "--namesrv-addr", s.ns)
		if got := strings.Join(lines(out), " "); got == `{"id":1} {"id":3}` {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the job's output after the restart: %q\n%s", got, s.p.Stderr.String())
		}
	}
}

// TestJobSurvivesBrokerKill9: `rsql server --namesrv` over a standalone `rsql broker --flush
// sync`; the job reads a pre-loaded topic, and the broker is killed with SIGKILL and started
// again twice while it does. The job pauses and starts again from its checkpoint each time
// (never FAILED), and its output is exactly the batch result.
func TestJobSurvivesBrokerKill9(t *testing.T) {
	evs := genEvents(47)[:40000]
	want, lastEnd := batchResult(evs)
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewSource(seed))
	t.Logf("kill timing seed %d", seed)
	b := startBroker(t, "--flush", "sync")
	s := newExternalJobsServer(t, b.NS)
	ddl := strings.SplitAfter(jobsDDL, ";")
	s.sql(ddl[0])
	produceEvents(t, b.NS, evs)
	s.sql(ddl[1])
	for i := 0; i < 2; i++ {
		d := time.Duration(300+r.Intn(1500)) * time.Millisecond
		time.Sleep(d)
		t.Logf("kill -9 the broker #%d, %v in", i+1, d)
		b.killAndRestart()
		if st := jobStates(t, "--server", s.pg)["job-1"]; st != "RUNNING" && st != "RETRYING" {
			t.Fatalf("job state %s after the broker's restart\n%s", st, s.p.Stderr.String())
		}
	}
	start := time.Now()
	defer func() { t.Logf("windows closed and result read in %v", time.Since(start).Round(100*time.Millisecond)) }()
	waitWindowsClosed(t, s, lastEnd)
	got := consumedResult(t, s.ns)
	compareMultisets(t, "result topic after two broker kills", want, got)
	if strings.Contains(s.p.Stderr.String(), "job job-1 failed") {
		t.Errorf("the job failed on the way")
	}
	t.Logf("the job paused and started again %d times", strings.Count(s.p.Stderr.String(), "job job-1 started again"))
	if t.Failed() {
		t.Logf("server stderr:\n%s\nbroker stderr:\n%s", s.p.Stderr.String(), b.p.Stderr.String())
	}
}
