package exec

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Split alignment when a stage reading a shuffle topic restarts from a checkpoint with one
// of its queues silent: that queue holds the stage watermark at its checkpointed value, so
// the reader of the other queue must not run ahead of it. If it did, a row that is late in
// the other queue's own order (300 s behind the watermarks before it there) would be judged
// against the held-back stage watermark and counted into a window.

// gatedQueues serves fixed shuffle messages per queue (offset = index). Opening queue
// "1" waits until the reader of queue "0" has come back for more after reading all of it
// (or a while has passed): a reader started as soon as its queue opened has then handed
// all its batches to the stage before the stage knew its other queue.
type gatedQueues struct {
	mu      sync.Mutex
	data    map[string][]connectors.Message
	drained chan struct{}
	once    sync.Once
	batch   int // most messages a read returns (0: as many as asked)
}

func (s *gatedQueues) add(q string, bodies ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bodies {
		s.data[q] = append(s.data[q], connectors.Message{Offset: int64(len(s.data[q])), Body: b})
	}
}

func (s *gatedQueues) Splits(context.Context) ([]string, error) { return []string{"0", "1"}, nil }
func (s *gatedQueues) Bounded() bool                            { return false }
func (s *gatedQueues) Close() error                             { return nil }
func (s *gatedQueues) Open(ctx context.Context, q string, offset int64) (connectors.SplitReader, error) {
	if q == "1" {
		select {
		case <-s.drained:
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &gatedReader{s: s, q: q, pos: int(offset)}, nil
}

type gatedReader struct {
	s   *gatedQueues
	q   string
	pos int
}

func (r *gatedReader) Read(ctx context.Context, buf []connectors.Message, max int) ([]connectors.Message, error) {
	r.s.mu.Lock()
	d := r.s.data[r.q]
	if r.pos < len(d) {
		n := min(max, len(d)-r.pos)
		if r.s.batch > 0 {
			n = min(n, r.s.batch)
		}
		buf = append(buf, d[r.pos:r.pos+n]...)
		r.pos += n
		r.s.mu.Unlock()
		return buf, nil
	}
	r.s.mu.Unlock()
	if r.q == "0" {
		r.s.once.Do(func() { close(r.s.drained) })
	}
	select {
	case <-ctx.Done():
		return buf, ctx.Err()
	case <-time.After(time.Millisecond):
		return buf, nil
	}
}

func (r *gatedReader) Close() error { return nil }

// shuffleMessages encodes rows of source split split (offsets from off) and watermarks
// the way the upstream stage writes one queue.
type shuffleMessages struct {
	qs *queueSink
	x  *shuffleOut
}

func newShuffleMessages() *shuffleMessages {
	qs := &queueSink{q: make([][]connectors.Message, 1)}
	return &shuffleMessages{qs: qs, x: &shuffleOut{ctx: context.Background(), sink: qs, qs: qs,
		keys: []planner.Evaluator{col(0)}, n: 1, what: "align-0-shuffle"}}
}

func (m *shuffleMessages) row(t *testing.T, split string, off int64, e event4) {
	t.Helper()
	b := &Batch{Split: split, Rows: []sql.Row{{sql.Varchar(e.user), sql.Double(e.amount), sql.Timestamp(e.ts), sql.BigInt(e.n)}},
		Offsets: []int64{off}}
	if err := m.x.Process(b); err != nil {
		t.Fatal(err)
	}
}

// watermark writes the watermark of the upstream stage's only split, "0".
func (m *shuffleMessages) watermark(t *testing.T, wm int64) {
	t.Helper()
	if err := m.x.SplitWatermark("0", wm); err != nil {
		t.Fatal(err)
	}
}

func (m *shuffleMessages) bodies() [][]byte {
	var out [][]byte
	for _, msg := range m.qs.q[0] {
		out = append(out, msg.Body)
	}
	return out
}

func TestShuffleRestartSilentQueueHoldsReadersBack(t *testing.T) {
	// The silent queue's upstream watermark was checkpointed, or it had none yet (then it
	// counts as being at the stage's checkpointed watermark).
	for _, known := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpointed=%v", known), func(t *testing.T) { testSilentQueueRestart(t, known) })
	}
}

func testSilentQueueRestart(t *testing.T, known bool) {
	const (
		job  = "align"
		base = int64(1_000_000_000_000) // the checkpointed watermark, a multiple of the window
		sec  = int64(1000)
	)
	// Queue 0: a row in each 10 s window and the upstream watermark at its end, 40
	// windows; after the watermark of window 35 a row 300 s behind it (another user).
	q0 := newShuffleMessages()
	var want []string
	for k := int64(1); k <= 40; k++ {
		e := event4{user: "u", amount: float64(k), ts: base + k*10*sec - sec, n: k}
		q0.row(t, "s0", k, e)
		q0.watermark(t, base+k*10*sec)
		ws := base + (k-1)*10*sec
		want = append(want, fmt.Sprintf("u,%d,%d,1,%s", ws, ws+10*sec, fmtF(e.amount)))
		if k == 35 {
			q0.row(t, "s1", 1, event4{user: "late", amount: 1000, ts: base + 50*sec, n: 1})
		}
	}
	src := &gatedQueues{data: map[string][]connectors.Message{}, drained: make(chan struct{})}
	src.add("0", q0.bodies()...)

	// The checkpoint the stage restarts from: both queues at offset 0, queue 0 with the
	// upstream watermark base, queue 1 with base or none; the stage watermark base.
	store := state.NewMemory()
	b := &state.Batch{}
	b.Put(OffsetKey(job, 1, "0"), binary.AppendVarint(binary.AppendVarint(nil, 0), base))
	if known {
		b.Put(OffsetKey(job, 1, "1"), binary.AppendVarint(binary.AppendVarint(nil, 0), base))
	} else {
		b.Put(OffsetKey(job, 1, "1"), binary.AppendVarint(nil, 0))
	}
	b.Put(WatermarkKey(job, 1), binary.AppendVarint(nil, base))
	if err := store.Write(b); err != nil {
		t.Fatal(err)
	}

	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 10 * sec}
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: countSum, Schema: aggSchema(1, true, countSum)}
	up := sourceSpec(map[string]string{"queues": "1"}, 0)
	up.Connector = "broker"
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, up, planner.SinkSpec{}, &planner.ExchangeNode{Topic: job + "-0-shuffle", Keys: []planner.Evaluator{col(0)}, Queues: 2}),
		planner.Chain(1, planner.SourceSpec{Stream: job + "-0-shuffle", Connector: "broker", Schema: eventSchema, EventTime: 2, FromStage: 0}, sinkSpec(node.Schema), node),
	}}
	upstream := newMemSource(false, 0, "0") // no new input upstream
	sk := &sinks{}
	env := Env{
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			if spec.Stream == job+"-0-shuffle" {
				return src, nil
			}
			return upstream, nil
		},
		OpenSink: func(spec planner.SinkSpec) (connectors.Sink, error) {
			if spec.Stream == job+"-0-shuffle" {
				q := spec.Options.Queues
				return &queueSink{q: make([][]connectors.Message, q)}, nil
			}
			return sk.open(spec)
		},
		NewFormat:          newTestFormat,
		Store:              store,
		ShuffleTopics:      true,
		CheckpointInterval: -1,
		Tick:               5 * time.Millisecond,
	}
	j, err := Start(context.Background(), job, plan, env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()

	// While queue 1 is silent, the stage watermark stays at base. Give queue 0's reader the
	// chance to run ahead (it must not: it waits within the alignment window of base),
	// then let queue 1 catch up.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && !queueRead(j, "0", int64(len(q0.bodies()))) {
		time.Sleep(5 * time.Millisecond)
	}
	q1 := newShuffleMessages()
	q1.watermark(t, base+1000*sec)
	src.add("1", q1.bodies()...)

	last := want[len(want)-1]
	for deadline := time.Now().Add(30 * time.Second); ; {
		got := sk.get("out").bodies()
		if contains(got, last) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last window never came out; output %v, stats %+v", got, j.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	j.Stop()
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatalf("a row late in its queue was counted while another queue held the watermark back: %s", d)
	}
	if n := j.Stats().Late; n != 1 {
		t.Fatalf("%d late rows, want 1", n)
	}
}

// queueRead reports whether the stage has processed queue q up to offset next.
func queueRead(j *Job, q string, next int64) bool {
	for _, s := range j.Stats().Splits {
		if s.Stage == 1 && s.Split == q && s.Offset >= next {
			return true
		}
	}
	return false
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// lockedQueueSink is a queueSink a test may read while the job writes it.
type lockedQueueSink struct {
	mu sync.Mutex
	queueSink
}

func (s *lockedQueueSink) WriteQueue(ctx context.Context, q int, msgs []connectors.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueSink.WriteQueue(ctx, q, msgs)
}

// statuses decodes the watermark messages written so far: per producing split, whether it
// was ever written as idle and the largest watermark written.
func (s *lockedQueueSink) statuses(t *testing.T) (idle map[string]bool, wm map[string]int64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	idle, wm = map[string]bool{}, map[string]int64{}
	var m shuffleMsg
	for _, q := range s.q {
		for _, msg := range q {
			if err := decodeShuffle(msg.Body, &m); err != nil {
				t.Fatal(err)
			}
			if m.isWM {
				idle[m.split] = idle[m.split] || m.idle
				wm[m.split] = max(wm[m.split], m.wm)
			}
		}
	}
	return idle, wm
}

// A split reader held back by the alignment of split readers is not idle, however long the
// slowest split holds it (here the stage after the exchange, whose producing splits' last
// watermarks are low, as when a producing unit's instance died and the unit awaits its new
// owner): the stage writing the shuffle topic keeps saying its splits are active, at their
// own watermarks. Were they written as idle, the stage after it would stop waiting for them
// (and, with both idle, their watermarks would jump to the largest event time read), and
// the records they have not read yet would be late there once the slow producer moved on.
func TestAlignedReaderIsNotIdle(t *testing.T) {
	const job = "held"
	clk := newFakeClock()
	// The stage after the exchange reads, on each queue, the watermark 1000 of both
	// producing splits, and then nothing: its input watermark holds the job's floor at 1000.
	down := &gatedQueues{data: map[string][]connectors.Message{}, drained: make(chan struct{})}
	for _, q := range []string{"0", "1"} {
		m := newShuffleMessages()
		for _, p := range []string{"a", "b"} {
			if err := m.x.SplitWatermark(p, 1000); err != nil {
				t.Fatal(err)
			}
		}
		down.add(q, m.bodies()...)
	}
	up := newMemSource(false, 0, "a", "b")
	spec := sourceSpec(map[string]string{"idle_timeout": "2s"}, 100)
	spec.Connector = "broker"
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: countSum, Schema: aggSchema(1, true, countSum)}
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, spec, planner.SinkSpec{}, &planner.ExchangeNode{Topic: job + "-0-shuffle", Keys: []planner.Evaluator{col(0)}, Queues: 2}),
		planner.Chain(1, planner.SourceSpec{Stream: job + "-0-shuffle", Connector: "broker", Schema: eventSchema, EventTime: 2, FromStage: 0}, sinkSpec(node.Schema), node),
	}}
	shuffle := &lockedQueueSink{queueSink: queueSink{q: make([][]connectors.Message, 2)}}
	sk := &sinks{}
	env := Env{
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			if spec.Stream == job+"-0-shuffle" {
				return down, nil
			}
			return up, nil
		},
		OpenSink: func(spec planner.SinkSpec) (connectors.Sink, error) {
			if spec.Stream == job+"-0-shuffle" {
				return shuffle, nil
			}
			return sk.open(spec)
		},
		NewFormat:          newTestFormat,
		Store:              state.NewMemory(),
		ShuffleTopics:      true,
		CheckpointInterval: -1,
		Tick:               5 * time.Millisecond,
		AlignmentWindow:    time.Second,
		Now:                clk.now,
	}
	j, err := Start(context.Background(), job, plan, env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	waitFor(t, "the stage after the exchange to read its queues", func() bool { return queueRead(j, "0", 2) && queueRead(j, "1", 2) })

	// Both splits read records far ahead of the floor: their readers wait.
	up.feed("a", "x,1,1500,", "x,1,5000,")
	up.feed("b", "y,1,1600,", "y,1,5000,")
	waitFor(t, "records in", func() bool { return j.Stats().RecordsIn == 4 })
	up.feed("a", "x,1,5100,") // waits unread behind the held reader
	up.feed("b", "y,1,5100,")
	for i := 0; i < 5; i++ {
		clk.advance(time.Second)
		time.Sleep(50 * time.Millisecond) // ticks run advance with the clock moved on
	}
	idle, wm := shuffle.statuses(t)
	for _, p := range []string{"a", "b"} {
		if idle[p] {
			t.Errorf("split %s, held back by alignment for 5 s of a 2 s idle timeout, was written as idle", p)
		}
		if wm[p] > 5000-100 {
			t.Errorf("split %s written with watermark %d, beyond its own 4900 (the largest event time it read less the delay)", p, wm[p])
		}
	}
	if n := j.Stats().RecordsIn; n != 4 {
		t.Errorf("%d records in: the held readers read on", n)
	}
}

// A new job (nothing checkpointed): a split slow to deliver its first record holds the
// watermark at the bottom, so the other split's reader must not run ahead of it, or a row
// late in its own queue (300 s behind the rows before it there) would be judged against
// that watermark and counted. Queue 1 gets its records once the stage has read queue 0's
// first batch; the slow split stands at the stage's first event time meanwhile
// (newSplitGrace).
func TestNewJobSlowSplitHoldsReadersBack(t *testing.T) {
	const sec = int64(1000)
	base := int64(1_796_000_000_000)
	drained := make(chan struct{})
	close(drained) // queue 1 opens at once, empty
	src := &gatedQueues{data: map[string][]connectors.Message{}, drained: drained, batch: 10}
	src.once.Do(func() {}) // (drained is closed already)
	var q1 [][]byte
	for i := range int64(400) {
		src.add("0", []byte(event4{user: "u", amount: 1, ts: base + i*sec, n: 1}.body()))
		if i == 350 {
			src.add("0", []byte(event4{user: "late", amount: 1, ts: base + 50*sec, n: 1}.body()))
		}
		q1 = append(q1, []byte(event4{user: "v", amount: 1, ts: base + i*sec + 500, n: 1}.body()))
	}
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 10 * sec}
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: countSum, Schema: aggSchema(1, true, countSum)}
	// Each source split judges its own rows by its own watermark; the stage after the
	// exchange judges them by the smallest of the producing splits' watermarks, which the
	// silent split holds at the bottom.
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, sourceSpec(nil, 5*sec), planner.SinkSpec{}, &planner.ExchangeNode{Keys: []planner.Evaluator{col(0)}, Queues: 1}),
		planner.Chain(1, planner.SourceSpec{Stream: "shuffle", Schema: eventSchema, EventTime: 2, FromStage: 0}, sinkSpec(node.Schema), node),
	}}
	sk := &sinks{}
	// The clock stands still: the slow split's grace (newSplitGrace) must not run out
	// while a loaded machine delays the test's adding queue 1's records.
	clk := newFakeClock()
	env := Env{
		OpenSource:         func(planner.SourceSpec) (connectors.Source, error) { return src, nil },
		OpenSink:           sk.open,
		NewFormat:          newTestFormat,
		Store:              state.NewMemory(),
		CheckpointInterval: -1,
		Tick:               5 * time.Millisecond,
		Now:                clk.now,
	}
	j, err := Start(context.Background(), "nj", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	offset := func(split string) int64 {
		for _, s := range j.Stats().Splits {
			if s.Stage == 0 && s.Split == split {
				return s.Offset
			}
		}
		return 0
	}
	waitFor(t, "queue 0's first batch", func() bool { return offset("0") >= 10 })
	src.add("1", q1...)
	waitFor(t, "both queues read", func() bool { return offset("0") >= 401 && offset("1") >= 400 })
	// Every window before 390 s closes (the watermark reaches 394 s): the windows past 350 s
	// close on watermarks that follow the late row in queue 0, so it has been judged by then
	// wherever it was (a window count that closes only up to 300 s can be reached before it
	// was, on a loaded machine).
	waitFor(t, "every window before 390 s closed", func() bool { return len(sk.get("out").bodies()) >= 78 })
	for _, b := range sk.get("out").bodies() {
		if strings.HasPrefix(b, "late,") {
			t.Fatalf("a row 300 s late in its queue was counted while the other queue had delivered nothing: %s (stats %+v)", b, j.Stats())
		}
	}
	if n := j.Stats().Late; n != 1 {
		t.Fatalf("%d late rows, want 1", n)
	}
}
