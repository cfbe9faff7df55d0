package exec

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// A table's message with a key and an empty body is a tombstone: the key is deleted from
// the largest event time its split has read. Orders before it join the version, orders
// after it find none.
func TestTableTombstoneDeletesTheKey(t *testing.T) {
	cat := joinBenchCatalog()
	plan := planSQL(t, `SELECT o.n, u.amount FROM orders o LEFT JOIN users FOR SYSTEM_TIME AS OF o.ts AS u ON o.user_id = u.user_id`, cat, "tomb")
	users := newMemSource(true, 0, "0", "1")
	add := func(key, body string) {
		users.mu.Lock()
		d := users.data["0"]
		users.data["0"] = append(d, connectors.Message{Offset: int64(len(d) + 1), Key: []byte(key), Body: []byte(body)})
		users.mu.Unlock()
	}
	add("u1", "u1,10,1000,0,")
	add("u2", "u2,20,1000,0,")
	add("u2", "u2,21,2000,0,") // the split has read up to 2000: u1's tombstone is at 2000
	add("u1", "")
	add("u9", "u9,90,9000,0,") // moves the table's watermark past the orders
	orders := newMemSource(true, 0, "0", "1")
	orders.feed("0", "u1,0,1500,1", "u1,0,2500,2", "u2,0,2500,3", "u9,0,9500,4")
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	var got []string
	env := Env{
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			if spec.Stream == "users" {
				return users, nil
			}
			return orders, nil
		},
		NewFormat: newTestFormat,
		OnRow: func(r sql.Row) error {
			<-mu
			got = append(got, r[0].String()+":"+r[1].String())
			mu <- struct{}{}
			return nil
		},
		Store:              state.NewMemory(),
		CheckpointInterval: time.Second,
		Tick:               5 * time.Millisecond,
	}
	j, err := Start(context.Background(), "tomb", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if want := "1:10 2:NULL 3:21 4:90"; strings.Join(got, " ") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	if st := j.Stats(); st.Bad != 0 {
		t.Fatalf("%d bad records: %v", st.Bad, st.BadErrors)
	}
}
