package exec

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// exactJoinNode is an exact regular join (no state TTL) on column 0 of two-column rows;
// changes says which sides are retract inputs (a third column, the change column); table
// makes the right side a table (its third column its change column, each key its latest
// version); residual keeps the joins whose left column 1 is below the right's plus 5.
func exactJoinNode(kind sql.JoinKind, changes [2]bool, table, residual bool) *planner.JoinNode {
	col0 := func(r sql.Row) sql.Value { return r[0] }
	n := &planner.JoinNode{Kind: kind, Mode: planner.JoinRegular,
		LeftKeys: []planner.Evaluator{col0}, RightKeys: []planner.Evaluator{col0},
		LeftTime: -1, RightTime: -1, AsOf: -1, RightOp: -1, LeftWidth: 2, RightWidth: 2,
		LeftChanges: changes[0], RightChanges: changes[1]}
	if table {
		n.RightTable, n.RightOp, n.RightWidth = true, 2, 3
	}
	if residual {
		n.Residual = func(r sql.Row) sql.Value {
			return sql.Bool(r[1].I < r[n.LeftWidth+1].I+5)
		}
	}
	if kind != sql.JoinInner || changes[0] || changes[1] || table {
		n.Changes = planner.Retract
	}
	return n
}

// sideRow is a row of one side: key (empty: NULL), value and, for a retract side, the
// change ("delete" or NULL).
func sideRow(key string, v int64, del, changes bool) sql.Row {
	k := sql.Varchar(key)
	if key == "" {
		k = sql.Null
	}
	r := sql.Row{k, sql.BigInt(v)}
	if changes {
		if del {
			r = append(r, sql.OpDelete)
		} else {
			r = append(r, sql.Null)
		}
	}
	return r
}

func process(t *testing.T, j *joinOp, in int, out Emitter, rows ...sql.Row) {
	t.Helper()
	if err := j.Process(in, &Batch{Split: "s", Rows: rows}, out); err != nil {
		t.Fatal(err)
	}
}

// An exact LEFT join emits a left row with NULLs while it has no match, retracts that
// row when the first match arrives, and emits it again when the last match is deleted.
func TestJoinExactLeftPadding(t *testing.T) {
	j := newJoinOp(exactJoinNode(sql.JoinLeft, [2]bool{true, true}, false, false), "job", "op", nil, nil, &counters{})
	out := &joinedRows{}
	step := func(in int, r sql.Row, want ...string) {
		t.Helper()
		out.rows = nil
		process(t, j, in, out, r)
		if strings.Join(out.rows, " ") != strings.Join(want, " ") {
			t.Fatalf("%v on input %d: got %q, want %q", r, in, out.rows, want)
		}
	}
	step(0, sideRow("a", 1, false, true), "a,1,NULL,NULL,NULL")
	step(1, sideRow("a", 10, false, true), "a,1,NULL,NULL,delete", "a,1,a,10,NULL")
	step(1, sideRow("a", 11, false, true), "a,1,a,11,NULL")
	step(1, sideRow("a", 10, true, true), "a,1,a,10,delete")
	step(1, sideRow("a", 11, true, true), "a,1,a,11,delete", "a,1,NULL,NULL,NULL")
	step(1, sideRow("a", 11, true, true)) // a delete of a row the join does not hold
	step(0, sideRow("a", 1, true, true), "a,1,NULL,NULL,delete")
	step(0, sideRow("", 2, false, true), "NULL,2,NULL,NULL,NULL")
	step(0, sideRow("", 2, true, true), "NULL,2,NULL,NULL,delete")
	step(1, sideRow("b", 3, false, true))
	if n := j.StateRows(); n != 1 {
		t.Fatalf("%d rows kept, want 1", n)
	}
}

// A table's new version of a key retracts the joins made with the old one and emits the
// new ones; its delete retracts them (a LEFT join's rows go back to NULLs).
func TestJoinExactTableVersions(t *testing.T) {
	for _, kind := range []sql.JoinKind{sql.JoinInner, sql.JoinLeft} {
		t.Run(kind.String(), func(t *testing.T) {
			j := newJoinOp(exactJoinNode(kind, [2]bool{}, true, false), "job", "op", nil, nil, &counters{})
			out := &joinedRows{}
			step := func(in int, r sql.Row, want ...string) {
				t.Helper()
				out.rows = nil
				process(t, j, in, out, r)
				var w []string
				for _, s := range want {
					if kind == sql.JoinInner && strings.Contains(s, "NULL,NULL,NULL,") {
						continue
					}
					w = append(w, s)
				}
				if strings.Join(out.rows, " ") != strings.Join(w, " ") {
					t.Fatalf("%v on input %d: got %q, want %q", r, in, out.rows, w)
				}
			}
			version := func(key, tier string, del bool) sql.Row {
				op := sql.Null
				if del {
					op = sql.Varchar("delete")
				}
				return sql.Row{sql.Varchar(key), sql.Varchar(tier), op}
			}
			step(0, sideRow("u1", 1, false, false), "u1,1,NULL,NULL,NULL,NULL")
			step(1, version("u1", "gold", false), "u1,1,NULL,NULL,NULL,delete", "u1,1,u1,gold,NULL,NULL")
			step(0, sideRow("u1", 2, false, false), "u1,2,u1,gold,NULL,NULL")
			step(1, version("u1", "silver", false),
				"u1,1,u1,gold,NULL,delete", "u1,1,NULL,NULL,NULL,NULL",
				"u1,2,u1,gold,NULL,delete", "u1,2,NULL,NULL,NULL,NULL",
				"u1,1,NULL,NULL,NULL,delete", "u1,1,u1,silver,NULL,NULL",
				"u1,2,NULL,NULL,NULL,delete", "u1,2,u1,silver,NULL,NULL")
			step(1, version("u1", "", true),
				"u1,1,u1,silver,NULL,delete", "u1,1,NULL,NULL,NULL,NULL",
				"u1,2,u1,silver,NULL,delete", "u1,2,NULL,NULL,NULL,NULL")
			step(1, version("u1", "", true)) // the key has no version left
			step(1, version("u2", "gold", false))
			step(0, sideRow("u2", 3, false, false), "u2,3,u2,gold,NULL,NULL")
		})
	}
}

// An inner join of two append-only inputs emits inserts only, without a change column.
func TestJoinExactInnerAppendOnly(t *testing.T) {
	j := newJoinOp(exactJoinNode(sql.JoinInner, [2]bool{}, false, false), "job", "op", nil, nil, &counters{})
	out := &joinedRows{}
	process(t, j, 0, out, sideRow("a", 1, false, false), sideRow("a", 2, false, false), sideRow("", 9, false, false))
	process(t, j, 1, out, sideRow("a", 10, false, false), sideRow("b", 11, false, false))
	if err := j.Watermark("s", MaxWatermark, out); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out.rows)
	if got := strings.Join(out.rows, " "); got != "a,1,a,10 a,2,a,10" {
		t.Fatalf("got %s", got)
	}
}

// Every kind of exact join over append-only and retract inputs, fed random inserts and
// deletes (with NULL keys, duplicate rows and a residual condition), checkpointed and
// restarted from the store now and then: its output folded as a changelog never deletes a
// row it has not emitted and ends as PostgreSQL's join of the rows the inputs hold at the
// end.
func TestJoinExactRandom(t *testing.T) {
	for _, kind := range []sql.JoinKind{sql.JoinInner, sql.JoinLeft, sql.JoinRight, sql.JoinFull} {
		for _, changes := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			for _, residual := range []bool{false, true} {
				name := fmt.Sprintf("%s/changes=%v/residual=%v", kind, changes, residual)
				t.Run(name, func(t *testing.T) {
					for seed := int64(0); seed < 5; seed++ {
						exactRandomRun(t, seed, kind, changes, residual, []string{"", "a", "b", "c"}, 0)
					}
					// One hot key: a side's rows of it are indexed (indexFrom).
					exactRandomRun(t, 9, kind, changes, residual, []string{"", "a"}, 0)
				})
			}
		}
	}
}

// openExactJoin is a new operator of join node over store (cache > 0 bounds its keys in
// memory), its split "s" loaded.
func openExactJoin(t *testing.T, node *planner.JoinNode, store state.Store, cache int) *joinOp {
	t.Helper()
	j := newJoinOp(node, "job", "op", store, nil, &counters{})
	j.setCache(cache)
	if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
		t.Fatal(err)
	}
	return j
}

// exactRandomRun runs one random exact join; cache > 0 bounds its keys in memory
// (join_cache.go). It returns the keys read back from the store.
func exactRandomRun(t *testing.T, seed int64, kind sql.JoinKind, changes [2]bool, residual bool, keys []string, cache int) (reads int64) {
	rng := rand.New(rand.NewSource(seed))
	node := exactJoinNode(kind, changes, false, residual)
	store := state.NewMemory()
	newOp := func() *joinOp { return openExactJoin(t, node, store, cache) }
	j := newOp()
	defer func() {
		if sp := j.splits["s"]; sp != nil {
			reads += sp.cache.reads
		}
	}()
	out := &joinedRows{}
	held := [2][]sql.Row{} // each side's rows (without the change column)
	lc := &laggingCommits{store: store, rng: rand.New(rand.NewSource(seed + 1000))}
	for step := 0; step < 300; step++ {
		lc.step(t)
		in := rng.Intn(2)
		if changes[in] && len(held[in]) > 0 && rng.Intn(3) == 0 {
			i := rng.Intn(len(held[in]))
			r := held[in][i]
			held[in] = slices.Delete(held[in], i, i+1)
			process(t, j, in, out, append(append(sql.Row(nil), r...), sql.OpDelete))
		} else {
			r := sideRow(keys[rng.Intn(len(keys))], int64(rng.Intn(10)), false, false)
			held[in] = append(held[in], r)
			if changes[in] {
				r = append(append(sql.Row(nil), r...), sql.Null)
			}
			process(t, j, in, out, r)
		}
		switch rng.Intn(40) {
		case 0:
			lc.checkpoint(t, j)
		case 1:
			// A restart from a checkpoint: a new operator loads the split from the store.
			lc.checkpoint(t, j)
			lc.commit(t)
			reads += j.splits["s"].cache.reads
			j = newOp()
		}
	}
	// Fold the output.
	got := map[string]int{}
	for _, row := range out.rows {
		if node.Changes == planner.AppendOnly {
			got[row]++
			continue
		}
		i := strings.LastIndexByte(row, ',')
		r, op := row[:i], row[i+1:]
		if op == "delete" {
			if got[r] == 0 {
				t.Fatalf("seed %d: a delete of %s, which is not in the output", seed, r)
			}
			got[r]--
		} else {
			got[r]++
		}
	}
	want := map[string]int{}
	show := func(l, r sql.Row) string {
		var f []string
		for _, v := range append(append(sql.Row(nil), l...), r...) {
			f = append(f, v.String())
		}
		return strings.Join(f, ",")
	}
	nulls := sql.Row{sql.Null, sql.Null}
	matchedR := make([]bool, len(held[1]))
	for _, l := range held[0] {
		m := false
		for i, r := range held[1] {
			if l[0].IsNull() || r[0].IsNull() || l[0].S != r[0].S || residual && !(l[1].I < r[1].I+5) {
				continue
			}
			m, matchedR[i] = true, true
			want[show(l, r)]++
		}
		if !m && (kind == sql.JoinLeft || kind == sql.JoinFull) {
			want[show(l, nulls)]++
		}
	}
	for i, r := range held[1] {
		if !matchedR[i] && (kind == sql.JoinRight || kind == sql.JoinFull) {
			want[show(nulls, r)]++
		}
	}
	for k, v := range got {
		if v == 0 {
			delete(got, k)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("seed %d: folded output\n%v\nwant PostgreSQL's\n%v", seed, got, want)
	}
	return reads
}

// A table on either side of an exact join, fed random versions and deletes of its keys
// while the other side (a retract input) gets inserts and deletes, restarted from the
// store now and then: the folded output is the join of the other side's rows with each
// key's latest version, for every kind of join.
func TestJoinExactTableRandom(t *testing.T) {
	for _, side := range []int{0, 1} {
		for _, kind := range []sql.JoinKind{sql.JoinInner, sql.JoinLeft, sql.JoinRight, sql.JoinFull} {
			t.Run(fmt.Sprintf("table=%d/%s", side, kind), func(t *testing.T) {
				for seed := int64(0); seed < 5; seed++ {
					exactTableRun(t, seed, side, kind, 0)
				}
			})
		}
	}
}

func exactTableRun(t *testing.T, seed int64, side int, kind sql.JoinKind, cache int) (reads int64) {
	rng := rand.New(rand.NewSource(seed))
	col0 := func(r sql.Row) sql.Value { return r[0] }
	node := &planner.JoinNode{Kind: kind, Mode: planner.JoinRegular,
		LeftKeys: []planner.Evaluator{col0}, RightKeys: []planner.Evaluator{col0},
		LeftTime: -1, RightTime: -1, AsOf: -1, RightOp: -1, LeftOp: -1, LeftWidth: 2, RightWidth: 2, Changes: planner.Retract}
	// The table's rows: key, value, change column (a visible column of its side).
	if side == 0 {
		node.LeftTable, node.LeftOp, node.LeftWidth, node.RightChanges = true, 2, 3, true
	} else {
		node.RightTable, node.RightOp, node.RightWidth, node.LeftChanges = true, 2, 3, true
	}
	store := state.NewMemory()
	newOp := func() *joinOp { return openExactJoin(t, node, store, cache) }
	j := newOp()
	defer func() { reads += j.splits["s"].cache.reads }()
	out := &joinedRows{}
	latest := map[string]sql.Row{} // the table's current rows
	var held []sql.Row             // the other side's rows
	keys := []string{"a", "b", "c"}
	if cache > 0 {
		keys = append(keys, "d", "e", "f", "g", "h")
	}
	lc := &laggingCommits{store: store, rng: rand.New(rand.NewSource(seed + 1000))}
	for step := 0; step < 200; step++ {
		lc.step(t)
		k := keys[rng.Intn(len(keys))]
		if rng.Intn(2) == 0 {
			if rng.Intn(4) == 0 {
				delete(latest, k)
				process(t, j, side, out, sql.Row{sql.Varchar(k), sql.BigInt(0), sql.Varchar("delete")})
			} else {
				r := sql.Row{sql.Varchar(k), sql.BigInt(int64(rng.Intn(5))), sql.Null}
				latest[k] = r
				process(t, j, side, out, r)
			}
		} else if len(held) > 0 && rng.Intn(3) == 0 {
			i := rng.Intn(len(held))
			r := held[i]
			held = slices.Delete(held, i, i+1)
			process(t, j, 1-side, out, append(append(sql.Row(nil), r...), sql.OpDelete))
		} else {
			r := sideRow(k, int64(rng.Intn(5)), false, false)
			held = append(held, r)
			process(t, j, 1-side, out, append(append(sql.Row(nil), r...), sql.Null))
		}
		switch rng.Intn(30) {
		case 0:
			lc.checkpoint(t, j)
			lc.commit(t)
			reads += j.splits["s"].cache.reads
			j = newOp()
		case 1, 2:
			if cache > 0 {
				lc.checkpoint(t, j)
			}
		}
	}
	got := map[string]int{}
	for _, row := range out.rows {
		i := strings.LastIndexByte(row, ',')
		r, op := row[:i], row[i+1:]
		if op == "delete" {
			if got[r] == 0 {
				t.Fatalf("seed %d: a delete of %s, which is not in the output", seed, r)
			}
			got[r]--
			if got[r] == 0 {
				delete(got, r)
			}
		} else {
			got[r]++
		}
	}
	show := func(r sql.Row) string {
		var f []string
		for _, v := range r {
			f = append(f, v.String())
		}
		return strings.Join(f, ",")
	}
	pair := func(stream, table sql.Row) string {
		if side == 0 {
			return show(append(append(sql.Row(nil), table...), stream...))
		}
		return show(append(append(sql.Row(nil), stream...), table...))
	}
	streamOuter := side == 1 && (kind == sql.JoinLeft || kind == sql.JoinFull) || side == 0 && (kind == sql.JoinRight || kind == sql.JoinFull)
	tableOuter := side == 0 && (kind == sql.JoinLeft || kind == sql.JoinFull) || side == 1 && (kind == sql.JoinRight || kind == sql.JoinFull)
	want := map[string]int{}
	matched := map[string]bool{}
	for _, s := range held {
		if v, ok := latest[s[0].S]; ok {
			want[pair(s, v)]++
			matched[s[0].S] = true
		} else if streamOuter {
			want[pair(s, sql.Row{sql.Null, sql.Null, sql.Null})]++
		}
	}
	for k, v := range latest {
		if !matched[k] && tableOuter {
			want[pair(sql.Row{sql.Null, sql.Null}, v)]++
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("seed %d: folded output\n%v\nwant\n%v", seed, got, want)
	}
	return reads
}

// Exact joins planned from SQL and run as jobs (the change columns of retract inputs placed
// and stripped by the planner, the join's own added): folded, their output is the join of
// the final rows — a LEFT join of two streams, and a FULL join of a GROUP BY (a retract
// input whose rows change as orders arrive) with a stream.
func TestJoinExactPlanned(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	users := []string{"", "u1", "u2", "u3", "u4", "u5"}
	type rec struct {
		user string
		n    int
	}
	var os, ps []rec
	for i := 0; i < 300; i++ {
		os = append(os, rec{users[rng.Intn(len(users))], i})
	}
	for i := 0; i < 60; i++ {
		ps = append(ps, rec{users[rng.Intn(len(users)-1)], 1000 + i}) // no u5
	}
	// The streams are partitioned by user (the catalog says so): a user's rows are in one
	// split.
	split := func(user string) string { return fmt.Sprint(slices.Index(users, user) % 2) }
	sources := func() (*memSource, *memSource) {
		orders, payments := newMemSource(true, 0, "0", "1"), newMemSource(true, 0, "0", "1")
		for i, r := range os {
			orders.feed(split(r.user), fmt.Sprintf("%s,1,%d,%d", r.user, 1000+i, r.n))
		}
		for i, r := range ps {
			payments.feed(split(r.user), fmt.Sprintf("%s,1,%d,%d", r.user, 1000+i*5, r.n))
		}
		return orders, payments
	}
	show := func(r sql.Row) string {
		var f []string
		for _, v := range r {
			f = append(f, v.String())
		}
		return strings.Join(f, ",")
	}
	null := func(s string) string {
		if s == "" {
			return "NULL"
		}
		return s
	}

	t.Run("left", func(t *testing.T) {
		plan := planSQL(t, `SELECT o.n, p.n FROM orders o LEFT JOIN payments p ON o.user_id = p.user_id`, planCatalog(), "jl")
		got := foldLog(t, runOrdersPaymentsFrom(t, "jl", plan, sources, show))
		want := map[string]int{}
		for _, o := range os {
			m := false
			for _, p := range ps {
				if o.user != "" && o.user == p.user {
					want[fmt.Sprintf("%d,%d", o.n, p.n)]++
					m = true
				}
			}
			if !m {
				want[fmt.Sprintf("%d,NULL", o.n)]++
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("folded output\n%v\nwant\n%v", got, want)
		}
	})

	t.Run("full_over_aggregate", func(t *testing.T) {
		plan := planSQL(t, `SELECT t.user_id, t.c, p.n FROM (SELECT user_id, COUNT(*) AS c FROM orders GROUP BY user_id) t
  FULL JOIN payments p ON t.user_id = p.user_id`, planCatalog(), "jf")
		got := foldLog(t, runOrdersPaymentsFrom(t, "jf", plan, sources, show))
		counts := map[string]int{}
		for _, o := range os {
			counts[o.user]++
		}
		want := map[string]int{}
		matched := map[int]bool{}
		for u, c := range counts {
			m := false
			for _, p := range ps {
				if u != "" && u == p.user {
					want[fmt.Sprintf("%s,%d,%d", u, c, p.n)]++
					matched[p.n], m = true, true
				}
			}
			if !m {
				want[fmt.Sprintf("%s,%d,NULL", null(u), c)]++
			}
		}
		for _, p := range ps {
			if !matched[p.n] {
				want[fmt.Sprintf("NULL,NULL,%d", p.n)]++
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("folded output\n%v\nwant\n%v", got, want)
		}
	})
}

func runOrdersPaymentsFrom(t *testing.T, job string, plan *planner.Physical, sources func() (*memSource, *memSource), show func(sql.Row) string) []string {
	t.Helper()
	orders, payments := sources()
	return runOrdersPayments(t, job, plan, orders, payments, show)
}

// A table's version older than its key's current one (by version time) is not its latest:
// it changes nothing; a version of the same time, read later, replaces it.
func TestJoinExactTableVersionTime(t *testing.T) {
	col0 := func(r sql.Row) sql.Value { return r[0] }
	node := &planner.JoinNode{Kind: sql.JoinInner, Mode: planner.JoinRegular, Changes: planner.Retract,
		LeftKeys: []planner.Evaluator{col0}, RightKeys: []planner.Evaluator{col0},
		LeftTime: -1, RightTime: 2, AsOf: -1, RightOp: 3, LeftOp: -1, LeftWidth: 2, RightWidth: 4, RightTable: true}
	j := newJoinOp(node, "job", "op", nil, nil, &counters{})
	out := &joinedRows{}
	version := func(tier string, ts int64) sql.Row {
		return sql.Row{sql.Varchar("u1"), sql.Varchar(tier), sql.Timestamp(ts), sql.Null}
	}
	process(t, j, 0, out, sideRow("u1", 1, false, false))
	process(t, j, 1, out, version("gold", 2000))
	process(t, j, 1, out, version("silver", 1000)) // older: ignored
	process(t, j, 1, out, version("bronze", 2000)) // the same time, read later: replaces
	var got []string
	for _, r := range out.rows {
		f := strings.Split(r, ",")
		got = append(got, f[3]+":"+f[6])
	}
	if strings.Join(got, " ") != "gold:NULL gold:delete bronze:NULL" {
		t.Fatalf("got %v", got)
	}
}

// openTableJoin opens join node over store with its split "s".
func openTableJoin(t *testing.T, node *planner.JoinNode, store state.Store) *joinOp {
	t.Helper()
	j := newJoinOp(node, "job", "op", store, nil, &counters{})
	if err := j.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
		t.Fatal(err)
	}
	return j
}

// version is a record of a table (k, tier, ts, __op) of key u1: ts < 0 is a NULL version
// time, del a delete.
func version(tier string, ts int64, del bool) sql.Row {
	op, tv := sql.Null, sql.Timestamp(ts)
	if del {
		op = sql.Varchar("delete")
	}
	if ts < 0 {
		tv = sql.Null
	}
	return sql.Row{sql.Varchar("u1"), sql.Varchar(tier), tv, op}
}

// A table's delete keeps its key's version time: a version older than the delete, arriving
// after it, is not the key's latest (it stays deleted), also after a restart from the
// store; a newer version brings the key back. A NULL version time is newer than every time.
func TestJoinExactTableDeleteKeepsItsTime(t *testing.T) {
	col0 := func(r sql.Row) sql.Value { return r[0] }
	node := &planner.JoinNode{Kind: sql.JoinInner, Mode: planner.JoinRegular, Changes: planner.Retract,
		LeftKeys: []planner.Evaluator{col0}, RightKeys: []planner.Evaluator{col0},
		LeftTime: -1, RightTime: 2, AsOf: -1, RightOp: 3, LeftOp: -1, LeftWidth: 2, RightWidth: 4, RightTable: true}
	store := state.NewMemory()
	open := func() *joinOp { return openTableJoin(t, node, store) }
	j := open()
	out := &joinedRows{}
	process(t, j, 0, out, sideRow("u1", 1, false, false))
	process(t, j, 1, out, version("gold", 1000, false))
	process(t, j, 1, out, version("", 3000, true))
	process(t, j, 1, out, version("stale", 2000, false)) // older than the delete: ignored
	joinCheckpoint(t, j, store)
	j = open()
	process(t, j, 1, out, version("stale again", 2500, false)) // after a restart too
	process(t, j, 1, out, version("silver", 4000, false))
	process(t, j, 1, out, version("no time", -1, false))
	process(t, j, 1, out, version("after no time", 5000, false)) // older than a NULL time
	var got []string
	for _, r := range out.rows {
		f := strings.Split(r, ",")
		got = append(got, f[3]+":"+f[6])
	}
	want := "gold:NULL gold:delete silver:NULL silver:delete no time:NULL"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
}

// A processing-time join with a table (FOR SYSTEM_TIME AS OF PROCTIME() over a topic)
// joins each left row with its key's latest version read so far by version time: a
// version older than the one in effect, or than its delete, changes nothing, also after a
// restart; a NULL version time is the newest.
func TestJoinCurrentVersionTime(t *testing.T) {
	col0 := func(r sql.Row) sql.Value { return r[0] }
	node := &planner.JoinNode{Kind: sql.JoinLeft, Mode: planner.JoinCurrent,
		LeftKeys: []planner.Evaluator{col0}, RightKeys: []planner.Evaluator{col0},
		LeftTime: -1, RightTime: 2, AsOf: -1, RightOp: 3, LeftOp: -1, LeftWidth: 2, RightWidth: 4}
	store := state.NewMemory()
	open := func() *joinOp { return openTableJoin(t, node, store) }
	j := open()
	out := &joinedRows{}
	probe := func() { process(t, j, 0, out, sideRow("u1", 1, false, false)) }
	process(t, j, 1, out, version("gold", 2000, false))
	process(t, j, 1, out, version("stale", 1000, false)) // older: ignored
	probe()
	process(t, j, 1, out, version("", 3000, true))
	process(t, j, 1, out, version("older than its delete", 2500, false))
	probe()
	joinCheckpoint(t, j, store)
	j = open()
	process(t, j, 1, out, version("after a restart, older", 2900, false))
	probe()
	process(t, j, 1, out, version("silver", 4000, false))
	probe()
	process(t, j, 1, out, version("no time", -1, false))
	process(t, j, 1, out, version("after no time", 5000, false)) // older than a NULL time
	probe()
	var got []string
	for _, r := range out.rows {
		got = append(got, strings.Split(r, ",")[3])
	}
	want := "gold NULL NULL silver no time"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %s", got, want)
	}
}
