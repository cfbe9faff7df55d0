package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The composed queries over topics, through real processes (`rsql server`, `rsql produce`,
// `rsql consume`), the server killed with SIGKILL three times while it works: each stateful
// operator (chained aggregation, window Top-N, windowed DISTINCT, deduplication, the union
// feeding a window) restores its state per split and the consumed results are exactly
// PostgreSQL's.

const composedTopicsDDL = `CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'orders', queues = 4, idle_timeout = '3s');
CREATE STREAM payments (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'payments', queues = 2, idle_timeout = '3s');
SET state_ttl = '1 day';
`

// topicCases are the composition cases run over topics (by name).
var topicCases = []string{"union_all", "chained_aggregation", "window_top_n", "window_dedup_first", "dedup_first_ttl", "distinct_window"}

func TestComposedJobsSurviveKill9(t *testing.T) {
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	orders, payments := genEvents(21)[:36_000], genPayments(22, 18_000)
	loadTable(t, conn, "orders", orders)
	loadTable(t, conn, "payments", payments)
	lastEnd := int64(0)
	for _, e := range append(append([]event(nil), orders...), payments...) {
		lastEnd = max(lastEnd, e.TsMs-e.TsMs%60_000+60_000)
	}

	cases := map[string]windowCase{}
	for _, c := range compositionCases {
		cases[c.name] = c
	}
	s := newJobsServer(t)
	var ddl strings.Builder
	ddl.WriteString(composedTopicsDDL)
	for _, name := range topicCases {
		fmt.Fprintf(&ddl, "CREATE STREAM %s WITH (queues = 2) AS %s;\n", name, cases[name].rsql)
	}
	s.sql(ddl.String())

	produceWithKills(t, s, orders, payments)
	// The topics are a replay: a record at the end of the last window, to every queue of
	// both streams, closes every window of the input (their own never closes).
	closeInput(t, s, lastEnd)
	waitAllJobs(t, s, lastEnd)

	checkTopicCases(t, s, conn, cases, topicCases)
}

// produceWithKills produces orders and payments in three chunks, both streams at once as
// their producers would (a stream that stops while the other goes on goes idle and its
// later records are late), and kills the server with SIGKILL at a random moment after each
// chunk, starting it again (RSQL_NOKILL=1: no kills).
func produceWithKills(t *testing.T, s *jobsServer, orders, payments []event) {
	t.Helper()
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewSource(seed))
	t.Logf("kill timing seed %d", seed)
	for i := 0; i < 3; i++ {
		done := make(chan error, 1)
		go func() { done <- produce(s.ns, "payments", payments[i*len(payments)/3:(i+1)*len(payments)/3]) }()
		produceTo(t, s.ns, "orders", orders[i*len(orders)/3:(i+1)*len(orders)/3])
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		d := time.Duration(r.Intn(2500)) * time.Millisecond
		time.Sleep(d)
		if os.Getenv("RSQL_NOKILL") != "" {
			continue
		}
		t.Logf("kill -9 #%d %v after producing chunk %d", i+1, d, i+1)
		s.p.Kill()
		s.start()
	}
}

// closeInput appends a record at ts to every queue of orders and payments (64 users named
// ~close-N), so the watermarks of both pass ts (closingRow tells their result rows).
func closeInput(t *testing.T, s *jobsServer, ts int64) {
	t.Helper()
	var closing []event
	for i := 0; i < 64; i++ {
		closing = append(closing, event{OrderID: int64(-1 - i), UserID: fmt.Sprintf("~close-%d", i), TsMs: ts, Category: "none"})
	}
	produceTo(t, s.ns, "orders", closing)
	produceTo(t, s.ns, "payments", closing)
}

// checkTopicCases compares the result topic of each named case (the topic has the case's
// name) with PostgreSQL's result of the case, without the rows of the closing records.
func checkTopicCases(t *testing.T, s *jobsServer, conn *pgx.Conn, cases map[string]windowCase, names []string) {
	t.Helper()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			cols, want := pgRows(t, conn, c.postgres)
			var ws, gs []string
			for _, r := range want {
				ws = append(ws, canon(t, cols, r, nil))
			}
			for _, line := range consumeAll(t, s.ns, name) {
				var m map[string]any
				dec := json.NewDecoder(strings.NewReader(line))
				dec.UseNumber()
				if err := dec.Decode(&m); err != nil {
					t.Fatalf("%s: not a row: %v: %s", name, err, line)
				}
				if closingRow(m) {
					continue
				}
				gs = append(gs, canon(t, cols, m, c.tsCols))
			}
			compareMultisets(t, name+" after 3 kills", ws, gs)
		})
	}
	if t.Failed() {
		t.Logf("server stderr:\n%s", s.p.Stderr.String())
	}
}

// produceTo appends events to a topic with `rsql produce`, keyed by user.
func produceTo(t *testing.T, ns, topic string, evs []event) {
	t.Helper()
	if err := produce(ns, topic, evs); err != nil {
		t.Fatal(err)
	}
}

// produce is produceTo for any goroutine (buildRsql has run).
func produce(ns, topic string, evs []event) error {
	cmd := exec.Command(buildPath, "produce", topic, "--key", "user_id", "--namesrv-addr", ns)
	cmd.Stdin = strings.NewReader(eventLines(evs))
	var errOut strings.Builder
	cmd.Stderr = &errOut
	err := cmd.Run()
	if err != nil || !strings.Contains(errOut.String(), fmt.Sprintf("produced %d records", len(evs))) {
		return fmt.Errorf("produce %s: %v\n%s", topic, err, errOut.String())
	}
	return nil
}

// consumeAll reads a whole topic with `rsql consume`.
func consumeAll(t *testing.T, ns, topic string) []string {
	t.Helper()
	out, errOut, err := runRsql(t, "", "consume", topic, "--from-beginning", "--idle-exit", "3s", "--namesrv-addr", ns)
	if err != nil {
		t.Fatalf("consume %s: %v\n%s", topic, err, errOut)
	}
	return lines(out)
}

// waitAllJobs waits until every job's watermark passed end, then for the checkpoint that
// publishes the last rows.
func waitAllJobs(t *testing.T, s *jobsServer, end int64) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		wm, err := minJobWatermark(s)
		if err == nil && wm >= end {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job watermark %d has not reached %d (err %v)\nserver stderr:\n%s", wm, end, err, s.p.Stderr.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(2500 * time.Millisecond)
}

// minJobWatermark is the smallest watermark over the server's jobs (SHOW JOBS); a job that
// is not RUNNING is an error.
func minJobWatermark(s *jobsServer) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
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
	wm := int64(1<<63 - 1)
	n := 0
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return 0, err
		}
		n++
		seen := false
		for i, fd := range rows.FieldDescriptions() {
			switch fd.Name {
			case "watermark":
				if ts, ok := vals[i].(time.Time); ok {
					wm, seen = min(wm, ts.UnixMilli()), true
				}
			case "state":
				if vals[i] != "RUNNING" {
					return 0, fmt.Errorf("a job is %v", vals[i])
				}
			}
		}
		if !seen {
			return -1 << 63, nil
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("no jobs")
	}
	return wm, rows.Err()
}
