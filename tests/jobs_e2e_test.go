package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Continuous jobs over broker topics, end to end through real processes: `rsql server`,
// statements over `rsql --server -c`, input with `rsql produce`, output with `rsql consume`.
// The expected result is computed here from the generated events (the batch result), and
// the consumed result must equal it as a multiset: nothing missing, extra or duplicated.

// jobsServer is an `rsql server` on fixed addresses and a data directory that survive
// restarts.
type jobsServer struct {
	t                *testing.T
	dir              string
	pg, ns, br, http string
	// external, when set, is the name server of the brokers the server uses (--namesrv)
	// instead of its bundled broker; ns is then the same address.
	external string
	p        *proc
	starts   int
	// flags are more flags of rsql server.
	flags []string
}

func newJobsServer(t *testing.T, flags ...string) *jobsServer {
	s := &jobsServer{t: t, dir: t.TempDir(), pg: freePort(t), ns: freePort(t), br: freePort(t), http: freePort(t), flags: flags}
	s.start()
	return s
}

func (s *jobsServer) start() {
	s.t.Helper()
	s.starts++
	if s.external != "" {
		s.ns = s.external
		s.p = startProc(s.t, buildRsql(s.t), append([]string{"server", "--data-dir", s.dir, "--pg-addr", s.pg,
			"--namesrv", s.external, "--http-addr", s.http}, s.flags...)...)
		waitListening(s.t, s.p, s.pg)
		return
	}
	for attempt := 1; ; attempt++ {
		s.p = startProc(s.t, buildRsql(s.t), append([]string{"server", "--data-dir", s.dir, "--pg-addr", s.pg,
			"--namesrv-addr", s.ns, "--broker-addr", s.br, "--http-addr", s.http}, s.flags...)...)
		if listensOrTaken(s.t, s.p, s.pg) {
			break
		}
		if s.starts > 1 || attempt == 3 {
			s.t.Fatalf("an address of the server was taken: %s", s.p.Stderr.String())
		}
		// First start: its free ports were taken by another process; choose others.
		s.pg, s.ns, s.br, s.http = freePort(s.t), freePort(s.t), freePort(s.t), freePort(s.t)
	}
	waitListening(s.t, s.p, s.ns)
}

// newExternalJobsServer starts an `rsql server --namesrv ns`: its topics live on the
// brokers that name server knows.
func newExternalJobsServer(t *testing.T, ns string) *jobsServer {
	s := &jobsServer{t: t, dir: t.TempDir(), pg: freePort(t), http: freePort(t), external: ns}
	s.start()
	return s
}

func (s *jobsServer) sql(text string) string {
	s.t.Helper()
	out, errOut, err := runRsql(s.t, "", "--server", s.pg, "-c", text)
	if err != nil {
		s.t.Fatalf("rsql -c %q: %v\n%s\n%s", text, err, out, errOut)
	}
	return out
}

// watermark returns the watermark of the job that writes stream sink (SHOW JOBS), or
// MinInt64 when it has none yet.
func (s *jobsServer) watermark(ctx context.Context) (int64, error) {
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SHOW JOBS", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	wm := int64(-1 << 63)
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return 0, err
		}
		for i, fd := range rows.FieldDescriptions() {
			if fd.Name == "watermark" {
				if ts, ok := vals[i].(time.Time); ok {
					wm = ts.UnixMilli()
				}
			}
			if fd.Name == "state" && vals[i] != "RUNNING" {
				return 0, fmt.Errorf("job is %v", vals[i])
			}
		}
	}
	return wm, rows.Err()
}

const jobsDDL = `CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'orders', queues = 4, idle_timeout = '1s');
CREATE STREAM result WITH (queues = 4) AS
  SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end;`

// batchResult is the tumbling COUNT/SUM per user and 10 s window over the on-time events,
// one canonical line per row, and the end of the last window.
func batchResult(evs []event) ([]string, int64) {
	type k struct {
		user string
		ws   int64
	}
	type agg struct {
		n   int64
		sum float64
	}
	m := map[k]*agg{}
	var lastEnd int64
	for _, e := range evs {
		if e.Late {
			continue
		}
		ws := e.TsMs - e.TsMs%10000
		a := m[k{e.UserID, ws}]
		if a == nil {
			a = &agg{}
			m[k{e.UserID, ws}] = a
		}
		a.n++
		a.sum += e.Amount
		lastEnd = max(lastEnd, ws+10000)
	}
	var out []string
	for key, a := range m {
		out = append(out, resultLine(key.user, key.ws, key.ws+10000, a.n, a.sum))
	}
	return out, lastEnd
}

func resultLine(user string, ws, we, n int64, sum float64) string {
	return fmt.Sprintf("%s %d %d n=%d total=%.2f", user, ws, we, n, sum)
}

// consumedResult reads the whole result topic with `rsql consume` and renders its rows.
func consumedResult(t *testing.T, ns string) []string {
	out, errOut, err := runRsql(t, "", "consume", "result", "--from-beginning", "--idle-exit", "3s", "--namesrv-addr", ns)
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, errOut)
	}
	var got []string
	for _, l := range lines(out) {
		got = append(got, resultRow(t, l))
	}
	return got
}

func eventLines(evs []event) string {
	var b bytes.Buffer
	for i, e := range evs {
		var ts any = e.TsMs
		if i%2 == 1 {
			ts = time.UnixMilli(e.TsMs).UTC().Format("2006-01-02T15:04:05.000Z")
		}
		j, _ := json.Marshal(map[string]any{"order_id": e.OrderID, "user_id": e.UserID, "amount": e.Amount,
			"ts": ts, "category": e.Category, "qty": e.Qty})
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func produceEvents(t *testing.T, ns string, evs []event) {
	t.Helper()
	_, errOut, err := runRsql(t, eventLines(evs), "produce", "orders", "--key", "user_id", "--namesrv-addr", ns)
	if err != nil || !strings.Contains(errOut, fmt.Sprintf("produced %d records", len(evs))) {
		t.Fatalf("produce: %v\n%s", err, errOut)
	}
}

// closeWindows produces, to every queue of orders, a record at lastEnd: the input is a
// replay (its event times are far from now), so once every queue is idle the watermark goes
// to the largest event time read and no further (docs/sql.md, idle_timeout); these records
// take it to the end of the last window of the real input, and their own window stays
// open. Distinct keys spread them over the queues.
func closeWindows(t *testing.T, ns string, lastEnd int64) {
	t.Helper()
	var evs []event
	for i := 0; i < 64; i++ {
		evs = append(evs, event{OrderID: int64(-1 - i), UserID: fmt.Sprintf("~close-%d", i), TsMs: lastEnd, Category: "none"})
	}
	produceEvents(t, ns, evs)
}

// waitWindowsClosed closes the last windows (closeWindows) and waits until the job's
// watermark passes the end of the last window, then for the checkpoint that publishes the
// last rows.
func waitWindowsClosed(t *testing.T, s *jobsServer, lastEnd int64) {
	t.Helper()
	closeWindows(t, s.ns, lastEnd)
	waitWatermark(t, s, lastEnd)
}

// waitWatermark waits until the job's watermark reaches lastEnd, then for the checkpoint
// that publishes the last rows.
func waitWatermark(t *testing.T, s *jobsServer, lastEnd int64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		wm, err := s.watermark(ctx)
		cancel()
		if err == nil && wm >= lastEnd {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watermark %d has not reached the last window end %d (err %v)\nserver stderr:\n%s", wm, lastEnd, err, s.p.Stderr.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(2500 * time.Millisecond) // the next 1 s checkpoint commits and publishes
}

// TestJobOverTopicsMatchesBatch: 100,000 events keyed by user through a tumbling COUNT/SUM
// job from topic to topic; windows close by idle timeout; the consumed result is exactly
// the batch result.
func TestJobOverTopicsMatchesBatch(t *testing.T) {
	evs := genEvents(41)
	want, lastEnd := batchResult(evs)
	s := newJobsServer(t)
	s.sql(jobsDDL)
	produceEvents(t, s.ns, evs)
	waitWindowsClosed(t, s, lastEnd)
	got := consumedResult(t, s.ns)
	compareMultisets(t, "result topic", want, got)
	// The exchange (GROUP BY user_id over a stream not declared key'ed by it) went through
	// the job's shuffle topic: data ('D') and watermark messages naming their producing
	// split ('P').
	out, errOut, err := runRsql(t, "", "consume", "job-1-0-shuffle", "--from-beginning", "--max", "50", "--idle-exit", "5s", "--namesrv-addr", s.ns)
	if err != nil {
		t.Fatalf("consume shuffle topic: %v\n%s", err, errOut)
	}
	kinds := map[byte]int{}
	for _, l := range lines(out) {
		kinds[l[0]]++
	}
	if kinds['D'] == 0 || kinds['P'] == 0 {
		t.Errorf("shuffle topic job-1-0-shuffle: %d data and %d watermark messages among the first 50", kinds['D'], kinds['P'])
	}
	if err := s.p.Stop(); err != nil {
		t.Errorf("server stop: %v\n%s", err, s.p.Stderr.String())
	}
}

// TestJobSurvivesKill9: the same job, the server killed with SIGKILL three times at random
// moments while it processes, restarted on the same data directory each time: the consumed
// result is still exactly the batch result.
func TestJobSurvivesKill9(t *testing.T) {
	evs := genEvents(43)
	want, lastEnd := batchResult(evs)
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewSource(seed))
	t.Logf("kill timing seed %d", seed)
	s := newJobsServer(t)
	s.sql(jobsDDL)
	third := len(evs) / 3
	chunks := [][]event{evs[:third], evs[third : 2*third], evs[2*third:]}
	for i, c := range chunks {
		produceEvents(t, s.ns, c)
		d := time.Duration(r.Intn(2500)) * time.Millisecond
		time.Sleep(d)
		t.Logf("kill -9 #%d %v after producing chunk %d", i+1, d, i+1)
		s.p.Kill()
		s.start()
	}
	waitWindowsClosed(t, s, lastEnd)
	got := consumedResult(t, s.ns)
	compareMultisets(t, "result topic after 3 kills", want, got)
	if t.Failed() {
		t.Logf("server stderr:\n%s", s.p.Stderr.String())
	}
}
