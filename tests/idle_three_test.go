package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestIdleSplitsCloseLastWindowOnThreeInstances: the windowed job of
// TestExchangeJobOnThreeInstances (an exchange: the topic is keyed by user but the stream
// is not, so both stages are divided among the instances) over a replayed input, whose
// last windows close the documented way (docs/sql.md "Idle splits"): one record an hour of
// event time after the last, on one queue. The instance that reads it pulls its own idle
// splits up to it; the other instances' splits are idle at the largest event time they
// read, and they say so through the shuffle topic, so the aggregation splits wait only for
// the active ones and the last window closes on three instances as on one. Two instances
// are killed with SIGKILL while input flows and restarted. The consumed result equals
// PostgreSQL's GROUP BY over the same rows, the last window included.
func TestIdleSplitsCloseLastWindowOnThreeInstances(t *testing.T) {
	d := idleCloseScenario(t, 3, true)
	t.Logf("last window out %v after the closing record", d)
}

// TestIdleCloseLatency measures the time from producing the closing record to the last
// window's rows in the result topic, on one and on three instances (RSQL_IDLE_LATENCY=n
// runs each n times).
func TestIdleCloseLatency(t *testing.T) {
	runs := 0
	fmt.Sscan(os.Getenv("RSQL_IDLE_LATENCY"), &runs)
	if runs <= 0 {
		t.Skip("set RSQL_IDLE_LATENCY to the number of runs")
	}
	for _, n := range []int{1, 3} {
		for i := 0; i < runs; i++ {
			t.Run(fmt.Sprintf("instances=%d/run=%d", n, i), func(t *testing.T) {
				d := idleCloseScenario(t, n, false)
				t.Logf("FIGURE instances=%d closing record to last window: %v", n, d)
			})
		}
	}
}

// idleCloseScenario runs the job on n instances over 30,000 replayed orders (two of the
// instances killed and restarted while they flow when kills), closes the last windows with
// one record an hour later, and returns how long the last window's rows took to reach the
// result topic.
func idleCloseScenario(t *testing.T, n int, kills bool) time.Duration {
	pgc := startPostgres(t)
	br := startBroker(t)
	evs := genEvents(67)[:30_000]
	var maxTs int64
	for _, e := range evs {
		maxTs = max(maxTs, e.TsMs)
	}
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewSource(seed))
	t.Logf("timing seed %d", seed)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgc.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	want, lastEnd := pgWindowResult(t, conn, evs)

	srv, all := externalInstances(t, n, br.NS, pgc.URL)
	srv[0].start()
	if out, errOut, err := runRsql(t, "", "--server", srv[0].pg, "-c", exchangeDDL); err != nil {
		t.Fatalf("DDL: %v\n%s\n%s", err, out, errOut)
	}
	sixth := len(evs) / 6
	produceEvents(t, br.NS, evs[:sixth])
	for _, s := range srv[1:] {
		s.start()
	}
	produceEvents(t, br.NS, evs[sixth:2*sixth])
	waitUnitsSpread(t, conn, all)

	for i := 0; i < 2; i++ {
		chunk := evs[(2+i)*sixth : (3+i)*sixth]
		if !kills {
			produceEvents(t, br.NS, chunk)
			continue
		}
		victim := srv[1+i]
		done := make(chan error, 1)
		go func() {
			_, errOut, err := runRsql(t, eventLines(chunk), "produce", "orders", "--key", "user_id", "--namesrv-addr", br.NS)
			if err == nil && !strings.Contains(errOut, fmt.Sprintf("produced %d records", len(chunk))) {
				err = fmt.Errorf("produce: %s", errOut)
			}
			done <- err
		}()
		d := time.Duration(r.Intn(800)) * time.Millisecond
		time.Sleep(d)
		t.Logf("kill -9 instance %s %v into producing a sixth of the input", victim.name, d)
		victim.p.Kill()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		waitUnitsSpread(t, conn, slices.DeleteFunc(slices.Clone(all), func(m string) bool { return m == all[1+i] }))
		victim.start()
		waitUnitsSpread(t, conn, all)
	}
	produceEvents(t, br.NS, evs[4*sixth:])

	// The result topic as it is written: the last window's rows are those ending at lastEnd.
	cons := startProc(t, buildRsql(t), "consume", "result", "--from-beginning", "--namesrv-addr", br.NS)
	lastRows := 0
	for _, l := range want {
		if strings.Contains(l, fmt.Sprintf(" %d n=", lastEnd)) {
			lastRows++
		}
	}
	// Let the input be read and every split go idle (idle_timeout 5 s) before the closing
	// record, as for a replay that ended a while ago.
	waitCond(t, 60*time.Second, func() bool {
		return countWindowEnd(t, cons.Stdout.String(), lastEnd-10_000) > 0
	}, "the windows before the last to close")
	time.Sleep(6 * time.Second)
	if got := countWindowEnd(t, cons.Stdout.String(), lastEnd); got != 0 {
		t.Fatalf("%d rows of the last window before the closing record", got)
	}

	start := time.Now()
	produceEvents(t, br.NS, []event{{OrderID: -1, UserID: "~close", TsMs: maxTs + 3_600_000, Category: "none"}})
	var took time.Duration
	waitCond(t, 90*time.Second, func() bool {
		if countWindowEnd(t, cons.Stdout.String(), lastEnd) < lastRows {
			return false
		}
		took = time.Since(start)
		return true
	}, "the %d rows of the last window (ending %d) in the result topic", lastRows, lastEnd)
	compareMultisets(t, fmt.Sprintf("result topic on %d instances against PostgreSQL", n), want, consumedResult(t, br.NS))
	return took
}

// countWindowEnd counts the result rows (JSON lines) whose window ends at end.
func countWindowEnd(t *testing.T, out string, end int64) int {
	cnt := 0
	for _, l := range lines(out) {
		var r struct {
			WindowEnd time.Time `json:"window_end"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			continue // a line still being written
		}
		if r.WindowEnd.UnixMilli() == end {
			cnt++
		}
	}
	return cnt
}

// pgWindowResult loads the orders into PostgreSQL and returns its GROUP BY per user and
// 10 s tumbling window over the on-time rows (the late copies genEvents adds are dropped
// by the job as late), in the lines of resultLine, and the end of the last window.
func pgWindowResult(t *testing.T, conn *pgx.Conn, evs []event) ([]string, int64) {
	ctx := context.Background()
	loadEvents(t, conn, evs)
	rows, err := conn.Query(ctx, `SELECT user_id, ts - ts % 10000 AS ws, count(*), sum(amount)
		FROM orders WHERE NOT late GROUP BY user_id, ws`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var lastEnd int64
	for rows.Next() {
		var user string
		var ws, n int64
		var sum float64
		if err := rows.Scan(&user, &ws, &n, &sum); err != nil {
			t.Fatal(err)
		}
		out = append(out, resultLine(user, ws, ws+10_000, n, sum))
		lastEnd = max(lastEnd, ws+10_000)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out, lastEnd
}
