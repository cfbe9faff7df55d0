package exec

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// A row whose join key is NULL matches nothing; on an outer side it still comes out, with
// NULLs for the other side, as PostgreSQL gives it — for window and interval joins alike
// (they used to drop it). An inner join drops it.
func TestOuterJoinNullKeys(t *testing.T) {
	const windows = `TUMBLE(orders, ts, INTERVAL '1' SECOND) o %s JOIN TUMBLE(payments, ts, INTERVAL '1' SECOND) p
  ON o.window_start = p.window_start AND o.window_end = p.window_end AND o.user_id = p.user_id`
	const interval = `orders o %s JOIN payments p ON o.user_id = p.user_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '1' SECOND`
	for _, c := range []struct {
		name, from, kind, want string
	}{
		{"window_full", windows, "FULL", "1:10 2:NULL 3:12 NULL:11"},
		{"window_left", windows, "LEFT", "1:10 2:NULL 3:12"},
		{"window_right", windows, "RIGHT", "1:10 3:12 NULL:11"},
		{"window_inner", windows, "", "1:10 3:12"},
		{"interval_full", interval, "FULL", "1:10 2:NULL 3:12 NULL:11"},
		{"interval_left", interval, "LEFT", "1:10 2:NULL 3:12"},
		{"interval_right", interval, "RIGHT", "1:10 3:12 NULL:11"},
		{"interval_inner", interval, "", "1:10 3:12"},
	} {
		t.Run(c.name, func(t *testing.T) {
			query := "SELECT o.n, p.n FROM " + strings.Replace(c.from, "%s", c.kind, 1)
			plan := planSQL(t, query, planCatalog(), "jn")
			// Rows 2 and 11 have no user; the rows at 9000 close the first window.
			orders, payments := newMemSource(true, 0, "0", "1"), newMemSource(true, 0, "0", "1")
			orders.feed("0", "u1,5,100,1", ",5,200,2", "u9,1,9000,3")
			payments.feed("1", "u1,7,150,10", ",2,300,11", "u9,1,9000,12")
			got := runOrdersPayments(t, "jn", plan, orders, payments, func(r sql.Row) string { return r[0].String() + ":" + r[1].String() })
			if strings.Join(got, " ") != c.want {
				t.Fatalf("got %v, want %s", got, c.want)
			}
		})
	}
}

// runOrdersPayments runs plan to its end over two bounded in-memory streams, orders and
// payments (test-format bodies), and returns its rows rendered by show, sorted.
func runOrdersPayments(tb testing.TB, job string, plan *planner.Physical, orders, payments *memSource, show func(sql.Row) string) []string {
	tb.Helper()
	return runOrdersPaymentsEnv(tb, job, plan, orders, payments, show, nil)
}

// runOrdersPaymentsEnv is runOrdersPayments with the job's environment changed by set.
func runOrdersPaymentsEnv(tb testing.TB, job string, plan *planner.Physical, orders, payments *memSource, show func(sql.Row) string, set func(*Env)) []string {
	tb.Helper()
	var mu sync.Mutex
	var got []string
	env := Env{
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			if spec.Stream == "payments" {
				return payments, nil
			}
			return orders, nil
		},
		NewFormat: newTestFormat,
		OnRow: func(r sql.Row) error {
			mu.Lock()
			got = append(got, show(r))
			mu.Unlock()
			return nil
		},
		Store:              state.NewMemory(),
		CheckpointInterval: time.Second,
		Tick:               5 * time.Millisecond,
	}
	if set != nil {
		set(&env)
	}
	j, err := Start(context.Background(), job, plan, env)
	if err != nil {
		tb.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		tb.Fatal(err)
	}
	sort.Strings(got)
	return got
}
