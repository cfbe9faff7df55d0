package exec

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// A stage runs one planner.Stage: inputs → a DAG of operators → one output. One goroutine
// (run) owns the operators, the output and every split's bookkeeping; inputs hand it
// events through one channel, so batches, watermarks and control messages reach the
// operators in one order. The stage owns neither its inputs' readers nor its output: it
// knows them through the input (input.go) and output (operator.go) contracts.
//
// Watermarks. Each split of the stage has its own watermark (split.wm): a source split's is
// its largest event time minus the stream's delay, an edge split's is the minimum of what
// the stage's inputs report for it. Idle splits are pulled forward (advance). The stage's
// output watermark is the minimum over its splits and only rises.
//
// Checkpoints. A root stage (one that reads streams or a shuffle topic) takes a barrier
// when the job asks for a checkpoint; a stage behind in-process edges takes it when every
// one of those edges delivered it (inputs that delivered it first are held back meanwhile).
// Taking a barrier: record every split's position, let each operator write its state
// (Control Checkpoint, in topological order), let the output flush or forward the barrier,
// and hand the state to the stage's commit group (commit.go).

type evKind uint8

const (
	evData        evKind = iota // rows of a split (readers, or an upstream exchange)
	evEnd                       // a source split is exhausted
	evError                     // a reader failed
	evWatermark                 // an upstream exchange's watermark
	evBarrier                   // an upstream exchange's checkpoint barrier
	evUpstreamEnd               // an upstream exchange's stage ended
)

type event struct {
	kind  evKind
	input int
	split *split  // reader events
	rd    *reader // the reader that sent a reader event
	data  *ownedBatch
	wm    int64
	epoch int64
	err   error
}

// ownedBatch is a Batch with its own row storage, recycled through a pool.
type ownedBatch struct {
	Batch
	vals       []sql.Value
	ends       []int
	maxTs      int64
	lastOffset int64
	pool       chan *ownedBatch
	offs       []int64   // source offset of each row (stages writing a shuffle topic)
	hashes     []uint64  // hash of each row's exchange keys (an in-process exchange's batches)
	marks      []markUpd // what the reader applied in this batch (stages reading shuffle topics)
}

func (o *ownedBatch) reset() {
	o.vals, o.ends, o.Rows = o.vals[:0], o.ends[:0], o.Rows[:0]
	o.offs, o.marks, o.Offsets = o.offs[:0], o.marks[:0], nil
	o.hashes, o.Hashes = o.hashes[:0], nil
	o.maxTs, o.lastOffset = MinWatermark, -1
}

func (o *ownedBatch) cut() {
	o.Rows = o.Rows[:0]
	start := 0
	for _, e := range o.ends {
		o.Rows = append(o.Rows, sql.Row(o.vals[start:e:e]))
		start = e
	}
}

func (o *ownedBatch) release() {
	if o.pool == nil {
		return
	}
	select {
	case o.pool <- o:
	default:
	}
}

// batchPool recycles the batches of one producer (a split reader, an exchange) and bounds
// how many it has out at once: get blocks while limit batches are in flight (queued for
// the stage, held back behind a barrier, or being processed), so a producer faster than its
// stage waits instead of allocating. Each batch holds at most the producer's batch size of
// rows, so the bound is limit × that many rows. Every batch handed to a stage is released
// by it (handle), which puts it back; a producer whose stage stopped gives up on ctx.
// get is called from the producer's goroutine only.
type batchPool struct {
	free chan *ownedBatch
	made int
}

// Batches a split reader or an exchange may have in flight: enough to keep the producer
// busy while the stage works through the previous ones.
const (
	splitBatches    = 8
	exchangeBatches = 16
)

func newBatchPool(limit int) *batchPool { return &batchPool{free: make(chan *ownedBatch, limit)} }

// get returns a reset batch, or nil when ctx ended while waiting for one.
func (p *batchPool) get(ctx context.Context) *ownedBatch {
	var ob *ownedBatch
	select {
	case ob = <-p.free:
	default:
		if p.made < cap(p.free) {
			p.made++
			ob = &ownedBatch{pool: p.free}
		} else {
			select {
			case ob = <-p.free:
			case <-ctx.Done():
				return nil
			}
		}
	}
	ob.reset()
	return ob
}

// opNode is an operator of the stage with the emitter its output goes through.
type opNode struct {
	op   Operator
	emit *emitter
	// hold is how far the watermarks this operator sees trail the split's: the sum of the
	// holds of the operators before it (watermarkHolder).
	hold int64
}

// emitter delivers rows to an operator's input, or to the stage's output (op < 0).
type emitter struct {
	st   *stage
	op   int
	in   int
	rows atomic.Int64 // rows emitted through it (stats.go)
}

func (e *emitter) Emit(b *Batch) error {
	e.rows.Add(int64(len(b.Rows)))
	if e.op < 0 {
		return e.st.out.Process(b)
	}
	n := e.st.nodes[e.op]
	return n.op.Process(e.in, b, n.emit)
}

type stage struct {
	job   *Job
	plan  *planner.Stage
	group *commitGroup
	in    chan event
	reqs  chan *request // root stages: checkpoints, split changes, end
	root  bool
	first bool // receives AddSplit / RemoveSplit

	inputs    []input    // per stage input
	inEmit    []*emitter // where each stage input's rows go
	edges     int        // in-process edge inputs
	shuffleIn bool       // the stage reads a shuffle topic
	// floorLead is, for a stage reading shuffle topics, how far the event time its
	// producing splits have read runs ahead of the watermark they write (their sources'
	// watermark delay and the holds of the operators on the way): a split's input
	// watermark plus floorLead is the event time it stands at in the alignment floor.
	floorLead int64
	// moved: the last advance raised a watermark or changed a split's idleness (the
	// tick slows down while it does not, run).
	moved bool

	nodes []*opNode
	// outHold is how far the output watermark trails the splits' (watermarkHolder).
	outHold int64
	out     output
	sink    *sinkOp // the stage's exactly-once sink, if any
	// lates are the stage's late outputs, by stream and row layout (lateOutput).
	lates   map[string]*sideOutput
	lateOrd []*sideOutput
	opIDs   []string     // ids of the stateful operators (state key prefixes)
	opIn    []sql.Schema // each operator's (first) input row

	splits map[string]*split
	order  []string
	// producers are, per input of a stage reading shuffle topics, the upstream stage's
	// splits (whose watermarks the input's watermark waits for).
	producers [][]string
	wm        int64 // output watermark
	ended     []bool
	// finished: a root stage's input is exhausted (bounded); it waits for the job's last
	// checkpoint and its end request.
	finished bool

	// barrier alignment of in-process edges
	barrier     int64 // epoch being aligned (0: none)
	barrierSeen []bool
	stash       [][]event

	// commit of the last epoch this stage added to its group
	lastCommit *groupEpoch
	// the batches of the stage's last checkpoint (spare), reused once it committed
	batches [2]*state.Batch

	// Event-time alignment of split readers: floor is the smallest max event time of the
	// live splits that have data (MaxWatermark: no constraint); a reader whose split is more
	// than Env.AlignmentWindow ahead of the job's floor (the smallest of its root stages')
	// waits until it moves (Job.alignMoved).
	alignFloor atomic.Int64
	// firstTs is the event time of the first record any source split of the stage read
	// (MinWatermark before), at firstAt: a split opened by then with nothing read stands
	// there in the floor for a while (setAlignFloor).
	firstTs int64
	firstAt time.Time

	statsMu    sync.Mutex
	statWM     int64
	statSplits []SplitStats
	// statScratch is publishStats' buffer: a tick that changed nothing publishes nothing.
	statScratch []SplitStats

	// cur is the source batch the stage's operators are working through (nil otherwise)
	// and curLine whether its offsets are line numbers: a failed row's offset is found in
	// it (offsetOf).
	cur     *ownedBatch
	curLine bool
}

// closeAll closes every operator, the output, side outputs and inputs.
func (st *stage) closeAll() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, n := range st.nodes {
		if n != nil {
			keep(n.op.Close())
		}
	}
	if st.out != nil {
		keep(st.out.Close())
	}
	for _, l := range st.lateOrd {
		keep(l.close())
	}
	for _, sp := range st.splits {
		for _, rd := range sp.rds {
			if rd.cancel != nil {
				rd.cancel()
			}
		}
	}
	for _, in := range st.inputs {
		if in != nil {
			keep(in.close())
		}
	}
	return first
}

func (st *stage) run(ctx context.Context) (err error) {
	defer func() {
		st.abortReaders()
		for _, sp := range st.splits {
			for _, rd := range sp.rds {
				if rd.cancel != nil {
					rd.cancel()
				}
			}
		}
		for _, sp := range st.splits {
			for _, rd := range sp.rds {
				if rd.readerDone != nil {
					<-rd.readerDone
				}
			}
		}
		// A checkpoint still committing lands (and its outbox is published) before the
		// sinks close.
		if cerr := st.lastCommit.await(ctx); (err == nil || errors.Is(err, ErrLimitReached)) && cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = cerr
		}
		if cerr := st.closeAll(); err == nil {
			err = cerr
		}
		if errors.Is(err, ErrLimitReached) {
			err = nil
			st.job.cancel()
		}
	}()
	defer func() {
		if errors.Is(err, ErrLimitReached) && st.sink != nil {
			st.sink.publishOnClose = true
		}
	}()
	if err := st.openSplits(ctx); err != nil {
		return err
	}
	if err := st.restoreWatermark(); err != nil {
		return err
	}
	st.startReaders()
	// The tick checks idleness and wall-clock watermarks (advance). While every split is
	// idle or done and a tick moved nothing, nothing can move until an event or a request
	// arrives: the ticks slow down (up to maxIdleTick), and the first event or request
	// brings them back to Env.Tick. An idle job's stages then wake a few times a second
	// instead of ten (docs/benchmarks.md "Idle jobs").
	var tick <-chan time.Time
	var tk *time.Timer
	every := st.job.env.Tick
	if st.edges == 0 {
		tk = time.NewTimer(every)
		defer tk.Stop()
		tick = tk.C
	}
	var reliefT *time.Timer // the pressed root stage's wait (below)
	brisk := func() {
		if tk != nil && every != st.job.env.Tick {
			every = st.job.env.Tick
			tk.Reset(every)
		}
	}
	for {
		if st.root && !st.finished && st.exhausted() {
			if err := st.finish(); err != nil {
				return err
			}
		}
		// Under pressure (Job.pressed) a root stage takes no input until a checkpoint
		// relieves it; it looks again every millisecond (one timer, reset each time).
		in, relief := st.in, (<-chan time.Time)(nil)
		if st.root && st.job.pressed.Load() > 0 {
			if reliefT == nil {
				reliefT = time.NewTimer(time.Millisecond)
				defer reliefT.Stop()
			} else {
				reliefT.Reset(time.Millisecond)
			}
			in, relief = nil, reliefT.C
		}
		select {
		case <-relief:
		case ev := <-in:
			brisk()
			fin, err := st.handle(ctx, ev)
			if err != nil || fin {
				return err
			}
		case r := <-st.reqs:
			brisk()
			fin, err := st.serve(ctx, r)
			if err != nil || fin {
				return err
			}
		case <-tick:
			st.moved = false
			if err := st.advance(); err != nil {
				return err
			}
			if !st.moved && st.allQuiet() && !outPending(st.out) {
				every = min(2*every, maxIdleTick)
			} else {
				every = st.job.env.Tick
			}
			tk.Reset(every)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// exhausted reports whether every split of a root stage is done (bounded input read to the
// end, or an edge split whose watermark reached +inf).
func (st *stage) exhausted() bool {
	if len(st.splits) == 0 {
		return false
	}
	for _, sp := range st.splits {
		if !sp.done {
			return false
		}
	}
	return true
}

// finish is called once when a root stage's input is exhausted: every window fires (the
// splits' watermarks are +inf) and the stage tells the job, which takes a last checkpoint
// and then asks the stage to end.
func (st *stage) finish() error {
	st.finished = true
	if err := st.advance(); err != nil {
		return err
	}
	st.job.rootFinished()
	return nil
}

// end forwards the end of input downstream; the stage's run returns after it.
func (st *stage) end() error {
	if err := st.setOutputWatermark(MaxWatermark); err != nil {
		return err
	}
	return st.out.End()
}

func (st *stage) handle(ctx context.Context, ev event) (finished bool, err error) {
	if st.barrier != 0 && st.barrierSeen[ev.input] && ev.kind != evError {
		// Held back until the barrier is aligned.
		st.stash[ev.input] = append(st.stash[ev.input], ev)
		return false, nil
	}
	if ev.kind != evError && ev.kind != evBarrier {
		st.job.touch() // cpidle.go
	}
	switch ev.kind {
	case evData:
		b := ev.data
		sp := ev.split
		n := len(b.Rows)
		if sp != nil {
			if sp.maxTs == MinWatermark && b.maxTs != MinWatermark && (st.firstTs == MinWatermark || b.maxTs < st.firstTs) {
				if st.firstTs == MinWatermark {
					st.firstAt = st.job.env.Now()
				}
				st.firstTs = b.maxTs
			}
			if b.maxTs > sp.maxTs {
				sp.maxTs = b.maxTs
			}
			if b.lastOffset >= 0 {
				ev.rd.next = b.lastOffset + 1
			}
			sp.lastActive = st.job.env.Now()
			sp.idle = false
			if st.shuffleIn {
				q := ev.rd.shuf
				for _, u := range b.marks {
					if u.isWM {
						q.setStatus(u.split, u.wm, u.idle)
					} else {
						q.marks[u.split] = u.mark
					}
				}
			} else {
				st.job.cnt.in.Add(int64(n))
			}
		}
		if n > 0 {
			if sp != nil && !st.shuffleIn {
				st.cur, st.curLine = b, st.plan.Inputs[ev.input].Connector == "file"
			}
			err = st.inEmit[ev.input].Emit(&b.Batch)
			st.cur = nil
		}
		// A shuffle batch's rows came before the watermark it carries: the input's
		// watermark rises once they are applied, never before (they would be late).
		wm := b.maxTs
		b.release()
		if err != nil {
			return false, err
		}
		if sp != nil && st.shuffleIn {
			st.raiseInputWM(sp, ev.input, wm)
		}
		if sp != nil {
			return false, st.advance()
		}
	case evEnd:
		ev.split.done = true
		return false, st.advance()
	case evError:
		return false, ev.err
	case evWatermark:
		for _, sp := range st.splits {
			st.raiseInputWM(sp, ev.input, ev.wm)
		}
		return false, st.advance()
	case evBarrier:
		return false, st.alignBarrier(ctx, ev)
	case evUpstreamEnd:
		st.ended[ev.input] = true
		for _, e := range st.ended {
			if !e {
				return false, nil
			}
		}
		for _, sp := range st.splits {
			for i := range sp.inWM {
				st.raiseInputWM(sp, i, MaxWatermark)
			}
		}
		if err := st.advance(); err != nil {
			return false, err
		}
		return true, st.end()
	}
	return false, nil
}

// control hands a control message to every operator in topological order, then to the
// output.
func (st *stage) control(c *Control) error {
	for _, n := range st.nodes {
		if err := n.op.Control(c, n.emit); err != nil {
			return err
		}
	}
	return st.out.Control(c)
}

// sameSplitStats reports whether a and b say the same.
func sameSplitStats(a, b SplitStats) bool {
	return a.Stage == b.Stage && a.Stream == b.Stream && a.Split == b.Split && a.Offset == b.Offset &&
		slices.Equal(a.Reads, b.Reads) && a.MaxEventTime == b.MaxEventTime && a.Watermark == b.Watermark &&
		a.Idle == b.Idle && a.Done == b.Done && a.Lag == b.Lag
}

func (st *stage) publishStats() {
	stats := st.statScratch[:0]
	for _, name := range st.order {
		sp := st.splits[name]
		if sp == nil {
			continue
		}
		lag := int64(-1)
		var reads []SplitRead
		for _, rd := range sp.rds {
			rl := int64(-1)
			if rd.lag != nil {
				rl = rd.lag()
				lag = max(lag, 0) + rl
			}
			reads = append(reads, SplitRead{Input: rd.input, Stream: st.plan.Inputs[rd.input].Stream, Offset: rd.next, Lag: rl})
		}
		stream := ""
		if len(reads) > 0 {
			stream = reads[0].Stream
		}
		stats = append(stats, SplitStats{Stage: st.plan.ID, Stream: stream, Split: sp.name,
			Offset: sp.next0(), Reads: reads, MaxEventTime: sp.maxTs, Watermark: sp.wm,
			Idle: sp.idle, Done: sp.done, Lag: lag})
	}
	st.statScratch = stats
	st.statsMu.Lock()
	if !slices.EqualFunc(stats, st.statSplits, sameSplitStats) {
		// (A new slice: readers append from the published one after unlocking.)
		st.statSplits = slices.Clone(stats)
	}
	st.statsMu.Unlock()
}
