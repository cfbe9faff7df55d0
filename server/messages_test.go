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

// DROP STREAM of a stream that several jobs read names every one of them, in job order.
func TestDropStreamNamesAllReaders(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM orders (id BIGINT, amount BIGINT) WITH (queues = 1)")
	for i := 0; i < 3; i++ {
		te.mustExec("CREATE STREAM o" + string(rune('a'+i)) + " AS SELECT id FROM orders")
	}
	te.wantCode("DROP STREAM orders", "55006", "jobs job-1, job-2, job-3 read it")
	te.mustExec("TERMINATE JOB job-1; TERMINATE JOB job-3")
	te.wantCode("DROP STREAM orders", "55006", "job job-2 reads it (TERMINATE JOB job-2 first)")
	te.wantCode("CREATE OR REPLACE STREAM orders (id BIGINT) WITH (queues = 1)", "55006", "job job-2 reads it")
}

// A query over streams that reads a materialized view too says that views are read by pull
// queries and how to join a stream with what a view computes, for a job and a push query.
func TestStreamJoinedWithViewMessage(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM orders (id BIGINT, user_id VARCHAR, amount BIGINT) WITH (queues = 1)")
	te.mustExec("CREATE MATERIALIZED VIEW totals AS SELECT user_id, SUM(amount) AS total FROM orders GROUP BY user_id")
	join := "SELECT o.id, t.total FROM orders o JOIN totals t ON o.user_id = t.user_id"
	te.wantCode("CREATE STREAM j AS "+join, "0A000", "a continuous query reads streams, and totals is a materialized view", "CREATE STREAM ... AS SELECT")
	te.wantCode(join, "0A000", "a push query reads streams, and totals is a materialized view", "CREATE STREAM ... AS SELECT")
}
