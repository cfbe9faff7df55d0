package exec

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rsql/broker"
	"rsql/connectors"
	"rsql/planner"
	"rsql/state"
)

// Transactional output (sink_tx.go) over the in-process broker.

func txBroker(t *testing.T) *broker.Broker {
	t.Helper()
	// Checks come fast, and many of them: the broker discards a transaction after the
	// maximum (15 by default, 3 s at this interval), which an epoch of a loaded machine can
	// outlast (docs/guarantees.md, "Limits of transactional output").
	b, err := broker.Open(broker.Config{Dir: t.TempDir(), TransactionTimeout: 200 * time.Millisecond,
		TransactionCheckInterval: 200 * time.Millisecond, TransactionCheckMax: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func txPlan() *planner.Physical {
	p := brokerPlan()
	last := p.Stages[len(p.Stages)-1]
	last.Sink.Options = testOptions(map[string]string{"format": "test"})
	last.Sink.Options.Delivery = DeliveryTransactional
	return p
}

// outMessages returns every committed message of the sink topic "out".
func outMessages(t *testing.T, b *broker.Broker) []broker.Message {
	t.Helper()
	var out []broker.Message
	ti, ok := b.Topic("out")
	if !ok {
		return nil
	}
	for q := 0; q < ti.Queues; q++ {
		msgs, err := b.Peek("out", q, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msgs...)
	}
	return out
}

// TestTxSinkStopRestartExactlyOnce: a job writing its topic transactionally, stopped twice
// in the middle of its input and restarted on the same store: every window once, each row
// with its transaction and id, and no transaction left open once it is done.
func TestTxSinkStopRestartExactlyOnce(t *testing.T) {
	b := txBroker(t)
	all := fillTopic(t, b, 6000)
	want := expectRows(closedBy(tumbleGroups(all), maxTs(all)), true, countSumText)
	store := state.NewMemory()
	for run := 0; run < 2; run++ {
		j, err := Start(context.Background(), "bj", txPlan(), brokerEnv(b, store, true))
		if err != nil {
			t.Fatal(err)
		}
		target := int64(len(all) / 3 * (run + 1))
		for j.Stats().RecordsIn < target && j.Stats().Epoch < int64(2*(run+1)) {
			time.Sleep(5 * time.Millisecond)
		}
		j.Stop()
	}
	j, err := Start(context.Background(), "bj", txPlan(), brokerEnv(b, store, true))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	got := waitOutput(t, b, len(want))
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}
	ids := map[string]bool{}
	for _, m := range outMessages(t, b) {
		id, txn := m.Properties[connectors.PropMessageID], m.Properties[connectors.PropTxn]
		if _, tag, ok := parseTxn(txn); !ok || id == "" || ids[id] || !hasPrefix(id, "bj/"+strconv.FormatInt(tag, 10)+"/") {
			t.Fatalf("message %q: id %q (seen before: %v), transaction %q", m.Body, id, ids[id], txn)
		}
		ids[id] = true
	}
	if st := j.Stats(); st.RecordsOut == 0 {
		t.Fatalf("no rows counted out: %+v", st)
	}
	waitFor(t, "every transaction decided", func() bool { return b.OpenTransactions() == 0 })
}

// trickleTopic is fillTopic with the input arriving over time: chunk events per queue at
// once, then a pause. The channel is closed once all is in.
func trickleTopic(t *testing.T, b *broker.Broker, perQueue, chunk int, pause time.Duration) ([]event4, <-chan struct{}) {
	if err := b.CreateTopic("events", 3); err != nil {
		t.Fatal(err)
	}
	var all []event4
	bodies := make([][]broker.Message, 3)
	for q := range bodies {
		evs := genEvents(int64(20+q), perQueue, 30, 200)
		for _, e := range evs {
			bodies[q] = append(bodies[q], broker.Message{Body: []byte(e.body())})
		}
		all = append(all, evs...)
	}
	done := make(chan struct{})
	appendChunk := func(i int) error {
		for q := range bodies {
			if _, err := b.Append("events", q, bodies[q][i:min(i+chunk, perQueue)]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := appendChunk(0); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		for i := chunk; i < perQueue; i += chunk {
			time.Sleep(pause)
			if err := appendChunk(i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	return all, done
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// crashSink stands for a process killed at one moment: from the crash on nothing it does
// reaches the broker or the store (the job's commits fail, its transactional writes and
// ends are dropped, its close only stops answering check-backs). The crash comes when the
// writer is asked to end a transaction, the crashAt-th or a later one, while rows of a
// later transaction are prepared (it waits a little for them, and lets the end through
// when none come): that epoch's checkpoint has committed, its end never reaches the
// broker, and an uncommitted transaction is open too.
type crashSink struct {
	*connectors.BrokerSink
	c *crash
}

type crash struct {
	crashAt  int
	crashed  atomic.Bool
	mu       sync.Mutex
	prepared []string // transactions prepared, in order of first prepare
	ended    []string // transactions committed before the crash
	at       string   // the transaction whose end the crash dropped
	next     chan struct{}
	ends     int
}

var errCrashed = errors.New("crashed")

func (s crashSink) Transactional(ctx context.Context, group string, check connectors.TxCheck) (connectors.TxWriter, error) {
	w, err := s.BrokerSink.Transactional(ctx, group, check)
	if err != nil {
		return nil, err
	}
	return &crashWriter{TxWriter: w, c: s.c}, nil
}

type crashWriter struct {
	connectors.TxWriter
	c *crash
}

func (w *crashWriter) Prepare(ctx context.Context, txn string, msgs []connectors.Message) error {
	if w.c.crashed.Load() {
		return nil
	}
	if err := w.TxWriter.Prepare(ctx, txn, msgs); err != nil {
		return err
	}
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if !slices.Contains(w.c.prepared, txn) {
		w.c.prepared = append(w.c.prepared, txn)
		if w.c.next != nil {
			close(w.c.next)
			w.c.next = nil
		}
	}
	return nil
}

func (w *crashWriter) End(ctx context.Context, txn string, commit bool) error {
	if w.c.crashed.Load() {
		return nil
	}
	w.c.mu.Lock()
	w.c.ends++
	if w.c.ends >= w.c.crashAt && commit {
		next := make(chan struct{})
		if w.c.prepared[len(w.c.prepared)-1] != txn {
			close(next) // rows of a later epoch are prepared already
		} else {
			w.c.next = next
		}
		w.c.mu.Unlock()
		select {
		case <-next:
			w.c.mu.Lock()
			w.c.at = txn
			w.c.mu.Unlock()
			w.c.crashed.Store(true)
			return nil
		case <-time.After(500 * time.Millisecond):
			w.c.mu.Lock()
			w.c.next = nil
		}
	}
	w.c.mu.Unlock()
	if err := w.TxWriter.End(ctx, txn, commit); err != nil {
		return err
	}
	w.c.mu.Lock()
	w.c.ended = append(w.c.ended, txn)
	w.c.mu.Unlock()
	return nil
}

// Close stops answering check-backs, as the death of the process would.
func (w *crashWriter) Close() error { return w.TxWriter.Close() }

// TestTxSinkCrashRecovery: the process dies after an epoch's checkpoint committed and
// before its transaction was ended, with the next epoch's rows prepared. On restart the
// recorded epoch is committed (its rows appear once), the open transaction of the dead run
// is rolled back by the broker's check-back (none of its rows is ever visible), and the
// output is exactly the batch result.
func TestTxSinkCrashRecovery(t *testing.T) {
	b := txBroker(t)
	all, filled := trickleTopic(t, b, 6000, 200, 20*time.Millisecond)
	want := expectRows(closedBy(tumbleGroups(all), maxTs(all)), true, countSumText)
	store := state.NewMemory()
	c := &crash{crashAt: 2}
	env := brokerEnv(b, store, true)
	open := env.OpenSink
	env.OpenSink = func(spec planner.SinkSpec) (connectors.Sink, error) {
		s, err := open(spec)
		if bs, ok := s.(*connectors.BrokerSink); ok && spec.Stream == "out" {
			return crashSink{BrokerSink: bs, c: c}, nil
		}
		return s, err
	}
	env.Commit = func(cp *CheckpointInfo) error {
		if c.crashed.Load() {
			return errCrashed
		}
		return store.Write(cp.State)
	}
	j, err := Start(context.Background(), "bj", txPlan(), env)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); !errors.Is(err, errCrashed) {
		t.Fatalf("the crashed job ended with %v", err)
	}
	<-filled
	c.mu.Lock()
	committed := append(slices.Clone(c.ended), c.at)
	var rolledBack []string
	for _, txn := range c.prepared {
		if !slices.Contains(committed, txn) {
			rolledBack = append(rolledBack, txn)
		}
	}
	c.mu.Unlock()
	if len(rolledBack) == 0 || c.at == "" {
		t.Fatalf("the crash left no open transaction (prepared %v, committed %v)", c.prepared, committed)
	}
	if b.OpenTransactions() == 0 {
		t.Fatal("no prepared message open after the crash")
	}
	j, err = Start(context.Background(), "bj", txPlan(), brokerEnv(b, store, true))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	got := waitOutput(t, b, len(want))
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}
	waitFor(t, "the dead run's transactions rolled back", func() bool { return b.OpenTransactions() == 0 })
	seen := map[string]int{}
	for _, m := range outMessages(t, b) {
		seen[m.Properties[connectors.PropTxn]]++
	}
	for _, txn := range rolledBack {
		if seen[txn] > 0 {
			t.Errorf("%d rows of the uncommitted transaction %s are visible", seen[txn], txn)
		}
	}
	if seen[c.at] == 0 {
		t.Errorf("the transaction %s, committed by its checkpoint but not ended before the crash, was not committed on restart", c.at)
	}
}

// TestTxCheck: the check-back answers. A transaction of the running sink is unknown (it ends
// it itself), so is any before recovery is done and a name that is not one; after recovery,
// one of another run — an epoch that never committed, or one the recovery already ended —
// is rolled back. Through the broker: prepared messages of the job's group naming an
// unknown run are rolled back once the job runs; one with no transaction name stays open.
func TestTxCheck(t *testing.T) {
	tx := &txOutput{job: "j", run: "00000000000000aa", logf: func(string, ...any) {}}
	cases := []struct {
		txn   string
		ready bool
		want  connectors.TxState
	}{
		{"00000000000000aa/5", true, connectors.TxUnknown},
		{"00000000000000bb/5", false, connectors.TxUnknown},
		{"00000000000000bb/5", true, connectors.TxRollback},
		{"00000000000000bb/0", true, connectors.TxUnknown},
		{"", true, connectors.TxUnknown},
		{"bb/5", true, connectors.TxUnknown},
		{"00000000000000bb/x", true, connectors.TxUnknown},
	}
	for _, c := range cases {
		tx.ready.Store(c.ready)
		if got := tx.check(c.txn); got != c.want {
			t.Errorf("check(%q) ready=%v = %v, want %v", c.txn, c.ready, got, c.want)
		}
	}

	b := txBroker(t)
	fillTopic(t, b, 10)
	if err := b.CreateTopic("out", 2); err != nil {
		t.Fatal(err)
	}
	group := TxGroup("bj", 1, "")
	stray := []broker.Message{
		{Body: []byte("unknown run"), Properties: map[string]string{connectors.PropTxn: "0123456789abcdef/3"}},
		{Body: []byte("unknown epoch"), Properties: map[string]string{connectors.PropTxn: "0123456789abcdef/99"}},
	}
	if _, err := b.Prepare(group, "out", 0, stray); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Prepare(group, "out", 1, []broker.Message{{Body: []byte("no name")}}); err != nil {
		t.Fatal(err)
	}
	j, err := Start(context.Background(), "bj", txPlan(), brokerEnv(b, state.NewMemory(), true))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	// The job's own output is open until its checkpoints commit it: wait until one open
	// transaction is left and stays so through several more checks (the one without a name,
	// which no check decides).
	var since time.Time
	waitFor(t, "the unknown run's messages rolled back, the one without a name left open", func() bool {
		if b.OpenTransactions() != 1 {
			since = time.Time{}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= 600*time.Millisecond
	})
	for _, m := range outMessages(t, b) {
		if s := string(m.Body); s == "unknown run" || s == "unknown epoch" || s == "no name" {
			t.Fatalf("%q is visible", s)
		}
	}
}

// TestTxSinkNeedsTopic: delivery 'transactional' on a sink that cannot write
// transactionally is refused when the job starts.
func TestTxSinkNeedsTopic(t *testing.T) {
	p := txPlan()
	env := brokerEnv(txBroker(t), state.NewMemory(), false)
	env.OpenSink = func(planner.SinkSpec) (connectors.Sink, error) { return &memSink{}, nil }
	_, err := Start(context.Background(), "bj", p, env)
	var se *SinkError
	if !errors.As(err, &se) {
		t.Fatalf("Start: %v", err)
	}
}

// FuzzParseTxn: a transaction name from a broker's check-back is parsed without panicking,
// and what parses prints back the same.
func FuzzParseTxn(f *testing.F) {
	f.Add("00000000000000aa/5")
	f.Add("zz/1")
	f.Add("0123456789abcdef/-1")
	f.Fuzz(func(t *testing.T, s string) {
		run, tag, ok := parseTxn(s)
		if ok && txnName(run, tag) != s {
			if r2, t2, ok2 := parseTxn(txnName(run, tag)); !ok2 || r2 != run || t2 != tag {
				t.Fatalf("%q parses to %q %d, which does not print back", s, run, tag)
			}
		}
	})
}

// BenchmarkDelivery: a job that copies a 3-queue topic to a 3-queue topic (every event is
// an output row), checkpoints every 200 ms, memory state; the source is read in process,
// the sink topic is written in process ("inproc", 300,000 events) or over the RocketMQ
// protocol through the broker's loopback listeners ("protocol", 30,000 events), its rows
// reaching the topic through the outbox or as transactions. Reports events/s until every
// row is committed to the sink topic, and events per CPU-second of the whole process.
func BenchmarkDelivery(b *testing.B) {
	for _, path := range []string{"inproc", "protocol"} {
		for _, delivery := range []string{DeliveryOutbox, DeliveryTransactional} {
			b.Run(path+"/"+delivery, func(b *testing.B) { benchDelivery(b, path == "protocol", delivery) })
		}
	}
}

func benchDelivery(b *testing.B, protocol bool, delivery string) {
	perQueue := 100_000
	if protocol {
		perQueue = 10_000
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		br, err := broker.Open(broker.Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		all := fillTopic(b, br, perQueue)
		src := sourceSpec(map[string]string{"queues": "3"}, 200)
		src.Connector = "broker"
		sink := sinkSpec(eventSchema)
		sink.Connector = "broker"
		sink.Options = testOptions(map[string]string{"format": "test", "queues": "3", "connector": "broker", DeliveryOption: delivery})
		sink.KeyColumns = []int{0}
		plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, src, sink)}}
		env := brokerEnv(br, state.NewMemory(), false)
		if protocol {
			if err := br.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
				b.Fatal(err)
			}
			ns, _ := br.Addrs()
			env.OpenSink = func(spec planner.SinkSpec) (connectors.Sink, error) {
				return connectors.OpenRocketMQSink(context.Background(),
					connectors.RocketMQConfig{NameServer: ns, CreateTopics: true, Group: "bench"}, spec.Stream, 3)
			}
		}
		c0 := cpuTime()
		b.StartTimer()
		start := time.Now()
		j, err := Start(context.Background(), "bj", plan, env)
		if err != nil {
			b.Fatal(err)
		}
		for j.Stats().RecordsOut < int64(len(all)) {
			select {
			case <-j.Done():
				b.Fatalf("the job ended: %v", j.Wait())
			case <-time.After(2 * time.Millisecond):
			}
		}
		el := time.Since(start)
		b.StopTimer()
		cpu := cpuTime() - c0
		j.Stop()
		if n := len(topicBodies(b, br, "out")); n != len(all) {
			b.Fatalf("%d rows in the sink topic, want %d", n, len(all))
		}
		b.ReportMetric(float64(len(all))/el.Seconds(), "events/s")
		b.ReportMetric(float64(len(all))/cpu.Seconds(), "events/cpu-s")
		br.Close()
	}
}
