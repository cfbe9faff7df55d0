package exec

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Joins from SQL text to a finished job at 10,000 keys, over in-memory sources of
// pre-encoded records (two splits per stream), with the state in memory or in RocksDB
// (written at the checkpoints, every second). events/cpu-s counts the records of both
// inputs per CPU-second of the process (every thread).
//
//	go test ./exec -run '^$' -bench 'Join' -benchtime 3x

const (
	joinBenchEvents = 400_000 // per stream
	joinBenchKeys   = 10_000
)

// joinBenchCatalog: orders and payments (user_id, amount, ts, n), and users, a table of
// versions by user_id.
func joinBenchCatalog() benchCatalog {
	c := planCatalog()
	schema := append(append(sql.Schema{}, eventSchema...), sql.Column{Name: sql.ChangeColumn, Type: sql.TypeVarchar})
	c["users"] = &sql.Relation{Name: "users", Schema: schema, EventTime: 2, WatermarkDelay: 200, IsTable: true, PrimaryKey: []int{0},
		Options: map[string]string{"topic": "users", "format": "test", "queues": "2"}}
	return c
}

// joinBenchSources: orders of joinBenchKeys users, 10 ms apart with up to 50 ms of
// disorder; each order's payment 500 ms after it; each user's versions: one before the
// first order, then one every 20 s of event time.
func joinBenchSources() benchSources {
	orders := newMemSource(true, 512, "0", "1")
	payments := newMemSource(true, 512, "0", "1")
	users := newMemSource(true, 512, "0", "1")
	for sp := 0; sp < 2; sp++ {
		split := strconv.Itoa(sp)
		evs := genEvents(int64(200+sp), joinBenchEvents/2, joinBenchKeys, 50)
		feedAll(orders, split, evs)
		for i := range evs {
			evs[i].ts += 500
			evs[i].amount++
		}
		feedAll(payments, split, evs)
		var vs []string
		first, last := evs[0].ts-60_000, evs[len(evs)-1].ts
		for t := first; t <= last; t += 20_000 {
			for k := sp; k < joinBenchKeys; k += 2 {
				vs = append(vs, "u"+strconv.Itoa(k)+",1,"+strconv.FormatInt(t+int64(k/10), 10)+","+strconv.Itoa(k%7)+",")
			}
		}
		users.feed(split, vs...)
	}
	return benchSources{"orders": orders, "payments": payments, "users": users}
}

func runJoinBench(b *testing.B, query string, store func(b *testing.B) state.Store, streams ...string) {
	runJoinPlanBench(b, planSQL(b, query, joinBenchCatalog(), "bench"), store, streams...)
}

func runJoinPlanBench(b *testing.B, plan *planner.Physical, store func(b *testing.B) state.Store, streams ...string) {
	srcs := joinBenchSources()
	var events int64
	for _, s := range streams {
		for _, d := range srcs[s].data {
			events += int64(len(d))
		}
	}
	var rows int64
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srcs = joinBenchSources()
		env := Env{
			OpenSource:         func(spec planner.SourceSpec) (connectors.Source, error) { return srcs[spec.Stream], nil },
			NewFormat:          newTestFormat,
			OnRow:              func(sql.Row) error { rows++; return nil },
			Store:              store(b),
			CheckpointInterval: time.Second,
			Tick:               10 * time.Millisecond,
		}
		runtime.GC() // the set-up's garbage is not the job's
		b.StartTimer()
		c0 := cpuTime()
		j, err := Start(context.Background(), "bench", plan, env)
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Wait(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
	}
	b.StopTimer()
	total := float64(events) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(total/cpu.Seconds(), "events/cpu-s")
	b.ReportMetric(float64(rows)/float64(b.N), "rows")
	if rows == 0 {
		b.Fatal("the join produced no rows")
	}
}

func memoryStore(*testing.B) state.Store { return state.NewMemory() }

func rocksStore(b *testing.B) state.Store {
	s, err := state.OpenRocks(b.TempDir(), state.RocksOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

const intervalJoinQuery = `SELECT o.user_id, o.amount, p.amount FROM orders o JOIN payments p
  ON o.user_id = p.user_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '1' SECOND`

const temporalJoinQuery = `SELECT o.user_id, o.amount, u.n FROM orders o
  JOIN users FOR SYSTEM_TIME AS OF o.ts AS u ON o.user_id = u.user_id`

func BenchmarkJoinIntervalMemory(b *testing.B) {
	runJoinBench(b, intervalJoinQuery, memoryStore, "orders", "payments")
}

func BenchmarkJoinIntervalRocksDB(b *testing.B) {
	runJoinBench(b, intervalJoinQuery, rocksStore, "orders", "payments")
}

func BenchmarkJoinTemporalMemory(b *testing.B) {
	runJoinBench(b, temporalJoinQuery, memoryStore, "orders", "users")
}

func BenchmarkJoinTemporalRocksDB(b *testing.B) {
	runJoinBench(b, temporalJoinQuery, rocksStore, "orders", "users")
}

// genSource generates n records per split on the fly (nothing held in memory): record i of
// split s is a user of keys at time base + (2i+s)·5 ms + shift, with up to 40 ms of
// disorder.
type genSource struct {
	n     int64
	keys  int
	shift int64
}

func (s *genSource) Splits(context.Context) ([]string, error) { return []string{"0", "1"}, nil }
func (s *genSource) Bounded() bool                            { return true }
func (s *genSource) Close() error                             { return nil }
func (s *genSource) Open(_ context.Context, split string, offset int64) (connectors.SplitReader, error) {
	sp, _ := strconv.Atoi(split)
	return &genReader{s: s, split: int64(sp), next: offset}, nil
}

type genReader struct {
	s     *genSource
	split int64
	next  int64
	buf   []byte
}

func (r *genReader) Read(_ context.Context, out []connectors.Message, max int) ([]connectors.Message, error) {
	if r.next >= r.s.n {
		return out, connectors.ErrEndOfSplit
	}
	r.buf = r.buf[:0]
	start := len(out)
	for ; r.next < r.s.n && len(out)-start < max; r.next++ {
		i := r.next
		h := uint64(i*2+r.split) * 0x9E3779B97F4A7C15
		ts := int64(1_796_000_000_000) + (2*i+r.split)*5 + r.s.shift - int64(h>>60)*3
		b0 := len(r.buf)
		r.buf = append(r.buf, 'u')
		r.buf = strconv.AppendUint(r.buf, (h>>20)%uint64(r.s.keys), 10)
		r.buf = append(r.buf, ",1,"...)
		r.buf = strconv.AppendInt(r.buf, ts, 10)
		r.buf = append(r.buf, ",1"...)
		out = append(out, connectors.Message{Offset: i, Body: r.buf[b0:len(r.buf):len(r.buf)], Split: strconv.FormatInt(r.split, 10)})
	}
	return out, nil
}

func (r *genReader) Close() error { return nil }

// The state of an interval join over a long run stays bounded instead of growing with the
// input: about the rows of the interval plus the watermark delay plus how far one input may
// read ahead of the other (Env.AlignmentWindow, 10 s: 2,000 rows of a stream here). 10 M
// events (5 M per stream, 200 per second of event time each), the rows kept sampled every
// 100 ms of the run.
//
//	go test ./exec -run '^$' -bench JoinIntervalStateBounded -benchtime 1x -v
func BenchmarkJoinIntervalStateBounded(b *testing.B) {
	plan := planSQL(b, intervalJoinQuery, joinBenchCatalog(), "bench")
	const perStream = 5_000_000
	for i := 0; i < b.N; i++ {
		srcs := map[string]connectors.Source{
			"orders":   &genSource{n: perStream / 2, keys: joinBenchKeys},
			"payments": &genSource{n: perStream / 2, keys: joinBenchKeys, shift: 500},
		}
		var rows atomic.Int64
		env := Env{
			OpenSource:         func(spec planner.SourceSpec) (connectors.Source, error) { return srcs[spec.Stream], nil },
			NewFormat:          newTestFormat,
			OnRow:              func(sql.Row) error { rows.Add(1); return nil },
			Store:              state.NewMemory(),
			CheckpointInterval: time.Second,
			Tick:               10 * time.Millisecond,
		}
		c0 := cpuTime()
		j, err := Start(context.Background(), "bench", plan, env)
		if err != nil {
			b.Fatal(err)
		}
		var peak int64
		t := time.NewTicker(100 * time.Millisecond)
		var samples []string
	wait:
		for {
			select {
			case <-j.Done():
				break wait
			case <-t.C:
				st := j.Stats()
				peak = max(peak, st.StateRows)
				samples = append(samples, strconv.FormatInt(st.RecordsIn/1000, 10)+"k:"+strconv.FormatInt(st.StateRows, 10))
			}
		}
		t.Stop()
		if err := j.Wait(); err != nil {
			b.Fatal(err)
		}
		cpu := cpuTime() - c0
		b.Logf("records in (thousands) : rows in state — %s", strings.Join(samples, " "))
		b.ReportMetric(float64(peak), "peak-state-rows")
		b.ReportMetric(float64(2*perStream)/cpu.Seconds(), "events/cpu-s")
		b.ReportMetric(float64(rows.Load()), "rows")
	}
}

// A regular join (no time bound) of orders and payments, each order matching its payment
// (amount + 1) and the rare other payment of the same user and amount. With ttl > 0 the
// join forgets rows after it (approximate); 0 is the exact join, which keeps them.
const regularJoinQuery = `SELECT o.user_id, o.amount, p.n FROM orders o JOIN payments p
  ON o.user_id = p.user_id AND o.amount + 1 = p.amount`

func runRegularJoinBench(b *testing.B, ttl int64) { runRegularJoinQueryBench(b, regularJoinQuery, ttl) }

func runRegularJoinQueryBench(b *testing.B, query string, ttl int64) {
	stmts, err := sql.Parse(query)
	if err != nil {
		b.Fatal(err)
	}
	q, err := sql.Bind(stmts[0].(*sql.Select), joinBenchCatalog())
	if err != nil {
		b.Fatal(err)
	}
	_, plan, err := planner.Plan(q, planner.Options{Job: "bench", StateTTL: ttl})
	if err != nil {
		b.Fatal(err)
	}
	runJoinPlanBench(b, plan, memoryStore, "orders", "payments")
}

func BenchmarkJoinRegularMemory(b *testing.B) { runRegularJoinBench(b, 0) }

func BenchmarkJoinRegularTTLMemory(b *testing.B) { runRegularJoinBench(b, 3_600_000) }

// The exact LEFT join: orders without a payment yet go out with NULLs, taken back when it
// arrives (a retract changelog).
func BenchmarkJoinRegularLeftMemory(b *testing.B) {
	runRegularJoinQueryBench(b, strings.Replace(regularJoinQuery, " JOIN ", " LEFT JOIN ", 1), 0)
}
