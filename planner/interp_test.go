package planner

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"rsql/sql"
)

// This file is a batch reference interpreter for plans, used to check that rewrites and the
// physical build keep the rows a query computes: the unoptimized logical plan, evaluated
// directly from the bound expressions, is the reference; the physical plan (pruned rows,
// remapped and compiled closures, exchanges) must give the same multiset of rows.
// Windows are computed over the whole input at once (no watermarks): what a batch SQL engine
// would compute.

type aggFn struct {
	fn       string // COUNT, COUNT(*), COUNT(DISTINCT), SUM, AVG, MIN, MAX
	arg      sql.Evaluator
	distinct bool
}

type window struct {
	kind              WindowKind
	time              int
	size, slide, gap  int64
	enabled, hasStart bool
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// assign returns the [start, end) windows a time falls in (tumble and hop).
func (w window) assign(ts int64) [][2]int64 {
	switch w.kind {
	case WindowTumble:
		s := floorDiv(ts, w.size) * w.size
		return [][2]int64{{s, s + w.size}}
	case WindowHop:
		var out [][2]int64
		for s := floorDiv(ts, w.slide) * w.slide; s > ts-w.size; s -= w.slide {
			out = append([][2]int64{{s, s + w.size}}, out...)
		}
		return out
	}
	return nil
}

func keyOf(vals []sql.Value) string {
	var b []byte
	for _, v := range vals {
		b = sql.AppendKey(b, v)
	}
	return string(b)
}

// aggregate groups rows by keys (and window) and computes aggs; the output row is the keys,
// [window_start, window_end], the aggregates.
func aggregate(rows []sql.Row, keys []sql.Evaluator, w window, aggs []aggFn) []sql.Row {
	type group struct {
		keys  []sql.Value
		win   [2]int64
		rows  []sql.Row
		times []int64
	}
	groups := map[string]*group{}
	var order []string
	add := func(k []sql.Value, win [2]int64, r sql.Row, ts int64) {
		id := keyOf(k) + fmt.Sprint(win)
		g := groups[id]
		if g == nil {
			g = &group{keys: k, win: win}
			groups[id] = g
			order = append(order, id)
		}
		g.rows = append(g.rows, r)
		g.times = append(g.times, ts)
	}
	for _, r := range rows {
		k := make([]sql.Value, len(keys))
		for i, f := range keys {
			k[i] = f(r)
		}
		if !w.enabled {
			add(k, [2]int64{}, r, 0)
			continue
		}
		t := r[w.time]
		if t.IsNull() {
			continue
		}
		if w.kind == WindowSession {
			add(k, [2]int64{}, r, t.I)
			continue
		}
		for _, win := range w.assign(t.I) {
			add(k, win, r, t.I)
		}
	}
	if w.enabled && w.kind == WindowSession {
		// Split each key's rows into sessions.
		var sessOrder []string
		sess := map[string]*group{}
		for _, id := range order {
			g := groups[id]
			idx := make([]int, len(g.rows))
			for i := range idx {
				idx[i] = i
			}
			sort.SliceStable(idx, func(a, b int) bool { return g.times[idx[a]] < g.times[idx[b]] })
			var cur *group
			var last int64
			for _, i := range idx {
				ts := g.times[i]
				if cur == nil || ts-last >= w.gap {
					cur = &group{keys: g.keys, win: [2]int64{ts, ts}}
					sid := id + fmt.Sprint(ts)
					sess[sid] = cur
					sessOrder = append(sessOrder, sid)
				}
				cur.rows = append(cur.rows, g.rows[i])
				last = ts
				cur.win[1] = ts + w.gap
			}
		}
		groups, order = sess, sessOrder
	}
	var out []sql.Row
	for _, id := range order {
		g := groups[id]
		r := append(sql.Row(nil), g.keys...)
		if w.enabled {
			r = append(r, sql.Timestamp(g.win[0]), sql.Timestamp(g.win[1]))
		}
		for _, a := range aggs {
			r = append(r, computeAgg(a, g.rows))
		}
		out = append(out, r)
	}
	return out
}

func computeAgg(a aggFn, rows []sql.Row) sql.Value {
	if a.fn == "COUNT(*)" {
		return sql.BigInt(int64(len(rows)))
	}
	var vals []sql.Value
	seen := map[string]bool{}
	for _, r := range rows {
		v := a.arg(r)
		if v.IsNull() {
			continue
		}
		if a.distinct {
			k := keyOf([]sql.Value{v})
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		vals = append(vals, v)
	}
	switch a.fn {
	case "COUNT":
		return sql.BigInt(int64(len(vals)))
	}
	if len(vals) == 0 {
		return sql.Null
	}
	switch a.fn {
	case "SUM":
		if vals[0].K == sql.KindDouble {
			s := 0.0
			for _, v := range vals {
				s += v.F()
			}
			return sql.Double(s)
		}
		var s int64
		for _, v := range vals {
			s += v.I
		}
		if vals[0].K == sql.KindDecimal {
			return sql.Decimal(s, vals[0].Scale)
		}
		return sql.BigInt(s)
	case "AVG":
		s := 0.0
		for _, v := range vals {
			s += v.AsFloat()
		}
		return sql.Double(s / float64(len(vals)))
	case "MIN", "MAX":
		best := vals[0]
		for _, v := range vals[1:] {
			c := sql.Compare(v, best)
			if (a.fn == "MIN" && c < 0) || (a.fn == "MAX" && c > 0) {
				best = v
			}
		}
		return best
	}
	panic("unknown aggregate " + a.fn)
}

func assignRows(rows []sql.Row, w window) []sql.Row {
	var out []sql.Row
	for _, r := range rows {
		t := r[w.time]
		if t.IsNull() {
			continue
		}
		for _, win := range w.assign(t.I) {
			nr := append(append(sql.Row(nil), r...), sql.Timestamp(win[0]), sql.Timestamp(win[1]))
			out = append(out, nr)
		}
	}
	return out
}

func mustCompile(t *testing.T, e sql.Expr) sql.Evaluator {
	t.Helper()
	f, err := sql.Compile(e)
	if err != nil {
		t.Fatalf("compile %s: %v", e, err)
	}
	return f
}

func logicalWindow(w *sql.Window) window {
	if w == nil {
		return window{}
	}
	out := window{enabled: true, time: w.TimeCol, size: w.Size, slide: w.Slide, gap: w.Gap}
	switch w.Kind {
	case sql.WindowTumble:
		out.kind = WindowTumble
	case sql.WindowHop:
		out.kind = WindowHop
	case sql.WindowSession:
		out.kind = WindowSession
	}
	return out
}

// evalLogical evaluates a logical plan over full stream rows, straight from its expressions.
func evalLogical(t *testing.T, l LogicalNode, stream []sql.Row) []sql.Row {
	t.Helper()
	switch n := l.(type) {
	case *Scan:
		var out []sql.Row
		for _, r := range stream {
			nr := make(sql.Row, len(n.Columns))
			for i, c := range n.Columns {
				nr[i] = r[c]
			}
			out = append(out, nr)
		}
		return out
	case *Filter:
		f := mustCompile(t, n.Pred)
		var out []sql.Row
		for _, r := range evalLogical(t, n.Input, stream) {
			if f(r).Truth() {
				out = append(out, r)
			}
		}
		return out
	case *Project:
		fs := make([]sql.Evaluator, len(n.Exprs))
		for i, e := range n.Exprs {
			fs[i] = mustCompile(t, e)
		}
		var out []sql.Row
		for _, r := range evalLogical(t, n.Input, stream) {
			nr := make(sql.Row, len(fs))
			for i, f := range fs {
				nr[i] = f(r)
			}
			out = append(out, nr)
		}
		return out
	case *WindowAssign:
		return assignRows(evalLogical(t, n.Input, stream), logicalWindow(&n.Window))
	case *Aggregate:
		keys := make([]sql.Evaluator, len(n.Keys))
		for i, e := range n.Keys {
			keys[i] = mustCompile(t, e)
		}
		var aggs []aggFn
		for _, g := range n.Aggs {
			a := aggFn{fn: strings.ToUpper(g.Func), distinct: g.Distinct}
			if g.Star {
				a.fn = "COUNT(*)"
			} else {
				a.arg = mustCompile(t, g.Arg)
			}
			aggs = append(aggs, a)
		}
		return withChange(aggregate(evalLogical(t, n.Input, stream), keys, logicalWindow(n.Window), aggs), n.Changes)
	case *Limit:
		rows := evalLogical(t, n.Input, stream)
		if int64(len(rows)) > n.N {
			rows = rows[:n.N]
		}
		return rows
	case *Sink:
		return withoutChange(evalLogical(t, n.Input, stream), n.Changes)
	}
	t.Fatalf("evalLogical: %T", l)
	return nil
}

// evalPhysical runs the stages of p over full stream rows: stage 0 reads the pruned columns,
// an exchange hands its rows to the next stage.
func evalPhysical(t *testing.T, p *Physical, stream []sql.Row) []sql.Row {
	t.Helper()
	var rows []sql.Row
	for si, s := range p.Stages {
		if si == 0 {
			if s.Source().FromStage != -1 {
				t.Fatalf("stage 0 reads from stage %d", s.Source().FromStage)
			}
			for _, r := range stream {
				rows = append(rows, pick(s.Source(), r))
			}
		} else if s.Source().FromStage != si-1 {
			t.Fatalf("stage %d reads from stage %d", si, s.Source().FromStage)
		}
		for _, node := range s.Nodes() {
			switch n := node.(type) {
			case *FilterNode:
				var out []sql.Row
				for _, r := range rows {
					if n.Pred(r).Truth() {
						out = append(out, r)
					}
				}
				rows = out
			case *ProjectNode:
				var out []sql.Row
				for _, r := range rows {
					nr := make(sql.Row, len(n.Exprs))
					for i, f := range n.Exprs {
						nr[i] = f(r)
					}
					out = append(out, nr)
				}
				rows = out
			case *WindowAssignNode:
				rows = assignRows(rows, window{enabled: true, kind: n.Window.Kind, time: n.Window.Time, size: n.Window.Size, slide: n.Window.Slide})
			case *AggregateNode:
				var aggs []aggFn
				for _, a := range n.Aggs {
					f := aggFn{}
					if len(a.Args) > 0 {
						f.arg = a.Args[0]
					}
					name, rest, _ := strings.Cut(a.Text, "(")
					switch {
					case a.Text == "COUNT(*)":
						f.fn = "COUNT(*)"
					case strings.HasPrefix(rest, "DISTINCT "):
						f.fn, f.distinct = name, true
					default:
						f.fn = name
					}
					aggs = append(aggs, f)
				}
				w := window{enabled: n.Window.Kind != WindowNone, kind: n.Window.Kind, time: n.Window.Time,
					size: n.Window.Size, slide: n.Window.Slide, gap: n.Window.Gap}
				rows = withChange(aggregate(rows, n.Keys, w, aggs), n.Changes)
			case *ExchangeNode:
				if si+1 >= len(p.Stages) {
					t.Fatalf("exchange in the last stage")
				}
				// Hash partitioning only reorders rows between splits; every key must be computable.
				for _, r := range rows {
					for _, k := range n.Keys {
						k(r)
					}
				}
			case *LimitNode:
				if int64(len(rows)) > n.N {
					rows = rows[:n.N]
				}
			}
			if pn, ok := node.(*ProjectNode); ok {
				checkWidth(t, rows, len(pn.Schema))
			}
		}
	}
	return withoutChange(rows, p.Stages[len(p.Stages)-1].Sink.Changes)
}

// withChange appends the change column of an insert to the final rows of an updating
// aggregation (the interpreter computes final results: no row is ever taken back);
// withoutChange drops it at the sink.
func withChange(rows []sql.Row, m ChangeMode) []sql.Row {
	if m == AppendOnly {
		return rows
	}
	for i := range rows {
		rows[i] = append(rows[i], sql.Null)
	}
	return rows
}

func withoutChange(rows []sql.Row, m ChangeMode) []sql.Row {
	if m == AppendOnly {
		return rows
	}
	for i := range rows {
		rows[i] = rows[i][:len(rows[i])-1]
	}
	return rows
}

func checkWidth(t *testing.T, rows []sql.Row, w int) {
	t.Helper()
	for _, r := range rows {
		if len(r) != w {
			t.Fatalf("row %v has %d columns, want %d", r, len(r), w)
		}
	}
}

func sortedText(rows []sql.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		parts := make([]string, len(r))
		for j, v := range r {
			if v.K == sql.KindDouble {
				parts[j] = fmt.Sprintf("%.6g", v.F())
			} else {
				parts[j] = v.String()
			}
		}
		out[i] = strings.Join(parts, "|")
	}
	sort.Strings(out)
	return out
}

// genOrders generates n rows of the orders schema (order_id, user_id, amount, ts[, extra
// VARCHAR columns]) with some NULLs and bounded disorder.
func genOrders(n, width int, seed uint64) []sql.Row {
	rnd := rand.New(rand.NewPCG(seed, 7))
	base := int64(1_796_013_000_000) // 2026-11-30T04:30:00Z
	users := []string{"u1", "u2", "U3", "u4", "bot", "x5"}
	var out []sql.Row
	for i := 0; i < n; i++ {
		r := make(sql.Row, width)
		r[0] = sql.BigInt(int64(i % 97))
		if rnd.IntN(20) == 0 {
			r[1] = sql.Null
		} else {
			r[1] = sql.Varchar(users[rnd.IntN(len(users))])
		}
		if rnd.IntN(15) == 0 {
			r[2] = sql.Null
		} else {
			r[2] = sql.Double(float64(rnd.IntN(200000)) / 100)
		}
		r[3] = sql.Timestamp(base + int64(i)*900 + int64(rnd.IntN(4000)))
		for j := 4; j < width; j++ {
			r[j] = sql.Varchar(fmt.Sprintf("n%d", rnd.IntN(3)))
		}
		out = append(out, r)
	}
	return out
}

// evalQuery evaluates a bound query straight from the row layouts documented on sql.Query,
// without the planner: the reference the plans are compared with.
func evalQuery(t *testing.T, q *sql.Query, stream []sql.Row) []sql.Row {
	t.Helper()
	n := len(q.From.Schema())
	rows := stream
	w := q.Window
	tvfCols := w != nil && w.TVF && w.Kind != sql.WindowSession
	if tvfCols {
		rows = assignRows(rows, logicalWindow(w))
	}
	if q.Where != nil {
		f := mustCompile(t, q.Where)
		var out []sql.Row
		for _, r := range rows {
			if f(r).Truth() {
				out = append(out, r)
			}
		}
		rows = out
	}
	if q.Aggregated {
		var keys []sql.Evaluator
		for _, e := range q.GroupBy {
			keys = append(keys, mustCompile(t, e))
		}
		var aggs []aggFn
		for _, g := range q.Aggs {
			a := aggFn{fn: strings.ToUpper(g.Func), distinct: g.Distinct}
			if g.Star {
				a.fn = "COUNT(*)"
			} else {
				a.arg = mustCompile(t, g.Arg)
			}
			aggs = append(aggs, a)
		}
		switch {
		case tvfCols:
			// The rows carry their window: group by it like by any key.
			keys = append(keys, func(r sql.Row) sql.Value { return r[n] }, func(r sql.Row) sql.Value { return r[n+1] })
			rows = aggregate(rows, keys, window{}, aggs)
		default:
			rows = aggregate(rows, keys, logicalWindow(w), aggs)
		}
		if q.Having != nil {
			f := mustCompile(t, q.Having)
			var out []sql.Row
			for _, r := range rows {
				if f(r).Truth() {
					out = append(out, r)
				}
			}
			rows = out
		}
	}
	var out []sql.Row
	sel := make([]sql.Evaluator, len(q.Select))
	for i, e := range q.Select {
		sel[i] = mustCompile(t, e)
	}
	for _, r := range rows {
		nr := make(sql.Row, len(sel))
		for i, f := range sel {
			nr[i] = f(r)
		}
		out = append(out, nr)
	}
	if q.Limit >= 0 && int64(len(out)) > q.Limit {
		out = out[:q.Limit]
	}
	return out
}

// checkSameRows plans q and checks, over generated data, that the unoptimized logical plan,
// the optimized one and the physical plan all compute what evalQuery computes.
func checkSameRows(t *testing.T, q *sql.Query, opts Options) {
	t.Helper()
	ref, err := Logical(q)
	if err != nil {
		t.Fatalf("Logical: %v", err)
	}
	l, p, err := Plan(q, opts)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if err := validate(l); err != nil {
		t.Fatalf("optimized plan is inconsistent: %v\n%s", err, Explain(l, nil))
	}
	stream := genOrders(3000, len(q.From.Schema()), 42)
	want := sortedText(evalQuery(t, q, stream))
	if unopt := sortedText(evalLogical(t, ref, stream)); strings.Join(unopt, "\n") != strings.Join(want, "\n") {
		t.Errorf("logical plan gives %d rows, reference %d\n%s", len(unopt), len(want), Explain(ref, nil))
	}
	opt := sortedText(evalLogical(t, l, stream))
	got := sortedText(evalPhysical(t, p, stream))
	if len(want) == 0 {
		t.Fatalf("the reference gives no rows: a useless test query")
	}
	if strings.Join(opt, "\n") != strings.Join(want, "\n") {
		t.Errorf("optimized logical plan gives %d rows, reference %d\n%s", len(opt), len(want), Explain(l, nil))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("physical plan gives %d rows, reference %d\n%s", len(got), len(want), Explain(l, p))
		for i := 0; i < len(got) && i < len(want); i++ {
			if got[i] != want[i] {
				t.Errorf("first difference: got %s, want %s", got[i], want[i])
				break
			}
		}
	}
}

func TestHandBuiltQueriesKeepTheirRows(t *testing.T) {
	qs := map[string]func(t *testing.T) *sql.Query{
		"tvf tumble file":   func(*testing.T) *sql.Query { return tvfQuery(fileOrders()) },
		"tvf tumble broker": func(*testing.T) *sql.Query { return tvfQuery(mqOrders()) },
		"filter project": func(t *testing.T) *sql.Query {
			r := fileOrders()
			return &sql.Query{From: &sql.FromRelation{Rel: r}, Where: call(t, ">", col(r, "amount"), lit(sql.Double(100))),
				Select: []sql.Expr{col(r, "note"), call(t, "*", col(r, "amount"), lit(sql.Double(2)))},
				Names:  []string{"note", "dbl"}, Limit: -1}
		},
		"having key and aggregate": func(t *testing.T) *sql.Query {
			r := mqOrders()
			cnt := ref(1, "n", sql.TypeBigInt)
			return &sql.Query{From: &sql.FromRelation{Rel: r}, GroupBy: []sql.Expr{col(r, "user_id")}, Aggregated: true,
				Aggs: []sql.AggCall{{Func: "COUNT", Star: true}, {Func: "MAX", Arg: col(r, "amount")}},
				Having: call(t, "AND", call(t, "<>", ref(0, "user_id", sql.TypeVarchar), lit(sql.Varchar("bot"))),
					call(t, ">", cnt, lit(sql.BigInt(1)))),
				Select: []sql.Expr{ref(0, "user_id", sql.TypeVarchar), cnt}, Names: []string{"user_id", "n"}, Limit: -1}
		},
		"window assign with pushed filter": func(t *testing.T) *sql.Query {
			r := fileOrders()
			n := len(r.Schema)
			ws := ref(n, "window_start", sql.TypeTimestamp)
			return &sql.Query{From: &sql.FromRelation{Rel: r}, Window: &sql.Window{Kind: sql.WindowHop, TimeCol: 3, Size: 10000, Slide: 5000, TVF: true},
				Where: call(t, "AND", call(t, ">", ws, lit(sql.Timestamp(1_796_013_100_000))),
					call(t, "=", col(r, "user_id"), lit(sql.Varchar("u1")))),
				Select: []sql.Expr{col(r, "order_id"), ws, ref(n+1, "window_end", sql.TypeTimestamp)},
				Names:  []string{"order_id", "window_start", "window_end"}, Limit: -1}
		},
		"session group-by form over broker, count distinct": func(t *testing.T) *sql.Query {
			r := mqOrders()
			return &sql.Query{From: &sql.FromRelation{Rel: r}, Window: &sql.Window{Kind: sql.WindowSession, TimeCol: 3, Gap: 2000},
				GroupBy: []sql.Expr{col(r, "note")}, Aggregated: true,
				Aggs:   []sql.AggCall{{Func: "COUNT", Distinct: true, Arg: col(r, "user_id")}, {Func: "AVG", Arg: col(r, "amount")}},
				Select: []sql.Expr{ref(0, "note", sql.TypeVarchar), ref(2, "window_end", sql.TypeTimestamp), ref(3, "d", sql.TypeBigInt), ref(4, "a", sql.TypeDouble)},
				Names:  []string{"note", "e", "d", "a"}, Limit: -1}
		},
	}
	for name, mk := range qs {
		t.Run(name, func(t *testing.T) { checkSameRows(t, mk(t), Options{Job: "t"}) })
	}
}
