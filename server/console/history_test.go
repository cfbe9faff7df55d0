package console

import (
	"fmt"
	"testing"
	"time"

	"rsql/exec"
	"rsql/planner"
	"rsql/sql"
)

func TestHistoryRingKeepsTheLastWindow(t *testing.T) {
	h := &jobHistory{ring: make([]histSample, 3)}
	if _, ok := h.last(); ok {
		t.Fatal("an empty history has a last sample")
	}
	for i := int64(1); i <= 5; i++ {
		h.add(histSample{T: i})
	}
	ts := func(ss []histSample) string { return fmt.Sprint(sliceT(ss)) }
	if got := ts(h.since(0)); got != "[3 4 5]" {
		t.Errorf("since(0) = %s", got)
	}
	if got := ts(h.since(4)); got != "[5]" {
		t.Errorf("since(4) = %s", got)
	}
	if got := ts(h.since(5)); got != "[]" {
		t.Errorf("since(5) = %s", got)
	}
	if l, _ := h.last(); l.T != 5 {
		t.Errorf("last = %d", l.T)
	}
}

func sliceT(ss []histSample) []int64 {
	out := make([]int64, len(ss))
	for i, s := range ss {
		out[i] = s.T
	}
	return out
}

// nodeRows names every node of the plan graph; an exchange's count is what the next
// stage received.
func TestNodeRowsCoverTheGraph(t *testing.T) {
	schema := sql.Schema{{Name: "a", Type: sql.TypeBigInt}}
	src := planner.SourceSpec{Stream: "s", Connector: "file", Schema: schema, Columns: []int{0}, EventTime: -1, FromStage: -1}
	edge := planner.SourceSpec{Stream: "j-0-shuffle", Connector: "broker", Schema: schema, Columns: []int{0}, EventTime: -1, FromStage: 0}
	p := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, src, planner.SinkSpec{}, &planner.FilterNode{Text: "a > 1"}, &planner.ExchangeNode{Topic: "j-0-shuffle"}),
		planner.Chain(1, edge, planner.SinkSpec{Stream: "out", Schema: schema}, &planner.LimitNode{N: 9}),
	}}
	rows := nodeRows(p, []exec.StageStats{
		{Stage: 0, InputRows: []int64{10}, OpRows: []int64{7}, OutputRows: 7},
		{Stage: 1, InputRows: []int64{6}, OpRows: []int64{5}, OutputRows: 5},
	})
	want := map[string]int64{"s0.in0": 10, "s0.op0": 7, "s0.out": 6, "s1.in0": 6, "s1.op0": 5, "s1.out": 5}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("node rows %v, want %v", rows, want)
	}
	for _, n := range planner.Graph(p).Nodes {
		if _, ok := rows[n.ID]; !ok {
			t.Errorf("graph node %s has no count", n.ID)
		}
	}
}

// fakeRun is a run of a job with counters the test sets.
type fakeRun struct {
	id     string
	stats  exec.JobStats
	stages []exec.StageStats
	plan   *planner.Physical
}

func (r *fakeRun) ID() string                             { return r.id }
func (r *fakeRun) Stats() exec.JobStats                   { return r.stats }
func (r *fakeRun) StageStats() []exec.StageStats          { return r.stages }
func (r *fakeRun) Plan() *planner.Physical                { return r.plan }
func (r *fakeRun) InputRate() float64                     { return 0 }
func (r *fakeRun) Checkpoint() (nanos, size, count int64) { return 0, 0, 0 }

// fakeEngine runs the jobs in runs; the sampler asks for nothing else.
type fakeEngine struct {
	Engine
	runs []Run
}

func (e *fakeEngine) RunningJobs() []Run { return e.runs }

// The sampler against a running job: rates are differences over the sample interval, per
// job and per plan node; a restarted job starts its rates again; a job gone for longer
// than the window is forgotten.
func TestHistorySamplesRunningJobs(t *testing.T) {
	schema := sql.Schema{{Name: "id", Type: sql.TypeBigInt}}
	src := planner.SourceSpec{Stream: "src", Connector: "broker", Schema: schema, Columns: []int{0}, EventTime: -1, FromStage: -1}
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, src, planner.SinkSpec{Stream: "big", Schema: schema}, &planner.FilterNode{Text: "id > 3"}),
	}}
	newRun := func() *fakeRun {
		return &fakeRun{id: "job-1", plan: plan, stages: []exec.StageStats{{Stage: 0, InputRows: []int64{0}, OpRows: []int64{0}}}}
	}
	rj := newRun()
	e := &fakeEngine{runs: []Run{rj}}
	c := newConsoleHistory(e, 2*time.Second, 10*time.Second)
	clock := time.UnixMilli(1_800_000_000_000)
	c.now = func() time.Time { return clock }
	c.sample()
	rj.stats = exec.JobStats{RecordsIn: 10, RecordsOut: 7}
	rj.stages = []exec.StageStats{{Stage: 0, InputRows: []int64{10}, OpRows: []int64{7}, OutputRows: 7}}
	clock = clock.Add(2 * time.Second)
	c.sample()
	v := c.view("job-1", rj, 0)
	if len(v.samples) != 2 || v.samples[0].HasRates || !v.samples[1].HasRates || !v.current {
		t.Fatalf("samples %+v", v.samples)
	}
	if s := v.samples[1]; s.InRate != 5 || s.OutRate != 3.5 || s.In != 10 || s.Out != 7 {
		t.Errorf("rates in %v out %v (counters %d %d), want 5 and 3.5", s.InRate, s.OutRate, s.In, s.Out)
	}
	if r := v.nodeRates; r["s0.in0"] != 5 || r["s0.op0"] != 3.5 || v.nodeRows["s0.in0"] != 10 {
		t.Errorf("node rates %v rows %v", r, v.nodeRows)
	}
	if len(c.view("job-1", rj, v.samples[1].T).samples) != 0 {
		t.Error("since the last sample gave samples")
	}

	// Paused and resumed: a new run, whose first sample has no rate.
	rj2 := newRun()
	e.runs = []Run{rj2}
	if v := c.view("job-1", rj2, 0); v.current || v.nodeRates != nil {
		t.Errorf("the new run sees the old run's rates: %+v", v)
	}
	clock = clock.Add(2 * time.Second)
	c.sample()
	if v := c.view("job-1", rj2, 0); len(v.samples) != 3 || v.samples[2].HasRates || !v.current {
		t.Errorf("after resume: %+v", v.samples)
	}

	// Terminated and out of the window: forgotten.
	e.runs = nil
	clock = clock.Add(11 * time.Second)
	c.sample()
	if v := c.view("job-1", nil, 0); len(v.samples) != 0 {
		t.Errorf("a job gone for longer than the window still has %d samples", len(v.samples))
	}
}
