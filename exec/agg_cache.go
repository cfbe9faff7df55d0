package exec

import (
	"fmt"
	"hash/maphash"
	"slices"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// The bounded group cache of an aggregation without a window (docs/operations.md, "Flags";
// docs/benchmarks.md, "Aggregations without a window in bounded memory"). Such an aggregation keeps its groups for ever, so with every group in
// memory its memory grows with the number of keys. When its state is in a store outside
// the process (RocksDB), the operator keeps about Env.AggCacheGroups groups in memory, its
// splits sharing them evenly; the others are only in the store, and a row whose group is
// not in memory reads it back when a Bloom filter of the keys that left memory (keyFilter)
// says it may be there: a new group costs no read.
//
// Exactly-once: the store holds the state of the last committed checkpoint and nothing
// else, because nothing but a checkpoint's batch writes it. So only a group whose state
// in the store is its state in memory may leave memory: a group that has not changed since
// a checkpoint whose commit is known to be done. A stage waits for the commit of its last
// checkpoint before it takes the next one (stage.checkpoint), so a group written by any
// save but the split's last one is committed; a group written by the last save (its commit
// may still be running) or changed since stays. A crash thus restores the last checkpoint,
// and a group read back is its state as of the checkpoint it was last written by, which is
// its state when it left.
//
// Which groups leave: when a split's groups reach the cache's size, the least recently
// used groups that may leave go until a quarter of the cache is free (a group's last row
// is its touch on the split's row clock), and the window's arrays are rebuilt without
// them, as state TTL's expiry does. The changed groups of the last two checkpoint intervals
// can exceed the size: they stay, and the next eviction comes once a quarter of the size
// more groups came. When they reach pressFactor times the size, the job's root stages
// read no input until a checkpoint has saved them (Job.pressed).
//
// The cache is off (every group in memory, as with the in-memory store) for a global
// aggregation, with a state TTL (expiry needs every group's last row), for EMIT ON CLOSE
// (which emits every group at the end), and for key types whose equal values may encode
// differently (DOUBLE, DECIMAL, JSON: the store finds a group by its key's encoding).

// DefaultAggCacheGroups is the groups an aggregation without a window keeps in memory (its
// splits together) when Env.AggCacheGroups is 0 and the state is not in memory.
const DefaultAggCacheGroups = 1 << 14

// groupCache is a split's part of the cache.
type groupCache struct {
	// spilled: some of the split's groups are in the store and not in memory, so a group
	// not found in memory is looked for in the store when gone says it may be there.
	spilled bool
	gone    *keyFilter
	// tick is the split's row clock (group.touch); saves numbers the split's saves
	// (group.saved), from 1 (0 is a group loaded or read back); evictAt is the number of
	// groups at which the next eviction runs.
	tick    uint32
	saves   uint16
	evictAt int
}

// nextSave numbers a new save of the split: the groups of the save before are committed.
func (c *groupCache) nextSave() {
	c.saves++
	if c.saves == 0 {
		c.saves = 1
	}
}

// aggCacheSize is the cache size of aggregation n over store given the setting (Env:
// 0 is the default, negative is off); 0 means no cache.
func aggCacheSize(n *planner.AggregateNode, store state.Store, setting int) int {
	if setting < 0 || store == nil || n.Window.Kind != planner.WindowNone || n.Emit == planner.EmitOnClose ||
		n.TTL > 0 || len(n.Keys) == 0 || len(n.KeyTypes) != len(n.Keys) {
		return 0
	}
	if _, mem := store.(*state.Memory); mem && setting == 0 {
		return 0
	}
	for _, t := range n.KeyTypes {
		switch t.Kind {
		case sql.KindBool, sql.KindInt, sql.KindBigInt, sql.KindVarchar, sql.KindTimestamp:
		default:
			return 0
		}
	}
	if setting == 0 {
		return DefaultAggCacheGroups
	}
	return max(setting, 4)
}

// canonKeys gives a.keys' integers their key column's kind, so that a group's stored key
// is the same encoding whichever integer kind its first row had.
func (a *aggOp) canonKeys() {
	for i, v := range a.keys {
		if t := a.node.KeyTypes[i].Kind; v.K != t && v.K.IsInteger() && t.IsInteger() {
			a.keys[i].K = t
		}
	}
}

// fetch reads the group of a.keys (hash h) back from the store into w, as a persisted
// group, and returns it, or -1 when the store has none. A failure of the store or of the
// stored state is left in a.storeErr.
func (a *aggOp) fetch(sp *aggSplit, w *win, h uint64) int32 {
	a.canonKeys()
	a.enc = sql.AppendRow(a.enc[:0], a.keys)
	if !sp.gone.has(a.enc) {
		return -1 // a group that never left memory: new
	}
	a.kbuf = state.Key(a.kbuf[:0], a.job, a.id, sp.name, a.enc, 0, 0)
	var accs []accum
	fail := func(err error) int32 {
		a.storeErr = &StateError{Op: a.id, Split: sp.name, Err: err}
		return -1
	}
	decode := func(v []byte) error {
		var err error
		if _, _, _, accs, err = decodeGroupState(v, a.nk, a.na); err != nil {
			return err
		}
		for j := range accs {
			if err := a.node.Aggs[j].Func.Decode(&accs[j]); err != nil {
				return fmt.Errorf("%s: %w", a.node.Aggs[j].Text, err)
			}
		}
		return a.fams.join(accs)
	}
	if a.lay.sets == 0 {
		v, ok, err := a.store.Get(a.kbuf)
		if err != nil {
			return fail(err)
		}
		if !ok {
			return -1
		}
		if err := decode(v); err != nil {
			return fail(err)
		}
	} else {
		// The group's value, then its distinct chunks (keys extending the group's).
		gk := a.kbuf
		err := a.store.Scan(gk, func(key, value []byte) error {
			if len(key) == len(gk) {
				return decode(value)
			}
			if accs == nil {
				return fmt.Errorf("%w: a distinct chunk without its group", errBadState)
			}
			return addDistinctChunk(accs, key[len(gk):], value, a.fams)
		})
		if err != nil {
			return fail(err)
		}
		if accs == nil {
			return -1
		}
	}
	// (The row that asked marks the group changed, so distinct values an earlier version
	// kept inline go under their own keys at the next checkpoint, as after load.)
	g := int32(len(w.groups))
	w.groups = append(w.groups, group{hash: h, persisted: true})
	w.index(g)
	w.keys.add(a.keys)
	w.accs.add()
	w.seen = append(w.seen, sp.wm)
	a.lay.store(&w.accs, int(g), accs)
	return g
}

// evictable reports whether group gr may leave memory: unchanged since a save whose
// commit is done.
func (c *groupCache) evictable(gr *group) bool {
	return !gr.dirty && gr.saved != c.saves
}

// evict makes room in sp's window w (the pseudo-window of an aggregation without a
// window) when it holds evictAt groups or more: the least recently used groups that may
// leave go until a quarter of the cache is free, or as many as may. It returns the window
// that replaces w.
func (a *aggOp) evict(sp *aggSplit, w *win) *win {
	size := a.splitCache()
	target := size - size/4
	n := len(w.groups) - target // groups to drop
	ages := a.ages[:0]
	for g := range w.groups {
		if gr := &w.groups[g]; sp.evictable(gr) {
			ages = append(ages, sp.tick-gr.touch)
		}
	}
	a.ages = ages
	if len(w.groups)-len(ages) >= size && a.full != nil {
		// The groups that may not leave fill the cache: a checkpoint lets them.
		a.full()
	}
	// Many times over: the job's input waits for that checkpoint.
	a.holdIf(len(w.groups)-len(ages) >= pressFactor*size)
	if len(ages) == 0 || n <= 0 {
		sp.evictAt = len(w.groups) + max(size/4, 1)
		return w
	}
	// Drop the groups at least as old as the n-th oldest (a few more on ties).
	var oldest uint32
	if n >= len(ages) {
		oldest = 0
	} else {
		slices.Sort(ages)
		oldest = ages[len(ages)-n]
	}
	// A changed group is never evictable, so none is dropped.
	nw, moved := sp.rebuild(w, func(g int, gr *group) bool {
		if !sp.evictable(gr) || sp.tick-gr.touch < oldest {
			return false
		}
		a.enc = sql.AppendRow(a.enc[:0], w.keys.at(g))
		sp.spill(a.enc)
		return true
	})
	if a.pendW == w {
		// The batch's changed groups stay (changed, they are not evictable), renumbered.
		for i, g := range a.pend {
			a.pend[i] = moved[g]
		}
		a.pendW = nw
	}
	sp.evictAt = max(size, len(nw.groups)+max(size/4, 1))
	return nw
}

// splitCache is a split's share of the operator's cache: its splits share it evenly.
func (a *aggOp) splitCache() int { return max(a.cacheMax/max(len(a.splits), 1), 4) }

// spill records that the group whose keys encode as enc (sql.AppendRow) is in the store
// and not in memory.
func (c *groupCache) spill(enc []byte) {
	if c.gone == nil {
		c.gone = newKeyFilter(keyFilterBits)
	}
	c.spilled = true
	c.gone.add(enc)
}

// keyFilterBits is the size of a split's filter of groups that left memory: 256 KiB. With
// 150,000 groups gone from a split it answers "maybe" for about 1 % of new groups (which
// then cost a read of the store); with more it degrades gradually, never wrongly.
const keyFilterBits = 1 << 21

// keyFilter is a Bloom filter of group keys (their encodings), of a fixed size: whether a
// group absent from memory may be in the store. A new group (most rows of a key never seen
// before) is then known new without asking the store.
type keyFilter struct {
	bits []uint64
	seed maphash.Seed
}

func newKeyFilter(nbits int) *keyFilter {
	return &keyFilter{bits: make([]uint64, nbits/64), seed: maphash.MakeSeed()}
}

// probes are the three bit positions of key (double hashing of one 64-bit hash).
func (f *keyFilter) probes(key []byte) (p [3]uint64) {
	h := maphash.Bytes(f.seed, key)
	h1, h2 := h, h>>32|1
	n := uint64(len(f.bits) * 64)
	for i := range p {
		p[i] = (h1 + uint64(i)*h2) % n
	}
	return p
}

func (f *keyFilter) add(key []byte) {
	for _, b := range f.probes(key) {
		f.bits[b/64] |= 1 << (b % 64)
	}
}

// has reports whether key may have been added (a nil filter holds nothing).
func (f *keyFilter) has(key []byte) bool {
	if f == nil {
		return false
	}
	for _, b := range f.probes(key) {
		if f.bits[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}
