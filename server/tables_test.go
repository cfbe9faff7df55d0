package server

import (
	"fmt"
	"strings"
	"testing"

	"rsql/broker"
)

// DROP names what it drops: a table is dropped with DROP TABLE, not DROP STREAM or VIEW.
func TestDropTable(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec(`CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR) WITH (topic = 'users')`)
	te.mustExec(`CREATE STREAM orders (user_id VARCHAR, amount DOUBLE) WITH (topic = 'orders')`)
	te.wantCode(`DROP STREAM users`, "42809", `"users" is not a stream (use DROP TABLE)`)
	te.wantCode(`DROP VIEW users`, "42809", `"users" is not a view (use DROP TABLE)`)
	te.wantCode(`DROP TABLE orders`, "42809", `"orders" is not a table (use DROP STREAM)`)
	res, _ := te.mustExec(`DROP TABLE users`)
	if res[0].Tag != "DROP TABLE" {
		t.Fatalf("tag %q", res[0].Tag)
	}
	te.wantCode(`DROP TABLE users`, "42P01", "does not exist")
	te.mustExec(`DROP TABLE IF EXISTS users`)
}

// A pull query reads a table's queues concurrently, each with its own decoder: every latest
// version comes back whole, however the reads interleave.
func TestPullQueryReadsQueuesConcurrently(t *testing.T) {
	te := newTestEngine(t, true)
	const queues, users = 8, 2_000
	te.mustExec(fmt.Sprintf(`CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts) WITH (topic = 'users', queues = %d)`, queues))
	want := map[string]string{}
	batches := make([][]broker.Message, queues)
	for i := 0; i < users; i++ {
		id := fmt.Sprintf("user-%04d", i)
		tier := strings.Repeat("t", 1+i%37) // bodies of different lengths
		want[id] = fmt.Sprintf("%s %s %d", id, tier, 1_700_000_000_000+int64(i))
		body := fmt.Sprintf(`{"user_id":%q,"tier":%q,"ts":%d}`, id, tier, 1_700_000_000_000+int64(i))
		batches[i%queues] = append(batches[i%queues], broker.Message{Key: id, Body: []byte(body)})
	}
	for q, msgs := range batches {
		if _, err := te.b.Append("users", q, msgs); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 5; round++ {
		_, rows := te.mustExec(`SELECT user_id, tier, CAST(ts AS BIGINT) FROM users`)
		if len(rows[0]) != users {
			t.Fatalf("round %d: %d rows, want %d", round, len(rows[0]), users)
		}
		for _, r := range rows[0] {
			got := strings.Join(r, " ")
			if want[r[0]] != got {
				t.Fatalf("round %d: row %q, want %q", round, got, want[r[0]])
			}
		}
	}
}
