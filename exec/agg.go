package exec

import (
	"container/heap"
	"context"
	"fmt"
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
	order   []int
	undo    []accum
	rowErr  *sql.Error // the current row's failure in an aggregate
	enc     []byte     // scratch encodings
	kbuf    []byte     // scratch state keys
	dkey    []byte     // scratch distinct chunk keys
	chunk   []byte     // scratch distinct chunk
	lateB   Batch
	lateRow []sql.Row
}

// accum is the state of one aggregate of one group; the aggregate's sql.Aggregator
// (AggSpec.Func) reads and writes it.
type accum = sql.AggState

// win is one tumble/hop window of one split, or the single pseudo-window of a non-windowed
// aggregation. Groups are found by key hash (collisions chained through group.next); the
// keys of group g are keys.at(g), its accumulators accs.at(g).
type win struct {
	start, end int64
	index      map[uint64]int32
	groups     []group
	keys       pagedRows[sql.Value]
	accs       pagedRows[accum]
	dead       bool
}

type group struct {
	hash      uint64
	next      int32
	dirty     bool
	persisted bool
	seen      int64 // the split's watermark at the group's last row (state TTL)
}

type dirtyRef struct {
	w *win
	g int32
}

// sessKey is one group key of a session-windowed aggregation with its open sessions.
type sessKey struct {
	hash     uint64
	next     int32
	keys     []sql.Value
	sessions []*session
}

type session struct {
	key              int32
	start, end       int64
	accs             []accum
	dirty, persisted bool
	dead             bool
	pStart, pEnd     int64 // window under which it is persisted
}

type aggSplit struct {
	name   string
	nk, na int   // key values and aggregates per group
	wm     int64 // the split's watermark
	// with a state TTL: the watermark at the last sweep of expired groups
	swept int64
	// tumble, hop, given, none
	wins  map[[2]int64]*win
	ends  winHeap
	last  *win
	dirty []dirtyRef
	// Fired windows are reused for new ones (saving their maps and arenas), but only after
	// the next save: until then dirty references may still point at them.
	retired, free []*win
	// session
	skIndex map[uint64]int32
	sks     []sessKey
	sheap   sessHeap
	sdirty  []*session
	// state keys to delete at the next checkpoint
	delBuf  []byte
	delEnds []int
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
	return &aggOp{
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
		sp = &aggSplit{name: name, nk: a.nk, na: a.na, wm: MinWatermark, swept: MinWatermark, wins: map[[2]int64]*win{}, skIndex: map[uint64]int32{}}
		a.splits[name] = sp
	}
	a.cur = sp
	return sp
}

// emitChanges reports whether the aggregation emits a row per change (EMIT CHANGES, and a
// plain GROUP BY unless it emits once at the end of a bounded input).
func (a *aggOp) emitChanges() bool {
	return a.node.Emit == planner.EmitChanges || a.node.Window.Kind == planner.WindowNone && a.node.Emit != planner.EmitOnClose
}

func (a *aggOp) Process(_ int, b *Batch, out Emitter) error {
	sp := a.split(b.Split)
	changes := a.emitChanges()
	kind := a.node.Window.Kind
	a.lateRow = a.lateRow[:0]
	for _, r := range b.Rows {
		h := sql.HashSeed
		failed := false
		for j, k := range a.node.Keys {
			v := k(r)
			a.keys[j] = v
			h = sql.HashValue(h, v)
			failed = failed || v.K == sql.KindNull && v.S != ""
		}
		k := 0
		for j := range a.node.Aggs {
			for _, arg := range a.node.Aggs[j].Args {
				v := arg(r)
				a.args[k] = v
				k++
				failed = failed || v.K == sql.KindNull && v.S != ""
			}
		}
		if failed {
			cause := sql.RowError(a.keys)
			if cause == nil {
				cause = sql.RowError(a.args)
			}
			if err := a.reportBad(b.Split, r, cause); err != nil {
				return err
			}
			continue
		}
		a.rowErr = nil
		switch kind {
		case planner.WindowNone:
			w := sp.last
			if w == nil {
				w = sp.window(0, 0)
			}
			g, created, ok := a.place(sp, w, h)
			if !ok {
				break
			}
			w.groups[g].seen = sp.wm
			if changes && (created || !a.node.EmitNew) {
				a.emitGroup(w, g)
			}
		case planner.WindowGiven:
			sv, ev := r[a.node.Window.Time], r[a.node.Window.End]
			if sv.IsNull() || ev.IsNull() || ev.I <= sp.wm {
				a.lateRow = append(a.lateRow, r)
				continue
			}
			w := sp.last
			if w == nil || w.start != sv.I || w.end != ev.I {
				w = sp.window(sv.I, ev.I)
			}
			g, _, ok := a.place(sp, w, h)
			if ok && a.node.Emit == planner.EmitChanges {
				a.emitGroup(w, g)
			}
		case planner.WindowTumble, planner.WindowHop:
			tv := r[a.node.Window.Time]
			if tv.IsNull() {
				a.lateRow = append(a.lateRow, r)
				continue
			}
			t, size, step := tv.I, a.node.Window.Size, windowStep(a.node.Window)
			placed := false
			for s := lastWindowStart(a.node.Window, t); s > t-size; s -= step {
				if s+size <= sp.wm {
					continue // that window has fired
				}
				placed = true
				w := sp.last
				if w == nil || w.start != s {
					w = sp.window(s, s+size)
				}
				g, _, ok := a.place(sp, w, h)
				if !ok {
					break // a hop row's earlier windows keep it: see place
				}
				if a.node.Emit == planner.EmitChanges {
					a.emitGroup(w, g)
				}
			}
			if !placed {
				a.lateRow = append(a.lateRow, r)
			}
		case planner.WindowSession:
			tv := r[a.node.Window.Time]
			if tv.IsNull() || tv.I < sp.wm {
				a.lateRow = append(a.lateRow, r)
				continue
			}
			s, undo := a.session(sp, h, tv.I)
			a.updateAccs(s.accs)
			if a.rowErr != nil {
				a.unplaceSession(sp, s, undo)
				if err := a.reportBad(b.Split, r, a.rowErr); err != nil {
					return err
				}
				continue
			}
			if !s.dirty {
				s.dirty = true
				sp.sdirty = append(sp.sdirty, s)
			}
			if a.node.Emit == planner.EmitChanges {
				a.emitSession(sp, s)
			}
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

// window returns (creating) the window [start, end).
func (sp *aggSplit) window(start, end int64) *win {
	w := sp.wins[[2]int64{start, end}]
	if w == nil {
		if n := len(sp.free); n > 0 {
			w = sp.free[n-1]
			sp.free = sp.free[:n-1]
			clear(w.index)
			w.start, w.end, w.dead = start, end, false
			w.groups = w.groups[:0]
			w.keys.reset()
			w.accs.reset()
		} else {
			w = sp.newWin(start, end)
		}
		sp.wins[[2]int64{start, end}] = w
		if start != end {
			heap.Push(&sp.ends, w)
		}
	}
	sp.last = w
	return w
}

func (sp *aggSplit) newWin(start, end int64) *win {
	return &win{start: start, end: end, index: map[uint64]int32{}, keys: newPagedRows[sql.Value](sp.nk), accs: newPagedRows[accum](sp.na)}
}

// lookup finds or creates the group of a.keys (hash h) in w and marks it dirty; created
// says it is new.
func (a *aggOp) lookup(sp *aggSplit, w *win, h uint64) (g int32, created bool) {
	g, ok := w.index[h]
	created = false
	if ok {
		for ; g >= 0; g = w.groups[g].next {
			if w.groups[g].hash == h && a.keysEqual(w.keys.at(int(g))) {
				break
			}
		}
	} else {
		g = -1
	}
	if g < 0 {
		g = int32(len(w.groups))
		head, had := w.index[h]
		if !had {
			head = -1
		}
		w.groups = append(w.groups, group{hash: h, next: head})
		w.index[h] = g
		ks := w.keys.add()
		for i, v := range a.keys {
			ks[i] = ownValue(v)
		}
		w.accs.add()
		created = true
	}
	if gr := &w.groups[g]; !gr.dirty {
		gr.dirty = true
		sp.dirty = append(sp.dirty, dirtyRef{w, g})
	}
	return g, created
}

func (a *aggOp) keysEqual(ks []sql.Value) bool {
	for i, v := range ks {
		if !sql.Equal(v, a.keys[i]) {
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
	a.updateAccs(w.accs.at(int(g)))
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
		// The group is w's last, and its dirty reference sp's last.
		gr := w.groups[g]
		if gr.next >= 0 {
			w.index[gr.hash] = gr.next
		} else {
			delete(w.index, gr.hash)
		}
		w.groups = w.groups[:g]
		w.keys.truncate(int(g))
		w.accs.truncate(int(g))
		if n := len(sp.dirty); n > 0 && sp.dirty[n-1] == (dirtyRef{w, g}) {
			sp.dirty = sp.dirty[:n-1]
		}
	}
	return g, created, false
}

// sessUndo is what session changed for the current row, so that a row an aggregate
// fails on can be taken back out.
type sessUndo struct {
	created    bool
	bridged    bool // it merged sessions: kept, see unplaceSession
	start, end int64
}

// unplaceSession takes a failed row back out of session s: a session it created goes,
// one it extended gets its bounds back. Sessions the row bridged stay merged.
func (a *aggOp) unplaceSession(sp *aggSplit, s *session, u sessUndo) {
	switch {
	case u.created:
		s.dead = true // its heap entry is skipped when it comes up
		ke := &sp.sks[s.key]
		for i, x := range ke.sessions {
			if x == s {
				ke.sessions = append(ke.sessions[:i], ke.sessions[i+1:]...)
				break
			}
		}
	case !u.bridged:
		s.start, s.end = u.start, u.end // its heap entry for that end is still there
	}
}

// updateAccs folds the current row into accs. Aggregates that may fail (user
// aggregates, AggSpec.MayFail) run first; when one fails (a.rowErr is set) those before it
// are restored, so the row changes none of accs.
func (a *aggOp) updateAccs(accs []accum) {
	for oi, j := range a.order {
		acc := &accs[j]
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

func (a *aggOp) emitGroup(w *win, g int32) {
	a.out.vals = append(a.out.vals, w.keys.at(int(g))...)
	if a.node.Window.Kind != planner.WindowNone {
		a.out.vals = append(a.out.vals, sql.Timestamp(w.start), sql.Timestamp(w.end))
	}
	accs := w.accs.at(int(g))
	for j := range accs {
		a.out.vals = append(a.out.vals, a.result(j, &accs[j]))
	}
	a.out.endRow()
}

func (a *aggOp) emitSession(sp *aggSplit, s *session) {
	a.out.vals = append(a.out.vals, sp.sks[s.key].keys...)
	a.out.vals = append(a.out.vals, sql.Timestamp(s.start), sql.Timestamp(s.end))
	for j := range s.accs {
		a.out.vals = append(a.out.vals, a.result(j, &s.accs[j]))
	}
	a.out.endRow()
}

// sessKeyFor finds or creates the session key entry of a.keys.
func (a *aggOp) sessKeyFor(sp *aggSplit, h uint64) int32 {
	head, ok := sp.skIndex[h]
	if ok {
		for k := head; k >= 0; k = sp.sks[k].next {
			if sp.sks[k].hash == h && a.keysEqual(sp.sks[k].keys) {
				return k
			}
		}
	} else {
		head = -1
	}
	ks := make([]sql.Value, a.nk)
	for i, v := range a.keys {
		ks[i] = ownValue(v)
	}
	k := int32(len(sp.sks))
	sp.sks = append(sp.sks, sessKey{hash: h, next: head, keys: ks})
	sp.skIndex[h] = k
	return k
}

// session returns the session that an event at t joins, creating or merging sessions,
// and how to undo that for the row.
func (a *aggOp) session(sp *aggSplit, h uint64, t int64) (*session, sessUndo) {
	k := a.sessKeyFor(sp, h)
	gap := a.node.Window.Gap
	lo, hi := t, t+gap
	var merged *session
	var u sessUndo
	for changed := true; changed; {
		changed = false
		ss := sp.sks[k].sessions
		for i := 0; i < len(ss); i++ {
			s := ss[i]
			if s == merged || !(s.start < hi && lo < s.end) {
				continue
			}
			if merged == nil {
				merged = s
				u.start, u.end = s.start, s.end
			} else {
				u.bridged = true
				// s is bridged into merged: fold its state, forget it.
				a.mergeAccs(merged.accs, s.accs)
				s.dead = true
				if s.persisted {
					sp.deleteKey(a, sp.sks[k].keys, s.pStart, s.pEnd, s.accs)
				}
				ss = append(ss[:i], ss[i+1:]...)
				sp.sks[k].sessions = ss
				i--
			}
			lo, hi = min(lo, s.start), max(hi, s.end)
			changed = true
		}
	}
	if merged == nil {
		merged = &session{key: k, start: lo, end: hi, accs: make([]accum, a.na)}
		sp.sks[k].sessions = append(sp.sks[k].sessions, merged)
		heap.Push(&sp.sheap, sessEntry{hi, merged})
		return merged, sessUndo{created: true}
	}
	if hi != merged.end {
		heap.Push(&sp.sheap, sessEntry{hi, merged})
	}
	merged.start, merged.end = lo, hi
	return merged, u
}

// deleteKey records the deletion of a persisted group's state key and of the chunks of
// its distinct values (statecodec.go), which accs holds.
func (sp *aggSplit) deleteKey(a *aggOp, keys []sql.Value, start, end int64, accs []accum) {
	a.enc = sql.AppendRow(a.enc[:0], keys)
	at := len(sp.delBuf)
	sp.delBuf = state.Key(sp.delBuf, a.job, a.id, sp.name, a.enc, start, end)
	sp.delEnds = append(sp.delEnds, len(sp.delBuf))
	a.kbuf = append(a.kbuf[:0], sp.delBuf[at:]...) // the group's key
	for j := range accs {
		set := accs[j].Set
		if set == nil {
			continue
		}
		for c := 0; c < set.Chunks; c++ {
			sp.delBuf = distinctKey(sp.delBuf, a.kbuf, j, c)
			sp.delEnds = append(sp.delEnds, len(sp.delBuf))
		}
		set.Chunks = 0
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

// fire emits (on close) and forgets every window of sp that ends at or before the split's
// watermark; without a window it drops the groups the state TTL expired, and emits every
// group once when the input ended (emit on close).
func (a *aggOp) fire(sp *aggSplit, out Emitter) error {
	onClose := a.node.Emit != planner.EmitChanges
	if a.node.Window.Kind == planner.WindowNone {
		if a.node.Emit == planner.EmitOnClose && sp.wm == MaxWatermark {
			if w := sp.wins[[2]int64{0, 0}]; w != nil {
				for g := range w.groups {
					a.emitGroup(w, int32(g))
					if a.out.len() >= 1024 {
						if err := a.out.flush(sp.name, out); err != nil {
							return err
						}
					}
				}
			}
		}
		if ttl := a.node.TTL; ttl > 0 && sp.wm != MaxWatermark && (sp.swept == MinWatermark || sp.wm-sp.swept >= ttl/4+1) {
			sp.swept = sp.wm
			a.expire(sp, sp.wm-ttl)
		}
		return a.out.flush(sp.name, out)
	}
	for len(sp.ends) > 0 && sp.ends[0].end <= sp.wm {
		w := heap.Pop(&sp.ends).(*win)
		for g := range w.groups {
			if onClose {
				a.emitGroup(w, int32(g))
				if a.out.len() >= 1024 {
					if err := a.out.flush(sp.name, out); err != nil {
						return err
					}
				}
			}
			if w.groups[g].persisted {
				sp.deleteKey(a, w.keys.at(g), w.start, w.end, w.accs.at(g))
			}
		}
		w.dead = true
		if len(sp.retired) < 16 {
			sp.retired = append(sp.retired, w)
		}
		delete(sp.wins, [2]int64{w.start, w.end})
		if sp.last == w {
			sp.last = nil
		}
	}
	for len(sp.sheap) > 0 && sp.sheap[0].end <= sp.wm {
		e := heap.Pop(&sp.sheap).(sessEntry)
		s := e.s
		if s.dead || s.end != e.end {
			continue
		}
		if onClose {
			a.emitSession(sp, s)
			if a.out.len() >= 1024 {
				if err := a.out.flush(sp.name, out); err != nil {
					return err
				}
			}
		}
		s.dead = true
		ke := &sp.sks[s.key]
		for i, x := range ke.sessions {
			if x == s {
				ke.sessions = append(ke.sessions[:i], ke.sessions[i+1:]...)
				break
			}
		}
		if s.persisted {
			sp.deleteKey(a, ke.keys, s.pStart, s.pEnd, s.accs)
		}
	}
	return a.out.flush(sp.name, out)
}

// expire drops the groups of sp's (only) window whose last row came when the watermark was
// below horizon: the window is rebuilt from the groups that stay.
func (a *aggOp) expire(sp *aggSplit, horizon int64) {
	w := sp.wins[[2]int64{0, 0}]
	if w == nil {
		return
	}
	keep := 0
	for g := range w.groups {
		if w.groups[g].seen >= horizon {
			keep++
		}
	}
	if keep == len(w.groups) {
		return
	}
	nw := sp.newWin(0, 0)
	nw.index = make(map[uint64]int32, keep)
	moved := make([]int32, len(w.groups)) // old group -> new group, -1 when dropped
	for g := range w.groups {
		gr := w.groups[g]
		keys := w.keys.at(g)
		if gr.seen < horizon {
			moved[g] = -1
			if gr.persisted {
				sp.deleteKey(a, keys, 0, 0, w.accs.at(g))
			}
			continue
		}
		ng := int32(len(nw.groups))
		moved[g] = ng
		head, had := nw.index[gr.hash]
		if !had {
			head = -1
		}
		gr.next = head
		nw.groups = append(nw.groups, gr)
		nw.index[gr.hash] = ng
		copy(nw.keys.add(), keys)
		copy(nw.accs.add(), w.accs.at(g))
	}
	// Dirty references into the old window follow their groups.
	dirty := sp.dirty[:0]
	for _, d := range sp.dirty {
		if d.w == w {
			if moved[d.g] < 0 {
				continue
			}
			d = dirtyRef{nw, moved[d.g]}
		}
		dirty = append(dirty, d)
	}
	sp.dirty = dirty
	w.dead = true
	sp.wins[[2]int64{0, 0}] = nw
	if sp.last == w {
		sp.last = nw
	}
}

func (a *aggOp) Control(c *Control, _ Emitter) error {
	switch c.Kind {
	case NewSplit:
		if err := a.load(c.Split); err != nil {
			return err
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

// flushDeletes adds sp's pending deletions to b.
func (sp *aggSplit) flushDeletes(b *state.Batch) {
	start := 0
	for _, e := range sp.delEnds {
		b.Delete(sp.delBuf[start:e])
		start = e
	}
	sp.delBuf, sp.delEnds = sp.delBuf[:0], sp.delEnds[:0]
}

// save writes sp's changed groups and pending deletions to b. A session whose bounds moved
// is stored under its new bounds and its old copy deleted in the same batch: a checkpoint
// holding the new copy and not yet the deletion would bring the old one back after a crash
// (as a second, partial session).
func (a *aggOp) save(sp *aggSplit, b *state.Batch) error {
	sp.flushDeletes(b)
	for _, d := range sp.dirty {
		gr := &d.w.groups[d.g]
		gr.dirty = false
		if d.w.dead {
			continue
		}
		if err := a.putGroup(sp, b, d.w.keys.at(int(d.g)), d.w.start, d.w.end, d.w.accs.at(int(d.g))); err != nil {
			return err
		}
		gr.persisted = true
	}
	sp.dirty = sp.dirty[:0]
	sp.free = append(sp.free, sp.retired...)
	clear(sp.retired)
	sp.retired = sp.retired[:0]
	for _, s := range sp.sdirty {
		s.dirty = false
		if s.dead {
			continue
		}
		keys := sp.sks[s.key].keys
		if s.persisted && (s.pStart != s.start || s.pEnd != s.end) {
			// The session's bounds moved: its stored copy goes, distinct values included,
			// and all of it is written under the new bounds.
			sp.deleteKey(a, keys, s.pStart, s.pEnd, s.accs)
			for j := range s.accs {
				s.accs[j].Set.MarkAllFresh()
			}
		}
		if err := a.putGroup(sp, b, keys, s.start, s.end, s.accs); err != nil {
			return err
		}
		s.persisted, s.pStart, s.pEnd = true, s.start, s.end
	}
	sp.sdirty = sp.sdirty[:0]
	sp.flushDeletes(b) // the old copies of sessions whose bounds moved (keys unlike the new ones)
	return nil
}

func (a *aggOp) putGroup(sp *aggSplit, b *state.Batch, keys []sql.Value, start, end int64, accs []accum) error {
	for j := range accs {
		if err := a.node.Aggs[j].Func.Encode(&accs[j]); err != nil {
			return fmt.Errorf("operator %s, split %s: saving %s: %w", a.id, sp.name, a.node.Aggs[j].Text, err)
		}
	}
	a.enc = sql.AppendRow(a.enc[:0], keys)
	a.kbuf = state.Key(a.kbuf[:0], a.job, a.id, sp.name, a.enc, start, end)
	a.enc = appendGroupState(a.enc[:0], keys, start, end, accs)
	b.Put(a.kbuf, a.enc)
	for j := range accs {
		set := accs[j].Set
		if !set.HasFresh() {
			continue
		}
		if set.Chunks >= maxDistinctChunks || set.Len() <= smallDistinctSet {
			// Rewrite the set as chunk 0; the other chunks go.
			for c := 1; c < set.Chunks; c++ {
				b.Delete(distinctKey(a.dkey[:0], a.kbuf, j, c))
			}
			a.chunk = set.AppendChunk(a.chunk[:0])
			b.Put(distinctKey(a.dkey[:0], a.kbuf, j, 0), a.chunk)
			set.Chunks = 1
		} else {
			a.dkey = distinctKey(a.dkey[:0], a.kbuf, j, set.Chunks)
			b.Put(a.dkey, set.FreshChunk())
			set.Chunks++
		}
		set.ClearFresh()
	}
	return nil
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
	var legacy []func() // groups whose distinct values came inline (earlier versions)
	err := a.store.Scan(prefix, func(key, value []byte) error {
		if lastAccs != nil && len(key) > len(lastKey) && string(key[:len(lastKey)]) == string(lastKey) {
			j, c, err := parseDistinctKey(key[len(lastKey):], a.na)
			if err == nil {
				if lastAccs[j].Set == nil {
					lastAccs[j].Set = &sql.DistinctSet{}
				}
				set := lastAccs[j].Set
				set.Chunks = max(set.Chunks, c+1)
				if err = set.AddChunk(value); err != nil {
					err = fmt.Errorf("%w: distinct chunk %d: %v", errBadState, c, err)
				}
			}
			if err != nil {
				return &StateError{Op: a.id, Split: split, Err: err}
			}
			return nil
		}
		lastKey = append(lastKey[:0], key...)
		keys, start, end, accs, err := decodeGroupState(value, a.nk, a.na)
		if err != nil {
			return &StateError{Op: a.id, Split: split, Err: err}
		}
		for j := range accs {
			if err := a.node.Aggs[j].Func.Decode(&accs[j]); err != nil {
				return &StateError{Op: a.id, Split: split, Err: fmt.Errorf("%s: %w", a.node.Aggs[j].Text, err)}
			}
		}
		copy(a.keys, keys)
		h := sql.HashSeed
		for _, v := range keys {
			h = sql.HashValue(h, v)
		}
		switch a.node.Window.Kind {
		case planner.WindowSession:
			k := a.sessKeyFor(sp, h)
			s := &session{key: k, start: start, end: end, accs: accs, persisted: true, pStart: start, pEnd: end}
			sp.sks[k].sessions = append(sp.sks[k].sessions, s)
			heap.Push(&sp.sheap, sessEntry{end, s})
			lastAccs = s.accs
			if hasFresh(accs) {
				legacy = append(legacy, func() { s.dirty = true; sp.sdirty = append(sp.sdirty, s) })
			}
		default:
			w := sp.window(start, end)
			g, _ := a.lookup(sp, w, h)
			copy(w.accs.at(int(g)), accs)
			w.groups[g].persisted = true
			w.groups[g].seen = sp.wm
			lastAccs = w.accs.at(int(g))
			if hasFresh(accs) {
				legacy = append(legacy, func() { w.groups[g].dirty = true; sp.dirty = append(sp.dirty, dirtyRef{w, g}) })
			}
		}
		return nil
	})
	// What was just loaded is what the store holds: nothing to write back, except the
	// distinct values an earlier version kept inline, which go under their own keys.
	for _, d := range sp.dirty {
		d.w.groups[d.g].dirty = false
	}
	sp.dirty = sp.dirty[:0]
	for _, f := range legacy {
		f()
	}
	return err
}

func hasFresh(accs []accum) bool {
	for j := range accs {
		if accs[j].Set.HasFresh() {
			return true
		}
	}
	return false
}

func (a *aggOp) Close() error { return nil }

type winHeap []*win

func (h winHeap) Len() int           { return len(h) }
func (h winHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h winHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *winHeap) Push(x any)        { *h = append(*h, x.(*win)) }
func (h *winHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type sessEntry struct {
	end int64
	s   *session
}

type sessHeap []sessEntry

func (h sessHeap) Len() int           { return len(h) }
func (h sessHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h sessHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sessHeap) Push(x any)        { *h = append(*h, x.(sessEntry)) }
func (h *sessHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
