package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"time"

	"rsql/state"
)

// A stage's watermarks: each split's (raised by its inputs, pulled forward when idle:
// advance), the stage's output watermark, and the event-time alignment of split readers.

// ownWM is a source split's watermark from its own records.
func (sp *split) ownWM() int64 { return splitWM(sp.maxTs, sp.delay) }

func splitWM(maxTs, delay int64) int64 {
	if maxTs == MinWatermark {
		return MinWatermark
	}
	return maxTs - delay
}

// watermarkHolder is an operator that emits rows whose event time may trail the watermark
// it was given by up to WatermarkHold milliseconds (an interval join emits a match when its
// second row arrives, its first row's time up to the interval behind): the watermarks of
// the operators after it, and of the stage's output, are held back that much, so its rows
// are never late downstream.
type watermarkHolder interface {
	WatermarkHold() int64
}

// holdBack is wm held back by h (the ends, MinWatermark and MaxWatermark, stay).
func holdBack(wm, h int64) int64 {
	if h <= 0 || wm == MinWatermark || wm == MaxWatermark {
		return wm
	}
	return max(wm-h, MinWatermark+1)
}

// raiseInputWM records what input reported as the watermark of edge split sp, and tells the
// operator reading that input directly when it judges lateness per input.
func (st *stage) raiseInputWM(sp *split, input int, wm int64) {
	if wm <= sp.inWM[input] {
		return
	}
	sp.inWM[input] = wm
	if e := st.inEmit[input]; e != nil && e.op >= 0 {
		if iw, ok := st.nodes[e.op].op.(inputWatermarker); ok {
			iw.InputWatermark(sp.name, e.in, wm)
		}
	}
}

// advance brings every split's watermark up to date, lets the operators act on the ones
// that rose, then sets the output watermark to their minimum.
//
// A source split's watermark is its largest event time minus the delay. A split with no
// record for its idle timeout, and no records known to wait for it (its reader's lag), is
// idle: it stops holding the others back and is pulled to the
// smallest watermark of the live splits. When every split is idle, the watermark goes to
// the largest event time seen (every window ending at or before it fires, so the last
// windows close when input stops), and beyond it with the wall clock only while the
// stream's event time tracks the wall clock (its last record's event time was within the
// idle timeout of when it was read): a pause never makes a record that is in order late.
// An exhausted split's watermark is +inf. An edge split's watermark is the minimum of what
// its inputs reported.
func (st *stage) advance() error {
	now := st.job.env.Now()
	live := MaxWatermark
	anyLive := false
	maxAll, lastAct := MinWatermark, time.Time{}
	var delay int64
	var idleAfter time.Duration
	for _, sp := range st.splits {
		if sp.input < 0 {
			continue
		}
		if sp.maxTs > maxAll {
			maxAll, delay, idleAfter = sp.maxTs, sp.delay, sp.idleAfter
		}
		if sp.lastActive.After(lastAct) {
			lastAct = sp.lastActive
		}
		if sp.done {
			continue
		}
		// A split whose reader knows of records it has not read yet (lag) is slow, not idle:
		// a pull that takes longer than the idle timeout (a backlog read over the network
		// on busy cores, a unit just taken over) must not let the other splits' watermark
		// make its records late.
		if sp.idleAfter > 0 && now.Sub(sp.lastActive) >= sp.idleAfter && !sp.waiting() {
			st.moved = st.moved || !sp.idle
			sp.idle = true
			continue
		}
		st.moved = st.moved || sp.idle
		sp.idle = false
		anyLive = true
		live = min(live, sp.ownWM())
	}
	allIdle := MinWatermark
	if !anyLive && maxAll != MinWatermark {
		allIdle = maxAll
		tracking := lastAct.UnixMilli()-maxAll <= idleAfter.Milliseconds() && maxAll-lastAct.UnixMilli() <= idleAfter.Milliseconds()
		if tracking {
			allIdle = max(allIdle, maxAll+now.Sub(lastAct).Milliseconds()-delay)
		}
	}
	out := MaxWatermark
	for _, name := range st.order {
		sp := st.splits[name]
		if sp == nil {
			continue
		}
		var target int64
		switch {
		case sp.input < 0:
			target = MaxWatermark
			for _, w := range sp.inWM {
				target = min(target, w)
			}
			sp.done = target == MaxWatermark
		case sp.done:
			target = MaxWatermark
		case !sp.idle:
			target = sp.ownWM()
		case anyLive:
			target = max(sp.ownWM(), live)
		default:
			target = max(sp.ownWM(), allIdle)
		}
		if target > sp.wm {
			sp.wm = target
			st.moved = true
			st.job.touch() // a position to checkpoint (cpidle.go)
			if err := st.splitWatermark(sp.name, target); err != nil {
				return err
			}
		}
		if err := st.reportStatus(sp); err != nil { // shuffle.go: idleness crosses the exchange
			return err
		}
		out = min(out, sp.wm)
	}
	st.setAlignFloor()
	st.publishStats()
	if len(st.splits) == 0 {
		return nil // every split was removed: nothing to say about the output
	}
	return st.setOutputWatermark(out)
}

// splitWatermark hands a split's new watermark to every operator, in topological order,
// then to an output that keeps watermarks per split (a shuffle topic).
func (st *stage) splitWatermark(split string, wm int64) error {
	held := st.heldRows()
	for _, n := range st.nodes {
		if err := n.op.Watermark(split, holdBack(wm, n.hold), n.emit); err != nil {
			return err
		}
	}
	st.watermarkReleased(held)
	if ss, ok := st.out.(splitStatuser); ok && st.splits[split] != nil {
		return ss.SplitStatus(split, wm, st.splitIdle(st.splits[split])) // shuffle.go
	}
	if sw, ok := st.out.(splitWatermarker); ok {
		return sw.SplitWatermark(split, wm)
	}
	return nil
}

// splitWatermarker is an output told each split's watermark (after the operators).
type splitWatermarker interface {
	SplitWatermark(split string, wm int64) error
}

func (st *stage) setOutputWatermark(wm int64) error {
	wm = holdBack(wm, st.outHold)
	if wm <= st.wm {
		return nil
	}
	st.job.touch()
	st.moved = true
	st.wm = wm
	st.statsMu.Lock()
	st.statWM = wm
	st.statsMu.Unlock()
	return st.out.Watermark(wm)
}

// newSplitGrace is how long a source split with nothing read and nothing restored (a new
// job's) stands in the alignment floor at the stage's first event time (setAlignFloor),
// at most: a split that is slow to deliver its first record (a reader slow to open on a
// loaded machine) holds the others back, while one with nothing to read stalls them for
// no longer than this once they have read an alignment window of event time.
const newSplitGrace = time.Second

// setAlignFloor recomputes the alignment floor after the splits' bookkeeping changed and
// wakes readers waiting for it. A live split whose event time is not known yet (no record
// read, none checkpointed) counts as being at its restored watermark when it has one: it
// holds its own windows there, so the others must not run ahead of it either. Without a
// restored watermark (a new job) it counts as being at the first event time the stage
// read, for newSplitGrace (or its idle timeout, when shorter) from its opening, when it was
// opened before that first record: it holds the watermark at the bottom until it delivers,
// so records the others read far ahead would otherwise be judged against that and counted
// on time however late.
func (st *stage) setAlignFloor() {
	floor := MaxWatermark
	now := st.job.env.Now()
	for _, sp := range st.splits {
		if sp.done || sp.idle || (sp.input < 0 && !st.shuffleIn) {
			continue
		}
		// A split reading shuffle topics knows its input's watermark, not an event time
		// (its maxTs is that watermark): it stands at the watermark plus the lead of its
		// producers, or it would hold every reader of the instance a watermark delay
		// behind, and a delay larger than the alignment window would stop them for good.
		lead := sp.delay
		if st.shuffleIn {
			lead = st.floorLead
		}
		switch {
		case sp.maxTs != MinWatermark && st.shuffleIn:
			floor = min(floor, addLead(sp.maxTs, lead))
		case sp.maxTs != MinWatermark:
			floor = min(floor, sp.maxTs)
		case sp.wm != MinWatermark && (sp.idleAfter > 0 || st.shuffleIn):
			floor = min(floor, addLead(sp.wm, lead))
		case sp.wm == MinWatermark && !st.shuffleIn && st.firstTs != MinWatermark:
			grace := newSplitGrace
			if sp.idleAfter > 0 {
				grace = min(grace, sp.idleAfter)
			}
			// (lastActive is when it opened: nothing read. One opened after the first
			// record of the stage, a queue added to a running job, holds nothing.)
			if now.Sub(sp.lastActive) < grace && !sp.lastActive.After(st.firstAt) {
				floor = min(floor, st.firstTs)
			}
		}
	}
	if st.alignFloor.Swap(floor) == floor {
		return
	}
	st.job.alignMoved()
}

// addLead is wm moved ahead by lead, saturating at MaxWatermark.
func addLead(wm, lead int64) int64 {
	if wm >= MaxWatermark-lead {
		return MaxWatermark
	}
	return wm + lead
}

// waitAligned blocks a split reader while its split's max event time is more than the
// alignment window ahead of the slowest live split of the job's root stages, so that
// replay after a restart (when every split has a backlog) reads the splits in step, as
// they were read live, and a stage joining or uniting two streams is not handed one far
// ahead of the other (it would have to keep it until the other caught up).
//
// While it waits, rd counts as having records waiting (split.waiting): a split held back
// must not go idle. If it did, its watermark would be pulled up to the others' (or, with
// every split of the stage held, to the largest event time read), and through a shuffle
// topic the stage after it would stop waiting for it; the records it has not read yet would
// then be late once the slow split that holds the floor (a producer on an instance that
// died, until its unit is taken over) moves on.
func (st *stage) waitAligned(ctx context.Context, rd *reader, maxTs int64) {
	bound := st.job.env.AlignmentWindow
	if bound < 0 || maxTs == MinWatermark {
		return
	}
	defer rd.aligned.Store(false)
	for {
		ch, f := st.job.alignState()
		if f == MaxWatermark || maxTs <= f+bound.Milliseconds() {
			return
		}
		rd.aligned.Store(true)
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
			// The floor also moves when a slow split goes idle, which advance sees on ticks.
		}
	}
}

// saveWatermark records the stage's output watermark in a checkpoint: after a restart the
// output does not go back (rows late downstream stay late).
func (st *stage) saveWatermark(b *state.Batch) {
	if b != nil && st.wm != MinWatermark {
		b.Put(WatermarkKey(st.job.name, st.plan.ID), binary.AppendVarint(nil, st.wm))
	}
}

// restoreWatermark sets the output watermark to the checkpointed one, before any row.
func (st *stage) restoreWatermark() error {
	v, ok, err := st.job.env.Store.Get(WatermarkKey(st.job.name, st.plan.ID))
	if err != nil || !ok {
		return err
	}
	wm, n := binary.Varint(v)
	if n <= 0 {
		return &StateError{Op: "watermark", Split: strconv.Itoa(st.plan.ID), Err: errors.New("corrupt watermark")}
	}
	st.wm = wm
	st.statsMu.Lock()
	st.statWM = wm
	st.statsMu.Unlock()
	return nil
}

// maxIdleTick is the slowest a stage's tick gets while nothing moves (stage.run).
const maxIdleTick = 4 * time.Second

// allQuiet reports whether every split the stage reads is idle or done: until an event or
// a request arrives, a tick can only move what time moves (an idle stage's watermark that
// follows the wall clock), and advance says when it did (moved).
func (st *stage) allQuiet() bool {
	for _, sp := range st.splits {
		if sp.input >= 0 && !sp.idle && !sp.done {
			return false
		}
	}
	return true
}
