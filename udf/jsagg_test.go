package udf

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"rsql/sql"
)

const weightedAvg = `{
	create() { return {s: 0, w: 0}; },
	add(st, v, w) { st.s += v * w; st.w += w; return st; },
	merge(a, b) { return {s: a.s + b.s, w: a.w + b.w}; },
	result(st) { return st.w === 0 ? null : st.s / st.w; }
}`

func newWAvg(t *testing.T, r *Runtime, body string) sql.Aggregator {
	t.Helper()
	d, err := r.Agg(Spec{Name: "weighted_avg", Aggregate: true, Language: LangJS, Body: body, Returns: sql.TypeDouble,
		Params: sql.Schema{{Name: "v", Type: sql.TypeDouble}, {Name: "w", Type: sql.TypeDouble}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.New(sql.AggCall{Func: d.Name, T: sql.TypeDouble, Def: d})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Adding rows in parts, merging the parts, and checkpointing a part (Encode, then Decode
// into a new aggregator as after a restart) give the weighted average Go computes.
func TestJSAggregateAgainstGo(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	rnd := rand.New(rand.NewPCG(3, 4))
	a := newWAvg(t, r, weightedAvg)
	var parts [3]sql.AggState
	var sum, wsum float64
	for i := 0; i < 3000; i++ {
		v, w := rnd.Float64()*100, float64(rnd.IntN(5))
		sum, wsum = sum+v*w, wsum+w
		if err := a.Add(&parts[i%3], []sql.Value{sql.Double(v), sql.Double(w)}); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 { // NULL arguments are skipped
			if err := a.Add(&parts[i%3], []sql.Value{sql.Null, sql.Double(1)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Part 2 goes through a checkpoint and a restart.
	if err := a.Encode(&parts[2]); err != nil {
		t.Fatal(err)
	}
	stored := sql.AggState{N: parts[2].N, V: parts[2].V}
	b := newWAvg(t, r, weightedAvg)
	if err := b.Decode(&stored); err != nil {
		t.Fatal(err)
	}
	b.Merge(&parts[0], &parts[1])
	b.Merge(&parts[0], &stored)
	got := b.Result(&parts[0])
	if got.IsError() || math.Abs(got.F()-sum/wsum) > 1e-9 || parts[0].N != 3000 {
		t.Fatalf("weighted_avg = %v (%v) over %d rows, want %v over 3000", got, got.AsError(), parts[0].N, sum/wsum)
	}
	var empty sql.AggState
	if v := b.Result(&empty); !v.IsNull() || v.IsError() {
		t.Errorf("empty group = %v", v)
	}
}

func TestJSAggregateFailures(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	a := newWAvg(t, r, strings.Replace(weightedAvg, "add(st, v, w) {", "add(st, v, w) { if (v < 0) throw new Error('negative ' + v);", 1))
	var s sql.AggState
	if err := a.Add(&s, []sql.Value{sql.Double(2), sql.Double(1)}); err != nil {
		t.Fatal(err)
	}
	err := a.Add(&s, []sql.Value{sql.Double(-1), sql.Double(1)})
	if err == nil || err.Code != "38000" || !strings.Contains(err.Message, "negative -1") {
		t.Fatalf("throwing add: %v", err)
	}
	if got := a.Result(&s); got.F() != 2 || s.N != 1 {
		t.Errorf("after the failed row: %v over %d rows", got, s.N)
	}
	for body, msg := range map[string]string{
		"{create() {return 0}}": "no add function",
		"42":                    "must be an object",
		"{create() {":           "JavaScript syntax error",
	} {
		_, err := r.Agg(Spec{Name: "bad", Aggregate: true, Language: LangJS, Body: body, Returns: sql.TypeDouble})
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %s", body, err, msg)
		}
	}
	// Corrupt stored state fails the restore.
	if err := a.Decode(&sql.AggState{V: sql.JSONValue("{not json")}); err == nil {
		t.Error("corrupt state decoded")
	}
}
