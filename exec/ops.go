package exec

import (
	"context"

	"rsql/planner"
	"rsql/sql"
)

// filterOp keeps the rows for which the predicate is TRUE, compacting the batch in place.
// A row whose predicate fails (an error value) goes to the bad-record path (rowerrors.go).
type filterOp struct {
	pred planner.Evaluator
	next Operator
	// bad, schema, ctx: the stage's bad-record path and this operator's input schema.
	bad    *badRows
	schema sql.Schema
	ctx    context.Context
}

func (f *filterOp) Process(b *Batch) error {
	rows := b.Rows
	offs := b.Offsets
	k := 0
	for i, r := range rows {
		v := f.pred(r)
		if v.K == sql.KindBool && v.I != 0 {
			rows[k] = r
			if offs != nil {
				offs[k] = offs[i]
			}
			k++
		} else if v.K == sql.KindNull && v.S != "" {
			if err := f.bad.report(f.ctx, "filter", b.Split, r, f.schema, v.AsError()); err != nil {
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
	return f.next.Process(b)
}

func (f *filterOp) Watermark(wm int64) error { return f.next.Watermark(wm) }
func (f *filterOp) Control(c *Control) error { return f.next.Control(c) }
func (f *filterOp) Close() error             { return nil }

// projectOp computes its expressions over each row into a reused arena. A row with a
// value that fails (an error value) goes to the bad-record path instead (rowerrors.go).
type projectOp struct {
	exprs []planner.Evaluator
	next  Operator
	out   rowArena
	// bad, schema, ctx: the stage's bad-record path and this operator's input schema.
	bad    *badRows
	schema sql.Schema
	ctx    context.Context
	offs   []int64
}

func (p *projectOp) Process(b *Batch) error {
	p.out.reset()
	var dropped []int // indexes of failed rows (rare)
	for i, r := range b.Rows {
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
			if err := p.bad.report(p.ctx, "project", b.Split, r, p.schema, cause); err != nil {
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
	return p.next.Process(nb)
}

func (p *projectOp) Watermark(wm int64) error { return p.next.Watermark(wm) }
func (p *projectOp) Control(c *Control) error { return p.next.Control(c) }
func (p *projectOp) Close() error             { return nil }

// windowAssignOp appends window_start and window_end to each row, one output row per
// window the row's event time falls in. Rows with a NULL time belong to no window.
type windowAssignOp struct {
	w    planner.WindowSpec
	next Operator
	out  rowArena
	offs []int64
}

func (o *windowAssignOp) Process(b *Batch) error {
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
	return o.next.Process(nb)
}

func (o *windowAssignOp) Watermark(wm int64) error { return o.next.Watermark(wm) }
func (o *windowAssignOp) Control(c *Control) error { return o.next.Control(c) }
func (o *windowAssignOp) Close() error             { return nil }

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

// limitOp lets N rows through, then reports ErrLimitReached.
type limitOp struct {
	n, seen int64
	next    Operator
}

func (l *limitOp) Process(b *Batch) error {
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
	if err := l.next.Process(b); err != nil {
		return err
	}
	if l.seen >= l.n {
		return ErrLimitReached
	}
	return nil
}

func (l *limitOp) Watermark(wm int64) error { return l.next.Watermark(wm) }
func (l *limitOp) Control(c *Control) error { return l.next.Control(c) }
func (l *limitOp) Close() error             { return nil }

// discardOp ends a pipeline that has no sink (tests, benchmarks).
type discardOp struct{ rows int64 }

func (d *discardOp) Process(b *Batch) error   { d.rows += int64(len(b.Rows)); return nil }
func (d *discardOp) Watermark(int64) error    { return nil }
func (d *discardOp) Control(c *Control) error { return nil }
func (d *discardOp) Close() error             { return nil }
