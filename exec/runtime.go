package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Env is everything a job needs from its surroundings. Only the openers the plan uses are
// required: OpenSource for stream sources, NewFormat to decode and encode records, OpenSink
// for stream sinks and side outputs (late/dead-letter), OnRow for push queries.
type Env struct {
	OpenSource func(planner.SourceSpec) (connectors.Source, error)
	NewFormat  func(name string, schema sql.Schema) (connectors.Format, error)
	OpenSink   func(planner.SinkSpec) (connectors.Sink, error)
	// OpenLookup opens the table of a lookup join (planner.LookupJoinNode).
	OpenLookup func(connectors.LookupSpec) (connectors.LookupTable, error)
	// OnRow receives the rows of a stage whose SinkSpec.Stream is "" (push queries). The
	// row is valid only during the call; an error stops the job with that error.
	OnRow func(sql.Row) error
	// FailOnRowError: a row that fails inside the pipeline (rowerrors.go) fails the job
	// with its RowError instead of going to the bad-record path — a one-off query (a push
	// or pull query, a query over files) fails with its first row error, as PostgreSQL's
	// statement does, rather than answering without the row.
	FailOnRowError bool
	// Store holds operator state and source offsets (default: a fresh in-memory store).
	Store state.Store
	// AggCacheGroups bounds the groups an aggregation without a window keeps in memory (its
	// splits together) when Store is not the in-memory store: the others stay in the store and are
	// read back when a row needs them (agg_cache.go; docs/operations.md). 0 is
	// DefaultAggCacheGroups; negative keeps every group in memory. It bounds the
	// partitions of a Top-N without a window too (0: DefaultAggCacheGroups / N).
	AggCacheGroups int
	// JoinCacheKeys bounds the join keys a regular join without a state TTL keeps in memory
	// (its splits together) when Store is not the in-memory store: the others stay in the
	// store and are read back when a row needs them (join_cache.go; docs/operations.md). 0
	// is DefaultJoinCacheKeys; negative keeps every key in memory.
	JoinCacheKeys int
	// Commit makes a checkpoint durable: the state delta and the source offsets in one
	// atomic step. Default: Store.Write(cp.State) (the offsets are in cp.State too). It is
	// also called, with Epoch 0, for the final state of a split given up by RemoveSplit.
	Commit func(cp *CheckpointInfo) error
	// InitialOffset is where a split with no checkpointed offset starts (default 0: from
	// the beginning).
	InitialOffset func(src planner.SourceSpec, split string) int64
	// CheckpointInterval triggers checkpoints periodically (default 10s; negative: only on
	// request and when a bounded job finishes). Between checkpoints operators remember what
	// changed, so this also bounds that bookkeeping.
	CheckpointInterval time.Duration
	// MinCheckpointInterval, when positive and below CheckpointInterval, makes the interval
	// adaptive: each checkpoint starts CheckpointCostFactor times as long after the previous
	// one as committing that one cost (writing its batch, over every commit group; not
	// publishing its outbox, which the rows cost however often the job checkpoints), clamped
	// to [MinCheckpointInterval, CheckpointInterval]. A job
	// whose checkpoints are cheap (little state changes: a filter) thus checkpoints, and
	// publishes exactly-once output, every few milliseconds, while one with a large state
	// delta spends about a tenth of its time committing at most.
	MinCheckpointInterval time.Duration
	// LightCheckpointInterval, when positive and below MinCheckpointInterval, is the
	// adaptive interval's floor after light checkpoints: the last two looks at what the
	// commits wrote found at most LightCheckpointBytes each (state, positions and outbox
	// together; checkpointFloor). A job with little to
	// record per checkpoint (a filter at a low rate) then publishes its exactly-once output
	// sooner, while a busy one keeps MinCheckpointInterval, where checkpointing more often
	// costs throughput (docs/guarantees.md, "Checkpoints").
	LightCheckpointInterval time.Duration
	// Runners, when set with an adaptive interval, is how many processes run units of the
	// job (cluster mode), asked after every checkpoint. They share one budget of commits to
	// the shared store: each waits at least that many times MinCheckpointInterval (within
	// CheckpointInterval) and that many times CheckpointCostFactor times what its commits
	// cost, so the job's instances together commit about as often, and spend about the
	// share of one process's time on commits, as one instance running all of the job would
	// (checkpointFloors; docs/benchmarks.md, "Scale-out").
	Runners func() int
	// AtLeastOnce turns off exactly-once output: rows go to the sink as they are produced
	// instead of after the checkpoint that covers them (see DedupSink). Output is always
	// at-least-once when CheckpointInterval is negative.
	AtLeastOnce bool
	// AlignmentWindow bounds how far (in event time) a split reader may read ahead of the
	// slowest live split of its stage (default 10s; negative: no bound).
	AlignmentWindow time.Duration
	// ShuffleTopics makes exchanges behind a broker stream go through shuffle topics
	// ("<job>-<stage>-shuffle", opened with OpenSource/OpenSink as connector "broker") instead
	// of in-process channels; each stage then checkpoints on its own (see shuffle.go).
	ShuffleTopics bool
	// OwnsUnit, when set, says which units (stage, split) the job runs at start: the
	// others are left to other instances (each stage reading streams or shuffle topics
	// runs only the splits it is given; AddUnit and RemoveUnit change them later). It needs
	// every exchange to go through a shuffle topic (Divisible). Nil: every unit.
	OwnsUnit func(Unit) bool
	// ExchangeQueues is the number of queues of an exchange that does not say (default
	// DefaultExchangeQueues).
	ExchangeQueues int
	// BatchSize is the number of messages read per batch (default 512).
	BatchSize int
	// IdleTimeout applies to streams without an idle_timeout option (default 10s; a
	// negative value disables idleness).
	IdleTimeout time.Duration
	// Tick is how often idleness and wall-clock watermarks are checked (default 100ms).
	Tick time.Duration
	// Now is the wall clock (default time.Now); tests replace it.
	Now func() time.Time
	// Logf receives bad-record and other notices (default: discarded).
	Logf func(format string, args ...any)
	// Instance names the process running the job where several run parts of it (a
	// cluster): it is part of names that must differ between them, such as the producer
	// group of a transactional sink (TxGroup).
	Instance string
}

// DefaultExchangeQueues is the number of queues of an exchange when neither the plan nor
// Env.ExchangeQueues says.
const DefaultExchangeQueues = 4

func (e *Env) defaults() {
	if e.Store == nil {
		e.Store = state.NewMemory()
	}
	if e.Commit == nil {
		st := e.Store
		e.Commit = func(cp *CheckpointInfo) error { return st.Write(cp.State) }
	}
	if e.CheckpointInterval == 0 {
		e.CheckpointInterval = 10 * time.Second
	}
	if e.AlignmentWindow == 0 {
		e.AlignmentWindow = 10 * time.Second
	}
	if e.ExchangeQueues <= 0 {
		e.ExchangeQueues = DefaultExchangeQueues
	}
	if e.BatchSize <= 0 {
		e.BatchSize = 512
	}
	if e.IdleTimeout == 0 {
		e.IdleTimeout = 10 * time.Second
	}
	if e.Tick <= 0 {
		e.Tick = 100 * time.Millisecond
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.Logf == nil {
		e.Logf = func(string, ...any) {}
	}
}

// CheckpointInfo is one checkpoint of a job: its epoch, where each source split resumes,
// and the state delta (which already contains the offsets under OffsetKey keys).
type CheckpointInfo struct {
	Job     string
	Epoch   int64
	Offsets []SplitOffset
	State   *state.Batch
}

// SplitOffset is the first offset of a split not yet covered by a checkpoint: what the
// split of stage Stage reads of Stream (a source topic, or a shuffle topic).
type SplitOffset struct {
	Stage  int
	Stream string
	Split  string
	Offset int64
}

// JobStats is a snapshot of a job's counters.
type JobStats struct {
	RecordsIn  int64 // records read and decoded
	RecordsOut int64 // rows written to sinks (or handed to OnRow)
	BytesIn    int64 // message bodies read from the job's sources
	BytesOut   int64 // message bodies written to the job's sinks
	Bad        int64 // records that failed to decode
	Late       int64 // rows that arrived after all their windows had fired
	// Watermark of the job's last stage (MinWatermark before any is known).
	Watermark int64
	// StateRows is the rows the job's joins hold in their state (both sides).
	StateRows int64
	Splits    []SplitStats
	// BadErrors are the most recent bad-record errors (at most 16), oldest first.
	BadErrors []string
	Epoch     int64 // last committed checkpoint, 0 if none
	Finished  bool
	// Lookups are the counters of the job's lookup joins (exec/lookup.go).
	Lookups []LookupStats
}

// SplitStats describes one split of a stage: a source split, the queue of a shuffle topic
// (one per input of the stage) or the queue of an in-process edge (which reads no topic:
// Stream "", no Reads).
type SplitStats struct {
	Stage  int
	Stream string // what the split's first reader reads ("" for an in-process edge)
	Split  string
	Offset int64 // next offset the first reader reads
	// Reads are what the split reads, one per reader: a source split's stream, or each
	// input's shuffle topic. Within a stage (Stream, Split) of a read is unique.
	Reads        []SplitRead
	MaxEventTime int64 // MinWatermark before the first record
	Watermark    int64 // MaxEventTime - delay
	Idle, Done   bool
	// Lag is how many messages the split is behind its end, when the reader can tell
	// (it implements interface{ Lag() int64 }), else -1.
	Lag int64
}

// SplitRead is where one reader of a split is: the stream or shuffle topic of the stage's
// input Input, the next offset it reads and, when its reader can tell, its lag (else -1).
type SplitRead struct {
	Input  int
	Stream string
	Offset int64
	Lag    int64
}

type counters struct {
	in, out, bad, late atomic.Int64
	// bytesIn counts message bodies read from sources (bad records included); bytesOut the
	// bodies written to sinks.
	bytesIn, bytesOut atomic.Int64
	// stagedOut and stagedBytes are the rows (and bodies) of exactly-once sinks staged for
	// the epoch being committed and published only after it: a checkpoint's counters
	// include them (appendCounters), since a restart does not count them again.
	stagedOut, stagedBytes atomic.Int64
}

// Job is a running continuous query.
type Job struct {
	name string
	env  Env
	// commitNanos is the time commits took since the adaptive checkpoint loop last looked
	// (commit groups add to it, the loop swaps it).
	commitNanos atomic.Int64
	// commitBytes is what those commits wrote (Batch.Size), for the light interval.
	commitBytes atomic.Int64
	// kick asks the checkpoint loop for a checkpoint now (an outbox reached its bound).
	kick chan struct{}
	// pressed counts the operators whose changed state, which may not leave memory until
	// a checkpoint holding it commits, has outgrown their cache several times over
	// (press): while it is above zero the root stages take no input, only requests, so
	// the checkpoint that lets the state go comes before more of it (agg_cache.go).
	pressed atomic.Int32
	plan    *planner.Physical
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stages  []*stage
	roots   []*stage // stages that take barriers when asked: they read streams or shuffle topics
	first   *stage   // receives AddSplit / RemoveSplit
	groups  []*commitGroup
	cnt     counters
	// cntGroup is the commit group whose checkpoints keep the counters (CountersKey): one
	// group, so they are written in epoch order; nil when they are not kept.
	cntGroup *commitGroup
	done     chan struct{}

	// inject is held while a checkpoint numbers its barrier and hands it to every root
	// stage, so that concurrent checkpoints (the periodic one, the last one of a bounded
	// job, one asked for) reach every root in the same order: a stage aligning barriers
	// of several inputs then sees them in that order on each. The end of a bounded job is
	// handed to the roots under it too, and ended is set then: a barrier handed to some
	// roots before their end and to others after would never be aligned, and the roots
	// that took it would wait for its commit for ever.
	inject sync.Mutex
	ended  bool
	// alignCh is closed (and replaced) when a root stage's alignment floor moves.
	alignMu   sync.Mutex
	alignCh   chan struct{}
	mu        sync.Mutex // guards the fields below
	err       error
	stopped   bool
	finished  bool
	badErrors []string
	// the rate limit of bad-record log lines (recordBad)
	badLogStart time.Time
	badLogged   int
	badSkipped  int64
	epoch       int64
	seq         int64 // last epoch handed out
	rootsLeft   int   // root stages whose input is not exhausted yet
	lookups     []stageLookup

	// early asks the adaptive checkpoint loop for an early checkpoint: a watermark released
	// rows into an outbox (cpearly.go).
	early chan struct{}
	// activity counts what a checkpoint would record (cpidle.go): the checkpoint loop
	// skips a checkpoint when it did not move since the last one, and while quiet it waits
	// for wake.
	activity atomic.Uint64
	quiet    atomic.Bool
	wake     chan struct{}
	// cpTimes records the phases of the job's checkpoints (cptimes.go).
	cpTimes cpTimes
}

type stageLookup struct {
	stage int
	c     *lookupCounters
}

// addLookup registers the counters of a lookup join of stage (Stats reports them).
func (j *Job) addLookup(stage int, c *lookupCounters) {
	j.mu.Lock()
	j.lookups = append(j.lookups, stageLookup{stage, c})
	j.mu.Unlock()
}

type reqKind uint8

const (
	reqCheckpoint reqKind = iota
	reqAddSplit
	reqRemoveSplit
	reqEnd // the job's last checkpoint is committed: forward the end of input and stop
)

type request struct {
	kind  reqKind
	split string
	epoch int64
	done  chan error // receives exactly one result
}

// Start builds the operators of every stage of plan and starts running them. The job runs
// until its bounded sources are exhausted (then Wait returns nil), a LIMIT is reached, Stop
// is called, ctx is done, or an error occurs (Wait returns it).
func Start(ctx context.Context, job string, plan *planner.Physical, env Env) (*Job, error) {
	env.defaults()
	if plan == nil || len(plan.Stages) == 0 {
		return nil, fmt.Errorf("%w: no stages", ErrBadPlan)
	}
	jctx, cancel := context.WithCancel(ctx)
	j := &Job{name: job, env: env, plan: plan, cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1), early: make(chan struct{}, 1), wake: make(chan struct{}, 1), alignCh: make(chan struct{})}
	if err := j.build(jctx); err != nil {
		cancel()
		for _, st := range j.stages {
			st.closeAll()
		}
		return nil, err
	}
	ep, err := loadEpoch(env.Store, job)
	if err != nil {
		return nil, err
	}
	j.epoch = ep
	if env.OwnsUnit == nil {
		// The counters go on from the last checkpoint (docs/operations.md, "Job
		// counters"); an instance running part of a job counts its part from zero.
		if err := loadCounters(env.Store, job, &j.cnt); err != nil {
			cancel()
			for _, st := range j.stages {
				st.closeAll()
			}
			return nil, err
		}
		j.cntGroup = j.stages[len(j.stages)-1].group
	}
	j.rootsLeft = len(j.roots)
	for _, st := range j.stages {
		j.wg.Add(1)
		go func(st *stage) {
			defer j.wg.Done()
			// A panic in an operator fails this job, not the process.
			defer func() {
				if p := recover(); p != nil {
					j.fail(&PanicError{Stage: st.plan.ID, Value: p, Stack: debug.Stack()})
				}
			}()
			if err := st.run(jctx); err != nil && !errors.Is(err, context.Canceled) {
				j.fail(err)
			}
		}(st)
	}
	go func() {
		j.wg.Wait()
		for _, g := range j.groups {
			g.idle()
		}
		j.mu.Lock()
		j.finished = true
		j.mu.Unlock()
		cancel()
		close(j.done)
	}()
	if env.CheckpointInterval > 0 {
		go j.checkpointLoop(jctx)
	}
	return j, nil
}

// PanicError fails a job whose stage panicked: Error is one line, Stack says where, for
// the log.
type PanicError struct {
	Stage int
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("stage %d panicked: %v", e.Stage, e.Value) }

// build makes a stage per planner stage, wires edges (in-process or shuffle topics), the
// stages' outputs and commit groups, and opens the inputs.
func (j *Job) build(ctx context.Context) error {
	env := &j.env
	byID := map[int]*stage{}
	for _, ps := range j.plan.Stages {
		if byID[ps.ID] != nil {
			return fmt.Errorf("%w: two stages %d", ErrBadPlan, ps.ID)
		}
		if len(ps.Inputs) == 0 {
			return fmt.Errorf("%w: stage %d has no input", ErrBadPlan, ps.ID)
		}
		st := newStage(j, ps)
		byID[ps.ID] = st
		j.stages = append(j.stages, st)
		st.inputs = make([]input, len(ps.Inputs))
	}
	// downstream[up] is the stage (and its input index) an exchange of stage up feeds.
	type edge struct {
		st *stage
		in int
	}
	downstream := map[int]edge{}
	for _, st := range j.stages {
		streams := 0
		for i, src := range st.plan.Inputs {
			if src.FromStage < 0 {
				streams++
				continue
			}
			up := byID[src.FromStage]
			if up == nil || up.plan.Exchange == nil || src.FromStage >= st.plan.ID && j.index(up) >= j.index(st) {
				return fmt.Errorf("%w: stage %d reads stage %d, which has no exchange before it", ErrBadPlan, st.plan.ID, src.FromStage)
			}
			if _, dup := downstream[up.plan.ID]; dup {
				return fmt.Errorf("%w: stage %d feeds more than one stage", ErrBadPlan, up.plan.ID)
			}
			downstream[up.plan.ID] = edge{st, i}
		}
		if streams != 0 && streams != len(st.plan.Inputs) {
			return fmt.Errorf("%w: stage %d reads streams and upstream stages together", ErrBadPlan, st.plan.ID)
		}
	}
	for _, st := range j.stages {
		if st.plan.Exchange != nil {
			if _, ok := downstream[st.plan.ID]; !ok {
				return fmt.Errorf("%w: stage %d has an exchange no stage reads", ErrBadPlan, st.plan.ID)
			}
		}
	}
	// Edges through shuffle topics: see Env.ShuffleTopics.
	if env.OwnsUnit != nil {
		if err := Divisible(j.plan, *env); err != nil {
			return err
		}
	}
	for _, st := range j.stages {
		e, ok := downstream[st.plan.ID]
		if !ok || !j.shuffleOut(st.plan.ID) {
			continue
		}
		down := e.st
		src := &down.plan.Inputs[e.in]
		q := exchangeQueues(st.plan.Exchange, env.ExchangeQueues)
		src.Options.Topic, src.Options.Queues = src.Stream, q
		down.shuffleIn = true
	}
	for _, st := range j.stages {
		if st.shuffleIn {
			st.floorLead = j.watermarkLead(st, byID, 0)
		}
	}
	// Commit groups: connected components over in-process edges.
	groupOf := map[*stage]*commitGroup{}
	var assign func(st *stage, g *commitGroup)
	assign = func(st *stage, g *commitGroup) {
		if groupOf[st] != nil {
			return
		}
		groupOf[st] = g
		g.stages++
		if e, ok := downstream[st.plan.ID]; ok && !e.st.shuffleIn {
			assign(e.st, g)
		}
		for _, src := range st.plan.Inputs {
			if src.FromStage >= 0 && !st.shuffleIn {
				assign(byID[src.FromStage], g)
			}
		}
	}
	for _, st := range j.stages {
		if groupOf[st] == nil {
			g := newCommitGroup(j)
			j.groups = append(j.groups, g)
			assign(st, g)
		}
		st.group = groupOf[st]
	}
	first := true
	for _, st := range j.stages {
		if err := st.buildOps(ctx); err != nil {
			return err
		}
		if err := j.buildOutput(ctx, st, downstream[st.plan.ID].st, downstream[st.plan.ID].in); err != nil {
			return err
		}
		if st.sink != nil && (st.sink.eo != nil || st.sink.tx != nil) {
			st.group.sinks = append(st.group.sinks, st.sink)
		}
		switch {
		case st.shuffleIn:
			for i, src := range st.plan.Inputs {
				s, err := env.OpenSource(src)
				if err != nil {
					return &SourceError{Stream: src.Stream, Err: err}
				}
				st.inputs[i] = &shuffleInput{spec: src, src: s}
			}
			st.root, st.reqs = true, make(chan *request)
		case st.plan.Inputs[0].FromStage >= 0:
			st.edges = len(st.plan.Inputs)
		default:
			for i, src := range st.plan.Inputs {
				in, err := openSourceInput(ctx, env, src)
				if err != nil {
					return err
				}
				st.inputs[i] = in
			}
			st.root, st.reqs = true, make(chan *request)
			st.first = first
			if first {
				j.first = st
			}
			first = false
		}
		if st.root {
			j.roots = append(j.roots, st)
		}
		if st.sink != nil && st.sink.recover != nil {
			rec := st.sink.recover
			st.sink.recover = nil
			if err := rec(); err != nil {
				return err
			}
		}
	}
	return nil
}

// stageByID returns the job's stage with the given id, or nil.
func (j *Job) stageByID(id int) *stage {
	for _, s := range j.stages {
		if s.plan.ID == id {
			return s
		}
	}
	return nil
}

func (j *Job) index(st *stage) int {
	for i, s := range j.stages {
		if s == st {
			return i
		}
	}
	return -1
}

// shuffleOut reports whether the exchange of stage id writes a shuffle topic: with
// Env.ShuffleTopics, when every stage feeding the downstream stage can (shuffleEdges).
func (j *Job) shuffleOut(id int) bool {
	if !j.env.ShuffleTopics {
		return false
	}
	for _, down := range j.plan.Stages {
		for _, src := range down.Inputs {
			if src.FromStage == id {
				return shuffleEdges(j.plan, down)
			}
		}
	}
	return false
}

// shuffleEdges reports whether the exchanges feeding stage down can all go through shuffle
// topics: every upstream stage reads topics only (the broker's or Kafka's: a split read
// again from an offset gives the same records in the same order) and has no stateful
// operator (its rows keep their source offsets, which give them their ids), and every
// input of down is such an edge on the broker.
func shuffleEdges(plan *planner.Physical, down *planner.Stage) bool {
	for _, in := range down.Inputs {
		if in.FromStage < 0 || in.Connector != "broker" {
			return false
		}
		up := plan.Stage(in.FromStage)
		if up == nil || up.Exchange == nil {
			return false
		}
		for _, src := range up.Inputs {
			if src.FromStage >= 0 || src.Connector != "broker" && src.Connector != "kafka" {
				return false
			}
		}
		for _, op := range up.Ops {
			switch n := op.Node.(type) {
			case *planner.FilterNode, *planner.ProjectNode, *planner.WindowAssignNode, *planner.UnionNode:
			case *planner.TableFuncNode:
				// Its rows share their input row's offset and are told apart by their order,
				// which a replay must give again.
				if !n.Deterministic {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

// ErrNotDivisible says a plan cannot be divided into units owned by different instances:
// one of its exchanges stays in process.
var ErrNotDivisible = errors.New("exec: the plan has an exchange that cannot go through a shuffle topic")

// Divisible reports (nil) whether every unit of plan can run apart from the others, on any
// instance: with env's ShuffleTopics every exchange goes through a shuffle topic, so every
// stage reads streams or shuffle topics and checkpoints on its own. Otherwise the error
// names the stage whose input stays in process.
func Divisible(plan *planner.Physical, env Env) error {
	for _, st := range plan.Stages {
		if len(st.Inputs) == 0 || st.Inputs[0].FromStage < 0 {
			continue
		}
		if !env.ShuffleTopics || !shuffleEdges(plan, st) {
			return fmt.Errorf("%w: stage %d reads its input in process", ErrNotDivisible, st.ID)
		}
	}
	return nil
}

// buildOutput opens the stage's output: the exchange to down's input in, or its sink.
func (j *Job) buildOutput(ctx context.Context, st *stage, down *stage, in int) error {
	env := &j.env
	ps := st.plan
	outWidth := len(st.portSchema(ps.Out, st.opIn))
	switch {
	case ps.Exchange != nil && down.shuffleIn:
		src := down.plan.Inputs[in]
		topic := src.Stream
		q := exchangeQueues(ps.Exchange, env.ExchangeQueues)
		if env.OpenSink == nil {
			return fmt.Errorf("%w: stage %d writes shuffle topic %s but Env.OpenSink is nil", ErrMissingEnv, ps.ID, topic)
		}
		sink, err := env.OpenSink(planner.SinkSpec{Stream: topic, Connector: "broker",
			Options: connectors.StreamOptions{Connector: "broker", Format: "json", Topic: topic, Queues: q}})
		if err != nil {
			return &SinkError{Sink: topic, Err: err}
		}
		qs, ok := sink.(QueueSink)
		if !ok || qs.Queues() != q {
			sink.Close()
			return &SinkError{Sink: topic, Err: fmt.Errorf("shuffle topic needs a sink with %d addressable queues", q)}
		}
		x := &shuffleOut{ctx: ctx, sink: sink, qs: qs, keys: ps.Exchange.Keys, n: q, what: topic, now: env.Now}
		if len(ps.Inputs) > 0 && (ps.Inputs[0].FromStage < 0 || st.shuffleIn) {
			// A stage with a tick (it reads streams or shuffle topics) advances at least
			// every tick while a split is active: a held watermark rise goes out by then.
			x.gap = env.Tick
		}
		if cols := src.Columns; cols != nil && !identity(cols, outWidth) {
			x.cols = cols
		}
		st.out = x
	case ps.Exchange != nil:
		src := down.plan.Inputs[in]
		q := exchangeQueues(ps.Exchange, env.ExchangeQueues)
		x := &exchangeOut{ctx: ctx, keys: ps.Exchange.Keys, n: q, down: down.in, input: in, pool: newBatchPool(2*q + exchangeBatches)}
		if cols := src.Columns; cols != nil && !identity(cols, outWidth) {
			x.cols = cols
		}
		st.out = x
	case ps.Sink.Connector == "view":
		global := false
		for _, n := range ps.Nodes() {
			if a, ok := n.(*planner.AggregateNode); ok && len(a.Keys) == 0 && a.Window.Kind == planner.WindowNone {
				global = true
			}
		}
		t, err := newTableOut(j.name, ps, env.Store, &j.cnt, global)
		if err != nil {
			return err
		}
		t.full = j.kickCheckpoint
		st.out = t
	case ps.Sink.Stream == "" && ps.Sink.Connector == "":
		if env.OnRow == nil {
			return fmt.Errorf("%w: stage %d has a client sink but Env.OnRow is nil", ErrMissingEnv, ps.ID)
		}
		st.out = &callbackOp{fn: env.OnRow, cnt: &j.cnt}
	default:
		if env.OpenSink == nil || env.NewFormat == nil {
			return fmt.Errorf("%w: stage %d writes %s but Env.OpenSink or Env.NewFormat is nil", ErrMissingEnv, ps.ID, sinkName(ps.Sink))
		}
		op, err := openSinkOp(ctx, env, ps.Sink, &j.cnt)
		if err != nil {
			return err
		}
		op.bad, op.schema = st.bad(ps.Out), ps.Sink.Schema
		if ps.Sink.Options.Delivery == DeliveryTransactional && !env.AtLeastOnce && env.CheckpointInterval > 0 {
			ts, ok := op.sink.(connectors.TxSink)
			if !ok {
				op.Close()
				return &SinkError{Sink: op.what, Err: fmt.Errorf("delivery '%s' needs a topic sink: this sink cannot write transactionally", DeliveryTransactional)}
			}
			tx, err := openTx(ctx, env, j.name, ps.ID, ts)
			if err != nil {
				op.Close()
				return &SinkError{Sink: op.what, Err: err}
			}
			op.tx = tx
		} else if eo := exactlyOnceOutbox(op.sink); eo != nil && !env.AtLeastOnce && env.CheckpointInterval > 0 {
			op.eo = eo
			eo.job, eo.stage, eo.store, eo.full = j.name, ps.ID, env.Store, j.kickCheckpoint
			var owns func(string) bool
			if env.OwnsUnit != nil {
				owns = func(split string) bool { return env.OwnsUnit(Unit{Stage: ps.ID, Split: split}) }
			}
			// The recovery publishes once the stage's inputs are open: a sink that refuses
			// rows (RejectSink) sends them to the dead-letter output of the stage's input.
			op.recover = func() error { return op.eo.recover(ctx, op, owns) }
		}
		st.sink = op
		st.out = op
	}
	return nil
}

// exactlyOnceOutbox is the outbox of a sink that can take exactly-once output (a DedupSink,
// or an EpochSink), or nil.
func exactlyOnceOutbox(s connectors.Sink) *outbox {
	if es, ok := s.(connectors.EpochSink); ok {
		return &outbox{es: es}
	}
	if ds, ok := s.(DedupSink); ok {
		return &outbox{ds: ds}
	}
	return nil
}

// kickCheckpoint asks for a checkpoint now (when the job checkpoints periodically); it does
// not wait.
// press returns the function with which an operator says its changed state outgrew its
// cache (on) and that a checkpoint saved it (off), or nil when the job takes no periodic
// checkpoints (nothing would relieve it).
func (j *Job) press() func(on bool) {
	if j.env.CheckpointInterval <= 0 {
		return nil
	}
	return func(on bool) {
		if on {
			j.pressed.Add(1)
			j.kickCheckpoint()
		} else {
			j.pressed.Add(-1)
		}
	}
}

func (j *Job) kickCheckpoint() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// CheckpointCostFactor is how many times as long as a checkpoint took the adaptive
// interval waits before the next one (Env.MinCheckpointInterval).
const CheckpointCostFactor = 10

func (j *Job) checkpointLoop(ctx context.Context) {
	max := j.env.CheckpointInterval
	adaptive := j.env.MinCheckpointInterval > 0 && j.env.MinCheckpointInterval < max
	min, light := j.env.checkpointFloors(1)
	// floor is the least adaptive wait after the last checkpoint: light after a light one
	// (and before the first).
	floor := light
	wait := max
	if adaptive {
		wait = floor
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	due := time.Now().Add(wait)
	var lastEnd, lastEarly time.Time
	var lastActivity uint64
	var lastBytes int64
	var costs recentCosts
	taken := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.wake:
			// Activity after a quiet stretch: the adaptive cadence starts again, from the
			// shortest wait (a fixed interval keeps its schedule).
			if j.quiet.Swap(false) && adaptive {
				wait = floor
				t.Reset(wait)
				due = time.Now().Add(wait)
			}
		case <-j.kick:
			j.quiet.Store(false)
			t.Reset(0) // (Go 1.23 timers: no stale tick to drain)
			due = time.Now()
		case <-j.early:
			if !adaptive {
				break
			}
			if at, ok := earlyCheckpointAt(time.Now(), due, lastEnd, lastEarly, floor, wait); ok {
				t.Reset(time.Until(at))
				due, lastEarly = at, at
			}
		case <-t.C:
			if adaptive && taken && j.idleSince(lastActivity) {
				// Nothing to record since the last checkpoint: none is taken, and the loop
				// sleeps until activity wakes it (touch; a kick or a stop still reach it).
				// A fixed interval (checkpoint_interval) is kept as the user set it.
				t.Stop()
				due = time.Now().Add(max)
				continue
			}
			lastActivity, taken = j.activity.Load(), true
			start := time.Now()
			if _, err := j.Checkpoint(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, errJobEnded) {
				j.env.Logf("job %s: checkpoint: %v", j.name, err)
			}
			took := time.Since(start)
			if adaptive {
				// A stage reading a shuffle topic commits on its own, after the barrier
				// reached it: its part of a checkpoint may land after the loop looked, so
				// the floor is light only when the last two looks were.
				bytes := j.commitBytes.Swap(0)
				n := j.env.runners()
				min, light = j.env.checkpointFloors(n)
				floor = checkpointFloor(bytes, lastBytes, min, light)
				lastBytes = bytes
				cost := costs.add(time.Duration(j.commitNanos.Swap(0)))
				wait = nextCheckpointWait(cost*time.Duration(n), floor, max)
			} else {
				// A fixed interval counts from the last start, like a ticker.
				wait = max - took
			}
			t.Reset(wait)
			lastEnd = time.Now()
			due = lastEnd.Add(wait)
		}
	}
}

// LightCheckpointBytes is the most a light checkpoint writes (Env.LightCheckpointInterval):
// a few hundred rows of output. A filter at 100,000 events per second checkpointing every
// 2 ms writes about this much; unpaced, or with a larger state delta, its checkpoints are
// larger and keep the usual floor.
const LightCheckpointBytes = 16 << 10

// runners is how many processes run units of the job: Runners' answer, 1 when unset.
func (e *Env) runners() int {
	if e.Runners == nil {
		return 1
	}
	return max(e.Runners(), 1)
}

// checkpointFloors are the adaptive wait's least with n processes running units of the job
// (n times MinCheckpointInterval, within CheckpointInterval: together they commit the job
// as often as one would) and its least after light checkpoints (LightCheckpointInterval,
// at most the other).
func (e *Env) checkpointFloors(n int) (least, light time.Duration) {
	least, light = e.MinCheckpointInterval, e.LightCheckpointInterval
	if n > 1 {
		least = max(least, min(time.Duration(n)*least, e.CheckpointInterval))
	}
	if light <= 0 || light > least {
		light = least
	}
	return least, light
}

// checkpointFloor is the adaptive wait's floor after two looks at what the commits wrote
// (bytes, then before): light when both were light, else min.
func checkpointFloor(bytes, before int64, min, light time.Duration) time.Duration {
	if max(bytes, before) <= LightCheckpointBytes {
		return light
	}
	return min
}

// recentCosts is what the last few looks of the adaptive loop found its commits cost. The
// wait after a checkpoint follows their median, not the last one alone: one commit in a
// hundred takes ten times the usual (a preempted thread, a memtable switch), and ten times
// that one cost made every row of the next interval wait for it (docs/benchmarks.md,
// "Latency: the benchmark's own consumer, and the wait after a slow commit"). A lasting
// change moves the median within three looks.
type recentCosts struct {
	last [5]time.Duration
	n    int // looks so far
}

// add records the cost found at a look and returns the median of the last ones.
func (c *recentCosts) add(cost time.Duration) time.Duration {
	c.last[c.n%len(c.last)] = cost
	c.n++
	k := min(c.n, len(c.last))
	var s [len(c.last)]time.Duration
	copy(s[:], c.last[:k])
	slices.Sort(s[:k])
	return s[k/2]
}

// nextCheckpointWait is the adaptive wait after a checkpoint whose commit cost cost.
func nextCheckpointWait(cost, min, max time.Duration) time.Duration {
	return clampDuration(CheckpointCostFactor*cost, min, max)
}

func clampDuration(d, lo, hi time.Duration) time.Duration {
	if d < lo {
		return lo
	}
	if d > hi {
		return hi
	}
	return d
}

func (j *Job) fail(err error) {
	j.mu.Lock()
	if j.err == nil && !j.stopped {
		j.err = err
	}
	j.mu.Unlock()
	j.cancel()
}

// rootFinished is called by a root stage whose input is exhausted. When every root stage
// is, the job takes its last checkpoint (every window has fired by then) and ends the
// stages.
func (j *Job) rootFinished() {
	j.mu.Lock()
	j.rootsLeft--
	last := j.rootsLeft == 0
	j.mu.Unlock()
	if !last {
		return
	}
	go func() {
		ctx := context.Background()
		if _, err := j.Checkpoint(ctx); err != nil {
			if !errors.Is(err, errJobEnded) {
				j.fail(err)
			}
			return
		}
		j.inject.Lock()
		defer j.inject.Unlock()
		j.ended = true
		for _, st := range j.roots {
			r := &request{kind: reqEnd, done: make(chan error, 1)}
			select {
			case st.reqs <- r:
			case <-j.done:
				return
			}
		}
	}()
}

// Name returns the job's name.
func (j *Job) Name() string { return j.name }

// Wait blocks until the job has ended and returns why it failed, or nil when it finished or
// was stopped.
func (j *Job) Wait() error {
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Stop ends the job: stages stop reading, sinks are flushed and closed. It does not
// checkpoint; call Checkpoint first for that. Stop returns once the job has ended.
func (j *Job) Stop() {
	j.mu.Lock()
	j.stopped = true
	j.mu.Unlock()
	j.cancel()
	<-j.done
}

// Checkpoint injects a checkpoint barrier at every root stage and waits until every commit
// group has committed it; it returns the epoch.
func (j *Job) Checkpoint(ctx context.Context) (int64, error) {
	rs, err := j.injectBarrier(ctx)
	if err != nil {
		return 0, err
	}
	for _, r := range rs {
		select {
		case err := <-r.done:
			if err != nil {
				return 0, err
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-j.done:
			return 0, errJobEnded
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.epoch, nil
}

// alignMoved wakes the split readers waiting for the alignment floor to move.
// watermarkLead is how far the event time read by the sources feeding st (through any
// stages before it) may run ahead of the watermark st's inputs report: the largest source
// watermark delay on a path to st plus the output holds of the stages on the way (the
// alignment floor of a stage reading shuffle topics, setAlignFloor).
func (j *Job) watermarkLead(st *stage, byID map[int]*stage, depth int) int64 {
	var lead int64
	for _, src := range st.plan.Inputs {
		var l int64
		switch up := byID[src.FromStage]; {
		case src.FromStage < 0:
			l = src.WatermarkDelay
		case up != nil && depth < len(byID):
			l = j.watermarkLead(up, byID, depth+1) + up.outHold
		}
		lead = max(lead, l)
	}
	return lead
}

func (j *Job) alignMoved() {
	j.alignMu.Lock()
	close(j.alignCh)
	j.alignCh = make(chan struct{})
	j.alignMu.Unlock()
}

// alignState is the channel closed at the floor's next move, and the floor: the smallest
// of the root stages' (MaxWatermark: no constraint).
func (j *Job) alignState() (<-chan struct{}, int64) {
	j.alignMu.Lock()
	ch := j.alignCh
	j.alignMu.Unlock()
	f := MaxWatermark
	for _, st := range j.roots {
		f = min(f, st.alignFloor.Load())
	}
	return ch, f
}

// injectBarrier numbers a new epoch and hands its barrier to every root stage.
func (j *Job) injectBarrier(ctx context.Context) ([]*request, error) {
	j.inject.Lock()
	defer j.inject.Unlock()
	if j.ended {
		return nil, errJobEnded
	}
	epoch := j.nextEpoch()
	j.cpTimes.inject(epoch, time.Now())
	var rs []*request
	for _, st := range j.roots {
		r := &request{kind: reqCheckpoint, epoch: epoch, done: make(chan error, 1)}
		select {
		case st.reqs <- r:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-j.done:
			return nil, errJobEnded
		}
		rs = append(rs, r)
	}
	return rs, nil
}

var errJobEnded = errors.New("exec: job has ended")

// AddSplit starts reading a split of the job's first stage: NewSplit goes through the
// operators (loading the split's state), then records follow from its checkpointed
// position.
func (j *Job) AddSplit(ctx context.Context, split string) error {
	return j.request(ctx, &request{kind: reqAddSplit, split: split})
}

// RemoveSplit stops reading a split: its state and position are checkpointed and its local
// state dropped, then it no longer holds the watermark back.
func (j *Job) RemoveSplit(ctx context.Context, split string) error {
	return j.request(ctx, &request{kind: reqRemoveSplit, split: split})
}

// AddUnit starts running split u.Split of stage u.Stage, a stage that reads streams or
// shuffle topics, from its state in Env.Store (AddSplit for any such stage).
func (j *Job) AddUnit(ctx context.Context, u Unit) error {
	st := j.stageByID(u.Stage)
	if st == nil || !st.root {
		return fmt.Errorf("exec: job %s: stage %d does not read streams or shuffle topics", j.name, u.Stage)
	}
	return j.requestTo(ctx, st, &request{kind: reqAddSplit, split: u.Split})
}

// RemoveUnit stops running split u.Split of stage u.Stage: its state is committed (Env.
// Commit, epoch 0) and dropped from memory (RemoveSplit for any stage AddUnit takes).
// Only the stage's other work waits meanwhile.
func (j *Job) RemoveUnit(ctx context.Context, u Unit) error {
	st := j.stageByID(u.Stage)
	if st == nil || !st.root {
		return fmt.Errorf("exec: job %s: stage %d does not read streams or shuffle topics", j.name, u.Stage)
	}
	return j.requestTo(ctx, st, &request{kind: reqRemoveSplit, split: u.Split})
}

// Units returns the units the job runs now, by stage and split name.
func (j *Job) Units() []Unit {
	var out []Unit
	for _, st := range j.stages {
		st.statsMu.Lock()
		for _, sp := range st.statSplits {
			out = append(out, Unit{Stage: st.plan.ID, Split: sp.Split})
		}
		st.statsMu.Unlock()
	}
	return out
}

func (j *Job) request(ctx context.Context, r *request) error {
	if j.first == nil {
		return fmt.Errorf("exec: job %s reads no stream", j.name)
	}
	return j.requestTo(ctx, j.first, r)
}

func (j *Job) requestTo(ctx context.Context, st *stage, r *request) error {
	r.done = make(chan error, 1)
	select {
	case st.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-j.done:
		return errJobEnded
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-j.done:
		return errJobEnded
	}
}

// SplitPrefixes returns the state-store key prefixes that hold everything of one split of
// the job's first stage: each stateful operator's state and the split's position
// (SplitKey). With them a split's state can be listed, exported (state.Store.Export),
// imported elsewhere and dropped (state.Store.DropPrefix).
func (j *Job) SplitPrefixes(split string) [][]byte {
	var out [][]byte
	st := j.first
	if st == nil {
		return nil
	}
	for _, id := range st.opIDs {
		out = append(out, state.SplitPrefix(nil, j.name, id, split))
	}
	return append(out, SplitKey(j.name, st.plan.ID, split))
}

// RecordsIn is JobStats.RecordsIn without the rest (a rate meter's sample).
func (j *Job) RecordsIn() int64 { return j.cnt.in.Load() }

// Stats returns a snapshot of the job's counters.
func (j *Job) Stats() JobStats {
	s := JobStats{
		RecordsIn: j.cnt.in.Load(), RecordsOut: j.cnt.out.Load(),
		BytesIn: j.cnt.bytesIn.Load(), BytesOut: j.cnt.bytesOut.Load(),
		Bad: j.cnt.bad.Load(), Late: j.cnt.late.Load(),
		Watermark: MinWatermark,
	}
	for _, st := range j.stages {
		st.statsMu.Lock()
		s.Watermark = st.statWM
		s.Splits = append(s.Splits, st.statSplits...)
		st.statsMu.Unlock()
		for _, n := range st.nodes {
			if r, ok := n.op.(interface{ StateRows() int64 }); ok {
				s.StateRows += r.StateRows()
			}
		}
	}
	j.mu.Lock()
	s.BadErrors = append([]string(nil), j.badErrors...)
	s.Epoch = j.epoch
	s.Finished = j.finished
	for _, l := range j.lookups {
		s.Lookups = append(s.Lookups, l.c.snapshot(l.stage))
	}
	j.mu.Unlock()
	return s
}

// Bad records are logged as they happen, at most badLogBurst of them per badLogEvery per
// job; the next line logged after a window that dropped some says how many.
const (
	badLogBurst = 10
	badLogEvery = 10 * time.Second
)

func (j *Job) recordBad(err error) {
	j.cnt.bad.Add(1)
	j.mu.Lock()
	now := j.env.Now()
	if now.Sub(j.badLogStart) >= badLogEvery {
		j.badLogStart, j.badLogged = now, 0
	}
	var skipped int64
	logIt := j.badLogged < badLogBurst
	if logIt {
		j.badLogged++
		skipped, j.badSkipped = j.badSkipped, 0
	} else {
		j.badSkipped++
	}
	j.mu.Unlock()
	if skipped > 0 {
		j.env.Logf("job %s: %d more bad records were not logged (at most %d are logged every %v; SHOW JOBS counts them all)", j.name, skipped, badLogBurst, badLogEvery)
	}
	if logIt {
		j.env.Logf("job %s: bad record: %v", j.name, err)
	}
	msg := err.Error() // (not under the lock: a panic there would leave it held)
	j.mu.Lock()
	if len(j.badErrors) == 16 {
		copy(j.badErrors, j.badErrors[1:])
		j.badErrors = j.badErrors[:15]
	}
	j.badErrors = append(j.badErrors, msg)
	j.mu.Unlock()
}

// commit makes a checkpoint durable and records its epoch.
func (j *Job) commit(g *commitGroup, epoch int64, b *state.Batch, offsets []SplitOffset) error {
	b.Put(EpochKey(j.name), binary.AppendVarint(nil, epoch))
	if g != nil && g == j.cntGroup {
		b.Put(CountersKey(j.name), appendCounters(nil, &j.cnt))
	}
	j.commitBytes.Add(int64(b.Size()))
	if err := j.env.Commit(&CheckpointInfo{Job: j.name, Epoch: epoch, Offsets: offsets, State: b}); err != nil {
		return fmt.Errorf("job %s: commit checkpoint %d: %w", j.name, epoch, err)
	}
	j.mu.Lock()
	if epoch > j.epoch {
		j.epoch = epoch
	}
	j.mu.Unlock()
	return nil
}

// nextEpoch numbers a new barrier.
func (j *Job) nextEpoch() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.seq < j.epoch {
		j.seq = j.epoch
	}
	j.seq++
	return j.seq
}
