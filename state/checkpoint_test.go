package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
)

// ckptBackend is one CheckpointStore implementation under test.
type ckptBackend struct {
	// open returns a client of the shared backing store: for Postgres a new connection
	// pool (another instance), for the local store the one store.
	open func(t *testing.T) CheckpointStore
	// crashNextCommit makes cs's next commit die after its writes and before they are
	// committed.
	crashNextCommit func(t *testing.T, cs CheckpointStore)
}

func checkpointBackends() map[string]func(t *testing.T) *ckptBackend {
	local := func(newStore func(t *testing.T) Store) func(t *testing.T) *ckptBackend {
		return func(t *testing.T) *ckptBackend {
			st := newStore(t)
			t.Cleanup(func() { st.Close() })
			cs := NewLocalCheckpointStore(st)
			return &ckptBackend{
				open: func(*testing.T) CheckpointStore { return cs },
				crashNextCommit: func(t *testing.T, c CheckpointStore) {
					l := c.(*LocalCheckpointStore)
					l.beforeWrite = func() error { l.beforeWrite = nil; return errors.New("crash") }
				},
			}
		}
	}
	return map[string]func(t *testing.T) *ckptBackend{
		"local-memory": local(func(*testing.T) Store { return NewMemory() }),
		"local-rocksdb": local(func(t *testing.T) Store {
			s, err := OpenRocks(t.TempDir(), RocksOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}),
		"postgres": func(t *testing.T) *ckptBackend {
			schema := newTestSchema()
			return &ckptBackend{
				open: func(t *testing.T) CheckpointStore { return openTestPostgres(t, schema) },
				crashNextCommit: func(t *testing.T, c CheckpointStore) {
					crashPostgresCommit(t, c.(*PostgresCheckpointStore))
				},
			}
		},
	}
}

// forEachCheckpointStore runs body against every implementation.
func forEachCheckpointStore(t *testing.T, body func(t *testing.T, b *ckptBackend)) {
	names := []string{"local-memory", "local-rocksdb", "postgres"}
	all := checkpointBackends()
	for _, name := range names {
		t.Run(name, func(t *testing.T) { body(t, all[name](t)) })
	}
}

var bg = context.Background()

func aggKey(job, split, k string) []byte {
	return Key(nil, job, "agg", split, []byte(k), 0, 1000)
}

func offKey(job, split string) []byte { return SplitPrefix(nil, job, "src0", split) }

func epochKeyOf(job string) []byte { return SplitPrefix(nil, job, JobOperator, "epoch") }

// ckptModel is the reference: what Load must return per (job, split), maintained by
// applying each test operation to plain maps in order.
type ckptModel map[string]map[string]string // split -> key -> value

func (m ckptModel) put(split string, k []byte, v string) {
	if m[split] == nil {
		m[split] = map[string]string{}
	}
	m[split][string(k)] = v
}

func (m ckptModel) del(split string, k []byte) { delete(m[split], string(k)) }

func (m ckptModel) drop(split string, prefix []byte) {
	for k := range m[split] {
		if bytes.HasPrefix([]byte(k), prefix) {
			delete(m[split], k)
		}
	}
}

func (m ckptModel) list(split string) []string {
	var out []string
	for k, v := range m[split] {
		out = append(out, fmt.Sprintf("%x=%s", k, v))
	}
	sort.Strings(out)
	return out
}

func loadList(t *testing.T, cs CheckpointStore, job, split string) ([]string, SplitInfo) {
	t.Helper()
	var out []string
	var last []byte
	info, err := cs.Load(bg, job, split, func(k, v []byte) error {
		if last != nil && bytes.Compare(last, k) >= 0 {
			t.Errorf("Load: key %x after %x: not ascending", k, last)
		}
		last = append(last[:0], k...)
		out = append(out, fmt.Sprintf("%x=%s", k, v))
		return nil
	})
	if err != nil {
		t.Fatalf("load %s/%s: %v", job, split, err)
	}
	return out, info
}

func checkSplit(t *testing.T, cs CheckpointStore, m ckptModel, job, split string) SplitInfo {
	t.Helper()
	got, info := loadList(t, cs, job, split)
	if want := m.list(split); !slices.Equal(got, want) {
		t.Fatalf("split %q of %s:\n got %v\nwant %v", split, job, got, want)
	}
	return info
}

func mustAcquire(t *testing.T, cs CheckpointStore, job, split, owner string) int64 {
	t.Helper()
	g, err := cs.Acquire(bg, job, split, owner)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCheckpointRoundTrip(t *testing.T) {
	forEachCheckpointStore(t, func(t *testing.T, be *ckptBackend) {
		cs := be.open(t)
		const job = "j1"
		if _, info := loadList(t, cs, job, "q0"); info != (SplitInfo{Job: job, Split: "q0"}) {
			t.Fatalf("never acquired split: %+v", info)
		}
		g0 := mustAcquire(t, cs, job, "q0", "inst-a")
		g1 := mustAcquire(t, cs, job, "q1", "inst-a")
		m := ckptModel{}
		b := &Batch{}
		for i := range 50 {
			for _, sp := range []string{"q0", "q1"} {
				k, v := aggKey(job, sp, fmt.Sprintf("k%02d", i)), fmt.Sprintf("v%d-%s", i, sp)
				b.Put(k, []byte(v))
				m.put(sp, k, v)
			}
		}
		b.Put(offKey(job, "q0"), []byte("o17"))
		m.put("q0", offKey(job, "q0"), "o17")
		b.Put(epochKeyOf(job), []byte("e1"))
		m.put("", epochKeyOf(job), "e1")
		cp := &Checkpoint{Job: job, Epoch: 1, State: b,
			Splits:  []SplitGeneration{{"q1", g1}, {"q0", g0}},
			Offsets: []CheckpointOffset{{"q0", 17}}}
		if err := cs.Commit(bg, cp); err != nil {
			t.Fatal(err)
		}
		i0 := checkSplit(t, cs, m, job, "q0")
		i1 := checkSplit(t, cs, m, job, "q1")
		checkSplit(t, cs, m, job, "")
		if want := (SplitInfo{Job: job, Split: "q0", Owner: "inst-a", Generation: g0, Epoch: 1, Offset: 17, HasOffset: true}); i0 != want {
			t.Fatalf("q0 info %+v, want %+v", i0, want)
		}
		if i1.HasOffset || i1.Epoch != 1 || i1.Generation != g1 {
			t.Fatalf("q1 info %+v", i1)
		}

		// Ordered operations: overwrite, delete, drop a prefix then write under it again,
		// put then delete in one batch, delete of a key never written.
		b = &Batch{}
		k3 := aggKey(job, "q0", "k03")
		b.Put(k3, []byte("new"))
		m.put("q0", k3, "new")
		b.Delete(aggKey(job, "q0", "k04"))
		m.del("q0", aggKey(job, "q0", "k04"))
		aggQ1 := SplitPrefix(nil, job, "agg", "q1")
		b.Put(aggKey(job, "q1", "k07"), []byte("gone"))
		b.DropPrefix(aggQ1)
		m.drop("q1", aggQ1)
		b.Put(aggKey(job, "q1", "k99"), []byte("after-drop"))
		m.put("q1", aggKey(job, "q1", "k99"), "after-drop")
		tmp := aggKey(job, "q0", "tmp")
		b.Put(tmp, []byte("x"))
		b.Delete(tmp)
		b.Delete(aggKey(job, "q0", "never"))
		b.Put(k3, []byte("newer"))
		m.put("q0", k3, "newer")
		if err := cs.Commit(bg, &Checkpoint{Job: job, Epoch: 2, State: b,
			Splits: []SplitGeneration{{"q0", g0}, {"q1", g1}}, Offsets: []CheckpointOffset{{"q0", 40}, {"q1", 3}}}); err != nil {
			t.Fatal(err)
		}
		i0 = checkSplit(t, cs, m, job, "q0")
		i1 = checkSplit(t, cs, m, job, "q1")
		if i0.Offset != 40 || i1.Offset != 3 || !i1.HasOffset || i0.Epoch != 2 {
			t.Fatalf("after epoch 2: %+v %+v", i0, i1)
		}
		// Epoch 0 (a split given up) does not lower the recorded epoch.
		if err := cs.Commit(bg, &Checkpoint{Job: job, Splits: []SplitGeneration{{"q1", g1}}}); err != nil {
			t.Fatal(err)
		}
		if i1 = checkSplit(t, cs, m, job, "q1"); i1.Epoch != 2 {
			t.Fatalf("epoch after an epoch-0 commit: %d", i1.Epoch)
		}

		// LoadInto replaces a stale local copy of the split.
		dst := NewMemory()
		dst.Put(aggKey(job, "q1", "stale"), []byte("s"))
		dst.Put(aggKey(job, "q0", "other"), []byte("o"))
		info, err := LoadInto(bg, cs, job, "q1", dst, aggQ1)
		if err != nil || info.Generation != g1 {
			t.Fatalf("LoadInto: %+v %v", info, err)
		}
		got := scanList(t, dst, SplitPrefix(nil, job, "agg", "q1"))
		var want []string
		for k, v := range m["q1"] {
			want = append(want, k+"="+v)
		}
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Fatalf("LoadInto wrote %v, want %v", got, want)
		}
		if v, ok, _ := dst.Get(aggKey(job, "q0", "other")); !ok || string(v) != "o" {
			t.Fatal("LoadInto touched another split")
		}
	})
}

func TestCheckpointFencing(t *testing.T) {
	forEachCheckpointStore(t, func(t *testing.T, be *ckptBackend) {
		a, b := be.open(t), be.open(t)
		const job = "fence"
		m := ckptModel{}
		commit := func(cs CheckpointStore, epoch int64, val string, gens map[string]int64) error {
			bt := &Batch{}
			cp := &Checkpoint{Job: job, Epoch: epoch, State: bt}
			for _, sp := range slices.Sorted(maps.Keys(gens)) {
				bt.Put(aggKey(job, sp, "k"), []byte(val))
				cp.Splits = append(cp.Splits, SplitGeneration{sp, gens[sp]})
				cp.Offsets = append(cp.Offsets, CheckpointOffset{sp, epoch * 10})
			}
			return cs.Commit(bg, cp)
		}
		gensA := map[string]int64{}
		for _, sp := range []string{"s0", "s1", "s2", "s3"} {
			gensA[sp] = mustAcquire(t, a, job, sp, "A")
		}
		if err := commit(a, 1, "A1", gensA); err != nil {
			t.Fatal(err)
		}
		for sp := range gensA {
			m.put(sp, aggKey(job, sp, "k"), "A1")
		}
		// B takes s2 and s3 over.
		gensB := map[string]int64{}
		for _, sp := range []string{"s2", "s3"} {
			gensB[sp] = mustAcquire(t, b, job, sp, "B")
			if gensB[sp] <= gensA[sp] {
				t.Fatalf("takeover generation %d not above %d", gensB[sp], gensA[sp])
			}
			if _, info := loadList(t, b, job, sp); info.Owner != "B" || info.Generation != gensB[sp] || info.Offset != 10 {
				t.Fatalf("after takeover: %+v", info)
			}
		}
		// A, now a zombie for s2 and s3, commits all four: fenced, nothing written, not even
		// for s0 and s1 which it still owns.
		err := commit(a, 2, "A2", gensA)
		var fe *FencedError
		if !errors.Is(err, ErrFenced) || !errors.As(err, &fe) {
			t.Fatalf("zombie commit: %v, want ErrFenced", err)
		}
		if fe.Job != job || (fe.Split != "s2" && fe.Split != "s3") || fe.Held != gensA[fe.Split] || fe.Current != gensB[fe.Split] || fe.Owner != "B" {
			t.Fatalf("FencedError %+v", fe)
		}
		for _, sp := range []string{"s0", "s1", "s2", "s3"} {
			if info := checkSplit(t, b, m, job, sp); info.Epoch != 1 || info.Offset != 10 {
				t.Fatalf("zombie commit changed %s: %+v", sp, info)
			}
		}
		// Each instance commits what it owns.
		if err := commit(a, 2, "A2", map[string]int64{"s0": gensA["s0"], "s1": gensA["s1"]}); err != nil {
			t.Fatal(err)
		}
		if err := commit(b, 7, "B7", gensB); err != nil {
			t.Fatal(err)
		}
		m.put("s0", aggKey(job, "s0", "k"), "A2")
		m.put("s1", aggKey(job, "s1", "k"), "A2")
		m.put("s2", aggKey(job, "s2", "k"), "B7")
		m.put("s3", aggKey(job, "s3", "k"), "B7")
		for _, sp := range []string{"s0", "s1", "s2", "s3"} {
			checkSplit(t, a, m, job, sp)
		}
		// A commit of a split never acquired is fenced too.
		if err := commit(a, 3, "x", map[string]int64{"s9": 0}); !errors.Is(err, ErrFenced) {
			t.Fatalf("commit of an unacquired split: %v", err)
		}
		// Release: the stale generation is fenced; after a release the releaser can no
		// longer commit, and the next Acquire is above every earlier generation.
		if err := a.Release(bg, job, "s2", gensA["s2"]); !errors.Is(err, ErrFenced) {
			t.Fatalf("zombie release: %v", err)
		}
		if err := b.Release(bg, job, "s2", gensB["s2"]); err != nil {
			t.Fatal(err)
		}
		if _, info := loadList(t, a, job, "s2"); info.Owner != "" || info.Generation <= gensB["s2"] {
			t.Fatalf("after release: %+v", info)
		}
		if err := commit(b, 8, "B8", map[string]int64{"s2": gensB["s2"]}); !errors.Is(err, ErrFenced) {
			t.Fatalf("commit after release: %v", err)
		}
		if g := mustAcquire(t, a, job, "s2", "A"); g <= gensB["s2"]+1 {
			t.Fatalf("acquire after release: generation %d", g)
		}
		checkSplit(t, a, m, job, "s2")
	})
}

func TestCheckpointRejectsBadCheckpoints(t *testing.T) {
	forEachCheckpointStore(t, func(t *testing.T, be *ckptBackend) {
		cs := be.open(t)
		const job = "bad"
		g := mustAcquire(t, cs, job, "s0", "A")
		own := []SplitGeneration{{"s0", g}}
		cases := map[string]*Checkpoint{
			"uncovered split":  {Job: job, Splits: own, State: batchOf(func(b *Batch) { b.Put(aggKey(job, "s1", "k"), nil) })},
			"other job":        {Job: job, Splits: own, State: batchOf(func(b *Batch) { b.Put(aggKey("other", "s0", "k"), nil) })},
			"reserved op":      {Job: job, Splits: own, State: batchOf(func(b *Batch) { b.Put(SplitPrefix(nil, job, "ckpt.split", "s0"), nil) })},
			"not a state key":  {Job: job, Splits: own, State: batchOf(func(b *Batch) { b.Put([]byte{0x7f}, nil) })},
			"partial prefix":   {Job: job, Splits: own, State: batchOf(func(b *Batch) { b.DropPrefix(OperatorPrefix(nil, job, "agg")) })},
			"job-wide drop":    {Job: job, Splits: own, State: batchOf(func(b *Batch) { b.DropPrefix(SplitPrefix(nil, job, JobOperator, "x")) })},
			"uncovered offset": {Job: job, Splits: own, Offsets: []CheckpointOffset{{"s1", 1}}},
			"duplicate split":  {Job: job, Splits: append(own, own...)},
			"empty split":      {Job: job, Splits: []SplitGeneration{{"", 1}}},
			"no job":           {Splits: own},
		}
		for name, cp := range cases {
			if cp.State != nil {
				// A valid put first: it must not be written either.
				cp.State = batchOf(func(b *Batch) {
					b.Put(aggKey(job, "s0", "first"), []byte("1"))
					cp.State.Each(func(kind OpKind, k, v []byte) error {
						if kind == OpPut {
							b.Put(k, v)
						} else {
							b.DropPrefix(k)
						}
						return nil
					})
				})
			}
			if err := cs.Commit(bg, cp); !errors.Is(err, ErrBadCheckpoint) {
				t.Errorf("%s: %v, want ErrBadCheckpoint", name, err)
			}
		}
		if got, info := loadList(t, cs, job, "s0"); len(got) != 0 || info.Epoch != 0 {
			t.Fatalf("rejected checkpoints wrote %v %+v", got, info)
		}
		if _, err := cs.Acquire(bg, job, "", "A"); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("acquire of split \"\": %v", err)
		}
	})
}

func batchOf(fill func(b *Batch)) *Batch {
	b := &Batch{}
	fill(b)
	return b
}

// TestCheckpointConcurrentSplits commits different splits from several goroutines (and,
// for Postgres, two instances) at once.
func TestCheckpointConcurrentSplits(t *testing.T) {
	forEachCheckpointStore(t, func(t *testing.T, be *ckptBackend) {
		insts := []CheckpointStore{be.open(t), be.open(t)}
		const job, splits, epochs, keys = "conc", 6, 15, 40
		gens := make([]int64, splits)
		for i := range splits {
			gens[i] = mustAcquire(t, insts[i%2], job, fmt.Sprintf("s%d", i), fmt.Sprint(i%2))
		}
		var wg sync.WaitGroup
		errs := make(chan error, splits)
		for i := range splits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sp := fmt.Sprintf("s%d", i)
				for e := int64(1); e <= epochs; e++ {
					b := &Batch{}
					for k := range keys {
						if (k+int(e))%3 == 0 {
							b.Delete(aggKey(job, sp, fmt.Sprint(k)))
						} else {
							b.Put(aggKey(job, sp, fmt.Sprint(k)), []byte(fmt.Sprintf("%s-e%d", sp, e)))
						}
					}
					b.Put(epochKeyOf(job), []byte("any"))
					cp := &Checkpoint{Job: job, Epoch: e, State: b, Splits: []SplitGeneration{{sp, gens[i]}},
						Offsets: []CheckpointOffset{{sp, e * 100}}}
					if err := insts[i%2].Commit(bg, cp); err != nil {
						errs <- fmt.Errorf("%s epoch %d: %w", sp, e, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i := range splits {
			sp := fmt.Sprintf("s%d", i)
			m := ckptModel{}
			for k := range keys {
				if (k+epochs)%3 != 0 {
					m.put(sp, aggKey(job, sp, fmt.Sprint(k)), fmt.Sprintf("%s-e%d", sp, epochs))
				}
			}
			if info := checkSplit(t, insts[(i+1)%2], m, job, sp); info.Epoch != epochs || info.Offset != epochs*100 {
				t.Fatalf("%s: %+v", sp, info)
			}
		}
	})
}

// TestCheckpointCrashKeepsLast kills a commit after its writes and before it commits: the
// previous checkpoint stays what Load returns, and the next commit works.
func TestCheckpointCrashKeepsLast(t *testing.T) {
	forEachCheckpointStore(t, func(t *testing.T, be *ckptBackend) {
		cs := be.open(t)
		const job = "crash"
		g := mustAcquire(t, cs, job, "s", "A")
		m := ckptModel{}
		b := &Batch{}
		for i := range 100 {
			k := aggKey(job, "s", fmt.Sprint(i))
			b.Put(k, []byte("e1"))
			m.put("s", k, "e1")
		}
		cp := &Checkpoint{Job: job, Epoch: 1, State: b, Splits: []SplitGeneration{{"s", g}}, Offsets: []CheckpointOffset{{"s", 100}}}
		if err := cs.Commit(bg, cp); err != nil {
			t.Fatal(err)
		}
		b2 := &Batch{}
		for i := range 100 {
			if i%2 == 0 {
				b2.Delete(aggKey(job, "s", fmt.Sprint(i)))
			} else {
				b2.Put(aggKey(job, "s", fmt.Sprint(i)), []byte("e2"))
			}
		}
		b2.DropPrefix(SplitPrefix(nil, job, "other", "s"))
		b2.Put(aggKey(job, "s", "new"), []byte("e2"))
		cp2 := &Checkpoint{Job: job, Epoch: 2, State: b2, Splits: []SplitGeneration{{"s", g}}, Offsets: []CheckpointOffset{{"s", 200}}}
		be.crashNextCommit(t, cs)
		if err := cs.Commit(bg, cp2); err == nil {
			t.Fatal("crashed commit reported success")
		}
		if info := checkSplit(t, cs, m, job, "s"); info.Epoch != 1 || info.Offset != 100 {
			t.Fatalf("after crashed commit: %+v", info)
		}
		if err := cs.Commit(bg, cp2); err != nil {
			t.Fatalf("commit after the crash: %v", err)
		}
		for i := range 100 {
			if i%2 == 0 {
				m.del("s", aggKey(job, "s", fmt.Sprint(i)))
			} else {
				m.put("s", aggKey(job, "s", fmt.Sprint(i)), "e2")
			}
		}
		m.put("s", aggKey(job, "s", "new"), "e2")
		if info := checkSplit(t, cs, m, job, "s"); info.Epoch != 2 || info.Offset != 200 {
			t.Fatalf("after retried commit: %+v", info)
		}
	})
}

// TestCheckpointSplitMove is the library side of moving two of four splits to a second
// instance: B takes them over, imports their state into its own store, goes on from their
// offsets and commits; A goes on with the other two; the zombie A cannot overwrite B's.
func TestCheckpointSplitMove(t *testing.T) {
	forEachCheckpointStore(t, func(t *testing.T, be *ckptBackend) {
		a, b := be.open(t), be.open(t)
		const job = "move"
		splits := []string{"0", "1", "2", "3"}
		// counts is the reference: per split, key -> count of events applied.
		want := map[string]map[string]int{}
		localA, localB := NewMemory(), NewMemory()
		// process applies n events to split sp in local, commits through cs and updates the
		// reference when the commit succeeded.
		process := func(cs CheckpointStore, local Store, sp string, gen, from, n int64) error {
			b := &Batch{}
			pending := map[string]int{}
			for off := from; off < from+n; off++ {
				k := aggKey(job, sp, fmt.Sprintf("user%d", off%5))
				cur := 0
				if v, ok, _ := local.Get(k); ok {
					fmt.Sscan(string(v), &cur)
				}
				local.Put(k, []byte(fmt.Sprint(cur+1)))
				b.Put(k, []byte(fmt.Sprint(cur+1)))
				pending[fmt.Sprintf("user%d", off%5)]++
			}
			cp := &Checkpoint{Job: job, Epoch: from + n, State: b, Splits: []SplitGeneration{{sp, gen}},
				Offsets: []CheckpointOffset{{sp, from + n}}}
			if err := cs.Commit(bg, cp); err != nil {
				return err
			}
			if want[sp] == nil {
				want[sp] = map[string]int{}
			}
			for k, c := range pending {
				want[sp][k] += c
			}
			return nil
		}
		gA := map[string]int64{}
		for _, sp := range splits {
			gA[sp] = mustAcquire(t, a, job, sp, "A")
			if err := process(a, localA, sp, gA[sp], 0, 13); err != nil {
				t.Fatal(err)
			}
		}
		for _, sp := range splits[2:] {
			g := mustAcquire(t, b, job, sp, "B")
			info, err := LoadInto(bg, b, job, sp, localB, SplitPrefix(nil, job, "agg", sp))
			if err != nil {
				t.Fatal(err)
			}
			if !info.HasOffset || info.Offset != 13 {
				t.Fatalf("moved split %s resumes at %+v", sp, info)
			}
			if err := process(b, localB, sp, g, info.Offset, 7); err != nil {
				t.Fatal(err)
			}
			// The zombie A still processes sp from its own stale copy: fenced.
			if err := process(a, localA, sp, gA[sp], 13, 7); !errors.Is(err, ErrFenced) {
				t.Fatalf("zombie commit of moved split %s: %v", sp, err)
			}
		}
		for _, sp := range splits[:2] {
			if err := process(a, localA, sp, gA[sp], 13, 7); err != nil {
				t.Fatal(err)
			}
		}
		for _, sp := range splits {
			m := ckptModel{}
			for k, c := range want[sp] {
				m.put(sp, aggKey(job, sp, k), fmt.Sprint(c))
			}
			if info := checkSplit(t, a, m, job, sp); info.Offset != 20 {
				t.Fatalf("split %s offset %d, want 20", sp, info.Offset)
			}
			total := 0
			for _, c := range want[sp] {
				total += c
			}
			if total != 20 {
				t.Fatalf("split %s: %d events counted, want 20 (each once)", sp, total)
			}
		}
	})
}

// TestCheckpointCatalog races read-modify-write updates of the catalog from two instances:
// with optimistic versions none is lost.
func TestCheckpointCatalog(t *testing.T) {
	forEachCheckpointStore(t, func(t *testing.T, be *ckptBackend) {
		a, b := be.open(t), be.open(t)
		if data, ver, err := a.Catalog(bg); data != nil || ver != 0 || err != nil {
			t.Fatalf("empty catalog: %q %d %v", data, ver, err)
		}
		if _, err := a.PutCatalog(bg, []byte("[]"), 5); !errors.Is(err, ErrCatalogConflict) {
			t.Fatalf("put with a wrong version on an empty catalog: %v", err)
		}
		v, err := a.PutCatalog(bg, []byte("[]"), 0)
		if err != nil || v != 1 {
			t.Fatalf("first put: %d %v", v, err)
		}
		if _, err := b.PutCatalog(bg, []byte("lost"), 0); !errors.Is(err, ErrCatalogConflict) {
			t.Fatalf("stale put: %v", err)
		}
		const writers, each = 4, 5
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs := []CheckpointStore{a, b}[w%2]
				for i := 0; i < each; {
					data, ver, err := cs.Catalog(bg)
					if err != nil {
						errs <- err
						return
					}
					var list []string
					if err := json.Unmarshal(data, &list); err != nil {
						errs <- err
						return
					}
					list = append(list, fmt.Sprintf("w%d-%d", w, i))
					data, _ = json.Marshal(list)
					if _, err := cs.PutCatalog(bg, data, ver); errors.Is(err, ErrCatalogConflict) {
						continue
					} else if err != nil {
						errs <- err
						return
					}
					i++
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		data, ver, err := b.Catalog(bg)
		if err != nil {
			t.Fatal(err)
		}
		var list []string
		if err := json.Unmarshal(data, &list); err != nil {
			t.Fatal(err)
		}
		sort.Strings(list)
		var want []string
		for w := range writers {
			for i := range each {
				want = append(want, fmt.Sprintf("w%d-%d", w, i))
			}
		}
		sort.Strings(want)
		if !slices.Equal(list, want) || ver != 1+writers*each {
			t.Fatalf("catalog v%d = %v, want v%d %v", ver, list, 1+writers*each, want)
		}
	})
}

// FuzzDecodeSplitMeta: the local store's per-split record decoder never panics, and what it
// accepts re-encodes to the same bytes.
func FuzzDecodeSplitMeta(f *testing.F) {
	f.Add(encodeSplitMeta(splitMeta{gen: 3, epoch: 9, offset: 120, hasOffset: true, owner: "inst-a"}))
	f.Add(encodeSplitMeta(splitMeta{}))
	f.Add([]byte{0x02, 0x04, 0x02, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeSplitMeta(b)
		if err != nil {
			if !errors.Is(err, errCorruptSplitMeta) {
				t.Fatalf("error %v does not match errCorruptSplitMeta", err)
			}
			return
		}
		if m2, err := decodeSplitMeta(encodeSplitMeta(m)); err != nil || m2 != m {
			t.Fatalf("round trip of %+v: %+v %v", m, m2, err)
		}
	})
}

// FuzzKeyParts: KeyParts never panics, and what it accepts is rebuilt by SplitPrefix.
func FuzzKeyParts(f *testing.F) {
	f.Add(Key(nil, "job", "agg", "q1", []byte("k"), 0, 10))
	f.Add(SplitPrefix(nil, "", "", ""))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, key []byte) {
		job, op, split, rest, ok := KeyParts(key)
		if !ok {
			return
		}
		again := append(SplitPrefix(nil, string(job), string(op), string(split)), rest...)
		if !bytes.Equal(again, key) {
			t.Fatalf("KeyParts(%x) = %q %q %q %x, rebuilt as %x", key, job, op, split, rest, again)
		}
	})
}

func TestBatchSplits(t *testing.T) {
	b := batchOf(func(b *Batch) {
		b.Put(aggKey("j", "q2", "a"), nil)
		b.Put(aggKey("j", "q0", "a"), nil)
		b.Delete(aggKey("j", "q2", "b"))
		b.DropPrefix(SplitPrefix(nil, "j", "agg", "q7"))
		b.Put(epochKeyOf("j"), nil)
		b.Put(aggKey("other", "q9", "a"), nil)
		b.Put([]byte{0xff}, nil)
	})
	if got, want := BatchSplits("j", b), []string{"q0", "q2", "q7"}; !slices.Equal(got, want) {
		t.Fatalf("BatchSplits = %v, want %v", got, want)
	}
	if got := BatchSplits("j", nil); got != nil {
		t.Fatalf("BatchSplits(nil) = %v", got)
	}
}
