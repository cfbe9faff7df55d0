package server

import "testing"

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
