package exec

import (
	"math"

	"rsql/planner"
	"rsql/sql"
)

// accLayout says where the fields of each aggregate's accumulator (sql.AggState) live in a
// window's accRows: only the fields the aggregate uses (sql.FieldsOf) are kept, so a
// COUNT(*) group costs 8 bytes rather than a whole AggState (88). The integer fields (N, I,
// and F as its IEEE bits) share one row of int64s per group; V, Set and Obj have rows of
// their own, present only when some aggregate uses them. A field's slot is -1 when the
// aggregate does not use it.
type accLayout struct {
	ints, vals, sets, objs int // slots per group
	slots                  []accSlots
}

type accSlots struct{ n, i, f, v, set, obj int }

func newAccLayout(aggs []planner.AggSpec) *accLayout {
	l := &accLayout{slots: make([]accSlots, len(aggs))}
	take := func(used bool, next *int) int {
		if !used {
			return -1
		}
		*next++
		return *next - 1
	}
	for j, g := range aggs {
		f := sql.FieldsOf(g.Func)
		l.slots[j] = accSlots{
			n:   take(f&sql.AggN != 0, &l.ints),
			i:   take(f&sql.AggI != 0, &l.ints),
			f:   take(f&sql.AggF != 0, &l.ints),
			v:   take(f&sql.AggV != 0, &l.vals),
			set: take(f&sql.AggSet != 0, &l.sets),
			obj: take(f&sql.AggObj != 0, &l.objs),
		}
	}
	return l
}

// accRows are the accumulators of a window's groups, one row per group, laid out by an
// accLayout.
type accRows struct {
	ints pagedRows[int64]
	vals pagedRows[sql.Value]
	sets pagedRows[*sql.DistinctSet]
	objs pagedRows[any]
}

func newAccRows(l *accLayout) accRows {
	return accRows{ints: newPagedRows[int64](l.ints), vals: newPagedRows[sql.Value](l.vals),
		sets: newPagedRows[*sql.DistinctSet](l.sets), objs: newPagedRows[any](l.objs)}
}

// add appends a row of zero accumulators.
func (r *accRows) add() {
	r.ints.add()
	r.vals.add()
	r.sets.add()
	r.objs.add()
}

// truncate drops the rows from n on.
func (r *accRows) truncate(n int) {
	r.ints.truncate(n)
	r.vals.truncate(n)
	r.sets.truncate(n)
	r.objs.truncate(n)
}

// reset empties r, keeping its first pages.
func (r *accRows) reset() {
	r.ints.reset()
	r.vals.reset()
	r.sets.reset()
	r.objs.reset()
}

// appendRow appends a copy of row g of src to r.
func (r *accRows) appendRow(src *accRows, g int) {
	r.add()
	n := r.ints.n - 1
	copy(r.ints.at(n), src.ints.at(g))
	copy(r.vals.at(n), src.vals.at(g))
	copy(r.sets.at(n), src.sets.at(g))
	copy(r.objs.at(n), src.objs.at(g))
}

// load sets dst (one accumulator per aggregate) to row g of r; unused fields are zero.
func (l *accLayout) load(r *accRows, g int, dst []accum) {
	clear(dst)
	ints, vals, sets, objs := r.ints.at(g), r.vals.at(g), r.sets.at(g), r.objs.at(g)
	for j := range dst {
		s, d := &l.slots[j], &dst[j]
		if s.n >= 0 {
			d.N = ints[s.n]
		}
		if s.i >= 0 {
			d.I = ints[s.i]
		}
		if s.f >= 0 {
			d.F = math.Float64frombits(uint64(ints[s.f]))
		}
		if s.v >= 0 {
			d.V = vals[s.v]
		}
		if s.set >= 0 {
			d.Set = sets[s.set]
		}
		if s.obj >= 0 {
			d.Obj = objs[s.obj]
		}
	}
}

// store writes src into row g of r (the fields the layout keeps).
func (l *accLayout) store(r *accRows, g int, src []accum) {
	ints, vals, sets, objs := r.ints.at(g), r.vals.at(g), r.sets.at(g), r.objs.at(g)
	for j := range src {
		s, d := &l.slots[j], &src[j]
		if s.n >= 0 {
			ints[s.n] = d.N
		}
		if s.i >= 0 {
			ints[s.i] = d.I
		}
		if s.f >= 0 {
			ints[s.f] = int64(math.Float64bits(d.F))
		}
		if s.v >= 0 {
			vals[s.v] = d.V
		}
		if s.set >= 0 {
			sets[s.set] = d.Set
		}
		if s.obj >= 0 {
			objs[s.obj] = d.Obj
		}
	}
}
