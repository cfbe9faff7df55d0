package exec

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"rsql/broker"
	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Jobs over the in-process broker: source topic → shuffle topic → windowed aggregate →
// sink topic, as the server runs them.

func brokerEnv(b *broker.Broker, store state.Store, shuffle bool) Env {
	return Env{
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			q := spec.Options.Queues
			return connectors.OpenBrokerSource(b, spec.Stream, q)
		},
		OpenSink: func(spec planner.SinkSpec) (connectors.Sink, error) {
			q := spec.Options.Queues
			return connectors.OpenBrokerSink(b, spec.Stream, q)
		},
		NewFormat:          newTestFormat,
		Store:              store,
		ShuffleTopics:      shuffle,
		CheckpointInterval: 200 * time.Millisecond,
		IdleTimeout:        300 * time.Millisecond,
		Tick:               20 * time.Millisecond,
	}
}

func brokerPlan() *planner.Physical {
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: countSum, Schema: aggSchema(1, true, countSum)}
	src := sourceSpec(map[string]string{"queues": "3"}, 200)
	src.Connector = "broker"
	sink := sinkSpec(node.Schema)
	sink.Connector = "broker"
	sink.KeyColumns = []int{0}
	return &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, src, planner.SinkSpec{}, &planner.ExchangeNode{Topic: "bj-0-shuffle", Keys: []planner.Evaluator{col(0)}}),
		planner.Chain(1, planner.SourceSpec{Stream: "bj-0-shuffle", Connector: "broker", Schema: eventSchema, EventTime: 2, FromStage: 0}, sink, node),
	}}
}

// openBrokerTopic opens a broker in a temporary directory, closed when the test ends, with
// a topic of the given queues.
func openBrokerTopic(t testing.TB, topic string, queues int) *broker.Broker {
	t.Helper()
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.CreateTopic(topic, queues); err != nil {
		t.Fatal(err)
	}
	return b
}

// fillTopic appends per queue events whose disorder stays within the 200 ms delay.
func fillTopic(t testing.TB, b *broker.Broker, perQueue int) []event4 {
	if err := b.CreateTopic("events", 3); err != nil {
		t.Fatal(err)
	}
	var all []event4
	for q := 0; q < 3; q++ {
		evs := genEvents(int64(20+q), perQueue, 30, 200)
		msgs := make([]broker.Message, 0, 512)
		for i, e := range evs {
			msgs = append(msgs, broker.Message{Body: []byte(e.body())})
			if len(msgs) == cap(msgs) || i == len(evs)-1 {
				if _, err := b.Append("events", q, msgs); err != nil {
					t.Fatal(err)
				}
				msgs = msgs[:0]
			}
		}
		all = append(all, evs...)
	}
	return all
}

func topicBodies(t testing.TB, b *broker.Broker, topic string) []string {
	var out []string
	ti, ok := b.Topic(topic)
	if !ok {
		return nil
	}
	for q := 0; q < ti.Queues; q++ {
		for off := int64(0); ; {
			msgs, next, err := b.Pull(context.Background(), topic, q, off, 256, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				out = append(out, string(m.Body))
			}
			if len(msgs) == 0 || next <= off {
				break
			}
			off = next
		}
	}
	sort.Strings(out)
	return out
}

// waitOutput waits until the sink topic holds n rows and stays so for a while.
func waitOutput(t *testing.T, b *broker.Broker, n int) []string {
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := topicBodies(t, b, "out")
		if len(got) >= n {
			time.Sleep(500 * time.Millisecond)
			return topicBodies(t, b, "out")
		}
		if time.Now().After(deadline) {
			t.Fatalf("sink topic has %d rows, want %d", len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A job over topics with a shuffle topic, stopped twice without a checkpoint in the middle
// of the input and restarted on the same store: the sink topic holds every window once.
func TestBrokerShuffleStopRestartExactlyOnce(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	all := fillTopic(t, b, 6000)
	// The topic is a replay (its event times are far from now): once every queue is idle
	// the watermark goes to the largest event time and no further, so the windows that
	// end after it stay open.
	groups := closedBy(tumbleGroups(all), maxTs(all))
	want := expectRows(groups, true, countSumText)
	store := state.NewMemory()
	for run := 0; run < 2; run++ {
		j, err := Start(context.Background(), "bj", brokerPlan(), brokerEnv(b, store, true))
		if err != nil {
			t.Fatal(err)
		}
		// Stop once some input was read and a checkpoint or two committed.
		target := int64(len(all) / 3 * (run + 1))
		for j.Stats().RecordsIn < target && j.Stats().Epoch < int64(2*(run+1)) {
			time.Sleep(5 * time.Millisecond)
		}
		j.Stop()
	}
	j, err := Start(context.Background(), "bj", brokerPlan(), brokerEnv(b, store, true))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	got := waitOutput(t, b, len(want))
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}
	if n := len(topicBodies(t, b, "bj-0-shuffle")); n == 0 {
		t.Fatal("nothing went through the shuffle topic")
	}
	if strings.Join(got, "\n") == "" {
		t.Fatal("no output")
	}
}

// A job over topics whose source declares a watermark delay larger than the alignment
// window (30 s against 10 s): the stage after the shuffle topic stands in the alignment
// floor at its input watermark plus that delay, so the source readers are not held a delay
// behind themselves — they read everything, and the result is exact.
func TestBrokerShuffleDelayBeyondAlignmentWindow(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	all := fillTopic(t, b, 6000)
	groups := closedBy(tumbleGroups(all), maxTs(all))
	want := expectRows(groups, true, countSumText)
	plan := brokerPlan()
	plan.Stages[0].Inputs[0].WatermarkDelay = 30_000
	env := brokerEnv(b, state.NewMemory(), true)
	env.AlignmentWindow = 10 * time.Second
	j, err := Start(context.Background(), "bj", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	got := waitOutput(t, b, len(want))
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}
	if n := j.Stats().RecordsIn; n != int64(len(all)) {
		t.Fatalf("%d records read of %d", n, len(all))
	}
}

// BenchmarkTopicToTopic: events from a 3-queue topic through a tumbling COUNT/SUM by key to
// a sink topic, with the exchange in process or through a shuffle topic; memory state,
// checkpoints every 200 ms. Reports events/s until the last window is out.
func BenchmarkTopicToTopic(b *testing.B) {
	for _, shuffle := range []bool{false, true} {
		b.Run(map[bool]string{false: "channel", true: "shuffle-topic"}[shuffle], func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				br, err := broker.Open(broker.Config{Dir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				all := fillTopic(b, br, 100_000)
				b.StartTimer()
				start := time.Now()
				j, err := Start(context.Background(), "bj", brokerPlan(), brokerEnv(br, state.NewMemory(), shuffle))
				if err != nil {
					b.Fatal(err)
				}
				for {
					st := j.Stats()
					done := st.RecordsIn == int64(len(all))
					for _, sp := range st.Splits {
						// Splits of in-process edges cannot tell their lag (-1).
						done = done && (sp.Lag == 0 || sp.Stream == "")
					}
					if done {
						break
					}
					time.Sleep(2 * time.Millisecond)
				}
				el := time.Since(start)
				j.Stop()
				b.ReportMetric(float64(len(all))/el.Seconds(), "events/s")
				br.Close()
			}
		})
	}
}
