package exec

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"strings"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// aggOp is a grouped aggregation, windowed (tumble, hop, session, or a window the rows
// carry) or not.
//
// State: hot state lives in memory, per split (a split's groups are disjoint from other
// splits' because the plan partitions by the group key before aggregating). Changed groups
// are written through to the store at each Checkpoint (and at RemoveSplit), and groups of
// closed windows are deleted at the next one, into the Control's batch, so the store holds
// exactly the state as of the last checkpoint and is committed atomically with the source
// offsets. NewSplit loads the split's groups back from the store.
//
// Time: each split's windows close on that split's watermark, and a row is late when every
// window it falls in has closed on its split's watermark.
//
// Panes: a hop aggregation emitted on close whose aggregates all merge exactly
// (sql.MergesExactly) keeps its groups per pane — the stretches of paneW = gcd(size, slide)
// that windows are made of — instead of per window: a row updates its one pane, not the
// size/slide windows it falls in, and a window's groups are the merge of its panes' when
// it closes. A pane lives (in memory and in the store, under its own bounds) until the last
// window holding it closes. Which windows closed before a restore is known from the
// split's checkpointed watermark, which the operator is given right after NewSplit
// (restored): the windows of loaded panes that end at or before it are not emitted again.
// State a version before panes wrote (whole windows) is loaded as windows of their own and
// merged into their window when it closes.
type aggOp struct {
	node  *planner.AggregateNode
	job   string
	id    string // operator id, part of every state key
	store state.Store
	late  *sideOutput // late rows go here (nil: counted only)
	cnt   *counters
	// bad, schema: the stage's bad-record path (a row whose key or argument fails goes
	// there, rowerrors.go) and this operator's input schema.
	bad    *badRows
	schema sql.Schema

	nk, na int
	// mode is what the kind of window does per row, per watermark, at a checkpoint and a
	// restore (aggMode); paneW is the pane width of a hop aggregation computed by panes, 0
	// otherwise.
	mode   aggMode
	paneW  int64
	splits map[string]*aggSplit
	cur    *aggSplit

	out  rowArena
	keys []sql.Value // current row's key values
	// args holds the current row's aggregate arguments: those of aggregate j are
	// args[argAt[j]:argAt[j+1]].
	args  []sql.Value
	argAt []int
	// order runs the aggregates that may fail first; undo keeps their states before the
	// current row (when there are several) to restore them when a later one fails.
	order []int
	undo  []accum
	// fams: the families of COUNT(DISTINCT) calls kept in one set (agg_family.go), or nil;
	// self holds 0, 1, ... na-1 (sections: one aggregate's index without an allocation).
	fams    *distinctFamilies
	self    []int
	rowErr  *sql.Error // the current row's failure in an aggregate
	enc     []byte     // scratch encodings
	kbuf    []byte     // scratch state keys
	dkey    []byte     // scratch distinct chunk keys
	chunk   []byte     // scratch distinct chunk
	lateB   Batch
	lateRow []sql.Row
	// pane mode: scratch of emitWindow
	src    []*win
	merged []accum
	// lay: where window groups keep their accumulators; acc, acc2: scratch copies of a
	// group's (update, and accsOf).
	lay       *accLayout
	acc, acc2 []accum
	// cacheMax bounds the groups of an aggregation without a window kept in memory, its
	// splits together (agg_cache.go; 0: every group stays); storeErr is a failure of the store
	// while reading a group back, which Process returns.
	cacheMax int
	// full asks for a checkpoint: the groups that changed since the last one (which may
	// not leave memory) outgrew a split's share of the cache.
	full func()
	// pressure holds the job's input while the groups that may not leave memory are
	// pressFactor times the cache (pressure.go).
	pressure
	storeErr error
	ages     []uint32 // scratch of evict
	// pend lists the groups of pendW the current batch changed, each once
	// (group.pending), whose rows an aggregation without a window emitting its changes
	// emits when the batch ends (emitPending): one change per group per batch, as
	// retractAggOp does, instead of one per row.
	pend  []int32
	pendW *win
	// bkeys, bhash, bfail: the keys of the batch's rows, their hashes and failures, when
	// prefetch computed them; touched sums what it read (so the reads are not left out).
	bkeys   []sql.Value
	bhash   []uint64
	bfail   []bool
	bgroup  []int32
	bsets   []*sql.DistinctSet
	touched uint64
	// hashedIn: the operator reads its stage's input directly and its keys are the
	// exchange's (planner.AggregateNode.KeysHashed): a batch's Hashes are its keys' hashes.
	hashedIn bool
}

// aggMode is what one kind of window does with the aggregation's groups; aggOp calls it
// per row, per watermark, at a checkpoint and at a restore, and the rest (keys, arguments,
// accumulators, late and bad rows, the store's keys and codecs, output) is aggOp's, shared
// by every mode. The modes: unwindowedMode (agg_unwindowed.go), winMode for tumble and
// hop by windows and givenMode for windows the rows carry (agg_window.go), paneMode for
// hop by panes (agg_pane.go) and sessionMode (agg_session.go). A mode keeps its per-split
// state in aggSplit (its own sub-struct where it has one).
type aggMode interface {
	// row folds the current row r into sp: its key values are in a.keys (hash h), its
	// aggregates' arguments in a.args. It returns true when r is late (no window it falls
	// in is open); an aggregate that fails on r leaves a.rowErr set and no state changed
	// by r (see place).
	row(a *aggOp, sp *aggSplit, r sql.Row, h uint64) (late bool)
	// fire acts on sp's watermark, which has just advanced: it emits (on close) and forgets
	// what closed, recording the deletion of what was stored.
	fire(a *aggOp, sp *aggSplit, out Emitter) error
	// save writes sp's groups changed since the last save to b (a checkpoint, RemoveSplit).
	save(a *aggOp, sp *aggSplit, b *state.Batch) error
	// restore adds a group loaded from the store (its key in a.keys, hash h) as persisted,
	// and returns the window and group its distinct chunks are stored into (nil when accs
	// is the group's own) and, when fresh, what marks it changed.
	restore(a *aggOp, sp *aggSplit, h uint64, start, end int64, accs []accum, fresh bool) (w *win, g int, dirty func())
	// close releases what the mode holds when the operator closes.
	close() error
}

// accum is the state of one aggregate of one group; the aggregate's sql.Aggregator
// (AggSpec.Func) reads and writes it.
type accum = sql.AggState

// win is one tumble/hop window of one split, or the single pseudo-window of a non-windowed
// aggregation. Groups are found by key hash (slots, groupindex.go); the
// keys of group g are keys.at(g), its accumulators row g of accs (accrows.go: only the
// fields the aggregates use; aggOp.accsOf reads them, accLayout.store writes them).
type win struct {
	start, end int64
	slots      []int32
	slotBits   uint
	groups     []group
	keys       keyRows
	accs       accRows
	dead       bool
	// whole: in pane mode, a whole window loaded from state written before panes (see
	// aggOp), merged into its window when that closes.
	whole bool
	// dirty lists the groups changed since the last save (each once: group.dirty).
	dirty []int32
	// seen is, without a window (state TTL), per group the split's watermark at its last
	// row.
	seen []int64
}

type group struct {
	hash uint64
	// touch is the split's row clock (aggSplit.tick) at the group's last row, and saved
	// the number of the split's save that last wrote it (aggSplit.saves; 0: loaded or
	// read back from the store): what the bounded group cache of an aggregation without a
	// window goes by (agg_cache.go).
	touch     uint32
	saved     uint16
	dirty     bool
	persisted bool
	// pending: changed by the current batch, its row emitted when the batch ends
	// (aggOp.pend)
	pending bool
}

type aggSplit struct {
	name   string
	lay    *accLayout
	narrow bool  // windows keep their keys narrow (keyrows.go)
	nk, na int   // key values and aggregates per group
	wm     int64 // the split's watermark
	// with a state TTL: the watermark at the last sweep of expired groups
	swept int64
	// tumble, hop (windows or panes), given, none
	wins map[[2]int64]*win
	ends winHeap
	last *win
	// dirtyWins are the windows with changed groups (win.dirty) since the last save
	dirtyWins []*win
	// Fired windows are reused for new ones (saving their maps and arenas), but only after
	// the next save: until then dirty references may still point at them.
	retired, free []*win
	paneSplit     // pane mode (agg_pane.go)
	sessSplit     // session mode (agg_session.go)
	groupCache    // the bounded group cache (agg_cache.go)
	// state keys to delete at the next checkpoint, and key prefixes to drop (panes)
	delBuf   []byte
	delEnds  []int
	dropBuf  []byte
	dropEnds []int
}

func newAggOp(n *planner.AggregateNode, job, id string, store state.Store, late *sideOutput, cnt *counters) *aggOp {
	at := make([]int, len(n.Aggs)+1)
	var order, rest []int
	for j, g := range n.Aggs {
		at[j+1] = at[j] + len(g.Args)
		if g.MayFail {
			order = append(order, j)
		} else {
			rest = append(rest, j)
		}
	}
	var undo []accum
	if len(order) > 1 {
		undo = make([]accum, len(order))
	}
	order = append(order, rest...)
	var paneW int64
	if w := n.Window; w.Kind == planner.WindowHop && n.Emit != planner.EmitChanges && w.Slide > 0 && w.Slide < w.Size && len(n.Keys) < paneKeyMark {
		paneW = gcd(w.Size, w.Slide)
		for _, g := range n.Aggs {
			if !sql.MergesExactly(g.Func, g.ArgTypes) {
				paneW = 0
			}
		}
	}
	var mode aggMode
	switch {
	case n.Window.Kind == planner.WindowNone:
		mode = unwindowedMode{changes: n.Emit != planner.EmitOnClose}
	case n.Window.Kind == planner.WindowSession:
		mode = sessionMode{}
	case n.Window.Kind == planner.WindowGiven:
		mode = givenMode{}
	case paneW > 0:
		mode = paneMode{}
	default:
		mode = winMode{}
	}
	self := make([]int, len(n.Aggs))
	for j := range self {
		self[j] = j
	}
	return &aggOp{
		fams: newDistinctFamilies(n, mode), self: self,
		mode: mode,
		lay:  newAccLayout(n.Aggs), acc: make([]accum, len(n.Aggs)), acc2: make([]accum, len(n.Aggs)),
		paneW: paneW,
		order: order, undo: undo,
		node: n, job: job, id: id, store: store, late: late, cnt: cnt,
		nk: len(n.Keys), na: len(n.Aggs),
		splits: map[string]*aggSplit{},
		keys:   make([]sql.Value, len(n.Keys)),
		args:   make([]sql.Value, at[len(n.Aggs)]),
		argAt:  at,
	}
}

func (a *aggOp) split(name string) *aggSplit {
	if a.cur != nil && a.cur.name == name {
		return a.cur
	}
	sp := a.splits[name]
	if sp == nil {
		sp = &aggSplit{name: name, lay: a.lay, narrow: narrowKeyTypes(a.node.KeyTypes, a.nk), nk: a.nk, na: a.na, wm: MinWatermark, swept: MinWatermark, wins: map[[2]int64]*win{}}
		sp.skIndex = map[uint64]int32{}
		sp.pending = map[int64]bool{}
		a.splits[name] = sp
		sp.saves, sp.evictAt = 1, a.splitCache()
	}
	a.cur = sp
	return sp
}

func (a *aggOp) Process(_ int, b *Batch, out Emitter) error {
	sp := a.split(b.Split)
	a.lateRow = a.lateRow[:0]
	sp.restored = false // no watermark came after the load: no window had closed
	var known []uint64  // the rows' key hashes the exchange computed
	if a.hashedIn && len(b.Hashes) == len(b.Rows) {
		known = b.Hashes
	}
	pre := a.prefetch(sp, b.Rows, known)
	conds := a.node.Conds
	var skip []bool // the arguments distinctFamilies.prepare stands for
	if a.fams != nil {
		skip = a.fams.skip
	}
	for i, r := range b.Rows {
		var h uint64
		var failed bool
		if pre {
			copy(a.keys, a.bkeys[i*a.nk:])
			h, failed = a.bhash[i], a.bfail[i]
		} else {
			h, failed = a.keysOf(r, a.keys, known, i)
		}
		if conds != nil {
			conds.Eval(r)
		}
		failed = a.evalArgs(r, skip) || failed
		if skip != nil {
			failed = a.fams.prepare(r, conds) || failed
		}
		if failed {
			if skip != nil {
				// The arguments prepare stood for, computed to name the first that failed.
				a.evalArgs(r, nil)
			}
			cause := sql.RowError(a.keys)
			if cause == nil {
				cause = sql.RowError(a.args)
			}
			if cause == nil && conds != nil {
				cause = conds.Err()
			}
			if err := a.reportBad(b.Split, r, cause); err != nil {
				return err
			}
			continue
		}
		a.rowErr = nil
		late := a.mode.row(a, sp, r, h)
		if err := a.storeErr; err != nil {
			// The group could not be read back: the job fails (and restarts from its
			// last checkpoint) rather than go on without the group's state.
			a.storeErr = nil
			return err
		}
		if late {
			a.lateRow = append(a.lateRow, r)
			continue
		}
		if a.rowErr != nil {
			// An aggregate (a user aggregate's code) failed on the row: it did not change
			// that group's state and goes to the bad-record path.
			if err := a.reportBad(b.Split, r, a.rowErr); err != nil {
				return err
			}
		}
		if a.out.len() >= 1024 {
			if err := a.out.flush(b.Split, out); err != nil {
				return err
			}
		}
	}
	a.emitPending()
	if pre {
		clear(a.bkeys) // (no reference to the batch's strings is kept)
	}
	if len(a.lateRow) > 0 {
		a.cnt.late.Add(int64(len(a.lateRow)))
		if a.late != nil {
			a.lateB.Split, a.lateB.Rows = b.Split, a.lateRow
			if err := a.late.Process(&a.lateB); err != nil {
				return err
			}
		}
	}
	return a.out.flush(b.Split, out)
}

// evalArgs computes the aggregates' arguments over r into a.args, but those of the
// aggregates skip marks, and reports whether one failed.
func (a *aggOp) evalArgs(r sql.Row, skip []bool) (failed bool) {
	for j := range a.node.Aggs {
		if skip != nil && skip[j] {
			continue
		}
		for k, arg := range a.node.Aggs[j].Args {
			v := arg(r)
			a.args[a.argAt[j]+k] = v
			failed = failed || v.K == sql.KindNull && v.S != ""
		}
	}
	return failed
}

// keysOf computes the key values of r, row i of its batch, into keys, and returns their
// hash and whether one failed. The hash is known[i] when known is not nil: the exchange
// that delivered the batch computed it.
func (a *aggOp) keysOf(r sql.Row, keys []sql.Value, known []uint64, i int) (h uint64, failed bool) {
	h = sql.HashSeed
	for j, k := range a.node.Keys {
		v := k(r)
		keys[j] = v
		if known == nil {
			h = sql.HashValue(h, v)
		}
		failed = failed || v.K == sql.KindNull && v.S != ""
	}
	if known != nil {
		h = known[i]
	}
	return h, failed
}

// prefetchGroups is the number of groups from which prefetch reads ahead: fewer stay in
// the cache (q15's one group a day lost 3-7 % to it). The splits' groups share the cache:
// q16's 10,000 channels are 2,500 in each of four splits.
const prefetchGroups = 1024

// prefetch, for an aggregation without a window of prefetchGroups groups or more in the
// split, computes the keys of a batch's rows first (a.bkeys, a.bhash, a.bfail) and reads
// the memory of the groups they are likely to find — their slot, record, accumulators and
// distinct sets — in stages over all the rows, so that the cache misses of many rows
// overlap instead of each row waiting for its own in turn (with many groups, most rows miss
// the cache: Nexmark q16's 10,000 channels). It reports whether it computed the keys.
func (a *aggOp) prefetch(sp *aggSplit, rows []sql.Row, known []uint64) bool {
	w := sp.last
	if a.node.Window.Kind != planner.WindowNone || len(rows) < 16 || a.nk == 0 || w == nil || len(w.groups) < prefetchGroups {
		return false
	}
	if n := len(rows) * a.nk; cap(a.bkeys) < n {
		a.bkeys = make([]sql.Value, n)
	}
	a.bkeys, a.bhash, a.bfail = a.bkeys[:len(rows)*a.nk], a.bhash[:0], a.bfail[:0]
	for i, r := range rows {
		h, failed := a.keysOf(r, a.bkeys[i*a.nk:(i+1)*a.nk], known, i)
		a.bhash, a.bfail = append(a.bhash, h), append(a.bfail, failed)
	}
	// In stages, each over every row: the loads of one stage do not wait for each other,
	// only for the stage before.
	var sum uint64
	gs := a.bgroup[:0]
	for _, h := range a.bhash {
		gs = append(gs, w.slots[w.home(h)]-1)
	}
	a.bgroup = gs
	sets := a.bsets[:0]
	for _, g := range gs {
		if g < 0 {
			continue
		}
		sum += w.groups[g].hash
		if ints := w.accs.ints.at(int(g)); len(ints) > 0 {
			sum += uint64(ints[0])
		}
		for _, set := range w.accs.sets.at(int(g)) {
			if set != nil {
				sets = append(sets, set)
			}
		}
	}
	for _, set := range sets {
		sum += set.Touch()
	}
	for _, set := range sets {
		sum += set.TouchData()
	}
	clear(sets)
	a.bsets = sets[:0]
	a.touched += sum
	return true
}

// addWin adds an empty window [start, end) to sp.wins (a freed one when there is one).
func (sp *aggSplit) addWin(start, end int64) *win {
	var w *win
	{
		if n := len(sp.free); n > 0 {
			w = sp.free[n-1]
			sp.free = sp.free[:n-1]
			w.clearSlots()
			w.start, w.end, w.dead, w.whole = start, end, false, false
			w.groups = w.groups[:0]
			w.dirty, w.seen = w.dirty[:0], w.seen[:0]
			w.keys.reset(sp.narrow)
			w.accs.reset()
		} else {
			w = sp.newWin(start, end)
		}
		sp.wins[[2]int64{start, end}] = w
	}
	return w
}

func (sp *aggSplit) newWin(start, end int64) *win {
	return &win{start: start, end: end, keys: newKeyRows(sp.nk, sp.narrow), accs: newAccRows(sp.lay)}
}

// lookup finds or creates the group of a.keys (hash h) in w and marks it dirty; created
// says it is new.
func (a *aggOp) lookup(sp *aggSplit, w *win, h uint64) (g int32, created bool) {
	g = w.find(h, a.keys)
	created = false
	if g < 0 && sp.spilled {
		g = a.fetch(sp, w, h)
	}
	if g < 0 {
		if a.cacheMax > 0 {
			a.canonKeys()
		}
		g = int32(len(w.groups))
		w.groups = append(w.groups, group{hash: h})
		w.index(g)
		w.keys.add(a.keys)
		w.accs.add()
		if a.node.Window.Kind == planner.WindowNone {
			w.seen = append(w.seen, 0)
		}
		created = true
	}
	sp.tick++
	w.groups[g].touch = sp.tick
	sp.markDirty(w, g)
	return g, created
}

// markDirty records that group g of w changed since the last save.
func (sp *aggSplit) markDirty(w *win, g int32) {
	if gr := &w.groups[g]; !gr.dirty {
		gr.dirty = true
		if len(w.dirty) == 0 {
			sp.dirtyWins = append(sp.dirtyWins, w)
		}
		w.dirty = append(w.dirty, g)
	}
}

func (a *aggOp) keysEqual(ks []sql.Value) bool { return valuesEqual(ks, a.keys) }

func valuesEqual(x, y []sql.Value) bool {
	for i, v := range x {
		if !sql.Equal(v, y[i]) {
			return false
		}
	}
	return true
}

// ownValue copies a value's string so that state never aliases a decoder's buffer.
func ownValue(v sql.Value) sql.Value {
	if v.S != "" {
		v.S = strings.Clone(v.S)
	}
	return v
}

func (a *aggOp) update(w *win, g int32) {
	a.lay.load(&w.accs, int(g), a.acc)
	a.updateAccs(a.acc)
	if a.rowErr == nil {
		a.lay.store(&w.accs, int(g), a.acc)
	}
}

// accsOf returns the accumulators of group g of w: a copy, valid until the next call;
// changes to it are not kept (but those through its Set pointers are).
func (a *aggOp) accsOf(w *win, g int) []accum {
	a.lay.load(&w.accs, g, a.acc2)
	return a.acc2
}

// place folds the current row into its group of w (created when new). When an aggregate
// fails on the row (a.rowErr), the group it created is removed again, so no group exists
// without rows, and ok is false. (A hop row that fails in one window has been applied to
// the windows before it.)
func (a *aggOp) place(sp *aggSplit, w *win, h uint64) (g int32, created, ok bool) {
	g, created = a.lookup(sp, w, h)
	a.update(w, g)
	if a.rowErr == nil {
		return g, created, true
	}
	if created {
		a.unplaceCreated(sp, w, g)
	}
	return g, created, false
}

// unplaceCreated removes group g, just created in w by a row an aggregate failed.
func (a *aggOp) unplaceCreated(sp *aggSplit, w *win, g int32) {
	{
		// The group is w's last, and its dirty reference sp's last.
		w.unindexLast()
		w.groups = w.groups[:g]
		w.keys.truncate(int(g))
		w.accs.truncate(int(g))
		if len(w.seen) > int(g) {
			w.seen = w.seen[:g]
		}
		if n := len(w.dirty); n > 0 && w.dirty[n-1] == g {
			w.dirty = w.dirty[:n-1]
			if n == 1 {
				// w became dirty with this group: it is the last of the dirty windows.
				sp.dirtyWins = sp.dirtyWins[:len(sp.dirtyWins)-1]
			}
		}
	}
}

// updateAccs folds the current row into accs. Aggregates that may fail (user
// aggregates, AggSpec.MayFail) run first; when one fails (a.rowErr is set) those before it
// are restored, so the row changes none of accs.
func (a *aggOp) updateAccs(accs []accum) {
	for oi, j := range a.order {
		acc := &accs[j]
		if a.fams.in(j) {
			if fam := a.fams.leads(j); fam != nil {
				a.addFamily(accs, fam)
			}
			continue
		}
		if oi < len(a.undo) {
			a.undo[oi] = *acc
		}
		if err := a.node.Aggs[j].Func.Add(acc, a.args[a.argAt[j]:a.argAt[j+1]]); err != nil {
			for i := 0; i < oi; i++ {
				accs[a.order[i]] = a.undo[i]
			}
			a.rowErr = err
			return
		}
	}
}

// mergeAccs folds src into dst (session merging).
func (a *aggOp) mergeAccs(dst, src []accum) {
	for j := range dst {
		a.node.Aggs[j].Func.Merge(&dst[j], &src[j])
	}
}

// result is the value of aggregate j over acc.
func (a *aggOp) result(j int, acc *accum) sql.Value {
	return a.node.Aggs[j].Func.Result(acc)
}

// reportBad sends the row r to the bad-record path with cause.
func (a *aggOp) reportBad(split string, r sql.Row, cause *sql.Error) error {
	a.rowErr = nil
	return a.bad.report(context.Background(), "aggregate", split, r, a.schema, cause)
}

func (a *aggOp) emitGroup(w *win, g int32) { a.emitGroupAt(w, g, w.start, w.end) }

// emitGroupAt emits group g of w as a group of window [start, end).
func (a *aggOp) emitGroupAt(w *win, g int32, start, end int64) {
	a.out.vals = append(a.out.vals, w.keys.at(int(g))...)
	if a.node.Window.Kind != planner.WindowNone {
		a.out.vals = append(a.out.vals, sql.Timestamp(start), sql.Timestamp(end))
	}
	accs := a.accsOf(w, int(g))
	for j := range accs {
		if a.fams.in(j) {
			a.out.vals = append(a.out.vals, a.fams.result(j, accs))
			continue
		}
		a.out.vals = append(a.out.vals, a.result(j, &accs[j]))
	}
	if a.node.Changes != planner.AppendOnly {
		a.out.vals = append(a.out.vals, sql.Null) // the change column: an insert
	}
	a.out.endRow()
}

// retractGroup emits the delete of group g's current row (an updating aggregation's old
// row, docs/sql.md "Changelogs").
func (a *aggOp) retractGroup(w *win, g int32) {
	a.emitGroup(w, g)
	a.out.vals[len(a.out.vals)-1] = sql.OpDelete
}

// deleteKey records the deletion of a persisted group's state key and of the chunks of
// its distinct values (statecodec.go), which accs holds.
func (sp *aggSplit) deleteKey(a *aggOp, keys []sql.Value, start, end int64, accs []accum) {
	a.enc = sql.AppendRow(a.enc[:0], keys)
	at := len(sp.delBuf)
	sp.delBuf = state.Key(sp.delBuf, a.job, a.id, sp.name, a.enc, start, end)
	sp.delEnds = append(sp.delEnds, len(sp.delBuf))
	a.kbuf = append(a.kbuf[:0], sp.delBuf[at:]...) // the group's key
	var chunks int32
	for j := range accs {
		set := accs[j].Set
		if set == nil {
			continue
		}
		for _, js := range a.sections(j, set) {
			for c := range set.Chunks {
				sp.delBuf = distinctKey(sp.delBuf, a.kbuf, js, int(c))
				sp.delEnds = append(sp.delEnds, len(sp.delBuf))
			}
		}
		chunks = max(chunks, set.GroupChunks)
		set.Chunks, set.GroupChunks, set.GroupWhole = 0, 0, 0
	}
	for c := range chunks {
		sp.delBuf = groupChunkKey(sp.delBuf, a.kbuf, len(accs), int(c))
		sp.delEnds = append(sp.delEnds, len(sp.delBuf))
	}
}

func (a *aggOp) Watermark(split string, wm int64, out Emitter) error {
	sp := a.split(split)
	if wm <= sp.wm {
		return nil
	}
	sp.wm = wm
	return a.fire(sp, out)
}

// fire emits (on close) and forgets what closed on the split's watermark (aggMode.fire).
func (a *aggOp) fire(sp *aggSplit, out Emitter) error { return a.mode.fire(a, sp, out) }

// dropWin forgets a closed window or pane (its persisted groups' deletion is recorded).
func (sp *aggSplit) dropWin(w *win) {
	w.dead = true
	if len(sp.retired) < 16 {
		sp.retired = append(sp.retired, w)
	}
	delete(sp.wins, [2]int64{w.start, w.end})
	if sp.last == w {
		sp.last = nil
	}
}

func (a *aggOp) Control(c *Control, out Emitter) error {
	switch c.Kind {
	case NewSplit:
		if err := a.load(c.Split); err != nil {
			return err
		}
		if n := a.node; n.Window.Kind == planner.WindowNone && len(n.Keys) == 0 && n.Changes != planner.AppendOnly {
			return a.startGlobal(c.Split, out)
		}
	case Checkpoint:
		for _, sp := range a.splits {
			if err := a.save(sp, c.State); err != nil {
				return err
			}
		}
		a.relieve()
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

// startGlobal gives a global aggregation that emits changes its one row when its split
// starts without state, as PostgreSQL answers one row over no rows (COUNT 0, SUM NULL);
// the group is saved at the next checkpoint, so a restart after it does not emit it again.
func (a *aggOp) startGlobal(split string, out Emitter) error {
	sp := a.split(split)
	if w := sp.wins[[2]int64{0, 0}]; w != nil && len(w.groups) > 0 {
		return nil
	}
	w := sp.window(0, 0)
	a.keys = a.keys[:0]
	g, _ := a.lookup(sp, w, sql.HashSeed)
	w.seen[g] = sp.wm
	a.emitGroup(w, g)
	return a.out.flush(split, out)
}

// flushDeletes adds sp's pending deletions to b.
func (sp *aggSplit) flushDeletes(b *state.Batch) {
	start := 0
	for _, e := range sp.delEnds {
		b.Delete(sp.delBuf[start:e])
		start = e
	}
	start = 0
	for _, e := range sp.dropEnds {
		b.DropPrefix(sp.dropBuf[start:e])
		start = e
	}
	sp.delBuf, sp.delEnds = sp.delBuf[:0], sp.delEnds[:0]
	sp.dropBuf, sp.dropEnds = sp.dropBuf[:0], sp.dropEnds[:0]
}

// save writes sp's changed groups (aggMode.save) and pending deletions to b. Deletions go
// before and after the mode's writes: a session whose bounds moved records the deletion
// of its old copy while it is saved (keys unlike the new ones).
func (a *aggOp) save(sp *aggSplit, b *state.Batch) error {
	sp.flushDeletes(b)
	if err := a.mode.save(a, sp, b); err != nil {
		return err
	}
	sp.flushDeletes(b)
	return nil
}

// saveWins writes the changed groups of sp's windows (or panes, or its pseudo-window) to b,
// and frees the windows retired before.
func (a *aggOp) saveWins(sp *aggSplit, b *state.Batch) error {
	sp.nextSave()
	for _, w := range sp.dirtyWins {
		for _, g := range w.dirty {
			gr := &w.groups[g]
			gr.dirty = false
			gr.saved = sp.saves
			if w.dead {
				continue
			}
			accs := a.accsOf(w, int(g))
			if err := a.putGroup(sp, b, w.keys.at(int(g)), w.start, w.end, accs); err != nil {
				return err
			}
			a.lay.store(&w.accs, int(g), accs) // what Encode wrote into the stored fields
			gr.persisted = true
		}
		w.dirty = w.dirty[:0]
	}
	clear(sp.dirtyWins)
	sp.dirtyWins = sp.dirtyWins[:0]
	sp.free = append(sp.free, sp.retired...)
	clear(sp.retired)
	sp.retired = sp.retired[:0]
	return nil
}

func (a *aggOp) putGroup(sp *aggSplit, b *state.Batch, keys []sql.Value, start, end int64, accs []accum) error {
	for j := range accs {
		if err := a.node.Aggs[j].Func.Encode(&accs[j]); err != nil {
			return fmt.Errorf("operator %s, split %s: saving %s: %w", a.id, sp.name, a.node.Aggs[j].Text, err)
		}
	}
	a.enc = sql.AppendRow(a.enc[:0], keys)
	if a.paneW > 0 && end-start == a.paneW {
		a.kbuf = append(panePrefix(a.kbuf[:0], a.job, a.id, sp.name, start), a.enc...)
		a.enc = appendPaneAccs(a.enc[:0], accs)
	} else {
		a.kbuf = state.Key(a.kbuf[:0], a.job, a.id, sp.name, a.enc, start, end)
		a.enc = appendGroupState(a.enc[:0], keys, start, end, accs)
	}
	b.Put(a.kbuf, a.enc)
	a.putDistinct(b, accs)
	return nil
}

// putDistinct writes what changed of the group's distinct values, whose group's state key
// is in a.kbuf: a chunk of the values added since the last save, or all of them as chunk 0
// (statecodec.go).
func (a *aggOp) putDistinct(b *state.Batch, accs []accum) {
	var chunks, whole int32
	n, fresh, legacy := 0, false, false
	for j := range accs {
		if set := accs[j].Set; set != nil {
			chunks, whole = max(chunks, set.GroupChunks), max(whole, set.GroupWhole)
			n += set.Len()
			fresh = fresh || set.HasFresh()
			legacy = legacy || set.Chunks > 0
		}
	}
	if !fresh && !legacy {
		return
	}
	jitter := int32(maphash.Bytes(chunkSeed, a.kbuf) % chunkJitter)
	grown := 16*int64(n) >= int64(whole)*(32+int64(jitter)) // by 2 to 3 times (jitter)
	rewrite := chunks == 0 || legacy || n <= tinyDistinctGroup || chunks >= maxDistinctChunks-jitter ||
		chunks >= compactDistinctChunks-jitter && grown
	a.chunk = a.chunk[:0]
	for j := range accs {
		set := accs[j].Set
		if set == nil {
			continue
		}
		if rewrite {
			for _, js := range a.sections(j, set) {
				for c := range set.Chunks { // the set's own chunks, of earlier versions
					b.Delete(distinctKey(a.dkey[:0], a.kbuf, js, int(c)))
				}
			}
			set.Chunks = 0
		}
		if set.Members() == 0 {
			a.appendSection(j, set, -1, rewrite)
			continue
		}
		for m, js := range a.fams.leads(j) {
			a.appendSection(js, set, m, rewrite)
		}
	}
	if rewrite {
		for c := 1; c < int(chunks); c++ {
			b.Delete(groupChunkKey(a.dkey[:0], a.kbuf, len(accs), c))
		}
		if len(a.chunk) > 0 {
			b.Put(groupChunkKey(a.dkey[:0], a.kbuf, len(accs), 0), a.chunk)
			chunks, whole = 1, int32(n)
		} else {
			if chunks > 0 {
				b.Delete(groupChunkKey(a.dkey[:0], a.kbuf, len(accs), 0))
			}
			chunks, whole = 0, 0
		}
	} else {
		b.Put(groupChunkKey(a.dkey[:0], a.kbuf, len(accs), int(chunks)), a.chunk)
		chunks++
	}
	for j := range accs {
		if set := accs[j].Set; set != nil {
			set.GroupChunks, set.GroupWhole = chunks, whole
			set.ClearFresh()
		}
	}
}

// appendSection appends to a.chunk the section of aggregate j's distinct values in set
// (member m's of a family set, or set's own when m is -1): all of them when rewrite, those
// added since the last save otherwise; nothing when there are none.
func (a *aggOp) appendSection(j int, set *sql.DistinctSet, m int, rewrite bool) {
	head := len(a.chunk)
	a.chunk = binary.AppendUvarint(a.chunk, uint64(j))
	at := len(a.chunk)
	a.chunk = append(a.chunk, lengthRoom[:]...) // the length, written once known
	switch {
	case m >= 0 && rewrite:
		a.chunk = set.AppendMemberChunk(a.chunk, m)
	case m >= 0:
		a.chunk = set.AppendMemberFreshChunk(a.chunk, m)
	case rewrite:
		a.chunk = set.AppendChunk(a.chunk)
	default:
		a.chunk = set.AppendFreshChunk(a.chunk)
	}
	if len(a.chunk) == at+len(lengthRoom) {
		a.chunk = a.chunk[:head]
		return
	}
	a.chunk = putLengthBefore(a.chunk, at)
}

// lengthRoom is the room left for a length before what it measures.
var lengthRoom [binary.MaxVarintLen64]byte

// chunkSeed seeds the hash that spreads the groups' chunk thresholds (chunkJitter).
var chunkSeed = maphash.MakeSeed()

// putLengthBefore writes the length of b[at+len(lengthRoom):] as a uvarint into the room
// reserved at b[at:] and closes the gap left.
func putLengthBefore(b []byte, at int) []byte {
	room := len(lengthRoom)
	k := binary.PutUvarint(b[at:at+room], uint64(len(b)-at-room))
	return append(b[:at+k], b[at+room:]...)
}

// load reads split's groups from the store into memory.
func (a *aggOp) load(split string) error {
	if a.store == nil {
		return nil
	}
	sp := a.split(split)
	prefix := state.SplitPrefix(nil, a.job, a.id, split)
	// The group last read, whose distinct chunks (keys extending its key) follow it.
	var lastKey []byte
	var lastAccs []accum
	var lastWin *win // the window whose group lastAccs are a copy of (nil: a session's own)
	var lastG int
	var legacy []func() // groups whose distinct values came inline (earlier versions)
	loaded := 0
	full := false
	err := a.store.Scan(prefix, func(key, value []byte) error {
		if full {
			// The cache is full: the other groups stay in the store until a row asks for
			// them (agg_cache.go); the filter of groups gone from memory learns their keys.
			if len(key) > len(lastKey) && string(key[:len(lastKey)]) == string(lastKey) {
				return nil // a distinct chunk of the group before
			}
			if len(key) < len(prefix)+16 {
				return &StateError{Op: a.id, Split: split, Err: fmt.Errorf("%w: a group's key of %d bytes", errBadState, len(key))}
			}
			lastKey = append(lastKey[:0], key...)
			sp.spill(key[len(prefix) : len(key)-16])
			return nil
		}
		if lastAccs != nil && len(key) > len(lastKey) && string(key[:len(lastKey)]) == string(lastKey) {
			err := addDistinctChunk(lastAccs, key[len(lastKey):], value, a.fams)
			if err == nil && lastWin != nil {
				a.lay.store(&lastWin.accs, lastG, lastAccs)
			}
			if err != nil {
				return &StateError{Op: a.id, Split: split, Err: err}
			}
			return nil
		}
		lastKey = append(lastKey[:0], key...)
		if a.cacheMax > 0 && loaded >= a.splitCache() {
			if len(key) < len(prefix)+16 {
				return &StateError{Op: a.id, Split: split, Err: fmt.Errorf("%w: a group's key of %d bytes", errBadState, len(key))}
			}
			full = true
			lastAccs = nil
			sp.spill(key[len(prefix) : len(key)-16])
			return nil
		}
		loaded++
		var keys sql.Row
		var start, end int64
		var accs []accum
		var err error
		if rest := key[len(prefix):]; len(rest) > 0 && rest[0] == paneKeyMark {
			if a.paneW == 0 {
				return &StateError{Op: a.id, Split: split, Err: fmt.Errorf("%w: a pane's group, and the aggregation does not compute by panes (did the query change?)", errBadState)}
			}
			keys, start, end, accs, err = decodePaneGroup(rest, value, a.paneW, a.nk, a.na)
		} else {
			keys, start, end, accs, err = decodeGroupState(value, a.nk, a.na)
		}
		if err != nil {
			return &StateError{Op: a.id, Split: split, Err: err}
		}
		for j := range accs {
			if err := a.node.Aggs[j].Func.Decode(&accs[j]); err != nil {
				return &StateError{Op: a.id, Split: split, Err: fmt.Errorf("%s: %w", a.node.Aggs[j].Text, err)}
			}
		}
		if err := a.fams.join(accs); err != nil {
			return &StateError{Op: a.id, Split: split, Err: err}
		}
		copy(a.keys, keys)
		h := sql.HashSeed
		for _, v := range keys {
			h = sql.HashValue(h, v)
		}
		var dirty func()
		lastWin, lastG, dirty = a.mode.restore(a, sp, h, start, end, accs, hasFresh(accs))
		lastAccs = accs
		if dirty != nil {
			legacy = append(legacy, dirty)
		}
		return nil
	})
	// What was just loaded is what the store holds: nothing to write back, except the
	// distinct values an earlier version kept inline, which go under their own keys.
	for _, w := range sp.dirtyWins {
		for _, g := range w.dirty {
			w.groups[g].dirty = false
		}
		w.dirty = w.dirty[:0]
	}
	clear(sp.dirtyWins)
	sp.dirtyWins = sp.dirtyWins[:0]
	for _, f := range legacy {
		f()
	}
	return err
}

// restoreGroup puts a loaded group (accs, its key in a.keys, hash h) into w as a persisted
// group; dirty, when fresh (distinct values an earlier version kept inline), marks it
// changed.
func (a *aggOp) restoreGroup(sp *aggSplit, w *win, h uint64, accs []accum, fresh bool) (lw *win, lg int, dirty func()) {
	g, _ := a.lookup(sp, w, h)
	a.lay.store(&w.accs, int(g), accs)
	w.groups[g].persisted = true
	if fresh {
		dirty = func() { sp.markDirty(w, g) }
	}
	return w, int(g), dirty
}

func hasFresh(accs []accum) bool {
	for j := range accs {
		if accs[j].Set.HasFresh() {
			return true
		}
	}
	return false
}

func (a *aggOp) Close() error {
	a.relieve()
	return a.mode.close()
}

// pagedRows is a growable array of rows of width values each (a window's group keys or
// accumulators), kept in pages of pageRows rows: past the first page, growing it never
// copies what it holds, so a window of many groups does not briefly hold its state twice
// while a slice doubles (and leave the old copy to the garbage collector). The first page
// grows by appending, so a window of few groups stays small.
type pagedRows[T any] struct {
	width int
	n     int
	pages [][]T
}

const pageRows = 1024

func newPagedRows[T any](width int) pagedRows[T] { return pagedRows[T]{width: width} }

// at returns row i (a view into its page).
func (r *pagedRows[T]) at(i int) []T {
	if r.width == 0 {
		return nil
	}
	p := r.pages[i/pageRows]
	o := (i % pageRows) * r.width
	return p[o : o+r.width : o+r.width]
}

// add appends a row of zero values and returns it.
func (r *pagedRows[T]) add() []T {
	r.n++
	if r.width == 0 {
		return nil
	}
	last := len(r.pages) - 1
	if last < 0 || len(r.pages[last]) == pageRows*r.width {
		var p []T
		if last >= 0 {
			p = make([]T, 0, pageRows*r.width)
		}
		r.pages = append(r.pages, p)
		last++
	}
	var zero T
	p := r.pages[last]
	for range r.width {
		p = append(p, zero)
	}
	r.pages[last] = p
	return p[len(p)-r.width : len(p) : len(p)]
}

// truncate drops the rows from n on (zeroing them, so they hold no references).
func (r *pagedRows[T]) truncate(n int) {
	for r.n > n {
		r.n--
		if r.width == 0 {
			continue
		}
		last := len(r.pages) - 1
		p := r.pages[last]
		clear(p[len(p)-r.width:])
		p = p[:len(p)-r.width]
		if len(p) == 0 && last > 0 {
			r.pages = r.pages[:last]
			continue
		}
		r.pages[last] = p
	}
}

// reset empties r, keeping its first page for reuse.
func (r *pagedRows[T]) reset() {
	if len(r.pages) > 0 {
		clear(r.pages[0])
		r.pages = append(r.pages[:0], r.pages[0][:0])
	}
	r.n = 0
}
