package exec

import (
	"context"
	"encoding/binary"
	"sort"
	"sync"
	"testing"
	"time"

	"rsql/broker"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Units of one job run by two Jobs ("instances") with stores of their own over one broker:
// the source stage's splits and the aggregation stage's shuffle splits are divided between
// them (Env.OwnsUnit); while input is read, a source unit and a shuffle unit move from A to
// B (RemoveUnit, the unit's committed keys copied to B's store as the shared checkpoint store
// would hand them over, AddUnit); then B stops without a checkpoint (a crash) and A takes
// all of B's units over from B's last committed state. The sink topic holds exactly the
// windows a batch computation gives.

// ownership is a mutable set of units, safe for concurrent use.
type ownership struct {
	mu sync.Mutex
	m  map[Unit]bool
}

func (o *ownership) owns(u Unit) bool { o.mu.Lock(); defer o.mu.Unlock(); return o.m[u] }
func (o *ownership) set(u Unit, v bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[u] = v
}

// copyUnit replaces dst's keys of unit u of job with src's (the hand-over a shared
// checkpoint store does).
func copyUnit(t *testing.T, job string, u Unit, src, dst state.Store) {
	t.Helper()
	b := &state.Batch{}
	prefix := state.OperatorPrefix(nil, job, "")[:len(state.OperatorPrefix(nil, job, ""))-1]
	dst.Scan(prefix, func(k, _ []byte) error {
		if ku, ok := KeyUnit(job, k); ok && ku == u {
			b.Delete(append([]byte(nil), k...))
		}
		return nil
	})
	n := 0
	src.Scan(prefix, func(k, v []byte) error {
		if ku, ok := KeyUnit(job, k); ok && ku == u {
			b.Put(append([]byte(nil), k...), append([]byte(nil), v...))
			n++
		}
		return nil
	})
	if n == 0 {
		t.Fatalf("unit %v has no committed keys", u)
	}
	if err := dst.Write(b); err != nil {
		t.Fatal(err)
	}
}

func TestUnitsMoveBetweenJobs(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	all := fillTopic(t, b, 5000)
	// Closing event far behind the input: every window before it closes once each
	// instance's splits are read, whoever owns them.
	flushTs := (maxTs(all)/1000)*1000 + 5500
	want := expectRows(closedBy(tumbleGroups(all), flushTs), true, countSumText)

	plan := func() *planner.Physical { return brokerPlan() }
	units, err := Units(context.Background(), plan(), DefaultExchangeQueues, func(context.Context, planner.SourceSpec) ([]string, error) {
		return []string{"0", "1", "2"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 3+DefaultExchangeQueues {
		t.Fatalf("units %v", units)
	}
	a, bo := &ownership{m: map[Unit]bool{}}, &ownership{m: map[Unit]bool{}}
	for i, u := range units {
		if i%2 == 0 {
			a.set(u, true)
		} else {
			bo.set(u, true)
		}
	}
	storeA, storeB := state.NewMemory(), state.NewMemory()
	// B's checkpoint epochs are its own (the server gives each instance a range), so the
	// outbox ids of a unit's entries never repeat across its owners.
	eb := &state.Batch{}
	eb.Put(EpochKey("bj"), binary.AppendVarint(nil, 1<<40))
	if err := storeB.Write(eb); err != nil {
		t.Fatal(err)
	}
	envA, envB := brokerEnv(b, storeA, true), brokerEnv(b, storeB, true)
	envA.OwnsUnit, envB.OwnsUnit = a.owns, bo.owns
	ctx := context.Background()
	ja, err := Start(ctx, "bj", plan(), envA)
	if err != nil {
		t.Fatal(err)
	}
	defer ja.Stop()
	jb, err := Start(ctx, "bj", plan(), envB)
	if err != nil {
		t.Fatal(err)
	}
	defer jb.Stop()
	for deadline := time.Now().Add(10 * time.Second); len(ja.Units())+len(jb.Units()) != len(units); {
		if time.Now().After(deadline) {
			t.Fatalf("the jobs run %v and %v, want %d units between them", ja.Units(), jb.Units(), len(units))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for ja.Stats().RecordsIn+jb.Stats().RecordsIn < int64(len(all)/3) {
		time.Sleep(5 * time.Millisecond)
	}
	// Move a source unit and a shuffle unit (with the sink's outbox) from A to B.
	for _, u := range []Unit{{0, "0"}, {1, "1"}} {
		if !a.owns(u) {
			t.Fatalf("A does not own %v", u)
		}
		if err := ja.RemoveUnit(ctx, u); err != nil {
			t.Fatal(err)
		}
		a.set(u, false)
		copyUnit(t, "bj", u, storeA, storeB)
		bo.set(u, true)
		if err := jb.AddUnit(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for ja.Stats().RecordsIn+jb.Stats().RecordsIn < int64(2*len(all)/3) || jb.Stats().Epoch < 1<<40+2 {
		time.Sleep(5 * time.Millisecond)
	}
	// B dies: what it did since its last checkpoint is lost; A takes its units over.
	jb.Stop()
	for _, u := range units {
		if bo.owns(u) {
			copyUnit(t, "bj", u, storeB, storeA)
			a.set(u, true)
			if err := ja.AddUnit(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := ja.Units()
	sort.Slice(got, func(i, j int) bool { return got[i].String() < got[j].String() })
	if len(got) != len(units) {
		t.Fatalf("A runs %v after the takeover", got)
	}
	// The closing event, in every source queue.
	for q := 0; q < 3; q++ {
		e := event4{user: "flush", amount: 1, ts: flushTs, n: 1}
		if _, err := b.Append("events", q, []broker.Message{{Body: []byte(e.body())}}); err != nil {
			t.Fatal(err)
		}
	}
	out := waitOutput(t, b, len(want))
	if d := diff(out, want); d != "" {
		t.Fatal(d)
	}
	if n := ja.Stats().Late; n != 0 {
		t.Fatalf("%d late rows", n)
	}
}

// A stage with two inputs read through shuffle topics: the split of one name of both
// topics is one unit (a union of two streams, each aggregated by key after it).
func TestUnitsOfTwoShuffleInputs(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	all := fillTopic(t, b, 3000)
	if err := b.CreateTopic("events2", 3); err != nil {
		t.Fatal(err)
	}
	second := genEvents(99, 3000, 30, 200)
	for i := 0; i < len(second); i += 500 {
		var msgs []broker.Message
		for _, e := range second[i:min(i+500, len(second))] {
			msgs = append(msgs, broker.Message{Body: []byte(e.body())})
		}
		if _, err := b.Append("events2", (i/500)%3, msgs); err != nil {
			t.Fatal(err)
		}
	}
	flushTs := (max(maxTs(all), maxTs(second))/1000)*1000 + 5500
	want := expectRows(closedBy(tumbleGroups(all, second), flushTs), true, countSumText)

	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: countSum, Schema: aggSchema(1, true, countSum)}
	src1 := sourceSpec(map[string]string{"queues": "3"}, 200)
	src1.Connector = "broker"
	src2 := src1
	src2.Stream = "events2"
	sink := sinkSpec(node.Schema)
	sink.Connector = "broker"
	sink.KeyColumns = []int{0}
	down := &planner.Stage{ID: 2, Inputs: []planner.SourceSpec{
		{Stream: "bu-0-shuffle", Connector: "broker", Schema: eventSchema, EventTime: 2, FromStage: 0},
		{Stream: "bu-1-shuffle", Connector: "broker", Schema: eventSchema, EventTime: 2, FromStage: 1},
	}, Sink: sink}
	down.Ops = []planner.Op{
		{Node: &planner.UnionNode{Schema: eventSchema}, Inputs: []planner.Port{planner.FromInput(0), planner.FromInput(1)}},
		{Node: node, Inputs: []planner.Port{planner.FromOp(0)}},
	}
	down.Out = planner.FromOp(1)
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, src1, planner.SinkSpec{}, &planner.ExchangeNode{Topic: "bu-0-shuffle", Keys: []planner.Evaluator{col(0)}}),
		planner.Chain(1, src2, planner.SinkSpec{}, &planner.ExchangeNode{Topic: "bu-1-shuffle", Keys: []planner.Evaluator{col(0)}}),
		down,
	}}
	if err := Divisible(plan, Env{ShuffleTopics: true}); err != nil {
		t.Fatal(err)
	}
	units, err := Units(context.Background(), plan, DefaultExchangeQueues, func(context.Context, planner.SourceSpec) ([]string, error) {
		return []string{"0", "1", "2"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var downUnits []Unit
	for _, u := range units {
		if u.Stage == 2 {
			downUnits = append(downUnits, u)
		}
	}
	if len(downUnits) != DefaultExchangeQueues {
		t.Fatalf("the two-input stage has units %v, want one per queue", downUnits)
	}
	own := &ownership{m: map[Unit]bool{}}
	for _, u := range units {
		own.set(u, u != downUnits[1])
	}
	store := state.NewMemory()
	env := brokerEnv(b, store, true)
	env.OwnsUnit = own.owns
	ctx := context.Background()
	j, err := Start(ctx, "bu", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	for j.Stats().RecordsIn < int64(len(all)) {
		time.Sleep(5 * time.Millisecond)
	}
	// The left-out unit joins late, and one unit is removed and added again.
	if err := j.AddUnit(ctx, downUnits[1]); err != nil {
		t.Fatal(err)
	}
	if err := j.RemoveUnit(ctx, downUnits[2]); err != nil {
		t.Fatal(err)
	}
	if err := j.AddUnit(ctx, downUnits[2]); err != nil {
		t.Fatal(err)
	}
	for q := 0; q < 3; q++ {
		e := event4{user: "flush", amount: 1, ts: flushTs, n: 1}
		for _, topic := range []string{"events", "events2"} {
			if _, err := b.Append(topic, q, []broker.Message{{Body: []byte(e.body())}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := waitOutput(t, b, len(want))
	if d := diff(out, want); d != "" {
		t.Fatal(d)
	}
}
