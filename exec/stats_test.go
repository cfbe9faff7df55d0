package exec

import (
	"testing"

	"rsql/planner"
	"rsql/sql"
)

// Row counts per port: a filter's output is the rows that pass it, an exchange's rows all
// reach the next stage, an aggregation emits its groups.
func TestStageStatsCountPorts(t *testing.T) {
	src := newMemSource(true, 41, "0", "1")
	var all []event4
	for i, s := range []string{"0", "1"} {
		evs := genEvents(int64(20+i), 3000, 30, 0)
		feedAll(src, s, evs)
		all = append(all, evs...)
	}
	pass := 0
	for _, e := range all {
		if e.amount > 50 {
			pass++
		}
	}
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	agg := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: countSum, Schema: aggSchema(1, true, countSum)}
	filter := &planner.FilterNode{Pred: func(r sql.Row) sql.Value { return sql.Bool(r[1].F() > 50) }}
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, sourceSpec(nil, 0), planner.SinkSpec{}, filter, &planner.ExchangeNode{Topic: "job-0-shuffle", Keys: []planner.Evaluator{col(0)}}),
		planner.Chain(1, planner.SourceSpec{Stream: "job-0-shuffle", Schema: eventSchema, EventTime: 2, FromStage: 0}, sinkSpec(agg.Schema), agg),
	}}
	var sk sinks
	env := testEnv(src, &sk)
	env.ExchangeQueues = 2
	j := runJob(t, "job", plan, env)
	if j.Plan() != plan {
		t.Fatal("Plan() is not the plan the job runs")
	}
	ss := j.StageStats()
	if len(ss) != 2 || ss[0].Stage != 0 || ss[1].Stage != 1 {
		t.Fatalf("stages %+v", ss)
	}
	groups := len(sk.get("out").bodies())
	if s := ss[0]; s.InputRows[0] != int64(len(all)) || s.OpRows[0] != int64(pass) || s.OutputRows != int64(pass) {
		t.Errorf("stage 0: in %v ops %v out %d; want in %d, filter %d", s.InputRows, s.OpRows, s.OutputRows, len(all), pass)
	}
	if s := ss[1]; s.InputRows[0] != int64(pass) || s.OpRows[0] != int64(groups) || s.OutputRows != int64(groups) || groups == 0 {
		t.Errorf("stage 1: in %v ops %v out %d; want in %d, aggregate %d", s.InputRows, s.OpRows, s.OutputRows, pass, groups)
	}
	if ss[1].Watermark != MaxWatermark {
		t.Errorf("finished stage's watermark %d", ss[1].Watermark)
	}
}

// discardOut is a stage output that drops its rows.
type discardOut struct{ rows int64 }

func (d *discardOut) Process(b *Batch) error { d.rows += int64(len(b.Rows)); return nil }
func (d *discardOut) Watermark(int64) error  { return nil }
func (d *discardOut) Control(*Control) error { return nil }
func (d *discardOut) End() error             { return nil }
func (d *discardOut) Close() error           { return nil }

// BenchmarkStageEmitters is BenchmarkFilterProject through a stage's emitters, which count
// the rows of every port (Job.StageStats): input → filter → project → output.
func BenchmarkStageEmitters(b *testing.B) {
	rows := benchRows(1<<16, 1000)
	out := &discardOut{}
	st := &stage{out: out}
	st.nodes = []*opNode{
		{op: &filterOp{pred: func(r sql.Row) sql.Value { return sql.Bool(r[1].F() > 25) }}},
		{op: &projectOp{exprs: []planner.Evaluator{col(0), func(r sql.Row) sql.Value { return sql.Double(r[1].F() * 2) }, col(3)}}},
	}
	in := &emitter{st: st, op: 0}
	st.nodes[0].emit = &emitter{st: st, op: 1}
	st.nodes[1].emit = &emitter{st: st, op: -1}
	batch := &Batch{Split: "0", Rows: make([]sql.Row, 0, benchBatch)}
	report := startRate(b)
	for done := 0; done < b.N; {
		n := min(benchBatch, b.N-done)
		off := done % len(rows)
		if off+n > len(rows) {
			n = len(rows) - off
		}
		batch.Rows = append(batch.Rows[:0], rows[off:off+n]...)
		if err := in.Emit(batch); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	report()
	if in.rows.Load() != int64(b.N) || st.nodes[1].emit.rows.Load() != out.rows {
		b.Fatalf("counted %d in, %d out; %d events, %d rows out", in.rows.Load(), st.nodes[1].emit.rows.Load(), b.N, out.rows)
	}
}
