package exec

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// joinOp joins its two inputs (0: left, 1: right), which the planner exchanged on the join
// keys, so a key's rows of both sides are in one split. State is per split and per side: a
// key's rows, each with its time (the side's event time, a window's end, a version's time),
// whether it found a match (outer joins) and, for a table, whether it is a delete. How rows
// are kept and when they are emitted depends on the mode (planner.JoinMode):
//
//   - interval: a row is probed against the other side's rows of its key when it arrives
//     and kept while a match is possible; it expires when the split's watermark passes the
//     end of its interval (an unmatched row of an outer side is then emitted with NULLs);
//   - window: rows wait for their window to close, then every match of the window is
//     emitted, and the unmatched rows of outer sides with NULLs; rows are kept per window,
//     not per key, encoded, and leave memory for the store once checkpointed
//     (join_window.go);
//   - temporal: left rows wait until the watermark passes their time, then take the table's
//     version valid then; versions older than the one valid at the watermark are dropped;
//   - current: versions replace each other at once; left rows take the current one;
//   - regular without a state TTL (exact, join_exact.go): each side's rows are kept until
//     they are deleted (a retract input's deletes; a table's new version of a key or its
//     delete replaces the key's row); a row's matches are emitted when it arrives and
//     retracted when it is deleted, and an outer side's row without a match is emitted
//     with NULLs until its first match arrives (its match count is its time);
//   - regular with a state TTL: both sides are kept for the TTL, matches emitted as they
//     happen.
//
// A row older than its own input's watermark (interval, temporal, a version) or of a closed
// window is late: counted and sent to the late output, never applied. State is written at
// checkpoints under the operator's id, per (side, join key) in chunks (per (side, window)
// for window joins): a checkpoint writes the rows appended since the last one as a new
// chunk and rewrites a key only when its older rows changed (jkey).
type joinOp struct {
	node  *planner.JoinNode
	job   string
	id    string
	store state.Store
	// late is each input's late output (its own stream's late_topic / late_path).
	late [2]*sideOutput
	cnt  *counters

	splits map[string]*joinSplit
	keyBuf []byte
	grpBuf []byte
	// Decoded rows of a closing window (values, and where each row ends), the sides'
	// matched flags and the index of one side by key, reused (join_window.go).
	dec     []sql.Value
	decEnds []int
	decRows []sql.Row
	matched []bool
	index   map[string][]int32
	enc     []byte
	out     rowArena
	lateB   Batch
	lateRow []sql.Row
	nulls   [2]sql.Row // a side's row of NULLs
	joined  sql.Row
	rowKey  []byte
	// exact: a regular join without a state TTL (join_exact.go); changes: its rows end
	// with their change column.
	exact, changes bool
	ownAlloc       [2]bool // a side's rows are allocated alone, not from the slabs
	// Rows kept for a while (interval, window, waiting temporal rows) and their values are
	// carved from slabs: two allocations per few hundred rows instead of two per row. A slab
	// lives while any of its rows does, so rows that may live long (a table's versions) are
	// allocated alone.
	rowSlab []jrow
	valSlab []sql.Value
	// kept counts the rows held in memory, for StateRows (read by other goroutines).
	kept atomic.Int64
	// cacheMax bounds the keys a join keeps in memory, its splits together (0: no bound),
	// and with them its rows (cacheRows; join_cache.go); full asks for a checkpoint when
	// the keys changed or the rows put in memory since the last one outgrow their share;
	// pressure holds the job's input when they are pressFactor times the share.
	cacheMax int
	full     func()
	pressure
	// committed is the last epoch committed of the join's checkpoints (nil: not known, as
	// when the operator runs alone); epoch is the one of the checkpoint being saved.
	committed func() int64
	epoch     int64
	// added counts the rows put in memory (kept or read back) since the last checkpoint
	// (join_cache.go: the cache's rows).
	added int
	// addedBytes is about the memory of those rows (rowBytes; pressure.go, pressBytes);
	// rowEst, the bytes of a row on average (join_cache.go, cacheRows).
	addedBytes int
	rowEst     int
	// joins is how many joins of the job have a cache (at least 1): they share the job's
	// bytes of rows (joinCacheBytes, pressBytes) evenly.
	joins int
	// logf receives notices (a window join's dominance miss); nil discards them.
	logf func(format string, args ...any)
	// sweepKeys is sweepStore's scratch list of one side's stored chunks.
	sweepKeys [][]byte
}

// WatermarkHold is how far behind the watermark the event times of the rows the join emits
// may be: an interval join emits a match when its second row arrives, the first kept up to
// the interval. A regular join does not hold the watermark back: holding it by the state
// TTL (hours, days) would stall every event-time operator after it that long; its rows'
// times are not event times (as in Flink SQL), see docs/sql.md "Joins".
func (j *joinOp) WatermarkHold() int64 {
	if n := j.node; n.Mode == planner.JoinInterval {
		if n.HasUntil {
			// A match is emitted when its second row arrives: a right row's time is at
			// least its left's + Lower. The left rows' times are not event times here
			// (as a regular join's, docs/sql.md "Joins").
			return max(-n.Lower, 0)
		}
		return max(n.Upper, -n.Lower, 0)
	}
	return 0
}

// StateRows is the number of rows the join holds (both sides, every split).
func (j *joinOp) StateRows() int64 { return j.kept.Load() }

// newRow is a kept row holding a copy of r that outlives its batch.
func (j *joinOp) newRow(r sql.Row, ts int64, k *jkey) *jrow {
	j.kept.Add(1)
	j.added++
	j.addedBytes += rowBytes(r)
	if j.ownAlloc[k.side] {
		return &jrow{row: ownRow(r), ts: ts, k: k}
	}
	if len(j.rowSlab) == 0 {
		j.rowSlab = make([]jrow, 256)
	}
	jr := &j.rowSlab[0]
	j.rowSlab = j.rowSlab[1:]
	if len(j.valSlab) < len(r) {
		j.valSlab = make([]sql.Value, max(2048, len(r)))
	}
	row := j.valSlab[:len(r):len(r)]
	j.valSlab = j.valSlab[len(r):]
	for i, v := range r {
		row[i] = ownValue(v)
	}
	jr.row, jr.ts, jr.k = row, ts, k
	return jr
}

type jrow struct {
	row     sql.Row
	ts      int64
	matched bool
	deleted bool
	dead    bool
	k       *jkey
}

// jkey is one side's rows of one join key. Its rows are stored in chunks, one store entry
// each (the key with the chunk's number): a checkpoint after rows were only appended
// writes a new chunk of the appended rows, so a key that keeps growing (a hot key of a
// regular join) costs each checkpoint its new rows, not all of them.
// Any other change (a row removed or its flags changed, versions replaced) rewrites the
// key as one chunk, as does reaching maxJoinChunks.
type jkey struct {
	key     string
	side    int
	rows    []*jrow
	dirty   bool
	dead    int   // rows removed but still in rows (skipped; compacted away in bulk)
	rewrite bool  // rows other than appended ones changed since the last save
	saved   int   // rows[:saved] are stored, in chunks base..chunks-1
	chunks  int64 // stored chunks
	// base: chunks 0..base-1 are committed in the store and their rows not in memory (a
	// side of a key in memory may leave it in part; join_cache.go, "Sides in part"); 0 is
	// a side whole in memory. probed: the other side's rows looked at this one's since its
	// last save.
	base    int64
	probed  bool
	emptied bool // in joinSplit.emptied, to leave the map at the next sweep
	// touch is the split's row clock when the key was last used, savedAt the number of
	// the split's save that last wrote it (join_cache.go).
	touch   uint32
	savedAt uint16
	// idx indexes the live rows of a key with many rows of a side whose rows are deleted
	// (an exact join's retract input) by their encoded values (join_exact.go).
	idx map[string][]*jrow
}

// maxJoinChunks is how many chunks a key is stored in at most before a save rewrites it
// as one.
const maxJoinChunks = 64

type joinSplit struct {
	name  string
	wm    int64
	inWM  [2]int64 // each input's own watermark, when the stage reports it
	swept int64
	keys  [2]map[string]*jkey
	exp   [2]rowHeap // rows by the time they stop being needed (or, temporal left, are due)
	dirty []*jkey
	dels  [][]byte
	// emptied are keys whose last row went: they leave keys at the next checkpoint
	// (sweep) unless rows came back.
	emptied []*jkey
	// win is the state of a window join (join_window.go).
	win *windowState
	// cache is the split's part of an exact join's key cache (join_cache.go).
	cache joinCache
}

func newJoinOp(n *planner.JoinNode, job, id string, store state.Store, late *sideOutput, cnt *counters) *joinOp {
	j := &joinOp{node: n, job: job, id: id, store: store, late: [2]*sideOutput{late, late}, cnt: cnt, splits: map[string]*joinSplit{}}
	j.nulls[0] = make(sql.Row, n.LeftWidth)
	j.nulls[1] = make(sql.Row, n.RightWidth)
	j.exact = n.Mode == planner.JoinRegular && n.TTL <= 0
	j.changes = n.Changes != planner.AppendOnly
	// Rows that may live long while rows around them go (a table's versions, the rows of
	// a side whose rows are deleted) are allocated alone: a slab lives while any of its
	// rows does.
	j.ownAlloc[0] = n.LeftTable || j.exact && n.LeftChanges
	j.ownAlloc[1] = n.Mode == planner.JoinTemporal || n.Mode == planner.JoinCurrent || n.RightTable || j.exact && n.RightChanges
	return j
}

func (j *joinOp) split(name string) *joinSplit {
	sp := j.splits[name]
	if sp == nil {
		sp = &joinSplit{name: name, wm: MinWatermark, swept: MinWatermark, inWM: [2]int64{MinWatermark, MinWatermark},
			keys: [2]map[string]*jkey{{}, {}}, cache: joinCache{floor: MinWatermark}}
		j.splits[name] = sp
	}
	return sp
}

func (j *joinOp) InputWatermark(split string, in int, wm int64) {
	if in == 0 || in == 1 {
		sp := j.split(split)
		sp.inWM[in] = max(sp.inWM[in], wm)
	}
}

// lateBound is the time below which a row of input in is late: its input's watermark.
func (sp *joinSplit) lateBound(in int) int64 { return max(sp.wm, sp.inWM[in]) }

// markDirty notes that rows were appended to k since the last checkpoint.
func (j *joinOp) markDirty(sp *joinSplit, k *jkey) {
	if !k.dirty {
		k.dirty = true
		sp.dirty = append(sp.dirty, k)
	}
}

// markChanged notes that rows of k other than appended ones changed (removed, replaced,
// flags set): the next checkpoint rewrites the key.
func (j *joinOp) markChanged(sp *joinSplit, k *jkey) {
	k.rewrite = true
	j.markDirty(sp, k)
}

// outerSide reports whether side's unmatched rows are emitted (with NULLs): only then is
// a row's matched flag kept.
func (j *joinOp) outerSide(side int) bool {
	switch j.node.Kind {
	case sql.JoinLeft:
		return side == 0
	case sql.JoinRight:
		return side == 1
	case sql.JoinFull:
		return true
	}
	return false
}

// keyOf encodes side's join key values of r into j.keyBuf and returns them.
func (j *joinOp) keyOf(side int, r sql.Row) (string, bool) {
	if !j.appendKey(side, r) {
		return "", false
	}
	return string(j.keyBuf), true
}

// appendKey encodes side's join key values of r into j.keyBuf; false when one is NULL
// (NULL matches nothing).
func (j *joinOp) appendKey(side int, r sql.Row) bool {
	keys := j.node.LeftKeys
	if side == 1 {
		keys = j.node.RightKeys
	}
	j.keyBuf = j.keyBuf[:0]
	for _, k := range keys {
		v := k(r)
		if v.IsNull() {
			return false
		}
		j.keyBuf = sql.AppendKey(j.keyBuf, v)
	}
	return true
}

func (j *joinOp) getKey(sp *joinSplit, side int, key string) *jkey {
	k := sp.keys[side][key]
	if k == nil {
		k = &jkey{key: key, side: side, touch: sp.cache.tick}
		sp.keys[side][key] = k
	}
	return k
}

// emit appends the joined row of l and r (nil: NULLs) to the output when the residual
// condition holds (outer rows always pass); it reports whether it did.
func (j *joinOp) emit(l, r sql.Row, outer bool) bool {
	if l == nil {
		l = j.nulls[0]
	}
	if r == nil {
		r = j.nulls[1]
	}
	j.joined = append(append(j.joined[:0], l...), r...)
	if !outer && j.node.Residual != nil && !j.node.Residual(j.joined).Truth() {
		return false
	}
	j.out.vals = append(j.out.vals, j.joined...)
	j.out.endRow()
	return true
}

func (j *joinOp) Process(in int, b *Batch, out Emitter) error {
	sp := j.split(b.Split)
	if sp.cache.pend != nil {
		j.trimCommitted(sp)
	}
	n := j.node
	j.lateRow = j.lateRow[:0]
	for _, r := range b.Rows {
		// A window join keeps rows by window, not key: it only asks whether a key is NULL.
		var key string
		var ok bool
		if n.Mode == planner.JoinWindow {
			ok = !j.keysNull(in, r)
		} else {
			key, ok = j.keyOf(in, r)
		}
		if !ok {
			// A NULL key matches nothing and is not kept: an outer side's row goes out
			// alone at once (as PostgreSQL's outer joins give it), unless it is late.
			if j.exact {
				j.exactAlone(in, r)
				continue
			}
			if j.outerSide(in) {
				if j.lateAlone(sp, in, r) {
					j.lateRow = append(j.lateRow, r)
				} else if in == 0 {
					j.emit(r, nil, true)
				} else {
					j.emit(nil, r, true)
				}
			}
			continue
		}
		if n.Mode == planner.JoinWindow {
			if !j.windowRow(sp, in, r) {
				j.lateRow = append(j.lateRow, r)
			}
			continue
		}
		switch {
		case j.exact:
			if j.cacheMax > 0 {
				if err := j.touchKey(sp, key); err != nil {
					return err
				}
			}
			j.exactRow(sp, in, key, r)
			j.askIfFull(sp)
		case n.Mode == planner.JoinInterval, n.Mode == planner.JoinRegular:
			if j.cacheMax > 0 {
				if err := j.touchKey(sp, key); err != nil {
					return err
				}
				if other := sp.keys[1-in][key]; other != nil && other.base > 0 {
					dropped, err := j.makeWhole(sp, other)
					if err != nil {
						return err
					}
					if dropped {
						j.markChanged(sp, other)
					}
				}
			}
			j.probe(sp, in, key, r)
			j.askIfFull(sp)
		case n.Mode == planner.JoinTemporal:
			j.temporal(sp, in, key, r)
		case n.Mode == planner.JoinCurrent:
			j.current(sp, in, key, r)
		}
		if j.out.len() >= 1024 {
			if err := j.out.flush(b.Split, out); err != nil {
				return err
			}
		}
	}
	if len(j.lateRow) > 0 {
		j.cnt.late.Add(int64(len(j.lateRow)))
		if late := j.late[min(in, 1)]; late != nil {
			j.lateB.Split, j.lateB.Rows = b.Split, j.lateRow
			if err := late.Process(&j.lateB); err != nil {
				return err
			}
		}
	}
	return j.out.flush(b.Split, out)
}

// lateAlone reports whether row r of input in, which matches nothing, is late: by the
// same rule as a row that could match (its window end, its time, its as-of time).
func (j *joinOp) lateAlone(sp *joinSplit, in int, r sql.Row) bool {
	n := j.node
	col := -1
	switch n.Mode {
	case planner.JoinWindow:
		col = n.LeftEnd
		if in == 1 {
			col = n.RightEnd
		}
		v := r[col]
		return v.IsNull() || v.I <= sp.lateBound(in)
	case planner.JoinInterval:
		col = n.LeftTime
		if in == 1 {
			col = n.RightTime
		}
	case planner.JoinTemporal:
		if in == 0 {
			col = n.AsOf
		}
	}
	if col < 0 {
		return false
	}
	v := r[col]
	return v.IsNull() || v.I < sp.lateBound(in)
}

// probe handles a row of an interval or regular join: it is matched against the other
// side's rows of its key, then kept while it can still match.
func (j *joinOp) probe(sp *joinSplit, in int, key string, r sql.Row) {
	n := j.node
	tcol := n.LeftTime
	if in == 1 {
		tcol = n.RightTime
	}
	ts := sp.wm
	if tcol >= 0 {
		tv := r[tcol]
		if tv.IsNull() {
			j.lateRow = append(j.lateRow, r)
			return
		}
		ts = tv.I
	}
	if n.Mode == planner.JoinInterval && ts < sp.lateBound(in) {
		j.lateRow = append(j.lateRow, r)
		return
	}
	matched := false
	if other := sp.keys[1-in][key]; other != nil {
		other.probed = true
		for _, o := range other.rows {
			if o.dead {
				continue
			}
			l, rr, lt, rt := r, o.row, ts, o.ts
			if in == 1 {
				l, rr, lt, rt = o.row, r, o.ts, ts
			}
			if n.Mode == planner.JoinInterval && !j.inInterval(rt-lt) {
				continue
			}
			if j.emit(l, rr, false) {
				matched = true
				if !o.matched && j.outerSide(1-in) {
					o.matched = true
					j.markChanged(sp, other)
				}
			}
		}
	}
	k := j.getKey(sp, in, key)
	jr := j.newRow(r, ts, k)
	jr.matched = matched
	k.rows = append(k.rows, jr)
	sp.exp[in].push(jr)
	j.markDirty(sp, k)
}

func (j *joinOp) inInterval(d int64) bool {
	n := j.node
	if d < n.Lower || d == n.Lower && n.LowerOpen {
		return false
	}
	if n.HasUntil {
		return true // the upper bound is the residual's
	}
	return d < n.Upper || d == n.Upper && !n.UpperOpen
}

// expired reports whether row r of side can no longer match at watermark wm.
func (j *joinOp) expired(side int, r *jrow, wm int64) bool {
	var until sql.Value
	if c := j.untilColumn(side); c >= 0 {
		until = r.row[c]
	}
	return j.expiredAt(side, r.ts, until, wm)
}

// untilColumn is the column of side's rows whose value bounds the rows they match (an
// interval join's left row bounded by its own column), or -1: their time alone says when
// they expire.
func (j *joinOp) untilColumn(side int) int {
	if n := j.node; n.Mode == planner.JoinInterval && side == 0 && n.HasUntil {
		return n.LeftUntil
	}
	return -1
}

// expiredAt is expired for a row of side at time ts, with until its value at untilColumn
// (when it has one).
func (j *joinOp) expiredAt(side int, ts int64, until sql.Value, wm int64) bool {
	n := j.node
	switch n.Mode {
	case planner.JoinInterval:
		// Future rows of the other side have times >= wm.
		if side == 0 && n.HasUntil { // needs right <= the left row's own bound
			return until.IsNull() || wm > until.I
		}
		if side == 0 { // needs right <= left + upper
			end := ts + n.Upper
			return wm > end || n.UpperOpen && wm == end
		}
		end := ts - n.Lower // needs left <= right - lower
		return wm > end || n.LowerOpen && wm == end
	case planner.JoinRegular:
		return n.TTL > 0 && wm != MaxWatermark && ts < wm-n.TTL || wm == MaxWatermark
	}
	return false
}

// temporal handles a row of a temporal join: a version of the table (right) or a left row
// to be joined once the watermark passes its time.
func (j *joinOp) temporal(sp *joinSplit, in int, key string, r sql.Row) {
	n := j.node
	if in == 1 {
		tv := r[n.RightTime]
		if tv.IsNull() || tv.I < sp.lateBound(1) {
			j.lateRow = append(j.lateRow, r)
			return
		}
		k := j.getKey(sp, 1, key)
		v := j.newRow(r, tv.I, k)
		v.deleted = j.isDelete(r)
		// Versions stay sorted by time; a version at the same time replaces the earlier one.
		i := sort.Search(len(k.rows), func(i int) bool { return k.rows[i].ts >= v.ts })
		if i < len(k.rows) && k.rows[i].ts == v.ts {
			k.rows[i] = v
			j.kept.Add(-1)
		} else {
			k.rows = append(k.rows, nil)
			copy(k.rows[i+1:], k.rows[i:])
			k.rows[i] = v
		}
		j.pruneVersions(sp, k, j.pendingFloor(sp))
		j.markChanged(sp, k)
		return
	}
	tv := r[n.AsOf]
	if tv.IsNull() || tv.I < sp.lateBound(0) {
		j.lateRow = append(j.lateRow, r)
		return
	}
	k := j.getKey(sp, 0, key)
	jr := j.newRow(r, tv.I, k)
	k.rows = append(k.rows, jr)
	sp.exp[0].push(jr)
	j.markDirty(sp, k)
}

func (j *joinOp) isDelete(r sql.Row) bool {
	if j.node.RightOp < 0 {
		return false
	}
	return sql.IsDelete(r[j.node.RightOp])
}

// pruneVersions drops the versions of k older than the one valid at t, when every left
// row still to come or still waiting has a time >= t.
func (j *joinOp) pruneVersions(sp *joinSplit, k *jkey, t int64) {
	base := -1
	for i, v := range k.rows {
		if v.ts <= t {
			base = i
		}
	}
	if base > 0 {
		k.rows = slices.Delete(k.rows, 0, base)
		j.kept.Add(-int64(base))
		j.markChanged(sp, k)
	}
}

// pendingFloor is the smallest time a left row of a temporal join can still ask for: the
// earliest waiting row's, or the watermark.
func (j *joinOp) pendingFloor(sp *joinSplit) int64 {
	if len(sp.exp[0]) > 0 && sp.exp[0][0].ts < sp.wm {
		return sp.exp[0][0].ts
	}
	return sp.wm
}

// versionAt is the version of k valid at t (the last with time <= t), or nil.
func versionAt(k *jkey, t int64) *jrow {
	if k == nil {
		return nil
	}
	i := sort.Search(len(k.rows), func(i int) bool { return k.rows[i].ts > t })
	if i == 0 {
		return nil
	}
	return k.rows[i-1]
}

// current handles a row of a processing-time table join.
func (j *joinOp) current(sp *joinSplit, in int, key string, r sql.Row) {
	if in == 1 {
		vt := j.node.RightTime
		k := j.getKey(sp, 1, key)
		if vt >= 0 && len(k.rows) > 0 && versionTime(r[vt]) < versionTime(k.rows[0].row[vt]) {
			return // older than the key's version (or delete) in effect
		}
		j.kept.Add(-int64(len(k.rows)))
		clear(k.rows)
		k.rows = k.rows[:0]
		switch del := j.isDelete(r); {
		case !del:
			k.rows = append(k.rows, j.newRow(r, 0, k))
		case vt >= 0:
			// The delete stays, joining nothing, so that an older version read later is
			// ignored too (as in a regular join with a table).
			jr := j.newRow(r, 0, k)
			jr.deleted = true
			k.rows = append(k.rows, jr)
		}
		j.markChanged(sp, k)
		return
	}
	var v sql.Row
	if k := sp.keys[1][key]; k != nil && len(k.rows) > 0 && !k.rows[0].deleted {
		v = k.rows[0].row
	}
	if v != nil {
		j.emit(r, v, false)
	} else if j.node.Kind == sql.JoinLeft {
		j.emit(r, nil, true)
	}
}

func (j *joinOp) Watermark(split string, wm int64, out Emitter) error {
	sp := j.split(split)
	if wm <= sp.wm {
		return nil
	}
	sp.wm = wm
	n := j.node
	if j.exact {
		return nil // rows are kept until deleted, not by time
	}
	switch n.Mode {
	case planner.JoinInterval, planner.JoinRegular:
		for side := 0; side < 2; side++ {
			for len(sp.exp[side]) > 0 && j.expired(side, sp.exp[side][0], wm) {
				r := sp.exp[side].pop()
				if r.dead {
					continue
				}
				if !r.matched && (side == 0 && (n.Kind == sql.JoinLeft || n.Kind == sql.JoinFull) ||
					side == 1 && (n.Kind == sql.JoinRight || n.Kind == sql.JoinFull)) {
					if side == 0 {
						j.emit(r.row, nil, true)
					} else {
						j.emit(nil, r.row, true)
					}
				}
				j.remove(sp, r)
				if j.out.len() >= 1024 {
					if err := j.out.flush(split, out); err != nil {
						return err
					}
				}
			}
		}
		if c := &sp.cache; j.cacheMax > 0 {
			if !c.started {
				c.started, c.swept = true, wm // the first sweep is a horizon after the first watermark
			}
			switch {
			case wm == MaxWatermark && len(sp.exp[0])+len(sp.exp[1]) == 0:
				// Every row in memory expired and no row comes after the end of the input:
				// no stored row can match again (one bounded by its own column to the end
				// of time included), so they all go.
				j.dropStored(sp)
			case (c.spilled || c.trims > 0) && (wm == MaxWatermark || wm-c.swept >= j.sweepEvery()):
				c.swept, c.sweepDue = wm, true
			}
		}
	case planner.JoinWindow:
		if err := j.closeWindows(sp, wm, split, out); err != nil {
			return err
		}
	case planner.JoinTemporal:
		for len(sp.exp[0]) > 0 && sp.exp[0][0].ts < wm {
			r := sp.exp[0].pop()
			if r.dead {
				continue
			}
			vk := sp.keys[1][r.k.key]
			if v := versionAt(vk, r.ts); v != nil && !v.deleted {
				j.emit(r.row, v.row, false)
			} else if n.Kind == sql.JoinLeft {
				j.emit(r.row, nil, true)
			}
			j.remove(sp, r)
			if vk != nil {
				// Rows still in the heap have times >= r's.
				j.pruneVersions(sp, vk, r.ts)
			}
			if j.out.len() >= 1024 {
				if err := j.out.flush(split, out); err != nil {
					return err
				}
			}
		}
		// Versions of keys no left row asked for are pruned now and then.
		if sp.swept == MinWatermark || wm == MaxWatermark || wm-sp.swept >= 10_000 {
			sp.swept = wm
			floor := j.pendingFloor(sp)
			for _, k := range sp.keys[1] {
				j.pruneVersions(sp, k, floor)
			}
		}
	}
	return j.out.flush(split, out)
}

// remove takes one row out of its key's list: it is marked dead (readers of the list skip
// it) and the list compacted once half of it is dead, so removing a hot key's rows one by
// one does not move the list each time.
func (j *joinOp) remove(sp *joinSplit, r *jrow) {
	if r.dead {
		return
	}
	r.dead = true
	j.kept.Add(-1)
	k := r.k
	k.dead++
	if k.base > 0 {
		// A side in part: its stored copy of the row stays, expired, until the side is
		// read back (which drops it) or leaves memory (swept); join_cache.go.
		if k.dead == len(k.rows) {
			clear(k.rows)
			k.rows, k.dead, k.saved = k.rows[:0], 0, 0
		} else if k.dead*2 > len(k.rows) {
			k.compact()
		}
		return
	}
	if k.dead == len(k.rows) && (j.node.Mode != planner.JoinTemporal || k.side == 0) {
		// The key leaves the map at the next checkpoint if it is still empty then: a key
		// whose rows come and go (one live row per key is common) is not deleted from and
		// inserted into the map again for each.
		clear(k.rows)
		k.rows, k.dead = k.rows[:0], 0
		j.forget(sp, k)
		if !k.emptied {
			k.emptied = true
			sp.emptied = append(sp.emptied, k)
			if len(sp.emptied) >= 1<<16 && j.cacheMax == 0 { // bounded without checkpoints too
				j.sweep(sp)
			}
		}
		return
	}
	if k.dead*2 > len(k.rows) {
		k.compact()
	}
	j.markChanged(sp, k)
}

// compact drops k's dead rows from its list.
func (k *jkey) compact() {
	if k.dead == 0 {
		return
	}
	live, saved := k.rows[:0], 0
	for i, r := range k.rows {
		if !r.dead {
			if i < k.saved {
				saved++
			}
			live = append(live, r)
		}
	}
	clear(k.rows[len(live):])
	k.rows, k.dead, k.saved = live, 0, saved
}

// sweep takes the keys left without rows since the last sweep out of the map. With the
// cache on, a key whose stored rows' deletes are not known to be committed (forgotten
// since the last checkpoint: they are in this checkpoint's batch, or not yet in one) stays
// until a later checkpoint: out of the map, a row of the key would read it back from the
// store (join_cache.go, touchKey), which still holds the deleted rows.
func (j *joinOp) sweep(sp *joinSplit) {
	kept := 0
	for _, k := range sp.emptied {
		if len(k.rows) != 0 || k.base != 0 || sp.keys[k.side][k.key] != k {
			k.emptied = false
			continue
		}
		if _, pending := sp.cache.forgot[k.key]; pending {
			sp.emptied[kept] = k
			kept++
			continue
		}
		k.emptied = false
		delete(sp.keys[k.side], k.key)
	}
	clear(sp.emptied[kept:])
	sp.emptied = sp.emptied[:kept]
}

// forget deletes a key's stored state at the next checkpoint.
func (j *joinOp) forget(sp *joinSplit, k *jkey) {
	if j.cacheMax > 0 {
		if sp.cache.forgot == nil {
			sp.cache.forgot = map[string]struct{}{}
		}
		sp.cache.forgot[k.key] = struct{}{}
	}
	for c := range k.chunks {
		sp.dels = append(sp.dels, j.stateKey(sp, k.side, k.key, c))
	}
	k.chunks, k.saved, k.dirty, k.rewrite = 0, 0, false, false
}

// stateKey is the store key of chunk c of side's rows of key: the side, the key, and the
// chunk number in the window slot of state.Key (start 0, end c).
func (j *joinOp) stateKey(sp *joinSplit, side int, key string, c int64) []byte {
	return j.stateKeyTo(nil, sp, side, key, c)
}

// stateKeyTo appends stateKey's key to dst.
func (j *joinOp) stateKeyTo(dst []byte, sp *joinSplit, side int, key string, c int64) []byte {
	dst = append(state.SplitPrefix(dst, j.job, j.id, sp.name), byte(side))
	dst = append(dst, key...)
	return state.AppendWindow(dst, 0, c)
}

func (j *joinOp) Control(c *Control, _ Emitter) error {
	switch c.Kind {
	case NewSplit:
		return j.load(c.Split)
	case Checkpoint:
		j.estimateRows()
		j.added, j.addedBytes, j.epoch = 0, 0, c.Epoch
		for _, sp := range j.splits {
			if sp.cache.pend != nil {
				j.trimCommitted(sp)
			}
			if err := j.save(sp, c.State); err != nil {
				return err
			}
			j.sweep(sp)
			if j.cacheMax > 0 {
				j.evictKeys(sp)
			}
			if sp.cache.trimmed {
				sp.cache.trimmed = false
				sp.exp[0].dropDead()
				sp.exp[1].dropDead()
			}
		}
		j.relieve()
	case RemoveSplit:
		if sp := j.splits[c.Split]; sp != nil {
			if err := j.save(sp, c.State); err != nil {
				return err
			}
			for side := range sp.keys {
				for _, k := range sp.keys[side] {
					j.kept.Add(-int64(len(k.rows) - k.dead))
				}
			}
			j.kept.Add(-sp.win.rows())
			delete(j.splits, c.Split)
		}
	}
	return nil
}

// Key state, per chunk: uvarint count, then per row: a flags byte (1 matched, 2 deleted),
// varint time, the row (sql.AppendRow). A key's rows are its chunks' rows in chunk order.
// A window join's state is saved per window (saveWindows).
func (j *joinOp) save(sp *joinSplit, b *state.Batch) error {
	j.saveWindows(sp, b)
	if sp.cache.saves++; sp.cache.saves == 0 {
		sp.cache.saves = 1
	}
	sp.cache.asked = false
	if sp.cache.dropAll {
		// Every stored row expired (join_cache.go, dropStored).
		sp.cache.dropAll, sp.cache.sweepDue = false, false
		b.DropPrefix(state.SplitPrefix(nil, j.job, j.id, sp.name))
		clear(sp.dels)
		sp.dels = sp.dels[:0]
	}
	if sp.cache.sweepDue {
		sp.cache.sweepDue = false
		if err := j.sweepStore(sp, sp.cache.swept, b); err != nil {
			return err
		}
	}
	for _, k := range sp.dels {
		b.Delete(k)
	}
	sp.dels = sp.dels[:0]
	for _, k := range sp.dirty {
		if !k.dirty {
			continue
		}
		k.dirty = false
		if k.dead > 0 {
			k.compact() // (a removal marked the key for a rewrite, or the side is in part)
		}
		if len(k.rows) == 0 && k.base > 0 {
			k.rewrite, k.probed = false, false // what it has is stored
			continue
		}
		if len(k.rows) == 0 {
			j.forget(sp, k)
			for _, d := range sp.dels {
				b.Delete(d)
			}
			sp.dels = sp.dels[:0]
			continue
		}
		rewrite := k.rewrite || k.saved > len(k.rows) || k.chunks >= maxJoinChunks
		if rewrite && k.base > 0 {
			// Rewritten as one chunk: its rows out of memory come back first.
			if _, err := j.makeWhole(sp, k); err != nil {
				return err
			}
		}
		from, c := k.saved, k.chunks
		committed, base := k.saved, k.chunks // stored by earlier saves, so committed
		if rewrite {
			for c := int64(1); c < k.chunks; c++ {
				b.Delete(j.stateKey(sp, k.side, k.key, c))
			}
			from, c, k.chunks = 0, 0, 0
		}
		k.rewrite = false
		trim := !rewrite && !k.probed && committed > 0 && j.trims() && j.committed == nil
		if !k.probed && j.trims() && j.committed != nil {
			sp.cache.pend = append(sp.cache.pend, k) // trimmed once this save is committed
		}
		k.probed = false
		if from == len(k.rows) {
			if trim {
				j.trimSide(sp, k, committed, base)
			}
			continue
		}
		j.enc = binary.AppendUvarint(j.enc[:0], uint64(len(k.rows)-from))
		for _, r := range k.rows[from:] {
			var f byte
			if r.matched {
				f |= 1
			}
			if r.deleted {
				f |= 2
			}
			j.enc = append(j.enc, f)
			j.enc = binary.AppendVarint(j.enc, r.ts)
			j.enc = sql.AppendRow(j.enc, r.row)
		}
		b.Put(j.stateKey(sp, k.side, k.key, c), j.enc)
		k.chunks, k.saved, k.savedAt = c+1, len(k.rows), sp.cache.saves
		if trim {
			j.trimSide(sp, k, committed, base)
		}
	}
	sp.dirty = sp.dirty[:0]
	if sp.cache.pend != nil {
		sp.cache.pendEpoch, sp.cache.pendSave = j.epoch, sp.cache.saves
	}
	if c := &sp.cache; j.cacheMax > 0 && !j.exact && c.started {
		// The watermark of this save and of the last sweep (join_cache.go).
		j.enc = binary.AppendVarint(binary.AppendVarint(j.enc[:0], sp.wm), c.swept)
		b.Put(j.stateKey(sp, metaSide, "", 0), j.enc)
	}
	return nil
}

var errBadJoin = errors.New("corrupt join state")

// decodeJoinRows decodes the rows of one (side, key) of a join's state (see save), each of
// width values, calling each with its flags, time and row (valid during the call).
func decodeJoinRows(v []byte, width int, each func(flags byte, ts int64, row sql.Row)) error {
	cnt, n := binary.Uvarint(v)
	if n <= 0 || cnt > uint64(len(v)) {
		return errBadJoin
	}
	return decodeJoinBody(v[n:], cnt, width, each)
}

// decodeJoinBody decodes cnt rows of the stored form without its count (all of v).
func decodeJoinBody(v []byte, cnt uint64, width int, each func(flags byte, ts int64, row sql.Row)) error {
	var row sql.Row
	_, err := walkJoinRows(v, cnt, width, func(f byte, ts int64, b []byte) (int, int, bool, error) {
		var n int
		var err error
		if row, n, err = sql.DecodeRow(b, row[:0]); err != nil {
			return 0, 0, false, err
		}
		if len(row) == width { // (walkJoinRows fails on any other)
			each(f, ts, row)
		}
		return len(row), n, false, nil
	})
	return err
}

// walkJoinRows goes through the cnt rows of the stored form without its count (all of v):
// for each it calls row with the row's flags, its time and the bytes from its values on;
// row returns the row's width and length in bytes, or stop to end the walk there (walkJoinRows
// then reports stopped). A row of another width than width, or bytes that are not cnt
// rows, fail.
func walkJoinRows(v []byte, cnt uint64, width int, row func(f byte, ts int64, b []byte) (w, n int, stop bool, err error)) (stopped bool, err error) {
	if cnt > uint64(len(v)) {
		return false, errBadJoin
	}
	for range cnt {
		if len(v) == 0 {
			return false, errBadJoin
		}
		f := v[0]
		ts, n := binary.Varint(v[1:])
		if n <= 0 || f > 3 {
			return false, errBadJoin
		}
		v = v[1+n:]
		w, m, stop, err := row(f, ts, v)
		if err != nil {
			return false, err
		}
		if w != width {
			return false, fmt.Errorf("%w: a row of %d values, want %d", errBadJoin, w, width)
		}
		if stop {
			return true, nil
		}
		v = v[m:]
	}
	if len(v) != 0 {
		return false, errBadJoin
	}
	return false, nil
}

func (j *joinOp) load(split string) error {
	sp := j.split(split)
	if j.store == nil {
		return nil
	}
	prefix := state.SplitPrefix(nil, j.job, j.id, split)
	if j.exact {
		defer j.recount(sp)
	}
	defer func() {
		// Rows saved by a join with a cache, loaded whole (the cache is off now): those
		// that expired by the save's watermark are gone.
		for side := range 2 {
			for h := &sp.exp[side]; len(*h) > 0 && sp.cache.floor != MinWatermark && j.expired(side, (*h)[0], sp.cache.floor); {
				j.remove(sp, h.pop())
			}
		}
	}()
	return j.store.Scan(prefix, func(key, v []byte) error {
		if len(key) < len(prefix)+17 {
			return &StateError{Op: j.id, Split: split, Err: errBadJoin}
		}
		kb := key[len(prefix) : len(key)-16]
		// A key's chunks come in chunk order (other keys' entries may come between).
		c := int64(binary.BigEndian.Uint64(key[len(key)-8:]) ^ (1 << 63))
		if j.node.Mode == planner.JoinWindow {
			start := int64(binary.BigEndian.Uint64(key[len(key)-16:]) ^ (1 << 63))
			if err := j.loadWindowEntry(sp, key, kb, start, c, v); err != nil {
				return &StateError{Op: j.id, Split: split, Err: err}
			}
			return nil
		}
		side := int(kb[0])
		if side == metaSide && len(kb) == 1 {
			wm, n := binary.Varint(v)
			swept, m := binary.Varint(v[max(n, 0):])
			if n <= 0 || m <= 0 || n+m != len(v) {
				return &StateError{Op: j.id, Split: split, Err: errBadJoin}
			}
			c := &sp.cache
			c.floor, c.swept, c.started = wm, swept, true
			return nil
		}
		if side > 1 {
			return &StateError{Op: j.id, Split: split, Err: errBadJoin}
		}
		if j.cacheMax > 0 {
			// Every key stays in the store until a row needs it (join_cache.go).
			sp.cache.spill(side, string(kb[1:]), c+1)
			return nil
		}
		k := sp.keys[side][string(kb[1:])]
		if k == nil {
			k = &jkey{key: string(kb[1:]), side: side}
		}
		if c != k.chunks {
			return &StateError{Op: j.id, Split: split, Err: errBadJoin}
		}
		width := j.node.LeftWidth
		if side == 1 {
			width = j.node.RightWidth
		}
		err := decodeJoinRows(v, width, func(f byte, ts int64, row sql.Row) {
			r := j.newRow(row, ts, k)
			r.matched, r.deleted = f&1 != 0, f&2 != 0
			switch j.node.Mode {
			case planner.JoinTemporal:
				if side == 0 {
					sp.exp[side].push(r)
				}
			case planner.JoinCurrent:
			default:
				if j.exact {
					break
				}
				sp.exp[side].push(r)
			}
			k.rows = append(k.rows, r)
		})
		if err != nil {
			return &StateError{Op: j.id, Split: split, Err: err}
		}
		k.chunks++
		k.saved = len(k.rows)
		sp.keys[side][k.key] = k
		return nil
	})
}

func (j *joinOp) Close() error {
	j.relieve()
	return nil
}

// rowHeap orders rows by the time they expire or are due (window end, interval end, ...):
// a binary min-heap on ts, typed (container/heap's interface calls cost a join a tenth of
// its time; docs/benchmarks.md "Joins").
type rowHeap []*jrow

func (h *rowHeap) push(r *jrow) {
	a := append(*h, r)
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p].ts <= r.ts {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = r
	*h = a
}

// dropDead takes the dead rows out of the heap (rows of keys that left memory).
func (h *rowHeap) dropDead() {
	a := slices.DeleteFunc(*h, func(r *jrow) bool { return r.dead })
	// A slice sorted by time is a heap.
	slices.SortFunc(a, func(x, y *jrow) int { return cmp.Compare(x.ts, y.ts) })
	*h = a
}

func (h *rowHeap) pop() *jrow {
	a := *h
	top := a[0]
	n := len(a) - 1
	last := a[n]
	a[n] = nil
	a = a[:n]
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && a[c+1].ts < a[c].ts {
			c++
		}
		if last.ts <= a[c].ts {
			break
		}
		a[i] = a[c]
		i = c
	}
	if n > 0 {
		a[i] = last
	}
	*h = a
	return top
}
