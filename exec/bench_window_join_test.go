package exec

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// extremeJoinQuery: each order with the highest n of its user's minute, a window join of
// orders with a MAX of orders (as nexmark q7 joins the bids with their window's highest
// price): the planner marks the orders side dominated (planner.JoinDominance).
const extremeJoinQuery = `SELECT o.user_id, o.n, o.ts FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE) o JOIN
  (SELECT user_id, MAX(n) AS top, window_start, window_end FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE)
   GROUP BY user_id, window_start, window_end) m
  ON o.user_id = m.user_id AND o.window_start = m.window_start AND o.window_end = m.window_end AND o.n = m.top`

// highestOrderQuery is nexmark q7's shape: the orders with the highest n of their
// 10-minute window (no other group), each order a wide row (its user_id).
const highestOrderQuery = `SELECT o.user_id, o.n, o.ts FROM TUMBLE(orders, ts, INTERVAL '10' MINUTE) o JOIN
  (SELECT MAX(n) AS top, window_start, window_end FROM TUMBLE(orders, ts, INTERVAL '10' MINUTE)
   GROUP BY window_start, window_end) m
  ON o.window_start = m.window_start AND o.window_end = m.window_end AND o.n = m.top`

// planExtremeJoin plans a query of a dominated window join, with the join's dominance or without it (every
// row held, as before the planner found dominances).
func planExtremeJoin(tb testing.TB, query string, dominance bool) *planner.Physical {
	plan := planSQL(tb, query, planCatalog(), "wjx")
	found := false
	for _, s := range plan.Stages {
		for _, op := range s.Ops {
			if n, ok := op.Node.(*planner.JoinNode); ok && n.Dominance != nil {
				found = true
				if !dominance {
					n.Dominance = nil
				}
			}
		}
	}
	if !found {
		tb.Fatal("the planner found no dominance in the join")
	}
	return plan
}

// extremeSources: n orders per split (split s holds the users of parity s), in time order
// 10 ms apart (none late), n from 0 to 999, user names padded to pad bytes.
func extremeSources(n, users, pad int) (*memSource, []event4) {
	src := newMemSource(true, 512, "0", "1")
	var all []event4
	for sp := 0; sp < 2; sp++ {
		evs := genEvents(int64(300+sp), n, users, 0)
		for i := range evs {
			evs[i].user += []string{"a", "b"}[sp]
			if len(evs[i].user) < pad {
				evs[i].user += strings.Repeat("x", pad-len(evs[i].user))
			}
			evs[i].n = int64(i*7919) % 1000
		}
		feedAll(src, strconv.Itoa(sp), evs)
		all = append(all, evs...)
	}
	return src, all
}

// runExtremeJoin runs plan over src to the end and returns its rows (sorted) and CPU time.
func runExtremeJoin(tb testing.TB, plan *planner.Physical, src *memSource, store state.Store) ([]string, time.Duration) {
	var mu sync.Mutex
	var got []string
	env := Env{
		OpenSource: func(planner.SourceSpec) (connectors.Source, error) { return src, nil },
		NewFormat:  newTestFormat,
		OnRow: func(r sql.Row) error {
			mu.Lock()
			got = append(got, r[0].S+","+r[1].String()+","+strconv.FormatInt(r[2].I, 10))
			mu.Unlock()
			return nil
		},
		Store:              store,
		CheckpointInterval: 200 * time.Millisecond,
		Tick:               5 * time.Millisecond,
	}
	c0 := cpuTime()
	j, err := Start(context.Background(), "wjx", plan, env)
	if err != nil {
		tb.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		tb.Fatal(err)
	}
	cpu := cpuTime() - c0
	sort.Strings(got)
	return got, cpu
}

// The dominated window join emits exactly the rows at their group's maximum — the rows a
// join holding every row emits, and those computed from the events directly.
func TestWindowJoinDominanceSameRows(t *testing.T) {
	_, evs := extremeSources(6000, 40, 0)
	type group struct {
		user string
		w    int64
	}
	top := map[group]int64{}
	for _, e := range evs {
		if g := (group{e.user, e.ts - e.ts%60_000}); !e.nNull && (top[g] < e.n || top[g] == 0) {
			top[g] = e.n
		}
	}
	var want []string
	for _, e := range evs {
		if t, ok := top[group{e.user, e.ts - e.ts%60_000}]; ok && !e.nNull && e.n == t {
			want = append(want, e.user+","+strconv.FormatInt(e.n, 10)+","+strconv.FormatInt(e.ts, 10))
		}
	}
	sort.Strings(want)
	if len(want) < 100 {
		t.Fatalf("%d rows expected: the test is too weak", len(want))
	}
	for _, dom := range []bool{false, true} {
		src, _ := extremeSources(6000, 40, 0)
		got, _ := runExtremeJoin(t, planExtremeJoin(t, extremeJoinQuery, dom), src, state.NewMemory())
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("dominance %v: %d rows, want %d (first %v, want %v)", dom, len(got), len(want), got[:min(3, len(got))], want[:3])
		}
	}
}

// The window join of highestOrderQuery holding every row of its side against holding only
// the rows at the running maximum, in one run: 2 splits × 200,000 orders (120,000 per
// window) of 200-byte rows, state in memory or in RocksDB. The ratios are the gain of
// dropping rows that cannot match; peak-heap-MiB includes the 2 × 200,000 records the
// sources hold (about 100 MiB).
//
//	go test ./exec -run '^$' -bench 'WindowJoinExtreme' -benchtime 3x
func BenchmarkWindowJoinExtreme(b *testing.B) {
	for _, st := range []struct {
		name  string
		store func(b *testing.B) state.Store
	}{{"memory", memoryStore}, {"rocksdb", rocksStore}} {
		var perCPU [2]float64
		for i, dom := range []bool{false, true} {
			name := map[bool]string{false: "all-rows", true: "extremes-only"}[dom]
			b.Run(st.name+"/"+name, func(b *testing.B) {
				plan := planExtremeJoin(b, highestOrderQuery, dom)
				var cpu time.Duration
				var rows int
				var peak uint64
				for n := 0; n < b.N; n++ {
					b.StopTimer()
					src, _ := extremeSources(200_000, 200, 200)
					store := st.store(b)
					runtime.GC()
					b.StartTimer()
					stop := make(chan struct{})
					done := make(chan uint64)
					go func() { done <- heapPeak(stop) }()
					got, c := runExtremeJoin(b, plan, src, store)
					close(stop)
					peak = max(peak, <-done)
					cpu += c
					rows = len(got)
				}
				events := float64(2*2*200_000) * float64(b.N) // both scans of the orders
				perCPU[i] = events / cpu.Seconds()
				b.ReportMetric(perCPU[i], "events/cpu-s")
				b.ReportMetric(float64(rows), "rows")
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			})
		}
		if perCPU[0] > 0 && perCPU[1] > 0 {
			fmt.Printf("BenchmarkWindowJoinExtreme/%s: extremes-only / all-rows = %.2f× events/cpu-s\n", st.name, perCPU[1]/perCPU[0])
		}
	}
}

// heapPeak samples the live heap every 10 ms until stop closes and returns the largest.
func heapPeak(stop chan struct{}) uint64 {
	var peak uint64
	var ms runtime.MemStats
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		select {
		case <-stop:
			return peak
		case <-t.C:
		}
	}
}
