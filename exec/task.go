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

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// A task runs one stage: one goroutine owns the operator chain and every split's time
// bookkeeping; split readers (one goroutine each) read and decode and send batches to the
// task's input channel. Control messages are applied by the task between batches, so they
// are ordered with data. A stage reading an in-process exchange has no readers: the
// upstream task's exchange operator sends batches, watermarks and barriers to its input.

type evKind uint8

const (
	evData        evKind = iota
	evEnd                // a split is exhausted
	evError              // a reader failed
	evWatermark          // from an upstream exchange
	evControl            // a checkpoint barrier from an upstream exchange
	evUpstreamEnd        // the upstream stage finished
)

type event struct {
	kind  evKind
	split *splitIn
	data  *ownedBatch
	wm    int64
	ctl   *Control
	req   *request
	offs  []SplitOffset
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
	marks      []markUpd // dedup marks after this batch (stages reading a shuffle topic)
}

type markUpd struct {
	split string
	mark  dedupMark
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

type splitIn struct {
	name       string
	maxTs      int64
	next       int64 // next offset to read
	lastActive time.Time
	done, idle bool
	cancel     context.CancelFunc
	readerDone chan struct{}
	pool       chan *ownedBatch
	lag        func() int64
	marks      map[string]dedupMark // shuffle splits: applied row ids per source split
	start      func()               // starts the reader (set until startReaders runs it)
	abort      func()               // closes the reader never started
}

type task struct {
	job   *Job
	stage *planner.Stage
	head  Operator
	ops   []Operator
	in    chan event

	// source stages
	src       connectors.Source
	bounded   bool
	splits    map[string]*splitIn
	order     []string
	delay     int64
	idle      time.Duration
	dlq       *rawOutput
	late      *sideOutput
	isFirst   bool // receives the job's requests
	upstreams int  // exchange stages feeding this one (0 for sources)

	queues     int // exchange stages: the number of queues (splits) read
	wm         int64
	commits    bool       // last stage: commits checkpoints
	downstream chan event // set when the stage ends in an exchange
	downSrc    *planner.SourceSpec
	rootSrc    *planner.SourceSpec // the stream this stage's rows come from (for late_* options)
	opIDs      []string            // ids of the stage's stateful operators
	exch       *exchangeOp
	sink       *sinkOp // the stage's main sink, if it writes a stream

	shuffleTo *planner.SourceSpec // the downstream stage's source, when this stage writes its shuffle topic
	shuffleN  int                 // queues of that topic
	shuffleIn bool                // this stage reads an upstream stage's shuffle topic
	reqs      chan *request       // checkpoint requests (shuffleIn stages commit on their own)

	// committing receives the result of the checkpoint commit in flight (nil: none); see
	// commit.
	committing chan error

	// Event-time alignment of split readers: floor is the smallest max event time of the
	// live splits that have data (MaxWatermark: no constraint); a reader whose split is more
	// than Env.AlignmentWindow ahead of it waits until alignCh is closed (floor moved).
	alignFloor atomic.Int64
	alignMu    sync.Mutex
	alignCh    chan struct{}

	statsMu    sync.Mutex
	statWM     int64
	statSplits []SplitStats
}

// build makes a task per stage and wires exchanges.
func (j *Job) build(ctx context.Context, plan *planner.Physical) error {
	byID := map[int]*task{}
	for _, st := range plan.Stages {
		t := &task{job: j, stage: st, in: make(chan event, 64), wm: MinWatermark, statWM: MinWatermark, splits: map[string]*splitIn{},
			alignCh: make(chan struct{})}
		t.alignFloor.Store(MaxWatermark)
		byID[st.ID] = t
		j.tasks = append(j.tasks, t)
	}
	first := true
	for _, t := range j.tasks {
		st := t.stage
		if st.Source.FromStage >= 0 {
			up := byID[st.Source.FromStage]
			if up == nil || len(up.stage.Pipeline) == 0 {
				return fmt.Errorf("%w: stage %d reads stage %d, which has no exchange", ErrBadPlan, st.ID, st.Source.FromStage)
			}
			if _, ok := up.stage.Pipeline[len(up.stage.Pipeline)-1].(*planner.ExchangeNode); !ok {
				return fmt.Errorf("%w: stage %d reads stage %d, which has no exchange", ErrBadPlan, st.ID, st.Source.FromStage)
			}
			if up.downstream != nil || up.shuffleTo != nil {
				return fmt.Errorf("%w: stage %d feeds more than one stage", ErrBadPlan, up.stage.ID)
			}
			t.queues = j.env.ExchangeQueues
			if x := up.stage.Pipeline[len(up.stage.Pipeline)-1].(*planner.ExchangeNode); x.Queues > 0 {
				t.queues = x.Queues
			}
			if j.env.ShuffleTopics && up.stage.Source.FromStage < 0 && up.stage.Source.Connector == "broker" && st.Source.Connector == "broker" {
				opts := map[string]string{}
				for k, v := range st.Source.Options {
					opts[k] = v
				}
				opts["topic"], opts["queues"] = st.Source.Stream, strconv.Itoa(t.queues)
				st.Source.Options = opts
				up.shuffleTo, up.shuffleN = &st.Source, t.queues
				t.shuffleIn = true
				t.reqs = make(chan *request)
				j.shuffleReqs = append(j.shuffleReqs, t.reqs)
				continue
			}
			up.downstream = t.in
			up.downSrc = &t.stage.Source
			t.upstreams++
		} else {
			t.isFirst = first
			first = false
		}
	}
	for _, t := range j.tasks {
		t.rootSrc = &t.stage.Source
		for up := t; up.stage.Source.FromStage >= 0; {
			up = byID[up.stage.Source.FromStage]
			t.rootSrc = &up.stage.Source
		}
	}
	for _, t := range j.tasks {
		if err := t.buildOps(ctx); err != nil {
			return err
		}
		t.commits = t.downstream == nil
	}
	for _, t := range j.tasks {
		if t.upstreams > 0 {
			if t.upstreams != 1 {
				return fmt.Errorf("%w: stage %d has %d upstream stages", ErrBadPlan, t.stage.ID, t.upstreams)
			}
			continue
		}
		if err := t.openSource(ctx); err != nil {
			return err
		}
	}
	return nil
}

// inputSchema is the row schema entering the pipeline.
func (t *task) inputSchema() sql.Schema {
	src := t.stage.Source
	if src.Columns == nil {
		return src.Schema
	}
	s := make(sql.Schema, len(src.Columns))
	for i, c := range src.Columns {
		s[i] = src.Schema[c]
	}
	return s
}

func (t *task) buildOps(ctx context.Context) error {
	env := &t.job.env
	st := t.stage
	// The schema entering each node, to encode late rows.
	schemas := make([]sql.Schema, len(st.Pipeline)+1)
	schemas[0] = t.inputSchema()
	for i, n := range st.Pipeline {
		schemas[i+1] = schemas[i]
		switch n := n.(type) {
		case *planner.ProjectNode:
			schemas[i+1] = n.Schema
		case *planner.WindowAssignNode:
			schemas[i+1] = n.Schema
		case *planner.AggregateNode:
			schemas[i+1] = n.Schema
		case *planner.ExchangeNode:
			if i != len(st.Pipeline)-1 {
				return fmt.Errorf("%w: stage %d: exchange is not the last node", ErrBadPlan, st.ID)
			}
		}
	}
	var next Operator
	switch {
	case t.shuffleTo != nil:
		n := st.Pipeline[len(st.Pipeline)-1].(*planner.ExchangeNode)
		topic := t.shuffleTo.Stream
		if env.OpenSink == nil {
			return fmt.Errorf("%w: stage %d writes shuffle topic %s but Env.OpenSink is nil", ErrMissingEnv, st.ID, topic)
		}
		sink, err := env.OpenSink(planner.SinkSpec{Stream: topic, Connector: "broker",
			Options: map[string]string{"topic": topic, "queues": strconv.Itoa(t.shuffleN)}})
		if err != nil {
			return &SinkError{Sink: topic, Err: err}
		}
		qs, ok := sink.(QueueSink)
		if !ok || qs.Queues() != t.shuffleN {
			sink.Close()
			return &SinkError{Sink: topic, Err: fmt.Errorf("shuffle topic needs a sink with %d addressable queues", t.shuffleN)}
		}
		x := &shuffleOut{ctx: ctx, sink: sink, qs: qs, keys: n.Keys, n: t.shuffleN, what: topic, wm: MinWatermark}
		if cols := t.shuffleTo.Columns; cols != nil && !identity(cols, len(schemas[len(st.Pipeline)])) {
			x.cols = cols
		}
		next = x
	case t.downstream != nil:
		n := st.Pipeline[len(st.Pipeline)-1].(*planner.ExchangeNode)
		q := env.ExchangeQueues
		if n.Queues > 0 {
			q = n.Queues
		}
		t.exch = &exchangeOp{ctx: ctx, keys: n.Keys, n: q, out: t.downstream, pool: make(chan *ownedBatch, 4*q)}
		if cols := t.downSrc.Columns; cols != nil && !identity(cols, len(schemas[len(st.Pipeline)])) {
			t.exch.cols = cols
		}
		next = t.exch
	case st.Sink.Stream == "" && st.Sink.Connector == "":
		if env.OnRow == nil {
			return fmt.Errorf("%w: stage %d has a client sink but Env.OnRow is nil", ErrMissingEnv, st.ID)
		}
		next = &callbackOp{fn: env.OnRow, cnt: &t.job.cnt}
	default:
		if env.OpenSink == nil || env.NewFormat == nil {
			return fmt.Errorf("%w: stage %d writes %s but Env.OpenSink or Env.NewFormat is nil", ErrMissingEnv, st.ID, sinkName(st.Sink))
		}
		op, err := openSinkOp(ctx, env, st.Sink, &t.job.cnt)
		if err != nil {
			return err
		}
		if ds, ok := op.sink.(DedupSink); ok && !env.AtLeastOnce && env.CheckpointInterval > 0 {
			op.eo = &outbox{job: t.job.name, stage: st.ID, store: env.Store, ds: ds}
			if err := op.eo.recover(ctx, op); err != nil {
				op.Close()
				return err
			}
		}
		t.sink = op
		next = op
	}
	t.ops = append(t.ops, next)
	for i := len(st.Pipeline) - 1; i >= 0; i-- {
		switch n := st.Pipeline[i].(type) {
		case *planner.FilterNode:
			next = &filterOp{pred: n.Pred, next: next}
		case *planner.ProjectNode:
			next = &projectOp{exprs: n.Exprs, next: next}
		case *planner.WindowAssignNode:
			if n.Window.Kind != planner.WindowTumble && n.Window.Kind != planner.WindowHop {
				return fmt.Errorf("%w: stage %d: window assignment needs TUMBLE or HOP", ErrBadPlan, st.ID)
			}
			next = &windowAssignOp{w: n.Window, next: next}
		case *planner.AggregateNode:
			if err := checkWindow(n.Window); err != nil {
				return fmt.Errorf("%w: stage %d: %v", ErrBadPlan, st.ID, err)
			}
			if t.late == nil {
				if spec, ok := sideSpec(*t.rootSrc, "late", schemas[i]); ok {
					if env.OpenSink == nil || env.NewFormat == nil {
						return fmt.Errorf("%w: late output %s needs Env.OpenSink and Env.NewFormat", ErrMissingEnv, spec.Stream)
					}
					op, err := openSinkOp(ctx, env, spec, &counters{})
					if err != nil {
						return err
					}
					t.late = &sideOutput{op: *op}
				}
			}
			id := "s" + strconv.Itoa(st.ID) + ".agg" + strconv.Itoa(i)
			t.opIDs = append(t.opIDs, id)
			next = newAggOp(n, t.job.name, id, env.Store, next, t.late, &t.job.cnt)
		case *planner.LimitNode:
			next = &limitOp{n: n.N, next: next}
		case *planner.ExchangeNode:
			// the stage's end, handled above
		default:
			return fmt.Errorf("%w: stage %d: unknown node %T", ErrBadPlan, st.ID, n)
		}
		if next != t.ops[len(t.ops)-1] {
			t.ops = append(t.ops, next)
		}
	}
	t.head = next
	t.wireBadRows()
	return nil
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

func openSinkOp(ctx context.Context, env *Env, spec planner.SinkSpec, cnt *counters) (*sinkOp, error) {
	name := spec.Options["format"]
	if name == "" {
		name = "json"
	}
	f, err := env.NewFormat(name, spec.Schema)
	if err != nil {
		return nil, &SinkError{Sink: sinkName(spec), Err: err}
	}
	s, err := env.OpenSink(spec)
	if err != nil {
		return nil, &SinkError{Sink: sinkName(spec), Err: err}
	}
	return &sinkOp{ctx: ctx, sink: s, format: f, keyCols: spec.KeyColumns, cnt: cnt, what: sinkName(spec)}, nil
}

func (t *task) openSource(ctx context.Context) error {
	env := &t.job.env
	spec := t.stage.Source
	if env.OpenSource == nil || env.NewFormat == nil {
		return fmt.Errorf("%w: stage %d reads %s but Env.OpenSource or Env.NewFormat is nil", ErrMissingEnv, t.stage.ID, spec.Stream)
	}
	t.delay = spec.WatermarkDelay
	t.idle = env.IdleTimeout
	if t.shuffleIn {
		// A queue's "event time" is the last upstream watermark read from it; the upstream
		// stage writes one to every queue, so queues never go idle.
		t.delay, t.idle = 0, 0
	}
	if s := spec.Options["idle_timeout"]; s != "" && !t.shuffleIn {
		d, err := time.ParseDuration(s)
		if err != nil {
			return &SourceError{Stream: spec.Stream, Err: fmt.Errorf("idle_timeout %q: %w", s, err)}
		}
		t.idle = d
	}
	if dspec, ok := sideSpec(spec, "dlq", spec.Schema); ok {
		if env.OpenSink == nil {
			return fmt.Errorf("%w: dead-letter output %s needs Env.OpenSink", ErrMissingEnv, dspec.Stream)
		}
		s, err := env.OpenSink(dspec)
		if err != nil {
			return &SinkError{Sink: sinkName(dspec), Err: err}
		}
		t.dlq = &rawOutput{sink: s, what: sinkName(dspec)}
	}
	src, err := env.OpenSource(spec)
	if err != nil {
		return &SourceError{Stream: spec.Stream, Err: err}
	}
	t.src = src
	t.bounded = src.Bounded()
	// Check the format now so a bad one fails Start, not a reader.
	if _, err := env.NewFormat(formatName(spec), spec.Schema); err != nil {
		return &SourceError{Stream: spec.Stream, Err: err}
	}
	splits, err := src.Splits(ctx)
	if err != nil {
		return &SourceError{Stream: spec.Stream, Err: err}
	}
	t.order = splits
	return nil
}

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

func formatName(spec planner.SourceSpec) string {
	if f := spec.Options["format"]; f != "" {
		return f
	}
	return "json"
}

// closeAll closes every operator and side output (sinks flush).
func (t *task) closeAll() error {
	var first error
	for _, op := range t.ops {
		if err := op.Close(); err != nil && first == nil {
			first = err
		}
	}
	if t.late != nil {
		if err := t.late.close(); err != nil && first == nil {
			first = err
		}
	}
	if t.dlq != nil {
		if err := t.dlq.close(); err != nil && first == nil {
			first = err
		}
	}
	for _, sp := range t.splits {
		if sp.cancel != nil {
			sp.cancel()
		}
	}
	if t.src != nil {
		if err := t.src.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (t *task) run(ctx context.Context) (err error) {
	defer func() {
		t.abortReaders()
		for _, sp := range t.splits {
			if sp.cancel != nil {
				sp.cancel()
			}
		}
		for _, sp := range t.splits {
			if sp.readerDone != nil {
				<-sp.readerDone
			}
		}
		// A checkpoint still committing lands (and its outbox is published) before the
		// sinks close.
		if cerr := t.awaitCommit(); err == nil || errors.Is(err, ErrLimitReached) && cerr != nil {
			err = cerr
		}
		if cerr := t.closeAll(); err == nil {
			err = cerr
		}
		if errors.Is(err, ErrLimitReached) {
			err = nil
			t.job.cancel()
		}
	}()
	defer func() {
		if errors.Is(err, ErrLimitReached) && t.sink != nil {
			t.sink.publishOnClose = true
		}
	}()
	if t.src != nil {
		for _, s := range t.order {
			if err := t.addSplit(ctx, s); err != nil {
				return err
			}
		}
	} else {
		for q := 0; q < t.queues; q++ {
			c := &Control{Kind: NewSplit, Split: strconv.Itoa(q)}
			if err := t.head.Control(c); err != nil {
				return err
			}
		}
	}
	if err := t.restoreWatermark(); err != nil {
		return err
	}
	t.startReaders()
	var reqs chan *request
	if t.isFirst {
		reqs = t.job.reqs
	} else if t.shuffleIn {
		reqs = t.reqs
	}
	var tick <-chan time.Time
	if t.src != nil {
		tk := time.NewTicker(t.job.env.Tick)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		if t.src != nil && t.bounded && t.allDone() {
			return t.finish(ctx)
		}
		select {
		case ev := <-t.in:
			fin, err := t.handle(ctx, ev)
			if err != nil || fin {
				return err
			}
		case r := <-reqs:
			if err := t.serve(ctx, r); err != nil {
				return err
			}
		case <-tick:
			if err := t.advance(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (t *task) allDone() bool {
	for _, sp := range t.splits {
		if !sp.done {
			return false
		}
	}
	return true
}

// finish ends a bounded stage: the watermark goes to +inf (every window fires), a final
// checkpoint is taken, and the downstream stage is told the input ended.
func (t *task) finish(ctx context.Context) error {
	t.publishStats()
	if err := t.setWatermark(MaxWatermark); err != nil {
		return err
	}
	if t.isFirst {
		if err := t.checkpoint(ctx, nil); err != nil {
			return err
		}
	}
	if t.downstream != nil {
		select {
		case t.downstream <- event{kind: evUpstreamEnd}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (t *task) handle(ctx context.Context, ev event) (finished bool, err error) {
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
				sp.next = b.lastOffset + 1
			}
			sp.lastActive = t.job.env.Now()
			sp.idle = false
			if t.shuffleIn {
				for _, u := range b.marks {
					sp.marks[u.split] = u.mark
				}
			} else {
				t.job.cnt.in.Add(int64(n))
			}
		}
		if n > 0 {
			err = t.head.Process(&b.Batch)
		}
		b.release()
		if err != nil {
			return false, err
		}
		if sp != nil {
			return false, t.advance()
		}
	case evEnd:
		ev.split.done = true
		return false, t.advance()
	case evError:
		return false, ev.err
	case evWatermark:
		return false, t.setWatermark(ev.wm)
	case evControl:
		if t.commits {
			if err := t.awaitCommit(); err != nil {
				if ev.req != nil {
					ev.req.done <- err
				}
				return false, err
			}
		}
		t.saveWatermark(ev.ctl.State)
		if err := t.head.Control(ev.ctl); err != nil {
			return false, err
		}
		if t.commits {
			return false, t.commit(ev.ctl, ev.offs, ev.req)
		}
	case evUpstreamEnd:
		if err := t.setWatermark(MaxWatermark); err != nil {
			return false, err
		}
		if t.downstream != nil {
			select {
			case t.downstream <- event{kind: evUpstreamEnd}:
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		return true, nil
	}
	return false, nil
}

// advance recomputes the stage watermark from its splits: the minimum over live splits of
// max event time - delay; idle splits do not count; when every split is idle the watermark
// moves with the wall clock from the last event seen; when every split is done (bounded) it
// is +inf (finish handles that).
func (t *task) advance() error {
	now := t.job.env.Now()
	wm := MaxWatermark
	live := false
	maxAll := MinWatermark
	var lastAct time.Time
	for _, sp := range t.splits {
		if sp.maxTs > maxAll {
			maxAll = sp.maxTs
		}
		if sp.lastActive.After(lastAct) {
			lastAct = sp.lastActive
		}
		if sp.done {
			continue
		}
		if t.idle > 0 && now.Sub(sp.lastActive) >= t.idle {
			sp.idle = true
			continue
		}
		sp.idle = false
		live = true
		wm = min(wm, splitWM(sp.maxTs, t.delay))
	}
	t.setAlignFloor()
	if !live {
		if maxAll == MinWatermark || t.allDone() {
			wm = MinWatermark // nothing known yet, or finish will take it to +inf
		} else {
			wm = splitWM(maxAll, t.delay) + now.Sub(lastAct).Milliseconds()
		}
	}
	t.publishStats()
	return t.setWatermark(wm)
}

// setAlignFloor recomputes the alignment floor after the splits' bookkeeping changed and
// wakes readers waiting for it. A live split whose event time is not known yet (no record
// read, none checkpointed) counts as being at the stage's watermark when the stage has one
// (restored from a checkpoint): it holds the stage watermark there, so the others must not
// run ahead of it either. It stops counting once it goes idle; when the stage cannot tell
// it idle (idle timeout off) or has no watermark yet, it is left out.
func (t *task) setAlignFloor() {
	floor := MaxWatermark
	unknown := false
	for _, sp := range t.splits {
		if sp.done || sp.idle {
			continue
		}
		if sp.maxTs == MinWatermark {
			unknown = true
			continue
		}
		floor = min(floor, sp.maxTs)
	}
	if unknown && t.wm != MinWatermark && t.wm < MaxWatermark-t.delay && (t.idle > 0 || t.shuffleIn) {
		floor = min(floor, t.wm+t.delay)
	}
	if t.alignFloor.Swap(floor) == floor {
		return
	}
	t.alignMu.Lock()
	close(t.alignCh)
	t.alignCh = make(chan struct{})
	t.alignMu.Unlock()
}

// waitAligned blocks a split reader while its split's max event time is more than the
// alignment window ahead of the slowest live split, so that replay after a restart (when
// every split has a backlog) reads the splits in step, as they were read live. Otherwise a
// split read far ahead would hold the watermark low and rows that are late in event-time
// order would be counted into windows.
func (t *task) waitAligned(ctx context.Context, maxTs int64) {
	bound := t.job.env.AlignmentWindow
	if bound < 0 || maxTs == MinWatermark {
		return
	}
	for {
		t.alignMu.Lock()
		ch := t.alignCh
		t.alignMu.Unlock()
		f := t.alignFloor.Load()
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

func splitWM(maxTs, delay int64) int64 {
	if maxTs == MinWatermark {
		return MinWatermark
	}
	return maxTs - delay
}

func (t *task) setWatermark(wm int64) error {
	if wm <= t.wm {
		return nil
	}
	t.wm = wm
	t.statsMu.Lock()
	t.statWM = wm
	t.statsMu.Unlock()
	return t.head.Watermark(wm)
}

func (t *task) publishStats() {
	stats := make([]SplitStats, 0, len(t.order))
	for _, name := range t.order {
		sp := t.splits[name]
		if sp == nil {
			continue
		}
		lag := int64(-1)
		if sp.lag != nil {
			lag = sp.lag()
		}
		stats = append(stats, SplitStats{Stage: t.stage.ID, Stream: t.stage.Source.Stream, Split: sp.name,
			Offset: sp.next, MaxEventTime: sp.maxTs, Watermark: splitWM(sp.maxTs, t.delay),
			Idle: sp.idle, Done: sp.done, Lag: lag})
	}
	t.statsMu.Lock()
	t.statSplits = stats
	t.statsMu.Unlock()
}

// serve handles a job request (first source task only).
func (t *task) serve(ctx context.Context, r *request) error {
	var err error
	switch r.kind {
	case reqCheckpoint:
		return t.checkpoint(ctx, r)
	case reqAddSplit:
		if _, ok := t.splits[r.split]; ok {
			err = fmt.Errorf("exec: split %s is already read", r.split)
		} else {
			t.order = append(t.order, r.split)
			if err = t.addSplit(ctx, r.split); err == nil {
				t.startReaders()
			}
		}
	case reqRemoveSplit:
		err = t.removeSplit(ctx, r.split)
	}
	r.done <- err
	return nil
}

// checkpoint sends a barrier through the pipeline with the source offsets.
func (t *task) checkpoint(ctx context.Context, r *request) error {
	if t.commits {
		if err := t.awaitCommit(); err != nil {
			if r != nil {
				r.done <- err
			}
			return err
		}
	}
	c := &Control{Kind: Checkpoint, Epoch: t.job.nextEpoch(), State: &state.Batch{}}
	offs := t.offsets(c.State)
	t.saveWatermark(c.State)
	if err := t.head.Control(c); err != nil {
		return err
	}
	if t.late != nil {
		if err := t.late.flush(); err != nil {
			return err
		}
	}
	if t.dlq != nil {
		if err := t.dlq.flush(); err != nil {
			return err
		}
	}
	if t.commits {
		return t.commit(c, offs, r)
	}
	// The exchange forwards the barrier; the last stage commits and answers r.
	select {
	case t.downstream <- event{kind: evControl, ctl: c, req: r, offs: offs}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// offsets records every split's next offset in b and returns them.
func (t *task) offsets(b *state.Batch) []SplitOffset {
	var offs []SplitOffset
	for _, name := range t.order {
		sp := t.splits[name]
		if sp == nil {
			continue
		}
		offs = append(offs, SplitOffset{Stream: t.stage.Source.Stream, Split: name, Offset: sp.next})
		b.Put(OffsetKey(t.job.name, t.stage.ID, name), binary.AppendVarint(binary.AppendVarint(nil, sp.next), sp.maxTs))
		if t.shuffleIn {
			b.Put(dedupKey(t.job.name, t.stage.ID, name), encodeMarks(sp.marks))
		}
	}
	return offs
}

// commit makes a checkpoint durable, then lets the sink publish what it covers, and answers
// r (if any) with the result. Both run on a goroutine of their own while the task goes on
// with the rows after the barrier: the batch c.State and the outbox rows it covers are no
// longer touched by the task. Everything that depends on the commit first waits for it
// (awaitCommit): the stage's next checkpoint (so commits land one at a time, in epoch order,
// and an epoch's outbox is published strictly after its commit and before the next
// checkpoint is taken), split changes (which read or write committed state) and the end of
// the task (before the sinks close). A failed commit fails the job at once.
func (t *task) commit(c *Control, offs []SplitOffset, r *request) error {
	if err := t.awaitCommit(); err != nil {
		if r != nil {
			r.done <- err
		}
		return err
	}
	done := make(chan error, 1)
	t.committing = done
	go func() {
		err := t.job.commit(c, offs)
		if err == nil && t.sink != nil {
			err = t.sink.committed(c.Epoch)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.job.fail(err)
		}
		if r != nil {
			r.done <- err
		}
		done <- err
	}()
	return nil
}

// awaitCommit waits for the checkpoint commit in flight, if any, and returns its error.
func (t *task) awaitCommit() error {
	if t.committing == nil {
		return nil
	}
	err := <-t.committing
	t.committing = nil
	return err
}

// watermarkKey is the store key of a stage's watermark at the last checkpoint.
func watermarkKey(job string, stage int) []byte {
	return state.SplitPrefix(nil, job, "wm", strconv.Itoa(stage))
}

// saveWatermark records the stage's watermark in a checkpoint: after a restart, rows that
// were late before it are late again instead of reopening windows that already fired.
func (t *task) saveWatermark(b *state.Batch) {
	if b != nil && t.wm != MinWatermark {
		b.Put(watermarkKey(t.job.name, t.stage.ID), binary.AppendVarint(nil, t.wm))
	}
}

// restoreWatermark sets the stage's watermark to the checkpointed one, before any row.
func (t *task) restoreWatermark() error {
	v, ok, err := t.job.env.Store.Get(watermarkKey(t.job.name, t.stage.ID))
	if err != nil || !ok {
		return err
	}
	wm, n := binary.Varint(v)
	if n <= 0 {
		return &StateError{Op: "watermark", Split: strconv.Itoa(t.stage.ID), Err: errors.New("corrupt watermark")}
	}
	return t.setWatermark(wm)
}

// addSplit sends NewSplit through the pipeline (state loads) and opens the split's reader
// at its checkpointed offset; startReaders starts it.
func (t *task) addSplit(ctx context.Context, name string) error {
	if err := t.awaitCommit(); err != nil {
		return err
	}
	env := &t.job.env
	spec := t.stage.Source
	next, maxTs := int64(0), MinWatermark
	if v, ok, err := env.Store.Get(OffsetKey(t.job.name, t.stage.ID, name)); err != nil {
		return &SourceError{Stream: spec.Stream, Split: name, Err: err}
	} else if ok {
		var n int
		next, n = binary.Varint(v)
		if n > 0 && n < len(v) {
			if m, k := binary.Varint(v[n:]); k > 0 {
				maxTs = m
			}
		}
	} else if env.InitialOffset != nil {
		next = env.InitialOffset(spec, name)
	}
	if err := t.head.Control(&Control{Kind: NewSplit, Split: name}); err != nil {
		return err
	}
	format, err := env.NewFormat(formatName(spec), spec.Schema)
	if err != nil {
		return &SourceError{Stream: spec.Stream, Split: name, Err: err}
	}
	r, err := t.src.Open(ctx, name, next)
	if err != nil {
		return &SourceError{Stream: spec.Stream, Split: name, Err: err}
	}
	rctx, cancel := context.WithCancel(ctx)
	sp := &splitIn{name: name, maxTs: maxTs, next: next, lastActive: env.Now(),
		cancel: cancel, readerDone: make(chan struct{}), pool: make(chan *ownedBatch, 4)}
	if l, ok := r.(interface{ Lag() int64 }); ok {
		sp.lag = l.Lag
	}
	// Until startReaders runs it, the reader is only open: the task's end closes it.
	sp.abort = func() { cancel(); r.Close(); close(sp.readerDone) }
	t.splits[name] = sp
	if t.shuffleIn {
		sp.marks = map[string]dedupMark{}
		if v, ok, err := env.Store.Get(dedupKey(t.job.name, t.stage.ID, name)); err != nil {
			return &SourceError{Stream: spec.Stream, Split: name, Err: err}
		} else if ok {
			m, err := decodeMarks(v)
			if err != nil {
				return &StateError{Op: "dedup", Split: name, Err: err}
			}
			sp.marks = m
		}
		own := make(map[string]dedupMark, len(sp.marks))
		for k, v := range sp.marks {
			own[k] = v
		}
		sp.start = func() { go t.readShuffle(rctx, sp, r, own) }
		return nil
	}
	sp.start = func() { go t.read(rctx, sp, r, format) }
	return nil
}

// startReaders starts the readers of the splits added since the last call, once the
// alignment floor covers every split of the stage: a reader started before a split added
// after it was known, or before the floor was computed at all, would read ahead unbounded
// while the stage watermark stays behind (restored, or held by a split not yet read), and
// the records late in event-time order that it reads meanwhile would be counted.
func (t *task) startReaders() {
	t.setAlignFloor()
	for _, name := range t.order {
		if sp := t.splits[name]; sp != nil && sp.start != nil {
			start := sp.start
			sp.start, sp.abort = nil, nil
			start()
		}
	}
}

// abortReaders closes the readers opened but never started (the task ends before
// startReaders).
func (t *task) abortReaders() {
	for _, sp := range t.splits {
		if sp.abort != nil {
			sp.abort()
			sp.start, sp.abort = nil, nil
		}
	}
}

// removeSplit stops a split's reader, processes what it already sent, then sends
// RemoveSplit (state written and dropped) and commits that state with the split's offset.
func (t *task) removeSplit(ctx context.Context, name string) error {
	sp := t.splits[name]
	if sp == nil {
		return fmt.Errorf("exec: split %s is not read", name)
	}
	if err := t.awaitCommit(); err != nil {
		return err
	}
	sp.cancel()
	for waiting := true; waiting; {
		select {
		case ev := <-t.in:
			if _, err := t.handle(ctx, ev); err != nil {
				return err
			}
		case <-sp.readerDone:
			waiting = false
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for n := len(t.in); n > 0; n-- {
		if _, err := t.handle(ctx, <-t.in); err != nil {
			return err
		}
	}
	c := &Control{Kind: RemoveSplit, Split: name, State: &state.Batch{}}
	c.State.Put(OffsetKey(t.job.name, t.stage.ID, name), binary.AppendVarint(binary.AppendVarint(nil, sp.next), sp.maxTs))
	if t.shuffleIn {
		c.State.Put(dedupKey(t.job.name, t.stage.ID, name), encodeMarks(sp.marks))
	}
	if err := t.head.Control(c); err != nil {
		return err
	}
	delete(t.splits, name)
	for i, s := range t.order {
		if s == name {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
	info := &CheckpointInfo{Job: t.job.name, Offsets: []SplitOffset{{Stream: t.stage.Source.Stream, Split: name, Offset: sp.next}}, State: c.State}
	if err := t.job.env.Commit(info); err != nil {
		return fmt.Errorf("job %s: commit state of removed split %s: %w", t.job.name, name, err)
	}
	return t.advance()
}

// read is a split reader: it reads messages, decodes them into the split's pooled batches
// and sends them to the task. Bad records are counted, reported with their offset and sent
// to the dead-letter output; they never stop the job.
func (t *task) read(ctx context.Context, sp *splitIn, r connectors.SplitReader, format connectors.Format) {
	defer close(sp.readerDone)
	defer r.Close()
	spec := t.stage.Source
	env := &t.job.env
	msgs := make([]connectors.Message, 0, env.BatchSize)
	full := make(sql.Row, 0, len(spec.Schema))
	line := spec.Connector == "file"
	readMax := MinWatermark
	send := func(ev event) bool {
		select {
		case t.in <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		var err error
		msgs, err = r.Read(ctx, msgs[:0], env.BatchSize)
		if len(msgs) > 0 {
			var nb int64
			for i := range msgs {
				nb += int64(len(msgs[i].Body))
			}
			t.job.cnt.bytesIn.Add(nb)
			var ob *ownedBatch
			select {
			case ob = <-sp.pool:
			default:
				ob = &ownedBatch{pool: sp.pool}
			}
			ob.reset()
			ob.Split = sp.name
			for i := range msgs {
				m := &msgs[i]
				var derr error
				full, derr = format.Decode(m.Body, full[:0])
				ts := int64(0)
				if derr == nil {
					ts, derr = t.eventTime(full)
				}
				if derr != nil {
					rerr := &RecordError{Stream: spec.Stream, Split: sp.name, Offset: m.Offset, Line: line, Err: derr}
					t.job.recordBad(rerr)
					if t.dlq != nil {
						if werr := t.dlq.write(ctx, *m); werr != nil {
							send(event{kind: evError, err: werr})
							return
						}
					}
					continue
				}
				if t.shuffleTo != nil {
					ob.offs = append(ob.offs, m.Offset)
				}
				if spec.Columns == nil {
					ob.vals = append(ob.vals, full...)
				} else {
					for _, c := range spec.Columns {
						ob.vals = append(ob.vals, full[c])
					}
				}
				ob.ends = append(ob.ends, len(ob.vals))
				if ts > ob.maxTs {
					ob.maxTs = ts
				}
			}
			ob.lastOffset = msgs[len(msgs)-1].Offset
			if spec.EventTime < 0 {
				ob.maxTs = env.Now().UnixMilli()
			}
			ob.cut()
			if t.shuffleTo != nil {
				ob.Offsets = ob.offs
			}
			sentMax := ob.maxTs
			if !send(event{kind: evData, split: sp, data: ob}) {
				return
			}
			if spec.EventTime >= 0 {
				readMax = max(readMax, sentMax)
				t.waitAligned(ctx, readMax)
			}
		}
		if errors.Is(err, connectors.ErrEndOfSplit) {
			send(event{kind: evEnd, split: sp})
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				send(event{kind: evError, err: &SourceError{Stream: spec.Stream, Split: sp.name, Err: err}})
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// eventTime returns a decoded row's event time, or an error when it has none.
func (t *task) eventTime(full sql.Row) (int64, error) {
	spec := t.stage.Source
	if spec.EventTime < 0 {
		return 0, nil
	}
	col := spec.EventTime
	if spec.Columns != nil {
		col = spec.Columns[col]
	}
	if col >= len(full) {
		return 0, &connectors.DecodeError{Reason: "record has no event-time column"}
	}
	v := full[col]
	switch v.K {
	case sql.KindTimestamp, sql.KindBigInt, sql.KindInt:
		return v.I, nil
	case sql.KindNull:
		return 0, &connectors.DecodeError{Field: spec.Schema[col].Name, Reason: "missing event time"}
	}
	return 0, &connectors.DecodeError{Field: spec.Schema[col].Name, Reason: "event time is not a TIMESTAMP"}
}

// exchangeOp ends a stage: each row goes to queue hash(keys) mod n of the downstream
// stage; watermarks and checkpoint barriers go to every queue (a single in-process channel
// carries them in order). NewSplit/RemoveSplit of source splits stop here: the downstream
// stage's splits are its queues.
type exchangeOp struct {
	ctx  context.Context
	keys []planner.Evaluator
	n    int
	cols []int // columns the downstream stage reads, nil for all
	out  chan event
	pool chan *ownedBatch
	bufs []*ownedBatch
}

func (x *exchangeOp) Process(b *Batch) error {
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
			select {
			case ob = <-x.pool:
			default:
				ob = &ownedBatch{pool: x.pool}
			}
			ob.reset()
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
	}
	for q, ob := range x.bufs {
		if ob == nil {
			continue
		}
		x.bufs[q] = nil
		ob.cut()
		if err := x.send(event{kind: evData, data: ob}); err != nil {
			return err
		}
	}
	return nil
}

func (x *exchangeOp) send(ev event) error {
	select {
	case x.out <- ev:
		return nil
	case <-x.ctx.Done():
		return x.ctx.Err()
	}
}

func (x *exchangeOp) Watermark(wm int64) error { return x.send(event{kind: evWatermark, wm: wm}) }

// Control: barriers are forwarded by the task (with the request and offsets), so nothing
// happens here.
func (x *exchangeOp) Control(*Control) error { return nil }
func (x *exchangeOp) Close() error           { return nil }

// readShuffle reads one queue of an upstream stage's shuffle topic: rows whose id the
// stage has already applied are dropped; watermark messages become the queue's event time.
func (t *task) readShuffle(ctx context.Context, sp *splitIn, r connectors.SplitReader, marks map[string]dedupMark) {
	defer close(sp.readerDone)
	defer r.Close()
	spec := t.stage.Source
	env := &t.job.env
	msgs := make([]connectors.Message, 0, env.BatchSize)
	var rows []shuffleRow
	send := func(ev event) bool {
		select {
		case t.in <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	readMax := MinWatermark
	var ob *ownedBatch
	newBatch := func() {
		select {
		case ob = <-sp.pool:
		default:
			ob = &ownedBatch{pool: sp.pool}
		}
		ob.reset()
		ob.Split = sp.name
	}
	for {
		var err error
		msgs, err = r.Read(ctx, msgs[:0], env.BatchSize)
		if len(msgs) > 0 {
			newBatch()
			for i := range msgs {
				m := &msgs[i]
				isWM, wm, split, rs, derr := decodeShuffle(m.Body, rows)
				rows = rs
				if derr != nil {
					t.job.recordBad(&RecordError{Stream: spec.Stream, Split: sp.name, Offset: m.Offset, Err: derr})
					continue
				}
				if isWM {
					// The rows before a watermark are processed before it applies, the rows
					// after it after: the batch ends here, and the reader stays aligned.
					ob.maxTs = max(ob.maxTs, wm)
					ob.lastOffset = m.Offset
					ob.cut()
					if !send(event{kind: evData, split: sp, data: ob}) {
						return
					}
					readMax = max(readMax, wm)
					t.waitAligned(ctx, readMax)
					newBatch()
					continue
				}
				mk, seen := marks[split]
				kept := false
				for _, sr := range rows {
					if seen && mk.covers(sr.off, sr.seq) {
						continue
					}
					mk, seen, kept = dedupMark{sr.off, sr.seq}, true, true
					ob.vals = append(ob.vals, sr.row...)
					ob.ends = append(ob.ends, len(ob.vals))
				}
				if kept {
					marks[split] = mk
					ob.marks = append(ob.marks, markUpd{split, mk})
				}
			}
			ob.lastOffset = msgs[len(msgs)-1].Offset
			ob.cut()
			if !send(event{kind: evData, split: sp, data: ob}) {
				return
			}
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				send(event{kind: evError, err: &SourceError{Stream: spec.Stream, Split: sp.name, Err: err}})
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}
