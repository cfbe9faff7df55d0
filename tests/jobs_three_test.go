package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestExchangeJobOnThreeInstances: three `rsql server --postgres` instances share a private
// Postgres and one standalone broker. The windowed job groups by user while its input is
// not keyed by user, so its plan has an exchange: the source stage reads the topic's four
// queues, the aggregation stage the shuffle topic's four queues. Once the three run, each
// stage's units are spread over all three (SHOW UNITS, SHOW JOBS and /metrics say so);
// then, while input flows, one instance is killed with SIGKILL, its units move to the two
// others when its lease expires, and then a second one is killed, leaving everything to
// the last. The consumed result is exactly the batch result.
func TestExchangeJobOnThreeInstances(t *testing.T) {
	pgc := startPostgres(t)
	br := startBroker(t)
	evs := genEvents(61)
	want, lastEnd := batchResult(evs)
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewSource(seed))
	t.Logf("timing seed %d", seed)

	srv, _ := externalInstances(t, 3, br.NS, pgc.URL)
	a, b, c := srv[0], srv[1], srv[2]
	a.start()
	if out, errOut, err := runRsql(t, "", "--server", a.pg, "-c", exchangeDDL); err != nil {
		t.Fatalf("DDL: %v\n%s\n%s", err, out, errOut)
	}
	sixth := len(evs) / 6
	produceEvents(t, br.NS, evs[:sixth])
	b.start()
	c.start()
	produceEvents(t, br.NS, evs[sixth:2*sixth])

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgc.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	all := []string{"rsql-1", "rsql-2", "rsql-3"}
	spread := waitUnitsSpread(t, conn, all)

	// Shown: SHOW UNITS names each unit's owner, which is the instance the division
	// assigns it; SHOW JOBS names the three with their units; each instance's metrics
	// count the units it runs.
	// Each instance learns of the others at its next membership tick, which a loaded
	// machine can delay past the moment the splits table shows the spread: wait for
	// each view to settle, and fail with what it showed last.
	var problems []string
	waitCond(t, 20*time.Second, func() bool {
		problems = showUnitsSpread(t, a.pg, all)
		return len(problems) == 0
	}, "SHOW UNITS on A to show the spread: %v", seenLast[[]string]{&problems})
	for _, s := range srv {
		var units string
		waitCond(t, 20*time.Second, func() bool {
			units = showJobsUnits(t, s.pg)
			for _, m := range all {
				if !strings.Contains(units, m+": ") {
					return false
				}
			}
			return true
		}, "SHOW JOBS on %s to name %v in its units (last: %v)", s.name, all, seenLast[string]{&units})
	}
	total := 0
	for _, s := range srv {
		var n float64
		waitCond(t, 20*time.Second, func() bool {
			m := scrapeMetrics(t, s.http)
			n = m[`rsql_job_units_assigned{job="job-1"}`]
			return m["rsql_cluster_members"] == 3 && n > 0 && countPrefix(m, `rsql_job_unit{job="job-1",`) == int(n)
		}, "instance %s: metrics with 3 members and its assigned units running", s.name)
		total += int(n)
	}
	if total != 8 {
		t.Errorf("the instances' metrics assign %d units in all, want 8", total)
	}

	movesBefore := scrapeMetrics(t, a.http)[`rsql_job_unit_moves_total{job="job-1"}`]
	onA := 0
	for _, o := range spread {
		if o == "rsql-1" {
			onA++
		}
	}

	// Two SIGKILLs, each while a sixth of the input is being produced; the survivors take
	// the dead instance's units over once its lease expires.
	for i, victim := range []*clusterServer{b, c} {
		done := make(chan error, 1)
		chunk := evs[(2+i)*sixth : (3+i)*sixth]
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
		live := slices.DeleteFunc(slices.Clone(all), func(m string) bool {
			return m == "rsql-2" || (i == 1 && m == "rsql-3")
		})
		waitUnitsSpread(t, conn, live)
	}
	produceEvents(t, br.NS, evs[4*sixth:])

	// The survivors logged each unit they took over, with the instance it came from and how
	// long the move took, and A counts the units it gained in its metrics.
	takenOver := func(log, from string) bool {
		return regexp.MustCompile(`unit \d+/\d+ moved here from ` + from + ` in \S+ \(its owner's lease expired;`).MatchString(log)
	}
	if !takenOver(a.stderr()+c.stderr(), "rsql-2") {
		t.Errorf("no unit of B was taken over from rsql-2 after its lease expired (A's and C's logs)")
	}
	if !takenOver(a.stderr(), "rsql-3") {
		t.Errorf("A's log has no unit taken over from rsql-3 after its lease expired")
	}
	// (The last move may still be loading when the store already names A its owner.)
	var moves float64
	waitCond(t, 20*time.Second, func() bool {
		moves = scrapeMetrics(t, a.http)[`rsql_job_unit_moves_total{job="job-1"}`] - movesBefore
		return moves >= float64(8-onA)
	}, "A to count the %d units it gained since the first kill (it had %d of 8)", 8-onA, onA)
	if moves != float64(8-onA) {
		t.Errorf("A counts %v units moved to it since the first kill, want %d (it had %d of 8)", moves, 8-onA, onA)
	}

	closeWindows(t, br.NS, lastEnd)
	waitClusterWatermark(t, a.pg, lastEnd)
	time.Sleep(2500 * time.Millisecond)
	compareMultisets(t, "result topic across three instances", want, consumedResult(t, br.NS))
	if err := a.p.Stop(); err != nil {
		t.Errorf("instance A stop: %v", err)
	}
}

// waitUnitsSpread waits until every unit of job-1 (source stage 0, aggregation stage 1,
// four each) is owned in the shared store by one of live, and each stage has units on
// every one of them. It returns the owner of each unit.
func waitUnitsSpread(t *testing.T, conn *pgx.Conn, live []string) map[string]string {
	t.Helper()
	return waitUnitsSpreadN(t, conn, live, 8)
}

// waitClusterWatermark waits until job-1's watermark, asked of the instance whose
// Postgres-wire address is pg, reaches lastEnd.
func waitClusterWatermark(t *testing.T, pg string, lastEnd int64) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(90 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		wm, err := jobWatermark(cctx, pg)
		cancel()
		if err == nil && wm >= lastEnd {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watermark %d has not reached the last window end %d (err %v)", wm, lastEnd, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// onTimeEvents are the events of evs that are not late by construction.
func onTimeEvents(evs []event) []event {
	var out []event
	for _, e := range evs {
		if !e.Late {
			out = append(out, e)
		}
	}
	return out
}

// seenLast shows what a wait saw last, when it gives up.
type seenLast[T any] struct{ p *T }

func (o seenLast[T]) String() string { return fmt.Sprint(*o.p) }

// waitUnitsSpreadN is waitUnitsSpread for a job of n units in all.
func waitUnitsSpreadN(t *testing.T, conn *pgx.Conn, live []string, n int) map[string]string {
	t.Helper()
	var last map[string]string
	waitCond(t, 60*time.Second, func() bool {
		rows, err := conn.Query(context.Background(), `SELECT split, owner FROM rsql.splits
			WHERE job = 'job-1' AND split NOT LIKE '@%'`)
		if err != nil {
			return false
		}
		owners, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
			var v [2]string
			return v, r.Scan(&v[0], &v[1])
		})
		if err != nil {
			return false
		}
		last = map[string]string{}
		perStage := map[string]map[string]bool{}
		for _, o := range owners {
			last[o[0]] = o[1]
			if !slices.Contains(live, o[1]) {
				return false
			}
			stage, _, _ := strings.Cut(o[0], "/")
			if perStage[stage] == nil {
				perStage[stage] = map[string]bool{}
			}
			perStage[stage][o[1]] = true
		}
		for _, on := range perStage {
			if len(on) != len(live) {
				return false
			}
		}
		return len(owners) == n && len(perStage["0"]) == len(live) && len(perStage["1"]) == len(live)
	}, "units of job-1 spread over %v (owners: %v)", live, seenLast[map[string]string]{&last})
	t.Logf("units spread over %v: %v", live, last)
	return last
}

// showUnitsSpread checks SHOW UNITS on the instance at pgAddr: eight units of job-1, each
// owned by the instance the division assigns it, each stage on every one of members. It
// returns what differs, nothing when all holds.
func showUnitsSpread(t *testing.T, pgAddr string, members []string) (problems []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+pgAddr+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SHOW UNITS", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	type unitRow struct {
		job, unit, owner, assigned string
		stage                      int
	}
	var got []unitRow
	var table strings.Builder
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var u unitRow
		for i, fd := range rows.FieldDescriptions() {
			s := fmt.Sprint(vals[i])
			switch fd.Name {
			case "job":
				u.job = s
			case "unit":
				u.unit = s
			case "stage":
				u.stage, _ = strconv.Atoi(s)
			case "owner":
				u.owner = s
			case "assigned":
				u.assigned = s
			}
		}
		fmt.Fprintf(&table, "  %v\n", vals)
		got = append(got, u)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	perStage := map[int]map[string]bool{}
	for _, u := range got {
		if u.job != "job-1" {
			problems = append(problems, fmt.Sprintf("a unit of job %q", u.job))
			continue
		}
		if u.owner != u.assigned || !slices.Contains(members, u.owner) {
			problems = append(problems, fmt.Sprintf("unit %s owned by %q, assigned to %q", u.unit, u.owner, u.assigned))
		}
		if perStage[u.stage] == nil {
			perStage[u.stage] = map[string]bool{}
		}
		perStage[u.stage][u.owner] = true
	}
	if len(got) != 8 || len(perStage[0]) != len(members) || len(perStage[1]) != len(members) {
		problems = append(problems, fmt.Sprintf("%d units, stage owners %v; want 8 units, each stage on %v", len(got), perStage, members))
	}
	if problems != nil {
		problems = append(problems, "SHOW UNITS:\n"+table.String())
	}
	return problems
}

// showJobsUnits returns the units column of job-1 in SHOW JOBS on the instance at pgAddr.
func showJobsUnits(t *testing.T, pgAddr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+pgAddr+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var id string
	var units *string
	if err := conn.QueryRow(ctx, "SHOW JOBS", pgx.QueryExecModeSimpleProtocol).Scan(&id, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, &units); err != nil {
		t.Fatal(err)
	}
	if id != "job-1" || units == nil {
		t.Fatalf("SHOW JOBS: job %q with units %v", id, units)
	}
	return *units
}

// scrapeMetrics reads /metrics of the instance at httpAddr into name{labels} -> value.
func scrapeMetrics(t *testing.T, httpAddr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return out
}

func countPrefix(m map[string]float64, prefix string) int {
	n := 0
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// waitCond polls cond every 200 ms for up to d and fails the test with the message if it
// never holds.
func waitCond(t *testing.T, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for "+format, append([]any{d}, args...)...)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
