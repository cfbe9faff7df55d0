package exec

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// topNCacheNode is a Top-3 per user over the whole stream of (user VARCHAR, n BIGINT, rn)
// rows, largest n first, numbered into rn; retracting: the input rows end with a change
// column.
func topNCacheNode(retracting bool) *planner.TopNNode {
	return &planner.TopNNode{Partition: []planner.Evaluator{col(0)}, Order: []planner.SortSpec{{Eval: col(1), Desc: true}},
		N: 3, RowNumber: 2, Mode: planner.TopNChanges, Changes: planner.Retract, Retracting: retracting,
		Schema: sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "n", Type: sql.TypeBigInt},
			{Name: "rn", Type: sql.TypeBigInt}, {Name: "__op", Type: sql.TypeVarchar}}}
}

// topNCacheRows are n rows of users (a few hot, a long tail, so that partitions leave
// memory and come back); retracting, about a third of them delete a row given before, and
// users often lose every row.
func topNCacheRows(seed int64, n, users int, retracting bool) []sql.Row {
	r := rand.New(rand.NewSource(seed))
	var held []sql.Row
	rows := make([]sql.Row, 0, n)
	for len(rows) < n {
		if retracting && len(held) > 0 && r.Intn(3) == 0 {
			i := r.Intn(len(held))
			d := held[i]
			held[i] = held[len(held)-1]
			held = held[:len(held)-1]
			rows = append(rows, sql.Row{d[0], d[1], sql.Null, sql.OpDelete})
			continue
		}
		u := r.Intn(users)
		if r.Intn(3) == 0 {
			u = r.Intn(3)
		}
		row := sql.Row{sql.Varchar(fmt.Sprint("u", u)), sql.BigInt(int64(r.Intn(30))), sql.Null}
		if retracting {
			held = append(held, row)
			row = append(row, sql.Null)
		}
		rows = append(rows, row)
	}
	return rows
}

// runCached drives op over rows from row from in batches of 5 with a checkpoint every 4
// batches, a checkpoint's batch written to the store only just before the next checkpoint
// (the latest a stage's commit can end); check runs after every batch, and wm, when set,
// gives the watermark after the rows before row i.
func runCached(t *testing.T, op Operator, store state.Store, rows []sql.Row, from int, out *rowLog, check func(), wm ...func(i int) int64) {
	t.Helper()
	c := newOpChain(out, op)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Control(&Control{Kind: NewSplit, Split: "s"}))
	var pending *state.Batch
	cps := 0
	for i, b := from, 0; i < len(rows); i, b = i+5, b+1 {
		must(c.Process(&Batch{Split: "s", Rows: append([]sql.Row(nil), rows[i:min(i+5, len(rows))]...)}))
		if len(wm) > 0 {
			must(c.Watermark("s", wm[0](min(i+5, len(rows)))))
		}
		if b%4 == 3 {
			if pending != nil {
				must(store.Write(pending))
			}
			cp := &Control{Kind: Checkpoint, Epoch: int64(cps + 1), State: &state.Batch{}}
			must(c.Control(cp))
			pending = cp.State
			cps++
		}
		if check != nil {
			check()
		}
	}
	if pending != nil {
		must(store.Write(pending))
	}
	cp := &Control{Kind: Checkpoint, Epoch: int64(cps + 1), State: &state.Batch{}}
	must(c.Control(cp))
	must(store.Write(cp.State))
}

// With a cache of a few partitions, a Top-N over the whole stream with RocksDB state keeps
// few partitions in memory, reads the others back, and emits exactly what it emits with
// every partition in memory, over an append-only and over a retracting input (where
// partitions empty and come back while their delete is not yet committed); a restart from
// the store goes on as the uninterrupted run.
func TestTopNCacheMatchesMemory(t *testing.T) {
	for _, retracting := range []bool{false, true} {
		t.Run(fmt.Sprint("retracting ", retracting), func(t *testing.T) {
			rows := topNCacheRows(3, 4000, 80, retracting)
			ref := &rowLog{}
			runCached(t, newTopNChangesOp(topNCacheNode(retracting), "j", "topn", state.NewMemory()), state.NewMemory(), rows, 0, ref, nil)

			store, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			reads := &readCountStore{Store: store}
			newCached := func() *topNChangesOp {
				op := newTopNChangesOp(topNCacheNode(retracting), "j", "topn", reads)
				if op.cacheMax = topNCacheSize(op.node, reads, 8); op.cacheMax != 8 {
					t.Fatalf("cache of %d partitions, want 8", op.cacheMax)
				}
				return op
			}
			got := &rowLog{}
			op := newCached()
			most := 0
			check := func() { most = max(most, len(op.splits["s"].parts)) }
			runCached(t, op, reads, rows[:2000], 0, got, check)
			if !op.splits["s"].spilled || most > 40 {
				t.Fatalf("spilled %v, at most %d partitions in memory with a cache of 8", op.splits["s"].spilled, most)
			}
			if reads.gets.Load() < 10 {
				t.Fatalf("%d gets: partitions were not read back", reads.gets.Load())
			}
			op = newCached()
			runCached(t, op, reads, rows, 2000, got, nil)
			if d := diff(got.rows, ref.rows); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// The partition cache bounds the bytes of its partitions too: partitions of wide rows (64
// KiB each) leave memory once their size is known, far below the cache's partitions, and
// the output is the one with every partition in memory.
func TestTopNCacheBoundsBytes(t *testing.T) {
	wide := strings.Repeat("x", 64<<10)
	var rows []sql.Row
	for i := 0; i < 1200; i++ { // 600 users, 2 rows each
		rows = append(rows, sql.Row{sql.Varchar(fmt.Sprint("u", i%600, wide)), sql.BigInt(int64(i)), sql.Null})
	}
	ref := &rowLog{}
	runCached(t, newTopNChangesOp(topNCacheNode(false), "j", "topn", state.NewMemory()), state.NewMemory(), rows, 0, ref, nil)
	store := state.NewMemory()
	op := newTopNChangesOp(topNCacheNode(false), "j", "topn", store)
	if op.cacheMax = topNCacheSize(op.node, store, 1024); op.cacheMax != 1024 {
		t.Fatalf("cache of %d partitions, want 1024", op.cacheMax)
	}
	got := &rowLog{}
	most := 0
	check := func() {
		if op.partEst > 0 {
			most = max(most, len(op.splits["s"].parts))
		}
	}
	runCached(t, op, store, rows, 0, got, check)
	if d := diff(got.rows, ref.rows); d != "" {
		t.Fatal(d)
	}
	// The bytes' worth of partitions, plus those changed in the last two checkpoint
	// intervals (they may not leave yet) and a quarter of the share before an eviction.
	if limit := topNCacheBytes/(64<<10) + 2*20 + topNCacheBytes/(64<<10)/4; most == 0 || most > limit {
		t.Fatalf("at most %d partitions of 64 KiB in memory, want at most %d (%d MiB)", most, limit, topNCacheBytes>>20)
	}
}

// The partition cache is on for a partitioned Top-N over a store outside the process, and
// its default keeps about as many rows as an aggregation's cache keeps groups.
func TestTopNCacheSize(t *testing.T) {
	rocks, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rocks.Close()
	global := topNCacheNode(false)
	global.Partition = nil
	top100 := topNCacheNode(false)
	top100.N = 100
	for _, c := range []struct {
		name    string
		node    *planner.TopNNode
		store   state.Store
		setting int
		want    int
	}{
		{"rocksdb, default, top 3", topNCacheNode(false), rocks, 0, DefaultAggCacheGroups / 3},
		{"rocksdb, default, top 100", top100, rocks, 0, DefaultAggCacheGroups / 64},
		{"rocksdb, set", topNCacheNode(false), rocks, 100, 100},
		{"rocksdb, off", topNCacheNode(false), rocks, -1, 0},
		{"memory, default", topNCacheNode(false), state.NewMemory(), 0, 0},
		{"global", global, rocks, 0, 0},
		{"no store", topNCacheNode(false), nil, 0, 0},
	} {
		if got := topNCacheSize(c.node, c.store, c.setting); got != c.want {
			t.Errorf("%s: cache of %d, want %d", c.name, got, c.want)
		}
	}
}

// dedupCacheNode keeps the last row of each user of (user VARCHAR, ts BIGINT, v BIGINT)
// rows by ts, emitting changes of the given mode, with a state TTL of ttl.
func dedupCacheNode(changes planner.ChangeMode, ttl int64) *planner.TopNNode {
	return &planner.TopNNode{Partition: []planner.Evaluator{col(0)}, N: 1, RowNumber: -1, Mode: planner.DedupLast,
		Time: 1, TTL: ttl, Changes: changes,
		Schema: sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "ts", Type: sql.TypeBigInt}, {Name: "v", Type: sql.TypeBigInt}}}
}

// dedupCacheRows: row i is at time about i (disorder up to 8 back), of a few hot users and
// a long tail, so that users come back after their partition left memory, some after the
// TTL.
func dedupCacheRows(seed int64, n, users int) []sql.Row {
	r := rand.New(rand.NewSource(seed))
	rows := make([]sql.Row, n)
	for i := range rows {
		u := r.Intn(users)
		if r.Intn(3) == 0 {
			u = r.Intn(3)
		}
		rows[i] = sql.Row{sql.Varchar(fmt.Sprint("u", u)), sql.BigInt(int64(i - r.Intn(8))), sql.BigInt(int64(r.Intn(100)))}
	}
	return rows
}

// With a cache of a few partitions, a deduplication keeping the last row with RocksDB
// state emits exactly what it emits with every partition in memory — upserts and
// retractions, with and without a state TTL (partitions forgotten in memory and in the
// store at the same moments) — and goes on after a restart from the store.
func TestDedupCacheMatchesMemory(t *testing.T) {
	for _, c := range []struct {
		changes planner.ChangeMode
		ttl     int64
	}{{planner.Upsert, 0}, {planner.Retract, 0}, {planner.Upsert, 150}, {planner.Retract, 150}} {
		t.Run(fmt.Sprintf("%v ttl %d", c.changes, c.ttl), func(t *testing.T) {
			rows := dedupCacheRows(5, 4000, 120)
			wm := func(i int) int64 { return int64(i) - 10 }
			ref := &rowLog{}
			runCached(t, newTopNOp(dedupCacheNode(c.changes, c.ttl), "j", "dd", state.NewMemory(), nil, &counters{}), state.NewMemory(), rows, 0, ref, nil, wm)

			store, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			reads := &readCountStore{Store: store}
			newCached := func() *topNOp {
				op := newTopNOp(dedupCacheNode(c.changes, c.ttl), "j", "dd", reads, nil, &counters{})
				if op.cacheMax = dedupCacheSize(op.node, reads, 8); op.cacheMax != 8 {
					t.Fatalf("cache of %d partitions, want 8", op.cacheMax)
				}
				return op
			}
			got := &rowLog{}
			op := newCached()
			most := 0
			check := func() { most = max(most, len(op.splits["s"].parts)) }
			runCached(t, op, reads, rows[:2000], 0, got, check, wm)
			if !op.splits["s"].spilled || most > 40 {
				t.Fatalf("spilled %v, at most %d partitions in memory with a cache of 8", op.splits["s"].spilled, most)
			}
			if reads.gets.Load() < 10 {
				t.Fatalf("%d gets: partitions were not read back", reads.gets.Load())
			}
			op = newCached()
			runCached(t, op, reads, rows, 2000, got, nil, wm)
			if d := diff(got.rows, ref.rows); d != "" {
				t.Fatal(d)
			}
			if c.ttl > 0 {
				// The TTL emptied the store of the users not seen for long: of 120, only
				// those of the last stretch of rows are kept.
				kept := 0
				if err := store.Scan(state.OperatorPrefix(nil, "j", "dd"), func(_, _ []byte) error { kept++; return nil }); err != nil {
					t.Fatal(err)
				}
				if kept == 0 || kept >= 110 {
					t.Fatalf("%d partitions stored after the TTL swept", kept)
				}
			}
		})
	}
}

// The deduplication's cache is for the modes that keep a partition per key for ever.
func TestDedupCacheSize(t *testing.T) {
	rocks, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rocks.Close()
	first := dedupCacheNode(planner.Upsert, 0)
	first.Mode = planner.DedupFirst
	versions := dedupCacheNode(planner.Retract, 0)
	versions.Mode = planner.TableVersions
	for _, c := range []struct {
		name string
		node *planner.TopNNode
		want int
	}{
		{"last row", dedupCacheNode(planner.Upsert, 0), DefaultAggCacheGroups},
		{"table versions", versions, DefaultAggCacheGroups},
		{"first row (its heap holds every partition)", first, 0},
	} {
		if got := dedupCacheSize(c.node, rocks, 0); got != c.want {
			t.Errorf("%s: cache of %d, want %d", c.name, got, c.want)
		}
	}
}

// Partitions changed since the last checkpoint, which may not leave memory, hold the job's
// input (pressure.go) when they fill a split's share of the cache pressFactor times over,
// until a checkpoint saves them: for a Top-N and a deduplication alike.
func TestTopNCachePressesUntilCheckpoint(t *testing.T) {
	for _, c := range []struct {
		name string
		op   func(press func(on bool)) Operator
		rows func(users int) []sql.Row
	}{
		{"top-n", func(press func(on bool)) Operator {
			op := newTopNChangesOp(topNCacheNode(false), "j", "topn", state.NewMemory())
			op.cacheMax, op.full, op.press = 8, func() {}, press
			return op
		}, func(users int) []sql.Row { return topNCacheRows(3, 2000, users, false) }},
		{"dedup", func(press func(on bool)) Operator {
			op := newTopNOp(dedupCacheNode(planner.Upsert, 0), "j", "dd", state.NewMemory(), nil, &counters{})
			op.cacheMax, op.full, op.press = 8, func() {}, press
			return op
		}, func(users int) []sql.Row { return dedupCacheRows(5, 2000, users) }},
	} {
		for _, users := range []int{20, 400} {
			t.Run(fmt.Sprintf("%s, %d users", c.name, users), func(t *testing.T) {
				pc := &pressCounter{}
				op := c.op(pc.press)
				ch := newOpChain(&rowLog{}, op)
				if err := ch.Control(&Control{Kind: NewSplit, Split: "s"}); err != nil {
					t.Fatal(err)
				}
				rows := c.rows(users)
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
}
