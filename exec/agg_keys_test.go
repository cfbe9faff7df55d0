package exec

import (
	"fmt"
	"strings"
	"testing"
)

// An aggregation without a window of many groups computes the keys of a whole batch
// before its rows (aggOp.prefetch, from prefetchGroups groups): each row still goes to its
// own group, and a row whose key fails (here 100 / n for n = 0) goes to the bad rows, not
// to another row's group.
func TestAggregateKeysOfBatch(t *testing.T) {
	evs := genEvents(43, 30000, 6000, 0)
	want := map[string]int{}
	bad := 0
	for _, e := range evs {
		switch {
		case e.nNull:
			want[e.user+",NULL"]++
		case e.n == 0:
			bad++
		default:
			want[fmt.Sprintf("%s,%d", e.user, 100/e.n)]++
		}
	}
	if len(want) < 2*prefetchGroups {
		t.Fatalf("%d groups: the test needs more than %d in each split", len(want), prefetchGroups)
	}
	plan := planSQL(t, `SELECT user_id, 100 / n AS q, COUNT(*) AS c FROM orders GROUP BY user_id, 100 / n`, planCatalog(), "keys")
	j, got := lastRowsByKey(t, "keys", plan, evs, 256, 2)
	var exp []string
	for q, c := range want {
		exp = append(exp, fmt.Sprintf("%s,%d", q, c))
	}
	if d := diff(got, exp); d != "" {
		t.Fatal(d)
	}
	st := j.Stats()
	if bad == 0 || st.Bad != int64(bad) || !strings.Contains(strings.Join(st.BadErrors, " "), "division by zero") {
		t.Fatalf("bad rows %d (%q), want %d for division by zero", st.Bad, st.BadErrors, bad)
	}
}
