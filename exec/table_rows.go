package exec

import (
	"errors"
	"sort"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// tableRowsOp is a table's latest versions kept right above the source of its changes
// (planner.TopNNode TableVersions with AtSource: a postgres-cdc table whose TRUNCATE
// deletes its rows; docs/sql.md, "PostgreSQL change data capture"). Its input is already a
// retract changelog keyed by the primary key (each delete carries the deleted row), so the
// rows pass through unchanged; what the operator adds is a record of the rows the table
// holds, so that a truncation (a row whose change column is sql.OpTruncate) becomes the
// deletes of every one of them, in the order of their keys.
//
// The record lives in the store: each checkpoint writes the keys changed since the last
// one (the row, or a delete), and nothing is read until a truncation, which scans the
// split's keys in the store. Memory holds only the changes of the last two checkpoint
// intervals: those since the last save, and those of the last save, whose commit may still
// be running (a stage waits for the commit of its last checkpoint before it takes the
// next, agg_cache.go), so that the store and these two give the table's rows. Without a
// store everything stays in memory.
type tableRowsOp struct {
	node    *planner.TopNNode
	job, id string
	store   state.Store
	splits  map[string]*tableRowsSplit
	keyBuf  []byte
	keys    []string
	outB    Batch
	outRows []sql.Row
	outOffs []int64
}

// tableRowsSplit is a split's record of changes since its last save (cur) and of its last
// save (prev).
type tableRowsSplit struct {
	name      string
	cur, prev tableChanges
}

// tableChanges are the changes of a split over a checkpoint interval: whether the table
// was truncated (every row before deleted), then key (the encoded primary key) → the row
// without its change column (sql.AppendRow), nil for a deleted key.
type tableChanges struct {
	truncated bool
	rows      map[string][]byte
}

// apply applies c to held, the rows before it.
func (c *tableChanges) apply(held map[string][]byte) {
	if c.truncated {
		clear(held)
	}
	for k, v := range c.rows {
		if v == nil {
			delete(held, k)
		} else {
			held[k] = v
		}
	}
}

var errBadTableRow = errors.New("corrupt table row state")

func newTableRowsOp(n *planner.TopNNode, job, id string, store state.Store) *tableRowsOp {
	return &tableRowsOp{node: n, job: job, id: id, store: store, splits: map[string]*tableRowsSplit{}}
}

func (t *tableRowsOp) split(name string) *tableRowsSplit {
	sp := t.splits[name]
	if sp == nil {
		sp = &tableRowsSplit{name: name, cur: tableChanges{rows: map[string][]byte{}}, prev: tableChanges{rows: map[string][]byte{}}}
		t.splits[name] = sp
	}
	return sp
}

func (t *tableRowsOp) Process(_ int, b *Batch, out Emitter) error {
	sp := t.split(b.Split)
	op := len(t.node.Schema) - 1
	truncates := false
	for _, r := range b.Rows {
		truncates = truncates || sql.IsTruncate(r[op])
	}
	if !truncates {
		for _, r := range b.Rows {
			t.record(sp, r, op)
		}
		return out.Emit(b)
	}
	// A truncation makes rows: the batch is rebuilt, each truncation replaced by the
	// deletes of the rows the table held at that point, which take its offset.
	t.outRows, t.outOffs = t.outRows[:0], t.outOffs[:0]
	for i, r := range b.Rows {
		n := 1
		if sql.IsTruncate(r[op]) {
			before := len(t.outRows)
			if err := t.truncate(sp, op); err != nil {
				return err
			}
			n = len(t.outRows) - before
		} else {
			t.record(sp, r, op)
			t.outRows = append(t.outRows, r)
		}
		if b.Offsets != nil {
			for ; n > 0; n-- {
				t.outOffs = append(t.outOffs, b.Offsets[i])
			}
		}
	}
	t.outB.Split, t.outB.Rows, t.outB.Offsets = b.Split, t.outRows, nil
	if b.Offsets != nil {
		t.outB.Offsets = t.outOffs
	}
	err := out.Emit(&t.outB)
	t.outRows = t.outRows[:0]
	return err
}

// record notes change r (an insert or a delete of its key) in sp's changes since the last
// save.
func (t *tableRowsOp) record(sp *tableRowsSplit, r sql.Row, op int) {
	t.keyBuf = t.keyBuf[:0]
	for _, k := range t.node.Partition {
		t.keyBuf = sql.AppendKey(t.keyBuf, k(r))
	}
	if sql.IsDelete(r[op]) {
		sp.cur.rows[string(t.keyBuf)] = nil
	} else {
		sp.cur.rows[string(t.keyBuf)] = sql.AppendRow(nil, r[:op])
	}
}

// truncate appends to t.outRows the deletes of every row split sp holds — the store's,
// overlaid with the last save's changes and those since — in the order of their keys, and
// notes the truncation: the next save deletes the split's rows from the store.
func (t *tableRowsOp) truncate(sp *tableRowsSplit, op int) error {
	held := map[string][]byte{}
	if t.store != nil {
		prefix := state.SplitPrefix(nil, t.job, t.id, sp.name)
		err := t.store.Scan(prefix, func(key, v []byte) error {
			if len(key) < len(prefix)+16 {
				return &StateError{Op: t.id, Split: sp.name, Err: errBadTableRow}
			}
			held[string(key[len(prefix):len(key)-16])] = append([]byte(nil), v...)
			return nil
		})
		if err != nil {
			return err
		}
	}
	sp.prev.apply(held)
	sp.cur.apply(held)
	keys := make([]string, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r, n, err := sql.DecodeRow(held[k], nil)
		if err != nil || n != len(held[k]) || len(r) != op {
			return &StateError{Op: t.id, Split: sp.name, Err: errBadTableRow}
		}
		t.outRows = append(t.outRows, append(r, sql.OpDelete))
	}
	sp.cur.truncated = true
	clear(sp.cur.rows)
	return nil
}

func (t *tableRowsOp) Watermark(string, int64, Emitter) error { return nil }

func (t *tableRowsOp) Control(c *Control, _ Emitter) error {
	switch c.Kind {
	case NewSplit:
		t.split(c.Split)
	case Checkpoint:
		for _, sp := range t.splits {
			t.save(sp, c.State)
		}
	case RemoveSplit:
		if sp := t.splits[c.Split]; sp != nil {
			t.save(sp, c.State)
			delete(t.splits, c.Split)
		}
	}
	return nil
}

// save writes the split's changes since the last save to b (a truncation first, as the
// deletion of the split's every key); they become the last save's. Without a store
// nothing is written and the changes stay in memory.
func (t *tableRowsOp) save(sp *tableRowsSplit, b *state.Batch) {
	if t.store == nil {
		return
	}
	if sp.cur.truncated {
		b.DropPrefix(state.SplitPrefix(nil, t.job, t.id, sp.name))
	}
	// In the order of the keys: RocksDB inserts a batch's keys into its memtable faster in
	// order (each insert starts where the last one ended).
	t.keys = t.keys[:0]
	for k := range sp.cur.rows {
		t.keys = append(t.keys, k)
	}
	sort.Strings(t.keys)
	for _, k := range t.keys {
		t.keyBuf = state.Key(t.keyBuf[:0], t.job, t.id, sp.name, []byte(k), 0, 0)
		if v := sp.cur.rows[k]; v == nil {
			b.Delete(t.keyBuf)
		} else {
			b.Put(t.keyBuf, v)
		}
	}
	clear(sp.prev.rows)
	sp.prev, sp.cur = sp.cur, sp.prev
	sp.cur.truncated = false
}

func (t *tableRowsOp) Close() error { return nil }
