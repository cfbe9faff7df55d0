package server

import (
	"strings"
	"testing"
)

// A one-off query (not a job) fails with its first row error, as PostgreSQL's statement
// does, instead of answering without the row: the rows of a file whose expression fails,
// a SUM past BIGINT's range. A job sends such rows to its dead-letter output instead.
func TestOneOffQueryFailsWithRowError(t *testing.T) {
	te := newTestEngine(t, true)
	ordersFile(t, te)
	te.wantCode("SELECT id, amount / (amount - 7) FROM orders", "22012", "division by zero")
	te.wantCode("SELECT user, SUM(amount * 4611686018427387904) FROM orders GROUP BY user", "22003")
	if _, rows := te.mustExec("SELECT id, amount / (amount - 6) FROM orders"); len(rows[0]) != 3 {
		t.Fatalf("rows %v, want all three", rows[0])
	}
}

// The first row error of a one-off query names the row: the stream, the split and the
// record's line in a file (its offset in a topic).
func TestOneOffRowErrorNamesTheRow(t *testing.T) {
	te := newTestEngine(t, true)
	ordersFile(t, te)
	for _, q := range []string{
		"SELECT id, amount / (amount - 7) FROM orders",
		"SELECT id FROM orders WHERE amount / (amount - 7) > 0",
	} {
		_, _, err := te.exec(q)
		if err == nil || !strings.Contains(err.Error(), "stream orders, split 0, line 2:") || !strings.Contains(err.Error(), "22012") {
			t.Errorf("%s: got %v, want the error of line 2", q, err)
		}
	}
	// A pull query's row names the view (a view's row has no line or offset).
	te.mustExec("CREATE MATERIALIZED VIEW per_user AS SELECT user, SUM(amount) AS s FROM orders GROUP BY user")
	te.waitJobs()
	_, _, err := te.exec("SELECT user, 10 / (s - 7) FROM per_user")
	if err == nil || !strings.Contains(err.Error(), "view per_user: project: ERROR 22012: division by zero") {
		t.Errorf("pull query: got %v, want the error naming the view", err)
	}
	te.wantCode("SELECT 1 / 0", "22012", "division by zero")
}

// A push query over a topic whose function throws fails with the row's error (its offset
// in the queue) instead of waiting for rows that never come.
func TestPushQueryFailsWithRowError(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (v BIGINT) WITH (queues = 1)")
	te.mustExec("INSERT INTO ev VALUES (1), (2)")
	te.mustExec("CREATE FUNCTION boom(x BIGINT) RETURNS BIGINT LANGUAGE javascript AS 'if (x == 2) throw new Error(\"no two\"); return x'")
	te.mustExec("SET offset_reset = 'earliest'")
	_, rows, err := te.exec("SELECT boom(v) FROM ev")
	if err == nil || !strings.Contains(err.Error(), "stream ev, split 0, offset 1:") || !strings.Contains(err.Error(), "no two") {
		t.Fatalf("got rows %v, error %v; want the error of offset 1", rows, err)
	}
}
