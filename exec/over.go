package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// overOp computes aggregates over a window of rows (planner.OverNode; docs/sql.md, "Window
// aggregates"): per partition it keeps every row, sorted by the window's ORDER BY and then
// by its values (rows equal in every column are interchangeable), and a row's value of each
// call is the aggregate over it and the Preceding rows before it.
//
// Over a stream (Changes is Retract) a row that arrives or leaves (a delete of a retracting
// input: the change column is the input row's last) changes the value of the rows that
// follow it within Preceding rows: their old rows are deleted and their new ones inserted,
// then the arriving row is inserted (or the leaving row's output deleted). A row arriving
// after every row of its partition, as rows in order do, changes nothing else and emits
// one insert. Over a bounded input (Bounded) nothing is emitted until the input ends (the
// watermark reaches MaxWatermark); then every row is emitted once, with its values.
//
// State is per split (the plan exchanges on the partition keys), written at checkpoints
// under the operator's id, one key per distinct row: the partition's key and the row
// (appendOverRowKey), its value the row's count (uvarint); a row changed since the last
// checkpoint is written again, or deleted when none is left. A checkpoint writes what
// changed, not whole partitions.
//
// With a store outside the process the partitions beyond a cache (cacheMax, the splits
// sharing it) live in the store only, as a Top-N's do (topNChangesOp), under the rules of
// an aggregation's group cache (agg_cache.go): only a partition unchanged since a committed
// checkpoint leaves memory, the least recently used first; a Bloom filter of the
// partitions that left tells a new partition (no read) from one to read back, with one
// Scan of its rows' keys; a partition whose last row left stays in memory, empty, until
// the checkpoint after the one that deletes its rows, so that a row of it arriving while
// those deletes may still be committing does not read the deleted rows back. The cache is
// off (every partition in memory) over a bounded input, which emits every partition at
// its end, and without partition keys.
type overOp struct {
	node  *planner.OverNode
	job   string
	id    string
	store state.Store
	// cacheMax bounds the partitions kept in memory, the splits together (0: all); full
	// asks the job for a checkpoint when changed partitions fill a split's share;
	// pressure holds the job's input when they are pressFactor times the share.
	cacheMax int
	full     func()
	pressure
	ages []uint32
	// width: the columns of a kept row (the input's, without a change column)
	width  int
	splits map[string]*overSplit

	keyBuf  []byte
	enc     []byte
	val     []byte
	args    []sql.Value
	old     []sql.Row // the affected rows' outputs before a change
	cur     []sql.Row // and after it
	slide   []bool    // per call: its state slides along the rows (see outputs)
	states  []sql.AggState
	slab    []sql.Value
	outB    Batch
	outRows []sql.Row
}

type overPart struct {
	key       string
	rows      []sql.Row // sorted (rowOrder)
	partState           // with a cache
}

type overSplit struct {
	parts map[string]*overPart
	// changed: the rows inserted or deleted since the last checkpoint (a row may be listed
	// more than once), with their partition's key.
	changed []overChange
	seen    map[string]bool // save's: the state keys written
	done    bool            // Bounded: the input ended and every row was emitted
	// With a cache: the split's name, its partitions changed since the last save.
	name  string
	dirty []*overPart
	groupCache
}

type overChange struct {
	part string
	row  sql.Row
}

func newOverOp(n *planner.OverNode, job, id string, store state.Store) *overOp {
	w := len(n.Schema)
	if n.Changes != planner.AppendOnly {
		w-- // the output's change column
	}
	return &overOp{node: n, job: job, id: id, store: store, width: w, splits: map[string]*overSplit{}}
}

func (o *overOp) split(name string) *overSplit {
	sp := o.splits[name]
	if sp == nil {
		sp = &overSplit{name: name, parts: map[string]*overPart{}, seen: map[string]bool{}}
		o.splits[name] = sp
	}
	return sp
}

// rowOrder compares kept rows: by the window's ORDER BY, then by every value.
func (o *overOp) rowOrder(a, b sql.Row) int {
	if c := compareKeys(o.node.Order, a, b); c != 0 {
		return c
	}
	return compareRows(a, b)
}

func (o *overOp) Process(_ int, b *Batch, out Emitter) error {
	sp := o.split(b.Split)
	n := o.node
	for _, r := range b.Rows {
		del := false
		if n.Retracting {
			del = sql.IsDelete(r[len(r)-1])
			r = r[:len(r)-1]
		}
		o.keyBuf = o.keyBuf[:0]
		for _, k := range n.Partition {
			o.keyBuf = sql.AppendKey(o.keyBuf, k(r))
		}
		p := sp.parts[string(o.keyBuf)]
		if p == nil && sp.spilled {
			var err error
			if p, err = o.fetch(sp, o.keyBuf); err != nil {
				return err
			}
		}
		if p == nil {
			if del {
				continue // the delete of a row never seen: nothing to take back
			}
			p = &overPart{key: string(o.keyBuf)}
			sp.parts[p.key] = p
		}
		if o.cacheMax > 0 {
			sp.tick++
			p.touch = sp.tick
		}
		i := sort.Search(len(p.rows), func(i int) bool { return o.rowOrder(p.rows[i], r) >= 0 })
		if del && (i >= len(p.rows) || o.rowOrder(p.rows[i], r) != 0) {
			continue // not there (never seen, or already taken back)
		}
		// The rows whose frame holds position i: i up to Preceding rows after it.
		emit := !n.Bounded
		pre := int(min(n.Preceding, int64(len(p.rows))))
		if emit {
			hi := min(i+pre, len(p.rows)-1)
			if !del {
				hi = min(i+pre-1, len(p.rows)-1)
			}
			var err error
			if o.old, err = o.outputs(o.old[:0], p.rows, i, hi); err != nil {
				return err
			}
		}
		var kept sql.Row
		if del {
			kept = p.rows[i]
			last := len(p.rows) - 1
			copy(p.rows[i:], p.rows[i+1:])
			p.rows[last] = nil // not kept alive by the array
			p.rows = p.rows[:last]
		} else {
			kept = ownRow(r)
			p.rows = append(p.rows, nil)
			copy(p.rows[i+1:], p.rows[i:])
			p.rows[i] = kept
		}
		if o.store != nil {
			sp.changed = append(sp.changed, overChange{part: p.key, row: kept})
		}
		if o.cacheMax > 0 && !p.dirty {
			p.dirty = true
			sp.dirty = append(sp.dirty, p)
		}
		if emit {
			hi := min(i+pre, len(p.rows)-1)
			if del {
				hi = min(i+pre-1, len(p.rows)-1)
			}
			// The old outputs (of the rows from i on before the change) and the new ones
			// (from i on after it): a row kept in the frame appears in both, one place
			// later after an insert, one earlier after a delete; equal outputs cancel.
			var err error
			if o.cur, err = o.outputs(o.cur[:0], p.rows, i, hi); err != nil {
				return err
			}
			o.diff(o.old, o.cur, del)
		}
		if len(p.rows) == 0 && o.cacheMax == 0 {
			delete(sp.parts, p.key)
		}
		// With a cache an emptied partition stays until the save after the one that
		// deletes its rows is committed (evict): read back before, it would be its
		// deleted rows.
		if o.cacheMax > 0 && len(sp.parts) >= sp.evictAt {
			o.evict(sp)
		}
		if len(o.outRows) >= 1024 {
			if err := o.flush(b.Split, out); err != nil {
				return err
			}
		}
	}
	return o.flush(b.Split, out)
}

// diff emits the change from old to cur (see Process): after an insert at position i,
// old[k] is the row now at cur[k+1] and cur[0] is the new row; after a delete, old[0] is
// the row that left and old[k+1] the row now at cur[k].
func (o *overOp) diff(old, cur []sql.Row, del bool) {
	shift := 1
	if del {
		shift = -1
	}
	for k, r := range old {
		if j := k + shift; j >= 0 && j < len(cur) && compareRows(r, cur[j]) == 0 {
			continue
		}
		o.emit(r, true)
	}
	for j, r := range cur {
		if k := j - shift; k >= 0 && k < len(old) && compareRows(old[k], r) == 0 {
			continue
		}
		o.emit(r, false)
	}
}

// outputs appends to dst rows lo..hi of rows, each with its values of the calls over its
// frame. A call whose aggregator takes a row back exactly (COUNT, and SUM and AVG of
// integers: sql.Retracter and sql.MergesExactly) slides one state along the rows, adding
// the row that enters the frame and taking back the one that leaves; the others (MIN, MAX,
// floating-point sums, whose value would depend on the order of the additions, decimal
// sums, whose scale would) aggregate each frame afresh, from its first row to its last.
func (o *overOp) outputs(dst []sql.Row, rows []sql.Row, lo, hi int) ([]sql.Row, error) {
	n := o.node
	if hi < lo {
		return dst, nil
	}
	if o.slide == nil {
		o.slide = make([]bool, len(n.Aggs))
		for c, spec := range n.Aggs {
			_, ok := spec.Func.(sql.Retracter)
			o.slide[c] = ok && sql.MergesExactly(spec.Func, spec.ArgTypes)
			for _, t := range spec.ArgTypes {
				// A decimal sum taken back keeps the scale of the values that left: a
				// fresh one shows the scale of those in the frame (as PostgreSQL).
				o.slide[c] = o.slide[c] && t.Kind != sql.KindDecimal
			}
		}
		o.states = make([]sql.AggState, len(n.Aggs))
	}
	w := o.width + 1
	if need := (hi - lo + 1) * w; cap(o.slab)-len(o.slab) < need {
		o.slab = make([]sql.Value, 0, max(need, 512))
	}
	first := len(dst)
	for k := lo; k <= hi; k++ {
		out := o.slab[len(o.slab) : len(o.slab)+o.width : len(o.slab)+w]
		o.slab = o.slab[:len(o.slab)+w]
		copy(out, rows[k])
		dst = append(dst, out)
	}
	pre := int(min(n.Preceding, int64(len(rows))))
	for c, spec := range n.Aggs {
		col := n.Cols[c]
		if !o.slide[c] {
			for k := lo; k <= hi; k++ {
				var st sql.AggState
				for j := max(0, k-pre); j <= k; j++ {
					if err := o.add(spec, &st, rows[j]); err != nil {
						return nil, err
					}
				}
				dst[first+k-lo][col] = spec.Func.Result(&st)
			}
			continue
		}
		st := &o.states[c]
		*st = sql.AggState{}
		for j := max(0, lo-pre); j <= lo; j++ {
			if err := o.add(spec, st, rows[j]); err != nil {
				return nil, err
			}
		}
		dst[first][col] = spec.Func.Result(st)
		r := spec.Func.(sql.Retracter)
		for k := lo + 1; k <= hi; k++ {
			if err := o.add(spec, st, rows[k]); err != nil {
				return nil, err
			}
			if j := k - pre - 1; j >= 0 {
				o.args = o.args[:0]
				for _, a := range spec.Args {
					o.args = append(o.args, a(rows[j]))
				}
				if err := r.Retract(st, o.args); err != nil {
					return nil, fmt.Errorf("%s OVER a window: %w", spec.Text, err)
				}
			}
			dst[first+k-lo][col] = spec.Func.Result(st)
		}
	}
	return dst, nil
}

func (o *overOp) add(spec planner.AggSpec, st *sql.AggState, row sql.Row) error {
	o.args = o.args[:0]
	for _, a := range spec.Args {
		o.args = append(o.args, a(row))
	}
	if err := spec.Func.Add(st, o.args); err != nil {
		return fmt.Errorf("%s OVER a window: %w", spec.Text, err)
	}
	return nil
}

func (o *overOp) emit(r sql.Row, del bool) {
	if o.node.Changes != planner.AppendOnly {
		if del {
			r = append(r, sql.OpDelete)
		} else {
			r = append(r, sql.Value{})
		}
	}
	o.outRows = append(o.outRows, r)
}

func (o *overOp) flush(split string, out Emitter) error {
	if len(o.outRows) == 0 {
		return nil
	}
	o.outB.Split, o.outB.Rows, o.outB.Offsets = split, o.outRows, nil
	err := out.Emit(&o.outB)
	o.outRows = o.outRows[:0]
	return err
}

// Watermark emits, over a bounded input, every row once the input has ended.
func (o *overOp) Watermark(split string, wm int64, out Emitter) error {
	if !o.node.Bounded || wm != MaxWatermark {
		return nil
	}
	sp := o.split(split)
	if sp.done {
		return nil
	}
	sp.done = true
	keys := make([]string, 0, len(sp.parts))
	for k := range sp.parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := sp.parts[k]
		var err error
		if o.cur, err = o.outputs(o.cur[:0], p.rows, 0, len(p.rows)-1); err != nil {
			return err
		}
		for _, r := range o.cur {
			o.emit(r, false)
		}
		if len(o.outRows) >= 1024 {
			if err := o.flush(split, out); err != nil {
				return err
			}
		}
	}
	return o.flush(split, out)
}

func (o *overOp) stateKey(split string, key []byte) []byte {
	return state.Key(nil, o.job, o.id, split, key, 0, 0)
}

// appendOverRowKey appends a kept row's state key (within its split's prefix): uvarint
// length of the partition's key, the key, then the row (sql.AppendRow).
func appendOverRowKey(dst []byte, part string, row sql.Row) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(part)))
	dst = append(dst, part...)
	return sql.AppendRow(dst, row)
}

var errBadOver = errors.New("corrupt window aggregate state")

// decodeOverRow reads a kept row's state: key as appendOverRowKey wrote it, v its count.
func decodeOverRow(key, v []byte) (part string, row sql.Row, count uint64, err error) {
	l, n := binary.Uvarint(key)
	if n <= 0 || l > uint64(len(key)-n) {
		return "", nil, 0, errBadOver
	}
	part = string(key[n : n+int(l)])
	rest := key[n+int(l):]
	r, k, err := sql.DecodeRow(rest, nil)
	if err != nil {
		return "", nil, 0, fmt.Errorf("%w: %v", errBadOver, err)
	}
	if k != len(rest) {
		return "", nil, 0, errBadOver
	}
	count, m := binary.Uvarint(v)
	if m <= 0 || m != len(v) || count == 0 || count > maxOverCopies {
		return "", nil, 0, errBadOver
	}
	return part, ownRow(r), count, nil
}

// maxOverCopies bounds the count of one stored row that a restore believes.
const maxOverCopies = 1 << 32

func (o *overOp) Control(c *Control, _ Emitter) error {
	switch c.Kind {
	case NewSplit:
		return o.load(c.Split)
	case Checkpoint:
		for name, sp := range o.splits {
			o.save(name, sp, c.State)
		}
		o.relieve()
	case RemoveSplit:
		if sp := o.splits[c.Split]; sp != nil {
			o.save(c.Split, sp, c.State)
			delete(o.splits, c.Split)
		}
	}
	return nil
}

// save writes the rows changed since the last checkpoint: each with the count of its
// copies in its partition now, or deleted when none is left.
func (o *overOp) save(name string, sp *overSplit, b *state.Batch) {
	sp.nextSave()
	for _, p := range sp.dirty {
		p.dirty = false
		p.saved = sp.saves
		p.persisted = len(p.rows) > 0
	}
	clear(sp.dirty)
	sp.dirty = sp.dirty[:0]
	clear(sp.seen)
	for _, c := range sp.changed {
		k := string(appendOverRowKey(nil, c.part, c.row))
		if sp.seen[k] {
			continue
		}
		sp.seen[k] = true
		cnt := 0
		if p := sp.parts[c.part]; p != nil {
			i := sort.Search(len(p.rows), func(i int) bool { return o.rowOrder(p.rows[i], c.row) >= 0 })
			for j := i; j < len(p.rows) && o.rowOrder(p.rows[j], c.row) == 0; j++ {
				// Equal rows may differ in form (NUMERIC 1.0 and 1.00): each form is its
				// own record.
				if o.enc = appendOverRowKey(o.enc[:0], c.part, p.rows[j]); string(o.enc) == k {
					cnt++
				}
			}
		}
		key := o.stateKey(name, []byte(k))
		if cnt == 0 {
			b.Delete(key)
		} else {
			o.val = binary.AppendUvarint(o.val[:0], uint64(cnt))
			b.Put(key, o.val)
		}
	}
	clear(sp.changed)
	sp.changed = sp.changed[:0]
}

// load reads the split's partitions from the store; with a cache, up to the split's
// share of it, the others only recorded as in the store (spilled).
func (o *overOp) load(split string) error {
	sp := o.split(split)
	if o.store == nil {
		return nil
	}
	prefix := state.SplitPrefix(nil, o.job, o.id, split)
	var p *overPart
	var last []byte // the partition key of the last row (a partition's rows are together)
	loaded := 0
	err := o.store.Scan(prefix, func(key, v []byte) error {
		if len(key) < len(prefix)+16 {
			return &StateError{Op: o.id, Split: split, Err: errBadOver}
		}
		if o.cacheMax > 0 {
			pk, ok := overPartKey(key[len(prefix) : len(key)-16])
			if !ok {
				return &StateError{Op: o.id, Split: split, Err: errBadOver}
			}
			if p == nil || string(pk) != p.key {
				if loaded >= o.splitCache() {
					if string(pk) != string(last) {
						sp.spill(pk)
						last = append(last[:0], pk...)
					}
					return nil
				}
				loaded++
			}
		}
		part, row, cnt, err := decodeOverRow(key[len(prefix):len(key)-16], v)
		if err != nil {
			return &StateError{Op: o.id, Split: split, Err: err}
		}
		if p == nil || p.key != part {
			if p = sp.parts[part]; p == nil {
				p = &overPart{key: part, partState: partState{persisted: true}}
				sp.parts[part] = p
			}
		}
		for ; cnt > 0; cnt-- {
			p.rows = append(p.rows, row)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range sp.parts {
		sort.Slice(p.rows, func(i, j int) bool { return o.rowOrder(p.rows[i], p.rows[j]) < 0 })
	}
	if o.cacheMax > 0 {
		sp.evictAt = max(o.splitCache(), len(sp.parts)+max(o.splitCache()/4, 1))
	}
	return nil
}

// overPartKey is the partition key of a kept row's state key (appendOverRowKey).
func overPartKey(key []byte) ([]byte, bool) {
	l, n := binary.Uvarint(key)
	if n <= 0 || l > uint64(len(key)-n) {
		return nil, false
	}
	return key[n : n+int(l)], true
}

// overCacheSize is the partition cache of window aggregate n over store given the setting
// (Env.AggCacheGroups: 0 is the default, negative is off); 0 means no cache.
func overCacheSize(n *planner.OverNode, store state.Store, setting int) int {
	if n.Bounded {
		return 0
	}
	// A partition keeps all its rows, and a row's output needs the Preceding rows before
	// it: a partition counts as a frame's rows, as a Top-N's counts N. Partitions of more
	// rows hold more.
	return partCacheSize(len(n.Partition) > 0, n.Preceding+1, store, setting)
}

// splitCache is a split's share of the cache.
func (o *overOp) splitCache() int { return max(o.cacheMax/max(len(o.splits), 1), 4) }

// fetch reads the partition of key back from the store when it may have left memory (one
// Scan of its rows' keys); nil when the store has none.
func (o *overOp) fetch(sp *overSplit, key []byte) (*overPart, error) {
	if !sp.gone.has(key) {
		return nil, nil
	}
	o.enc = state.SplitPrefix(o.enc[:0], o.job, o.id, sp.name)
	n := len(o.enc)
	o.enc = binary.AppendUvarint(o.enc, uint64(len(key)))
	o.enc = append(o.enc, key...)
	var p *overPart
	err := o.store.Scan(o.enc, func(k, v []byte) error {
		if len(k) < n+16 {
			return errBadOver
		}
		part, row, cnt, err := decodeOverRow(k[n:len(k)-16], v)
		if err != nil {
			return err
		}
		if part != string(key) {
			return errBadOver
		}
		if p == nil {
			p = &overPart{key: part, partState: partState{persisted: true}}
		}
		for ; cnt > 0; cnt-- {
			p.rows = append(p.rows, row)
		}
		return nil
	})
	if err != nil {
		return nil, &StateError{Op: o.id, Split: sp.name, Err: err}
	}
	if p == nil {
		return nil, nil
	}
	sort.Slice(p.rows, func(i, j int) bool { return o.rowOrder(p.rows[i], p.rows[j]) < 0 })
	sp.parts[p.key] = p
	return p, nil
}

// evict makes room in sp's share of the cache (evictParts).
func (o *overOp) evict(sp *overSplit) {
	o.ages = evictParts(&sp.groupCache, sp.parts, o.splitCache(), o.ages, o.full, &o.pressure)
}

func (o *overOp) Close() error {
	o.relieve()
	return nil
}
