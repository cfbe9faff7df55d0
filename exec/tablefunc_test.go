package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"rsql/broker"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// everyTs3 is a deterministic table function: an event gives ts mod 3 rows (0, 1 or 2),
// numbered from 1.
func everyTs3(in sql.Row, emit func([]sql.Value)) *sql.Error {
	for i := int64(1); i <= in[2].I%3; i++ {
		emit([]sql.Value{sql.BigInt(i)})
	}
	return nil
}

// A job whose stage 0 turns each event into 0, 1 or 2 rows with a table function before
// the shuffle topic, stopped twice without a checkpoint in the middle of the input and
// restarted: the rows of one event share its offset and are told apart by their order,
// so the windows count every row once.
func TestTableFunctionBeforeShuffleExactlyOnce(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	all := fillTopic(t, b, 4000)
	var rows []event4
	for _, e := range all {
		for i := int64(1); i <= e.ts%3; i++ {
			rows = append(rows, e)
		}
	}
	want := expectRows(closedBy(tumbleGroups(rows), maxTs(all)), true, countSumText)
	plan := func() *planner.Physical {
		w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
		node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
			Aggs: countSum, Schema: aggSchema(1, true, countSum)}
		src := sourceSpec(map[string]string{"queues": "3"}, 200)
		src.Connector = "broker"
		sink := sinkSpec(node.Schema)
		sink.Connector = "broker"
		sink.KeyColumns = []int{0}
		row := append(append(sql.Schema{}, eventSchema...), sql.Column{Name: "k", Type: sql.TypeBigInt})
		tf := &planner.TableFuncNode{Func: everyTs3, NCols: 1, Schema: row, Text: "every_ts3()", Name: "every_ts3", Deterministic: true}
		return &planner.Physical{Stages: []*planner.Stage{
			planner.Chain(0, src, planner.SinkSpec{}, tf, &planner.ExchangeNode{Topic: "bj-0-shuffle", Keys: []planner.Evaluator{col(0)}}),
			planner.Chain(1, planner.SourceSpec{Stream: "bj-0-shuffle", Connector: "broker", Schema: row, EventTime: 2, FromStage: 0}, sink, node),
		}}
	}
	store := state.NewMemory()
	for run := 0; run < 2; run++ {
		j, err := Start(context.Background(), "bj", plan(), brokerEnv(b, store, true))
		if err != nil {
			t.Fatal(err)
		}
		target := int64(len(all) / 3 * (run + 1))
		for j.Stats().RecordsIn < target && j.Stats().Epoch < int64(2*(run+1)) {
			time.Sleep(5 * time.Millisecond)
		}
		j.Stop()
	}
	j, err := Start(context.Background(), "bj", plan(), brokerEnv(b, store, true))
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
}

// batchSizes is an Emitter that records the size of each batch after passing it to c.
type batchSizes struct {
	c     collect
	sizes []int
}

func (b *batchSizes) Emit(x *Batch) error {
	b.sizes = append(b.sizes, len(x.Rows))
	return b.c.Emit(x)
}

// The operator over rows giving 0, 1 or 2500 rows, an outer row without a match, and a
// failing call: batches stay at most tableFuncBatch rows (also in the middle of one
// call), every row carries its input's offset, and the failing row gives nothing.
func TestTableFuncOperator(t *testing.T) {
	fn := func(in sql.Row, emit func([]sql.Value)) *sql.Error {
		n := in[0].I
		if n < 0 {
			return sql.Errorf(sql.CodeInvalidParameter, "negative %d", n)
		}
		for i := int64(0); i < n; i++ {
			emit([]sql.Value{sql.BigInt(i)})
		}
		return nil
	}
	for _, outer := range []bool{false, true} {
		op := &tableFuncOp{n: &planner.TableFuncNode{Func: fn, NCols: 1, Outer: outer, Name: "f"}, ctx: context.Background()}
		in := []int64{1, 0, 2500, 2}
		b := &Batch{Split: "s"}
		for i, n := range in {
			b.Rows = append(b.Rows, sql.Row{sql.BigInt(n)})
			b.Offsets = append(b.Offsets, int64(100+i))
		}
		var out batchSizes
		if err := op.Process(0, b, &out); err != nil {
			t.Fatal(err)
		}
		var want []string
		var offs []int64
		for i, n := range in {
			if n == 0 && outer {
				want = append(want, "0,NULL")
				offs = append(offs, int64(100+i))
			}
			for k := int64(0); k < n; k++ {
				want = append(want, fmt.Sprintf("%d,%d", n, k))
				offs = append(offs, int64(100+i))
			}
		}
		if strings.Join(out.c.rows, "|") != strings.Join(want, "|") || fmt.Sprint(out.c.offs) != fmt.Sprint(offs) {
			t.Fatalf("outer=%v: %d rows, want %d (offsets equal: %v)", outer, len(out.c.rows), len(want), fmt.Sprint(out.c.offs) == fmt.Sprint(offs))
		}
		for _, s := range out.sizes {
			if s > tableFuncBatch || s == 0 {
				t.Fatalf("a batch of %d rows: %v", s, out.sizes)
			}
		}
		if len(out.sizes) < 3 {
			t.Errorf("batches %v: the 2,503 rows were not passed on in parts", out.sizes)
		}
	}
	// A failing call: its row goes to the bad-record path (without a stage: the error).
	op := &tableFuncOp{n: &planner.TableFuncNode{Func: fn, NCols: 1, Name: "f"}, ctx: context.Background()}
	var out batchSizes
	err := op.Process(0, &Batch{Split: "s", Rows: []sql.Row{{sql.BigInt(2)}, {sql.BigInt(-1)}}}, &out)
	var re *RowError
	if !errors.As(err, &re) || re.Err.Code != sql.CodeInvalidParameter || re.Operator != "table function f" {
		t.Fatalf("failing call: %v", err)
	}
}
