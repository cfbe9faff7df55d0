package exec

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"rsql/planner"
	"rsql/sql"
)

// condsQuery counts distinct n per user under conditions of the amount and of n itself,
// several of them repeated across arguments (one COUNT(DISTINCT) family of six members
// and two SUMs), one failing for n = 0 (division by zero).
const condsQuery = `SELECT user_id,
	COUNT(DISTINCT n) AS d,
	COUNT(DISTINCT CASE WHEN amount < 30 THEN n END) AS d_low,
	COUNT(DISTINCT CASE WHEN amount >= 30 AND amount < 70 THEN n END) AS d_mid,
	COUNT(DISTINCT CASE WHEN amount >= 70 THEN n ELSE NULL END) AS d_high,
	COUNT(DISTINCT CASE WHEN n % 7 = 0 THEN n END) AS d_seven,
	COUNT(DISTINCT CASE WHEN 100 / n > 5 THEN n END) AS d_div,
	SUM(CASE WHEN amount < 30 THEN 1 ELSE 0 END) AS low,
	SUM(CASE WHEN amount >= 30 AND amount < 70 THEN amount END) AS mid_sum
	FROM orders GROUP BY user_id`

// The conditions of an aggregation's CASE arguments are computed once per row
// (sql.CompileConds), and a COUNT(DISTINCT) family whose members are a column under such
// conditions is fed from the column and the conditions without computing its members'
// arguments (distinctFamilies.prepare): either way each user's row is what the query asks
// (computed here), with the family fed argument by argument too, and a row whose condition
// fails goes to the bad rows with the same error.
func TestAggregateConditionsOncePerRow(t *testing.T) {
	evs := genEvents(41, 6000, 40, 0)
	type model struct {
		sets          [6]map[int64]bool
		low           int64
		mid           float64
		midAny, plain bool
	}
	want := map[string]*model{}
	bad := 0
	for _, e := range evs {
		if !e.nNull && e.n == 0 {
			bad++ // 100 / n fails: the row changes nothing
			continue
		}
		m := want[e.user]
		if m == nil {
			m = &model{}
			for i := range m.sets {
				m.sets[i] = map[int64]bool{}
			}
			want[e.user] = m
		}
		if e.amount < 30 {
			m.low++
		}
		if e.amount >= 30 && e.amount < 70 {
			m.mid += e.amount
			m.midAny = true
		}
		if e.nNull {
			continue
		}
		for i, in := range []bool{true, e.amount < 30, e.amount >= 30 && e.amount < 70, e.amount >= 70, e.n%7 == 0, 100/e.n > 5} {
			if in {
				m.sets[i][e.n] = true
			}
		}
	}
	if bad == 0 {
		t.Fatal("no row fails: the test needs some")
	}
	var wantRows []string
	for u, m := range want {
		mid := "NULL"
		if m.midAny {
			mid = sql.Double(m.mid).String()
		}
		var counts []string
		for _, s := range m.sets {
			counts = append(counts, fmt.Sprint(len(s)))
		}
		wantRows = append(wantRows, fmt.Sprintf("%s,%s,%d,%s", u, strings.Join(counts, ","), m.low, mid))
	}

	for _, byArgument := range []bool{false, true} {
		t.Run(fmt.Sprintf("by-argument=%v", byArgument), func(t *testing.T) {
			plan := planSQL(t, condsQuery, planCatalog(), "conds")
			var agg *planner.AggregateNode
			for _, st := range plan.Stages {
				for _, op := range st.Ops {
					if n, ok := op.Node.(*planner.AggregateNode); ok {
						agg = n
					}
				}
			}
			// Five conditions (amount < 30, the range, amount >= 70, n % 7 = 0, 100 / n > 5)
			// for eight CASE arguments.
			if agg == nil || agg.Conds == nil || agg.Conds.Len() != 5 || len(agg.Families) != 1 || len(agg.FamilyShapes) != 1 || agg.FamilyShapes[0] == nil {
				t.Fatalf("aggregation %+v: want five conditions and one family fed from them", agg)
			}
			if byArgument {
				agg.FamilyShapes = nil
			}
			j, got := lastRowsByKey(t, "conds", plan, evs, 64, 1)
			if d := diff(got, wantRows); d != "" {
				t.Fatal(d)
			}
			st := j.Stats()
			if st.Bad != int64(bad) || len(st.BadErrors) == 0 || !strings.Contains(strings.Join(st.BadErrors, " "), "division by zero") {
				t.Fatalf("bad rows %d (%q), want %d for division by zero", st.Bad, st.BadErrors, bad)
			}
		})
	}
}

// lastRowsByKey runs plan over evs, fed to two splits by user (the streams of planCatalog
// are partitioned by user_id), and returns the job and the last row of each key (the first
// nk columns; the change column aside), its values joined by commas. batch is the source's
// batch size.
func lastRowsByKey(t *testing.T, name string, plan *planner.Physical, evs []event4, batch, nk int) (*Job, []string) {
	t.Helper()
	src := newMemSource(true, batch, "0", "1")
	var parts [2][]event4
	for _, e := range evs {
		p := int(e.user[len(e.user)-1]) % 2
		parts[p] = append(parts[p], e)
	}
	feedAll(src, "0", parts[0])
	feedAll(src, "1", parts[1])
	var mu sync.Mutex
	last := map[string]string{}
	j, err := Start(context.Background(), name, plan, testEnvFor(src, func(r sql.Row) error {
		vals := make([]string, len(r)-1)
		for i, v := range r[:len(r)-1] {
			vals[i] = v.String()
		}
		mu.Lock()
		last[strings.Join(vals[:nk], ",")] = strings.Join(vals, ",")
		mu.Unlock()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range last {
		rows = append(rows, r)
	}
	return j, rows
}
