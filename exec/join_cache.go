package exec

import (
	"cmp"
	"encoding/binary"
	"slices"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// The bounded key cache of an exact regular join (join_exact.go; docs/operations.md,
// "Flags"; docs/benchmarks.md, "State queries at a million keys"). Such a join keeps every
// row of both sides for ever, so with every key in memory its memory grows with its input.
// When its state is in a store outside the process (RocksDB), the operator keeps about
// Env.JoinCacheKeys join keys in memory, its splits sharing them evenly; the others are
// only in the store, and a row whose key is not in memory reads the key's rows back, of
// each side a Bloom filter of the sides that left memory (keyFilter, agg_cache.go) says
// may be there, and of a side's chunks the first unless the filter says it may have more
// (spill): a new key costs no read, a side without rows none, a side of one chunk one.
//
// A key leaves memory with both its sides, and comes back with both: an outer side's
// rows keep their number of matches in memory only (join_exact.go), and it is counted
// again from the other side's rows when the key comes back (recountKey).
//
// Exactly-once, as for the aggregation's cache: the store holds the last committed
// checkpoint and nothing else, so only a key whose rows in the store are its rows in memory
// may leave: unchanged since a save whose commit is known to be done. Keys leave at a
// checkpoint, after the save: the stage took it after the commit of its previous
// checkpoint (stage.checkpoint), so a key written by an earlier save is committed, and a
// key written by this save (its commit may still be running) or changed since stays. The
// same holds for a key whose last row went (remove, sweep): its stored rows' deletes are
// in the checkpoint after, so it stays in the map, empty, until the checkpoint after that
// one; out of the map, a row of the key would read the deleted rows back from the store.
//
// Which keys leave: when a split holds more keys (of both sides) or more rows than its
// share of the cache at a checkpoint, the least recently used keys that may leave go until
// a quarter of both shares is free, or as many as may. The rows are bounded too
// (cacheRows: joinRowsPerKey a key on average, and joinCacheBytes of them once the size of
// a row is known): an interval join's hot keys (Nexmark q9's auctions) hold hundreds of
// rows each, so keys alone bound nothing. A checkpoint is asked
// for when the keys changed or the rows put in memory since the last one outgrow the
// share (askIfFull), so that what may leave memory is committed at any input rate. A split loaded from the store (a restart, a
// split moving in) loads no rows: every stored key is put in the filter and read back
// when a row needs it.
//
// Inner joins whose rows expire by time (an interval join; a regular join with a state
// TTL) use the same cache: a key leaves memory with both sides' rows (their heap entries
// go with them), and comes back with the rows that have not expired at the split's
// watermark — those a key in memory would still hold, so the output is the same with or
// without the cache. A key in the store that no row asks for again is not read back to
// expire: once per expiry horizon of watermark progress (sweepEvery) the store's keys not
// in memory are scanned as the next checkpoint's save begins, and a side of a key whose
// every row expired is deleted in that checkpoint; a side with rows still live stays whole (its expired rows are dropped
// when it is read back). Outer joins of these modes keep every key in memory: an unmatched
// row must be emitted when it expires, which a key in the store would not be.
//
// Sides in part (those inner joins whose rows expire): a key that stays in memory because
// rows keep arriving for it (a hot auction of Nexmark q9) would otherwise hold every row
// it received within the expiry horizon. Once a save's commit is observed (the stage
// reports each commit's epoch to the operator, joinOp.committed), the rows of a side that
// save wrote — those of its committed chunks, up to base — leave memory while the key
// stays: the side is then in part (k.base > 0), its newer rows in memory, the older only
// in the store. A side that is probed (a row of the other side asked for its matches),
// rewritten or changed since the save stays whole. A side in part is made whole
// (makeWhole: its chunks before base read back, expired rows dropped) before a row of the
// other side is matched against it or the side is rewritten, so every match and every
// output is the same as with the whole side in memory. When the watermark reaches the
// end of time every stored row expired: the split's rows are deleted by one range
// (dropStored) and the sides in part hold nothing more.
//
// The cache is off (every key in memory) with the in-memory store unless set, for the
// other join modes (temporal and processing-time joins, window joins: theirs leave memory
// by window, join_window.go), and for outer joins whose rows expire.

// DefaultJoinCacheKeys is the join keys an exact regular join keeps in memory (its splits
// together) when Env.JoinCacheKeys is 0 and the state is not in memory.
const DefaultJoinCacheKeys = 1 << 14

// joinCacheSize is the cache size of join n over store given the setting (Env: 0 is the
// default, negative is off); 0 means no cache.
func joinCacheSize(n *planner.JoinNode, store state.Store, setting int) int {
	if setting < 0 || store == nil {
		return 0
	}
	switch {
	case n.Mode == planner.JoinRegular && n.TTL <= 0:
	case (n.Mode == planner.JoinRegular || n.Mode == planner.JoinInterval) && n.Kind == sql.JoinInner:
	default:
		return 0
	}
	if _, mem := store.(*state.Memory); mem && setting == 0 {
		return 0
	}
	if setting == 0 {
		return DefaultJoinCacheKeys
	}
	return max(setting, 2)
}

// setCache bounds the join's keys in memory to size (0: no bound). Rows are then
// allocated alone, not from slabs: a slab lives while any of its rows does, so a slab
// would keep the rows of keys gone from memory alive.
func (j *joinOp) setCache(size int) {
	j.cacheMax = size
	if size > 0 {
		j.ownAlloc = [2]bool{true, true}
	}
}

// joinCache is a split's part of the cache.
type joinCache struct {
	// spilled: some of the split's keys are in the store and not in memory, so a key not
	// found in memory is looked for in the store when gone says it may be there.
	spilled bool
	gone    *keyFilter
	probe   []byte // goneSide's and spill's filter key
	// tick is the split's row clock (jkey.touch); saves numbers the split's saves
	// (jkey.savedAt), from 1 (0 is a key loaded or read back).
	tick  uint32
	saves uint16
	ages  []keyAge
	reads int64 // keys read back, for tests
	// trims counts the sides of keys in memory that left it in part, wholes those read
	// back whole again, for tests; trimmed: some did since the last checkpoint, whose
	// rows' heap entries are to go.
	trims, wholes int64
	trimmed       bool
	// pend are the sides of keys the save numbered pendSave wrote, for the checkpoint of
	// epoch pendEpoch, that no row of the other side looked at: their rows leave memory
	// once it is committed (trimCommitted).
	pend      []*jkey
	pendEpoch int64
	pendSave  uint16
	// dropAll: every stored row expired (the end of the input): the next save deletes the
	// split's rows by one range.
	dropAll bool
	// sweptSides counts the sides of keys a sweep of the store deleted before the end of
	// the input, for tests.
	sweptSides int64
	// swept is the watermark of the last sweep of the store (an expiring join's; started
	// once the first watermark came); sweepDue: that sweep is to run as the next save
	// begins (sweepStore).
	swept    int64
	started  bool
	sweepDue bool
	// floor is the watermark of the save the split was loaded from (an expiring join's):
	// rows expired then were gone from memory, so a row read back that expired at floor
	// is dropped even before a watermark comes.
	floor int64
	// asked: the split's changed keys outgrew its share and asked for a checkpoint
	// (joinOp.full) since the last save.
	asked bool
	// forgot are the keys a side of which lost its last row since the last eviction: the
	// deletes of its stored rows are in this checkpoint, whose commit may still be running,
	// so the key may not leave before the next one (the side is gone from memory; the store
	// would still give its rows back).
	forgot map[string]struct{}
}

// spill records that side's rows of join key key are in the store, in chunks chunks, and
// not in memory. The filter holds the side and the key, and the
// side, the key and a mark when it has more than one chunk: a key read back then reads
// only the sides the filter may hold, and only chunk 0 of a side it holds no mark for, not
// a chunk after the last that is not there (the filter's false positives cost one read
// more, never one less).
func (c *joinCache) spill(side int, key string, chunks int64) {
	if c.gone == nil {
		c.gone = newKeyFilter(keyFilterBits)
	}
	c.spilled = true
	c.probe = append(append(c.probe[:0], byte(side)), key...)
	c.gone.add(c.probe)
	if chunks > 1 {
		c.gone.add(append(c.probe, 0xff))
	}
}

// goneSide reports whether side's rows of key may be in the store though not in memory
// (side, and whether it may have more than one chunk: spill).
func (c *joinCache) goneSide(side int, key string) (stored, more bool) {
	c.probe = append(append(c.probe[:0], byte(side)), key...)
	if !c.gone.has(c.probe) {
		return false, false
	}
	return true, c.gone.has(append(c.probe, 0xff))
}

// touchKey marks key as used by the row at hand and, when neither side holds it in memory
// and it may be in the store, reads both sides' rows of it back.
func (j *joinOp) touchKey(sp *joinSplit, key string) error {
	c := &sp.cache
	c.tick++
	k0, k1 := sp.keys[0][key], sp.keys[1][key]
	if k0 != nil {
		k0.touch = c.tick
	}
	if k1 != nil {
		k1.touch = c.tick
	}
	if k0 != nil || k1 != nil || !c.spilled {
		return nil
	}
	read := false
	for side := range 2 {
		stored, more := c.goneSide(side, key)
		if !stored {
			continue
		}
		k, err := j.readKey(sp, side, key, more)
		if err != nil {
			return &StateError{Op: j.id, Split: sp.name, Err: err}
		}
		if k != nil {
			k.touch = c.tick
			sp.keys[side][key] = k
			read = true
		}
	}
	if read {
		c.reads++
		if j.exact {
			j.recountKey(sp, key)
		}
	}
	return nil
}

// readKey reads side's rows of key from the store, or nil when it holds none: its chunks
// one Get each, so a key read back with more than a few chunks is rewritten as one at its
// next save; chunk 0 alone unless more (the side may have more than one: spill).
func (j *joinOp) readKey(sp *joinSplit, side int, key string, more bool) (*jkey, error) {
	k := &jkey{key: key, side: side}
	to := int64(1)
	if more {
		to = -1
	}
	rows, n, dropped, err := j.readChunks(sp, k, to)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	k.rows, k.chunks = rows, n
	if len(k.rows) == 0 {
		j.forget(sp, k) // every row expired: the stored chunks go at the next checkpoint
		return nil, nil
	}
	k.saved = len(k.rows)
	if !j.exact {
		for _, r := range k.rows {
			sp.exp[side].push(r)
		}
	}
	if dropped || k.chunks > maxReadChunks {
		j.markChanged(sp, k)
	}
	return k, nil
}

// readChunks reads the rows of k's side and key in its stored chunks 0..to-1 (to < 0: every
// chunk there is), a row of an expiring join that expired then left out (dropped). It
// returns the rows and the chunks read.
func (j *joinOp) readChunks(sp *joinSplit, k *jkey, to int64) (rows []*jrow, n int64, dropped bool, err error) {
	width := j.node.LeftWidth
	if k.side == 1 {
		width = j.node.RightWidth
	}
	for ; to < 0 || n < to; n++ {
		j.grpBuf = j.stateKeyTo(j.grpBuf[:0], sp, k.side, k.key, n)
		v, ok, err := j.store.Get(j.grpBuf)
		if err != nil {
			return nil, 0, false, err
		}
		if !ok {
			break
		}
		err = decodeJoinRows(v, width, func(f byte, ts int64, row sql.Row) {
			if j.exact {
				ts = 0 // an exact join's time is its match count, counted again
			} else if j.expiredThen(sp, k.side, row, ts) {
				dropped = true // a key in memory would have dropped it by now
				return
			}
			r := j.newRow(row, ts, k)
			r.matched, r.deleted = f&1 != 0, f&2 != 0
			rows = append(rows, r)
		})
		if err != nil {
			return nil, 0, false, err
		}
	}
	return rows, n, dropped, nil
}

// trims reports whether sides of keys in memory may leave it in part: an inner join whose
// rows expire, with the cache on (see "Sides in part" at the top).
func (j *joinOp) trims() bool { return j.cacheMax > 0 && !j.exact }

// trimSide lets the rows of k committed by earlier saves, rows[:committed] in its chunks
// up to base, leave memory while the key stays (after a save, which wrote the rest or
// will; see "Sides in part").
func (j *joinOp) trimSide(sp *joinSplit, k *jkey, committed int, base int64) {
	for _, r := range k.rows[:committed] {
		r.dead = true // its heap entry goes at the end of the checkpoint
	}
	j.kept.Add(-int64(committed))
	k.rows = append([]*jrow(nil), k.rows[committed:]...)
	k.saved -= committed
	k.base = base
	sp.cache.trimmed = true
	sp.cache.trims++
}

// trimCommitted lets the rows of the sides in sp.cache.pend leave memory once the
// checkpoint that wrote them is committed (the operator's stage learns of it between
// batches; a side looked at, rewritten or written again since stays whole).
func (j *joinOp) trimCommitted(sp *joinSplit) {
	c := &sp.cache
	if j.committed() < c.pendEpoch {
		return
	}
	for _, k := range c.pend {
		if k.savedAt == c.pendSave && !k.probed && !k.rewrite && k.saved > 0 && k.dead == 0 && sp.keys[k.side][k.key] == k {
			j.trimSide(sp, k, k.saved, k.chunks)
		}
	}
	clear(c.pend)
	c.pend = c.pend[:0]
	c.pend = nil
	if c.trimmed {
		c.trimmed = false
		sp.exp[0].dropDead()
		sp.exp[1].dropDead()
	}
}

// makeWhole reads the rows of side k in part back from the store (its chunks before base,
// committed), before those in memory; it reports whether rows expired since were dropped
// (the store then holds more than memory).
func (j *joinOp) makeWhole(sp *joinSplit, k *jkey) (dropped bool, err error) {
	if k.base == 0 {
		return false, nil
	}
	old, n, dropped, err := j.readChunks(sp, k, k.base)
	if err == nil && n < k.base {
		err = errBadJoin // a committed chunk is missing
	}
	if err != nil {
		return false, &StateError{Op: j.id, Split: sp.name, Err: err}
	}
	for _, r := range old {
		sp.exp[k.side].push(r)
	}
	k.rows = append(old, k.rows...)
	k.saved += len(old)
	k.base = 0
	sp.cache.wholes++
	return dropped, nil
}

// maxReadChunks is how many chunks a key read back may have before its next save rewrites
// it as one.
const maxReadChunks = 4

// cacheShare is a split's share of the cache: its splits share it evenly.
func (j *joinOp) cacheShare() int { return max(j.cacheMax/max(len(j.splits), 1), 2) }

// joinRowsPerKey is the rows the cache holds per key of its size, on average.
const joinRowsPerKey = 4

// joinCacheBytes bounds the memory of the rows the caches of a job's joins hold, their
// splits together (each join its share: joinOp.joins), once the size of a row is known
// (rowEst): a join's rows carry both sides' columns, often long
// strings (Nexmark's extra columns: q23's rows are about a kilobyte), so a bound in rows
// alone let the cache hold over 50 MB of them.
const joinCacheBytes = 16 << 20

// cacheRows is the rows the cache holds, its splits together: joinRowsPerKey a key, and
// no more than joinCacheBytes of them.
func (j *joinOp) cacheRows() int {
	rows := j.cacheMax * joinRowsPerKey
	if j.rowEst > 0 {
		rows = min(rows, max(joinCacheBytes/max(j.joins, 1)/j.rowEst, 64))
	}
	return rows
}

// estimateRows updates rowEst, the bytes of a row the join put in memory on average, with
// those put in memory since the last checkpoint (at a checkpoint).
func (j *joinOp) estimateRows() {
	if j.added == 0 {
		return
	}
	j.rowEst = smoothed(j.rowEst, max(j.addedBytes/j.added, 1))
}

// askIfFull asks for a checkpoint when split sp's keys changed since the last one, or the
// rows the join put in memory since then, outgrow their share (once per checkpoint).
// When they outgrow it pressFactor times, it holds the job's input until the checkpoint
// (pressure.go); the rows count in bytes too (pressBytes).
func (j *joinOp) askIfFull(sp *joinSplit) {
	if j.cacheMax == 0 || j.full == nil {
		return
	}
	press := pressBytes / max(j.joins, 1)
	if !sp.cache.asked && (len(sp.dirty) > j.cacheShare() || j.added > j.cacheRows() || j.addedBytes > press/pressFactor) {
		sp.cache.asked = true
		j.full()
	}
	// Many times over: the job's input waits for that checkpoint.
	j.holdIf(len(sp.dirty) > pressFactor*j.cacheShare() || j.added > pressFactor*j.cacheRows() || j.addedBytes > press)
}

// keyAge is a key that may leave memory: its age, its sides and rows.
type keyAge struct {
	age         uint32
	sides, rows int
}

// evictKeys lets the least recently used keys that may leave memory go when split sp holds
// more than its share of the cache (after a save; see the comment at the top).
func (j *joinOp) evictKeys(sp *joinSplit) {
	defer clear(sp.cache.forgot)
	size := j.cacheShare()
	rowSize := max(j.cacheRows()/max(len(j.splits), 1), 2)
	held := len(sp.keys[0]) + len(sp.keys[1])
	rows := 0
	for side := range 2 {
		for _, k := range sp.keys[side] {
			rows += len(k.rows) - k.dead
		}
	}
	if held <= size && rows <= rowSize {
		return
	}
	c := &sp.cache
	// may: the key (both its sides) may leave; its age is that of its side used last.
	may := func(key string) (keyAge, bool) {
		if _, ok := c.forgot[key]; ok {
			return keyAge{}, false
		}
		ka := keyAge{age: ^uint32(0)}
		for side := range 2 {
			k := sp.keys[side][key]
			if k == nil {
				continue
			}
			if k.dirty || k.emptied || k.base == 0 && (len(k.rows) == 0 || k.dead > 0) || k.savedAt == c.saves && k.savedAt != 0 {
				return keyAge{}, false
			}
			ka.age = min(ka.age, c.tick-k.touch)
			ka.sides++
			ka.rows += len(k.rows) - k.dead
		}
		return ka, true
	}
	ages := c.ages[:0]
	for side := range 2 {
		for key := range sp.keys[side] {
			if side == 1 && sp.keys[0][key] != nil {
				continue // counted with side 0
			}
			if ka, ok := may(key); ok {
				ages = append(ages, ka)
			}
		}
	}
	c.ages = ages
	if len(ages) == 0 {
		return
	}
	// Drop the oldest keys until a quarter of both shares is free, and every key as old
	// as the last of them (a few more on ties).
	slices.SortFunc(ages, func(a, b keyAge) int { return cmp.Compare(b.age, a.age) })
	oldest := ages[len(ages)-1].age
	for _, ka := range ages {
		if held <= size-size/4 && rows <= rowSize-rowSize/4 {
			break
		}
		oldest = ka.age
		held -= ka.sides
		rows -= ka.rows
	}
	for side := range 2 {
		for key := range sp.keys[side] {
			if side == 1 && sp.keys[0][key] != nil {
				continue
			}
			if ka, ok := may(key); !ok || ka.age < oldest {
				continue
			}
			for s := range 2 {
				if k := sp.keys[s][key]; k != nil {
					j.kept.Add(-int64(len(k.rows) - k.dead))
					delete(sp.keys[s], key)
					if !j.exact {
						for _, r := range k.rows {
							r.dead = true // its heap entry goes below
						}
					}
					if k.chunks > 0 {
						c.spill(s, key, k.chunks)
					}
				}
			}
		}
	}
	if !j.exact {
		c.trimmed = true // the rows' heap entries go (Control)
	}
}

// expiredThen reports whether a stored row of side (an expiring join's) expired at the
// split's watermark or at the one of the save it was loaded from.
func (j *joinOp) expiredThen(sp *joinSplit, side int, row sql.Row, ts int64) bool {
	wm := max(sp.wm, sp.cache.floor)
	return wm != MinWatermark && j.expired(side, &jrow{row: row, ts: ts}, wm)
}

// liveChunk reports whether a stored chunk of side's rows (decodeJoinRows's form) holds a
// row not expired at wm. It decodes of each row its time and the column its expiry reads
// (untilColumn), up to the first live row: a sweep reads every chunk in the store, and
// decoding their rows whole was most of its cost (docs/benchmarks.md, "A join's sweep
// decodes what expiry reads"). A malformed chunk fails as decodeJoinRows fails on it when
// its rows come before the first live one.
func (j *joinOp) liveChunk(v []byte, side int, wm int64) (bool, error) {
	width, col := j.node.LeftWidth, j.untilColumn(side)
	if side == 1 {
		width = j.node.RightWidth
	}
	cnt, n := binary.Uvarint(v)
	if n <= 0 || cnt > uint64(len(v)) {
		return false, errBadJoin
	}
	return walkJoinRows(v[n:], cnt, width, func(_ byte, ts int64, b []byte) (int, int, bool, error) {
		until, w, m, err := sql.DecodeRowColumn(b, col)
		return w, m, err == nil && !j.expiredAt(side, ts, until, wm), err
	})
}

// metaSide marks the entry of an expiring join's split that holds the watermark of its
// last save, in the side byte of its key (stateKey).
const metaSide = 2

// sweepEvery is how much the watermark advances between sweeps of the store for keys
// whose rows all expired (an expiring join's cache): its state TTL, its interval's width
// or, when a row's own column bounds it, ten seconds; at least one second.
func (j *joinOp) sweepEvery() int64 {
	n := j.node
	d := n.TTL
	if n.Mode == planner.JoinInterval {
		d = n.Upper - n.Lower
		if n.HasUntil {
			d = 10_000
		}
	}
	return max(d, 1000)
}

// dropStored deletes every stored row of split sp at the next checkpoint, by one range, when
// the watermark reached its end: every row expired (those in memory are gone already), and
// a scan of the store for them (sweepStore) would cost a delete a key. The sides in part
// in memory hold no rows any more and leave at the checkpoint.
func (j *joinOp) dropStored(sp *joinSplit) {
	sp.cache.dropAll = true
	for side := range 2 {
		for _, k := range sp.keys[side] {
			if k.base == 0 {
				continue
			}
			k.base, k.chunks, k.saved, k.dirty, k.rewrite = 0, 0, 0, false, false
			if !k.emptied {
				k.emptied = true
				sp.emptied = append(sp.emptied, k)
			}
		}
	}
	sp.cache.spilled = false
	sp.cache.gone = nil
}

// sweepStore deletes, in checkpoint batch b, the sides of split sp's keys out of memory
// whose every stored row expired at watermark wm (see the top of the file). It runs as the
// checkpoint's save begins (the sweep is due since a watermark, sweepDue): the store then
// holds the checkpoint before, and the deletes go straight into the batch, so a sweep that
// deletes many keys holds each once, encoded, not also in a list until the save.
func (j *joinOp) sweepStore(sp *joinSplit, wm int64, b *state.Batch) error {
	prefix := state.SplitPrefix(nil, j.job, j.id, sp.name)
	var run []byte // the (side, key) of the chunks at hand
	runKeys := j.sweepKeys[:0]
	var part *jkey // the side in memory in part the chunks are of, if so
	live := false
	end := func() {
		switch {
		case len(run) == 0 || live:
		case part != nil:
			// Every stored row of a side in part expired: the side is what is in memory.
			j.forget(sp, part)
			part.base = 0
			if len(part.rows) > 0 {
				j.markChanged(sp, part)
			} else if !part.emptied {
				part.emptied = true
				sp.emptied = append(sp.emptied, part)
			}
		default:
			for _, k := range runKeys {
				b.Delete(k)
			}
			if wm != MaxWatermark {
				sp.cache.sweptSides++
			}
		}
		run, runKeys, part, live = run[:0], runKeys[:0], nil, false
	}
	err := j.store.Scan(prefix, func(key, v []byte) error {
		if len(key) < len(prefix)+17 {
			return &StateError{Op: j.id, Split: sp.name, Err: errBadJoin}
		}
		kb := key[len(prefix) : len(key)-16]
		side := int(kb[0])
		if side == metaSide {
			return nil
		}
		if side > 1 {
			return &StateError{Op: j.id, Split: sp.name, Err: errBadJoin}
		}
		if len(run) == 0 || string(kb) != string(run) {
			// A side's chunks are contiguous: key encodings are prefix-free.
			end()
			run = append(run[:0], kb...)
			if k := sp.keys[side][string(kb[1:])]; k != nil && k.base > 0 {
				part = k
			}
		}
		if live {
			return nil
		}
		if part == nil && (sp.keys[0][string(kb[1:])] != nil || sp.keys[1][string(kb[1:])] != nil) {
			live = true // in memory: its rows expire there
			return nil
		}
		ok, err := j.liveChunk(v, side, wm)
		if err != nil {
			return &StateError{Op: j.id, Split: sp.name, Err: err}
		}
		live = ok
		runKeys = append(runKeys, append([]byte(nil), key...))
		return nil
	})
	end()
	clear(runKeys[:cap(runKeys)])
	j.sweepKeys = runKeys[:0]
	return err
}
