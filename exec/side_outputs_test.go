package exec

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// sideCatalog has two streams, orders and payments, each with its own dead-letter and
// late topics (named after the stream).
func sideCatalog() benchCatalog {
	rel := func(name string) *sql.Relation {
		return &sql.Relation{Name: name, Schema: eventSchema, EventTime: 2, WatermarkDelay: 0,
			Options: map[string]string{"connector": "mem", "format": "test", "queues": "2",
				"dlq_topic": name + "_dlq", "late_topic": name + "_late"}}
	}
	return benchCatalog{"orders": rel("orders"), "payments": rel("payments")}
}

// runSides runs plan to its end over bounded orders and payments (one split each, so that
// a stream's watermark is its split's, one record per batch) and returns the side outputs
// it wrote, by name.
func runSides(t *testing.T, query string, orders, payments []string) *sinks {
	t.Helper()
	plan := planSQL(t, query, sideCatalog(), "side")
	o, p := newMemSource(true, 1, "0"), newMemSource(true, 1, "0")
	o.feed("0", orders...)
	p.feed("0", payments...)
	var sk sinks
	env := Env{
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			if spec.Stream == "payments" {
				return p, nil
			}
			return o, nil
		},
		NewFormat:          newTestFormat,
		OpenSink:           sk.open,
		OnRow:              func(sql.Row) error { return nil },
		Store:              state.NewMemory(),
		CheckpointInterval: time.Second,
		Tick:               5 * time.Millisecond,
	}
	j, err := Start(context.Background(), "side", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	return &sk
}

// A join's late rows go to the late output of the stream they were read from: the right
// input's to its own late_topic, encoded with its own columns, not to the left input's.
func TestJoinLateRowsToTheirOwnStream(t *testing.T) {
	// One record per batch, no delay: the second record of each stream is behind its
	// input's watermark at the join (5000) and late. Late rows hold the columns the join reads.
	sk := runSides(t, `SELECT o.n, p.n FROM orders o JOIN payments p ON o.user_id = p.user_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '1' SECOND`,
		[]string{"u1,1,5000,1", "u1,2,100,2"},
		[]string{"u1,3,5000,10", "u2,4,200,11"})
	if d := diff(sk.get("orders_late").bodies(), []string{"u1,100,2"}); d != "" {
		t.Errorf("orders_late: %s", d)
	}
	if d := diff(sk.get("payments_late").bodies(), []string{"u2,200,11"}); d != "" {
		t.Errorf("payments_late: %s", d)
	}
}

// Rows of a stage reading two streams that fail an expression go to the dead-letter
// output of the stream they were read from, named in their error.
func TestRowErrorsToTheirOwnStreamsDLQ(t *testing.T) {
	sk := runSides(t, `SELECT user_id, 10 / n AS q FROM orders UNION ALL SELECT user_id, 20 / n AS q FROM payments`,
		[]string{"u1,1,1000,1", "u2,1,1001,0"},
		[]string{"u3,1,1000,2", "u4,1,1001,0", "u5,1,1002,0"})
	streams := func(name string) []string {
		var out []string
		for _, b := range sk.get(name).bodies() {
			var rec struct {
				Stream string         `json:"stream"`
				Row    map[string]any `json:"row"`
			}
			if err := json.Unmarshal([]byte(b), &rec); err != nil {
				t.Fatalf("%s: %q: %v", name, b, err)
			}
			out = append(out, rec.Stream+":"+rec.Row["user_id"].(string))
		}
		return out
	}
	if d := diff(streams("orders_dlq"), []string{"orders:u2"}); d != "" {
		t.Errorf("orders_dlq: %s", d)
	}
	if d := diff(streams("payments_dlq"), []string{"payments:u4", "payments:u5"}); d != "" {
		t.Errorf("payments_dlq: %s", d)
	}
}

// A session ending exactly at the watermark fires at a later one (the touching rule); the
// aggregation after it, over the sessions' bounds, still takes its row instead of calling
// it late: the session aggregation holds the watermark it passes on back by 1 ms.
func TestChainedAggregationOverSessionsAtTheBoundary(t *testing.T) {
	plan := planSQL(t, `SELECT window_start, window_end, COUNT(*) AS users FROM
  (SELECT user_id, window_start, window_end, COUNT(*) AS n FROM SESSION(orders, ts, INTERVAL '10' SECOND)
   GROUP BY user_id, window_start, window_end) x GROUP BY window_start, window_end`, sideCatalog(), "chain")
	o, p := newMemSource(true, 1, "0"), newMemSource(true, 1, "0")
	// One record per batch, no delay: after b's record at 10000 the watermark is 10000, the
	// end of a's session [0, 10000), which stays open; c's at 30000 fires it.
	o.feed("0", "a,1,0,1", "b,1,10000,2", "c,1,30000,3")
	var mu sync.Mutex
	var got []string
	var sk sinks
	env := Env{
		OpenSink: sk.open,
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			if spec.Stream == "payments" {
				return p, nil
			}
			return o, nil
		},
		NewFormat: newTestFormat,
		OnRow: func(r sql.Row) error {
			mu.Lock()
			got = append(got, fmt.Sprintf("%d-%d:%s", r[0].I, r[1].I, r[2].String()))
			mu.Unlock()
			return nil
		},
		Store:              state.NewMemory(),
		CheckpointInterval: time.Second,
		Tick:               5 * time.Millisecond,
	}
	j, err := Start(context.Background(), "chain", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if d := diff(got, []string{"0-10000:1", "10000-20000:1", "30000-40000:1"}); d != "" {
		t.Fatal(d)
	}
	if st := j.Stats(); st.Late != 0 {
		t.Fatalf("late=%d", st.Late)
	}
}
