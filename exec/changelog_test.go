package exec

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// foldChanges runs plan over evs (two splits by user parity, as planCatalog's streams are
// partitioned) and folds its changelog (the change column last) into the multiset of
// rows it ends with, failing on a delete of a row it does not hold.
func foldChanges(t *testing.T, plan *planner.Physical, evs []event4) map[string]int {
	t.Helper()
	src := newMemSource(true, 64, "0", "1")
	var parts [2][]event4
	for _, e := range evs {
		parts[int(e.user[len(e.user)-1])%2] = append(parts[int(e.user[len(e.user)-1])%2], e)
	}
	feedAll(src, "0", parts[0])
	feedAll(src, "1", parts[1])
	rows := map[string]int{}
	var bad []string
	env := testEnvFor(src, func(r sql.Row) error {
		k := fmt.Sprint(r[:len(r)-1])
		if sql.IsDelete(r[len(r)-1]) {
			if rows[k] == 0 {
				bad = append(bad, k)
			}
			rows[k]--
			if rows[k] == 0 {
				delete(rows, k)
			}
			return nil
		}
		rows[k]++
		return nil
	})
	j, err := Start(context.Background(), "topch", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("%d deletes of rows not held, first %s", len(bad), bad[0])
	}
	return rows
}

// testEnvFor runs a plan over src, its rows to onRow.
func testEnvFor(src *memSource, onRow func(sql.Row) error) Env {
	return Env{
		OpenSource:         func(planner.SourceSpec) (connectors.Source, error) { return src, nil },
		NewFormat:          newTestFormat,
		OnRow:              onRow,
		CheckpointInterval: time.Second,
		Tick:               10 * time.Millisecond,
	}
}

func multisetText(m map[string]int) string {
	var out []string
	for k, n := range m {
		for i := 0; i < n; i++ {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// UNION ALL of an updating aggregate and an append-only stream: the union's changelog
// folds to the aggregate's final rows and every row of the stream.
func TestUnionOfChangelogs(t *testing.T) {
	plan := planSQL(t, `SELECT user_id, n FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) a
  UNION ALL SELECT user_id, n FROM orders WHERE n > 40`, planCatalog(), "topch")
	evs := genEvents(5, 3000, 30, 0)
	counts := map[string]int64{}
	want := map[string]int{}
	for _, e := range evs {
		counts[e.user]++
		if !e.nNull && e.n > 40 {
			want[fmt.Sprint(sql.Row{sql.Varchar(e.user), sql.BigInt(e.n)})]++
		}
	}
	for u, n := range counts {
		want[fmt.Sprint(sql.Row{sql.Varchar(u), sql.BigInt(n)})]++
	}
	got := foldChanges(t, plan, evs)
	if g, w := multisetText(got), multisetText(want); g != w {
		t.Fatalf("folded union differs:\n%s", diff(strings.Split(g, "\n"), strings.Split(w, "\n")))
	}
}

// A global aggregation over a stream has its one row before any input, as PostgreSQL
// answers one row over no rows, and then follows its input.
func TestGlobalAggregateRowBeforeInput(t *testing.T) {
	plan := planSQL(t, `SELECT COUNT(*) AS n, SUM(amount) AS total FROM orders`, planCatalog(), "glob")
	got := foldChanges(t, plan, nil)
	if g, w := multisetText(got), fmt.Sprint(sql.Row{sql.BigInt(0), sql.Null}); g != w {
		t.Fatalf("over no rows: %q, want %q", g, w)
	}
	evs := genEvents(3, 500, 10, 0)
	var sum float64
	for _, e := range evs {
		sum += e.amount
	}
	// Upsert changes of the one row: its last row is the answer.
	var last sql.Row
	src := newMemSource(true, 64, "0", "1")
	feedAll(src, "0", evs)
	env := testEnvFor(src, func(r sql.Row) error { last = append(sql.Row(nil), r[:len(r)-1]...); return nil })
	j, err := Start(context.Background(), "glob", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if w := fmt.Sprint(sql.Row{sql.BigInt(int64(len(evs))), sql.Double(sum)}); fmt.Sprint(last) != w {
		t.Fatalf("last row %v, want %s", last, w)
	}
}

// With a state TTL far longer than the data, a GROUP BY without a window forgets nothing:
// the groups whose rows came before the split's first watermark are not taken as
// infinitely old at the first sweep.
func TestStateTTLKeepsGroupsSeenBeforeTheWatermark(t *testing.T) {
	stmts, err := sql.Parse(`SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id`)
	if err != nil {
		t.Fatal(err)
	}
	q, err := sql.Bind(stmts[0].(*sql.Select), planCatalog())
	if err != nil {
		t.Fatal(err)
	}
	_, plan, err := planner.Plan(q, planner.Options{Job: "ttl", StateTTL: 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	evs := genEvents(9, 3000, 20, 0)
	want := map[string]int64{}
	for _, e := range evs {
		want[e.user]++
	}
	src := newMemSource(true, 64, "0", "1")
	feedAll(src, "0", evs)
	last := map[string]int64{}
	env := testEnvFor(src, func(r sql.Row) error { last[r[0].S] = r[1].I; return nil })
	j, err := Start(context.Background(), "ttl", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	for u, n := range want {
		if last[u] != n {
			t.Fatalf("user %s: last count %d, want %d (a group was forgotten within the TTL)", u, last[u], n)
		}
	}
}
