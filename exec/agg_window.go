package exec

import (
	"container/heap"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// winMode aggregates by tumble windows, and by hop windows when it does not compute by
// panes: a row updates its group in each window it falls in that has not fired, and a
// window's groups are emitted (on close) and deleted when the split's watermark passes its
// end. A split's windows are sp.wins, by end in sp.ends.
type winMode struct{}

// givenMode aggregates by the windows the rows carry (their Window.Time and Window.End
// columns); windows close as winMode's do.
type givenMode struct{ winMode }

func (winMode) row(a *aggOp, sp *aggSplit, r sql.Row, h uint64) bool {
	tv := r[a.node.Window.Time]
	if tv.IsNull() {
		return true
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
	return !placed
}

func (givenMode) row(a *aggOp, sp *aggSplit, r sql.Row, h uint64) bool {
	sv, ev := r[a.node.Window.Time], r[a.node.Window.End]
	if sv.IsNull() || ev.IsNull() || ev.I <= sp.wm {
		return true
	}
	w := sp.last
	if w == nil || w.start != sv.I || w.end != ev.I {
		w = sp.window(sv.I, ev.I)
	}
	g, _, ok := a.place(sp, w, h)
	if ok && a.node.Emit == planner.EmitChanges {
		a.emitGroup(w, g)
	}
	return false
}

// fire emits (on close) and forgets every window of sp that ends at or before the split's
// watermark.
func (winMode) fire(a *aggOp, sp *aggSplit, out Emitter) error {
	onClose := a.node.Emit != planner.EmitChanges
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
				sp.deleteKey(a, w.keys.at(g), w.start, w.end, a.accsOf(w, g))
			}
		}
		sp.dropWin(w)
	}
	return a.out.flush(sp.name, out)
}

func (winMode) save(a *aggOp, sp *aggSplit, b *state.Batch) error { return a.saveWins(sp, b) }

func (winMode) restore(a *aggOp, sp *aggSplit, h uint64, start, end int64, accs []accum, fresh bool) (*win, int, func()) {
	return a.restoreGroup(sp, sp.window(start, end), h, accs, fresh)
}

func (winMode) close() error { return nil }

// window returns (creating) the window [start, end).
func (sp *aggSplit) window(start, end int64) *win {
	w := sp.wins[[2]int64{start, end}]
	if w == nil {
		w = sp.addWin(start, end)
		if start != end {
			heap.Push(&sp.ends, w)
		}
	}
	sp.last = w
	return w
}

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
