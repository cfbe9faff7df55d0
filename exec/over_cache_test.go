package exec

import (
	"fmt"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// overCacheNode is SUM(n) and MAX(n) OVER (PARTITION BY user ORDER BY n ROWS BETWEEN 2
// PRECEDING AND CURRENT ROW) over (user VARCHAR, n BIGINT, x) rows (topNCacheRows: x is
// NULL); retracting: the input rows end with a change column. Rows arrive in no order of
// n, so most take back the outputs of rows after them.
func overCacheNode(retracting bool) *planner.OverNode {
	return &planner.OverNode{Partition: []planner.Evaluator{col(0)}, Order: []planner.SortSpec{{Eval: col(1)}}, Preceding: 2,
		Aggs: []planner.AggSpec{builtinAgg("SUM", col(1), sql.TypeBigInt, sql.TypeBigInt), builtinAgg("MAX", col(1), sql.TypeBigInt, sql.TypeBigInt)},
		Cols: []int{3, 4}, Changes: planner.Retract, Retracting: retracting,
		Schema: sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "n", Type: sql.TypeBigInt}, {Name: "x", Type: sql.TypeBigInt},
			{Name: "s", Type: sql.TypeBigInt}, {Name: "m", Type: sql.TypeBigInt}, {Name: "__op", Type: sql.TypeVarchar}}}
}

// newCachedOver is a window aggregate of overCacheNode over store with a cache of size
// partitions.
func newCachedOver(t *testing.T, retracting bool, store state.Store, size int) *overOp {
	t.Helper()
	op := newOverOp(overCacheNode(retracting), "j", "over", store)
	if op.cacheMax = overCacheSize(op.node, store, size); op.cacheMax != size {
		t.Fatalf("cache of %d partitions, want %d", op.cacheMax, size)
	}
	return op
}

// With a cache of a few partitions, a window aggregate with RocksDB state keeps few
// partitions in memory, reads the others back, and emits exactly what it emits with every
// partition in memory, over an append-only and over a retracting input (where partitions
// empty and come back while their deletes are not yet committed); a restart from the store
// loads no more than the cache and goes on as the uninterrupted run.
func TestOverCacheMatchesMemory(t *testing.T) {
	for _, retracting := range []bool{false, true} {
		t.Run(fmt.Sprint("retracting ", retracting), func(t *testing.T) {
			rows := topNCacheRows(3, 4000, 80, retracting)
			ref := &rowLog{}
			runCached(t, newOverOp(overCacheNode(retracting), "j", "over", state.NewMemory()), state.NewMemory(), rows, 0, ref, nil)

			store, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			reads := &readCountStore{Store: store}
			got := &rowLog{}
			op := newCachedOver(t, retracting, reads, 8)
			most, emptied := 0, 0
			check := func() {
				sp := op.splits["s"]
				most = max(most, len(sp.parts))
				for _, p := range sp.parts {
					if len(p.rows) == 0 {
						emptied++
					}
				}
			}
			runCached(t, op, reads, rows[:2000], 0, got, check)
			if !op.splits["s"].spilled || most > 40 {
				t.Fatalf("spilled %v, at most %d partitions in memory with a cache of 8", op.splits["s"].spilled, most)
			}
			if reads.scans.Load() < 10 {
				t.Fatalf("%d scans: partitions were not read back", reads.scans.Load())
			}
			if retracting && emptied == 0 {
				t.Fatal("no partition was emptied: the test does not cover deletes")
			}
			op = newCachedOver(t, retracting, reads, 8)
			if err := op.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
				t.Fatal(err)
			}
			if sp := op.splits["s"]; len(sp.parts) > 8 || !sp.spilled {
				t.Fatalf("a restart loaded %d partitions with a cache of 8 (spilled %v)", len(sp.parts), sp.spilled)
			}
			op = newCachedOver(t, retracting, reads, 8)
			runCached(t, op, reads, rows, 2000, got, nil)
			if d := diff(got.rows, ref.rows); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// A partition whose last row was deleted, and which then gets a row before the checkpoint
// that deletes its rows in the store is committed, does not see its deleted rows again:
// it stays in memory, empty, whatever else comes and goes.
func TestOverCacheEmptiedPartitionBeforeCommit(t *testing.T) {
	store, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	run := func(op *overOp, store state.Store) []string {
		out := &rowLog{}
		c := newOpChain(out, op)
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		row := func(user string, n int64, del bool) sql.Row {
			r := sql.Row{sql.Varchar(user), sql.BigInt(n), sql.Null, sql.Null}
			if del {
				r[3] = sql.OpDelete
			}
			return r
		}
		others := func(from, to int) {
			for u := from; u < to; u++ {
				must(c.Process(&Batch{Split: "s", Rows: []sql.Row{row(fmt.Sprint("v", u), int64(u), false)}}))
			}
		}
		epoch := int64(0)
		checkpoint := func() *state.Batch {
			epoch++
			cp := &Control{Kind: Checkpoint, Epoch: epoch, State: &state.Batch{}}
			must(c.Control(cp))
			return cp.State
		}
		must(c.Control(&Control{Kind: NewSplit, Split: "s"}))
		must(c.Process(&Batch{Split: "s", Rows: []sql.Row{row("u", 1, false), row("u", 2, false)}}))
		must(store.Write(checkpoint()))
		must(store.Write(checkpoint()))
		others(0, 40) // u leaves memory (it is stored and unchanged since a committed save)
		if _, in := op.splits["s"].parts["u"]; in && op.cacheMax > 0 {
			t.Fatal("the partition did not leave memory")
		}
		// u is read back, and loses its rows; the checkpoint deleting them is not committed
		// while other partitions come and go, and u gets a row.
		must(c.Process(&Batch{Split: "s", Rows: []sql.Row{row("u", 1, true), row("u", 2, true)}}))
		pending := checkpoint()
		others(40, 80)
		must(store.Write(checkpoint())) // (ignored below: u's rows are not in it)
		must(c.Process(&Batch{Split: "s", Rows: []sql.Row{row("u", 3, false)}}))
		must(store.Write(pending))
		return out.rows
	}
	want := run(newOverOp(overCacheNode(true), "j", "over", state.NewMemory()), state.NewMemory())
	reads := &readCountStore{Store: store}
	got := run(newCachedOver(t, true, reads, 4), reads)
	if reads.scans.Load() == 0 {
		t.Fatal("the partition was not read back")
	}
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}
}

// Partitions changed since the last checkpoint, which may not leave memory, hold the job's
// input (pressure.go) when they fill a split's share of the cache pressFactor times over,
// until a checkpoint saves them.
func TestOverCachePressesUntilCheckpoint(t *testing.T) {
	for _, users := range []int{20, 400} {
		t.Run(fmt.Sprintf("%d users", users), func(t *testing.T) {
			pc := &pressCounter{}
			op := newOverOp(overCacheNode(false), "j", "over", state.NewMemory())
			op.cacheMax, op.full, op.press = 8, func() {}, pc.press
			ch := newOpChain(&rowLog{}, op)
			if err := ch.Control(&Control{Kind: NewSplit, Split: "s"}); err != nil {
				t.Fatal(err)
			}
			rows := topNCacheRows(3, 2000, users, false)
			for i := 0; i < len(rows); i += 5 {
				if err := ch.Process(&Batch{Split: "s", Rows: append([]sql.Row(nil), rows[i:i+5]...)}); err != nil {
					t.Fatal(err)
				}
				if pc.on < 0 || pc.on > 1 {
					t.Fatalf("pressure %d", pc.on)
				}
			}
			// 20 partitions stay under four times a cache of 8; 400 do not.
			if got, want := pc.times > 0, users > 4*8; got != want {
				t.Fatalf("pressed %d times", pc.times)
			}
			if err := ch.Control(&Control{Kind: Checkpoint, Epoch: 1, State: &state.Batch{}}); err != nil {
				t.Fatal(err)
			}
			if pc.on != 0 {
				t.Fatal("still pressing after a checkpoint")
			}
		})
	}
}

// The partition cache is on for a partitioned window aggregate over a stream with a store
// outside the process; its default keeps about as many rows as a Top-N's.
func TestOverCacheSize(t *testing.T) {
	rocks, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rocks.Close()
	global := overCacheNode(false)
	global.Partition = nil
	bounded := overCacheNode(false)
	bounded.Bounded = true
	wide := overCacheNode(false)
	wide.Preceding = 1000
	for _, c := range []struct {
		name    string
		node    *planner.OverNode
		store   state.Store
		setting int
		want    int
	}{
		{"rocksdb, default, 2 preceding", overCacheNode(false), rocks, 0, DefaultAggCacheGroups / 3},
		{"rocksdb, default, 1000 preceding", wide, rocks, 0, DefaultAggCacheGroups / 64},
		{"rocksdb, set", overCacheNode(false), rocks, 100, 100},
		{"rocksdb, off", overCacheNode(false), rocks, -1, 0},
		{"memory, default", overCacheNode(false), state.NewMemory(), 0, 0},
		{"no partition", global, rocks, 0, 0},
		{"bounded", bounded, rocks, 0, 0},
		{"no store", overCacheNode(false), nil, 0, 0},
	} {
		if got := overCacheSize(c.node, c.store, c.setting); got != c.want {
			t.Errorf("%s: cache of %d, want %d", c.name, got, c.want)
		}
	}
}
