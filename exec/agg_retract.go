package exec

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// retractAggOp is a GROUP BY without a window over an updating input
// (planner.AggregateNode.Retracting, docs/sql.md "Changelogs"): the input row's last column
// is its change, and a delete takes its row back from its group. aggOp, which only ever
// adds, stays as it is for append-only input.
//
// Per split (the plan exchanges by the group key, so a split's groups are disjoint) the
// groups are found by the encoding of their key values (sql.AppendKey). A group keeps the
// number of rows in it (signed: a delete of a row never added leaves it below zero, and a
// group of no more than zero rows has no output row), and per aggregate either its
// sql.AggState, which Add and Retract keep (sql.Retracter: COUNT, SUM, AVG), or the
// multiset of its argument values (encoded values -> count), its state holding each value
// present once: when a value's last copy goes, sql.ValueSetAggregator.Forget takes it out
// (COUNT(DISTINCT), a MIN's value above the minimum) or the state is rebuilt from the
// multiset (a MIN losing its minimum). Any other aggregate is rebuilt after every
// retraction.
//
// Output (AggregateNode.Changes), once per batch for each group the batch changed and only
// when its row changed: Upsert, the group's new row, or the delete of its last row when it
// has no rows left; Retract, the old row's delete before the new row; AppendOnly (the
// input is bounded), each group's final row when its split's watermark reaches
// MaxWatermark. A group whose count reaches zero is dropped. A global aggregation (no
// keys) has one row whatever the input, as in PostgreSQL: its group is never dropped, and
// its first row (COUNT 0, SUM NULL, ...) is emitted when its split starts without stored
// state.
//
// State: the groups changed since the last Checkpoint (or RemoveSplit) are written to the
// Control's batch under state.Key(job, operator, split, the key values' row, 0, 0), the
// dropped ones deleted; NewSplit loads the split's groups back. A group's value
// (appendRetractGroup) is a version byte, the key values' row, the varint count, then per
// aggregate its state (varint N, varint I, F's 8 bytes, the value V) or its multiset (uvarint
// entries, each the argument values' row and a varint count).
type retractAggOp struct {
	node  *planner.AggregateNode
	job   string
	id    string
	store state.Store
	// bad, schema: the stage's bad-record path and this operator's input schema.
	bad    *badRows
	schema sql.Schema

	nk, na int
	// per aggregate: its Retracter (nil: its values are kept as a multiset), and for a
	// multiset aggregate its ValueSetAggregator (nil: rebuilt from every copy)
	retr []sql.Retracter
	vset []sql.ValueSetAggregator

	splits map[string]*raSplit
	cur    *raSplit

	out   rowArena
	keys  []sql.Value
	args  []sql.Value
	argAt []int
	// scratch: encodings, the new results of a group
	enc, kbuf []byte
	res       []sql.Value
	touched   []*raGroup
}

type raSplit struct {
	name   string
	wm     int64
	groups map[string]*raGroup
	// dirty: the groups changed since the last save (raGroup.dirty); dels: the state keys
	// of dropped groups to delete at the next save
	dirty []*raGroup
	dels  [][]byte
}

// raGroup is one group of a split.
type raGroup struct {
	key  string // the encoding of keys (raSplit.groups)
	keys []sql.Value
	n    int64 // rows in the group
	accs []sql.AggState
	// vals: per multiset aggregate its values (nil for a Retracter's); stale: the
	// aggregates whose state must be rebuilt from them
	vals  []map[string]*valCount
	stale []bool
	// res is the row downstream has (valid when live): the aggregates' results
	res  []sql.Value
	live bool
	// the batch being processed changed the group (touched); its row before
	touched  bool
	prevLive bool
	prev     []sql.Value
	// dirty: changed since the last save; persisted: in the store; dropped: removed from
	// its split (not to be saved)
	dirty, persisted, dropped bool
}

// valCount is one distinct argument tuple of a multiset and how many rows have it.
type valCount struct {
	vals []sql.Value
	n    int64
}

func newRetractAggOp(n *planner.AggregateNode, job, id string, store state.Store) *retractAggOp {
	at := make([]int, len(n.Aggs)+1)
	a := &retractAggOp{node: n, job: job, id: id, store: store, nk: len(n.Keys), na: len(n.Aggs),
		retr: make([]sql.Retracter, len(n.Aggs)), vset: make([]sql.ValueSetAggregator, len(n.Aggs)),
		splits: map[string]*raSplit{}, keys: make([]sql.Value, len(n.Keys)), res: make([]sql.Value, len(n.Aggs))}
	for j, g := range n.Aggs {
		at[j+1] = at[j] + len(g.Args)
		if r, ok := g.Func.(sql.Retracter); ok {
			a.retr[j] = r
		} else if v, ok := g.Func.(sql.ValueSetAggregator); ok {
			a.vset[j] = v
		}
	}
	a.args, a.argAt = make([]sql.Value, at[len(n.Aggs)]), at
	return a
}

func (a *retractAggOp) split(name string) *raSplit {
	if a.cur != nil && a.cur.name == name {
		return a.cur
	}
	sp := a.splits[name]
	if sp == nil {
		sp = &raSplit{name: name, wm: MinWatermark, groups: map[string]*raGroup{}}
		a.splits[name] = sp
	}
	a.cur = sp
	return sp
}

// newGroup adds the group of a.keys (encoded key) to sp.
func (a *retractAggOp) newGroup(sp *raSplit, key string) *raGroup {
	g := &raGroup{key: key, keys: make([]sql.Value, a.nk), accs: make([]sql.AggState, a.na),
		res: make([]sql.Value, a.na), prev: make([]sql.Value, a.na)}
	for i, v := range a.keys {
		g.keys[i] = ownValue(v)
	}
	for j := range a.retr {
		if a.retr[j] == nil {
			if g.vals == nil {
				g.vals, g.stale = make([]map[string]*valCount, a.na), make([]bool, a.na)
			}
			g.vals[j] = map[string]*valCount{}
		}
	}
	sp.groups[key] = g
	return g
}

func (a *retractAggOp) Process(_ int, b *Batch, out Emitter) error {
	sp := a.split(b.Split)
	for _, r := range b.Rows {
		failed := false
		a.enc = a.enc[:0]
		for j, k := range a.node.Keys {
			v := k(r)
			a.keys[j] = v
			a.enc = sql.AppendKey(a.enc, v)
			failed = failed || v.IsError()
		}
		if c := a.node.Conds; c != nil {
			c.Eval(r) // the arguments read their conditions (sql.CompileConds)
		}
		k := 0
		for j := range a.node.Aggs {
			for _, arg := range a.node.Aggs[j].Args {
				v := arg(r)
				a.args[k] = v
				k++
				failed = failed || v.IsError()
			}
		}
		if failed {
			cause := sql.RowError(a.keys)
			if cause == nil {
				cause = sql.RowError(a.args)
			}
			if err := a.bad.report(context.Background(), "aggregate", b.Split, r, a.schema, cause); err != nil {
				return err
			}
			continue
		}
		g := sp.groups[string(a.enc)]
		if g == nil {
			g = a.newGroup(sp, string(a.enc))
		}
		a.touch(g)
		sp.markDirty(g)
		if err := a.apply(g, sql.IsDelete(r[len(r)-1])); err != nil {
			if err := a.bad.report(context.Background(), "aggregate", b.Split, r, a.schema, err); err != nil {
				return err
			}
		}
	}
	a.settle(sp)
	return a.out.flush(b.Split, out)
}

// touch records g's row before the batch changes it.
func (a *retractAggOp) touch(g *raGroup) {
	if g.touched {
		return
	}
	g.touched, g.prevLive = true, g.live
	copy(g.prev, g.res)
	a.touched = append(a.touched, g)
}

func (sp *raSplit) markDirty(g *raGroup) {
	if !g.dirty {
		g.dirty = true
		sp.dirty = append(sp.dirty, g)
	}
}

// apply adds the current row (its arguments in a.args) to g, or takes it back (del).
func (a *retractAggOp) apply(g *raGroup, del bool) *sql.Error {
	if del {
		g.n--
	} else {
		g.n++
	}
	var first *sql.Error
	for j := range a.node.Aggs {
		args := a.args[a.argAt[j]:a.argAt[j+1]]
		f := a.node.Aggs[j].Func
		if r := a.retr[j]; r != nil {
			var err *sql.Error
			if del {
				err = r.Retract(&g.accs[j], args)
			} else {
				err = f.Add(&g.accs[j], args)
			}
			if err != nil && first == nil {
				first = err
			}
			continue
		}
		if a.vset[j] != nil && len(args) == 1 && args[0].K == sql.KindNull {
			continue // MIN, MAX and COUNT(DISTINCT) ignore NULLs: nothing to keep
		}
		a.kbuf = a.kbuf[:0]
		for _, v := range args {
			a.kbuf = sql.AppendKey(a.kbuf, v)
		}
		m := g.vals[j]
		e := m[string(a.kbuf)]
		if e == nil {
			e = &valCount{vals: make([]sql.Value, len(args))}
			for i, v := range args {
				e.vals[i] = ownValue(v)
			}
			m[string(a.kbuf)] = e
		}
		old := e.n
		if del {
			e.n--
			switch {
			case a.vset[j] != nil:
				// The state holds each value present once: it changes only when the last
				// copy goes, and the aggregate takes it out or says to rebuild.
				if old == 1 && !g.stale[j] && !a.vset[j].Forget(&g.accs[j], firstOf(e.vals)) {
					g.stale[j] = true
				}
			case old >= 1:
				g.stale[j] = true
			}
		} else {
			e.n++
			if !g.stale[j] && (e.n >= 1 && a.vset[j] == nil || e.n == 1) {
				if err := f.Add(&g.accs[j], args); err != nil && first == nil {
					first = err
				}
				// The state is never stored (the multiset is): no chunks of fresh values.
				g.accs[j].Set.ClearFresh()
			}
		}
		if e.n == 0 {
			delete(m, string(a.kbuf))
		}
	}
	return first
}

func firstOf(vs []sql.Value) sql.Value {
	if len(vs) == 0 {
		return sql.Null
	}
	return vs[0]
}

// rebuild recomputes the stale states of g from its multisets.
func (a *retractAggOp) rebuild(g *raGroup) {
	for j, stale := range g.stale {
		if !stale {
			continue
		}
		g.stale[j] = false
		g.accs[j] = sql.AggState{}
		f := a.node.Aggs[j].Func
		for _, e := range g.vals[j] {
			times := e.n
			if a.vset[j] != nil {
				times = min(times, 1)
			}
			for ; times > 0; times-- {
				f.Add(&g.accs[j], e.vals) // it took the values before
			}
		}
		g.accs[j].Set.ClearFresh()
	}
}

// results computes g's row (a.res) and reports whether the group has one.
func (a *retractAggOp) results(g *raGroup) bool {
	if g.vals != nil {
		a.rebuild(g)
	}
	if g.n <= 0 && a.nk > 0 {
		return false
	}
	for j := range a.node.Aggs {
		a.res[j] = a.node.Aggs[j].Func.Result(&g.accs[j])
	}
	return true
}

// settle emits the change of each group the batch touched, and drops the groups left
// without rows.
func (a *retractAggOp) settle(sp *raSplit) {
	for i, g := range a.touched {
		a.touched[i] = nil
		g.touched = false
		live := a.results(g)
		changed := live != g.prevLive
		if live && !changed {
			for j, v := range a.res {
				if v != g.prev[j] {
					changed = true
					break
				}
			}
		}
		if changed {
			switch a.node.Changes {
			case planner.Retract:
				if g.prevLive {
					a.emit(g.keys, g.prev, sql.OpDelete)
				}
				if live {
					a.emit(g.keys, a.res, sql.Null)
				}
			case planner.Upsert:
				if live {
					a.emit(g.keys, a.res, sql.Null)
				} else {
					a.emit(g.keys, g.prev, sql.OpDelete)
				}
			}
		}
		g.live = live
		if live {
			copy(g.res, a.res)
		}
		if g.n == 0 && a.nk > 0 {
			a.drop(sp, g)
		}
	}
	a.touched = a.touched[:0]
}

// drop removes g from sp (its stored copy at the next save).
func (a *retractAggOp) drop(sp *raSplit, g *raGroup) {
	delete(sp.groups, g.key)
	g.dropped = true
	if g.persisted {
		a.enc = sql.AppendRow(a.enc[:0], g.keys)
		sp.dels = append(sp.dels, state.Key(nil, a.job, a.id, sp.name, a.enc, 0, 0))
	}
}

// emit appends a row of keys and results, with the change column op unless the output is
// append-only.
func (a *retractAggOp) emit(keys, res []sql.Value, op sql.Value) {
	a.out.vals = append(a.out.vals, keys...)
	a.out.vals = append(a.out.vals, res...)
	if a.node.Changes != planner.AppendOnly {
		a.out.vals = append(a.out.vals, op)
	}
	a.out.endRow()
}

func (a *retractAggOp) Watermark(split string, wm int64, out Emitter) error {
	sp := a.split(split)
	if wm <= sp.wm {
		return nil
	}
	sp.wm = wm
	if wm != MaxWatermark || a.node.Changes != planner.AppendOnly {
		return nil
	}
	// A bounded input ended: each group's final row.
	for _, g := range sp.groups {
		if a.results(g) {
			a.emit(g.keys, a.res, sql.Null)
		}
		if a.out.len() >= 1024 {
			if err := a.out.flush(split, out); err != nil {
				return err
			}
		}
	}
	return a.out.flush(split, out)
}

func (a *retractAggOp) Control(c *Control, out Emitter) error {
	switch c.Kind {
	case NewSplit:
		if err := a.load(c.Split); err != nil {
			return err
		}
		if a.nk == 0 {
			return a.startGlobal(c.Split, out)
		}
	case Checkpoint:
		for _, sp := range a.splits {
			if err := a.save(sp, c.State); err != nil {
				return err
			}
		}
	case RemoveSplit:
		if sp := a.splits[c.Split]; sp != nil {
			if err := a.save(sp, c.State); err != nil {
				return err
			}
			delete(a.splits, c.Split)
			if a.cur == sp {
				a.cur = nil
			}
		}
	}
	return nil
}

// startGlobal gives a global aggregation's split its one group when the store had none,
// and emits its first row (over no rows yet); the group is saved at the next checkpoint,
// so a restart after it does not emit the row again.
func (a *retractAggOp) startGlobal(split string, out Emitter) error {
	sp := a.split(split)
	if len(sp.groups) > 0 {
		return nil
	}
	g := a.newGroup(sp, "")
	sp.markDirty(g)
	a.touch(g)
	a.settle(sp)
	return a.out.flush(split, out)
}

// save writes sp's changed groups to b and deletes its dropped ones.
func (a *retractAggOp) save(sp *raSplit, b *state.Batch) error {
	for _, k := range sp.dels {
		b.Delete(k)
	}
	sp.dels = sp.dels[:0]
	for i, g := range sp.dirty {
		sp.dirty[i] = nil
		g.dirty = false
		if g.dropped {
			continue
		}
		val, err := a.appendGroup(a.kbuf[:0], g)
		if err != nil {
			return fmt.Errorf("operator %s, split %s: %w", a.id, sp.name, err)
		}
		a.kbuf = val
		a.enc = sql.AppendRow(a.enc[:0], g.keys)
		b.Put(state.Key(nil, a.job, a.id, sp.name, a.enc, 0, 0), val)
		g.persisted = true
	}
	sp.dirty = sp.dirty[:0]
	return nil
}

const retractGroupVersion = 1

// appendGroup appends the stored value of g (see retractAggOp).
func (a *retractAggOp) appendGroup(dst []byte, g *raGroup) ([]byte, error) {
	dst = append(dst, retractGroupVersion)
	dst = sql.AppendRow(dst, g.keys)
	dst = binary.AppendVarint(dst, g.n)
	for j := range a.node.Aggs {
		if a.retr[j] != nil {
			s := &g.accs[j]
			if err := a.node.Aggs[j].Func.Encode(s); err != nil {
				return nil, fmt.Errorf("saving %s: %w", a.node.Aggs[j].Text, err)
			}
			dst = binary.AppendVarint(dst, s.N)
			dst = binary.AppendVarint(dst, s.I)
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(s.F))
			dst = sql.AppendValue(dst, s.V)
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(g.vals[j])))
		for _, e := range g.vals[j] {
			dst = sql.AppendRow(dst, e.vals)
			dst = binary.AppendVarint(dst, e.n)
		}
	}
	return dst, nil
}

// decodeGroup reads a stored group (appendGroup) into a new group of sp.
func (a *retractAggOp) decodeGroup(sp *raSplit, b []byte) error {
	if len(b) == 0 || b[0] != retractGroupVersion {
		return fmt.Errorf("%w: unknown version of a retracting aggregation's group", errBadState)
	}
	p := 1
	keys, n, err := sql.DecodeRow(b[p:], nil)
	if err != nil || len(keys) != a.nk {
		return fmt.Errorf("%w: group key: %v", errBadState, err)
	}
	p += n
	varint := func() (int64, error) {
		x, n := binary.Varint(b[p:])
		if n <= 0 {
			return 0, fmt.Errorf("%w: truncated at byte %d", errBadState, p)
		}
		p += n
		return x, nil
	}
	a.enc = a.enc[:0]
	for i, v := range keys {
		a.keys[i] = v
		a.enc = sql.AppendKey(a.enc, v)
	}
	g := a.newGroup(sp, string(a.enc))
	if g.n, err = varint(); err != nil {
		return err
	}
	for j := range a.node.Aggs {
		if a.retr[j] != nil {
			s := &g.accs[j]
			if s.N, err = varint(); err != nil {
				return err
			}
			if s.I, err = varint(); err != nil {
				return err
			}
			if len(b)-p < 8 {
				return fmt.Errorf("%w: truncated at byte %d", errBadState, p)
			}
			s.F = math.Float64frombits(binary.LittleEndian.Uint64(b[p:]))
			p += 8
			v, n, err := sql.DecodeValue(b[p:])
			if err != nil {
				return fmt.Errorf("%w: %v", errBadState, err)
			}
			p += n
			s.V = ownValue(v)
			if err := a.node.Aggs[j].Func.Decode(s); err != nil {
				return fmt.Errorf("%s: %w", a.node.Aggs[j].Text, err)
			}
			continue
		}
		cnt, n := binary.Uvarint(b[p:])
		if n <= 0 || cnt > uint64(len(b)) {
			return fmt.Errorf("%w: truncated at byte %d", errBadState, p)
		}
		p += n
		m := g.vals[j]
		for ; cnt > 0; cnt-- {
			vals, n, err := sql.DecodeRow(b[p:], nil)
			if err != nil {
				return fmt.Errorf("%w: %v", errBadState, err)
			}
			p += n
			e := &valCount{vals: vals}
			for i, v := range vals {
				vals[i] = ownValue(v)
			}
			if e.n, err = varint(); err != nil {
				return err
			}
			a.kbuf = a.kbuf[:0]
			for _, v := range vals {
				a.kbuf = sql.AppendKey(a.kbuf, v)
			}
			m[string(a.kbuf)] = e
		}
		g.stale[j] = true
	}
	g.persisted = true
	g.live = a.results(g)
	copy(g.res, a.res)
	return nil
}

// load reads split's groups from the store.
func (a *retractAggOp) load(split string) error {
	sp := a.split(split)
	if a.store == nil {
		return nil
	}
	prefix := state.SplitPrefix(nil, a.job, a.id, split)
	return a.store.Scan(prefix, func(_, value []byte) error {
		if err := a.decodeGroup(sp, value); err != nil {
			return &StateError{Op: a.id, Split: split, Err: err}
		}
		return nil
	})
}

func (a *retractAggOp) Close() error { return nil }
