package exec

import (
	"context"

	"rsql/planner"
	"rsql/sql"
)

// filterOp keeps the rows for which the predicate is TRUE, compacting the batch in place.
// A row whose predicate fails (an error value) goes to the bad-record path (rowerrors.go).
type filterOp struct {
	stateless
	pred planner.Evaluator
	memo *sql.Memo // planner.FilterNode.Memo
	// bad, schema, ctx: the stage's bad-record path and this operator's input schema.
	bad    *badRows
	schema sql.Schema
	ctx    context.Context
}

func (f *filterOp) Process(_ int, b *Batch, out Emitter) error {
	rows := b.Rows
	offs := b.Offsets
	memo := f.memo
	if memo != nil {
		memo.Begin(len(rows))
	}
	k := 0
	for i, r := range rows {
		if memo != nil {
			memo.Row(i)
		}
		v := f.pred(r)
		if v.K == sql.KindBool && v.I != 0 {
			rows[k] = r
			if offs != nil {
				offs[k] = offs[i]
			}
			if memo != nil {
				memo.Move(i, k)
			}
			k++
		} else if v.K == sql.KindNull && v.S != "" {
			if err := f.bad.reportAt(f.ctx, "filter", b.Split, rowOffset(b, i), r, f.schema, v.AsError()); err != nil {
				return err
			}
		}
	}
	if k == 0 {
		return nil
	}
	b.Rows = rows[:k]
	if offs != nil {
		b.Offsets = offs[:k]
	}
	return out.Emit(b)
}

// projectOp computes its expressions over each row into a reused arena. A row with a
// value that fails (an error value) goes to the bad-record path instead (rowerrors.go).
type projectOp struct {
	stateless
	exprs []planner.Evaluator
	// memo, afterFilter: planner.ProjectNode's Memo and AfterFilter (the filter began
	// the batch in the memo).
	memo        *sql.Memo
	afterFilter bool
	// identity: planner.ProjectNode.Identity; a batch without a failed value is passed on
	// as it is.
	identity bool
	out      rowArena
	// bad, schema, ctx: the stage's bad-record path and this operator's input schema.
	bad    *badRows
	schema sql.Schema
	ctx    context.Context
	offs   []int64
}

func (p *projectOp) Process(_ int, b *Batch, out Emitter) error {
	if p.identity && !anyFailed(b.Rows) {
		return out.Emit(b)
	}
	p.out.reset()
	memo := p.memo
	if memo != nil && !p.afterFilter {
		memo.Begin(len(b.Rows))
	}
	var dropped []int // indexes of failed rows (rare)
	for i, r := range b.Rows {
		if memo != nil {
			memo.Row(i)
		}
		start := len(p.out.vals)
		failed := false
		for _, e := range p.exprs {
			v := e(r)
			failed = failed || v.K == sql.KindNull && v.S != ""
			p.out.vals = append(p.out.vals, v)
		}
		if failed {
			cause := sql.RowError(p.out.vals[start:])
			p.out.vals = p.out.vals[:start]
			if err := p.bad.reportAt(p.ctx, "project", b.Split, rowOffset(b, i), r, p.schema, cause); err != nil {
				return err
			}
			dropped = append(dropped, i)
			continue
		}
		p.out.endRow()
	}
	if p.out.len() == 0 {
		return nil
	}
	nb := p.out.build(b.Split)
	nb.Offsets = b.Offsets
	if dropped != nil && b.Offsets != nil {
		p.offs = p.offs[:0]
		d := 0
		for i, o := range b.Offsets {
			if d < len(dropped) && dropped[d] == i {
				d++
				continue
			}
			p.offs = append(p.offs, o)
		}
		nb.Offsets = p.offs
	}
	p.out.reset()
	return out.Emit(nb)
}

// windowAssignOp appends window_start and window_end to each row, one output row per
// window the row's event time falls in. Rows with a NULL time belong to no window.
type windowAssignOp struct {
	stateless
	w    planner.WindowSpec
	out  rowArena
	offs []int64
}

func (o *windowAssignOp) Process(_ int, b *Batch, out Emitter) error {
	o.out.reset()
	o.offs = o.offs[:0]
	for i, r := range b.Rows {
		tv := r[o.w.Time]
		if tv.IsNull() {
			continue
		}
		t := tv.I
		for s := lastWindowStart(o.w, t); s > t-o.w.Size; s -= windowStep(o.w) {
			o.out.vals = append(o.out.vals, r...)
			o.out.vals = append(o.out.vals, sql.Timestamp(s), sql.Timestamp(s+o.w.Size))
			o.out.endRow()
			if b.Offsets != nil {
				o.offs = append(o.offs, b.Offsets[i])
			}
		}
	}
	if o.out.len() == 0 {
		return nil
	}
	nb := o.out.build(b.Split)
	if b.Offsets != nil {
		nb.Offsets = o.offs
	}
	o.out.reset()
	return out.Emit(nb)
}

// floorDiv rounds a/b toward negative infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// windowStep is the distance between consecutive window starts (tumble: size, hop: slide).
func windowStep(w planner.WindowSpec) int64 {
	if w.Kind == planner.WindowHop {
		return w.Slide
	}
	return w.Size
}

// lastWindowStart is the start of the latest tumble/hop window containing t; the others
// start every windowStep before it while start > t - size.
func lastWindowStart(w planner.WindowSpec, t int64) int64 {
	step := windowStep(w)
	return floorDiv(t, step) * step
}

// limitOp skips the first offset rows, lets n through (n < 0: all), then reports
// ErrLimitReached.
type limitOp struct {
	stateless
	n, offset  int64
	seen, skip int64
}

func (l *limitOp) Process(_ int, b *Batch, out Emitter) error {
	if l.skip < l.offset {
		drop := min(l.offset-l.skip, int64(len(b.Rows)))
		l.skip += drop
		b.Rows = b.Rows[drop:]
		if b.Offsets != nil {
			b.Offsets = b.Offsets[drop:]
		}
		if len(b.Rows) == 0 {
			return nil
		}
	}
	if l.n < 0 {
		return out.Emit(b)
	}
	left := l.n - l.seen
	if left <= 0 {
		return ErrLimitReached
	}
	if int64(len(b.Rows)) > left {
		b.Rows = b.Rows[:left]
		if b.Offsets != nil {
			b.Offsets = b.Offsets[:left]
		}
	}
	l.seen += int64(len(b.Rows))
	if err := out.Emit(b); err != nil {
		return err
	}
	if l.seen >= l.n {
		return ErrLimitReached
	}
	return nil
}

// unionOp passes the rows of every input through unchanged (UNION ALL). The inputs' rows
// have the same layout (the planner casts them to the union's types first).
type unionOp struct{ stateless }

func (unionOp) Process(_ int, b *Batch, out Emitter) error { return out.Emit(b) }

// discard is an Emitter that counts and drops rows (tests, benchmarks).
type discard struct{ rows int64 }

func (d *discard) Emit(b *Batch) error { d.rows += int64(len(b.Rows)); return nil }

// anyFailed reports whether a value of rows is an error value (sql.ErrorValue).
func anyFailed(rows []sql.Row) bool {
	for _, r := range rows {
		if sql.RowError(r) != nil {
			return true
		}
	}
	return false
}
