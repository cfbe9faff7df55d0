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

// The cache is on only for the exact regular join, and with the in-memory store only when
// set.
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
		{"ttl", func(n *planner.JoinNode) { n.TTL = 1000 }, rocks, 0, 0},
		{"interval", func(n *planner.JoinNode) { n.Mode = planner.JoinInterval }, rocks, 0, 0},
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
	version := func(key, tier string, del bool) sql.Row {
		op := sql.Null
		if del {
			op = sql.Varchar("delete")
		}
		return sql.Row{sql.Varchar(key), sql.Varchar(tier), op}
	}
	process(t, j, 1, out, version("k", "gold", false))
	process(t, j, 0, out, sideRow("k", 1, false, true))
	for i := 0; i < 6; i++ { // more keys than the cache holds
		process(t, j, 0, out, sideRow(fmt.Sprint("o", i), 1, false, true))
	}
	joinCheckpoint(t, j, store) // committed
	process(t, j, 1, out, version("k", "", true))
	for i := 0; i < 6; i++ { // the other keys change: k is the one that may leave
		process(t, j, 0, out, sideRow(fmt.Sprint("o", i), 2, false, true))
	}
	pending := &state.Batch{}
	if err := j.Control(&Control{Kind: Checkpoint, State: pending}, nil); err != nil {
		t.Fatal(err)
	}
	// Before the checkpoint's commit, a row of k arrives: k has no version.
	out.rows = nil
	process(t, j, 0, out, sideRow("k", 2, false, true))
	if len(out.rows) != 0 {
		t.Fatalf("a row of a deleted key joined %q: the deleted version came back from the store", out.rows)
	}
}
