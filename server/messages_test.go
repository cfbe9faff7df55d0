package server

import (
	"strings"
	"testing"
)

// A job that reads only files finishes at their end, and its notice says so instead of
// announcing that it writes continuously; one that reads a topic runs until stopped.
func TestStartedNoticeSaysWhetherTheJobEnds(t *testing.T) {
	te := newTestEngine(t, true)
	ordersFile(t, te)
	res, _ := te.mustExec("CREATE STREAM big WITH (connector = 'file', path = '" + te.path("big.jsonl") + "') AS SELECT id FROM orders WHERE amount > 6")
	if n := res[0].Notice; n == nil || !strings.Contains(n.Message, "started job job-1, which writes big from the files it reads and finishes at their end") || strings.Contains(n.Message, "continuously") {
		t.Errorf("a job over a file: notice %+v", n)
	}
	if !te.e.JobBounded("job-1") {
		t.Errorf("job-1 reads a file only, and is not bounded")
	}
	te.mustExec("CREATE STREAM ev (id BIGINT) WITH (queues = 1)")
	res, _ = te.mustExec("CREATE STREAM ev2 AS SELECT id FROM ev")
	if n := res[0].Notice; n == nil || !strings.Contains(n.Message, "writes ev2 continuously") {
		t.Errorf("a job over a topic: notice %+v", n)
	}
	if te.e.JobBounded("job-2") {
		t.Errorf("job-2 reads a topic, and is bounded")
	}
}
