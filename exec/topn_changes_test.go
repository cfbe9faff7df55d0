package exec

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
)

// A Top-N per key over the whole stream: its changelog folds to each user's two largest
// amounts, numbered.
func TestTopNChangesPerKey(t *testing.T) {
	plan := planSQL(t, `SELECT user_id, amount, rn FROM (SELECT user_id, amount,
  ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY amount DESC) AS rn FROM orders) x WHERE rn <= 2`, planCatalog(), "topch")
	if !strings.Contains(planner.Explain(nil, plan), "mode=changes") {
		t.Fatalf("not a Top-N over the whole stream:\n%s", planner.Explain(nil, plan))
	}
	evs := genEvents(7, 3000, 40, 0)
	by := map[string][]float64{}
	for _, e := range evs {
		by[e.user] = append(by[e.user], e.amount)
	}
	want := map[string]int{}
	for u, as := range by {
		sort.Sort(sort.Reverse(sort.Float64Slice(as)))
		for i := 0; i < 2 && i < len(as); i++ {
			want[fmt.Sprint(sql.Row{sql.Varchar(u), sql.Double(as[i]), sql.BigInt(int64(i + 1))})]++
		}
	}
	got := foldChanges(t, plan, evs)
	if g, w := multisetText(got), multisetText(want); g != w {
		t.Fatalf("folded Top-N differs:\n%s", diff(strings.Split(g, "\n"), strings.Split(w, "\n")))
	}
}

// A global Top-N over a GROUP BY without a window: the aggregate's changes retract the
// users that leave the first three.
func TestTopNChangesOverAggregate(t *testing.T) {
	plan := planSQL(t, `SELECT user_id, n, rn FROM (SELECT user_id, n, ROW_NUMBER() OVER (ORDER BY n DESC) AS rn
  FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) a) x WHERE rn <= 3`, planCatalog(), "topch")
	text := planner.Explain(nil, plan)
	if !strings.Contains(text, "retracting") || !strings.Contains(text, "changes=retract") {
		t.Fatalf("the Top-N does not read the aggregate's retractions:\n%s", text)
	}
	evs := genEvents(11, 4000, 60, 0)
	counts := map[string]int64{}
	for _, e := range evs {
		counts[e.user]++
	}
	type uc struct {
		u string
		n int64
	}
	var all []uc
	for u, n := range counts {
		all = append(all, uc{u, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].u < all[j].u
	})
	want := map[string]int{}
	for i := 0; i < 3; i++ {
		want[fmt.Sprint(sql.Row{sql.Varchar(all[i].u), sql.BigInt(all[i].n), sql.BigInt(int64(i + 1))})]++
	}
	got := foldChanges(t, plan, evs)
	if g, w := multisetText(got), multisetText(want); g != w {
		t.Fatalf("folded Top-N differs:\n%s", diff(strings.Split(g, "\n"), strings.Split(w, "\n")))
	}
}
