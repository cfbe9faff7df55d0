package exec

import (
	"sort"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// topNChangesOp is a Top-N over the whole stream (planner.TopNChanges): per partition it
// keeps the rows in Order, and whenever a partition's first N rows change it emits the
// rows that left as deletes and those that entered as inserts (a Retract changelog: the
// output row is the input's, numbered into RowNumber when selected, then the change
// column; docs/sql.md "Changelogs").
//
// Over an append-only input a row can only enter the first N, so a partition keeps its N
// first rows only; over an updating input (Retracting: the change column is the input
// row's last) a delete can bring a row back in, so a partition keeps all its rows. Rows
// equal in Order are ordered by their values (so the answer does not depend on arrival
// order); rows equal in every column are interchangeable.
//
// State is per split (the plan exchanges on the partition keys), written at checkpoints
// under the operator's id, one key per changed partition: uvarint count, then the rows
// (sql.AppendRow each); a partition left empty is deleted.
//
// With a store outside the process the partitions beyond a cache (cacheMax, the splits
// sharing it) live in the store only and are read back when a row needs them, under the
// rules of an aggregation's group cache (agg_cache.go): only a partition unchanged since a
// committed checkpoint leaves memory, the least recently used first, and a Bloom filter of
// the partitions that left tells a new partition from one to read. The cache is bounded in
// bytes too once the size of a partition is known (splitCache, topNCacheBytes).
type topNChangesOp struct {
	node  *planner.TopNNode
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
	// partEst is the bytes of a partition in memory on average (splitCache).
	partEst int
	// width: the columns of a kept row (the input's, without a change column)
	width  int
	splits map[string]*topChSplit

	keyBuf []byte
	enc    []byte
	before []sql.Row
	out    rowArena
}

type topChPart struct {
	key  string
	rows []sql.Row // sorted (rowOrder)
	partState
}

type topChSplit struct {
	name  string
	parts map[string]*topChPart
	dirty []*topChPart
	dels  [][]byte
	groupCache
}

func newTopNChangesOp(n *planner.TopNNode, job, id string, store state.Store) *topNChangesOp {
	w := len(n.Schema) - 1 // the output's change column
	return &topNChangesOp{node: n, job: job, id: id, store: store, width: w, splits: map[string]*topChSplit{}}
}

func (t *topNChangesOp) split(name string) *topChSplit {
	sp := t.splits[name]
	if sp == nil {
		sp = &topChSplit{name: name, parts: map[string]*topChPart{}}
		t.splits[name] = sp
	}
	return sp
}

// rowOrder compares kept rows: by the Top-N's Order, then by every value.
func (t *topNChangesOp) rowOrder(a, b sql.Row) int {
	if c := compareKeys(t.node.Order, a, b); c != 0 {
		return c
	}
	return compareRows(a, b)
}

// compareRows orders rows of one layout value by value (NULL first).
func compareRows(a, b sql.Row) int {
	for i := range a {
		an, bn := a[i].IsNull(), b[i].IsNull()
		switch {
		case an && bn:
			continue
		case an:
			return -1
		case bn:
			return 1
		}
		if c := sql.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

func (t *topNChangesOp) Process(_ int, b *Batch, out Emitter) error {
	sp := t.split(b.Split)
	n := t.node
	for _, r := range b.Rows {
		del := false
		if n.Retracting {
			del = sql.IsDelete(r[len(r)-1])
			r = r[:len(r)-1]
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
		if p == nil {
			if del {
				continue // the delete of a row never seen: nothing to take back
			}
			p = &topChPart{key: string(t.keyBuf)}
			sp.parts[p.key] = p
		}
		sp.tick++
		p.touch = sp.tick
		limit := int(n.N)
		t.before = append(t.before[:0], p.rows[:min(limit, len(p.rows))]...)
		i := sort.Search(len(p.rows), func(i int) bool { return t.rowOrder(p.rows[i], r) >= 0 })
		if del {
			if i >= len(p.rows) || t.rowOrder(p.rows[i], r) != 0 {
				continue
			}
			p.rows = append(p.rows[:i], p.rows[i+1:]...)
		} else {
			if !n.Retracting && i >= limit {
				continue // below the first N of an append-only input: it can never enter
			}
			p.rows = append(p.rows, nil)
			copy(p.rows[i+1:], p.rows[i:])
			p.rows[i] = ownRow(r)
			if !n.Retracting && len(p.rows) > limit {
				p.rows = p.rows[:limit]
			}
		}
		if !p.dirty {
			p.dirty = true
			sp.dirty = append(sp.dirty, p)
		}
		if len(p.rows) == 0 {
			if p.persisted {
				sp.dels = append(sp.dels, t.stateKey(b.Split, p.key))
			}
			p.persisted = false
			if t.cacheMax == 0 {
				delete(sp.parts, p.key)
			}
			// With a cache an emptied partition stays until the save after the one that
			// deletes it is committed: read back before, it would be its stored rows.
		}
		t.diff(t.before, p.rows[:min(limit, len(p.rows))])
		if t.cacheMax > 0 && len(sp.parts) >= sp.evictAt {
			t.evict(sp)
		}
		if t.out.len() >= 1024 {
			if err := t.out.flush(b.Split, out); err != nil {
				return err
			}
		}
	}
	return t.out.flush(b.Split, out)
}

// diff emits the change from a partition's first rows old to new. With a row number,
// position i's row is deleted and inserted again when its row changed; without one, the
// rows that left are deleted and those that entered inserted.
func (t *topNChangesOp) diff(old, cur []sql.Row) {
	if t.node.RowNumber >= 0 {
		for i := 0; i < max(len(old), len(cur)); i++ {
			if i < len(old) && i < len(cur) && compareRows(old[i], cur[i]) == 0 {
				continue
			}
			if i < len(old) {
				t.emit(old[i], i+1, true)
			}
			if i < len(cur) {
				t.emit(cur[i], i+1, false)
			}
		}
		return
	}
	// Both lists are sorted by rowOrder: merge them.
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j >= len(cur) || i < len(old) && t.rowOrder(old[i], cur[j]) < 0:
			t.emit(old[i], 0, true)
			i++
		case i >= len(old) || t.rowOrder(old[i], cur[j]) > 0:
			t.emit(cur[j], 0, false)
			j++
		default:
			i++
			j++
		}
	}
}

func (t *topNChangesOp) emit(r sql.Row, rn int, del bool) {
	at := len(t.out.vals)
	t.out.vals = append(t.out.vals, r[:min(len(r), t.width)]...)
	for len(t.out.vals) < at+t.width {
		t.out.vals = append(t.out.vals, sql.Value{})
	}
	if t.node.RowNumber >= 0 {
		t.out.vals[at+t.node.RowNumber] = sql.BigInt(int64(rn))
	}
	if del {
		t.out.vals = append(t.out.vals, sql.OpDelete)
	} else {
		t.out.vals = append(t.out.vals, sql.Value{})
	}
	t.out.endRow()
}

func (t *topNChangesOp) Watermark(string, int64, Emitter) error { return nil }

func (t *topNChangesOp) stateKey(split, key string) []byte {
	return state.Key(nil, t.job, t.id, split, []byte(key), 0, 0)
}

func (t *topNChangesOp) Control(c *Control, _ Emitter) error {
	switch c.Kind {
	case NewSplit:
		return t.load(c.Split)
	case Checkpoint:
		for name, sp := range t.splits {
			t.save(name, sp, c.State)
		}
		t.relieve()
	case RemoveSplit:
		if sp := t.splits[c.Split]; sp != nil {
			t.save(c.Split, sp, c.State)
			delete(t.splits, c.Split)
		}
	}
	return nil
}

func (t *topNChangesOp) save(name string, sp *topChSplit, b *state.Batch) {
	sp.nextSave()
	for _, k := range sp.dels {
		b.Delete(k)
	}
	sp.dels = sp.dels[:0]
	bytes, parts := 0, 0
	for _, p := range sp.dirty {
		p.dirty = false
		p.saved = sp.saves
		if len(p.rows) == 0 {
			continue
		}
		t.enc = appendPartRows(t.enc[:0], p.rows)
		b.Put(t.stateKey(name, p.key), t.enc)
		p.persisted = true
		if t.cacheMax > 0 {
			for _, r := range p.rows {
				bytes += rowBytes(r)
			}
			parts++
		}
	}
	sp.dirty = sp.dirty[:0]
	if parts > 0 {
		// The size of a partition, from those written (splitCache).
		t.partEst = smoothed(t.partEst, max(bytes/parts, 1))
		size := t.splitCache()
		sp.evictAt = min(sp.evictAt, size+max(size/4, 1))
	}
}

func (t *topNChangesOp) load(split string) error {
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
		rows, err := decodePartRows(v)
		if err != nil {
			return &StateError{Op: t.id, Split: split, Err: err}
		}
		p := &topChPart{key: string(key[len(prefix) : len(key)-16]), rows: rows, partState: partState{persisted: true}}
		sp.parts[p.key] = p
		return nil
	})
	sp.evictAt = max(t.splitCache(), len(sp.parts)+max(t.splitCache()/4, 1))
	return err
}

// topNCacheSize is the partition cache of Top-N n over store given the setting (Env.
// AggCacheGroups: 0 is the default, negative is off); 0 means no cache.
func topNCacheSize(n *planner.TopNNode, store state.Store, setting int) int {
	// A partition holds up to N rows over an append-only input (more over an updating
	// one).
	return partCacheSize(len(n.Partition) > 0, n.N, store, setting)
}

// partCacheSize is the partition cache of an operator that keeps rows per partition (a
// Top-N's, a window aggregate's) of about rowsPerPart rows each, over store given the
// setting (Env.AggCacheGroups: 0 is the default, negative is off); 0 means no cache, as
// without partitions. The default keeps about as many rows as an aggregation keeps groups
// (a partition counted as at most 64 rows), and at least 256 partitions.
func partCacheSize(partitioned bool, rowsPerPart int64, store state.Store, setting int) int {
	if setting < 0 || store == nil || !partitioned {
		return 0
	}
	if _, mem := store.(*state.Memory); mem && setting == 0 {
		return 0
	}
	if setting == 0 {
		return max(DefaultAggCacheGroups/int(min(max(rowsPerPart, 1), 64)), 256)
	}
	return max(setting, 4)
}

// smoothed is the running estimate old (0: none yet) moved a quarter of the way to v.
func smoothed(old, v int) int {
	if old == 0 {
		return v
	}
	return (3*old + v) / 4
}

// splitCache is a split's share of the cache.
func (t *topNChangesOp) splitCache() int {
	n := t.cacheMax
	if t.partEst > 0 {
		n = min(n, max(topNCacheBytes/t.partEst, 64))
	}
	return max(n/max(len(t.splits), 1), 4)
}

// topNCacheBytes bounds the memory of the partitions a Top-N over the whole stream keeps
// in memory, its splits together, once the size of a partition is known (partEst): rows
// are often wide (Nexmark q9's, an auction with its winning bid, take about 4 KB), so a
// bound in partitions alone let the cache hold 70 MB of them. 8 MiB rather than 16 took
// q9's peak 10-13 MiB lower at the same events per CPU-second (docs/benchmarks.md, "q9: a
// Top-N's cache of 8 MiB").
const topNCacheBytes = 8 << 20

// fetch reads the partition of key back from the store when it may have left memory; nil
// when the store has none.
func (t *topNChangesOp) fetch(sp *topChSplit, key []byte) (*topChPart, error) {
	if !sp.gone.has(key) {
		return nil, nil
	}
	v, ok, err := t.store.Get(t.stateKey(sp.name, string(key)))
	if err != nil || !ok {
		if err != nil {
			err = &StateError{Op: t.id, Split: sp.name, Err: err}
		}
		return nil, err
	}
	rows, err := decodePartRows(v)
	if err != nil {
		return nil, &StateError{Op: t.id, Split: sp.name, Err: err}
	}
	p := &topChPart{key: string(key), rows: rows, partState: partState{persisted: true}}
	sp.parts[p.key] = p
	return p, nil
}

// evict makes room in sp's share of the cache (evictParts).
func (t *topNChangesOp) evict(sp *topChSplit) {
	t.ages = evictParts(&sp.groupCache, sp.parts, t.splitCache(), t.ages, t.full, &t.pressure)
}

func (t *topNChangesOp) Close() error {
	t.relieve()
	return nil
}
