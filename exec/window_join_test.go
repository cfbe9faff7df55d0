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
			stmts, err := sql.Parse(query)
			if err != nil {
				t.Fatal(err)
			}
			q, err := sql.Bind(stmts[0].(*sql.Select), planCatalog())
			if err != nil {
				t.Fatal(err)
			}
			_, plan, err := planner.Plan(q, planner.Options{Job: "wj"})
			if err != nil {
				t.Fatal(err)
			}
			// Two windows, [0, 1000) and [1000, 2000); their maxima 7 and 9 are each paid
			// once and ordered twice (orders 2, 3 and 6, 7); the last rows close them.
			orders, payments := newMemSource(true, 0, "0", "1"), newMemSource(true, 0, "0", "1")
			orders.feed("0", "u1,5,100,1", "u2,7,200,2", "u3,7,900,3", "u1,9,1100,4", "u1,3,1500,5", "u2,9,1999,6", "u4,9,1500,7", "u9,1,9000,8")
			payments.feed("1", "u1,7,150,0", "u2,2,500,0", "u3,9,1200,0", "u4,4,1800,0", "u9,1,9000,0")
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
					got = append(got, r[0].String()+":"+r[1].String()+"="+r[2].String())
					mu.Unlock()
					return nil
				},
				Store:              state.NewMemory(),
				CheckpointInterval: time.Second,
				Tick:               5 * time.Millisecond,
			}
			j, err := Start(context.Background(), "wj", plan, env)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Wait(); err != nil {
				t.Fatal(err)
			}
			sort.Strings(got)
			if want := "2:7=7 3:7=7 4:9=9 6:9=9 7:9=9 8:1=1"; strings.Join(got, " ") != want {
				t.Fatalf("got %v, want %s", got, want)
			}
		})
	}
}
