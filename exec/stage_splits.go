package exec

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"rsql/state"
)

// A stage's splits: their readers, opening them at start, and NewSplit / RemoveSplit.

// split is one split of a stage: the unit (Unit) an instance can own.
type split struct {
	name  string // the stage's name of it (keys.go: qualifySplit)
	input int    // a source split's input; -1 for the queues of in-process edges and shuffle topics
	raw   string // a source split's name in its input

	// rds read the split: a source split has one reader, a split of a stage reading
	// shuffle topics one per input (the queue of the split's name of each input's topic),
	// the queue of an in-process edge none.
	rds []*reader

	maxTs int64 // largest event time read (sources), MinWatermark before any
	wm    int64 // the split's watermark, as the operators last saw it
	// inWM is, for an edge split, the watermark each input reported for it.
	inWM []int64

	delay      int64
	idleAfter  time.Duration
	lastActive time.Time
	done, idle bool
	// dropDedup: the split's marks were read from DedupKey; the next checkpoint deletes it.
	dropDedup bool
}

// reader reads one input of a split.
type reader struct {
	input int
	raw   string // the input's name of what it reads
	next  int64  // next offset to read

	cancel     context.CancelFunc
	readerDone chan struct{}
	pool       *batchPool
	lag        func() int64
	start      func() // starts the reader (set until startReaders runs it)
	abort      func() // closes the reader never started
	// shuf is, for a shuffle input, what the stage has applied from it (the reader
	// goroutine works on a copy and reports changes with its batches).
	shuf *queueState
	// aligned is set while the reader waits for the job's slowest split (waitAligned): it
	// has read records ahead of the others, and more may wait for it unread.
	aligned atomic.Bool
}

// stop cancels the reader (closing it if it never started).
func (rd *reader) stop() {
	if rd.abort != nil {
		rd.abort()
		rd.start, rd.abort = nil, nil
	}
	if rd.cancel != nil {
		rd.cancel()
	}
}

// next0 is where the split's first reader is (SplitPos.Next).
func (sp *split) next0() int64 {
	if len(sp.rds) == 0 {
		return 0
	}
	return sp.rds[0].next
}

// pos is the split's position as a checkpoint saves it.
func (sp *split) pos() SplitPos {
	p := SplitPos{Next: sp.next0(), MaxTs: sp.maxTs, WM: sp.wm}
	if len(sp.inWM) > 1 {
		p.InWM = append([]int64(nil), sp.inWM...)
	}
	return p
}

// waiting reports whether a reader of the split knows of records it has not read yet, or
// is held back by the alignment of split readers (it stopped reading because it is ahead,
// not because its input stopped).
func (sp *split) waiting() bool {
	for _, rd := range sp.rds {
		if rd.aligned.Load() || (rd.lag != nil && rd.lag() > 0) {
			return true
		}
	}
	return false
}

// openSplits opens every split of the stage: source splits at their checkpointed
// positions, the queues of edges.
func (st *stage) openSplits(ctx context.Context) error {
	names, err := stageSplits(ctx, st.job.plan, st.plan, st.job.env.ExchangeQueues, func(ctx context.Context, i int) ([]string, error) {
		return st.inputs[i].splits(ctx)
	})
	if err != nil {
		return err
	}
	owns := st.job.env.OwnsUnit
	for _, n := range names {
		if owns != nil && !owns(Unit{Stage: st.plan.ID, Split: n}) {
			continue
		}
		if err := st.addSplit(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// addSplit loads a split's position, sends NewSplit through the operators (state loads),
// gives them the split's checkpointed watermark and opens its reader at its offset;
// startReaders starts it.
func (st *stage) addSplit(ctx context.Context, name string) error {
	if err := st.lastCommit.await(ctx); err != nil {
		return err
	}
	env := &st.job.env
	sp := &split{name: name, input: -1, raw: name, maxTs: MinWatermark, wm: MinWatermark, lastActive: env.Now()}
	if st.edges > 0 || st.shuffleIn {
		sp.inWM = make([]int64, len(st.plan.Inputs))
		for i := range sp.inWM {
			sp.inWM[i] = MinWatermark
		}
	}
	if !st.shuffleIn && st.edges == 0 {
		in, raw, ok := unqualifySplit(st.plan, name)
		if !ok {
			return fmt.Errorf("exec: stage %d has no split %s", st.plan.ID, name)
		}
		sp.input, sp.raw = in, raw
		src := st.plan.Inputs[in]
		sp.delay = src.WatermarkDelay
		sp.idleAfter = st.inputs[in].idleTimeout()
		sp.rds = []*reader{{input: in, raw: raw}}
	}
	var stream string
	if sp.input >= 0 {
		stream = st.plan.Inputs[sp.input].Stream
	}
	pos := SplitPos{MaxTs: MinWatermark, WM: MinWatermark}
	if v, ok, err := env.Store.Get(SplitKey(st.job.name, st.plan.ID, name)); err != nil {
		return &SourceError{Stream: stream, Split: name, Err: err}
	} else if ok {
		if pos, err = DecodeSplitPos(v, sp.delay); err != nil {
			return &StateError{Op: "position", Split: name, Err: err}
		}
	} else if env.InitialOffset != nil && sp.input >= 0 {
		pos.Next = env.InitialOffset(st.plan.Inputs[sp.input], sp.raw)
	}
	sp.maxTs = pos.MaxTs
	if sp.input >= 0 {
		sp.rds[0].next = pos.Next
	}
	if st.shuffleIn {
		if err := st.loadShuffleState(ctx, sp, pos); err != nil {
			return err
		}
	}
	if err := st.control(&Control{Kind: NewSplit, Split: name}); err != nil {
		return err
	}
	st.splits[name] = sp
	st.order = append(st.order, name)
	if pos.WM > MinWatermark {
		sp.wm = pos.WM
		if sp.inWM != nil {
			// Each input's own watermark (for operators judging lateness per input), or the
			// split's when the position predates them.
			for i := range sp.inWM {
				w := pos.WM
				if len(pos.InWM) == len(sp.inWM) {
					w = max(pos.InWM[i], pos.WM)
				}
				st.raiseInputWM(sp, i, w)
			}
		}
		if err := st.splitWatermark(name, sp.wm); err != nil {
			return err
		}
	}
	for i, rd := range sp.rds {
		if rd.shuf != nil {
			// Watermarks the split had read from the input when it was checkpointed.
			st.raiseInputWM(sp, i, rd.shuf.watermark())
		}
		if err := st.inputs[rd.input].open(ctx, st, sp, rd); err != nil {
			return err
		}
	}
	return nil
}

// startReaders starts the readers of the splits added since the last call, once the
// alignment floor covers every split of the stage: a reader started before a split added
// after it was known would read ahead unbounded.
func (st *stage) startReaders() {
	st.setAlignFloor()
	for _, name := range st.order {
		sp := st.splits[name]
		if sp == nil {
			continue
		}
		for _, rd := range sp.rds {
			if rd.start != nil {
				start := rd.start
				rd.start, rd.abort = nil, nil
				start()
			}
		}
	}
}

// abortReaders closes the readers opened but never started (the stage ends before
// startReaders).
func (st *stage) abortReaders() {
	for _, sp := range st.splits {
		for _, rd := range sp.rds {
			if rd.abort != nil {
				rd.abort()
				rd.start, rd.abort = nil, nil
			}
		}
	}
}

// removeSplit stops a split's readers, processes every batch they already sent (their
// effect must be in the state the split leaves with, since its saved offset says they were
// read), then sends RemoveSplit (state written and dropped) and commits that state with the
// split's position.
func (st *stage) removeSplit(ctx context.Context, name string) error {
	sp := st.splits[name]
	if sp == nil || len(sp.rds) == 0 {
		return fmt.Errorf("exec: split %s is not read", name)
	}
	if err := st.lastCommit.await(ctx); err != nil {
		return err
	}
	for _, rd := range sp.rds {
		rd.stop()
	}
	for _, rd := range sp.rds {
		for waiting := rd.readerDone != nil; waiting; {
			select {
			case ev := <-st.in:
				if _, err := st.handle(ctx, ev); err != nil {
					return err
				}
			case <-rd.readerDone:
				waiting = false
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	for n := len(st.in); n > 0; n-- {
		if _, err := st.handle(ctx, <-st.in); err != nil {
			return err
		}
	}
	// The split's last outbox entry needs an epoch of its own (outbox.go).
	c := &Control{Kind: RemoveSplit, Split: name, Epoch: st.job.nextEpoch(), State: &state.Batch{}}
	offs := st.savePosition(c.State, sp)
	if err := st.control(c); err != nil {
		return err
	}
	delete(st.splits, name)
	for i, s := range st.order {
		if s == name {
			st.order = append(st.order[:i], st.order[i+1:]...)
			break
		}
	}
	info := &CheckpointInfo{Job: st.job.name, Offsets: offs, State: c.State}
	if err := st.job.env.Commit(info); err != nil {
		return fmt.Errorf("job %s: commit state of removed split %s: %w", st.job.name, name, err)
	}
	if st.sink != nil {
		if err := st.sink.removed(name); err != nil {
			return err
		}
	}
	return st.advance()
}
