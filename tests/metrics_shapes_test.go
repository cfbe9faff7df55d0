package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeParsed fetches /metrics, parses the whole answer with the Prometheus text parser
// and checks that no series is there twice (same name and labels: the registry answers 500
// for that) and that every split series names its stage and what it reads.
func scrapeParsed(t *testing.T, httpAddr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, b)
	}
	for name, f := range fams {
		seen := map[string]bool{}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			k := strings.Join(ls, ",")
			if seen[k] {
				t.Fatalf("/metrics has %s{%s} twice", name, k)
			}
			seen[k] = true
			if strings.HasPrefix(name, "rsql_job_split_") {
				for _, want := range []string{"job=", "stage=", "stream=", "split="} {
					if !strings.Contains(k, want) || strings.Contains(k, want+",") || strings.HasSuffix(k, want) {
						t.Fatalf("%s{%s}: label %s missing or empty", name, k, strings.TrimSuffix(want, "="))
					}
				}
			}
		}
	}
	return fams
}

// jobValue is the value of a job's series of a metric family (ok false when absent).
func jobValue(fams map[string]*dto.MetricFamily, name, job string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "job" && l.GetValue() == job {
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue(), true
				case m.Gauge != nil:
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// /metrics of a server running jobs of every plan shape — a filter, an interval join, a
// union, chained aggregation, a table function, materialized views over aggregation, nested
// aggregation, an interval join with GROUP BY and nested aggregation over it, session
// windows — answers and parses while they run, with some paused, after they are resumed
// and after a restart restores them; and the job counters go on across pause/resume and
// the restart instead of starting again from zero (docs/operations.md, "Metrics").
func TestMetricsEveryPlanShape(t *testing.T) {
	dir := t.TempDir()
	pgAddr, httpAddr, nsAddr, brAddr := freePort(t), freePort(t), freePort(t), freePort(t)
	bin := buildRsql(t)
	start := func() *proc {
		srv := startProc(t, bin, "server", "--data-dir", dir, "--pg-addr", pgAddr,
			"--namesrv-addr", nsAddr, "--broker-addr", brAddr, "--http-addr", httpAddr)
		waitListening(t, srv, pgAddr)
		waitListening(t, srv, httpAddr)
		return srv
	}
	srv := start()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	connect := func() *pgx.Conn {
		conn, err := pgx.Connect(ctx, "postgres://rsql@"+pgAddr+"/rsql?sslmode=disable")
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	conn := connect()
	run := func(s string) {
		t.Helper()
		if _, err := conn.Exec(ctx, s, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	const cols = "(order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP, tags VARCHAR, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (queues = 2)"
	run("CREATE STREAM orders " + cols)
	run("CREATE STREAM payments " + cols)
	const join = "orders o JOIN payments p ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '10' SECOND"
	// Each job with the streams it reads (1: orders, 2: orders and payments).
	shapes := []struct {
		name, ddl string
		reads     int
	}{
		{"filtered", "CREATE STREAM filtered AS SELECT order_id, amount FROM orders WHERE amount > 10", 1},
		{"joined", "CREATE STREAM joined AS SELECT o.order_id, o.amount, p.amount AS paid FROM " + join, 2},
		{"unioned", "CREATE STREAM unioned AS SELECT user_id, ts, amount FROM orders UNION ALL SELECT user_id, ts, amount FROM payments", 2},
		{"chained", `CREATE STREAM chained AS SELECT window_start, window_end, MAX(n) AS top, COUNT(*) AS users
			FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n FROM TUMBLE(orders, ts, INTERVAL '10' SECOND)
			GROUP BY user_id, window_start, window_end) x GROUP BY window_start, window_end`, 1},
		{"tagged", "CREATE STREAM tagged AS SELECT o.order_id, t.tag FROM orders AS o CROSS JOIN LATERAL string_to_table(o.tags, ',') AS t(tag)", 1},
		{"per_user", "CREATE MATERIALIZED VIEW per_user AS SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY user_id", 1},
		{"nested", "CREATE MATERIALIZED VIEW nested AS SELECT n, COUNT(*) AS users FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x GROUP BY n", 1},
		{"join_agg", "CREATE MATERIALIZED VIEW join_agg AS SELECT o.user_id, COUNT(*) AS n FROM " + join + " GROUP BY o.user_id", 2},
		// Two stages fed in process after the join: their splits read no topic.
		{"nested_join", "CREATE MATERIALIZED VIEW nested_join AS SELECT n, COUNT(*) AS users FROM (SELECT o.user_id, COUNT(*) AS n FROM " + join + " GROUP BY o.user_id) x GROUP BY n", 2},
		{"sessions", "CREATE MATERIALIZED VIEW sessions AS SELECT user_id, window_start, window_end, COUNT(*) AS n FROM SESSION(orders, ts, INTERVAL '20' SECOND) GROUP BY user_id, window_start, window_end", 1},
		// Fails for every seventh order (division by zero): bad records, logged as they happen.
		{"ratios", "CREATE STREAM ratios AS SELECT order_id, 100 / (order_id % 7) AS r FROM orders", 1},
	}
	for _, s := range shapes {
		run(s.ddl)
	}
	ids := map[string]string{} // shape name -> job id
	rows, err := conn.Query(ctx, "SHOW JOBS", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		id, stmt := fmt.Sprint(vals[0]), fmt.Sprint(vals[1])
		for _, s := range shapes {
			if strings.Contains(stmt, " "+s.name+" AS ") {
				ids[s.name] = id
			}
		}
	}
	rows.Close()
	if len(ids) != len(shapes) {
		t.Fatalf("SHOW JOBS names %d of the %d jobs: %v", len(ids), len(shapes), ids)
	}

	insert := func(from, n int) {
		t.Helper()
		var o, p []string
		for i := from; i < from+n; i++ {
			ts := fmt.Sprintf("2026-12-01 10:%02d:%02d", i/60, i%60)
			o = append(o, fmt.Sprintf("(%d, 'u%d', %d, '%s', 'a,b')", i, i%3, 5+i, ts))
			p = append(p, fmt.Sprintf("(%d, 'u%d', %d, '%s', '')", i, i%3, 5+i, ts))
		}
		run("INSERT INTO orders VALUES " + strings.Join(o, ", "))
		run("INSERT INTO payments VALUES " + strings.Join(p, ", "))
	}
	// waitCounts waits until every running job's records_in is what n records per stream
	// make; then until two more checkpoints committed, so the last one covers them.
	waitCounts := func(n int, running map[string]bool) map[string]*dto.MetricFamily {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		epochs := map[string]float64{}
		for {
			fams := scrapeParsed(t, httpAddr)
			done := true
			for _, s := range shapes {
				id := ids[s.name]
				if !running[id] {
					continue
				}
				v, _ := jobValue(fams, "rsql_job_records_in_total", id)
				if v > float64(n*s.reads) {
					t.Fatalf("%s (%s): records_in %v, want %d", s.name, id, v, n*s.reads)
				}
				ep, _ := jobValue(fams, "rsql_job_checkpoint_epoch", id)
				if v < float64(n*s.reads) {
					done = false
					epochs[id] = ep
				} else if ep < epochs[id]+2 {
					done = false
				}
			}
			if done {
				return fams
			}
			if time.Now().After(deadline) {
				t.Fatalf("jobs did not read %d records per stream and checkpoint:\n%s", n, grepLines(scrape(t, httpAddr), "rsql_job_records_in_total"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	all := map[string]bool{}
	for _, id := range ids {
		all[id] = true
	}

	insert(0, 20)
	fams := waitCounts(20, all)
	// Orders 0, 7 and 14 failed; the server logged them while the job runs, with the offset.
	if v, _ := jobValue(fams, "rsql_job_bad_records_total", ids["ratios"]); v != 3 {
		t.Errorf("ratios: %v bad records, want 3", v)
	}
	if log := srv.Stderr.String(); !regexp.MustCompile(`job ` + ids["ratios"] + `: bad record: stream orders, split \d, offset \d+: project: ERROR 22012: division by zero`).MatchString(log) {
		t.Errorf("the server did not log the bad records as they happened:\n%s", log)
	}

	// Paused jobs leave /metrics; the others stay, and it still parses.
	paused := []string{ids["joined"], ids["nested_join"], ids["chained"]}
	for _, id := range paused {
		run("PAUSE JOB " + id)
	}
	fams = scrapeParsed(t, httpAddr)
	for _, id := range paused {
		if _, ok := jobValue(fams, "rsql_job_records_in_total", id); ok {
			t.Errorf("paused job %s still in /metrics", id)
		}
	}
	for _, id := range paused {
		run("RESUME JOB " + id)
	}
	// Resumed, each goes on from its counters (20 or 40 records in), not from zero.
	deadline := time.Now().Add(60 * time.Second)
	for _, s := range shapes {
		id := ids[s.name]
		for {
			v, ok := jobValue(scrapeParsed(t, httpAddr), "rsql_job_records_in_total", id)
			if ok && v == float64(20*s.reads) {
				break
			}
			if ok && v != float64(20*s.reads) || time.Now().After(deadline) {
				t.Fatalf("after RESUME %s (%s): records_in %v (%v), want %d", s.name, id, v, ok, 20*s.reads)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	insert(20, 10)
	waitCounts(30, all)

	// A restart restores every job; the counters are where they were.
	conn.Close(context.Background())
	if err := srv.Stop(); err != nil {
		t.Fatalf("server: %v\n%s", err, srv.Stderr.String())
	}
	if strings.Contains(srv.Stderr.String(), "component=metrics") {
		t.Errorf("the server logged a metric that failed to collect:\n%s", srv.Stderr.String())
	}
	srv = start()
	conn = connect()
	defer conn.Close(context.Background())
	deadline = time.Now().Add(60 * time.Second)
	for _, s := range shapes {
		id := ids[s.name]
		for {
			v, ok := jobValue(scrapeParsed(t, httpAddr), "rsql_job_records_in_total", id)
			if ok && v == float64(30*s.reads) {
				break
			}
			if ok && v != float64(30*s.reads) || time.Now().After(deadline) {
				t.Fatalf("after the restart %s (%s): records_in %v (%v), want %d", s.name, id, v, ok, 30*s.reads)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	insert(30, 5)
	fams = waitCounts(35, all)
	// Every job reports where its splits read: the join stages both of their topics.
	for _, name := range []string{"joined", "nested_join"} {
		topics := map[string]bool{}
		for _, m := range fams["rsql_job_split_offset"].GetMetric() {
			lab := map[string]string{}
			for _, l := range m.GetLabel() {
				lab[l.GetName()] = l.GetValue()
			}
			if lab["job"] == ids[name] {
				topics[lab["stream"]] = true
			}
		}
		for _, want := range []string{"orders", "payments", ids[name] + "-0-shuffle", ids[name] + "-1-shuffle"} {
			if !topics[want] {
				t.Errorf("%s: no rsql_job_split_offset for %s (has %v)", name, want, topics)
			}
		}
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("server: %v", err)
	}
	if strings.Contains(srv.Stderr.String(), "component=metrics") {
		t.Errorf("the server logged a metric that failed to collect:\n%s", srv.Stderr.String())
	}
}
