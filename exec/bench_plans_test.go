package exec

import (
	"context"
	"strings"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// Whole queries, from SQL text through the planner to a finished job, over in-memory
// sources of pre-decoded test records: what a plan shape costs per event. Each iteration
// runs the job over planEvents events per stream; the metrics are events per second and
// per CPU-second of the process (every thread).
//
//	go test ./exec -run '^$' -bench 'Plan' -benchtime 3x

const planEvents = 400_000

type benchCatalog map[string]*sql.Relation

func (c benchCatalog) Relation(name string) (*sql.Relation, bool) {
	r, ok := c[strings.ToLower(name)]
	return r, ok
}

func planCatalog() benchCatalog {
	rel := func(name string, queues string) *sql.Relation {
		return &sql.Relation{Name: name, Schema: eventSchema, EventTime: 2, WatermarkDelay: 200,
			Options: map[string]string{"connector": "mem", "format": "test", "queues": queues, "partitioned_by": "user_id"}}
	}
	return benchCatalog{"orders": rel("orders", "2"), "payments": rel("payments", "2")}
}

// benchSources holds pre-generated bodies per stream and split.
type benchSources map[string]*memSource

func newBenchSources(streams ...string) benchSources {
	out := benchSources{}
	for k, name := range streams {
		src := newMemSource(true, 512, "0", "1")
		for sp := 0; sp < 2; sp++ {
			evs := genEvents(int64(100+10*k+sp), planEvents/2, 1000, 50)
			// Key-partitioned by user: split sp holds the users with that parity.
			for i := range evs {
				evs[i].user = evs[i].user + []string{"a", "b"}[sp]
			}
			feedAll(src, []string{"0", "1"}[sp], evs)
		}
		out[name] = src
	}
	return out
}

func runPlanBench(b *testing.B, query string, streams ...string) {
	plan := planSQL(b, query, planCatalog(), "bench")
	srcs := newBenchSources(streams...)
	var rows int64
	env := Env{
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			return srcs[spec.Stream], nil
		},
		NewFormat:          newTestFormat,
		OnRow:              func(sql.Row) error { rows++; return nil },
		CheckpointInterval: time.Second,
		Tick:               10 * time.Millisecond,
	}
	report := startPlanRate(b, int64(planEvents*len(streams)))
	for i := 0; i < b.N; i++ {
		j, err := Start(context.Background(), "bench", plan, env)
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	report()
	if rows == 0 {
		b.Fatal("the query produced no rows")
	}
}

// startPlanRate resets the timer and returns a function reporting events/s and events per
// CPU-second for b.N runs of events events.
func startPlanRate(b *testing.B, events int64) func() {
	b.ResetTimer()
	c0 := cpuTime()
	return func() {
		b.StopTimer()
		total := float64(events) * float64(b.N)
		cpu := cpuTime() - c0
		b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
		if cpu > 0 {
			b.ReportMetric(total/cpu.Seconds(), "events/cpu-s")
		}
	}
}

// One stage: a tumbling COUNT/SUM per user over a stream partitioned by user.
func BenchmarkPlanTumble(b *testing.B) {
	runPlanBench(b, `SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
FROM TUMBLE(orders, ts, INTERVAL '1' SECOND) GROUP BY user_id, window_start, window_end`, "orders")
}

// Two stages: the per-user counts, then per window the largest (an exchange to one queue
// between them).
func BenchmarkPlanChainedAggregation(b *testing.B) {
	runPlanBench(b, `SELECT window_start, window_end, MAX(n) AS top, COUNT(*) AS users
FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n FROM TUMBLE(orders, ts, INTERVAL '1' SECOND)
      GROUP BY user_id, window_start, window_end) x GROUP BY window_start, window_end`, "orders")
}

// UNION ALL of two streams read in one stage, exchanged by user for the window.
func BenchmarkPlanUnionAll(b *testing.B) {
	runPlanBench(b, `SELECT user_id, window_start, window_end, COUNT(*) AS n
FROM TUMBLE((SELECT user_id, ts FROM orders UNION ALL SELECT user_id, ts FROM payments), ts, INTERVAL '1' SECOND)
GROUP BY user_id, window_start, window_end`, "orders", "payments")
}
