package exec

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Benchmarks measure operators only (rows are pre-decoded): events per second per core.
// One benchmark op is one event, so allocs/op is allocations per event.

const benchBatch = 1024

func benchRows(n, keys int) []sql.Row {
	users := make([]sql.Value, keys)
	for i := range users {
		users[i] = sql.Varchar(fmt.Sprintf("user-%05d", i))
	}
	rows := make([]sql.Row, n)
	for i := range rows {
		rows[i] = sql.Row{users[(i*7919)%keys], sql.Double(float64(i%100) + 0.5), sql.Timestamp(0), sql.BigInt(int64(i))}
	}
	return rows
}

// cpuTime is the CPU time (user + system) this process has used, all threads included.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startRate resets the timer and returns a function reporting events/s (wall clock) and
// events per CPU-second (CPU time of every thread of the process, including the garbage
// collector and RocksDB's background threads), which stays meaningful on a loaded machine.
func startRate(b *testing.B) func() {
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	return func() {
		b.StopTimer()
		cpu := cpuTime() - c0
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		if cpu > 0 {
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
		}
	}
}

func BenchmarkFilterProject(b *testing.B) {
	rows := benchRows(1<<16, 1000)
	sink := &discard{}
	chain := newOpChain(sink,
		&filterOp{pred: func(r sql.Row) sql.Value { return sql.Bool(r[1].F() > 25) }},
		&projectOp{exprs: []planner.Evaluator{col(0), func(r sql.Row) sql.Value { return sql.Double(r[1].F() * 2) }, col(3)}},
	)
	batch := &Batch{Split: "0", Rows: make([]sql.Row, 0, benchBatch)}
	report := startRate(b)
	for done := 0; done < b.N; {
		n := min(benchBatch, b.N-done)
		off := done % len(rows)
		if off+n > len(rows) {
			n = len(rows) - off
		}
		batch.Rows = append(batch.Rows[:0], rows[off:off+n]...)
		if err := chain.Process(batch); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	report()
}

// driveWindowed feeds b.N rows (cycling through rows) to the windowed aggregation chain a
// of split "0", perMs rows per millisecond of event time (column 2), with a watermark after
// every batch and a checkpoint to store every 200,000 rows, and reports the rate; cnt is
// the aggregation's counters (no row may be late).
func driveWindowed(b *testing.B, a *opChain, store state.Store, rows []sql.Row, perMs int64, cnt *counters) {
	if err := a.Control(&Control{Kind: NewSplit, Split: "0"}); err != nil {
		b.Fatal(err)
	}
	batch := &Batch{Split: "0", Rows: make([]sql.Row, 0, benchBatch)}
	ckpt := &state.Batch{}
	sinceCkpt := 0
	report := startRate(b)
	for done := 0; done < b.N; {
		n := min(benchBatch, b.N-done)
		off := done % len(rows)
		if off+n > len(rows) {
			n = len(rows) - off
		}
		batch.Rows = append(batch.Rows[:0], rows[off:off+n]...)
		for i, r := range batch.Rows {
			r[2].I = (int64(done) + int64(i)) / perMs
		}
		if err := a.Process(batch); err != nil {
			b.Fatal(err)
		}
		done += n
		if err := a.Watermark("0", int64(done)/perMs); err != nil {
			b.Fatal(err)
		}
		if sinceCkpt += n; sinceCkpt >= 200_000 {
			sinceCkpt = 0
			ckpt.Reset()
			if err := a.Control(&Control{Kind: Checkpoint, State: ckpt}); err != nil {
				b.Fatal(err)
			}
			if err := store.Write(ckpt); err != nil {
				b.Fatal(err)
			}
		}
	}
	report()
	if cnt.late.Load() != 0 {
		b.Fatalf("%d late rows", cnt.late.Load())
	}
}

// benchTumble runs a tumbling COUNT(*)/SUM grouped by a 10,000-value key: 100 events per
// millisecond of event time, 1-second windows (100,000 events and 10,000 groups per window),
// a watermark after every batch, a checkpoint to the store every 200,000 events.
func benchTumble(b *testing.B, store state.Store) {
	rows := benchRows(1<<16, 10000)
	node := &planner.AggregateNode{
		Window: planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000},
		Keys:   []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: countSum, Emit: planner.EmitOnClose,
	}
	sink := &discard{}
	var cnt counters
	a := newOpChain(sink, newAggOp(node, "bench", "agg", store, nil, &cnt))
	driveWindowed(b, a, store, rows, 100, &cnt)
}

func BenchmarkTumbleCountSumMemory(b *testing.B) {
	benchTumble(b, state.NewMemory())
}

func BenchmarkTumbleCountSumRocksDB(b *testing.B) {
	s, err := state.OpenRocks(b.TempDir(), state.RocksOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchTumble(b, s)
}

// BenchmarkCountDistinctCheckpoints is q16's shape: an aggregation without window, COUNT(*)
// and COUNT(DISTINCT n) per key (100 keys, so each set grows to thousands of values), with a
// checkpoint to the memory store every 200,000 events. A checkpoint writes only the values
// added since the previous one (docs/benchmarks.md, Nexmark).
func BenchmarkCountDistinctCheckpoints(b *testing.B) {
	rows := benchRows(1<<16, 100)
	node := &planner.AggregateNode{
		Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: []planner.AggSpec{
			builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
			builtinAgg("COUNT(DISTINCT)", col(3), sql.TypeBigInt, sql.TypeBigInt),
		},
	}
	store := state.NewMemory()
	var cnt counters
	a := newOpChain(&discard{}, newAggOp(node, "bench", "agg", store, nil, &cnt))
	if err := a.Control(&Control{Kind: NewSplit, Split: "0"}); err != nil {
		b.Fatal(err)
	}
	batch := &Batch{Split: "0", Rows: make([]sql.Row, 0, benchBatch)}
	ckpt := &state.Batch{}
	sinceCkpt := 0
	report := startRate(b)
	for done := 0; done < b.N; {
		n := min(benchBatch, b.N-done)
		off := done % len(rows)
		if off+n > len(rows) {
			n = len(rows) - off
		}
		batch.Rows = append(batch.Rows[:0], rows[off:off+n]...)
		for i, r := range batch.Rows {
			r[3].I = int64(done+i) % 1_000_000 // sets grow to 10,000 values per key
		}
		if err := a.Process(batch); err != nil {
			b.Fatal(err)
		}
		done += n
		if sinceCkpt += n; sinceCkpt >= 200_000 {
			sinceCkpt = 0
			ckpt.Reset()
			if err := a.Control(&Control{Kind: Checkpoint, State: ckpt}); err != nil {
				b.Fatal(err)
			}
			if err := store.Write(ckpt); err != nil {
				b.Fatal(err)
			}
		}
	}
	report()
}
