package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// genEvents makes n events with disorder bounded by delay: every event's ts is at least the
// maximum before it minus delay. Amounts are multiples of 0.25 so sums are exact.
func genEvents(seed int64, n, users int, delay int64) []event4 {
	r := rand.New(rand.NewSource(seed))
	out := make([]event4, n)
	for i := range out {
		ts := int64(1_796_000_000_000) + int64(i)*10
		if delay > 0 {
			ts -= r.Int63n(delay)
		}
		out[i] = event4{user: fmt.Sprintf("u%d", r.Intn(users)), amount: float64(r.Intn(400)) / 4, ts: ts,
			n: int64(r.Intn(50)), nNull: r.Intn(10) == 0}
	}
	return out
}

func feedAll(src *memSource, split string, evs []event4) {
	bodies := make([]string, len(evs))
	for i, e := range evs {
		bodies[i] = e.body()
	}
	src.feed(split, bodies...)
}

func runJob(t *testing.T, name string, plan *planner.Physical, env Env) *Job {
	t.Helper()
	j, err := Start(context.Background(), name, plan, env)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		j.Stop()
		t.Fatal("job did not finish")
	}
	return j
}

var countSum = []planner.AggSpec{
	builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
	builtinAgg("SUM", col(1), sql.TypeDouble, sql.TypeDouble),
}

func aggPlan(src planner.SourceSpec, w planner.WindowSpec, aggs []planner.AggSpec, emit planner.EmitMode) *planner.Physical {
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: aggs, Emit: emit, Schema: aggSchema(1, w.Kind != planner.WindowNone, aggs)}
	return &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, src, sinkSpec(node.Schema), node)}}
}

func TestFilterProjectPipeline(t *testing.T) {
	evs := genEvents(1, 5000, 20, 0)
	src := newMemSource(true, 37, "0")
	feedAll(src, "0", evs)
	var sk sinks
	outSchema := sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "double", Type: sql.TypeDouble}}
	plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, sourceSpec(nil, 0), sinkSpec(outSchema), &planner.FilterNode{Pred: func(r sql.Row) sql.Value { return sql.Bool(r[1].F() > 50) }}, &planner.ProjectNode{Exprs: []planner.Evaluator{col(0), func(r sql.Row) sql.Value { return sql.Double(r[1].F() * 2) }}, Schema: outSchema})}}
	j := runJob(t, "job", plan, testEnv(src, &sk))
	var want []string
	for _, e := range evs {
		if e.amount > 50 {
			want = append(want, e.user+","+fmtF(e.amount*2))
		}
	}
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
	st := j.Stats()
	if st.RecordsIn != int64(len(evs)) || st.RecordsOut != int64(len(want)) {
		t.Fatalf("stats in=%d out=%d, want %d %d", st.RecordsIn, st.RecordsOut, len(evs), len(want))
	}
	var bytesIn, bytesOut int64
	for _, e := range evs {
		bytesIn += int64(len(e.body()))
	}
	for _, b := range sk.get("out").bodies() {
		bytesOut += int64(len(b))
	}
	if st.BytesIn != bytesIn || st.BytesOut != bytesOut {
		t.Fatalf("stats bytes in=%d out=%d, want %d %d", st.BytesIn, st.BytesOut, bytesIn, bytesOut)
	}
}

type wkey struct {
	user       string
	start, end int64
}

type aggExpect struct {
	count, cnt int64
	sum        float64
	min, max   float64
	distinct   map[int64]bool
	nsum       int64
}

func (a *aggExpect) add(e event4) {
	if a.count == 0 || e.amount < a.min {
		a.min = e.amount
	}
	if a.count == 0 || e.amount > a.max {
		a.max = e.amount
	}
	a.count++
	a.sum += e.amount
	if !e.nNull {
		a.cnt++
		a.nsum += e.n
		if a.distinct == nil {
			a.distinct = map[int64]bool{}
		}
		a.distinct[e.n] = true
	}
}

// tumbleGroups groups events into 1 s tumbling windows per user, as a batch engine would.
func tumbleGroups(evs ...[]event4) map[wkey]*aggExpect {
	groups := map[wkey]*aggExpect{}
	for _, part := range evs {
		for _, e := range part {
			s := floorDiv(e.ts, 1000) * 1000
			k := wkey{e.user, s, s + 1000}
			if groups[k] == nil {
				groups[k] = &aggExpect{}
			}
			groups[k].add(e)
		}
	}
	return groups
}

// countSumText renders a group's COUNT(*) and SUM(amount) as the sinks write them.
func countSumText(a *aggExpect) string { return fmt.Sprintf("%d,%s", a.count, fmtF(a.sum)) }

func expectRows(groups map[wkey]*aggExpect, windowed bool, f func(*aggExpect) string) []string {
	var out []string
	for k, a := range groups {
		s := k.user
		if windowed {
			s += fmt.Sprintf(",%d,%d", k.start, k.end)
		}
		out = append(out, s+","+f(a))
	}
	return out
}

func TestTumbleAndHopAgainstBruteForce(t *testing.T) {
	const delay = 300
	evs := genEvents(2, 20000, 50, delay)
	for _, w := range []planner.WindowSpec{
		{Kind: planner.WindowTumble, Time: 2, Size: 1000},
		{Kind: planner.WindowHop, Time: 2, Size: 1000, Slide: 250},
	} {
		t.Run(w.Kind.String(), func(t *testing.T) {
			src := newMemSource(true, 101, "0")
			feedAll(src, "0", evs)
			var sk sinks
			j := runJob(t, "job", aggPlan(sourceSpec(nil, delay), w, countSum, planner.EmitOnClose), testEnv(src, &sk))
			groups := map[wkey]*aggExpect{}
			for _, e := range evs {
				step := w.Size
				if w.Kind == planner.WindowHop {
					step = w.Slide
				}
				for s := floorDiv(e.ts, step) * step; s > e.ts-w.Size; s -= step {
					k := wkey{e.user, s, s + w.Size}
					if groups[k] == nil {
						groups[k] = &aggExpect{}
					}
					groups[k].add(e)
				}
			}
			want := expectRows(groups, true, countSumText)
			if d := diff(sk.get("out").bodies(), want); d != "" {
				t.Fatal(d)
			}
			if st := j.Stats(); st.Late != 0 || st.Bad != 0 {
				t.Fatalf("late=%d bad=%d on data with bounded disorder", st.Late, st.Bad)
			}
		})
	}
}

func allAggs() []planner.AggSpec {
	return []planner.AggSpec{
		builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
		builtinAgg("COUNT", col(3), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("COUNT(DISTINCT)", col(3), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("SUM", col(3), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("AVG", col(1), sql.TypeDouble, sql.TypeDouble),
		builtinAgg("MIN", col(1), sql.TypeDouble, sql.TypeDouble),
		builtinAgg("MAX", col(1), sql.TypeDouble, sql.TypeDouble),
	}
}

func allAggsText(a *aggExpect) string {
	sum := ""
	if a.cnt > 0 {
		sum = fmt.Sprint(a.nsum)
	}
	return fmt.Sprintf("%d,%d,%d,%s,%s,%s,%s", a.count, a.cnt, len(a.distinct), sum, fmtF(a.sum/float64(a.count)), fmtF(a.min), fmtF(a.max))
}

func TestEveryAggregate(t *testing.T) {
	evs := genEvents(3, 10000, 30, 100)
	src := newMemSource(true, 0, "0")
	feedAll(src, "0", evs)
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 5000}
	runJob(t, "job", aggPlan(sourceSpec(nil, 100), w, allAggs(), planner.EmitOnClose), testEnv(src, &sk))
	groups := map[wkey]*aggExpect{}
	for _, e := range evs {
		s := floorDiv(e.ts, 5000) * 5000
		k := wkey{e.user, s, s + 5000}
		if groups[k] == nil {
			groups[k] = &aggExpect{}
		}
		groups[k].add(e)
	}
	if d := diff(sk.get("out").bodies(), expectRows(groups, true, allAggsText)); d != "" {
		t.Fatal(d)
	}
}

// sessions computes session windows per user by sorting (gaps and islands).
func sessions(evs []event4, gap int64) map[wkey]*aggExpect {
	byUser := map[string][]event4{}
	for _, e := range evs {
		byUser[e.user] = append(byUser[e.user], e)
	}
	out := map[wkey]*aggExpect{}
	for u, es := range byUser {
		// stable insertion sort by ts keeps arrival order among equal times
		for i := 1; i < len(es); i++ {
			for j := i; j > 0 && es[j].ts < es[j-1].ts; j-- {
				es[j], es[j-1] = es[j-1], es[j]
			}
		}
		var cur []event4
		flush := func() {
			if len(cur) == 0 {
				return
			}
			a := &aggExpect{}
			for _, e := range cur {
				a.add(e)
			}
			out[wkey{u, cur[0].ts, cur[len(cur)-1].ts + gap}] = a
			cur = nil
		}
		for _, e := range es {
			if len(cur) > 0 && e.ts-cur[len(cur)-1].ts > gap { // touching sessions merge
				flush()
			}
			cur = append(cur, e)
		}
		flush()
	}
	return out
}

func TestSessionAgainstBruteForce(t *testing.T) {
	const delay = 500
	r := rand.New(rand.NewSource(4))
	// Bursts separated by pauses, with bounded disorder, so sessions form and merge.
	var evs []event4
	ts := int64(1_796_000_000_000)
	for b := 0; b < 300; b++ {
		for i := 0; i < 20; i++ {
			ts += int64(r.Intn(40))
			evs = append(evs, event4{user: fmt.Sprintf("u%d", r.Intn(8)), amount: float64(r.Intn(40)) / 4, ts: ts - int64(r.Intn(delay))})
		}
		ts += int64(r.Intn(3000))
	}
	src := newMemSource(true, 7, "0")
	feedAll(src, "0", evs)
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowSession, Time: 2, Gap: 700}
	j := runJob(t, "job", aggPlan(sourceSpec(nil, delay), w, allAggs(), planner.EmitOnClose), testEnv(src, &sk))
	want := expectRows(sessions(evs, 700), true, allAggsText)
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
	if st := j.Stats(); st.Late != 0 {
		t.Fatalf("late=%d", st.Late)
	}
}

func TestSessionMergeBridging(t *testing.T) {
	// gap 15; events at 0 and 20 form two sessions until 10 arrives and bridges them.
	src := newMemSource(true, 1, "0")
	src.feed("0", "a,1,0,", "a,2,20,", "a,4,10,", "a,8,100,")
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowSession, Time: 2, Gap: 15}
	aggs := countSum
	runJob(t, "job", aggPlan(sourceSpec(nil, 50), w, aggs, planner.EmitOnClose), testEnv(src, &sk))
	want := []string{"a,0,35,3,7", "a,100,115,1,8"}
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
}

func TestGroupByEmitsChanges(t *testing.T) {
	evs := genEvents(5, 3000, 10, 0)
	src := newMemSource(true, 64, "0")
	feedAll(src, "0", evs)
	var sk sinks
	j := runJob(t, "job", aggPlan(sourceSpec(nil, 0), planner.WindowSpec{}, countSum, planner.EmitChanges), testEnv(src, &sk))
	got := sk.get("out").bodies()
	// The source hands its records over 64 at a time: each batch brings one update per
	// user it changed, in the order the batch first changed them, with the user's running
	// total after the batch.
	run := map[string]*aggExpect{}
	var want []string
	for from := 0; from < len(evs); from += 64 {
		var users []string
		for _, e := range evs[from:min(from+64, len(evs))] {
			if run[e.user] == nil {
				run[e.user] = &aggExpect{}
			}
			if !slices.Contains(users, e.user) {
				users = append(users, e.user)
			}
			run[e.user].add(e)
		}
		for _, u := range users {
			want = append(want, fmt.Sprintf("%s,%d,%s", u, run[u].count, fmtF(run[u].sum)))
		}
	}
	if len(want) >= len(evs) {
		t.Fatalf("%d updates expected for %d events: the batches fold nothing", len(want), len(evs))
	}
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			t.Fatalf("%d updates, want %d; first difference at update %d: got %q, want %q", len(got), len(want), i, at(got, i), at(want, i))
		}
	}
	if j.Stats().RecordsOut != int64(len(want)) {
		t.Fatalf("records out %d, want %d", j.Stats().RecordsOut, len(want))
	}
}

// at is s[i], or "" past its end.
func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

func TestWindowEmitChanges(t *testing.T) {
	evs := genEvents(6, 4000, 10, 0)
	src := newMemSource(true, 64, "0")
	feedAll(src, "0", evs)
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 2000}
	runJob(t, "job", aggPlan(sourceSpec(nil, 0), w, countSum, planner.EmitChanges), testEnv(src, &sk))
	got := sk.get("out").bodies()
	if len(got) != len(evs) {
		t.Fatalf("%d updates for %d events", len(got), len(evs))
	}
	last := map[string]string{}
	for _, g := range got {
		p := strings.SplitN(g, ",", 4)
		last[p[0]+","+p[1]+","+p[2]] = g
	}
	groups := map[wkey]*aggExpect{}
	for _, e := range evs {
		s := floorDiv(e.ts, 2000) * 2000
		k := wkey{e.user, s, s + 2000}
		if groups[k] == nil {
			groups[k] = &aggExpect{}
		}
		groups[k].add(e)
	}
	var finals []string
	for _, v := range last {
		finals = append(finals, v)
	}
	if d := diff(finals, expectRows(groups, true, countSumText)); d != "" {
		t.Fatal(d)
	}
}

func TestLateRecordsCountedAndRouted(t *testing.T) {
	// delay 0, one record per batch: the watermark follows each record.
	src := newMemSource(true, 1, "0")
	src.feed("0",
		"a,1,100,", "a,2,150,", "b,4,1200,", // window [0,1000) of a fires at 1200
		"a,8,300,",              // late: its only window has fired
		"a,16,1500,",            // fine
		"b,32,1100,",            // window [1000,2000) still open: not late
		"c,64,2600,", "a,1,50,", // late again
	)
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	j := runJob(t, "job", aggPlan(sourceSpec(map[string]string{"late_path": "late.out"}, 0), w, countSum, planner.EmitOnClose), testEnv(src, &sk))
	want := []string{"a,0,1000,2,3", "b,1000,2000,2,36", "a,1000,2000,1,16", "c,2000,3000,1,64"}
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
	if st := j.Stats(); st.Late != 2 {
		t.Fatalf("late = %d, want 2", st.Late)
	}
	if d := diff(sk.get("late.out").bodies(), []string{"a,8,300,", "a,1,50,"}); d != "" {
		t.Fatalf("late output: %s", d)
	}
}

func TestSessionLateRecord(t *testing.T) {
	src := newMemSource(true, 1, "0")
	src.feed("0", "a,1,0,", "a,1,100,", "a,1,5,") // at 100 (delay 0) session [0,10) fired; 5 is late
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowSession, Time: 2, Gap: 10}
	j := runJob(t, "job", aggPlan(sourceSpec(map[string]string{"late_topic": "late"}, 0), w, countSum, planner.EmitOnClose), testEnv(src, &sk))
	if d := diff(sk.get("out").bodies(), []string{"a,0,10,1,1", "a,100,110,1,1"}); d != "" {
		t.Fatal(d)
	}
	if j.Stats().Late != 1 || len(sk.get("late").bodies()) != 1 {
		t.Fatalf("late=%d routed=%d", j.Stats().Late, len(sk.get("late").bodies()))
	}
}

func TestBadRecordsCountedAndDeadLettered(t *testing.T) {
	src := newMemSource(true, 0, "0")
	src.feed("0", "a,1,0,", "garbage", "a,notanumber,5,", "a,2,,", "b,3,7,")
	var sk sinks
	outSchema := eventSchema
	plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, planner.SourceSpec{Stream: "events", Connector: "file", Options: testOptions(map[string]string{"format": "test", "dlq_path": "dlq"}), Schema: eventSchema, EventTime: 2, FromStage: -1}, sinkSpec(outSchema))}}
	j := runJob(t, "job", plan, testEnv(src, &sk))
	st := j.Stats()
	if st.Bad != 3 || st.RecordsIn != 2 {
		t.Fatalf("bad=%d in=%d", st.Bad, st.RecordsIn)
	}
	if d := diff(sk.get("dlq").bodies(), []string{"garbage", "a,notanumber,5,", "a,2,,"}); d != "" {
		t.Fatalf("dlq: %s", d)
	}
	if len(st.BadErrors) != 3 || !strings.Contains(st.BadErrors[0], "split 0, line 2") ||
		!strings.Contains(st.BadErrors[1], "field amount") || !strings.Contains(st.BadErrors[2], "missing event time") {
		t.Fatalf("errors: %q", st.BadErrors)
	}
	if d := diff(sk.get("out").bodies(), []string{"a,1,0,", "b,3,7,"}); d != "" {
		t.Fatal(d)
	}
}

func TestExchangeStages(t *testing.T) {
	const delay = 200
	src := newMemSource(true, 50, "0", "1", "2")
	var all []event4
	for i, s := range []string{"0", "1", "2"} {
		evs := genEvents(int64(10+i), 4000, 40, delay)
		feedAll(src, s, evs)
		all = append(all, evs...)
	}
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: countSum, Schema: aggSchema(1, true, countSum)}
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, sourceSpec(nil, delay), planner.SinkSpec{}, &planner.ExchangeNode{Topic: "job-0-shuffle", Keys: []planner.Evaluator{col(0)}}),
		planner.Chain(1, planner.SourceSpec{Stream: "job-0-shuffle", Schema: eventSchema, EventTime: 2, FromStage: 0}, sinkSpec(node.Schema), node),
	}}
	env := testEnv(src, &sk)
	env.ExchangeQueues = 3
	j := runJob(t, "job", plan, env)
	groups := tumbleGroups(all)
	want := expectRows(groups, true, countSumText)
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
	if st := j.Stats(); st.Late != 0 || st.RecordsIn != int64(len(all)) {
		t.Fatalf("late=%d in=%d", st.Late, st.RecordsIn)
	}
}

func TestLimitAndCallback(t *testing.T) {
	src := newMemSource(false, 3, "0") // unbounded: only LIMIT ends the job
	feedAll(src, "0", genEvents(7, 100, 5, 0))
	var rows []string
	plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, sourceSpec(nil, 0), planner.SinkSpec{}, &planner.LimitNode{N: 5})}}
	env := testEnv(src, &sinks{})
	env.OnRow = func(r sql.Row) error { rows = append(rows, r[0].S); return nil }
	j := runJob(t, "job", plan, env)
	if len(rows) != 5 || j.Stats().RecordsOut != 5 {
		t.Fatalf("%d rows", len(rows))
	}
}

// A LIMIT downstream of an exchange ends the job after the upstream stage finished its
// input and took the job's last checkpoint barrier: that epoch cannot complete (its group
// lost a stage) and must not hold the job.
func TestLimitBehindExchangeEndsTheJob(t *testing.T) {
	src := newMemSource(true, 7, "0", "1")
	feedAll(src, "0", genEvents(8, 2000, 5, 0))
	feedAll(src, "1", genEvents(9, 2000, 5, 0))
	var rows int
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, sourceSpec(nil, 0), planner.SinkSpec{}, &planner.ExchangeNode{Keys: []planner.Evaluator{col(0)}, Queues: 1}),
		planner.Chain(1, planner.SourceSpec{Stream: "shuffle", Schema: eventSchema, EventTime: -1, FromStage: 0}, planner.SinkSpec{},
			&planner.SortNode{Keys: []planner.SortSpec{{Eval: col(2)}}}, &planner.LimitNode{N: 5}),
	}}
	env := testEnv(src, &sinks{})
	env.OnRow = func(sql.Row) error { rows++; return nil }
	runJob(t, "job", plan, env)
	if rows != 5 {
		t.Fatalf("%d rows, want 5", rows)
	}
}

func TestStartErrors(t *testing.T) {
	src := newMemSource(true, 0, "0")
	// Options are parsed when the plan is built (connectors/options), so a bad one never
	// reaches Start: the parse names it.
	if _, err := testOptionsErr(map[string]string{"format": "test", "idle_timeout": "soon"}); err == nil || !strings.Contains(err.Error(), "idle_timeout") {
		t.Fatalf("bad idle_timeout: %v", err)
	}
	bad := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, sourceSpec(nil, 0), sinkSpec(eventSchema), &planner.ExchangeNode{}, &planner.LimitNode{N: 1})}}
	if _, err := Start(context.Background(), "j", bad, testEnv(src, &sinks{})); !errors.Is(err, ErrBadPlan) {
		t.Fatalf("exchange in the middle: %v", err)
	}
	if _, err := Start(context.Background(), "j", aggPlan(sourceSpec(nil, 0), planner.WindowSpec{}, countSum, 0), Env{}); !errors.Is(err, ErrMissingEnv) {
		t.Fatalf("empty env: %v", err)
	}
}

// waitFor polls cond until it holds (no timing assertion: it only bounds a hang).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func varint(v int64) []byte { return binary.AppendVarint(nil, v) }

// forEachStore runs body against a memory store and a RocksDB store.
func forEachStore(t *testing.T, body func(t *testing.T, s state.Store)) {
	t.Run("memory", func(t *testing.T) { body(t, state.NewMemory()) })
	t.Run("rocksdb", func(t *testing.T) {
		s, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		body(t, s)
	})
}

func TestIdleSplitsAndWallClock(t *testing.T) {
	clk := newFakeClock()
	src := newMemSource(false, 0, "a", "b")
	var sk sinks
	env := testEnv(src, &sk)
	env.Now = clk.now
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	j, err := Start(context.Background(), "idle", aggPlan(sourceSpec(map[string]string{"idle_timeout": "2s"}, 100), w, countSum, planner.EmitOnClose), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	src.feed("a", "x,1,500,", "x,1,5000,")
	waitFor(t, "records in", func() bool { return j.Stats().RecordsIn == 2 })
	// Split b has nothing and is not idle yet: it holds the watermark back.
	if wm := j.Stats().Watermark; wm != MinWatermark {
		t.Fatalf("watermark %d while split b is not idle", wm)
	}
	clk.advance(1500 * time.Millisecond)
	src.feed("a", "x,1,5100,") // keeps a active
	waitFor(t, "records in", func() bool { return j.Stats().RecordsIn == 3 })
	clk.advance(1000 * time.Millisecond) // b idle for 2.5s, a for 1s
	waitFor(t, "b idle", func() bool { return j.Stats().Watermark == 5000 })
	if got := sk.get("out").bodies(); len(got) != 1 || got[0] != "x,0,1000,1,1" {
		t.Fatalf("output %v", got)
	}
	// Both idle, and the stream is a replay (its event times are far from the wall clock):
	// the watermark goes to the largest event time seen, and no further however long the
	// pause; a record later than every earlier one is never late.
	clk.advance(3 * time.Second)
	waitFor(t, "all idle", func() bool { return j.Stats().Watermark == 5100 })
	clk.advance(time.Hour)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wm := j.Stats().Watermark; wm != 5100 {
		t.Fatalf("watermark %d after an hour's pause of a replayed stream, want 5100", wm)
	}
	src.feed("a", "x,1,5200,")
	waitFor(t, "records in", func() bool { return j.Stats().RecordsIn == 4 })
	if late := j.Stats().Late; late != 0 {
		t.Fatalf("%d late rows: an in-order record after a pause was made late", late)
	}
	clk.advance(3 * time.Second)
	src.feed("b", "y,1,7000,")
	waitFor(t, "window close", func() bool { return len(sk.get("out").bodies()) == 2 })
	if got := sk.get("out").bodies()[1]; got != "x,5000,6000,3,3" {
		t.Fatalf("second window %q", got)
	}
}

// A split whose reader knows of records waiting for it (lag) is slow, not idle, however
// long its records take to come: the other split's watermark does not pass it, and its
// records, once read, are on time.
func TestSlowSplitWithLagIsNotIdle(t *testing.T) {
	clk := newFakeClock()
	src := newMemSource(false, 0, "a", "b")
	var lagB atomic.Int64
	lagB.Store(5)
	src.waitingOf = func(split string) int64 {
		if split == "b" {
			return lagB.Load()
		}
		return 0
	}
	var sk sinks
	env := testEnv(src, &sk)
	env.Now = clk.now
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	j, err := Start(context.Background(), "slow", aggPlan(sourceSpec(map[string]string{"idle_timeout": "2s"}, 100), w, countSum, planner.EmitOnClose), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	src.feed("a", "x,1,500,", "x,1,5000,")
	waitFor(t, "records in", func() bool { return j.Stats().RecordsIn == 2 })
	clk.advance(1500 * time.Millisecond)
	src.feed("a", "x,1,5100,")
	waitFor(t, "records in", func() bool { return j.Stats().RecordsIn == 3 })
	clk.advance(1000 * time.Millisecond) // b silent for 2.5 s, with records waiting
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wm := j.Stats().Watermark; wm != MinWatermark {
		t.Fatalf("watermark %d while split b has records waiting", wm)
	}
	src.feed("b", "y,1,700,")
	waitFor(t, "records in", func() bool { return j.Stats().RecordsIn == 4 })
	lagB.Store(0)
	if late := j.Stats().Late; late != 0 {
		t.Fatalf("%d late rows: the slow split's record was made late", late)
	}
	// With nothing waiting any more, b goes idle and the windows close.
	clk.advance(3 * time.Second)
	waitFor(t, "b idle", func() bool { return len(sk.get("out").bodies()) >= 2 })
	got := sk.get("out").bodies()
	if !slices.Contains(got, "x,0,1000,1,1") || !slices.Contains(got, "y,0,1000,1,1") {
		t.Fatalf("output %v, want the first window of x and of y", got)
	}
}

// TestIdleLiveStreamFollowsWallClock: a stream whose event times track the wall clock keeps
// closing windows when its input stops, with the wall clock, but never ahead of what the
// declared delay allows for records still in flight.
func TestIdleLiveStreamFollowsWallClock(t *testing.T) {
	clk := newFakeClock()
	base := clk.now().UnixMilli() / 1000 * 1000
	src := newMemSource(false, 0, "a")
	var sk sinks
	env := testEnv(src, &sk)
	env.Now = clk.now
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	j, err := Start(context.Background(), "live", aggPlan(sourceSpec(map[string]string{"idle_timeout": "2s"}, 100), w, countSum, planner.EmitOnClose), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	at := func(ms int64) string { return "x,1," + strconv.FormatInt(base+ms, 10) + "," }
	clk.advance(200 * time.Millisecond) // the records are read as they happen
	src.feed("a", at(100), at(200))
	waitFor(t, "records in", func() bool { return j.Stats().RecordsIn == 2 })
	if wm := j.Stats().Watermark; wm != base+100 {
		t.Fatalf("watermark %d, want %d (max event time - delay)", wm-base, 100)
	}
	// Idle, and the stream is live: the watermark first goes to the largest event time,
	// then follows the wall clock (minus the delay) from the last record.
	clk.advance(2500 * time.Millisecond)
	want := base + 200 + 2500 - 100
	waitFor(t, "wall-clock watermark", func() bool { return j.Stats().Watermark == want })
	waitFor(t, "window close", func() bool { return len(sk.get("out").bodies()) == 1 })
	if got, exp := sk.get("out").bodies()[0], "x,"+strconv.FormatInt(base, 10)+","+strconv.FormatInt(base+1000, 10)+",2,2"; got != exp {
		t.Fatalf("window %q, want %q", got, exp)
	}
	// A record that happened just now (in order) is not late.
	src.feed("a", at(2690))
	waitFor(t, "records in", func() bool { return j.Stats().RecordsIn == 3 })
	if late := j.Stats().Late; late != 0 {
		t.Fatalf("%d late rows", late)
	}
}

func TestCheckpointBarrierOrdering(t *testing.T) {
	// Operator level: a checkpoint between two batches holds the first batch's state only.
	store := state.NewMemory()
	var cnt counters
	d := &discard{}
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, Aggs: countSum}
	aop := newAggOp(node, "j", "agg", store, nil, &cnt)
	a := newOpChain(d, aop)
	row := func(u string, ts int64) sql.Row {
		return sql.Row{sql.Varchar(u), sql.Double(1), sql.Timestamp(ts), sql.Null}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
	must(a.Process(&Batch{Split: "s", Rows: []sql.Row{row("u", 10), row("u", 20), row("v", 30)}}))
	c1 := &Control{Kind: Checkpoint, Epoch: 1, State: &state.Batch{}}
	must(a.Control(c1))
	must(a.Process(&Batch{Split: "s", Rows: []sql.Row{row("u", 40)}}))
	must(store.Write(c1.State))
	counts := map[string]int64{}
	must(store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error {
		keys, _, _, accs, err := decodeGroupState(v, 1, 2)
		counts[keys[0].S] = accs[0].N
		return err
	}))
	if counts["u"] != 2 || counts["v"] != 1 || len(counts) != 2 {
		t.Fatalf("checkpointed counts %v, want u=2 v=1", counts)
	}
	// RemoveSplit writes the rest and drops memory; NewSplit on a fresh operator restores.
	c2 := &Control{Kind: RemoveSplit, Split: "s", State: &state.Batch{}}
	must(a.Control(c2))
	must(store.Write(c2.State))
	if len(aop.splits) != 0 {
		t.Fatal("split state kept after RemoveSplit")
	}
	b := newOpChain(d, newAggOp(node, "j", "agg", store, nil, &cnt))
	must(b.Control(&Control{Kind: NewSplit, Split: "s"}))
	must(b.Watermark("s", MaxWatermark))
	// discard counted rows: the restored window emits u and v
	if d.rows != 2 {
		t.Fatalf("restored operator emitted %d rows, want 2", d.rows)
	}
	// Firing deletes the state at the next checkpoint.
	c3 := &Control{Kind: Checkpoint, Epoch: 2, State: &state.Batch{}}
	must(b.Control(c3))
	must(store.Write(c3.State))
	n := 0
	must(store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error { n++; return nil }))
	if n != 0 {
		t.Fatalf("%d keys left after the window fired", n)
	}
}

// TestCheckpointRestoreExactlyOnce stops a job after a checkpoint and resumes it from the
// store: the combined output equals one uninterrupted run.
func TestCheckpointRestoreExactlyOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, store state.Store) {
		evs := genEvents(8, 6000, 20, 100)
		w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
		plan := aggPlan(sourceSpec(nil, 100), w, allAggs(), planner.EmitOnClose)
		src := newMemSource(false, 100, "0")
		var sk sinks
		env := testEnv(src, &sk)
		env.Store = store
		j, err := Start(context.Background(), "cp", plan, env)
		if err != nil {
			t.Fatal(err)
		}
		feedAll(src, "0", evs[:3000])
		waitFor(t, "first half", func() bool { return j.Stats().RecordsIn == 3000 })
		ep, err := j.Checkpoint(context.Background())
		if err != nil || ep != 1 {
			t.Fatalf("checkpoint: %d %v", ep, err)
		}
		cut := len(sk.get("out").bodies()) // rows emitted before the barrier
		// Records after the checkpoint are processed, then the job "crashes": their effect is lost.
		feedAll(src, "0", evs[3000:3500])
		waitFor(t, "more", func() bool { return j.Stats().RecordsIn == 3500 })
		j.Stop()
		v, ok, _ := store.Get(OffsetKey("cp", 0, "0"))
		if !ok || firstVarint(v) != 3001 {
			t.Fatalf("offset %x", v)
		}
		// Output so far: only windows fired before the checkpoint count (as a transactional sink would).
		// Resume on a bounded source with the same data.
		src2 := newMemSource(true, 100, "0")
		feedAll(src2, "0", evs)
		var sk2 sinks
		env2 := testEnv(src2, &sk2)
		env2.Store = store
		j2 := runJob(t, "cp", plan, env2)
		// The counters go on from the checkpoint's 3000: the resumed job reads 3000 more.
		if j2.Stats().RecordsIn != 6000 {
			t.Fatalf("resumed job counts %d records in, want 3000 + 3000", j2.Stats().RecordsIn)
		}
		groups := tumbleGroups(evs)
		// Rows emitted before the checkpoint by job 1 + all rows of job 2 = the whole answer.
		var got []string
		got = append(got, sk.get("out").bodies()[:cut]...)
		got = append(got, sk2.get("out").bodies()...)
		if d := diff(got, expectRows(groups, true, allAggsText)); d != "" {
			t.Fatal(d)
		}
	})
}

func TestRemoveAndAddSplit(t *testing.T) {
	store := state.NewMemory()
	src := newMemSource(true, 50, "0", "1")
	src.hold = true
	var sk sinks
	env := testEnv(src, &sk)
	env.Store = store
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	plan := aggPlan(sourceSpec(nil, 100), w, countSum, planner.EmitOnClose)
	j, err := Start(context.Background(), "rb", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	// Key-partitioned input: users of split 0 start with a, of split 1 with b.
	part := func(seed int64, prefix string, from, n int) []event4 {
		evs := genEvents(seed, from+n, 10, 100)[from:]
		for i := range evs {
			evs[i].user = prefix + evs[i].user
		}
		return evs
	}
	a1, b1 := part(20, "a", 0, 500), part(21, "b", 0, 500)
	feedAll(src, "0", a1)
	feedAll(src, "1", b1)
	waitFor(t, "first part", func() bool { return j.Stats().RecordsIn == 1000 })
	if err := j.RemoveSplit(context.Background(), "1"); err != nil {
		t.Fatal(err)
	}
	n := 0
	_ = store.Scan(state.SplitPrefix(nil, "rb", "s0.agg0", "1"), func(k, v []byte) error { n++; return nil })
	if n == 0 {
		t.Fatal("split 1 state not in the store after RemoveSplit")
	}
	if v, ok, _ := store.Get(OffsetKey("rb", 0, "1")); !ok || firstVarint(v) != 501 {
		t.Fatalf("split 1 offset %x", v)
	}
	// Everything of split 1 is under the job's prefixes for it: export, drop, import back.
	var blobs [][]byte
	for _, p := range j.SplitPrefixes("1") {
		blob, err := store.Export(p)
		if err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, blob)
		if err := store.DropPrefix(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(blobs) != 2 {
		t.Fatalf("%d prefixes", len(blobs))
	}
	if _, ok, _ := store.Get(OffsetKey("rb", 0, "1")); ok {
		t.Fatal("offset survived the drop")
	}
	for _, b := range blobs {
		if err := store.Import(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range j.Stats().Splits {
		if s.Split == "1" {
			t.Fatal("split 1 still listed")
		}
	}
	a2, b2 := part(20, "a", 500, 500), part(21, "b", 500, 500)
	feedAll(src, "0", a2)
	feedAll(src, "1", b2)
	if err := j.AddSplit(context.Background(), "1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "second part", func() bool { return j.Stats().RecordsIn == 2000 })
	src.release()
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	groups := tumbleGroups(a1, a2, b1, b2)
	want := expectRows(groups, true, countSumText)
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
}

func TestPeriodicCheckpoints(t *testing.T) {
	src := newMemSource(true, 10, "0")
	src.hold = true
	feedAll(src, "0", genEvents(30, 200, 5, 0))
	var sk sinks
	env := testEnv(src, &sk)
	env.CheckpointInterval = 5 * time.Millisecond
	var commits []int64
	var mu sync.Mutex
	st := state.NewMemory()
	env.Store = st
	env.Commit = func(cp *CheckpointInfo) error {
		mu.Lock()
		commits = append(commits, cp.Epoch)
		mu.Unlock()
		if len(cp.Offsets) != 1 || cp.Offsets[0].Split != "0" {
			return fmt.Errorf("offsets %+v", cp.Offsets)
		}
		return st.Write(cp.State)
	}
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	j, err := Start(context.Background(), "pc", aggPlan(sourceSpec(nil, 0), w, countSum, planner.EmitOnClose), env)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three checkpoints", func() bool { mu.Lock(); defer mu.Unlock(); return len(commits) >= 3 })
	src.release()
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(commits); i++ {
		if commits[i] != commits[i-1]+1 {
			t.Fatalf("epochs %v are not consecutive", commits)
		}
	}
	if j.Stats().Epoch != commits[len(commits)-1] {
		t.Fatalf("stats epoch %d, last commit %d", j.Stats().Epoch, commits[len(commits)-1])
	}
	if v, ok, _ := st.Get(OffsetKey("pc", 0, "0")); !ok || firstVarint(v) != 201 {
		t.Fatalf("final offset %x", v)
	}
}

func TestWindowAssignHop(t *testing.T) {
	evs := genEvents(40, 2000, 5, 0)
	src := newMemSource(true, 33, "0")
	feedAll(src, "0", evs)
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowHop, Time: 2, Size: 300, Slide: 100}
	schema := append(append(sql.Schema{}, eventSchema...), sql.Column{Name: "window_start", Type: sql.TypeTimestamp}, sql.Column{Name: "window_end", Type: sql.TypeTimestamp})
	plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, sourceSpec(nil, 0), sinkSpec(schema), &planner.WindowAssignNode{Window: w, Schema: schema})}}
	runJob(t, "job", plan, testEnv(src, &sk))
	var want []string
	for _, e := range evs {
		for s := e.ts - e.ts%100 - 200; s <= e.ts; s += 100 { // ts > 0 here
			if s <= e.ts && e.ts < s+300 {
				want = append(want, fmt.Sprintf("%s,%d,%d", e.body(), s, s+300))
			}
		}
	}
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
}

func TestWatermarkIsMinOverSplits(t *testing.T) {
	src := newMemSource(false, 0, "a", "b")
	var sk sinks
	env := testEnv(src, &sk)
	env.Now = newFakeClock().now // never idle
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	j, err := Start(context.Background(), "wm", aggPlan(sourceSpec(nil, 100), w, countSum, planner.EmitOnClose), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	src.feed("a", "x,1,5000,")
	src.feed("b", "y,1,2000,")
	waitFor(t, "both", func() bool { return j.Stats().RecordsIn == 2 })
	waitFor(t, "watermark", func() bool { return j.Stats().Watermark == 1900 })
	src.feed("b", "y,1,7000,")
	waitFor(t, "watermark", func() bool { return j.Stats().Watermark == 4900 })
	waitFor(t, "window", func() bool { return len(sk.get("out").bodies()) == 1 })
	if got := sk.get("out").bodies()[0]; got != "y,2000,3000,1,1" {
		t.Fatalf("emitted %q", got)
	}
	st := j.Stats()
	if len(st.Splits) != 2 || st.Splits[0].MaxEventTime != 5000 || st.Splits[1].Watermark != 6900 {
		t.Fatalf("splits %+v", st.Splits)
	}
}

func TestCheckpointAcrossExchange(t *testing.T) {
	src := newMemSource(true, 10, "0", "1")
	src.hold = true
	store := state.NewMemory()
	var sk sinks
	env := testEnv(src, &sk)
	env.Store = store
	env.ExchangeQueues = 2
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 100_000}
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, Aggs: countSum, Schema: aggSchema(1, true, countSum)}
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, sourceSpec(nil, 0), planner.SinkSpec{}, &planner.ExchangeNode{Keys: []planner.Evaluator{col(0)}}),
		planner.Chain(1, planner.SourceSpec{Stream: "shuffle", Schema: eventSchema, EventTime: 2, FromStage: 0}, sinkSpec(node.Schema), node),
	}}
	var infos []*CheckpointInfo
	env.Commit = func(cp *CheckpointInfo) error { infos = append(infos, cp); return store.Write(cp.State) }
	j, err := Start(context.Background(), "x", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	feedAll(src, "0", genEvents(50, 300, 7, 0))
	feedAll(src, "1", genEvents(51, 200, 7, 0))
	waitFor(t, "input", func() bool { return j.Stats().RecordsIn == 500 })
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The downstream aggregation's state for all 500 rows is committed with both offsets.
	total := int64(0)
	for _, q := range []string{"0", "1"} {
		_ = store.Scan(state.SplitPrefix(nil, "x", "s1.agg0", q), func(k, v []byte) error {
			_, _, _, accs, err := decodeGroupState(v, 1, 2)
			if err == nil {
				total += accs[0].N
			}
			return err
		})
	}
	if total != 500 {
		t.Fatalf("checkpointed state covers %d rows, want 500", total)
	}
	if len(infos) != 1 || len(infos[0].Offsets) != 2 || infos[0].Offsets[0].Offset != 301 || infos[0].Offsets[1].Offset != 201 {
		t.Fatalf("checkpoint %+v", infos)
	}
	src.release()
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	for _, b := range sk.get("out").bodies() {
		var c int64
		fmt.Sscanf(strings.Split(b, ",")[3], "%d", &c)
		n += c
	}
	if n != 500 {
		t.Fatalf("output counts sum to %d", n)
	}
}

func TestLateRecordsAcrossExchange(t *testing.T) {
	src := newMemSource(true, 1, "0")
	src.feed("0", "a,1,100,", "a,2,150,", "b,4,1200,", "a,8,300,", "a,16,1500,", "b,32,1100,", "c,64,2600,", "a,1,50,")
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, Aggs: countSum, Schema: aggSchema(1, true, countSum)}
	plan := &planner.Physical{Stages: []*planner.Stage{
		planner.Chain(0, sourceSpec(map[string]string{"late_path": "late.out"}, 0), planner.SinkSpec{}, &planner.ExchangeNode{Keys: []planner.Evaluator{col(0)}, Queues: 1}),
		planner.Chain(1, planner.SourceSpec{Stream: "shuffle", Schema: eventSchema, EventTime: 2, FromStage: 0}, sinkSpec(node.Schema), node),
	}}
	j := runJob(t, "job", plan, testEnv(src, &sk))
	want := []string{"a,0,1000,2,3", "b,1000,2000,2,36", "a,1000,2000,1,16", "c,2000,3000,1,64"}
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
	if st := j.Stats(); st.Late != 2 {
		t.Fatalf("late = %d, want 2", st.Late)
	}
	if d := diff(sk.get("late.out").bodies(), []string{"a,8,300,", "a,1,50,"}); d != "" {
		t.Fatalf("late output: %s", d)
	}
}

// firstVarint decodes the offset at the start of an OffsetKey value.
func firstVarint(v []byte) int64 {
	n, _ := binary.Varint(v)
	return n
}

// Sessions that touch are one session (docs/sql.md, "Windows"): with a gap of 20 s, rows
// exactly 20 s apart (10:07:51 and 10:08:11) make one session, rows 20.001 s apart two; a
// row that arrives later and touches two sessions, one at each end, merges them.
func TestSessionTouchingMerge(t *testing.T) {
	const gap = 20_000
	t0 := int64(1_796_000_000_000) // 10:07:51 of some day, the first row of each key
	row := func(k string, amount int, ts int64) string { return fmt.Sprintf("%s,%d,%d,", k, amount, ts) }
	src := newMemSource(true, 1, "0")
	src.feed("0",
		row("a", 1, t0), row("a", 2, t0+gap), // exactly one gap apart: one session
		row("b", 1, t0), row("b", 2, t0+gap+1), // one millisecond beyond: two
		row("c", 1, t0), row("c", 2, t0+2*gap), // two sessions ...
		row("c", 4, t0+gap), // ... until this row, out of order, touches both
	)
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowSession, Time: 2, Gap: gap}
	j := runJob(t, "job", aggPlan(sourceSpec(nil, 3*gap), w, countSum, planner.EmitOnClose), testEnv(src, &sk))
	want := []string{
		fmt.Sprintf("a,%d,%d,2,3", t0, t0+2*gap),
		fmt.Sprintf("b,%d,%d,1,1", t0, t0+gap),
		fmt.Sprintf("b,%d,%d,1,2", t0+gap+1, t0+2*gap+1),
		fmt.Sprintf("c,%d,%d,3,7", t0, t0+3*gap),
	}
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
	if st := j.Stats(); st.Late != 0 {
		t.Fatalf("late=%d", st.Late)
	}
}

// A session ending at the watermark stays open: a row at the watermark (not late) touches
// it and joins it; once the watermark passes the end the session fires.
func TestSessionOpenAtWatermark(t *testing.T) {
	src := newMemSource(true, 1, "0")
	// delay 0, one row per batch: after "a,1,0" and "b,1,10" the watermark is 10, session a
	// [0,10) touches it; "a,2,10" joins it. "b,1,30" moves the watermark past 20: it fires.
	src.feed("0", "a,1,0,", "b,1,10,", "a,2,10,", "b,1,30,")
	var sk sinks
	w := planner.WindowSpec{Kind: planner.WindowSession, Time: 2, Gap: 10}
	j := runJob(t, "job", aggPlan(sourceSpec(nil, 0), w, countSum, planner.EmitOnClose), testEnv(src, &sk))
	if d := diff(sk.get("out").bodies(), []string{"a,0,20,2,3", "b,10,20,1,1", "b,30,40,1,1"}); d != "" {
		t.Fatal(d)
	}
	if st := j.Stats(); st.Late != 0 {
		t.Fatalf("late=%d", st.Late)
	}
}
