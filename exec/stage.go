package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
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
	marks      []markUpd // what the reader applied in this batch (stages reading shuffle topics)
}

// markUpd is a producing split's new dedup mark (isWM false) or watermark.
type markUpd struct {
	split string
	isWM  bool
	mark  dedupMark
	wm    int64
}

func (o *ownedBatch) reset() {
	o.vals, o.ends, o.Rows = o.vals[:0], o.ends[:0], o.Rows[:0]
	o.offs, o.marks, o.Offsets = o.offs[:0], o.marks[:0], nil
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

// waiting reports whether a reader of the split knows of records it has not read yet.
func (sp *split) waiting() bool {
	for _, rd := range sp.rds {
		if rd.lag != nil && rd.lag() > 0 {
			return true
		}
	}
	return false
}

// ownWM is a source split's watermark from its own records.
func (sp *split) ownWM() int64 { return splitWM(sp.maxTs, sp.delay) }

func splitWM(maxTs, delay int64) int64 {
	if maxTs == MinWatermark {
		return MinWatermark
	}
	return maxTs - delay
}

// opNode is an operator of the stage with the emitter its output goes through.
type opNode struct {
	op   Operator
	emit *emitter
	// hold is how far the watermarks this operator sees trail the split's: the sum of the
	// holds of the operators before it (watermarkHolder).
	hold int64
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

	nodes []*opNode
	// outHold is how far the output watermark trails the splits' (watermarkHolder).
	outHold int64
	out     output
	sink    *sinkOp // the stage's exactly-once sink, if any
	late    *sideOutput
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

	statsMu    sync.Mutex
	statWM     int64
	statSplits []SplitStats
}

func newStage(j *Job, ps *planner.Stage) *stage {
	st := &stage{job: j, plan: ps, in: make(chan event, 64), wm: MinWatermark, statWM: MinWatermark,
		splits: map[string]*split{},
		ended:  make([]bool, len(ps.Inputs)), barrierSeen: make([]bool, len(ps.Inputs)), stash: make([][]event, len(ps.Inputs))}
	st.alignFloor.Store(MaxWatermark)
	return st
}

// buildOps makes the stage's operators and wires their emitters.
func (st *stage) buildOps(ctx context.Context) error {
	ps := st.plan
	st.nodes = make([]*opNode, len(ps.Ops))
	st.inEmit = make([]*emitter, len(ps.Inputs))
	used := map[planner.Port]bool{}
	consume := func(p planner.Port, e *emitter) error {
		if used[p] {
			return fmt.Errorf("%w: stage %d: %v is read twice", ErrBadPlan, ps.ID, p)
		}
		used[p] = true
		switch {
		case p.Op >= 0 && p.Op < len(ps.Ops):
			st.nodes[p.Op].emit = e
		case p.Op < 0 && p.Input >= 0 && p.Input < len(ps.Inputs):
			st.inEmit[p.Input] = e
		default:
			return fmt.Errorf("%w: stage %d reads a port that does not exist: %+v", ErrBadPlan, ps.ID, p)
		}
		return nil
	}
	schemas := make([]sql.Schema, len(ps.Ops)) // each operator's input row, for late rows
	st.opIn = schemas
	for i, op := range ps.Ops {
		for k, p := range op.Inputs {
			if p.Op >= i {
				return fmt.Errorf("%w: stage %d: operator %d reads operator %d after it", ErrBadPlan, ps.ID, i, p.Op)
			}
			if k == 0 {
				schemas[i] = st.portSchema(p, schemas)
			}
		}
		n, err := st.newOperator(ctx, i, op, schemas[i])
		if err != nil {
			return err
		}
		st.nodes[i] = &opNode{op: n}
	}
	for i, op := range ps.Ops {
		if len(op.Inputs) == 0 {
			return fmt.Errorf("%w: stage %d: operator %d has no input", ErrBadPlan, ps.ID, i)
		}
		for k, p := range op.Inputs {
			if err := consume(p, &emitter{st: st, op: i, in: k}); err != nil {
				return err
			}
		}
	}
	if err := consume(ps.Out, &emitter{st: st, op: -1}); err != nil {
		return err
	}
	// Watermark holds accumulate along the DAG (operators are in topological order).
	portHold := func(p planner.Port) int64 {
		if p.Op < 0 {
			return 0
		}
		h := st.nodes[p.Op].hold
		if wh, ok := st.nodes[p.Op].op.(watermarkHolder); ok {
			h += wh.WatermarkHold()
		}
		return h
	}
	for i, op := range ps.Ops {
		for _, p := range op.Inputs {
			st.nodes[i].hold = max(st.nodes[i].hold, portHold(p))
		}
	}
	st.outHold = portHold(ps.Out)
	for i, n := range st.nodes {
		if n.emit == nil {
			return fmt.Errorf("%w: stage %d: the output of operator %d goes nowhere", ErrBadPlan, ps.ID, i)
		}
	}
	for i, e := range st.inEmit {
		if e == nil {
			return fmt.Errorf("%w: stage %d: input %d goes nowhere", ErrBadPlan, ps.ID, i)
		}
	}
	return nil
}

// portSchema is the row layout of a port (for encoding late rows).
func (st *stage) portSchema(p planner.Port, ops []sql.Schema) sql.Schema {
	if p.Op < 0 {
		src := st.plan.Inputs[p.Input]
		if src.Columns == nil {
			return src.Schema
		}
		s := make(sql.Schema, len(src.Columns))
		for i, c := range src.Columns {
			if c >= 0 && c < len(src.Schema) {
				s[i] = src.Schema[c]
			}
		}
		return s
	}
	in := ops[p.Op]
	switch n := st.plan.Ops[p.Op].Node.(type) {
	case *planner.UnionNode:
		return n.Schema
	case *planner.JoinNode:
		return n.Schema
	case *planner.ProjectNode:
		return n.Schema
	case *planner.WindowAssignNode:
		return n.Schema
	case *planner.TableFuncNode:
		return n.Schema
	case *planner.AggregateNode:
		return n.Schema
	}
	if s, ok := st.plan.Ops[p.Op].Node.(interface{ OutSchema(sql.Schema) sql.Schema }); ok {
		return s.OutSchema(in)
	}
	return in
}

// bad is the stage's bad-record path (rowerrors.go).
func (st *stage) bad() *badRows { return &badRows{st: st} }

// rootDLQ is the dead-letter output of the stream the stage's rows come from (it belongs
// to the stage that reads that stream; rawOutput is safe for concurrent use), or nil.
func (st *stage) rootDLQ() *rawOutput {
	s := st
	for s.plan.Inputs[0].FromStage >= 0 {
		up := s.job.stageByID(s.plan.Inputs[0].FromStage)
		if up == nil {
			return nil
		}
		s = up
	}
	if in, ok := s.inputs[0].(*sourceInput); ok {
		return in.dlq
	}
	return nil
}

// rootSource is the stream the stage's rows come from at the start of the plan (for the
// late_* options): its first input, or its first upstream stage's.
func (st *stage) rootSource() planner.SourceSpec {
	src := st.plan.Inputs[0]
	for src.FromStage >= 0 {
		up := st.job.plan.Stage(src.FromStage)
		if up == nil {
			break
		}
		src = up.Inputs[0]
	}
	return src
}

func (st *stage) newOperator(ctx context.Context, i int, op planner.Op, in sql.Schema) (Operator, error) {
	env := &st.job.env
	id := st.plan.ID
	switch n := op.Node.(type) {
	case *planner.FilterNode:
		return &filterOp{pred: n.Pred, bad: st.bad(), schema: in, ctx: ctx}, nil
	case *planner.ProjectNode:
		return &projectOp{exprs: n.Exprs, bad: st.bad(), schema: in, ctx: ctx}, nil
	case *planner.TableFuncNode:
		return &tableFuncOp{n: n, bad: st.bad(), schema: in, ctx: ctx}, nil
	case *planner.WindowAssignNode:
		if n.Window.Kind != planner.WindowTumble && n.Window.Kind != planner.WindowHop {
			return nil, fmt.Errorf("%w: stage %d: window assignment needs TUMBLE or HOP", ErrBadPlan, id)
		}
		return &windowAssignOp{w: n.Window}, nil
	case *planner.AggregateNode:
		if err := checkWindow(n.Window); err != nil {
			return nil, fmt.Errorf("%w: stage %d: %v", ErrBadPlan, id, err)
		}
		late, err := st.lateOutput(ctx, in)
		if err != nil {
			return nil, err
		}
		oid := OperatorID(id, "agg", i)
		st.opIDs = append(st.opIDs, oid)
		a := newAggOp(n, st.job.name, oid, env.Store, late, &st.job.cnt)
		a.bad, a.schema = st.bad(), in
		return a, nil
	case *planner.LimitNode:
		return &limitOp{n: n.N, offset: n.Offset}, nil
	case *planner.UnionNode:
		return unionOp{}, nil
	case *planner.SortNode:
		return &sortOp{keys: n.Keys}, nil
	case *planner.JoinNode:
		late, err := st.lateOutput(ctx, in)
		if err != nil {
			return nil, err
		}
		oid := OperatorID(id, "join", i)
		st.opIDs = append(st.opIDs, oid)
		j := newJoinOp(n, st.job.name, oid, env.Store, late, &st.job.cnt)
		j.logf = env.Logf
		return j, nil
	case *planner.LookupJoinNode:
		return st.openLookup(ctx, n, in)
	case *planner.TopNNode:
		late, err := st.lateOutput(ctx, in)
		if err != nil {
			return nil, err
		}
		oid := OperatorID(id, "topn", i)
		st.opIDs = append(st.opIDs, oid)
		return newTopNOp(n, st.job.name, oid, env.Store, late, &st.job.cnt), nil
	}
	return nil, fmt.Errorf("%w: stage %d: unknown node %T", ErrBadPlan, id, op.Node)
}

// lateOutput opens the late-row output of the stage's root stream (late_topic/late_path),
// once per stage; rows are encoded over schema in.
func (st *stage) lateOutput(ctx context.Context, in sql.Schema) (*sideOutput, error) {
	if st.late != nil {
		return st.late, nil
	}
	env := &st.job.env
	spec, ok := sideSpec(st.rootSource(), "late", in)
	if !ok {
		return nil, nil
	}
	if env.OpenSink == nil || env.NewFormat == nil {
		return nil, fmt.Errorf("%w: late output %s needs Env.OpenSink and Env.NewFormat", ErrMissingEnv, spec.Stream)
	}
	op, err := openSinkOp(ctx, env, spec, &counters{})
	if err != nil {
		return nil, err
	}
	st.late = &sideOutput{op: *op}
	return st.late, nil
}

func checkWindow(w planner.WindowSpec) error {
	switch w.Kind {
	case planner.WindowTumble:
		if w.Size <= 0 {
			return errors.New("tumbling window size must be positive")
		}
	case planner.WindowHop:
		if w.Size <= 0 || w.Slide <= 0 {
			return errors.New("hopping window size and slide must be positive")
		}
	case planner.WindowSession:
		if w.Gap <= 0 {
			return errors.New("session gap must be positive")
		}
	}
	return nil
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
	if st.late != nil {
		keep(st.late.close())
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
	var tick <-chan time.Time
	if st.edges == 0 {
		tk := time.NewTicker(st.job.env.Tick)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		if st.root && !st.finished && st.exhausted() {
			if err := st.finish(); err != nil {
				return err
			}
		}
		select {
		case ev := <-st.in:
			fin, err := st.handle(ctx, ev)
			if err != nil || fin {
				return err
			}
		case r := <-st.reqs:
			fin, err := st.serve(ctx, r)
			if err != nil || fin {
				return err
			}
		case <-tick:
			if err := st.advance(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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

// shuffleProducers lists, per input of a stage reading shuffle topics, the splits of the
// upstream stage (once; every split of the stage shares the lists).
func (st *stage) shuffleProducers(ctx context.Context) ([][]string, error) {
	if st.producers != nil {
		return st.producers, nil
	}
	out := make([][]string, len(st.plan.Inputs))
	for i, src := range st.plan.Inputs {
		up := st.job.stageByID(src.FromStage)
		if up == nil {
			return nil, fmt.Errorf("%w: stage %d reads stage %d, which does not exist", ErrBadPlan, st.plan.ID, src.FromStage)
		}
		names, err := stageSplits(ctx, st.job.plan, up.plan, st.job.env.ExchangeQueues, func(ctx context.Context, k int) ([]string, error) {
			return up.inputs[k].splits(ctx)
		})
		if err != nil {
			return nil, err
		}
		out[i] = names
	}
	st.producers = out
	return out, nil
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
	switch ev.kind {
	case evData:
		b := ev.data
		sp := ev.split
		n := len(b.Rows)
		if sp != nil {
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
						q.setWM(u.split, u.wm, false)
					} else {
						q.marks[u.split] = u.mark
					}
				}
			} else {
				st.job.cnt.in.Add(int64(n))
			}
		}
		if n > 0 {
			err = st.inEmit[ev.input].Emit(&b.Batch)
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
			sp.idle = true
			continue
		}
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
			if err := st.splitWatermark(sp.name, target); err != nil {
				return err
			}
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
	st.wm = wm
	st.statsMu.Lock()
	st.statWM = wm
	st.statsMu.Unlock()
	return st.out.Watermark(wm)
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

// setAlignFloor recomputes the alignment floor after the splits' bookkeeping changed and
// wakes readers waiting for it. A live split whose event time is not known yet (no record
// read, none checkpointed) counts as being at its restored watermark when it has one: it
// holds its own windows there, so the others must not run ahead of it either.
func (st *stage) setAlignFloor() {
	floor := MaxWatermark
	for _, sp := range st.splits {
		if sp.done || sp.idle || (sp.input < 0 && !st.shuffleIn) {
			continue
		}
		switch {
		case sp.maxTs != MinWatermark:
			floor = min(floor, sp.maxTs)
		case sp.wm != MinWatermark && sp.wm < MaxWatermark-sp.delay && (sp.idleAfter > 0 || st.shuffleIn):
			floor = min(floor, sp.wm+sp.delay)
		}
	}
	if st.alignFloor.Swap(floor) == floor {
		return
	}
	st.job.alignMoved()
}

// waitAligned blocks a split reader while its split's max event time is more than the
// alignment window ahead of the slowest live split of the job's root stages, so that
// replay after a restart (when every split has a backlog) reads the splits in step, as
// they were read live, and a stage joining or uniting two streams is not handed one far
// ahead of the other (it would have to keep it until the other caught up).
func (st *stage) waitAligned(ctx context.Context, maxTs int64) {
	bound := st.job.env.AlignmentWindow
	if bound < 0 || maxTs == MinWatermark {
		return
	}
	for {
		ch, f := st.job.alignState()
		if f == MaxWatermark || maxTs <= f+bound.Milliseconds() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
			// The floor also moves when a slow split goes idle, which advance sees on ticks.
		}
	}
}

func (st *stage) publishStats() {
	stats := make([]SplitStats, 0, len(st.order))
	for _, name := range st.order {
		sp := st.splits[name]
		if sp == nil {
			continue
		}
		lag := int64(-1)
		for _, rd := range sp.rds {
			if rd.lag != nil {
				lag = max(lag, 0) + rd.lag()
			}
		}
		stream := ""
		if len(sp.rds) > 0 {
			stream = st.plan.Inputs[sp.rds[0].input].Stream
		}
		stats = append(stats, SplitStats{Stage: st.plan.ID, Stream: stream, Split: sp.name,
			Offset: sp.next0(), MaxEventTime: sp.maxTs, Watermark: sp.wm,
			Idle: sp.idle, Done: sp.done, Lag: lag})
	}
	st.statsMu.Lock()
	st.statSplits = stats
	st.statsMu.Unlock()
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
		if _, ok := st.splits[r.split]; ok {
			err = fmt.Errorf("exec: split %s is already read", r.split)
		} else if err = st.addSplit(ctx, r.split); err == nil {
			st.startReaders()
			st.publishStats()
		}
	case reqRemoveSplit:
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
	part.Append(c.State)
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
	if st.late != nil {
		if err := st.late.flush(); err != nil {
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

// loadShuffleState sets up the readers of a split of a stage reading shuffle topics, one
// per input, from what its checkpoint says it applied (ShuffleKey; DedupKey and the
// position's offset for a split checkpointed before ShuffleKey existed).
func (st *stage) loadShuffleState(ctx context.Context, sp *split, pos SplitPos) error {
	env := &st.job.env
	producers, err := st.shuffleProducers(ctx)
	if err != nil {
		return err
	}
	var qs []*queueState
	if v, ok, err := env.Store.Get(ShuffleKey(st.job.name, st.plan.ID, sp.name)); err != nil {
		return &StateError{Op: "shuffle", Split: sp.name, Err: err}
	} else if ok {
		if qs, err = decodeQueueStates(v); err != nil {
			return &StateError{Op: "shuffle", Split: sp.name, Err: err}
		}
		if len(qs) != len(st.plan.Inputs) {
			return &StateError{Op: "shuffle", Split: sp.name, Err: fmt.Errorf("%w: %d inputs checkpointed, the stage has %d", errBadShuffle, len(qs), len(st.plan.Inputs))}
		}
	} else {
		qs = make([]*queueState, len(st.plan.Inputs))
		for i := range qs {
			qs[i] = newQueueState(nil)
		}
		qs[0].next = pos.Next
		if v, ok, err := env.Store.Get(DedupKey(st.job.name, st.plan.ID, sp.name)); err != nil {
			return &StateError{Op: "dedup", Split: sp.name, Err: err}
		} else if ok {
			m, err := decodeMarks(v)
			if err != nil {
				return &StateError{Op: "dedup", Split: sp.name, Err: err}
			}
			qs[0].marks = m
			sp.dropDedup = true
		}
	}
	for i, q := range qs {
		q.producers = producers[i]
		sp.rds = append(sp.rds, &reader{input: i, raw: sp.name, next: q.next, shuf: q})
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
