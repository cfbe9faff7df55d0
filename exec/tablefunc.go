package exec

import (
	"context"

	"rsql/planner"
	"rsql/sql"
)

// tableFuncOp calls a table function per input row and emits the input row followed by
// each row the call gives (outer: one row with NULLs when it gives none). A call that
// fails sends its input row to the bad-record path (rowerrors.go) and emits nothing for
// it; the next row goes on. Output rows share their input row's source offset.
type tableFuncOp struct {
	stateless
	n      *planner.TableFuncNode
	out    rowArena
	offs   []int64
	bad    *badRows
	schema sql.Schema
	ctx    context.Context
	// per call
	cur   sql.Row
	calls int
}

func (o *tableFuncOp) Process(_ int, b *Batch, out Emitter) error {
	o.out.reset()
	o.offs = o.offs[:0]
	emit := func(cols []sql.Value) {
		o.out.vals = append(o.out.vals, o.cur...)
		o.out.vals = append(o.out.vals, cols...)
		o.out.endRow()
		o.calls++
	}
	for i, r := range b.Rows {
		startVals, startRows := len(o.out.vals), o.out.len()
		o.cur, o.calls = r, 0
		if err := o.n.Func(r, emit); err != nil {
			o.out.vals, o.out.ends = o.out.vals[:startVals], o.out.ends[:startRows]
			if rerr := o.bad.report(o.ctx, "table function "+o.n.Name, b.Split, r, o.schema, err); rerr != nil {
				return rerr
			}
			continue
		}
		if o.calls == 0 && o.n.Outer {
			o.out.vals = append(o.out.vals, r...)
			for k := 0; k < o.n.NCols; k++ {
				o.out.vals = append(o.out.vals, sql.Null)
			}
			o.out.endRow()
		}
		if b.Offsets != nil {
			for k := startRows; k < o.out.len(); k++ {
				o.offs = append(o.offs, b.Offsets[i])
			}
		}
	}
	o.cur = nil
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
