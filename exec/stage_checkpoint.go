package exec

import (
	"context"
	"fmt"

	"rsql/state"
)

// A stage's checkpoints: barrier alignment across in-process edges, requests of the job
// (serve), and taking a checkpoint (positions, operator state, the output's flush).

// alignBarrier handles barrier epoch from an in-process edge: once every edge delivered
// it, the stage takes it and replays what it held back.
func (st *stage) alignBarrier(ctx context.Context, ev event) error {
	if st.barrier == 0 {
		st.barrier = ev.epoch
	} else if ev.epoch != st.barrier {
		return fmt.Errorf("%w: stage %d: barrier %d while aligning %d", ErrBadPlan, st.plan.ID, ev.epoch, st.barrier)
	}
	st.barrierSeen[ev.input] = true
	for i, src := range st.plan.Inputs {
		if src.FromStage >= 0 && !st.barrierSeen[i] && !st.ended[i] {
			return nil
		}
	}
	epoch := st.barrier
	st.barrier = 0
	clear(st.barrierSeen)
	if err := st.checkpoint(ctx, epoch, nil); err != nil {
		return err
	}
	// Replay what was held back, in order per input; it may hold the next barrier.
	stash := st.stash
	st.stash = make([][]event, len(stash))
	for _, evs := range stash {
		for _, e := range evs {
			if _, err := st.handle(ctx, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// serve handles a job request (root stages).
func (st *stage) serve(ctx context.Context, r *request) (finished bool, err error) {
	switch r.kind {
	case reqCheckpoint:
		return false, st.checkpoint(ctx, r.epoch, r)
	case reqEnd:
		err := st.end()
		r.done <- err
		return true, err
	case reqAddSplit:
		st.job.touch()
		if _, ok := st.splits[r.split]; ok {
			err = fmt.Errorf("exec: split %s is already read", r.split)
		} else if err = st.addSplit(ctx, r.split); err == nil {
			st.startReaders()
			st.publishStats()
		}
	case reqRemoveSplit:
		st.job.touch()
		err = st.removeSplit(ctx, r.split)
	}
	r.done <- err
	return false, nil
}

// checkpoint takes barrier epoch: positions, operator state, output; then hands the state
// to the commit group and, through the output, the barrier downstream.
func (st *stage) checkpoint(ctx context.Context, epoch int64, r *request) error {
	if err := st.lastCommit.await(ctx); err != nil {
		if r != nil {
			r.done <- err
		}
		return err
	}
	// The previous epoch is committed: its batches are free to be reused, so the state
	// delta of every checkpoint does not grow a new buffer from nothing.
	c := &Control{Kind: Checkpoint, Epoch: epoch, State: st.spare(0)}
	offs := st.positions(c.State)
	st.saveWatermark(c.State)
	if err := st.flushSides(); err != nil {
		return err
	}
	// The operators write their state, then the output flushes (sinks), stages its
	// outbox, or forwards the barrier downstream.
	for _, n := range st.nodes {
		if err := n.op.Control(c, n.emit); err != nil {
			return err
		}
	}
	// The group gets this stage's part before the barrier goes downstream, so the
	// downstream stage's part completes the epoch after it.
	part := c.State
	c.State = st.spare(1)
	if err := st.out.Control(c); err != nil {
		return err
	}
	part.Link(c.State)
	st.lastCommit = st.group.add(epoch, part, offs, r)
	return nil
}

// spare returns checkpoint batch i of the stage, empty; the stage reuses it at its next
// checkpoint, after the commit of this one (checkpoint awaits it first).
func (st *stage) spare(i int) *state.Batch {
	b := st.batches[i]
	if b == nil {
		b = &state.Batch{}
		st.batches[i] = b
	}
	b.Reset()
	return b
}

func (st *stage) flushSides() error {
	for _, l := range st.lateOrd {
		if err := l.flush(); err != nil {
			return err
		}
	}
	for _, in := range st.inputs {
		if in != nil {
			if err := in.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// positions records every split's position in b and returns the source offsets.
func (st *stage) positions(b *state.Batch) []SplitOffset {
	var offs []SplitOffset
	for _, name := range st.order {
		sp := st.splits[name]
		if sp == nil {
			continue
		}
		offs = append(offs, st.savePosition(b, sp)...)
	}
	return offs
}

// savePosition writes what sp has read (position, watermark, shuffle state) to b and
// returns its readers' offsets.
func (st *stage) savePosition(b *state.Batch, sp *split) []SplitOffset {
	b.Put(SplitKey(st.job.name, st.plan.ID, sp.name), sp.pos().Encode())
	var offs []SplitOffset
	for _, rd := range sp.rds {
		offs = append(offs, SplitOffset{Stage: st.plan.ID, Stream: st.plan.Inputs[rd.input].Stream, Split: sp.name, Offset: rd.next})
	}
	if st.shuffleIn {
		qs := make([]*queueState, len(sp.rds))
		for i, rd := range sp.rds {
			rd.shuf.next = rd.next
			qs[i] = rd.shuf
		}
		b.Put(ShuffleKey(st.job.name, st.plan.ID, sp.name), encodeQueueStates(qs))
		if sp.dropDedup {
			b.Delete(DedupKey(st.job.name, st.plan.ID, sp.name))
			sp.dropDedup = false
		}
	}
	return offs
}
