package exec

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"rsql/connectors"
	"rsql/state"
)

// A commit group is a set of stages joined by in-process edges: an in-process edge keeps
// nothing durable, so the rows on it between two barriers exist only in memory, and the
// stages on both of its sides must commit the same epoch together or not at all. Each
// stage adds its part of an epoch (its state delta and split positions, taken when the
// barrier passed it); when the last part arrives the group writes them all as one atomic
// checkpoint. A stage that reads a shuffle topic starts a group of its own: the topic is
// durable and de-duplicated, so it commits on its own epochs (shuffle.go).
//
// Commits run on a goroutine of their own, one epoch at a time in epoch order, while the
// stages go on with the rows after the barrier. A stage waits (await) for the commit of the
// last epoch it added before it takes the next barrier, changes its splits or ends, so an
// epoch's outbox is published strictly after its commit and before the next barrier.
type commitGroup struct {
	job    *Job
	stages int       // stages in the group
	sinks  []*sinkOp // exactly-once sinks of the group: publish after each commit

	// committed is the last epoch the group committed (0: none), read by operators that
	// let state leave memory once it is committed (join_cache.go).
	committed atomic.Int64

	mu     sync.Mutex // guards the fields below
	epochs map[int64]*groupEpoch
	prev   chan struct{} // closed when the last started commit is done
}

// groupEpoch collects the parts of one epoch.
type groupEpoch struct {
	n       int
	state   *state.Batch
	offs    []SplitOffset
	reqs    []*request
	started atomic.Bool // the commit is running (every part arrived)
	done    chan struct{}
	err     error
}

func newCommitGroup(j *Job) *commitGroup {
	prev := make(chan struct{})
	close(prev)
	return &commitGroup{job: j, epochs: map[int64]*groupEpoch{}, prev: prev}
}

// add hands over a stage's part of epoch: its state delta (no longer touched by the stage)
// and split positions; r, when not nil, is answered with the commit's result. The last
// part starts the commit.
func (g *commitGroup) add(epoch int64, b *state.Batch, offs []SplitOffset, r *request) *groupEpoch {
	g.mu.Lock()
	e := g.epochs[epoch]
	switch {
	case e == nil:
		e = &groupEpoch{state: b, done: make(chan struct{})}
		g.epochs[epoch] = e
	case b.Size() > e.state.Size():
		// The parts are linked, not copied into one (a checkpoint of a large delta is
		// then held once), the largest first: the RocksDB store copies the first part's
		// encoding in one call and adds the others' operations one by one (state/rocks.go,
		// writeBatch). The parts write keys of their own stages' operators and splits, so
		// their order does not matter.
		b.Link(e.state)
		e.state = b
	default:
		e.state.Link(b)
	}
	e.n++
	e.offs = append(e.offs, offs...)
	if r != nil {
		e.reqs = append(e.reqs, r)
	}
	if e.n < g.stages {
		g.mu.Unlock()
		return e
	}
	delete(g.epochs, epoch)
	prev := g.prev
	g.prev = e.done
	e.started.Store(true)
	g.mu.Unlock()
	go func() {
		<-prev
		start := time.Now()
		err := g.job.commit(g, epoch, e.state, e.offs)
		committed := time.Now()
		if err == nil {
			// The sources' positions are durable now, whatever publishing below does.
			g.job.sourcesCommitted(e.offs)
			g.committed.Store(epoch)
		}
		// What the checkpoint costs is the commit; publishing the outbox is the sink's
		// writing, which the rows cost however often the job checkpoints.
		g.job.commitNanos.Add(int64(committed.Sub(start)))
		for _, s := range g.sinks {
			if err != nil {
				break
			}
			err = s.committed(epoch)
		}
		if err == nil {
			g.job.cpTimes.done(epoch, start, committed, time.Now())
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			g.job.fail(err)
		}
		e.err = err
		for _, r := range e.reqs {
			r.done <- err
		}
		close(e.done)
	}()
	return e
}

// await waits for the commit of e (nil: nothing to wait for) and returns its error. When
// ctx is done first it gives up, unless the commit is already running: then it waits for
// it (a sink must not close under an outbox being published). An epoch that not every
// stage of the group reached (another stage ended first: LIMIT, a failure) never commits.
func (e *groupEpoch) await(ctx context.Context) error {
	if e == nil {
		return nil
	}
	select {
	case <-e.done:
		return e.err
	case <-ctx.Done():
		if e.started.Load() {
			<-e.done
			return e.err
		}
		return ctx.Err()
	}
}

// idle waits for every commit the group started.
func (g *commitGroup) idle() {
	g.mu.Lock()
	prev := g.prev
	g.mu.Unlock()
	<-prev
}

// sourcesCommitted tells each source that listens (connectors.CheckpointListener: a
// replication slot's reader) the positions of its splits a committed checkpoint covers.
func (j *Job) sourcesCommitted(offs []SplitOffset) {
	for _, o := range offs {
		for _, st := range j.stages {
			if st.plan.ID != o.Stage {
				continue
			}
			in, raw, ok := unqualifySplit(st.plan, o.Split)
			if !ok || in >= len(st.inputs) {
				continue
			}
			if si, ok := st.inputs[in].(*sourceInput); ok {
				if l, ok := si.src.(connectors.CheckpointListener); ok {
					l.Committed(raw, o.Offset)
				}
			}
		}
	}
}
