package exec

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// The input of these tests: k VARCHAR, x BIGINT (nullable), then the change column.
func chRow(k string, x int64, del bool) sql.Row {
	op := sql.Null
	if del {
		op = sql.OpDelete
	}
	return sql.Row{sql.Varchar(k), sql.BigInt(x), op}
}

func chRowNull(k string, del bool) sql.Row {
	r := chRow(k, 0, del)
	r[1] = sql.Null
	return r
}

// retractNode: GROUP BY k (nk = 1) or global (nk = 0) over the test input, with aggs over x.
func retractNode(nk int, changes planner.ChangeMode, aggs ...string) *planner.AggregateNode {
	n := &planner.AggregateNode{Retracting: true, Changes: changes, Emit: planner.EmitChanges}
	if nk > 0 {
		n.Keys, n.KeyTypes = []planner.Evaluator{col(0)}, []sql.Type{sql.TypeVarchar}
	}
	if changes == planner.AppendOnly {
		n.Emit = planner.EmitOnClose
	}
	for _, name := range aggs {
		switch name {
		case "COUNT(*)":
			n.Aggs = append(n.Aggs, builtinAgg(name, nil, sql.TypeNull, sql.TypeBigInt))
		case "COUNT", "COUNT(DISTINCT)":
			n.Aggs = append(n.Aggs, builtinAgg(name, col(1), sql.TypeBigInt, sql.TypeBigInt))
		case "AVG":
			n.Aggs = append(n.Aggs, builtinAgg(name, col(1), sql.TypeBigInt, sql.TypeDouble))
		default:
			n.Aggs = append(n.Aggs, builtinAgg(name, col(1), sql.TypeBigInt, sql.TypeBigInt))
		}
	}
	return n
}

// retractHarness runs a retractAggOp over one split "s" and keeps its output.
type retractHarness struct {
	t     *testing.T
	node  *planner.AggregateNode
	store state.Store
	op    *retractAggOp
	out   *rowStrings
	epoch int64
}

func newRetractHarness(t *testing.T, node *planner.AggregateNode, store state.Store) *retractHarness {
	h := &retractHarness{t: t, node: node, store: store}
	h.start()
	return h
}

// start opens a new operator over the store (a restart) and gives it the split.
func (h *retractHarness) start() {
	h.t.Helper()
	h.op = newRetractAggOp(h.node, "j", "agg", h.store)
	h.out = &rowStrings{}
	if err := h.op.Control(&Control{Kind: NewSplit, Split: "s"}, h.out); err != nil {
		h.t.Fatal(err)
	}
}

// feed processes rows as one batch and returns what it emitted.
func (h *retractHarness) feed(rows ...sql.Row) []string {
	h.t.Helper()
	n := len(h.out.rows)
	if err := h.op.Process(0, &Batch{Split: "s", Rows: rows}, h.out); err != nil {
		h.t.Fatal(err)
	}
	return h.out.rows[n:]
}

func (h *retractHarness) checkpoint() {
	h.t.Helper()
	h.epoch++
	c := &Control{Kind: Checkpoint, Epoch: h.epoch, State: &state.Batch{}}
	if err := h.op.Control(c, h.out); err != nil {
		h.t.Fatal(err)
	}
	if err := h.store.Write(c.State); err != nil {
		h.t.Fatal(err)
	}
}

func wantEmitted(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("%s: emitted\n  %q\nwant\n  %q", what, got, want)
	}
}

func TestRetractAggScenarios(t *testing.T) {
	t.Run("retract", func(t *testing.T) {
		h := newRetractHarness(t, retractNode(1, planner.Retract, "COUNT(*)", "SUM", "MIN", "MAX"), state.NewMemory())
		wantEmitted(t, "insert", h.feed(chRow("a", 5, false)), "a,1,5,5,5,NULL")
		wantEmitted(t, "second insert", h.feed(chRow("a", 7, false)), "a,1,5,5,5,delete", "a,2,12,5,7,NULL")
		// Retracting the maximum recomputes it from the values left.
		wantEmitted(t, "delete the max", h.feed(chRow("a", 7, true)), "a,2,12,5,7,delete", "a,1,5,5,5,NULL")
		// An insert and its delete in one batch change nothing.
		wantEmitted(t, "insert+delete", h.feed(chRow("a", 9, false), chRow("a", 9, true)))
		// The group goes to zero rows: its row is deleted, then it comes back from nothing.
		wantEmitted(t, "to zero", h.feed(chRow("a", 5, true)), "a,1,5,5,5,delete")
		wantEmitted(t, "back", h.feed(chRow("a", 3, false)), "a,1,3,3,3,NULL")
		if len(h.op.splits["s"].groups) != 1 {
			t.Fatalf("groups: %d", len(h.op.splits["s"].groups))
		}
	})
	t.Run("upsert", func(t *testing.T) {
		h := newRetractHarness(t, retractNode(1, planner.Upsert, "COUNT(*)", "MAX"), state.NewMemory())
		wantEmitted(t, "inserts", h.feed(chRow("a", 5, false), chRow("b", 1, false), chRow("a", 6, false)), "a,2,6,NULL", "b,1,1,NULL")
		// A change that leaves the row as it was emits nothing.
		wantEmitted(t, "same row", h.feed(chRow("a", 6, true), chRow("a", 6, false)))
		wantEmitted(t, "gone", h.feed(chRow("b", 1, true)), "b,1,1,delete")
		wantEmitted(t, "max goes", h.feed(chRow("a", 6, true)), "a,1,5,NULL")
	})
	t.Run("delete before insert", func(t *testing.T) {
		h := newRetractHarness(t, retractNode(1, planner.Retract, "COUNT(*)", "SUM", "MIN"), state.NewMemory())
		// A delete of a row never added leaves the group below zero rows: no row.
		wantEmitted(t, "stray delete", h.feed(chRow("a", 4, true)))
		// The insert it undoes balances it: still nothing.
		wantEmitted(t, "its insert", h.feed(chRow("a", 4, false)))
		wantEmitted(t, "then a row", h.feed(chRow("a", 8, false)), "a,1,8,8,NULL")
		// And a delete of a row never added to a live group takes its values back.
		wantEmitted(t, "stray delete in a group", h.feed(chRow("a", 3, true), chRow("a", 2, false)), "a,1,8,8,delete", "a,1,7,2,NULL")
	})
	t.Run("count distinct and nulls", func(t *testing.T) {
		h := newRetractHarness(t, retractNode(1, planner.Retract, "COUNT(DISTINCT)", "COUNT", "COUNT(*)", "AVG"), state.NewMemory())
		wantEmitted(t, "inserts", h.feed(chRow("a", 1, false), chRow("a", 1, false), chRow("a", 2, false), chRowNull("a", false)), "a,2,3,4,1.3333333333333333,NULL")
		wantEmitted(t, "one copy goes", h.feed(chRow("a", 1, true)), "a,2,3,4,1.3333333333333333,delete", "a,2,2,3,1.5,NULL")
		wantEmitted(t, "last copy goes", h.feed(chRow("a", 1, true)), "a,2,2,3,1.5,delete", "a,1,1,2,2,NULL")
		wantEmitted(t, "null goes", h.feed(chRowNull("a", true)), "a,1,1,2,2,delete", "a,1,1,1,2,NULL")
	})
	t.Run("global over empty input", func(t *testing.T) {
		store := state.NewMemory()
		h := newRetractHarness(t, retractNode(0, planner.Retract, "COUNT(*)", "SUM", "MIN", "MAX"), store)
		wantEmitted(t, "start", h.out.rows, "0,NULL,NULL,NULL,NULL")
		wantEmitted(t, "insert", h.feed(chRow("a", 2, false)), "0,NULL,NULL,NULL,delete", "1,2,2,2,NULL")
		// The global group never disappears: back to COUNT 0.
		wantEmitted(t, "delete", h.feed(chRow("a", 2, true)), "1,2,2,2,delete", "0,NULL,NULL,NULL,NULL")
		h.checkpoint()
		// Restarted from the checkpoint, it does not emit its row again.
		h.start()
		wantEmitted(t, "restart", h.out.rows)
		wantEmitted(t, "insert after restart", h.feed(chRow("b", 4, false)), "0,NULL,NULL,NULL,delete", "1,4,4,4,NULL")
	})
	t.Run("global upsert", func(t *testing.T) {
		h := newRetractHarness(t, retractNode(0, planner.Upsert, "COUNT(*)"), state.NewMemory())
		wantEmitted(t, "start", h.out.rows, "0,NULL")
		wantEmitted(t, "insert", h.feed(chRow("a", 2, false)), "1,NULL")
	})
	t.Run("emit on close", func(t *testing.T) {
		for _, nk := range []int{0, 1} {
			h := newRetractHarness(t, retractNode(nk, planner.AppendOnly, "COUNT(*)", "MAX"), state.NewMemory())
			wantEmitted(t, "rows", h.feed(chRow("a", 5, false), chRow("a", 6, false), chRow("b", 1, false), chRow("b", 1, true), chRow("a", 6, true)))
			if err := h.op.Watermark("s", MaxWatermark, h.out); err != nil {
				t.Fatal(err)
			}
			want := []string{"a,1,5"}
			if nk == 0 {
				want = []string{"1,5"}
			}
			wantEmitted(t, "end", h.out.rows, want...)
		}
		h := newRetractHarness(t, retractNode(0, planner.AppendOnly, "COUNT(*)", "MAX"), state.NewMemory())
		h.op.Watermark("s", MaxWatermark, h.out)
		wantEmitted(t, "empty global", h.out.rows, "0,NULL")
	})
	t.Run("state restored", func(t *testing.T) {
		store := state.NewMemory()
		node := retractNode(1, planner.Retract, "COUNT(*)", "SUM", "MIN", "COUNT(DISTINCT)")
		h := newRetractHarness(t, node, store)
		h.feed(chRow("a", 5, false), chRow("a", 3, false), chRow("a", 3, false), chRow("b", 1, false), chRow("c", 1, false))
		h.checkpoint()
		h.feed(chRow("c", 1, true)) // c is dropped
		h.checkpoint()
		h.feed(chRow("a", 9, false)) // lost: after the checkpoint
		h.start()
		if got := len(h.op.splits["s"].groups); got != 2 {
			t.Fatalf("restored %d groups, want 2", got)
		}
		n := 0
		if err := store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Fatalf("%d groups stored, want 2", n)
		}
		// The minimum's going after the restart is recomputed from the restored values.
		wantEmitted(t, "after restart", h.feed(chRow("a", 3, true), chRow("a", 3, true)), "a,3,11,3,2,delete", "a,1,5,5,1,NULL")
		wantEmitted(t, "b", h.feed(chRow("b", 1, true)), "b,1,1,1,1,delete")
	})
}

// nullX stands for a NULL x in retractModel.
const nullX = math.MinInt64

// chRowX is chRow, x NULL when it is nullX.
func chRowX(k string, x int64, del bool) sql.Row {
	if x == nullX {
		return chRowNull(k, del)
	}
	return chRow(k, x, del)
}

// retractModel is the expected view: the multiset of current input rows per key.
type retractModel map[string][]int64

// answer computes COUNT(*), SUM, MIN, MAX, COUNT(DISTINCT), AVG per key over the current
// rows, as PostgreSQL would (groups without rows have no row; global: one row).
func (m retractModel) answer(global bool) []string {
	var out []string
	all := map[string][]int64{}
	for k, xs := range m {
		if global {
			all[""] = append(all[""], xs...)
		} else if len(xs) > 0 {
			all[k] = xs
		}
	}
	if global && all[""] == nil {
		all[""] = nil
	}
	for k, xs := range all {
		row := ""
		if !global {
			row = k + ","
		}
		var vals []int64 // the non-NULL ones
		for _, x := range xs {
			if x != nullX {
				vals = append(vals, x)
			}
		}
		if len(vals) == 0 {
			out = append(out, fmt.Sprintf("%s%d,NULL,NULL,NULL,0,NULL", row, len(xs)))
			continue
		}
		sum, mn, mx := int64(0), vals[0], vals[0]
		d := map[int64]bool{}
		for _, x := range vals {
			sum += x
			mn, mx = min(mn, x), max(mx, x)
			d[x] = true
		}
		out = append(out, fmt.Sprintf("%s%d,%d,%d,%d,%d,%s", row, len(xs), sum, mn, mx, len(d), sql.Double(float64(sum)/float64(len(vals))).String()))
	}
	sort.Strings(out)
	return out
}

// applyChanges folds an operator's output rows into a view (Retract: one row per insert,
// deletes remove an equal row; Upsert: by the key, the first nk columns).
func applyChanges(t *testing.T, view map[string]int, keyed map[string]string, rows []string, mode planner.ChangeMode, nk int) {
	t.Helper()
	for _, r := range rows {
		i := strings.LastIndexByte(r, ',')
		body, op := r[:i], r[i+1:]
		key := strings.Join(strings.SplitN(body, ",", nk+1)[:nk], ",")
		switch {
		case mode == planner.Upsert && op == "delete":
			if _, ok := keyed[key]; !ok {
				t.Fatalf("upsert delete of absent key %q", key)
			}
			delete(keyed, key)
		case mode == planner.Upsert:
			keyed[key] = body
		case op == "delete":
			if view[body] == 0 {
				t.Fatalf("delete of a row the view does not have: %q", body)
			}
			view[body]--
		default:
			view[body]++
		}
	}
}

func viewRows(view map[string]int, keyed map[string]string) []string {
	var out []string
	for r, n := range view {
		for ; n > 0; n-- {
			out = append(out, r)
		}
	}
	for _, r := range keyed {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// A random changelog (inserts and deletes of rows inserted before), in random batches,
// with checkpoints and crashes (restarts that lose what came after the last checkpoint and
// replay it): the view built from the output is always the aggregate of the current rows.
func TestRetractAggAgainstModel(t *testing.T) {
	for _, mode := range []planner.ChangeMode{planner.Retract, planner.Upsert} {
		for _, nk := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/keys=%d", mode, nk), func(t *testing.T) {
				r := rand.New(rand.NewSource(int64(nk)*7 + int64(mode)))
				node := retractNode(nk, mode, "COUNT(*)", "SUM", "MIN", "MAX", "COUNT(DISTINCT)", "AVG")
				store := state.NewMemory()
				// The changelog, and the model after each prefix of it.
				var log []sql.Row
				cur := retractModel{}
				for i := 0; i < 3000; i++ {
					k := "k" + strconv.Itoa(r.Intn(12))
					if xs := cur[k]; len(xs) > 0 && r.Intn(5) < 2 {
						j := r.Intn(len(xs))
						log = append(log, chRowX(k, xs[j], true))
						cur[k] = append(xs[:j:j], xs[j+1:]...)
						continue
					}
					x := int64(r.Intn(40) - 10)
					if r.Intn(8) == 0 {
						x = nullX
					}
					log = append(log, chRowX(k, x, false))
					cur[k] = append(cur[k], x)
				}
				h := newRetractHarness(t, node, store)
				view, keyed := map[string]int{}, map[string]string{}
				committed := 0                                         // input rows covered by the last checkpoint
				var pending []string                                   // output since the last checkpoint
				cview, ckeyed := map[string]int{}, map[string]string{} // the view as of the checkpoint
				pending = append(pending, h.out.rows...)
				for pos := 0; pos < len(log); {
					n := 1 + r.Intn(40)
					if pos+n > len(log) {
						n = len(log) - pos
					}
					pending = append(pending, h.feed(log[pos:pos+n]...)...)
					pos += n
					switch r.Intn(10) {
					case 0, 1:
						h.checkpoint()
						applyChanges(t, cview, ckeyed, pending, mode, nk)
						pending, committed = nil, pos
					case 2:
						// Crash: the output since the checkpoint is lost, the input replayed.
						h.start()
						pending = append([]string(nil), h.out.rows...)
						pos = committed
					}
				}
				applyChanges(t, cview, ckeyed, pending, mode, nk)
				for k, n := range cview {
					view[k] = n
				}
				for k, v := range ckeyed {
					keyed[k] = v
				}
				got := viewRows(view, keyed)
				want := cur.answer(nk == 0)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("view:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		}
	}
}

// A global aggregation over a bounded input without rows answers one row (COUNT 0, the
// others NULL), as PostgreSQL does.
func TestGlobalAggregateOverNoRows(t *testing.T) {
	node := &planner.AggregateNode{Emit: planner.EmitOnClose, Aggs: []planner.AggSpec{
		builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt), builtinAgg("SUM", col(1), sql.TypeBigInt, sql.TypeBigInt)}}
	var cnt counters
	out := &rowStrings{}
	a := newAggOp(node, "j", "agg", nil, nil, &cnt)
	if err := a.Control(&Control{Kind: NewSplit, Split: "s"}, out); err != nil {
		t.Fatal(err)
	}
	if err := a.Watermark("s", MaxWatermark, out); err != nil {
		t.Fatal(err)
	}
	wantEmitted(t, "no rows", out.rows, "0,NULL")
	// With rows, its row is theirs alone.
	out = &rowStrings{}
	a = newAggOp(node, "j", "agg", nil, nil, &cnt)
	a.Process(0, &Batch{Split: "s", Rows: []sql.Row{{sql.Varchar("a"), sql.BigInt(3)}}}, out)
	a.Watermark("s", MaxWatermark, out)
	wantEmitted(t, "a row", out.rows, "1,3")
}

// An aggregation over an aggregation, planned from SQL and run by the runtime over an
// unbounded input split in two: the inner GROUP BY user_id retracts its old counts, the
// outer counts users per count. The job is stopped after more input than its checkpoint
// covers and started again over the same store; the rows before the checkpoint and the
// restarted job's make the answer over all the input.
func TestAggregateOverAggregateJobRestart(t *testing.T) {
	queries := []struct {
		sql    string
		answer func(perUser map[string]int64) []string
	}{
		{`SELECT n, COUNT(*) AS users FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x GROUP BY n`,
			func(perUser map[string]int64) []string {
				byN := map[int64]int{}
				for _, n := range perUser {
					byN[n]++
				}
				var out []string
				for n, u := range byN {
					out = append(out, fmt.Sprintf("%d,%d", n, u))
				}
				sort.Strings(out)
				return out
			}},
		{`SELECT SUM(n), MIN(n), MAX(n), COUNT(*) FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x`,
			func(perUser map[string]int64) []string {
				s, mn, mx := int64(0), int64(1<<62), int64(0)
				for _, n := range perUser {
					s, mn, mx = s+n, min(mn, n), max(mx, n)
				}
				return []string{fmt.Sprintf("%d,%d,%d,%d", s, mn, mx, len(perUser))}
			}},
		// DISTINCT is a GROUP BY without aggregates: a count leaves when its last user does.
		{`SELECT DISTINCT n FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x`,
			func(perUser map[string]int64) []string {
				seen := map[int64]bool{}
				var out []string
				for _, n := range perUser {
					if !seen[n] {
						seen[n] = true
						out = append(out, strconv.FormatInt(n, 10))
					}
				}
				sort.Strings(out)
				return out
			}},
	}
	for qi, q := range queries {
		t.Run(strconv.Itoa(qi), func(t *testing.T) {
			plan := planSQL(t, q.sql, planCatalog(), "aa")
			retracting := false
			for _, st := range plan.Stages {
				for _, op := range st.Ops {
					if a, ok := op.Node.(*planner.AggregateNode); ok && a.Retracting {
						retracting = true
					}
				}
			}
			if !retracting {
				t.Fatal("the outer aggregation does not take the inner one's changes")
			}
			evs := splitEvents(int64(60+qi), int64(70+qi), 3000, 300)
			var rows rowCollector
			j2 := runRestarted(t, "aa", plan, evs, 100, 1000, 500, &rows)
			defer j2.Stop()
			perUser := map[string]int64{}
			for sp := range evs {
				for _, e := range evs[sp] {
					perUser[e.user]++
				}
			}
			want := q.answer(perUser)
			var got []string
			deadline := time.Now().Add(30 * time.Second)
			for {
				// The client's view: upsert by the key (the grouping columns), or the one row.
				view := map[string]string{}
				for _, r := range rows.snapshot() {
					i := strings.LastIndexByte(r, ',')
					body, op := r[:i], r[i+1:]
					key := ""
					if qi != 1 {
						key = strings.SplitN(body, ",", 2)[0]
					}
					if op == "delete" {
						delete(view, key)
					} else {
						view[key] = body
					}
				}
				got = got[:0]
				for _, r := range view {
					got = append(got, r)
				}
				sort.Strings(got)
				if strings.Join(got, " ") == strings.Join(want, " ") {
					t.Logf("%d changes; view %v", len(rows.snapshot()), got)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("view %v, want %v", got, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// The outer aggregation of an aggregation over an aggregation, fed what the inner
// GROUP BY user_id, COUNT(*) AS n emits in Retract mode (n, n, user_id, change): per
// order, its user's old row as a delete and the new one. Rows/s counts the outer operator's input rows.
func BenchmarkRetractAggOverAgg(b *testing.B) {
	const users = 10_000
	// The changelog of 200k orders, in batches of 512 rows.
	r := rand.New(rand.NewSource(1))
	counts := make([]int64, users)
	var batches [][]sql.Row
	var cur []sql.Row
	total := 0
	for i := 0; i < 200_000; i++ {
		u := r.Intn(users)
		if counts[u] > 0 {
			n := counts[u]
			cur = append(cur, sql.Row{sql.BigInt(n), sql.BigInt(n), sql.OpDelete})
		}
		counts[u]++
		n := counts[u]
		cur = append(cur, sql.Row{sql.BigInt(n), sql.BigInt(n), sql.Null})
		if len(cur) >= 512 {
			batches = append(batches, cur)
			total += len(cur)
			cur = nil
		}
	}
	for _, c := range []struct {
		name string
		node *planner.AggregateNode
	}{
		{"group_by_n_count", retractNode(1, planner.Upsert, "COUNT(*)")},
		{"global_sum_min_max_count", retractNode(0, planner.Upsert, "SUM", "MIN", "MAX", "COUNT(*)")},
		// Users per count, distinct: each order moves its user out of one group's set.
		{"group_by_n_count_distinct", func() *planner.AggregateNode {
			n := retractNode(1, planner.Upsert)
			n.Aggs = []planner.AggSpec{builtinAgg("COUNT(DISTINCT)", col(2), sql.TypeBigInt, sql.TypeBigInt)}
			return n
		}()},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ResetTimer()
			rows := 0
			for i := 0; i < b.N; i++ {
				op := newRetractAggOp(c.node, "bench", "agg", nil)
				if err := op.Control(&Control{Kind: NewSplit, Split: "s"}, &discard{}); err != nil {
					b.Fatal(err)
				}
				for _, rs := range batches {
					if err := op.Process(0, &Batch{Split: "s", Rows: rs}, &discard{}); err != nil {
						b.Fatal(err)
					}
				}
				rows += total
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
