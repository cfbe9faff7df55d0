package exec

import (
	"context"
	"strconv"

	"rsql/planner"
	"rsql/sql"
)

// exchangeOut ends a stage with an in-process edge: each row goes to queue hash(keys) mod n
// of the downstream stage (its split of that name); watermarks, checkpoint barriers and
// the end of input go to the downstream stage as events in order with the rows, over the
// one channel the downstream stage reads.
type exchangeOut struct {
	ctx   context.Context
	keys  []planner.Evaluator
	n     int
	cols  []int // columns the downstream stage reads, nil for all
	down  chan event
	input int // the downstream stage's input index of this edge
	pool  *batchPool
	bufs  []*ownedBatch
}

func (x *exchangeOut) Process(b *Batch) error {
	if x.bufs == nil {
		x.bufs = make([]*ownedBatch, x.n)
	}
	for _, r := range b.Rows {
		h := sql.HashSeed
		for _, k := range x.keys {
			h = sql.HashValue(h, k(r))
		}
		q := int(h % uint64(x.n))
		ob := x.bufs[q]
		if ob == nil {
			if ob = x.pool.get(x.ctx); ob == nil {
				return x.ctx.Err()
			}
			ob.Split = strconv.Itoa(q)
			x.bufs[q] = ob
		}
		if x.cols == nil {
			ob.vals = append(ob.vals, r...)
		} else {
			for _, c := range x.cols {
				ob.vals = append(ob.vals, r[c])
			}
		}
		ob.ends = append(ob.ends, len(ob.vals))
		ob.hashes = append(ob.hashes, h)
	}
	for q, ob := range x.bufs {
		if ob == nil {
			continue
		}
		x.bufs[q] = nil
		ob.cut()
		ob.Hashes = ob.hashes
		if err := x.send(event{kind: evData, input: x.input, data: ob}); err != nil {
			return err
		}
	}
	return nil
}

func (x *exchangeOut) send(ev event) error {
	select {
	case x.down <- ev:
		return nil
	case <-x.ctx.Done():
		return x.ctx.Err()
	}
}

func (x *exchangeOut) Watermark(wm int64) error {
	return x.send(event{kind: evWatermark, input: x.input, wm: wm})
}

// Control forwards a checkpoint barrier: the downstream stage takes it once every one of
// its edges delivered it.
func (x *exchangeOut) Control(c *Control) error {
	if c.Kind != Checkpoint {
		return nil
	}
	return x.send(event{kind: evBarrier, input: x.input, epoch: c.Epoch})
}

func (x *exchangeOut) End() error   { return x.send(event{kind: evUpstreamEnd, input: x.input}) }
func (x *exchangeOut) Close() error { return nil }

// identity reports whether cols selects every one of n columns in order.
func identity(cols []int, n int) bool {
	if len(cols) != n {
		return false
	}
	for i, c := range cols {
		if c != i {
			return false
		}
	}
	return true
}
