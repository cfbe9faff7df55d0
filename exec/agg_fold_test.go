package exec

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/state"
)

// batchLog keeps the rows of each Emit apart: an aggregation emits once per input batch.
type batchLog struct{ batches [][]string }

func (l *batchLog) Emit(b *Batch) error {
	var rows rowLog
	if err := rows.Emit(b); err != nil {
		return err
	}
	l.batches = append(l.batches, rows.rows)
	return nil
}

// An aggregation without a window emits one change per group per input batch: Upsert,
// the group's row after the batch; Retract, the delete of its row before the batch (when it
// had one), then its row after. The view its changes build is the aggregate of the rows so
// far after every batch, also while groups leave a small cache and are read back in the
// middle of a batch (the batch's changed groups are renumbered then).
func TestGroupByFoldsEachBatch(t *testing.T) {
	for _, mode := range []planner.ChangeMode{planner.Upsert, planner.Retract} {
		for _, cache := range []int{0, 8} {
			t.Run(fmt.Sprintf("%s/cache=%d", mode, cache), func(t *testing.T) {
				node := cacheNode()
				node.Changes = mode
				var store state.Store = state.NewMemory()
				if cache > 0 {
					rocks, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
					if err != nil {
						t.Fatal(err)
					}
					defer rocks.Close()
					store = rocks
				}
				var cnt counters
				a := newAggOp(node, "j", "agg", store, nil, &cnt)
				if cache > 0 {
					a.cacheMax = aggCacheSize(node, store, cache)
				}
				out := &batchLog{}
				op := newOpChain(out, a)
				must := func(err error) {
					t.Helper()
					if err != nil {
						t.Fatal(err)
					}
				}
				must(op.Control(&Control{Kind: NewSplit, Split: "s"}))

				rows := cacheRows(4, 3000, 60)
				r := rand.New(rand.NewSource(int64(cache) + int64(mode)))
				type model struct {
					n, sum, lo, hi int64
					seen           map[int64]bool
				}
				groups := map[string]*model{}
				view, keyed := map[string]int{}, map[string]string{}
				var pending *state.Batch
				emitted := 0
				for i, b := 0, 0; i < len(rows); b++ {
					end := min(i+1+r.Intn(40), len(rows))
					changed := map[string]bool{}
					for _, row := range rows[i:end] {
						u, x := row[0].S, row[1].I
						g := groups[u]
						if g == nil {
							g = &model{lo: x, hi: x, seen: map[int64]bool{}}
							groups[u] = g
						}
						g.n, g.sum, g.lo, g.hi = g.n+1, g.sum+x, min(g.lo, x), max(g.hi, x)
						g.seen[x] = true
						changed[u] = true
					}
					before := len(out.batches)
					must(op.Process(&Batch{Split: "s", Rows: slices.Clone(rows[i:end])}))
					if len(out.batches) != before+1 {
						t.Fatalf("batch %d: %d emits, want 1", b, len(out.batches)-before)
					}
					got := out.batches[before]
					// One change per changed group: a delete first in Retract mode.
					ins, del := map[string]int{}, map[string]int{}
					for _, row := range got {
						key, _, _ := strings.Cut(row, ",")
						if strings.HasSuffix(row, ",delete") {
							if ins[key] > 0 {
								t.Fatalf("batch %d: %q after the group's new row", b, row)
							}
							del[key]++
						} else {
							ins[key]++
						}
					}
					for u := range changed {
						if ins[u] != 1 || del[u] > 1 {
							t.Fatalf("batch %d: group %s changed, %d rows and %d deletes out", b, u, ins[u], del[u])
						}
					}
					emitted += len(ins)
					if len(ins) != len(changed) {
						t.Fatalf("batch %d: %d groups out, %d changed", b, len(ins), len(changed))
					}
					applyChanges(t, view, keyed, got, mode, 1)
					var want []string
					for u, g := range groups {
						want = append(want, fmt.Sprintf("%s,%d,%d,%d,%d,%d", u, g.n, g.sum, g.lo, g.hi, len(g.seen)))
					}
					slices.Sort(want)
					if d := diff(viewRows(view, keyed), want); d != "" {
						t.Fatalf("after batch %d: %s", b, d)
					}
					if b%4 == 3 {
						if pending != nil {
							must(store.Write(pending))
						}
						c := &Control{Kind: Checkpoint, Epoch: int64(b/4 + 1), State: &state.Batch{}}
						must(op.Control(c))
						pending = c.State
					}
					i = end
				}
				if emitted >= len(rows) {
					t.Fatalf("%d new rows of groups for %d rows in: nothing folded", emitted, len(rows))
				}
				if cache > 0 && !a.splits["s"].spilled {
					t.Fatal("no group left memory")
				}
			})
		}
	}
}
