package exec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"rsql/planner"
	"rsql/sql"
)

// compiled compiles an expression tree built with sqlCall over eventSchema columns.
func compiled(t *testing.T, e sql.Expr) planner.Evaluator {
	t.Helper()
	f, err := sql.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func colRef(i int) sql.Expr {
	return &sql.ColumnRef{Index: i, Name: eventSchema[i].Name, T: eventSchema[i].Type}
}

// A row whose filter, projection or aggregate argument fails (PostgreSQL would raise an
// error for it) goes to the dead-letter output with its reason and counts as bad; the job
// goes on and the other rows are written.
func TestFailedRowsGoToDeadLetter(t *testing.T) {
	// events: user_id, amount, ts, n
	src := newMemSource(true, 0, "0")
	src.feed("0", "a,1,10,2", "b,2,20,1", "c,3,30,0", "d,4,40,4")
	one := sql.NewLiteral(sql.BigInt(1))
	nMinus1 := sqlCall(t, "-", colRef(3), one)
	// WHERE 10 / (n - 1) <> 0: fails for n = 1.
	div := sqlCall(t, "/", sql.NewLiteral(sql.BigInt(10)), nMinus1)
	pred := compiled(t, sqlCall(t, "<>", div, sql.NewLiteral(sql.BigInt(0))))
	// SELECT user_id, amount / n: fails for n = 0.
	quot := compiled(t, sqlCall(t, "/", colRef(1), colRef(3)))
	outSchema := sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "q", Type: sql.TypeDouble}}
	var sk sinks
	spec := sourceSpec(map[string]string{"dlq_path": "dlq"}, 0)
	plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, spec, sinkSpec(outSchema), &planner.FilterNode{Pred: pred}, &planner.ProjectNode{Exprs: []planner.Evaluator{col(0), quot}, Schema: outSchema})}}
	j := runJob(t, "job", plan, testEnv(src, &sk))
	if d := diff(sk.get("out").bodies(), []string{"a,0.5", "d,1"}); d != "" {
		t.Fatalf("output: %s", d)
	}
	st := j.Stats()
	if st.Bad != 2 || len(st.BadErrors) != 2 {
		t.Fatalf("bad=%d errors=%q", st.Bad, st.BadErrors)
	}
	dlq := sk.get("dlq").bodies()
	if len(dlq) != 2 {
		t.Fatalf("dead letters: %q", dlq)
	}
	var recs []dlqRecord
	for _, b := range dlq {
		var r dlqRecord
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatalf("dead letter %q: %v", b, err)
		}
		recs = append(recs, r)
	}
	if recs[0].Error.Operator != "filter" || recs[0].Error.Code != sql.CodeDivisionByZero || !strings.Contains(string(recs[0].Row), `"user_id":"b"`) {
		t.Fatalf("first dead letter: %+v %s", recs[0], recs[0].Row)
	}
	if recs[1].Error.Operator != "project" || recs[1].Error.Code != sql.CodeDivisionByZero || recs[1].Stream != "events" || !strings.Contains(string(recs[1].Row), `"n":0`) {
		t.Fatalf("second dead letter: %+v %s", recs[1], recs[1].Row)
	}
	// Each names the offset it was read at, in the dead letter and in its error.
	for i, want := range []int64{2, 3} {
		if recs[i].Offset == nil || *recs[i].Offset != want {
			t.Errorf("dead letter %d: offset %v, want %d", i, recs[i].Offset, want)
		}
		if w := fmt.Sprintf("stream events, split 0, offset %d: ", want); !strings.HasPrefix(st.BadErrors[i], w) {
			t.Errorf("bad record error %q does not start with %q", st.BadErrors[i], w)
		}
	}
}

// Bad records are logged as they happen, at most badLogBurst per badLogEvery per job; the
// next line logged after that says how many were not.
func TestBadRecordsLoggedRateLimited(t *testing.T) {
	src := newMemSource(false, 0, "0")
	var mu sync.Mutex
	var lines []string
	now := time.Unix(1_796_000_000, 0)
	var sk sinks
	env := testEnv(src, &sk)
	env.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	env.Logf = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	quot := compiled(t, sqlCall(t, "/", colRef(1), colRef(3)))
	outSchema := sql.Schema{{Name: "q", Type: sql.TypeDouble}}
	plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, sourceSpec(nil, 0), sinkSpec(outSchema), &planner.ProjectNode{Exprs: []planner.Evaluator{quot}, Schema: outSchema})}}
	j, err := Start(context.Background(), "job", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	feedBad := func(from, n int, total int64) {
		t.Helper()
		for i := from; i < from+n; i++ {
			src.feed("0", fmt.Sprintf("u%d,1,%d,0", i, i)) // amount / 0
		}
		waitFor(t, "bad records", func() bool { return j.Stats().Bad == total })
	}
	feedBad(0, 25, 25)
	mu.Lock()
	got := append([]string(nil), lines...)
	mu.Unlock()
	if len(got) != badLogBurst {
		t.Fatalf("%d lines logged for 25 bad records, want %d:\n%s", len(got), badLogBurst, strings.Join(got, "\n"))
	}
	if want := "job job: bad record: stream events, split 0, offset 1: project: ERROR 22012: division by zero"; got[0] != want {
		t.Errorf("first line %q, want %q", got[0], want)
	}
	mu.Lock()
	now = now.Add(badLogEvery)
	mu.Unlock()
	feedBad(25, 1, 26)
	mu.Lock()
	got = append([]string(nil), lines...)
	mu.Unlock()
	if len(got) != badLogBurst+2 || !strings.Contains(got[badLogBurst], "15 more bad records were not logged") ||
		!strings.Contains(got[badLogBurst+1], "offset 26: ") {
		t.Fatalf("after the window:\n%s", strings.Join(got, "\n"))
	}
}

func sqlCall(t *testing.T, fn string, args ...sql.Expr) sql.Expr {
	t.Helper()
	e, err := sql.NewCall(fn, args...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A failing aggregate argument drops the row from every group and routes it to the bad
// path; the sums of the other rows are exact.
func TestFailedAggregateArgument(t *testing.T) {
	src := newMemSource(true, 0, "0")
	src.feed("0", "a,1,10,2", "a,2,20,0", "a,3,30,5")
	// SUM(10 / n)
	arg := compiled(t, sqlCall(t, "/", sql.NewLiteral(sql.BigInt(10)), colRef(3)))
	aggs := []planner.AggSpec{builtinAgg("SUM", arg, sql.TypeBigInt, sql.TypeBigInt)}
	node := &planner.AggregateNode{Window: planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000},
		Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar}, Aggs: aggs, Schema: aggSchema(1, true, aggs)}
	var sk sinks
	plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, sourceSpec(map[string]string{"dlq_path": "dlq"}, 0), sinkSpec(node.Schema), node)}}
	j := runJob(t, "job", plan, testEnv(src, &sk))
	if d := diff(sk.get("out").bodies(), []string{"a,0,1000,7"}); d != "" {
		t.Fatalf("output: %s", d)
	}
	if st := j.Stats(); st.Bad != 1 || len(sk.get("dlq").bodies()) != 1 || !strings.Contains(sk.get("dlq").bodies()[0], `"operator":"aggregate"`) {
		t.Fatalf("bad=%d dlq=%q", st.Bad, sk.get("dlq").bodies())
	}
}

// A value the sink's format cannot write goes to the bad path instead of failing the job;
// without a job the sink fails the batch.
func TestSinkEncodingFailure(t *testing.T) {
	var sk sinks
	s, _ := sk.open(sinkSpec(nil))
	op := &sinkOp{sink: s, format: failOnInf{}, cnt: &counters{}, what: "out"}
	b := &Batch{Split: "0", Rows: []sql.Row{{sql.Double(1)}, {sql.Double(math.Inf(1))}}}
	var se *SinkError
	if err := op.Process(b); !errors.As(err, &se) {
		t.Fatalf("without a bad-record path: %v", err)
	}
}

type failOnInf struct{}

func (failOnInf) Decode(body []byte, row sql.Row) (sql.Row, error) { return row, nil }
func (failOnInf) Encode(dst []byte, row sql.Row) ([]byte, error) {
	if math.IsInf(row[0].F(), 0) {
		return dst, errors.New("Infinity has no JSON number")
	}
	return append(dst, sql.Text(row[0])...), nil
}

// failNeg is an aggregate that may fail (like a user aggregate): the sum of its
// argument, failing on a negative value.
type failNeg struct{}

func (failNeg) Add(s *sql.AggState, a []sql.Value) *sql.Error {
	if a[0].I < 0 {
		return sql.Errorf("38000", "negative %d", a[0].I)
	}
	s.I += a[0].I
	return nil
}
func (failNeg) Merge(d, s *sql.AggState)         { d.I += s.I }
func (failNeg) Result(s *sql.AggState) sql.Value { return sql.BigInt(s.I) }
func (failNeg) Encode(*sql.AggState) error       { return nil }
func (failNeg) Decode(*sql.AggState) error       { return nil }

// A row an aggregate fails on changes nothing: the group or session it would have made
// does not exist, the session it would have extended keeps its bounds, and the aggregates
// before the failing one are rolled back (COUNT(*) does not count it).
func TestAggregateFailingOnARow(t *testing.T) {
	for _, c := range []struct {
		w    planner.WindowSpec
		rows []string
		want []string
	}{
		{planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000},
			[]string{"a,1,10,2", "b,2,20,-1", "a,3,30,-5", "a,4,40,3"}, []string{"a,0,1000,2,5"}},
		{planner.WindowSpec{Kind: planner.WindowSession, Time: 2, Gap: 100},
			[]string{"a,1,10,2", "a,2,150,-1", "a,3,105,-7", "a,4,300,1"}, []string{"a,10,110,1,2", "a,300,400,1,1"}},
	} {
		src := newMemSource(true, 0, "0")
		src.feed("0", c.rows...)
		aggs := []planner.AggSpec{builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
			{Func: failNeg{}, Args: []planner.Evaluator{col(3)}, ArgTypes: []sql.Type{sql.TypeBigInt}, Type: sql.TypeBigInt, Text: "fail_neg(n)", MayFail: true}}
		node := &planner.AggregateNode{Window: c.w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
			Aggs: aggs, Schema: aggSchema(1, true, aggs)}
		var sk sinks
		plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, sourceSpec(map[string]string{"dlq_path": "dlq"}, 0), sinkSpec(node.Schema), node)}}
		j := runJob(t, "job", plan, testEnv(src, &sk))
		if d := diff(sk.get("out").bodies(), c.want); d != "" {
			t.Errorf("%v: output: %s", c.w.Kind, d)
		}
		if st := j.Stats(); st.Bad != 2 || len(sk.get("dlq").bodies()) != 2 {
			t.Errorf("%v: bad=%d dlq=%q", c.w.Kind, st.Bad, sk.get("dlq").bodies())
		}
	}
}

// A row error without its cause (an operator's bug) still prints, as an internal error,
// instead of panicking in the job's bookkeeping of bad rows (where a panic once left the
// job's lock held and its failure waiting for ever).
func TestRowErrorWithoutCause(t *testing.T) {
	for _, e := range []*RowError{{Stream: "s", Split: "0", Operator: "aggregate"}, {Stream: "v", View: true, Operator: "aggregate"}} {
		if msg := e.Error(); !strings.Contains(msg, "XX000") || !strings.Contains(msg, "without a cause") {
			t.Errorf("%q", msg)
		}
	}
}
