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
		op.byWindows()
	} else if op.paneW != 2_000 {
		b.Fatalf("pane width %d, want 2000", op.paneW)
	}
	sink := &discard{}
	a := newOpChain(sink, op)
	driveWindowed(b, a, store, rows, 50, &cnt)
	if b.N >= 1_000_000 && sink.rows == 0 {
		b.Fatal("no window closed")
	}
}
