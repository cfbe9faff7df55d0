package exec

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"rsql/planner"
)

// aggregationOf returns the plan's aggregation and whether the stage before it ends in an
// exchange.
func aggregationOf(t *testing.T, plan *planner.Physical) (*planner.AggregateNode, bool) {
	t.Helper()
	for i, st := range plan.Stages {
		for _, op := range st.Ops {
			if a, ok := op.Node.(*planner.AggregateNode); ok {
				return a, i > 0 && plan.Stages[i-1].Exchange != nil
			}
		}
	}
	t.Fatal("the plan has no aggregation")
	return nil, false
}

// An aggregation behind an in-process exchange on its keys takes each row's key hash from
// the exchange (Batch.Hashes) instead of computing it again, on the path that reads a
// batch's groups ahead (thousands of groups a split) and on the other; the groups it
// restores from the store after a restart hash their keys themselves, and the rows after
// the restart still find them: each key's last row is the answer over all the input.
func TestAggregateKeysHashedByExchange(t *testing.T) {
	plan := planSQL(t, `SELECT UPPER(user_id) AS u, COUNT(*) AS c, SUM(amount) AS s
		FROM orders GROUP BY UPPER(user_id)`, planCatalog(), "hashed")
	agg, exchanged := aggregationOf(t, plan)
	if !exchanged || !agg.KeysHashed {
		t.Fatalf("exchanged %v, KeysHashed %v: want an aggregation hashed by its exchange", exchanged, agg.KeysHashed)
	}
	// A key computed twice may differ: the aggregation hashes its own.
	volatile := planSQL(t, `SELECT user_id || CAST(RANDOM() < 2 AS VARCHAR) AS u, COUNT(*) AS c
		FROM orders GROUP BY user_id || CAST(RANDOM() < 2 AS VARCHAR)`, planCatalog(), "volatile")
	if a, exchanged := aggregationOf(t, volatile); !exchanged || a.KeysHashed {
		t.Fatalf("volatile key: exchanged %v, KeysHashed %v: want exchanged, not hashed", exchanged, a.KeysHashed)
	}
	// Partitioned by user_id already: no exchange, nothing to take.
	plain := planSQL(t, `SELECT user_id, COUNT(*) AS c FROM orders GROUP BY user_id`, planCatalog(), "plain")
	if a, exchanged := aggregationOf(t, plain); exchanged || a.KeysHashed {
		t.Fatalf("no exchange: exchanged %v, KeysHashed %v", exchanged, a.KeysHashed)
	}

	const users = 5000 // over the exchange's queues, more than prefetchGroups a split
	evs := splitEvents(81, 82, 20000, users)
	var rows rowCollector
	j2 := runRestarted(t, "hashed", plan, evs, 500, 12000, 3000, &rows)
	defer j2.Stop()

	type total struct {
		n   int64
		sum float64
	}
	byKey := map[string]*total{}
	for sp := range evs {
		for _, e := range evs[sp] {
			k := strings.ToUpper(e.user)
			if byKey[k] == nil {
				byKey[k] = &total{}
			}
			byKey[k].n++
			byKey[k].sum += e.amount
		}
	}
	var want []string
	for k, tot := range byKey {
		want = append(want, fmt.Sprintf("%s,%d,%g", k, tot.n, tot.sum))
	}
	sort.Strings(want)
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		last := map[string]string{}
		for _, r := range rows.snapshot() {
			body := r[:strings.LastIndexByte(r, ',')] // the change column aside
			last[body[:strings.IndexByte(body, ',')]] = body
		}
		got = got[:0]
		for _, r := range last {
			got = append(got, r)
		}
		sort.Strings(got)
		if strings.Join(got, " ") == strings.Join(want, " ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(diff(got, want))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
