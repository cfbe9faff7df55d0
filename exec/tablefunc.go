package exec

import (
	"context"

	"rsql/planner"
	"rsql/sql"
)

// tableFuncBatch is how many rows the operator gathers before it passes them on, also in
// the middle of one call's rows, so that a call giving millions of rows is not held in
// memory at once.
const tableFuncBatch = 1024

// tableFuncOp calls a table function per input row and emits the input row followed by
// each row the call gives (outer: one row with NULLs when it gives none). A call that
// fails sends its input row to the bad-record path (rowerrors.go) and emits nothing for
// it (table functions report errors before their first row, sql.TableEvaluator); the
// next row goes on. Output rows share their input row's source offset.
type tableFuncOp struct {
	stateless
	n      *planner.TableFuncNode
	out    rowArena
	offs   []int64
	bad    *badRows
	schema sql.Schema
	ctx    context.Context
	// per call
	cur      sql.Row
	off      int64
	hasOffs  bool
	calls    int
	split    string
	emitTo   Emitter
	flushErr error
	flushed  bool        // rows of the current call were passed on
	nulls    []sql.Value // the columns of an outer row without a match
}

// flush passes the gathered rows on.
func (o *tableFuncOp) flush() error {
	if o.out.len() == 0 {
		return nil
	}
	nb := o.out.build(o.split)
	if o.hasOffs {
		nb.Offsets = o.offs
	}
	err := o.emitTo.Emit(nb)
	o.out.reset()
	o.offs = o.offs[:0]
	return err
}

func (o *tableFuncOp) add(cols []sql.Value) {
	if o.flushErr != nil {
		return
	}
	o.out.vals = append(o.out.vals, o.cur...)
	o.out.vals = append(o.out.vals, cols...)
	o.out.endRow()
	if o.hasOffs {
		o.offs = append(o.offs, o.off)
	}
	o.calls++
	if o.out.len() >= tableFuncBatch {
		o.flushErr, o.flushed = o.flush(), true
	}
}

func (o *tableFuncOp) Process(_ int, b *Batch, out Emitter) error {
	o.out.reset()
	o.offs = o.offs[:0]
	o.split, o.emitTo, o.hasOffs, o.flushErr = b.Split, out, b.Offsets != nil, nil
	emit := o.add
	for i, r := range b.Rows {
		startVals, startRows := len(o.out.vals), o.out.len()
		o.cur, o.calls, o.flushed = r, 0, false
		if o.hasOffs {
			o.off = b.Offsets[i]
		}
		err := o.n.Func(r, emit)
		if o.flushErr != nil {
			return o.flushErr
		}
		if err != nil {
			// Nothing was emitted (the contract); drop what may have been, to be safe.
			if o.calls > 0 && !o.flushed {
				o.out.vals, o.out.ends = o.out.vals[:startVals], o.out.ends[:startRows]
				if o.hasOffs {
					o.offs = o.offs[:startRows]
				}
			}
			if rerr := o.bad.reportAt(o.ctx, "table function "+o.n.Name, b.Split, rowOffset(b, i), r, o.schema, err); rerr != nil {
				return rerr
			}
			continue
		}
		if o.calls == 0 && o.n.Outer {
			if len(o.nulls) != o.n.NCols {
				o.nulls = make([]sql.Value, o.n.NCols) // the zero Value is NULL
			}
			o.add(o.nulls)
			if o.flushErr != nil {
				return o.flushErr
			}
		}
	}
	o.cur = nil
	return o.flush()
}
