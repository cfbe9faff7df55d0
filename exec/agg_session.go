package exec

import (
	"container/heap"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// sessionMode aggregates by session windows: a key's rows at most Window.Gap apart make
// one session (sessions that touch, one's end equal to the other's start, are one session:
// docs/sql.md, "Windows"), and a row that bridges two sessions merges them. A split's sessions are in
// sessSplit; a session keeps its accumulators itself (not in a window's rows) and is
// stored under its current bounds.
type sessionMode struct{}

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

// sessSplit is a split's state in session mode: its keys (by hash) with their open
// sessions, the sessions by end, and those changed since the last save.
type sessSplit struct {
	skIndex map[uint64]int32
	sks     []sessKey
	sheap   sessHeap
	sdirty  []*session
}

func (sessionMode) row(a *aggOp, sp *aggSplit, r sql.Row, h uint64) bool {
	tv := r[a.node.Window.Time]
	if tv.IsNull() || tv.I < sp.wm {
		return true
	}
	s, undo := a.session(sp, h, tv.I)
	a.updateAccs(s.accs)
	if a.rowErr != nil {
		a.unplaceSession(sp, s, undo)
		return false
	}
	if !s.dirty {
		s.dirty = true
		sp.sdirty = append(sp.sdirty, s)
	}
	if a.node.Emit == planner.EmitChanges {
		a.emitSession(sp, s)
	}
	return false
}

// fire emits (on close) and forgets every session of sp that ends before the split's
// watermark. A session ending at the watermark stays open: a row at the watermark is not
// late and touches it, so it may still grow.
func (sessionMode) fire(a *aggOp, sp *aggSplit, out Emitter) error {
	onClose := a.node.Emit != planner.EmitChanges
	for len(sp.sheap) > 0 && sp.sheap[0].end < sp.wm {
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

// save writes the changed sessions. A session whose bounds moved is stored under its new
// bounds and its old copy deleted in the same batch: a checkpoint holding the new copy and
// not yet the deletion would bring the old one back after a crash (as a second, partial
// session).
func (sessionMode) save(a *aggOp, sp *aggSplit, b *state.Batch) error {
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
	return nil
}

func (sessionMode) restore(a *aggOp, sp *aggSplit, h uint64, start, end int64, accs []accum, fresh bool) (*win, int, func()) {
	k := a.sessKeyFor(sp, h)
	s := &session{key: k, start: start, end: end, accs: accs, persisted: true, pStart: start, pEnd: end}
	sp.sks[k].sessions = append(sp.sks[k].sessions, s)
	heap.Push(&sp.sheap, sessEntry{end, s})
	if fresh {
		return nil, 0, func() { s.dirty = true; sp.sdirty = append(sp.sdirty, s) }
	}
	return nil, 0, nil
}

func (sessionMode) close() error { return nil }

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
// and how to undo that for the row. The event's own session is [t, t+gap); it joins every
// session it overlaps or touches (bounds equal), as do the sessions those reach.
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
			if s == merged || !(s.start <= hi && lo <= s.end) {
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

// WatermarkHold holds back by 1 ms the watermark the operators after a session
// aggregation see: a session fires only once the watermark is past its end (fire), so its
// row, whose window_end may equal the watermark it saw before, is not late after it.
func (a *aggOp) WatermarkHold() int64 {
	if _, ok := a.mode.(sessionMode); ok {
		return 1
	}
	return 0
}
