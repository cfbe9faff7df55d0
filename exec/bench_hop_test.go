package exec

import (
	"math/rand/v2"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// BenchmarkHopCount is Nexmark q5's aggregation: COUNT(*) per BIGINT key over HOP windows of
// 10 s sliding by 2 s (five windows per row), 50 events per millisecond of event time with
// keys drawn from 30,000 (about 28,000 groups per pane, 60,000 per window), a watermark after
// every batch and a checkpoint to the memory store every 200,000 events, whose cost is part
// of the figure. "windows" folds each row into each of its five windows (how hop
// aggregations ran before panes; still how EMIT CHANGES and inexact aggregates run);
// "panes" folds it into its 2-second pane and merges a window's five panes when it closes.
// Run both in one process, alternating (-count), and compare events/cpu-s
// (docs/benchmarks.md, Nexmark q5).
func BenchmarkHopCount(b *testing.B) {
	for _, mode := range []string{"windows", "panes"} {
		b.Run(mode, func(b *testing.B) { benchHop(b, mode == "panes") })
	}
}

func benchHop(b *testing.B, panes bool) {
	rng := rand.New(rand.NewPCG(5, 5))
	rows := make([]sql.Row, 1<<16)
	for i := range rows {
		rows[i] = sql.Row{sql.BigInt(int64(rng.IntN(30_000))), sql.Null, sql.Timestamp(0)}
	}
	aggs := []planner.AggSpec{builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt)}
	node := &planner.AggregateNode{
		Window: planner.WindowSpec{Kind: planner.WindowHop, Time: 2, Size: 10_000, Slide: 2_000},
		Keys:   []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeBigInt},
		Aggs: aggs, Emit: planner.EmitOnClose,
	}
	store := state.NewMemory()
	var cnt counters
	op := newAggOp(node, "bench", "agg", store, nil, &cnt)
	if !panes {
		op.paneW = 0
	} else if op.paneW != 2_000 {
		b.Fatalf("pane width %d, want 2000", op.paneW)
	}
	sink := &discard{}
	a := newOpChain(sink, op)
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
			r[2].I = int64(done+i) / 50
		}
		if err := a.Process(batch); err != nil {
			b.Fatal(err)
		}
		done += n
		if err := a.Watermark("0", int64(done)/50); err != nil {
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
	if b.N >= 1_000_000 && sink.rows == 0 {
		b.Fatal("no window closed")
	}
}
