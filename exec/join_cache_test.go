package exec

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// With a cache of two keys, every kind of exact join over append-only and retract inputs
// and over a table, checkpointed often and restarted from the store, ends as the join of
// the rows its inputs hold, as it does with every key in memory: keys leave memory at
// checkpoints and come back, both sides together, their outer rows' match counts counted
// again.
func TestJoinCacheRandom(t *testing.T) {
	keys := []string{"", "a", "b", "c", "d", "e", "f", "g", "h"}
	var reads int64
	for _, kind := range []sql.JoinKind{sql.JoinInner, sql.JoinLeft, sql.JoinRight, sql.JoinFull} {
		for _, changes := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			t.Run(fmt.Sprintf("%s/changes=%v", kind, changes), func(t *testing.T) {
				for seed := int64(0); seed < 8; seed++ {
					reads += exactRandomRun(t, seed, kind, changes, seed%2 == 1, keys, 2)
				}
			})
		}
		for side := range 2 {
			t.Run(fmt.Sprintf("%s/table=%d", kind, side), func(t *testing.T) {
				for seed := int64(0); seed < 5; seed++ {
					reads += exactTableRun(t, seed, side, kind, 2)
				}
			})
		}
	}
	if reads == 0 {
		t.Fatal("no key was read back from the store: the test does not cover the cache")
	}
	t.Logf("%d keys read back", reads)
}

// The cache is on for the exact regular join and for inner joins whose rows expire, and
// with the in-memory store only when set.
func TestJoinCacheSize(t *testing.T) {
	rocks, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rocks.Close()
	mem := state.NewMemory()
	regular := func() *planner.JoinNode { return exactJoinNode(sql.JoinLeft, [2]bool{}, false, false) }
	for _, c := range []struct {
		name    string
		node    func(*planner.JoinNode)
		store   state.Store
		setting int
		want    int
	}{
		{"rocksdb, default", nil, rocks, 0, DefaultJoinCacheKeys},
		{"rocksdb, set", nil, rocks, 100, 100},
		{"rocksdb, off", nil, rocks, -1, 0},
		{"memory, default", nil, mem, 0, 0},
		{"memory, set", nil, mem, 100, 100},
		{"no store", nil, nil, 100, 0},
		{"ttl, left", func(n *planner.JoinNode) { n.TTL = 1000 }, rocks, 0, 0},
		{"ttl, inner", func(n *planner.JoinNode) { n.TTL, n.Kind = 1000, sql.JoinInner }, rocks, 0, DefaultJoinCacheKeys},
		{"interval, left", func(n *planner.JoinNode) { n.Mode = planner.JoinInterval }, rocks, 0, 0},
		{"interval, inner", func(n *planner.JoinNode) { n.Mode, n.Kind = planner.JoinInterval, sql.JoinInner }, rocks, 0, DefaultJoinCacheKeys},
		{"temporal", func(n *planner.JoinNode) { n.Mode = planner.JoinTemporal }, rocks, 0, 0},
	} {
		n := regular()
		if c.node != nil {
			c.node(n)
		}
		if got := joinCacheSize(n, c.store, c.setting); got != c.want {
			t.Errorf("%s: cache of %d, want %d", c.name, got, c.want)
		}
	}
}

// In a running job (checkpoints every few milliseconds, committed while the rows after
// them go on), a LEFT join of two streams over RocksDB state with a cache of a few keys
// emits, folded, what it emits with every key in memory.
func TestJoinCacheJob(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	sources := func() (*memSource, *memSource) {
		orders, payments := newMemSource(true, 20, "0", "1"), newMemSource(true, 20, "0", "1")
		for i := 0; i < 3000; i++ {
			u := rng.Intn(200)
			orders.feed(fmt.Sprint(u%2), fmt.Sprintf("u%d,1,%d,%d", u, 1000+i, i))
			if i%3 == 0 {
				u = rng.Intn(200)
				payments.feed(fmt.Sprint(u%2), fmt.Sprintf("u%d,1,%d,%d", u, 1000+i, 10000+i))
			}
		}
		return orders, payments
	}
	show := func(r sql.Row) string { return fmt.Sprint(r) }
	plan := planSQL(t, `SELECT o.user_id, o.n, p.n FROM orders o LEFT JOIN payments p ON o.user_id = p.user_id`, planCatalog(), "jc")
	fold := func(rows []string) []string {
		n := map[string]int{}
		for _, r := range rows {
			if body, ok := strings.CutSuffix(r, " delete]"); ok {
				n[body]--
			} else {
				n[strings.TrimSuffix(r, " NULL]")]++
			}
		}
		var out []string
		for r, c := range n {
			if c != 0 {
				out = append(out, fmt.Sprintf("%s x%d", r, c))
			}
		}
		sort.Strings(out)
		return out
	}
	o, p := sources()
	want := fold(runOrdersPaymentsEnv(t, "jc", plan, o, p, show, nil))
	rocks, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rocks.Close()
	store := &readCountStore{Store: rocks}
	rng = rand.New(rand.NewSource(11))
	o, p = sources()
	got := fold(runOrdersPaymentsEnv(t, "jc", plan, o, p, show, func(env *Env) {
		env.Store, env.JoinCacheKeys, env.CheckpointInterval = store, 8, 2*time.Millisecond
	}))
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}
	if len(want) < 1000 {
		t.Fatalf("%d rows: the test joins too little", len(want))
	}
	if store.gets.Load() == 0 {
		t.Fatal("no key was read back from the store")
	}
	t.Logf("%d rows, %d gets", len(want), store.gets.Load())
}

// Keys changed since the last checkpoint may not leave memory: when they outgrow a split's
// share of the cache, the join asks for a checkpoint (full), once until its next save.
func TestJoinCacheFullAsksForCheckpoint(t *testing.T) {
	j := newJoinOp(exactJoinNode(sql.JoinInner, [2]bool{}, false, false), "job", "op", state.NewMemory(), nil, &counters{})
	j.setCache(8)
	asked := 0
	j.full = func() { asked++ }
	if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
		t.Fatal(err)
	}
	out := &joinedRows{}
	for i := 0; i < 8; i++ {
		process(t, j, 0, out, sideRow(fmt.Sprint("k", i), 1, false, false))
	}
	if asked != 0 {
		t.Fatalf("8 changed keys in a cache of 8: asked for %d checkpoints", asked)
	}
	for i := 8; i < 40; i++ {
		process(t, j, 0, out, sideRow(fmt.Sprint("k", i), 1, false, false))
	}
	if asked != 1 {
		t.Fatalf("40 changed keys in a cache of 8: asked for %d checkpoints, want 1", asked)
	}
	joinCheckpoint(t, j, j.store)
	process(t, j, 0, out, sideRow("k100", 1, false, false))
	process(t, j, 1, out, sideRow("k0", 1, false, false))
	for i := 41; i < 60; i++ {
		process(t, j, 0, out, sideRow(fmt.Sprint("k", i), 1, false, false))
	}
	if asked != 2 {
		t.Fatalf("after a checkpoint, 20 more changed keys: asked for %d checkpoints, want 2", asked)
	}
}

// Keys changed since the last checkpoint that outgrow a split's share of the cache
// pressFactor times hold the job's input (pressure.go) until a checkpoint saves them.
func TestJoinCachePressesUntilCheckpoint(t *testing.T) {
	j := newJoinOp(exactJoinNode(sql.JoinInner, [2]bool{}, false, false), "job", "op", state.NewMemory(), nil, &counters{})
	j.setCache(8)
	pc := &pressCounter{}
	j.full, j.press = func() {}, pc.press
	if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
		t.Fatal(err)
	}
	out := &joinedRows{}
	for i := 0; i < 4*8; i++ {
		process(t, j, 0, out, sideRow(fmt.Sprint("k", i), 1, false, false))
	}
	if pc.times != 0 {
		t.Fatalf("32 changed keys in a cache of 8: pressed %d times", pc.times)
	}
	for i := 32; i < 100; i++ {
		process(t, j, 0, out, sideRow(fmt.Sprint("k", i), 1, false, false))
		if pc.on != min(i-31, 1) {
			t.Fatalf("%d changed keys in a cache of 8: pressure %d", i+1, pc.on)
		}
	}
	joinCheckpoint(t, j, j.store)
	if pc.on != 0 || pc.times != 1 {
		t.Fatalf("after a checkpoint: pressure %d, pressed %d times", pc.on, pc.times)
	}
	for i := 100; i < 110; i++ {
		process(t, j, 0, out, sideRow(fmt.Sprint("k", i), 1, false, false))
	}
	if pc.on != 0 {
		t.Fatalf("10 changed keys after a checkpoint: pressure %d", pc.on)
	}
	j.press(true)
	j.on = true
	if err := j.Close(); err != nil || pc.on != 0 {
		t.Fatalf("close: %v, pressure %d", err, pc.on)
	}
}

// tierVersion is a version of a users table's row (user, tier, change column) for the
// exact join's table side (exactJoinNode with a table on the right).
func tierVersion(key, tier string, del bool) sql.Row {
	op := sql.Null
	if del {
		op = sql.Varchar("delete")
	}
	return sql.Row{sql.Varchar(key), sql.Varchar(tier), op}
}

// A key one side of which lost its last row (a table's delete) has that side's stored rows
// deleted by the checkpoint that follows, whose commit may still be running when the next
// row of the key arrives: the key stays in memory until the next checkpoint, rather than
// leaving and reading the deleted version back from the store.
func TestJoinCacheKeepsKeysWithPendingDeletes(t *testing.T) {
	store := state.NewMemory()
	j := newJoinOp(exactJoinNode(sql.JoinInner, [2]bool{true, false}, true, false), "job", "op", store, nil, &counters{})
	j.setCache(2)
	if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
		t.Fatal(err)
	}
	out := &joinedRows{}
	process(t, j, 1, out, tierVersion("k", "gold", false))
	process(t, j, 0, out, sideRow("k", 1, false, true))
	for i := 0; i < 6; i++ { // more keys than the cache holds
		process(t, j, 0, out, sideRow(fmt.Sprint("o", i), 1, false, true))
	}
	joinCheckpoint(t, j, store) // committed
	process(t, j, 1, out, tierVersion("k", "", true))
	for i := 0; i < 6; i++ { // the other keys change: k is the one that may leave
		process(t, j, 0, out, sideRow(fmt.Sprint("o", i), 2, false, true))
	}
	(&laggingCommits{store: store}).checkpoint(t, j) // its commit not done
	// Before the checkpoint's commit, a row of k arrives: k has no version.
	out.rows = nil
	process(t, j, 0, out, sideRow("k", 2, false, true))
	if len(out.rows) != 0 {
		t.Fatalf("a row of a deleted key joined %q: the deleted version came back from the store", out.rows)
	}
}

// A key whose every row was deleted since the last checkpoint leaves the operator's map
// at that checkpoint (sweep) while the deletes of its stored rows are in the checkpoint,
// whose commit may still be running. A key that was in the store (a restart put it in the
// cache's filter) must then not be read back before that commit: the store would give
// the deleted rows back. Here the users-like table side's only version is deleted after a
// restart, and an order of the key arrives before the checkpoint with the delete commits.
func TestJoinCacheKeepsSweptKeysWithPendingDeletes(t *testing.T) {
	node := exactJoinNode(sql.JoinInner, [2]bool{true, false}, true, false)
	for _, sweepEarly := range []bool{false, true} {
		store := state.NewMemory()
		start := func() *joinOp {
			j := newJoinOp(node, "job", "op", store, nil, &counters{})
			j.setCache(2)
			if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
				t.Fatal(err)
			}
			return j
		}
		out := &joinedRows{}
		j := start()
		process(t, j, 1, out, tierVersion("k", "gold", false))
		joinCheckpoint(t, j, store) // committed
		j = start()                 // a restart: k is in the store only
		process(t, j, 1, out, tierVersion("k", "gold", true))
		if sweepEarly {
			// As when many keys are emptied within one checkpoint interval.
			j.sweep(j.splits["s"])
		}
		lc := &laggingCommits{store: store}
		lc.checkpoint(t, j) // its commit not done
		// Before the checkpoint's commit, a row of k arrives: k has no version.
		out.rows = nil
		process(t, j, 0, out, sideRow("k", 2, false, true))
		if len(out.rows) != 0 {
			t.Fatalf("sweep early %v: a row of a deleted key joined %q: the deleted version came back from the store", sweepEarly, out.rows)
		}
		// The commit done, the next checkpoint lets k go; its version stays deleted.
		lc.commit(t)
		process(t, j, 0, out, sideRow("k", 2, true, true)) // k's order goes too
		joinCheckpoint(t, j, store)
		joinCheckpoint(t, j, store)
		if sp := j.splits["s"]; sp.keys[0]["k"] != nil || sp.keys[1]["k"] != nil {
			t.Fatalf("sweep early %v: the emptied key stayed in memory two checkpoints after its deletes", sweepEarly)
		}
		out.rows = nil
		process(t, j, 0, out, sideRow("k", 3, false, true))
		if len(out.rows) != 0 {
			t.Fatalf("sweep early %v: a row of a deleted key joined %q after the commit", sweepEarly, out.rows)
		}
	}
}

// unit is the time step of expiringRandomRun's rows: a tenth of a second, so that runs
// span several of the sweeps of keys out of memory (every second or more).
const unit = 100

// expiringJoinNode is an inner join on column 0 of rows (key, value, time[, until]) whose
// rows expire: a regular join with a state TTL of 20 units, an interval join of right
// times within 5 units of the left's, or one bounded by the left row's own until column.
func expiringJoinNode(mode string) *planner.JoinNode {
	col0 := func(r sql.Row) sql.Value { return r[0] }
	n := &planner.JoinNode{Kind: sql.JoinInner, Mode: planner.JoinRegular,
		LeftKeys: []planner.Evaluator{col0}, RightKeys: []planner.Evaluator{col0},
		LeftTime: 2, RightTime: 2, AsOf: -1, RightOp: -1, LeftWidth: 3, RightWidth: 3}
	switch mode {
	case "ttl":
		n.TTL = 20 * unit
	case "interval":
		n.Mode, n.Lower, n.Upper = planner.JoinInterval, -5*unit, 5*unit
	case "until":
		n.Mode, n.HasUntil, n.LeftUntil, n.LeftWidth = planner.JoinInterval, true, 3, 4
		n.Residual = func(r sql.Row) sql.Value { return sql.Bool(r[n.LeftWidth+2].I <= r[3].I) }
	}
	return n
}

// expiringRandomRun runs a random inner join whose rows expire, over seed's rows, times
// and watermarks, checkpointed and restarted from the store now and then; cache > 0
// bounds its keys in memory. It returns the output, sorted, the cache's counters and the
// store entries of rows left at the end.
func expiringRandomRun(t *testing.T, mode string, seed int64, cache int) (rows []string, n cacheCounts, left int) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	node := expiringJoinNode(mode)
	store := state.NewMemory()
	j := openExactJoin(t, node, store, cache)
	out := &joinedRows{}
	wm := int64(-10)
	lc := &laggingCommits{store: store, rng: rand.New(rand.NewSource(seed + 1000))}
	for step := 0; step < 600; step++ {
		lc.step(t)
		in := rng.Intn(2)
		ts := int64(step/4+rng.Intn(6)) * unit
		// Keys drift: old ones go quiet and expire, some of them out of memory.
		r := sql.Row{sql.Varchar(fmt.Sprint("k", step/40+rng.Intn(8))), sql.BigInt(int64(step)), sql.BigInt(ts)}
		if in == 0 && node.HasUntil {
			r = append(r, sql.BigInt(ts+int64(rng.Intn(12))*unit))
		}
		process(t, j, in, out, r)
		if rng.Intn(4) == 0 {
			wm = max(wm, int64(step/4-3)*unit)
			if err := j.Watermark("s", wm, out); err != nil {
				t.Fatal(err)
			}
		}
		switch rng.Intn(30) {
		case 0:
			lc.checkpoint(t, j)
		case 1:
			lc.checkpoint(t, j)
			lc.commit(t)
			n.add(&j.splits["s"].cache)
			j = openExactJoin(t, node, store, cache)
		}
	}
	if err := j.Watermark("s", MaxWatermark, out); err != nil {
		t.Fatal(err)
	}
	if j.splits["s"].cache.dropAll {
		n.droppedAtEnd++
	}
	lc.commit(t)
	joinCheckpoint(t, j, store)
	n.add(&j.splits["s"].cache)
	meta := string(j.stateKey(j.splits["s"], metaSide, "", 0))
	if err := store.Scan(nil, func(k, _ []byte) error {
		if string(k) != meta {
			left++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out.rows)
	return out.rows, n, left
}

// cacheCounts sums the counters of a join's caches.
// droppedAtEnd counts the runs whose stored rows went by one range at the end of the input
// (dropStored), not key by key.
type cacheCounts struct{ reads, swept, trims, wholes, droppedAtEnd int64 }

func (n *cacheCounts) add(c *joinCache) {
	n.reads += c.reads
	n.swept += c.sweptSides
	n.trims += c.trims
	n.wholes += c.wholes
}

// An inner interval join and a regular join with a state TTL, with a cache of two keys,
// checkpointed often and restarted from the store, emit what they emit with every key in
// memory: a key read back brings only the rows that have not expired; and once every row
// expired, the store holds nothing of theirs (the sweep of keys out of memory, and at the
// end of the input one range).
func TestJoinCacheExpiringRandom(t *testing.T) {
	for _, mode := range []string{"ttl", "interval", "until"} {
		t.Run(mode, func(t *testing.T) {
			var sum cacheCounts
			for seed := int64(0); seed < 12; seed++ {
				want, _, _ := expiringRandomRun(t, mode, seed, 0)
				got, n, left := expiringRandomRun(t, mode, seed, 2)
				if d := diff(got, want); d != "" {
					t.Fatalf("seed %d: with a cache of 2 keys, against every key in memory:\n%s", seed, d)
				}
				if len(want) < 100 {
					t.Fatalf("seed %d: %d rows: the test joins too little", seed, len(want))
				}
				if left != 0 {
					t.Fatalf("seed %d: %d store entries left after every row expired", seed, left)
				}
				if n.droppedAtEnd != 1 {
					// No row comes after the end of the input: a scan of the store that
					// deletes its keys one by one would hold every key in memory.
					t.Fatalf("seed %d: the stored rows did not go by one range at the end of the input", seed)
				}
				sum.reads, sum.swept, sum.trims, sum.wholes = sum.reads+n.reads, sum.swept+n.swept, sum.trims+n.trims, sum.wholes+n.wholes
			}
			if sum.reads == 0 || sum.swept == 0 || sum.trims == 0 || sum.wholes == 0 {
				t.Fatalf("%+v: the test does not cover the cache (keys read back, sides swept, sides left in part, read back whole)", sum)
			}
			t.Logf("%+v", sum)
		})
	}
}

// The cache bounds rows as well as keys: keys with many rows each (an interval join's hot
// keys) fewer than the cache's keys leave memory once their rows outgrow its rows, the
// join asks for a checkpoint when the rows put in memory since the last one do, and the
// output is the one with every key in memory.
func TestJoinCacheBoundsRows(t *testing.T) {
	run := func(cache int) (rows []string, held int64, asked int) {
		node := expiringJoinNode("interval")
		store := state.NewMemory()
		j := openExactJoin(t, node, store, cache)
		j.full = func() { asked++ }
		out := &joinedRows{}
		for i := 0; i < 200; i++ { // 10 keys, 20 left rows each: 200 rows in a cache of 16 keys
			process(t, j, 0, out, sql.Row{sql.Varchar(fmt.Sprint("k", i%10)), sql.BigInt(int64(i)), sql.BigInt(unit)})
		}
		joinCheckpoint(t, j, store)
		joinCheckpoint(t, j, store) // what the first saved is committed now, and may leave
		held = j.StateRows()
		for i := 0; i < 10; i++ {
			process(t, j, 1, out, sql.Row{sql.Varchar(fmt.Sprint("k", i)), sql.BigInt(int64(1000 + i)), sql.BigInt(2 * unit)})
		}
		sort.Strings(out.rows)
		return out.rows, held, asked
	}
	want, all, _ := run(0)
	got, held, asked := run(16)
	if d := diff(got, want); d != "" {
		t.Fatalf("with a cache of 16 keys, against every key in memory:\n%s", d)
	}
	if len(want) != 200 {
		t.Fatalf("%d rows joined, want 200", len(want))
	}
	if limit := int64(16 * joinRowsPerKey); all != 200 || held > limit {
		t.Fatalf("rows in memory after two checkpoints: %d with the cache (at most %d), %d without (want 200)", held, limit, all)
	}
	if asked == 0 {
		t.Fatalf("200 rows put in memory in a cache of %d rows asked for no checkpoint", 16*joinRowsPerKey)
	}
}

// The cache bounds the bytes of its rows too: wide rows (64 KiB each) leave memory at
// checkpoints once their size is known, far below the cache's keys and rows, and the
// output is the one with every key in memory.
func TestJoinCacheBoundsRowBytes(t *testing.T) {
	wide := strings.Repeat("x", 64<<10)
	run := func(cache int) (rows []string, held int64) {
		store := state.NewMemory()
		j := openExactJoin(t, exactJoinNode(sql.JoinInner, [2]bool{false, false}, false, false), store, cache)
		out := &joinedRows{}
		for i := 0; i < 2000; i++ { // 1000 keys, a left row each, wide
			process(t, j, 0, out, sql.Row{sql.Varchar(fmt.Sprint("k", i%1000)), sql.Varchar(wide)})
			if i%100 == 99 {
				joinCheckpoint(t, j, store)
			}
		}
		joinCheckpoint(t, j, store)
		joinCheckpoint(t, j, store) // the last rows saved are committed now, and may leave
		held = j.StateRows()
		for i := 0; i < 1000; i += 7 {
			process(t, j, 1, out, sql.Row{sql.Varchar(fmt.Sprint("k", i)), sql.BigInt(int64(i))})
		}
		for i := range out.rows {
			out.rows[i] = strings.ReplaceAll(out.rows[i], wide, "wide")
		}
		sort.Strings(out.rows)
		return out.rows, held
	}
	want, all := run(0)
	got, held := run(4096) // 16,384 rows by its keys
	if d := diff(got, want); d != "" {
		t.Fatalf("with the cache, against every key in memory:\n%s", d)
	}
	if len(want) != 2*143 || all != 2000 {
		t.Fatalf("%d rows joined (want %d), %d rows held without the cache (want 2000)", len(want), 2*143, all)
	}
	if limit := int64(joinCacheBytes / (64 << 10)); held > limit {
		t.Fatalf("%d rows of 64 KiB in memory after two checkpoints, want at most %d (%d MiB)", held, limit, joinCacheBytes>>20)
	}
}

// A hot key's side that no row of the other side looks at leaves memory in part at each
// checkpoint (its committed rows), is written a chunk a checkpoint, rewritten as one when
// it reaches maxJoinChunks, and comes back whole when a row of the other side arrives: the
// output is the one with every row in memory.
func TestJoinCacheSidesInPart(t *testing.T) {
	run := func(cache int) (rows []string, held int64, chunks int, n cacheCounts) {
		node := expiringJoinNode("interval")
		node.Lower, node.Upper = -1<<40, 1<<40 // nothing expires
		store := state.NewMemory()
		j := openExactJoin(t, node, store, cache)
		out := &joinedRows{}
		row := func(key string, v, ts int64) sql.Row {
			return sql.Row{sql.Varchar(key), sql.BigInt(v), sql.BigInt(ts)}
		}
		process(t, j, 0, out, row("hot", -1, 0))
		for cp := 0; cp < maxJoinChunks+10; cp++ {
			for i := 0; i < 3; i++ {
				process(t, j, 1, out, row("hot", int64(cp*3+i), int64(cp)))
			}
			joinCheckpoint(t, j, store)
			if cp == maxJoinChunks+5 {
				held = j.StateRows()
			}
		}
		prefix := state.SplitPrefix(nil, "job", "op", "s")
		if err := store.Scan(append(prefix, 1), func(_, _ []byte) error { chunks++; return nil }); err != nil {
			t.Fatal(err)
		}
		process(t, j, 0, out, row("hot", -2, 1)) // joins every right row
		n.add(&j.splits["s"].cache)
		sort.Strings(out.rows)
		return out.rows, held, chunks, n
	}
	want, all, _, _ := run(0)
	got, held, chunks, n := run(16)
	if d := diff(got, want); d != "" {
		t.Fatalf("with the cache, against every row in memory:\n%s", d)
	}
	if total := 3 * (maxJoinChunks + 10); len(want) != 2*total || all != int64(3*(maxJoinChunks+6)+1) {
		t.Fatalf("%d rows joined, %d held without the cache: want %d and %d", len(want), all, 2*total, 3*(maxJoinChunks+6)+1)
	}
	if held > 7 || n.trims == 0 || n.wholes == 0 {
		t.Fatalf("%d rows in memory (at most the last two checkpoints' and the left row), %+v", held, n)
	}
	if chunks > maxJoinChunks || chunks < 2 {
		t.Fatalf("the hot side is stored in %d chunks: want 2..%d", chunks, maxJoinChunks)
	}
}

// The joins of a job share its bytes of rows in memory between checkpoints (pressBytes):
// with two joins in the job, each holds the input after half the bytes one join alone
// would put in memory.
func TestJoinsOfAJobShareThePressureBytes(t *testing.T) {
	pressedAfter := func(joins int) int {
		j := newJoinOp(exactJoinNode(sql.JoinInner, [2]bool{}, false, false), "job", "op", state.NewMemory(), nil, &counters{})
		j.setCache(1 << 20)
		j.joins = joins
		pc := &pressCounter{}
		j.full, j.press = func() {}, pc.press
		if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
			t.Fatal(err)
		}
		out := &joinedRows{}
		wide := strings.Repeat("x", 1000)
		for i := 1; i < 1<<16; i++ {
			process(t, j, 0, out, sideRow(fmt.Sprint("k", i, wide), 1, false, false))
			if pc.on != 0 {
				return i
			}
		}
		t.Fatalf("%d joins: 65,535 rows of a kilobyte never held the input", joins)
		return 0
	}
	one, two := pressedAfter(1), pressedAfter(2)
	if two < one*4/10 || two > one*6/10 {
		t.Fatalf("the input was held after %d rows with one join in the job, after %d with two: want about half", one, two)
	}
	t.Logf("held after %d rows (one join), %d (two joins)", one, two)
}

// cachedJoins counts the joins of every stage of the job that keep a cache: two for a join
// of a join, none with the in-memory store's default (no cache).
func TestCachedJoinsCountsTheJobsJoins(t *testing.T) {
	plan := planSQL(t, `SELECT o.user_id, p.amount, q.amount FROM orders o
		JOIN payments p ON p.user_id = o.user_id JOIN payments q ON q.n = o.n`, planCatalog(), "cj")
	for _, c := range []struct {
		keys, want int
	}{{0, 0}, {64, 2}, {-1, 0}} {
		j := &Job{plan: plan, env: Env{Store: state.NewMemory(), JoinCacheKeys: c.keys}}
		if got := j.cachedJoins(); got != c.want {
			t.Errorf("JoinCacheKeys %d: %d cached joins, want %d", c.keys, got, c.want)
		}
	}
}

// A key read back from the store reads only the sides and chunks it has there: the filter
// of keys that left memory holds each stored side, and marks a side of more than one chunk
// (joinCache.spill). Forty keys with rows of the left side only, ten of them in two chunks,
// leave memory; a right row of each reads back chunk 0 of the thirty (one Get each) and
// chunks 0, 1 and the missing 2 of the ten, not the right side, which none has. The joined
// rows are those of the join with every key in memory, and after a restart from the store
// (which refills the filter from the stored chunks) the reads are the same.
func TestJoinCacheReadsOnlyStoredChunks(t *testing.T) {
	run := func(cache int, restart bool) (rows []string, gets, reads int64) {
		store := &readCountStore{Store: state.NewMemory()}
		node := func() *planner.JoinNode { return exactJoinNode(sql.JoinInner, [2]bool{}, false, false) }
		j := openExactJoin(t, node(), store, cache)
		out := &joinedRows{}
		for i := 0; i < 40; i++ {
			process(t, j, 0, out, sideRow(fmt.Sprint("k", i), int64(i), false, false))
		}
		joinCheckpoint(t, j, store)
		for i := 0; i < 10; i++ { // a second chunk
			process(t, j, 0, out, sideRow(fmt.Sprint("k", i), int64(100+i), false, false))
		}
		joinCheckpoint(t, j, store)
		joinCheckpoint(t, j, store) // the keys of the second chunks leave too
		if restart {
			j = openExactJoin(t, node(), store, cache)
		}
		store.gets.Store(0)
		for i := 0; i < 40; i++ {
			process(t, j, 1, out, sideRow(fmt.Sprint("k", i), int64(-i), false, false))
		}
		sort.Strings(out.rows)
		return out.rows, store.gets.Load(), j.splits["s"].cache.reads
	}
	want, _, _ := run(0, false)
	if len(want) != 50 {
		t.Fatalf("%d rows joined with every key in memory, want 50", len(want))
	}
	for _, restart := range []bool{false, true} {
		got, gets, reads := run(1, restart)
		if d := diff(got, want); d != "" {
			t.Fatalf("restart %v: with a cache of one key, against every key in memory:\n%s", restart, d)
		}
		if reads < 39 {
			t.Fatalf("restart %v: %d keys read back, want at least 39 of 40", restart, reads)
		}
		if max := 30 + 3*10; gets > int64(max) {
			t.Fatalf("restart %v: %d Gets for %d keys read back, want at most %d", restart, gets, reads, max)
		}
	}
}
