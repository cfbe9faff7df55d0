package exec

import (
	"container/heap"

	"rsql/sql"
	"rsql/state"
)

// paneMode aggregates a hop window emitted on close whose aggregates all merge exactly by
// panes (see aggOp): a row updates its one pane, and a window's groups are the merge of
// its panes' when it closes. A split's panes are in sp.wins and sp.panes, the ends of its
// windows to close in paneSplit.
type paneMode struct{}

// paneSplit is a split's state in pane mode: the open panes by start, the ends of the
// windows still to close (each once, in pending), and restored until the first watermark
// after a load.
type paneSplit struct {
	panes    []*win
	pend     endHeap
	pending  map[int64]bool
	restored bool
}

func (paneMode) row(a *aggOp, sp *aggSplit, r sql.Row, h uint64) bool {
	tv := r[a.node.Window.Time]
	if tv.IsNull() {
		return true
	}
	t := tv.I
	if lastWindowStart(a.node.Window, t)+a.node.Window.Size <= sp.wm {
		return true
	}
	ps := floorDiv(t, a.paneW) * a.paneW
	w := sp.last
	if w == nil || w.start != ps || w.end != ps+a.paneW {
		w = a.pane(sp, ps)
	}
	a.place(sp, w, h)
	return false
}

func (paneMode) fire(a *aggOp, sp *aggSplit, out Emitter) error { return a.firePanes(sp, out) }

func (paneMode) save(a *aggOp, sp *aggSplit, b *state.Batch) error { return a.saveWins(sp, b) }

// restore puts a loaded pane's group in its pane; a group of a whole window (state written
// before panes) goes into a window of its own, merged into its window when that closes.
func (paneMode) restore(a *aggOp, sp *aggSplit, h uint64, start, end int64, accs []accum, fresh bool) (*win, int, func()) {
	var w *win
	if end-start == a.paneW {
		w = a.pane(sp, start)
	} else if w = sp.wins[[2]int64{start, end}]; w == nil {
		w = sp.addWin(start, end)
		w.whole = true
		sp.pendWindow(end)
	}
	sp.restored = true
	return a.restoreGroup(sp, w, h, accs, fresh)
}

func (paneMode) close() error { return nil }

// pane returns (creating) the pane starting at ps; a new pane's windows that have not
// closed are added to those pending.
func (a *aggOp) pane(sp *aggSplit, ps int64) *win {
	pe := ps + a.paneW
	w := sp.wins[[2]int64{ps, pe}]
	if w == nil {
		w = sp.addWin(ps, pe)
		// Panes mostly come in order of time: insert from the back.
		i := len(sp.panes)
		for i > 0 && sp.panes[i-1].start > ps {
			i--
		}
		sp.panes = append(sp.panes, nil)
		copy(sp.panes[i+1:], sp.panes[i:])
		sp.panes[i] = w
		size := a.node.Window.Size
		for s := lastWindowStart(a.node.Window, ps); s+size > ps; s -= a.node.Window.Slide {
			sp.pendWindow(s + size)
		}
	}
	sp.last = w
	return w
}

// pendWindow adds the window ending at end to those to close, once.
func (sp *aggSplit) pendWindow(end int64) {
	if end > sp.wm && !sp.pending[end] {
		sp.pending[end] = true
		heap.Push(&sp.pend, end)
	}
}

// firePanes closes (pane mode) every pending window of sp that ends at or before the
// split's watermark, in order of end: its groups are the merge of its panes' (and of its
// whole window's, loaded from older state), emitted unless the window had closed before the
// state was restored. Then the panes whose last window closed go.
func (a *aggOp) firePanes(sp *aggSplit, out Emitter) error {
	size := a.node.Window.Size
	for len(sp.pend) > 0 && sp.pend[0] <= sp.wm {
		e := heap.Pop(&sp.pend).(int64)
		delete(sp.pending, e)
		s := e - size
		old := sp.wins[[2]int64{s, e}]
		if old != nil && !old.whole {
			old = nil
		}
		if !sp.restored {
			if err := a.emitWindow(sp, s, e, old, out); err != nil {
				return err
			}
		}
		if old != nil {
			for g := range old.groups {
				if old.groups[g].persisted {
					sp.deleteKey(a, old.keys.at(g), s, e, a.accsOf(old, g))
				}
			}
			sp.dropWin(old)
		}
	}
	sp.restored = false
	// A pane's last window starts at the last window start at or before the pane's start.
	n := 0
	for _, p := range sp.panes {
		if lastWindowStart(a.node.Window, p.start)+size > sp.wm {
			break
		}
		for g := range p.groups {
			if p.groups[g].persisted {
				// The pane's groups (and their distinct chunks) share a key prefix.
				sp.dropBuf = panePrefix(sp.dropBuf, a.job, a.id, sp.name, p.start)
				sp.dropEnds = append(sp.dropEnds, len(sp.dropBuf))
				break
			}
		}
		sp.dropWin(p)
		n++
	}
	if n > 0 {
		m := copy(sp.panes, sp.panes[n:])
		clear(sp.panes[m:])
		sp.panes = sp.panes[:m]
	}
	return a.out.flush(sp.name, out)
}

// emitWindow emits the groups of window [s, e) in pane mode: those of its one pane when
// only one holds rows, else the merge of its panes' and old's (a whole window of older
// state, or nil). Each key is emitted where it first appears (in order of pane, then of
// group): the panes after it are looked up for the same key and merged in, and a key
// found in an earlier pane was emitted there. No merged copy of the window is built.
func (a *aggOp) emitWindow(sp *aggSplit, s, e int64, old *win, out Emitter) error {
	src := a.src[:0]
	if old != nil && len(old.groups) > 0 {
		src = append(src, old)
	}
	for _, p := range sp.panes {
		if p.start >= e {
			break
		}
		if p.start >= s && len(p.groups) > 0 {
			src = append(src, p)
		}
	}
	a.src = src
	if len(src) == 1 {
		w := src[0]
		for g := range w.groups {
			a.emitGroupAt(w, int32(g), s, e)
			if a.out.len() >= 1024 {
				if err := a.out.flush(sp.name, out); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if a.merged == nil {
		a.merged = make([]accum, a.na)
	}
	merged := a.merged
	for i, p := range src {
	groups:
		for g := range p.groups {
			h, ks := p.groups[g].hash, p.keys.at(g)
			for _, q := range src[:i] {
				if q.find(h, ks) >= 0 {
					continue groups
				}
			}
			clear(merged)
			from := a.accsOf(p, g)
			for j := range merged {
				a.node.Aggs[j].Func.Merge(&merged[j], &from[j])
			}
			for _, q := range src[i+1:] {
				if c := q.find(h, ks); c >= 0 {
					from := a.accsOf(q, int(c))
					for j := range merged {
						a.node.Aggs[j].Func.Merge(&merged[j], &from[j])
					}
				}
			}
			a.out.vals = append(a.out.vals, ks...)
			a.out.vals = append(a.out.vals, sql.Timestamp(s), sql.Timestamp(e))
			for j := range merged {
				a.out.vals = append(a.out.vals, a.result(j, &merged[j]))
			}
			a.out.endRow()
			if a.out.len() >= 1024 {
				if err := a.out.flush(sp.name, out); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// gcd is the greatest common divisor of two positive numbers.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// endHeap is a min-heap of window ends.
type endHeap []int64

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
