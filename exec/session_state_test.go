package exec

import (
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// A session whose bounds move between two checkpoints is stored under its new bounds, and
// its old copy is deleted by the same checkpoint: a crash right after it restores one
// session, not the old partial one beside the new (which fired as a second, partial row).
func TestSessionBoundsMoveInOneCheckpoint(t *testing.T) {
	forEachStore(t, func(t *testing.T, store state.Store) {
		var cnt counters
		w := planner.WindowSpec{Kind: planner.WindowSession, Time: 2, Gap: 100}
		node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)},
			Aggs: []planner.AggSpec{builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt)}, Emit: planner.EmitOnClose}
		row := func(ts int64) sql.Row {
			return sql.Row{sql.Varchar("u"), sql.Varchar("x"), sql.Timestamp(ts), sql.BigInt(1)}
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		a := newOpChain(lastRows{}, newAggOp(node, "j", "agg", store, nil, &cnt))
		must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
		must(a.Process(&Batch{Split: "s", Rows: []sql.Row{row(10), row(20)}}))
		c1 := &Control{Kind: Checkpoint, Epoch: 1, State: &state.Batch{}}
		must(a.Control(c1))
		must(store.Write(c1.State))
		// The session grows: [10, 120) becomes [10, 200).
		must(a.Process(&Batch{Split: "s", Rows: []sql.Row{row(100)}}))
		c2 := &Control{Kind: Checkpoint, Epoch: 2, State: &state.Batch{}}
		must(a.Control(c2))
		must(store.Write(c2.State))

		// A crash here: a fresh operator restores from the store.
		out := lastRows{}
		b := newOpChain(out, newAggOp(node, "j", "agg", store, nil, &cnt))
		must(b.Control(&Control{Kind: NewSplit, Split: "s"}))
		n := 0
		must(store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error { n++; return nil }))
		if n != 1 {
			t.Fatalf("%d stored sessions after the second checkpoint, want 1", n)
		}
		must(b.Watermark("s", MaxWatermark))
		if got, want := out["u"], "u,1970-01-01T00:00:00.010Z,1970-01-01T00:00:00.200Z,3"; got != want {
			t.Fatalf("restored session emitted %q, want %q", got, want)
		}
	})
}
