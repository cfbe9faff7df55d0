package exec

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// rowLog is an Emitter that renders every row it is given, in order.
type rowLog struct{ rows []string }

func (l *rowLog) Emit(b *Batch) error {
	for _, r := range b.Rows {
		var sb strings.Builder
		for i, v := range r {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(v.String())
		}
		l.rows = append(l.rows, sb.String())
	}
	return nil
}

// cacheNode is a GROUP BY without a window over (user VARCHAR, n BIGINT) rows with plain
// aggregates and COUNT(DISTINCT) sets.
func cacheNode() *planner.AggregateNode {
	aggs := []planner.AggSpec{
		builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
		builtinAgg("SUM", col(1), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("MIN", col(1), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("MAX", col(1), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("COUNT(DISTINCT)", col(1), sql.TypeBigInt, sql.TypeBigInt),
	}
	return &planner.AggregateNode{Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: aggs, Emit: planner.EmitChanges, Changes: planner.Upsert}
}

func cacheRows(seed int64, n, users int) []sql.Row {
	r := rand.New(rand.NewSource(seed))
	rows := make([]sql.Row, n)
	for i := range rows {
		// A few hot users and a long tail, so that groups leave and come back.
		u := r.Intn(users)
		if r.Intn(3) == 0 {
			u = r.Intn(3)
		}
		rows[i] = sql.Row{sql.Varchar(fmt.Sprint("u", u)), sql.BigInt(int64(r.Intn(40)))}
	}
	return rows
}

// cachedRun drives one aggregation over rows in batches of 5 with a checkpoint every
// 4 batches. A checkpoint's batch is written to the store only just before the next
// checkpoint (the latest a stage's commit can end, stage.checkpoint), and crashAt > 0 stops
// the run (nothing more written) after that many checkpoints and one more batch. It
// returns the number of rows covered by the last committed checkpoint, and the number of
// rows out had when that checkpoint was taken.
func cachedRun(t *testing.T, a *aggOp, store state.Store, rows []sql.Row, from int, out *rowLog, crashAt int) (committed, committedOut int) {
	t.Helper()
	op := newOpChain(out, a)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(op.Control(&Control{Kind: NewSplit, Split: "s"}))
	committed, committedOut = from, len(out.rows)
	var pending *state.Batch
	pendingAt, pendingOut := 0, 0
	cps := 0
	for i, b := from, 0; i < len(rows); i, b = i+5, b+1 {
		end := min(i+5, len(rows))
		must(op.Process(&Batch{Split: "s", Rows: append([]sql.Row(nil), rows[i:end]...)}))
		if crashAt > 0 && cps == crashAt {
			return committed, committedOut // the pending checkpoint never commits
		}
		if b%4 == 3 {
			if pending != nil {
				must(store.Write(pending))
				committed, committedOut = pendingAt, pendingOut
			}
			c := &Control{Kind: Checkpoint, Epoch: int64(cps + 1), State: &state.Batch{}}
			must(op.Control(c))
			pending, pendingAt, pendingOut = c.State, end, len(out.rows)
			cps++
		}
		if a.cacheMax > 0 {
			if w := a.splits["s"].wins[[2]int64{0, 0}]; w != nil && len(w.groups) > 50 {
				t.Fatalf("%d groups in memory with a cache of %d", len(w.groups), a.cacheMax)
			}
		}
	}
	if pending != nil {
		must(store.Write(pending))
		committed, committedOut = pendingAt, pendingOut
	}
	return committed, committedOut
}

// With a cache of a few groups, an aggregation without a window over RocksDB state keeps
// few groups in memory, reads the others back, and emits exactly what it emits with every
// group in memory; a restart from the store (which loads only the cache's worth) goes on
// as the uninterrupted run.
func TestAggCacheMatchesMemory(t *testing.T) {
	for _, distinct := range []bool{false, true} {
		t.Run(fmt.Sprint("distinct ", distinct), func(t *testing.T) {
			node := func() *planner.AggregateNode {
				n := cacheNode()
				if !distinct {
					n.Aggs = n.Aggs[:4] // no COUNT(DISTINCT): groups are read back with Get
				}
				return n
			}
			rows := cacheRows(1, 3000, 60)
			var cnt counters
			ref := &rowLog{}
			cachedRun(t, newAggOp(node(), "j", "agg", state.NewMemory(), nil, &cnt), state.NewMemory(), rows, 0, ref, 0)

			store, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			reads := &readCountStore{Store: store}
			newCached := func() *aggOp {
				a := newAggOp(node(), "j", "agg", reads, nil, &cnt)
				a.cacheMax = aggCacheSize(a.node, reads, 8)
				if a.cacheMax != 8 {
					t.Fatalf("cache of %d groups, want 8", a.cacheMax)
				}
				return a
			}
			got := &rowLog{}
			a := newCached()
			cachedRun(t, a, reads, rows[:1500], 0, got, 0)
			if !a.splits["s"].spilled {
				t.Fatal("no group left memory")
			}
			if reads.gets.Load()+reads.scans.Load() < 10 {
				t.Fatalf("%d gets and %d scans: groups were not read back", reads.gets.Load(), reads.scans.Load())
			}
			// Restart: the state of the first 1500 rows, then the rest.
			a = newCached()
			cachedRun(t, a, reads, rows, 1500, got, 0)
			if d := diff(got.rows, ref.rows); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// A crash after groups left memory and changed again restores the last committed
// checkpoint: replaying the rows after it gives the uninterrupted run's output, so no
// state of the crashed run's uncommitted checkpoint or later rows leaked into the store.
func TestAggCacheCrashRestoresCommitted(t *testing.T) {
	rows := cacheRows(2, 2000, 50)
	var cnt counters
	ref := &rowLog{}
	cachedRun(t, newAggOp(cacheNode(), "j", "agg", state.NewMemory(), nil, &cnt), state.NewMemory(), rows, 0, ref, 0)

	for _, crashAt := range []int{3, 10, 25} {
		t.Run(fmt.Sprint("after checkpoint ", crashAt), func(t *testing.T) {
			store, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			newCached := func() *aggOp {
				a := newAggOp(cacheNode(), "j", "agg", store, nil, &cnt)
				a.cacheMax = aggCacheSize(a.node, store, 6)
				return a
			}
			crashed := &rowLog{}
			committed, committedOut := cachedRun(t, newCached(), store, rows, 0, crashed, crashAt)
			if committed == 0 || len(crashed.rows) <= committedOut {
				t.Fatalf("crash at row out %d with %d rows out committed: nothing to lose", len(crashed.rows), committedOut)
			}
			got := &rowLog{rows: crashed.rows[:committedOut]}
			cachedRun(t, newCached(), store, rows, committed, got, 0)
			if d := diff(got.rows, ref.rows); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// The cache is on only where it is correct and useful.
func TestAggCacheSize(t *testing.T) {
	rocks, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rocks.Close()
	mem := state.NewMemory()
	n := cacheNode()
	for _, c := range []struct {
		name    string
		node    func(*planner.AggregateNode)
		store   state.Store
		setting int
		want    int
	}{
		{"rocksdb, default", nil, rocks, 0, DefaultAggCacheGroups},
		{"rocksdb, set", nil, rocks, 100, 100},
		{"rocksdb, off", nil, rocks, -1, 0},
		{"memory, default", nil, mem, 0, 0},
		{"memory, set", nil, mem, 100, 100},
		{"window", func(n *planner.AggregateNode) { n.Window = planner.WindowSpec{Kind: planner.WindowTumble, Size: 10} }, rocks, 0, 0},
		{"ttl", func(n *planner.AggregateNode) { n.TTL = 1000 }, rocks, 0, 0},
		{"emit on close", func(n *planner.AggregateNode) { n.Emit = planner.EmitOnClose }, rocks, 0, 0},
		{"double key", func(n *planner.AggregateNode) { n.KeyTypes = []sql.Type{sql.TypeDouble} }, rocks, 0, 0},
		{"global", func(n *planner.AggregateNode) { n.Keys, n.KeyTypes = nil, nil }, rocks, 0, 0},
	} {
		m := *n
		if c.node != nil {
			c.node(&m)
		}
		if got := aggCacheSize(&m, c.store, c.setting); got != c.want {
			t.Errorf("%s: cache of %d, want %d", c.name, got, c.want)
		}
	}
}

// readCountStore counts the reads of a store.
type readCountStore struct {
	state.Store
	gets, scans atomic.Int64
}

func (s *readCountStore) Get(key []byte) ([]byte, bool, error) {
	s.gets.Add(1)
	return s.Store.Get(key)
}

func (s *readCountStore) Scan(prefix []byte, fn func(key, value []byte) error) error {
	s.scans.Add(1)
	return s.Store.Scan(prefix, fn)
}

// In a running job (checkpoints every few milliseconds, committed while the rows after
// them go on), an aggregation without a window over RocksDB state with a cache of a few
// groups emits what it emits with every group in memory.
func TestAggCacheJob(t *testing.T) {
	evs := genEvents(5, 20000, 300, 0)
	run := func(store state.Store, cache int) []string {
		src := newMemSource(true, 50, "0")
		feedAll(src, "0", evs)
		var sk sinks
		env := testEnv(src, &sk)
		env.Store, env.AggCacheGroups, env.CheckpointInterval = store, cache, 2*time.Millisecond
		runJob(t, "cache", aggPlan(sourceSpec(nil, 0), planner.WindowSpec{Kind: planner.WindowNone}, allAggs(), planner.EmitChanges), env)
		return sk.get("out").bodies()
	}
	want := run(state.NewMemory(), 0)
	rocks, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rocks.Close()
	store := &readCountStore{Store: rocks}
	got := run(store, 16)
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}
	if store.gets.Load() == 0 && store.scans.Load() <= 1 {
		t.Fatal("no group was read back from the store")
	}
	t.Logf("%d gets, %d scans", store.gets.Load(), store.scans.Load())
}

// A split given up (RemoveSplit, as when splits move between instances) writes what it
// holds in memory; the store then holds the split's whole state, groups gone from memory
// included, and an instance that takes the split over from an export of it goes on as
// the uninterrupted run.
func TestAggCacheSplitMoves(t *testing.T) {
	rows := cacheRows(3, 2000, 80)
	var cnt counters
	ref := &rowLog{}
	cachedRun(t, newAggOp(cacheNode(), "j", "agg", state.NewMemory(), nil, &cnt), state.NewMemory(), rows, 0, ref, 0)

	open := func() state.Store {
		s, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	from, to := open(), open()
	newCached := func(store state.Store) *aggOp {
		a := newAggOp(cacheNode(), "j", "agg", store, nil, &cnt)
		a.cacheMax = aggCacheSize(a.node, store, 8)
		return a
	}
	got := &rowLog{}
	a := newCached(from)
	cachedRun(t, a, from, rows[:1005], 0, got, 0) // the last batch after the last checkpoint
	rm := &Control{Kind: RemoveSplit, Split: "s", State: &state.Batch{}}
	if err := a.Control(rm, got); err != nil {
		t.Fatal(err)
	}
	if err := from.Write(rm.State); err != nil {
		t.Fatal(err)
	}
	blob, err := from.Export(state.SplitPrefix(nil, "j", "agg", "s"))
	if err != nil {
		t.Fatal(err)
	}
	if err := to.Import(blob); err != nil {
		t.Fatal(err)
	}
	cachedRun(t, newCached(to), to, rows, 1005, got, 0)
	if d := diff(got.rows, ref.rows); d != "" {
		t.Fatal(d)
	}
}

// A group read back whose stored state does not decode fails the row's batch with a
// StateError naming the operator and split, rather than going on with an empty group.
func TestAggCacheBadStoredGroup(t *testing.T) {
	for _, distinct := range []bool{false, true} {
		t.Run(fmt.Sprint("distinct ", distinct), func(t *testing.T) {
			store, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			node := cacheNode()
			if !distinct {
				node.Aggs = node.Aggs[:4] // no COUNT(DISTINCT): groups are read with Get
			}
			var cnt counters
			a := newAggOp(node, "j", "agg", store, nil, &cnt)
			a.cacheMax = aggCacheSize(node, store, 4)
			op := newOpChain(&rowLog{}, a)
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			user := func(from, to int) *Batch {
				b := &Batch{Split: "s"}
				for u := from; u < to; u++ {
					b.Rows = append(b.Rows, sql.Row{sql.Varchar(fmt.Sprint("u", u)), sql.BigInt(int64(u))})
				}
				return b
			}
			must(op.Control(&Control{Kind: NewSplit, Split: "s"}))
			must(op.Process(user(0, 8)))
			for e := int64(1); e <= 2; e++ { // the second checkpoint commits the first
				c := &Control{Kind: Checkpoint, Epoch: e, State: &state.Batch{}}
				must(op.Control(c))
				must(store.Write(c.State))
			}
			must(op.Process(user(8, 16))) // u0... leave memory
			if !a.splits["s"].spilled {
				t.Fatal("no group left memory")
			}
			key := state.Key(nil, "j", "agg", "s", sql.AppendRow(nil, sql.Row{sql.Varchar("u0")}), 0, 0)
			if _, ok, _ := store.Get(key); !ok {
				t.Fatal("u0 is not in the store")
			}
			must(store.Put(key, []byte{0xff, 0x01}))
			err = op.Process(user(0, 1))
			var se *StateError
			if !errors.As(err, &se) || se.Op != "agg" || se.Split != "s" {
				t.Fatalf("reading a bad group back: %v", err)
			}
		})
	}
}

// Groups changed since the last checkpoint may not leave memory: when they fill a split's
// share of the cache, the aggregation asks for a checkpoint (full), which lets them.
func TestAggCacheFullAsksForCheckpoint(t *testing.T) {
	for _, c := range []struct {
		users int
		want  bool
	}{{3, false}, {200, true}} {
		a := newAggOp(cacheNode(), "j", "agg", state.NewMemory(), nil, &counters{})
		a.cacheMax = aggCacheSize(a.node, a.store, 16)
		asked := 0
		a.full = func() { asked++ }
		op := newOpChain(&rowLog{}, a)
		if err := op.Control(&Control{Kind: NewSplit, Split: "s"}); err != nil {
			t.Fatal(err)
		}
		rows := cacheRows(1, 2000, c.users)
		for i := 0; i < len(rows); i += 5 {
			if err := op.Process(&Batch{Split: "s", Rows: append([]sql.Row(nil), rows[i:i+5]...)}); err != nil {
				t.Fatal(err)
			}
		}
		if got := asked > 0; got != c.want {
			t.Errorf("%d users, no checkpoint: asked for one %d times", c.users, asked)
		}
	}
}

// When the groups that may not leave memory reach pressFactor times a split's share of the
// cache, the aggregation presses on the job's input once, and a checkpoint's save ends the
// pressure; groups that fit never press.
func TestAggCachePressesUntilCheckpoint(t *testing.T) {
	for _, c := range []struct {
		users int
		want  bool
	}{{40, false}, {2000, true}} {
		a := newAggOp(cacheNode(), "j", "agg", state.NewMemory(), nil, &counters{})
		a.cacheMax = aggCacheSize(a.node, a.store, 16)
		pc := &pressCounter{}
		a.full, a.press = func() {}, pc.press
		op := newOpChain(&rowLog{}, a)
		if err := op.Control(&Control{Kind: NewSplit, Split: "s"}); err != nil {
			t.Fatal(err)
		}
		rows := cacheRows(1, 4000, c.users)
		for i := 0; i < len(rows); i += 5 {
			if err := op.Process(&Batch{Split: "s", Rows: append([]sql.Row(nil), rows[i:i+5]...)}); err != nil {
				t.Fatal(err)
			}
			if pc.on < 0 || pc.on > 1 {
				t.Fatalf("pressure %d", pc.on)
			}
		}
		if got := pc.times > 0; got != c.want {
			t.Fatalf("%d users: pressed %d times", c.users, pc.times)
		}
		if err := op.Control(&Control{Kind: Checkpoint, Epoch: 1, State: &state.Batch{}}); err != nil {
			t.Fatal(err)
		}
		if pc.on != 0 {
			t.Fatalf("%d users: still pressing after a checkpoint", c.users)
		}
	}
}
