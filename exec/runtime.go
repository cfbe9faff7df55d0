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

// Env is everything a job needs from its surroundings. Only the openers the plan uses are
// required: OpenSource for stream sources, NewFormat to decode and encode records, OpenSink
// for stream sinks and side outputs (late/dead-letter), OnRow for push queries.
type Env struct {
	OpenSource func(planner.SourceSpec) (connectors.Source, error)
	NewFormat  func(name string, schema sql.Schema) (connectors.Format, error)
	OpenSink   func(planner.SinkSpec) (connectors.Sink, error)
	// OnRow receives the rows of a stage whose SinkSpec.Stream is "" (push queries). The
	// row is valid only during the call; an error stops the job with that error.
	OnRow func(sql.Row) error
	// Store holds operator state and source offsets (default: a fresh in-memory store).
	Store state.Store
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
	// ExchangeQueues is the number of queues of an in-process exchange (default 4).
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
}

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
		e.ExchangeQueues = 4
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

// SplitOffset is the first offset of a split not yet covered by a checkpoint.
type SplitOffset struct {
	Stream string
	Split  string
	Offset int64
}

// OffsetKey is the store key of a source split's checkpointed offset (value: varint next
// offset, then varint max event time seen, which restarts the split's watermark).
func OffsetKey(job string, stage int, split string) []byte {
	return state.SplitPrefix(nil, job, "src"+strconv.Itoa(stage), split)
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
	Splits    []SplitStats
	// BadErrors are the most recent bad-record errors (at most 16), oldest first.
	BadErrors []string
	Epoch     int64 // last committed checkpoint, 0 if none
	Finished  bool
}

// SplitStats describes one source split.
type SplitStats struct {
	Stage        int
	Stream       string
	Split        string
	Offset       int64 // next offset to read
	MaxEventTime int64 // MinWatermark before the first record
	Watermark    int64 // MaxEventTime - delay
	Idle, Done   bool
	// Lag is how many messages the split is behind its end, when the reader can tell
	// (it implements interface{ Lag() int64 }), else -1.
	Lag int64
}

type counters struct {
	in, out, bad, late atomic.Int64
	// bytesIn counts message bodies read from sources (bad records included); bytesOut the
	// bodies written to sinks.
	bytesIn, bytesOut atomic.Int64
}

// Job is a running continuous query.
type Job struct {
	name   string
	env    Env
	cancel context.CancelFunc
	wg     sync.WaitGroup
	tasks  []*task
	cnt    counters
	reqs   chan *request // to the first source task
	// shuffleReqs reach the stages that read shuffle topics: they checkpoint on their own.
	shuffleReqs []chan *request
	done        chan struct{}

	mu        sync.Mutex // guards the fields below
	err       error
	stopped   bool
	finished  bool
	badErrors []string
	epoch     int64
	seq       int64 // last epoch handed out
}

type reqKind uint8

const (
	reqCheckpoint reqKind = iota
	reqAddSplit
	reqRemoveSplit
)

type request struct {
	kind  reqKind
	split string
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
	j := &Job{name: job, env: env, cancel: cancel, reqs: make(chan *request), done: make(chan struct{})}
	if err := j.build(jctx, plan); err != nil {
		cancel()
		for _, t := range j.tasks {
			t.closeAll()
		}
		return nil, err
	}
	var ep int64
	if v, ok, err := env.Store.Get(epochKey(job)); err == nil && ok {
		ep, _ = binary.Varint(v)
	}
	j.epoch = ep
	for _, t := range j.tasks {
		j.wg.Add(1)
		go func(t *task) {
			defer j.wg.Done()
			if err := t.run(jctx); err != nil && !errors.Is(err, context.Canceled) {
				j.fail(err)
			}
		}(t)
	}
	go func() {
		j.wg.Wait()
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

func epochKey(job string) []byte { return state.SplitPrefix(nil, job, "job", "epoch") }

func (j *Job) checkpointLoop(ctx context.Context) {
	t := time.NewTicker(j.env.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := j.Checkpoint(ctx); err != nil && ctx.Err() == nil {
				j.env.Logf("job %s: checkpoint: %v", j.name, err)
			}
		}
	}
}

func (j *Job) fail(err error) {
	j.mu.Lock()
	if j.err == nil && !j.stopped {
		j.err = err
	}
	j.mu.Unlock()
	j.cancel()
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

// Stop ends the job: tasks stop reading, sinks are flushed and closed. It does not
// checkpoint; call Checkpoint first for that. Stop returns once the job has ended.
func (j *Job) Stop() {
	j.mu.Lock()
	j.stopped = true
	j.mu.Unlock()
	j.cancel()
	<-j.done
}

// Checkpoint injects a checkpoint barrier and waits until it is committed; it returns the
// epoch.
func (j *Job) Checkpoint(ctx context.Context) (int64, error) {
	var rs []*request
	for _, ch := range append([]chan *request{j.reqs}, j.shuffleReqs...) {
		r := &request{kind: reqCheckpoint, done: make(chan error, 1)}
		select {
		case ch <- r:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-j.done:
			return 0, errJobEnded
		}
		rs = append(rs, r)
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

var errJobEnded = errors.New("exec: job has ended")

// AddSplit starts reading a split of the job's (first) source: NewSplit goes through the
// pipeline (loading the split's state), then records follow from its checkpointed offset.
func (j *Job) AddSplit(ctx context.Context, split string) error {
	return j.request(ctx, &request{kind: reqAddSplit, split: split})
}

// RemoveSplit stops reading a split: its state and offset are checkpointed and its local
// state dropped, then it no longer holds the watermark back.
func (j *Job) RemoveSplit(ctx context.Context, split string) error {
	return j.request(ctx, &request{kind: reqRemoveSplit, split: split})
}

func (j *Job) request(ctx context.Context, r *request) error {
	r.done = make(chan error, 1)
	if err := j.send(ctx, r); err != nil {
		return err
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

func (j *Job) send(ctx context.Context, r *request) error {
	select {
	case j.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-j.done:
		return errJobEnded
	}
}

// SplitPrefixes returns the state-store key prefixes that hold everything of one split of
// the job's source stages: each stateful operator's state (state.SplitPrefix) and the
// split's checkpointed offset (OffsetKey). With them a split's state can be listed,
// exported (state.Store.Export), imported elsewhere and dropped (state.Store.DropPrefix).
// Stages behind an exchange have the exchange queues as splits; their prefixes are
// state.SplitPrefix(job, "s<stage>.agg<node index>", queue).
func (j *Job) SplitPrefixes(split string) [][]byte {
	var out [][]byte
	for _, t := range j.tasks {
		if t.stage.Source.FromStage >= 0 {
			continue
		}
		for _, id := range t.opIDs {
			out = append(out, state.SplitPrefix(nil, j.name, id, split))
		}
		out = append(out, OffsetKey(j.name, t.stage.ID, split))
	}
	return out
}

// Stats returns a snapshot of the job's counters.
func (j *Job) Stats() JobStats {
	s := JobStats{
		RecordsIn: j.cnt.in.Load(), RecordsOut: j.cnt.out.Load(),
		BytesIn: j.cnt.bytesIn.Load(), BytesOut: j.cnt.bytesOut.Load(),
		Bad: j.cnt.bad.Load(), Late: j.cnt.late.Load(),
		Watermark: MinWatermark,
	}
	for _, t := range j.tasks {
		t.statsMu.Lock()
		s.Watermark = t.statWM
		for _, sp := range t.statSplits {
			s.Splits = append(s.Splits, sp)
		}
		t.statsMu.Unlock()
	}
	j.mu.Lock()
	s.BadErrors = append([]string(nil), j.badErrors...)
	s.Epoch = j.epoch
	s.Finished = j.finished
	j.mu.Unlock()
	return s
}

func (j *Job) recordBad(err error) {
	j.cnt.bad.Add(1)
	j.env.Logf("job %s: bad record: %v", j.name, err)
	j.mu.Lock()
	if len(j.badErrors) == 16 {
		copy(j.badErrors, j.badErrors[1:])
		j.badErrors = j.badErrors[:15]
	}
	j.badErrors = append(j.badErrors, err.Error())
	j.mu.Unlock()
}

// commit makes a checkpoint durable and records its epoch.
func (j *Job) commit(c *Control, offsets []SplitOffset) error {
	c.State.Put(epochKey(j.name), binary.AppendVarint(nil, c.Epoch))
	if err := j.env.Commit(&CheckpointInfo{Job: j.name, Epoch: c.Epoch, Offsets: offsets, State: c.State}); err != nil {
		return fmt.Errorf("job %s: commit checkpoint %d: %w", j.name, c.Epoch, err)
	}
	j.mu.Lock()
	if c.Epoch > j.epoch {
		j.epoch = c.Epoch
	}
	j.mu.Unlock()
	return nil
}

// nextEpoch numbers a new barrier; only the first source task calls it.
func (j *Job) nextEpoch() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.seq < j.epoch {
		j.seq = j.epoch
	}
	j.seq++
	return j.seq
}
