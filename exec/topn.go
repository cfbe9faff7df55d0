package exec

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"math"
	"sort"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// topNOp keeps the first N rows of each partition (window Top-N, deduplication; see
// planner.TopNMode) and numbers them into the RowNumber column.
//
//   - TopNWindow: a partition is one window's rows with equal keys (its window_end at
//     column WindowEnd); its first N rows are emitted when the split's watermark passes
//     the window's end. A row whose window has closed is late.
//   - TopNBounded: as TopNWindow, all partitions emitted when the input ends.
//   - DedupFirst: the partition's row with the smallest event time (column Time; the first
//     one read among equal times) is emitted once the split's watermark is past it; later
//     rows of the partition are dropped; a row older than the watermark is late.
//   - DedupLast: each row later than its partition's current one is emitted at once as the
//     partition's new value; its Changes say how: Upsert (the row, with its change column)
//     or Retract (the replaced row is deleted first).
//
// With a TTL (dedup modes) a partition whose time is more than TTL behind the watermark is
// forgotten. State is per split, written at checkpoints under the operator's id, one key
// per partition (the encoded partition values): the kept rows, the partition's time and
// whether it was emitted.
type topNOp struct {
	node  *planner.TopNNode
	job   string
	id    string
	store state.Store
	late  *sideOutput
	cnt   *counters

	splits map[string]*topSplit
	// cacheMax bounds the partitions of a deduplication keeping the last row or of a
	// table's versions kept in memory, the splits together (0: all; topn_cache.go); full
	// asks the job for a checkpoint when changed partitions fill a split's share;
	// pressure holds the job's input when they are pressFactor times the share.
	cacheMax int
	full     func()
	pressure
	ages    []uint32
	keyBuf  []byte
	enc     []byte
	kbuf    []byte
	outB    Batch
	outRows []sql.Row
	lateB   Batch
	lateRow []sql.Row
}

type topPart struct {
	key     string // encoded partition values
	time    int64  // window end (window modes), the kept row's event time (dedup)
	rows    []sql.Row
	emitted bool
	dead    bool
	partState
}

type topSplit struct {
	name  string
	wm    int64
	swept int64
	parts map[string]*topPart
	heap  partHeap
	dirty []*topPart
	dels  [][]byte
	// storeSwept: the watermark of the last sweep of the store for expired partitions that
	// are not in memory.
	storeSwept int64
	groupCache
}

func newTopNOp(n *planner.TopNNode, job, id string, store state.Store, late *sideOutput, cnt *counters) *topNOp {
	return &topNOp{node: n, job: job, id: id, store: store, late: late, cnt: cnt, splits: map[string]*topSplit{}}
}

func (t *topNOp) split(name string) *topSplit {
	sp := t.splits[name]
	if sp == nil {
		sp = &topSplit{name: name, wm: MinWatermark, swept: MinWatermark, storeSwept: MinWatermark, parts: map[string]*topPart{}}
		t.splits[name] = sp
	}
	return sp
}

func (t *topNOp) markDirty(sp *topSplit, p *topPart) {
	if !p.dirty {
		p.dirty = true
		sp.dirty = append(sp.dirty, p)
	}
}

func (t *topNOp) Process(_ int, b *Batch, out Emitter) error {
	sp := t.split(b.Split)
	n := t.node
	t.lateRow = t.lateRow[:0]
	t.outRows = t.outRows[:0]
	for _, r := range b.Rows {
		if t.cacheMax > 0 && len(sp.parts) >= sp.evictAt {
			t.evict(sp)
		}
		t.keyBuf = t.keyBuf[:0]
		for _, k := range n.Partition {
			t.keyBuf = sql.AppendKey(t.keyBuf, k(r))
		}
		p := sp.parts[string(t.keyBuf)]
		if p == nil && sp.spilled {
			var err error
			if p, err = t.fetch(sp, t.keyBuf); err != nil {
				return err
			}
		}
		sp.tick++
		if p != nil {
			p.touch = sp.tick
		}
		switch n.Mode {
		case planner.TopNWindow, planner.TopNBounded:
			end := MaxWatermark
			if n.Mode == planner.TopNWindow {
				ev := r[n.WindowEnd]
				if ev.IsNull() || ev.I <= sp.wm {
					t.lateRow = append(t.lateRow, r)
					continue
				}
				end = ev.I
			}
			if p == nil {
				p = &topPart{key: string(t.keyBuf), time: end}
				sp.parts[p.key] = p
				heap.Push(&sp.heap, partEntry{end, p})
			}
			if t.insert(p, r) {
				t.markDirty(sp, p)
			}
		case planner.DedupFirst:
			tv := r[n.Time]
			if tv.IsNull() || tv.I < sp.wm {
				t.lateRow = append(t.lateRow, r)
				continue
			}
			switch {
			case p == nil:
				p = &topPart{key: string(t.keyBuf), time: tv.I, rows: []sql.Row{ownRow(r)}}
				sp.parts[p.key] = p
				heap.Push(&sp.heap, partEntry{tv.I, p})
				t.markDirty(sp, p)
			case !p.emitted && tv.I < p.time:
				p.time, p.rows[0] = tv.I, ownRow(r)
				heap.Push(&sp.heap, partEntry{tv.I, p})
				t.markDirty(sp, p)
			}
		case planner.DedupLast:
			tv := r[n.Time]
			if tv.IsNull() {
				t.lateRow = append(t.lateRow, r)
				continue
			}
			if p != nil && tv.I <= p.time {
				continue
			}
			if p == nil {
				p = &topPart{key: string(t.keyBuf), partState: partState{touch: sp.tick}}
				sp.parts[p.key] = p
			} else if n.Changes == planner.Retract && len(p.rows) == 1 {
				t.outRows = append(t.outRows, t.change(p.rows[0], true))
			}
			p.time, p.rows, p.emitted = tv.I, []sql.Row{ownRow(r)}, true
			t.markDirty(sp, p)
			if n.Changes != planner.AppendOnly {
				t.outRows = append(t.outRows, t.change(p.rows[0], false))
			} else {
				t.outRows = append(t.outRows, t.numbered(p.rows[0], 1))
			}
		case planner.TableVersions:
			if p == nil {
				p = &topPart{key: string(t.keyBuf), time: math.MinInt64, emitted: true, partState: partState{touch: sp.tick}}
				sp.parts[p.key] = p
			}
			t.version(sp, p, r)
		}
	}
	if len(t.lateRow) > 0 {
		t.cnt.late.Add(int64(len(t.lateRow)))
		if t.late != nil {
			t.lateB.Split, t.lateB.Rows = b.Split, t.lateRow
			if err := t.late.Process(&t.lateB); err != nil {
				return err
			}
		}
	}
	return t.flush(b.Split, out)
}

// version applies one record of a table's changelog to its key's partition (TableVersions):
// the record's change column is its last; a version older than the current one is
// ignored; otherwise the current row is deleted and, unless the record is a delete, the
// new one inserted (nothing when they are the same row). A NULL version time sorts after
// every time, as in the pull query's latest versions (ORDER BY time DESC puts NULLs first).
// A deleted key keeps its time, so that an older version arriving later stays ignored.
func (t *topNOp) version(sp *topSplit, p *topPart, r sql.Row) {
	tv := int64(0)
	if t.node.Time >= 0 {
		tv = versionTime(r[t.node.Time])
	}
	if tv < p.time {
		return
	}
	op := len(r) - 1
	del := sql.IsDelete(r[op])
	if len(p.rows) == 1 && !del && sameVersion(p.rows[0], r, op) {
		p.time = tv
		t.markDirty(sp, p)
		return
	}
	if len(p.rows) == 1 {
		o := append(sql.Row(nil), p.rows[0]...)
		o[op] = sql.OpDelete
		t.outRows = append(t.outRows, o)
	}
	p.time = tv
	if del {
		p.rows = p.rows[:0]
	} else {
		n := ownRow(r)
		n[op] = sql.Null
		p.rows = append(p.rows[:0], n)
		t.outRows = append(t.outRows, n)
	}
	t.markDirty(sp, p)
}

// sameVersion reports whether table rows a and b hold the same values (of the same kinds;
// NULL equals NULL) in their first n columns.
func sameVersion(a, b sql.Row, n int) bool {
	for i := 0; i < n; i++ {
		if a[i].K != b[i].K || sql.Compare(a[i], b[i]) != 0 {
			return false
		}
	}
	return true
}

// insert puts r among p's rows, which stay sorted and at most N long; it reports whether p
// changed.
func (t *topNOp) insert(p *topPart, r sql.Row) bool {
	n := int(t.node.N)
	keys := t.node.Order
	// The first position whose row sorts after r: equal rows keep their arrival order (or,
	// Latest, the reverse).
	i := sort.Search(len(p.rows), func(i int) bool {
		c := compareKeys(keys, p.rows[i], r)
		return c > 0 || c == 0 && t.node.Latest
	})
	if i >= n {
		return false
	}
	p.rows = append(p.rows, nil)
	copy(p.rows[i+1:], p.rows[i:])
	p.rows[i] = ownRow(r)
	if len(p.rows) > n {
		p.rows = p.rows[:n]
	}
	return true
}

// change returns the kept row r of a retracting deduplication as a change: numbered 1,
// with the change column after its columns (an insert, or del: a delete).
func (t *topNOp) change(r sql.Row, del bool) sql.Row {
	c := make(sql.Row, len(r)+1)
	copy(c, r)
	if t.node.RowNumber >= 0 {
		c[t.node.RowNumber] = sql.BigInt(1)
	}
	if del {
		c[len(r)] = sql.OpDelete
	}
	return c
}

// numbered returns r with its row number set (a copy: r is kept in state).
func (t *topNOp) numbered(r sql.Row, rn int) sql.Row {
	if t.node.RowNumber < 0 {
		return r
	}
	c := append(sql.Row(nil), r...)
	c[t.node.RowNumber] = sql.BigInt(int64(rn))
	return c
}

func (t *topNOp) flush(split string, out Emitter) error {
	if len(t.outRows) == 0 {
		return nil
	}
	t.outB.Split, t.outB.Rows, t.outB.Offsets = split, t.outRows, nil
	err := out.Emit(&t.outB)
	t.outRows = t.outRows[:0]
	return err
}

func (t *topNOp) Watermark(split string, wm int64, out Emitter) error {
	sp := t.split(split)
	if wm <= sp.wm {
		return nil
	}
	sp.wm = wm
	n := t.node
	switch n.Mode {
	case planner.TopNWindow, planner.TopNBounded:
		for len(sp.heap) > 0 && sp.heap[0].time <= wm {
			e := heap.Pop(&sp.heap).(partEntry)
			p := e.p
			for i, r := range p.rows {
				t.outRows = append(t.outRows, t.numbered(r, i+1))
			}
			t.drop(sp, p)
			if len(t.outRows) >= 1024 {
				if err := t.flush(split, out); err != nil {
					return err
				}
			}
		}
	case planner.DedupFirst:
		for len(sp.heap) > 0 && sp.heap[0].time < wm {
			e := heap.Pop(&sp.heap).(partEntry)
			p := e.p
			if p.dead || p.emitted || p.time != e.time {
				continue
			}
			p.emitted = true
			t.markDirty(sp, p)
			t.outRows = append(t.outRows, t.numbered(p.rows[0], 1))
			if len(t.outRows) >= 1024 {
				if err := t.flush(split, out); err != nil {
					return err
				}
			}
		}
	}
	if ttl := n.TTL; ttl > 0 && wm != MaxWatermark && (sp.swept == MinWatermark || wm-sp.swept >= ttl/4+1) {
		sp.swept = wm
		for _, p := range sp.parts {
			if p.time < wm-ttl && (p.emitted || n.Mode == planner.DedupLast) {
				t.drop(sp, p)
			}
		}
		if sp.spilled && (sp.storeSwept == MinWatermark || wm-sp.storeSwept >= ttl) {
			sp.storeSwept = wm
			if err := t.sweepStore(sp); err != nil {
				return err
			}
		}
	}
	return t.flush(split, out)
}

// drop forgets a partition (its stored state is deleted at the next checkpoint).
func (t *topNOp) drop(sp *topSplit, p *topPart) {
	p.dead = true
	delete(sp.parts, p.key)
	if p.persisted {
		sp.dels = append(sp.dels, t.stateKey(sp, p.key))
	}
}

func (t *topNOp) stateKey(sp *topSplit, key string) []byte {
	return state.Key(nil, t.job, t.id, sp.name, []byte(key), 0, 0)
}

func (t *topNOp) Control(c *Control, _ Emitter) error {
	switch c.Kind {
	case NewSplit:
		return t.load(c.Split)
	case Checkpoint:
		for _, sp := range t.splits {
			t.save(sp, c.State)
		}
		t.relieve()
	case RemoveSplit:
		if sp := t.splits[c.Split]; sp != nil {
			t.save(sp, c.State)
			delete(t.splits, c.Split)
		}
	}
	return nil
}

// Partition state: uvarint flags (1: emitted), varint time, uvarint count, the rows
// (sql.AppendRow each).
func (t *topNOp) save(sp *topSplit, b *state.Batch) {
	sp.nextSave()
	for _, k := range sp.dels {
		b.Delete(k)
	}
	sp.dels = sp.dels[:0]
	for _, p := range sp.dirty {
		p.dirty = false
		p.saved = sp.saves
		if p.dead {
			continue
		}
		var flags uint64
		if p.emitted {
			flags = 1
		}
		t.enc = binary.AppendUvarint(t.enc[:0], flags)
		t.enc = binary.AppendVarint(t.enc, p.time)
		t.enc = appendPartRows(t.enc, p.rows)
		b.Put(t.stateKey(sp, p.key), t.enc)
		p.persisted = true
	}
	sp.dirty = sp.dirty[:0]
}

var errBadTopN = errors.New("corrupt Top-N state")

// appendPartRows appends a partition's kept rows: uvarint count, then each row
// (sql.AppendRow); decodePartRows reads them back, all of v.
func appendPartRows(dst []byte, rows []sql.Row) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rows)))
	for _, r := range rows {
		dst = sql.AppendRow(dst, r)
	}
	return dst
}

func decodePartRows(v []byte) ([]sql.Row, error) {
	cnt, n := binary.Uvarint(v)
	if n <= 0 || cnt > uint64(len(v)) {
		return nil, errBadTopN
	}
	v = v[n:]
	rows := make([]sql.Row, 0, cnt)
	for i := uint64(0); i < cnt; i++ {
		r, k, err := sql.DecodeRow(v, nil)
		if err != nil {
			return nil, err
		}
		rows = append(rows, ownRow(r))
		v = v[k:]
	}
	if len(v) != 0 {
		return nil, errBadTopN
	}
	return rows, nil
}

func (t *topNOp) load(split string) error {
	sp := t.split(split)
	if t.store == nil {
		return nil
	}
	prefix := state.SplitPrefix(nil, t.job, t.id, split)
	loaded := 0
	err := t.store.Scan(prefix, func(key, v []byte) error {
		if len(key) < len(prefix)+16 {
			return &StateError{Op: t.id, Split: split, Err: errBadTopN}
		}
		if t.cacheMax > 0 && loaded >= t.splitCache() {
			sp.spill(key[len(prefix) : len(key)-16])
			return nil
		}
		loaded++
		p, err := decodeTopPart(string(key[len(prefix):len(key)-16]), v)
		if err != nil {
			return &StateError{Op: t.id, Split: split, Err: err}
		}
		sp.parts[p.key] = p
		if !p.emitted && t.node.Mode != planner.DedupLast && t.node.Mode != planner.TableVersions {
			heap.Push(&sp.heap, partEntry{p.time, p})
		}
		return nil
	})
	if t.cacheMax > 0 {
		sp.evictAt = max(t.splitCache(), len(sp.parts)+max(t.splitCache()/4, 1))
	}
	return err
}

// decodeTopPart reads a stored partition (save's encoding) of key.
func decodeTopPart(key string, v []byte) (*topPart, error) {
	p := &topPart{key: key, partState: partState{persisted: true}}
	flags, n := binary.Uvarint(v)
	if n <= 0 {
		return nil, errBadTopN
	}
	v = v[n:]
	p.emitted = flags&1 != 0
	if p.time, n = binary.Varint(v); n <= 0 {
		return nil, errBadTopN
	}
	rows, err := decodePartRows(v[n:])
	if err != nil {
		return nil, err
	}
	p.rows = rows
	return p, nil
}

func (t *topNOp) Close() error {
	t.relieve()
	return nil
}

type partEntry struct {
	time int64
	p    *topPart
}

type partHeap []partEntry

func (h partHeap) Len() int           { return len(h) }
func (h partHeap) Less(i, j int) bool { return h[i].time < h[j].time }
func (h partHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *partHeap) Push(x any)        { *h = append(*h, x.(partEntry)) }
func (h *partHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
