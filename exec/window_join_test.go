package exec

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// A window join reads each side's window end from that side's own row: the bids of a
// window (a wide row) joined with the window's maximum (a narrow one), with the wide side
// on the left and on the right. Reading the right row at the left's column index panicked
// (or read another column) when the sides differ in width.
func TestWindowJoinSidesOfDifferentWidths(t *testing.T) {
	const maxPerWindow = `(SELECT window_start, window_end, MAX(amount) AS top
  FROM TUMBLE(payments, ts, INTERVAL '1' SECOND) GROUP BY window_start, window_end) m`
	for name, query := range map[string]string{
		"wide_left": `SELECT o.n, o.amount, m.top FROM TUMBLE(orders, ts, INTERVAL '1' SECOND) o JOIN ` + maxPerWindow + `
  ON o.window_start = m.window_start AND o.window_end = m.window_end AND o.amount = m.top`,
		"wide_right": `SELECT o.n, o.amount, m.top FROM ` + maxPerWindow + ` JOIN TUMBLE(orders, ts, INTERVAL '1' SECOND) o
  ON o.window_start = m.window_start AND o.window_end = m.window_end AND o.amount = m.top`,
	} {
		t.Run(name, func(t *testing.T) {
			plan := planSQL(t, query, planCatalog(), "wj")
			// Two windows, [0, 1000) and [1000, 2000); their maxima 7 and 9 are each paid
			// once and ordered twice (orders 2, 3 and 6, 7); the last rows close them.
			orders, payments := newMemSource(true, 0, "0", "1"), newMemSource(true, 0, "0", "1")
			orders.feed("0", "u1,5,100,1", "u2,7,200,2", "u3,7,900,3", "u1,9,1100,4", "u1,3,1500,5", "u2,9,1999,6", "u4,9,1500,7", "u9,1,9000,8")
			payments.feed("1", "u1,7,150,0", "u2,2,500,0", "u3,9,1200,0", "u4,4,1800,0", "u9,1,9000,0")
			got := runOrdersPayments(t, "wj", plan, orders, payments, func(r sql.Row) string { return r[0].String() + ":" + r[1].String() + "=" + r[2].String() })
			if want := "2:7=7 3:7=7 4:9=9 6:9=9 7:9=9 8:1=1"; strings.Join(got, " ") != want {
				t.Fatalf("got %v, want %s", got, want)
			}
		})
	}
}

// extremeJoinNode is a window join of rows (g, v, window_start, window_end) with rows
// (g, top, window_start, window_end) on g, the window and v = top, the left side held
// under a dominance of the given sign (nil: every row kept).
//
// A dominance with Key -1 joins on g and the window only, with v compared with top by the
// residual condition instead (v >= top for a maximum, v <= top for a minimum).
func extremeJoinNode(dom *planner.JoinDominance) *planner.JoinNode {
	col := func(i int) planner.Evaluator { return func(r sql.Row) sql.Value { return r[i] } }
	keys := []planner.Evaluator{col(0), col(2), col(3), col(1)}
	n := &planner.JoinNode{Kind: sql.JoinInner, Mode: planner.JoinWindow, LeftKeys: keys, RightKeys: keys,
		LeftTime: -1, RightTime: -1, LeftEnd: 3, RightEnd: 3, AsOf: -1, RightOp: -1, LeftWidth: 4, RightWidth: 4,
		Dominance: dom}
	if dom != nil && dom.Key < 0 {
		n.LeftKeys, n.RightKeys = keys[:3], keys[:3]
		n.Residual = func(r sql.Row) sql.Value {
			v, top := r[1], r[5]
			if v.IsNull() || top.IsNull() {
				return sql.Null
			}
			return sql.Bool(sql.Compare(v, top)*dom.Sign >= 0)
		}
	}
	return n
}

func windowRows(end int64, gv ...any) *Batch {
	b := &Batch{Split: "s"}
	for i := 0; i < len(gv); i += 2 {
		b.Rows = append(b.Rows, sql.Row{sql.Varchar(gv[i].(string)), sql.BigInt(int64(gv[i+1].(int))), sql.Timestamp(end - 10), sql.Timestamp(end)})
	}
	return b
}

// A window join whose held side is dominated keeps only the rows at or past their group's
// running extreme when they came — in memory, in what a checkpoint stores, and after a
// restore from it (which rebuilds the extremes) — and emits what a join keeping every row
// emits.
func TestWindowJoinKeepsOnlyExtremeRows(t *testing.T) {
	for _, c := range []struct {
		name string
		sign int
		// held rows before and after the checkpoint, the aggregate's rows, the rows held
		// at the end, the output
		before, after, agg []any
		stored, held       int64
		want               string
	}{
		{"max", 1, []any{"a", 5, "a", 7, "b", 2, "a", 7, "a", 1}, []any{"a", 6, "a", 7, "b", 2, "b", 1}, []any{"a", 7, "b", 2},
			4, 6, "a,7,a,7 a,7,a,7 a,7,a,7 b,2,b,2 b,2,b,2"},
		{"min", -1, []any{"a", 5, "a", 7, "b", 2, "a", 5}, []any{"a", 6, "a", 4, "b", 2, "b", 3}, []any{"a", 4, "b", 2},
			3, 5, "a,4,a,4 b,2,b,2 b,2,b,2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var results []string
			for _, dom := range []*planner.JoinDominance{nil, {Side: 0, Key: 3, Sign: c.sign}, {Side: 0, Key: -1, HeldCol: 1, AggCol: 1, Sign: c.sign}} {
				store := state.NewMemory()
				j := newJoinOp(extremeJoinNode(dom), "job", "op", store, nil, &counters{})
				out := &joinedRows{}
				if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, out); err != nil {
					t.Fatal(err)
				}
				if err := j.Process(0, windowRows(10, c.before...), out); err != nil {
					t.Fatal(err)
				}
				joinCheckpoint(t, j, store)
				var stored int64
				err := store.Scan(state.SplitPrefix(nil, "job", "op", "s"), func(_, v []byte) error {
					return decodeJoinRows(v, 4, func(byte, int64, sql.Row) { stored++ })
				})
				if err != nil {
					t.Fatal(err)
				}
				if all := int64(len(c.before)) / 2; dom == nil && stored != all || dom != nil && stored != c.stored {
					t.Fatalf("dominance %v: %d rows stored", dom, stored)
				}
				// A restored join goes on from what the checkpoint stored.
				j = newJoinOp(extremeJoinNode(dom), "job", "op", store, nil, &counters{})
				if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, out); err != nil {
					t.Fatal(err)
				}
				if err := j.Process(0, windowRows(10, c.after...), out); err != nil {
					t.Fatal(err)
				}
				if err := j.Process(1, windowRows(10, c.agg...), out); err != nil {
					t.Fatal(err)
				}
				held := j.StateRows() - int64(len(c.agg)/2)
				if all := int64(len(c.before)+len(c.after)) / 2; dom == nil && held != all || dom != nil && held != c.held {
					t.Fatalf("dominance %v: %d rows held", dom, held)
				}
				if err := j.Watermark("s", 10, out); err != nil {
					t.Fatal(err)
				}
				if j.StateRows() != 0 {
					t.Fatalf("%d rows held after the window closed", j.StateRows())
				}
				var got []string
				for _, r := range out.rows {
					f := strings.Split(r, ",")
					got = append(got, f[0]+","+f[1]+","+f[4]+","+f[5])
				}
				sort.Strings(got)
				results = append(results, strings.Join(got, " "))
			}
			if results[0] != c.want || results[1] != c.want || results[2] != c.want {
				t.Fatalf("every row kept: %s; extremes only: %s; extremes compared by the residual: %s; want %s", results[0], results[1], results[2], c.want)
			}
		})
	}
}

// heldBytes is the encoded size of the rows a window join holds in memory.
func heldBytes(j *joinOp) int {
	n := 0
	for _, sp := range j.splits {
		if sp.win == nil {
			continue
		}
		for side := range sp.win.logs {
			for _, g := range sp.win.logs[side] {
				n += len(g.enc)
			}
		}
	}
	return n
}

// A window join's rows leave memory once a committed checkpoint holds them (at the next
// checkpoint) and are read back from the store when their window closes; a chunk missing
// from the store is a StateError, not a silent loss.
func TestWindowJoinRowsSpillToStore(t *testing.T) {
	run := func(t *testing.T, lose bool) (*joinedRows, error) {
		store := state.NewMemory()
		j := newJoinOp(extremeJoinNode(nil), "job", "op", store, nil, &counters{})
		out := &joinedRows{}
		if err := j.Process(0, windowRows(10, "a", 1, "a", 1, "b", 2), out); err != nil {
			t.Fatal(err)
		}
		joinCheckpoint(t, j, store)
		if heldBytes(j) == 0 {
			t.Fatal("rows left memory before their checkpoint was known to be committed")
		}
		if err := j.Process(0, windowRows(10, "a", 1), out); err != nil {
			t.Fatal(err)
		}
		if err := j.Process(1, windowRows(10, "a", 1, "b", 2), out); err != nil {
			t.Fatal(err)
		}
		before := heldBytes(j)
		joinCheckpoint(t, j, store)
		after := heldBytes(j)
		if after >= before || after == 0 {
			t.Fatalf("held in memory: %d bytes before the second checkpoint, %d after", before, after)
		}
		joinCheckpoint(t, j, store)
		if b := heldBytes(j); b != 0 || j.StateRows() != 6 {
			t.Fatalf("after the third checkpoint: %d bytes held in memory; %d rows", b, j.StateRows())
		}
		if lose {
			if err := store.Delete(state.Key(nil, "job", "op", "s", []byte{2}, 10, 0)); err != nil {
				t.Fatal(err)
			}
		}
		err := j.Watermark("s", 10, out)
		return out, err
	}
	out, err := run(t, false)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out.rows)
	w := ",1970-01-01T00:00:00.000Z,1970-01-01T00:00:00.010Z"
	a, b := "a,1"+w+",a,1"+w, "b,2"+w+",b,2"+w
	if got, want := strings.Join(out.rows, " "), a+" "+a+" "+a+" "+b; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	var se *StateError
	if _, err := run(t, true); !errors.As(err, &se) || !strings.Contains(err.Error(), "chunk 0") {
		t.Fatalf("a lost chunk: %v", err)
	}
}

// A window join's state stored per join key (the form of earlier versions: side, key,
// chunk) loads into the windows' logs; the next checkpoint deletes the old entries and
// writes the logs, and the window closes with every row.
func TestWindowJoinLoadsPerKeyState(t *testing.T) {
	store := state.NewMemory()
	node := extremeJoinNode(nil)
	b := &state.Batch{}
	put := func(side int, rows ...sql.Row) {
		j := &joinOp{node: node}
		j.appendKey(side, rows[0])
		ts := make([]int64, len(rows))
		for i := range ts {
			ts[i] = 10
		}
		b.Put(state.Key(nil, "job", "op", "s", append([]byte{byte(side)}, j.keyBuf...), 0, 0),
			encodeJoinRows(rows, ts, make([]byte, len(rows))))
	}
	row := func(g string, v int64) sql.Row {
		return sql.Row{sql.Varchar(g), sql.BigInt(v), sql.Timestamp(0), sql.Timestamp(10)}
	}
	put(0, row("a", 1), row("a", 1))
	put(0, row("b", 2))
	put(1, row("a", 1))
	if err := store.Write(b); err != nil {
		t.Fatal(err)
	}
	j := newJoinOp(node, "job", "op", store, nil, &counters{})
	out := &joinedRows{}
	if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, out); err != nil {
		t.Fatal(err)
	}
	if j.StateRows() != 4 {
		t.Fatalf("%d rows loaded, want 4", j.StateRows())
	}
	cp := joinCheckpoint(t, j, store)
	var puts, dels int
	cp.Each(func(kind state.OpKind, _, _ []byte) error {
		switch kind {
		case state.OpPut:
			puts++
		case state.OpDelete:
			dels++
		}
		return nil
	})
	if puts != 2 || dels != 3 {
		t.Fatalf("the checkpoint after loading: %d puts (want the 2 logs), %d deletes (want the 3 old keys)", puts, dels)
	}
	if err := j.Watermark("s", 10, out); err != nil {
		t.Fatal(err)
	}
	if len(out.rows) != 2 || !strings.HasPrefix(out.rows[0], "a,1,") {
		t.Fatalf("got %v, want a's two rows matched", out.rows)
	}
}

// A window join restores any stored entry without panicking: a corrupt one is an error,
// and a window restored from entries it accepts closes.
func FuzzLoadWindowEntry(f *testing.F) {
	row := sql.Row{sql.Varchar("a"), sql.BigInt(1), sql.Timestamp(0), sql.Timestamp(10)}
	f.Add([]byte{2}, int64(10), int64(0), encodeJoinRows([]sql.Row{row}, []int64{10}, []byte{0}), true)
	f.Add([]byte{1, 7, 'a'}, int64(0), int64(0), encodeJoinRows([]sql.Row{row, row}, []int64{10, 10}, []byte{0, 0}), false)
	f.Add([]byte{3}, int64(10), int64(1), []byte{1, 0}, true)
	f.Add([]byte{4}, int64(0), int64(0), []byte{0}, false)
	f.Fuzz(func(t *testing.T, kb []byte, start, c int64, v []byte, dominated bool) {
		if len(kb) == 0 {
			return
		}
		var dom *planner.JoinDominance
		if dominated {
			dom = &planner.JoinDominance{Side: 0, Key: 3, Sign: 1}
		}
		store := state.NewMemory()
		j := newJoinOp(extremeJoinNode(dom), "job", "op", store, nil, &counters{})
		key := state.Key(nil, "job", "op", "s", kb, start, c)
		if err := store.Put(key, v); err != nil {
			t.Fatal(err)
		}
		if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
			var se *StateError
			if !errors.As(err, &se) {
				t.Fatalf("not a StateError: %v", err)
			}
			return
		}
		joinCheckpoint(t, j, store)
		out := &joinedRows{}
		_ = j.Watermark("s", MaxWatermark, out)
	})
}

// A dominance miss — the aggregate's maximum below the running maximum of the rows that
// reached the join, as when a row late for the aggregate was on time at the join — is
// logged when the window closes, naming the window and both values; a consistent window
// logs nothing.
func TestWindowJoinDominanceMissLogged(t *testing.T) {
	for _, c := range []struct {
		name     string
		held     []any
		agg      []any
		wantLogs int
	}{
		{"consistent", []any{"a", 5, "a", 7}, []any{"a", 7}, 0},
		{"miss", []any{"a", 5, "a", 9, "a", 7}, []any{"a", 7}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := newJoinOp(extremeJoinNode(&planner.JoinDominance{Side: 0, Key: 3, Sign: 1}), "job", "op", state.NewMemory(), nil, &counters{})
			var logs []string
			j.logf = func(f string, args ...any) { logs = append(logs, fmt.Sprintf(f, args...)) }
			out := &joinedRows{}
			if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, out); err != nil {
				t.Fatal(err)
			}
			if err := j.Process(0, windowRows(10, c.held...), out); err != nil {
				t.Fatal(err)
			}
			if err := j.Process(1, windowRows(10, c.agg...), out); err != nil {
				t.Fatal(err)
			}
			if err := j.Watermark("s", 10, out); err != nil {
				t.Fatal(err)
			}
			if len(logs) != c.wantLogs {
				t.Fatalf("%d notices, want %d: %v", len(logs), c.wantLogs, logs)
			}
			if c.wantLogs > 0 && !(strings.Contains(logs[0], "aggregate value 7 behind 9") && strings.Contains(logs[0], "window join op")) {
				t.Fatalf("notice %q does not name the values and the join", logs[0])
			}
		})
	}
}
