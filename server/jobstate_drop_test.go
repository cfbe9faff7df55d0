package server

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"rsql/broker"
	"rsql/state"
)

// jobKeys counts the keys the local store holds for job.
func (te *testEngine) jobKeys(job string) int {
	te.t.Helper()
	n := 0
	if err := te.e.store.Scan(jobPrefix(job), func(_, _ []byte) error { n++; return nil }); err != nil {
		te.t.Fatal(err)
	}
	return n
}

// A terminated job never runs again, so its state leaves the local store: when the stream
// it writes is dropped or replaced, when it is terminated, and at the next start for a job
// terminated before (a version that kept it, or a stop in between).
func TestTerminatedJobStateIsDeleted(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (a BIGINT) WITH (queues = 2)")
	for q := 0; q < 2; q++ {
		var msgs []broker.Message
		for i := 0; i < 50; i++ {
			msgs = append(msgs, broker.Message{Body: []byte(fmt.Sprintf(`{"a": %d}`, i%7))})
		}
		if _, err := te.b.Append("ev", q, msgs); err != nil {
			t.Fatal(err)
		}
	}
	waitState := func(job string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); te.jobKeys(job) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("job %s wrote no state", job)
			}
		}
	}
	gone := func(job, how string) {
		t.Helper()
		if n := te.jobKeys(job); n != 0 {
			t.Fatalf("%s: %d keys of job %s left in the store", how, n, job)
		}
	}
	// job-1: dropped with its stream; job-2, replaced by job-3; job-3 terminated; job-4,
	// a view, dropped.
	te.mustExec("CREATE STREAM c1 AS SELECT a, COUNT(*) AS n FROM ev GROUP BY a")
	waitState("job-1")
	te.mustExec("DROP STREAM c1")
	gone("job-1", "DROP STREAM")
	te.mustExec("CREATE STREAM c2 AS SELECT a, COUNT(*) AS n FROM ev GROUP BY a")
	waitState("job-2")
	te.mustExec("CREATE OR REPLACE STREAM c2 AS SELECT a, SUM(a) AS s FROM ev GROUP BY a")
	gone("job-2", "CREATE OR REPLACE STREAM")
	waitState("job-3")
	te.mustExec("TERMINATE JOB job-3")
	gone("job-3", "TERMINATE JOB")
	te.mustExec("CREATE MATERIALIZED VIEW v AS SELECT a, COUNT(*) AS n FROM ev GROUP BY a")
	waitState("job-4")
	te.mustExec("DROP VIEW v")
	gone("job-4", "DROP VIEW")

	// State of a terminated job found at the start goes; a running job's stays.
	te.mustExec("CREATE STREAM c5 AS SELECT a, COUNT(*) AS n FROM ev GROUP BY a")
	waitState("job-5")
	b := &state.Batch{}
	b.Put(append(jobPrefix("job-3"), "left"...), []byte("x"))
	if err := te.e.store.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := te.e.Close(); err != nil && !errors.Is(err, state.ErrClosed) {
		t.Fatal(err)
	}
	te.open()
	gone("job-3", "a start")
	if te.jobKeys("job-5") == 0 {
		t.Fatal("the running job's state was deleted at the start")
	}
}
