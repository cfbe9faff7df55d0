package exec

import (
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// unwindowedMode aggregates without a window (a plain GROUP BY): a split's groups are
// those of its one pseudo-window [0, 0), emitted once per input batch for each group the
// batch changed (aggOp.pend), or once when the input ends (EmitOnClose); with a state TTL,
// groups without a row for that long are dropped.
type unwindowedMode struct {
	// changes: emit a row per change (a plain GROUP BY unless it emits once at the end of
	// a bounded input, EmitOnClose)
	changes bool
}

func (m unwindowedMode) row(a *aggOp, sp *aggSplit, r sql.Row, h uint64) bool {
	w := sp.last
	if w == nil {
		w = sp.window(0, 0)
	}
	if a.cacheMax > 0 && len(w.groups) >= sp.evictAt {
		w = a.evict(sp, w)
	}
	if m.changes && a.node.Changes == planner.Retract {
		return m.retractRow(a, sp, w, h)
	}
	g, created, ok := a.place(sp, w, h)
	if !ok {
		return false
	}
	w.seen[g] = sp.wm
	switch {
	case !m.changes:
	case a.node.EmitNew:
		// Each distinct row once, when first seen.
		if created {
			a.emitGroup(w, g)
		}
	default:
		a.pending(w, g)
	}
	return false
}

// retractRow folds the current row into its group and emits the group's old row as a
// delete when the batch first changes it, then its new row when the batch ends
// (planner.Retract). A row an aggregate fails leaves neither.
func (unwindowedMode) retractRow(a *aggOp, sp *aggSplit, w *win, h uint64) bool {
	g, created := a.lookup(sp, w, h)
	mark, rows := len(a.out.vals), len(a.out.ends)
	if !created && !w.groups[g].pending {
		// The group's row before the batch, deleted once.
		a.retractGroup(w, g)
	}
	a.update(w, g)
	if a.rowErr != nil {
		a.out.vals, a.out.ends = a.out.vals[:mark], a.out.ends[:rows]
		if created {
			a.unplaceCreated(sp, w, g)
		}
		return false
	}
	w.seen[g] = sp.wm
	a.pending(w, g)
	return false
}

// pending records that the current batch changed group g of w: its row is emitted when
// the batch ends (emitPending), once however many of the batch's rows it took.
func (a *aggOp) pending(w *win, g int32) {
	if a.pendW != w {
		a.emitPending()
		a.pendW = w
	}
	if gr := &w.groups[g]; !gr.pending {
		gr.pending = true
		a.pend = append(a.pend, g)
	}
}

// emitPending emits the row of each group the batch changed, in the order the batch
// first changed them.
func (a *aggOp) emitPending() {
	w := a.pendW
	for _, g := range a.pend {
		w.groups[g].pending = false
		a.emitGroup(w, g)
	}
	a.pend, a.pendW = a.pend[:0], nil
}

// fire drops the groups the state TTL expired, and emits every group once when the input
// ended (emit on close).
func (unwindowedMode) fire(a *aggOp, sp *aggSplit, out Emitter) error {
	if a.node.Emit == planner.EmitOnClose && sp.wm == MaxWatermark {
		if w := sp.wins[[2]int64{0, 0}]; a.nk == 0 && (w == nil || len(w.groups) == 0) {
			// A global aggregation has one row also over no rows (COUNT 0, the others
			// NULL), as in PostgreSQL.
			a.emitEmpty()
		}
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

// emitEmpty emits the row of a global aggregation over no rows.
func (a *aggOp) emitEmpty() {
	var acc accum
	for j := range a.node.Aggs {
		acc = accum{}
		a.out.vals = append(a.out.vals, a.result(j, &acc))
	}
	if a.node.Changes != planner.AppendOnly {
		a.out.vals = append(a.out.vals, sql.Null)
	}
	a.out.endRow()
}

func (unwindowedMode) save(a *aggOp, sp *aggSplit, b *state.Batch) error { return a.saveWins(sp, b) }

func (unwindowedMode) restore(a *aggOp, sp *aggSplit, h uint64, start, end int64, accs []accum, fresh bool) (*win, int, func()) {
	w := sp.window(start, end)
	lw, g, dirty := a.restoreGroup(sp, w, h, accs, fresh)
	w.seen[g] = sp.wm
	return lw, g, dirty
}

func (unwindowedMode) close() error { return nil }

// expire drops the groups of sp's (only) window whose last row came when the watermark was
// below horizon: the window is rebuilt from the groups that stay.
func (a *aggOp) expire(sp *aggSplit, horizon int64) {
	w := sp.wins[[2]int64{0, 0}]
	if w == nil {
		return
	}
	// A group whose last row came before the split had a watermark was seen at
	// MinWatermark: it counts as seen at the first watermark, not as infinitely old.
	for g := range w.seen {
		if w.seen[g] == MinWatermark {
			w.seen[g] = sp.wm
		}
	}
	keep := 0
	for g := range w.groups {
		if w.seen[g] >= horizon {
			keep++
		}
	}
	if keep == len(w.groups) {
		return
	}
	sp.rebuild(w, func(g int, gr *group) bool {
		if w.seen[g] >= horizon {
			return false
		}
		if gr.persisted {
			sp.deleteKey(a, w.keys.at(g), 0, 0, a.accsOf(w, g))
		}
		return true
	})
}

// rebuild replaces sp's (only) window w by one of the groups drop keeps (drop is called
// once per group, in order, and does what dropping the group takes), the changed groups
// that stay still changed, and returns it with where each group of w went (-1: dropped).
func (sp *aggSplit) rebuild(w *win, drop func(g int, gr *group) bool) (*win, []int32) {
	nw := sp.newWin(0, 0)
	moved := make([]int32, len(w.groups)) // old group -> new group, -1 when dropped
	for g := range w.groups {
		gr := w.groups[g]
		if drop(g, &gr) {
			moved[g] = -1
			continue
		}
		ng := int32(len(nw.groups))
		moved[g] = ng
		gr.dirty = false // set again below for the dirty ones
		nw.groups = append(nw.groups, gr)
		nw.seen = append(nw.seen, w.seen[g])
		nw.index(ng)
		nw.keys.appendRow(&w.keys, g)
		nw.accs.appendRow(&w.accs, g)
	}
	// The old window's changed groups that stay are the new one's.
	for i, d := range sp.dirtyWins {
		if d == w {
			sp.dirtyWins = append(sp.dirtyWins[:i], sp.dirtyWins[i+1:]...)
			break
		}
	}
	for _, g := range w.dirty {
		if moved[g] >= 0 {
			sp.markDirty(nw, moved[g])
		}
	}
	w.dirty = w.dirty[:0]
	w.dead = true
	sp.wins[[2]int64{0, 0}] = nw
	if sp.last == w {
		sp.last = nw
	}
	return nw, moved
}
