package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// viewsClusterDDL is a materialized view over a topic not keyed by its GROUP BY key: its
// plan exchanges, so its source stage and its aggregation stage have four units each.
const viewsClusterDDL = `CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'orders', queues = 4, idle_timeout = '1s');
CREATE MATERIALIZED VIEW per_user AS
  SELECT user_id, COUNT(*) AS n, SUM(qty) AS q FROM orders GROUP BY user_id;`

// TestViewAcrossInstances: two `rsql server --postgres` instances run a materialized
// view's job, its units spread over both. A pull query asked of either instance gives
// every key of the view (the rows of both instances' units, read from the shared
// checkpoint store), equal to the answer over every event; a point lookup finds a key
// whichever instance runs its unit. After a SIGKILL of one instance, the other takes its
// units over and still answers with every key, and with the rest of the input.
func TestViewAcrossInstances(t *testing.T) {
	pgc := startPostgres(t)
	br := startBroker(t)
	evs := onTimeEvents(genEventsN(29, 6000))
	srv, _ := externalInstances(t, 2, br.NS, pgc.URL)
	a, b := srv[0], srv[1]
	a.start()
	b.start()
	if out, errOut, err := runRsql(t, "", "--server", a.pg, "-c", viewsClusterDDL); err != nil {
		t.Fatalf("DDL: %v\n%s\n%s", err, out, errOut)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgc.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	waitOwners(t, conn, "", 4, 4)

	half := len(evs) / 2
	produceEvents(t, br.NS, evs[:half])
	want := viewAnswer(evs[:half])
	conns := []*pgx.Conn{pdConnect(t, a.pg), pdConnect(t, b.pg)}
	for i, s := range srv {
		waitView(t, s.name, conns[i], want)
	}
	// Point lookups, on both instances, of users whose rows either instance computed.
	for i, s := range srv {
		plan := orderedRows(t, conns[i], `EXPLAIN SELECT n, q FROM per_user WHERE user_id = 'u1'`)
		if len(plan) == 0 || !strings.Contains(plan[0], "Lookup view per_user by key") {
			t.Fatalf("%s: EXPLAIN of a point lookup: %q", s.name, plan)
		}
		for _, u := range []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"} {
			got := orderedRows(t, conns[i], fmt.Sprintf(`SELECT user_id, n, q FROM per_user WHERE user_id = '%s'`, u))
			var w []string
			for _, line := range want {
				if strings.HasPrefix(line, u+" ") {
					w = append(w, line)
				}
			}
			if !slices.Equal(got, w) {
				t.Fatalf("%s: point lookup of %s: %q, want %q", s.name, u, got, w)
			}
		}
	}

	a.p.Kill()
	produceEvents(t, br.NS, evs[half:])
	waitView(t, b.name, conns[1], viewAnswer(evs))
}

// viewAnswer is per_user over evs: "user n q" lines, sorted.
func viewAnswer(evs []event) []string {
	type agg struct{ n, q int }
	m := map[string]*agg{}
	for _, e := range evs {
		g := m[e.UserID]
		if g == nil {
			g = &agg{}
			m[e.UserID] = g
		}
		g.n++
		g.q += e.Qty
	}
	var out []string
	for u, g := range m {
		out = append(out, fmt.Sprintf("%s %d %d", u, g.n, g.q))
	}
	slices.Sort(out)
	return out
}

// waitView waits until a pull query of every row of per_user on instance name (conn)
// gives want.
func waitView(t *testing.T, name string, conn *pgx.Conn, want []string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		got = orderedRows(t, conn, `SELECT user_id, n, q FROM per_user`)
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			compareMultisets(t, name+": per_user", want, got)
			t.FailNow()
		}
		time.Sleep(200 * time.Millisecond)
	}
}
