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
	filter := &planner.FilterNode{Pred: func(r sql.Row) sql.Value { return sql.Bool(r[1].F > 50) }}
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
