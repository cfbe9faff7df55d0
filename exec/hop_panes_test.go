package exec

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// rowStrings collects emitted rows as comma-joined text.
type rowStrings struct{ rows []string }

func (c *rowStrings) Emit(b *Batch) error {
	for _, r := range b.Rows {
		parts := make([]string, len(r))
		for i, v := range r {
			parts[i] = v.String()
		}
		c.rows = append(c.rows, strings.Join(parts, ","))
	}
	return nil
}

// hopRow: key, an integer, the event time, a string.
func hopRow(k string, n, ts int64, s string) sql.Row {
	return sql.Row{sql.Varchar(k), sql.BigInt(n), sql.Timestamp(ts), sql.Varchar(s)}
}

// hopAggs are aggregates that all merge exactly (so a hop aggregation of them runs by panes).
func hopAggs() []planner.AggSpec {
	return []planner.AggSpec{
		builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
		builtinAgg("SUM", col(1), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("MIN", col(3), sql.TypeVarchar, sql.TypeVarchar),
		builtinAgg("MAX", col(1), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("COUNT(DISTINCT)", col(1), sql.TypeBigInt, sql.TypeBigInt),
	}
}

// hopInput is a random sequence of batches of rows mostly in time order (some up to 1.5 s
// back, one in twenty up to 14 s), each followed by a watermark of the largest time so far minus one second.
type hopInput struct {
	batches [][]sql.Row
	wms     []int64
}

func newHopInput(seed uint64, batches int) hopInput {
	rng := rand.New(rand.NewPCG(seed, 1))
	var in hopInput
	var t, maxT int64 = 5_000, 0
	for range batches {
		var rows []sql.Row
		for range 1 + rng.IntN(30) {
			t += int64(rng.IntN(120))
			ts := t - int64(rng.IntN(1500))*int64(rng.IntN(2))
			if rng.IntN(20) == 0 {
				ts = t - int64(rng.IntN(14_000)) // often late
			}
			maxT = max(maxT, ts)
			k := "k" + strconv.Itoa(rng.IntN(12))
			n := int64(rng.IntN(50))
			rows = append(rows, hopRow(k, n, ts, "s"+strconv.Itoa(rng.IntN(9))))
		}
		in.batches = append(in.batches, rows)
		in.wms = append(in.wms, maxT-1000)
	}
	return in
}

// runHop runs in through a hop aggregation, its operator made by mk over a memory store.
// After the batches listed in restarts the split is removed (its state written to the
// store) and a new operator from mk loads it and gets the last watermark, as a stage does
// after a restore.
func runHop(t *testing.T, in hopInput, restarts map[int]bool, mk func(state.Store, *counters) *aggOp) (out []string, late int64) {
	t.Helper()
	store := state.NewMemory()
	c := &rowStrings{}
	var cnt counters
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	op := newOpChain(c, mk(store, &cnt))
	must(op.Control(&Control{Kind: NewSplit, Split: "s"}))
	wm := MinWatermark
	for i, rows := range in.batches {
		must(op.Process(&Batch{Split: "s", Rows: rows}))
		if in.wms[i] > wm {
			wm = in.wms[i]
			must(op.Watermark("s", wm))
		}
		if restarts[i] {
			ck := &Control{Kind: Checkpoint, Epoch: int64(i), State: &state.Batch{}}
			must(op.Control(ck))
			must(store.Write(ck.State))
			rm := &Control{Kind: RemoveSplit, Split: "s", State: &state.Batch{}}
			must(op.Control(rm))
			must(store.Write(rm.State))
			op = newOpChain(c, mk(store, &cnt))
			must(op.Control(&Control{Kind: NewSplit, Split: "s"}))
			if wm > MinWatermark {
				must(op.Watermark("s", wm))
			}
		}
	}
	must(op.Watermark("s", MaxWatermark))
	ck := &Control{Kind: Checkpoint, Epoch: 1 << 30, State: &state.Batch{}}
	must(op.Control(ck))
	must(store.Write(ck.State))
	left := 0
	must(store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error { left++; return nil }))
	if left != 0 {
		t.Errorf("%d state keys left after every window closed", left)
	}
	return sorted(c.rows), cnt.late.Load()
}

// hopCounts is the reference for COUNT(*): per key and window, the rows that arrived
// before the window closed.
func hopCounts(in hopInput, size, slide int64) (counts map[string]int64, late int64) {
	counts = map[string]int64{}
	wm := MinWatermark
	for i, rows := range in.batches {
		for _, r := range rows {
			ts, placed := r[2].I, false
			for s := floorDiv(ts, slide) * slide; s > ts-size; s -= slide {
				if s+size > wm {
					counts[r[0].S+","+sql.Timestamp(s).String()+","+sql.Timestamp(s+size).String()]++
					placed = true
				}
			}
			if !placed {
				late++
			}
		}
		wm = max(wm, in.wms[i])
	}
	return counts, late
}

// TestHopPanesEqualWindows: a hop aggregation by panes emits what the same aggregation
// computing every window row by row emits, through restores between and within windows,
// with late and out-of-order rows, and leaves no state behind.
func TestHopPanesEqualWindows(t *testing.T) {
	for _, c := range []struct{ size, slide, pane int64 }{{10_000, 2_000, 2_000}, {5_000, 2_000, 1_000}, {3_000, 1_000, 1_000}} {
		t.Run(strconv.FormatInt(c.size, 10)+"/"+strconv.FormatInt(c.slide, 10), func(t *testing.T) {
			w := planner.WindowSpec{Kind: planner.WindowHop, Time: 2, Size: c.size, Slide: c.slide}
			aggs := hopAggs()
			node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
				Aggs: aggs, Emit: planner.EmitOnClose, Schema: aggSchema(1, true, aggs)}
			in := newHopInput(uint64(c.size+c.slide), 400)
			restarts := map[int]bool{37: true, 38: true, 120: true, 255: true, 256: true, 331: true}
			panes := func(store state.Store, cnt *counters) *aggOp {
				a := newAggOp(node, "j", "agg", store, nil, cnt)
				if a.paneW != c.pane {
					t.Fatalf("pane width %d, want %d", a.paneW, c.pane)
				}
				return a
			}
			windows := func(store state.Store, cnt *counters) *aggOp {
				a := newAggOp(node, "j", "agg", store, nil, cnt)
				a.byWindows()
				return a
			}
			got, gotLate := runHop(t, in, restarts, panes)
			want, wantLate := runHop(t, in, restarts, windows)
			if d := diff(got, want); d != "" {
				t.Fatalf("panes and windows differ:\n%s", d)
			}
			counts, late := hopCounts(in, c.size, c.slide)
			if late == 0 || gotLate != late || wantLate != late {
				t.Fatalf("late rows: panes %d, windows %d, reference %d (want > 0)", gotLate, wantLate, late)
			}
			if len(got) != len(counts) {
				t.Fatalf("%d groups emitted, the reference has %d", len(got), len(counts))
			}
			for _, r := range got {
				f := strings.Split(r, ",")
				if n, _ := strconv.ParseInt(f[3], 10, 64); counts[strings.Join(f[:3], ",")] != n {
					t.Fatalf("row %s: the reference counts %d", r, counts[strings.Join(f[:3], ",")])
				}
			}
		})
	}
}

// TestHopPanesLoadWindowState: state that an aggregation computing whole windows wrote (as
// versions before panes did) is loaded by one computing panes, and every window comes out
// as if one had run throughout.
func TestHopPanesLoadWindowState(t *testing.T) {
	w := planner.WindowSpec{Kind: planner.WindowHop, Time: 2, Size: 10_000, Slide: 2_000}
	aggs := hopAggs()
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: aggs, Emit: planner.EmitOnClose, Schema: aggSchema(1, true, aggs)}
	in := newHopInput(7, 300)
	windows := func(store state.Store, cnt *counters) *aggOp {
		a := newAggOp(node, "j", "agg", store, nil, cnt)
		a.byWindows()
		return a
	}
	made := 0
	firstWindows := func(store state.Store, cnt *counters) *aggOp {
		made++
		if made == 1 {
			return windows(store, cnt)
		}
		return newAggOp(node, "j", "agg", store, nil, cnt)
	}
	restarts := map[int]bool{150: true}
	want, _ := runHop(t, in, restarts, windows)
	got, _ := runHop(t, in, restarts, firstWindows)
	if made != 2 {
		t.Fatalf("%d operators made, want 2", made)
	}
	if d := diff(got, want); d != "" {
		t.Fatalf("restored from window state:\n%s", d)
	}
}

// TestAggregationTTLExpires: without a window, a group whose last row is older than the
// state TTL leaves memory and the store, while groups changed meanwhile are saved, and a
// later row of the expired key starts it again.
func TestAggregationTTLExpires(t *testing.T) {
	aggs := []planner.AggSpec{builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt)}
	node := &planner.AggregateNode{Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: aggs, TTL: 1000, Schema: aggSchema(1, false, aggs)}
	store := state.NewMemory()
	var cnt counters
	out := &rowStrings{}
	a := newOpChain(out, newAggOp(node, "j", "agg", store, nil, &cnt))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	rows := func(keys ...string) *Batch {
		b := &Batch{Split: "s"}
		for _, k := range keys {
			b.Rows = append(b.Rows, hopRow(k, 0, 0, ""))
		}
		return b
	}
	checkpoint := func() map[string]int64 {
		c := &Control{Kind: Checkpoint, State: &state.Batch{}}
		must(a.Control(c))
		must(store.Write(c.State))
		got := map[string]int64{}
		must(store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error {
			keys, _, _, accs, err := decodeGroupState(v, 1, 1)
			if err == nil {
				got[keys[0].S] = accs[0].N
			}
			return err
		}))
		return got
	}
	must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
	must(a.Watermark("s", 100))
	must(a.Process(rows("a", "b")))
	if got := checkpoint(); len(got) != 2 || got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("first checkpoint %v", got)
	}
	must(a.Watermark("s", 900))
	must(a.Process(rows("b", "c")))
	must(a.Watermark("s", 1300)) // a's last row came at 100 < 1300 - 1000: it expires
	if got := checkpoint(); len(got) != 2 || got["b"] != 2 || got["c"] != 1 {
		t.Fatalf("after a expired the store holds %v, want b=2 c=1", got)
	}
	must(a.Process(rows("a", "c")))
	if got := checkpoint(); len(got) != 3 || got["a"] != 1 || got["b"] != 2 || got["c"] != 2 {
		t.Fatalf("after a came back the store holds %v, want a=1 b=2 c=2", got)
	}
	if n := len(out.rows); n != 6 || out.rows[n-2] != "a,1" || out.rows[n-1] != "c,2" {
		t.Fatalf("emitted %v", out.rows)
	}
}

// State of panes loaded by an aggregation that does not compute by panes (the query
// changed) is refused with a StateError, not read as windows.
func TestHopPaneStateRefusedWithoutPanes(t *testing.T) {
	w := planner.WindowSpec{Kind: planner.WindowHop, Time: 2, Size: 10_000, Slide: 2_000}
	aggs := hopAggs()
	node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar},
		Aggs: aggs, Emit: planner.EmitOnClose, Schema: aggSchema(1, true, aggs)}
	store := state.NewMemory()
	var cnt counters
	a := newOpChain(&rowStrings{}, newAggOp(node, "j", "agg", store, nil, &cnt))
	if err := a.Control(&Control{Kind: NewSplit, Split: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Process(&Batch{Split: "s", Rows: []sql.Row{hopRow("k", 1, 5_000, "x")}}); err != nil {
		t.Fatal(err)
	}
	rm := &Control{Kind: RemoveSplit, Split: "s", State: &state.Batch{}}
	if err := a.Control(rm); err != nil {
		t.Fatal(err)
	}
	if err := store.Write(rm.State); err != nil {
		t.Fatal(err)
	}
	op := newAggOp(node, "j", "agg", store, nil, &cnt)
	op.byWindows()
	err := newOpChain(&rowStrings{}, op).Control(&Control{Kind: NewSplit, Split: "s"})
	var se *StateError
	if !errors.As(err, &se) || !errors.Is(err, errBadState) {
		t.Fatalf("loading panes without panes: %v", err)
	}
}
