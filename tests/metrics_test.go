package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// scrape fetches the server's /metrics text.
func scrape(t *testing.T, httpAddr string) string {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// metricValue finds the sample of name whose labels contain every one of labels.
func metricValue(text, name string, labels ...string) (float64, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(m[1], l)
		}
		if ok {
			v, err := strconv.ParseFloat(m[2], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// /metrics while a job runs: its input counter follows the records produced, the broker's
// per-topic offsets and the store size show up, and /healthz answers.
func TestMetricsDuringJob(t *testing.T) {
	pgAddr, httpAddr := freePort(t), freePort(t)
	srv := startProc(t, buildRsql(t), "server", "--data-dir", t.TempDir(), "--pg-addr", pgAddr,
		"--namesrv-addr", freePort(t), "--broker-addr", freePort(t), "--http-addr", httpAddr)
	waitListening(t, srv, pgAddr)
	waitListening(t, srv, httpAddr)

	resp, err := http.Get("http://" + httpAddr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v", err)
	}
	resp.Body.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+pgAddr+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range []string{
		"CREATE STREAM readings (sensor VARCHAR, v DOUBLE, ts TIMESTAMP) WITH (queues = 2)",
		"CREATE STREAM hot AS SELECT sensor, v FROM readings WHERE v > 50",
	} {
		if _, err := conn.Exec(ctx, s, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var job string
	if err := conn.QueryRow(ctx, "SHOW JOBS", pgx.QueryExecModeSimpleProtocol).Scan(&job, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil); err != nil {
		t.Fatalf("SHOW JOBS: %v", err)
	}
	jobLabel := `job="` + job + `"`

	// Produce in rounds; after each, the job's input counter must reach the records so far.
	waitCounter := func(atLeast float64) float64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			text := scrape(t, httpAddr)
			if v, ok := metricValue(text, "rsql_job_records_in_total", jobLabel); ok && v >= atLeast {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("rsql_job_records_in_total{%s} never reached %v:\n%s", jobLabel, atLeast, grepLines(text, "rsql_"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	prev := -1.0
	total := 0
	for round := 1; round <= 3; round++ {
		var vals []string
		for i := 0; i < 10*round; i++ {
			vals = append(vals, fmt.Sprintf("('s%d', %d, '2026-11-30T05:%02d:%02d Z')", i%3, 40+i, round, i))
		}
		stmt := strings.ReplaceAll("INSERT INTO readings VALUES "+strings.Join(vals, ", "), " Z'", "Z'")
		if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
		total += 10 * round
		v := waitCounter(float64(total))
		if v <= prev {
			t.Errorf("round %d: input counter %v did not increase from %v", round, v, prev)
		}
		prev = v
	}
	text := scrape(t, httpAddr)
	if v, ok := metricValue(text, "rsql_job_records_in_total", jobLabel); !ok || v != float64(total) {
		t.Errorf("records in = %v, want %d (each record once)", v, total)
	}
	if v, ok := metricValue(text, "rsql_broker_messages_appended_total", `topic="readings"`); !ok || v != float64(total) {
		t.Errorf("rsql_broker_messages_appended_total{topic=readings} = %v (%v), want %d", v, ok, total)
	}
	// The job pulled every record from the broker (and may have pulled its own output or
	// shuffle records too).
	if v, ok := metricValue(text, "rsql_broker_messages_consumed_total"); !ok || v < float64(total) {
		t.Errorf("rsql_broker_messages_consumed_total = %v (%v), want at least %d", v, ok, total)
	}
	if v, ok := metricValue(text, "rsql_store_size_bytes", `part="broker"`); !ok || v <= 0 {
		t.Errorf("rsql_store_size_bytes{part=broker} = %v (%v)", v, ok)
	}
	// The job reads JSON records, so bytes in exceed the records; it checkpoints every second.
	if v, ok := metricValue(text, "rsql_job_bytes_in_total", jobLabel); !ok || v < float64(10*total) {
		t.Errorf("rsql_job_bytes_in_total = %v (%v), want at least %d", v, ok, 10*total)
	}
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(200 * time.Millisecond) {
		if v, ok := metricValue(scrape(t, httpAddr), "rsql_job_checkpoints_total", jobLabel); ok && v > 0 {
			break
		}
	}
	text = scrape(t, httpAddr)
	if v, ok := metricValue(text, "rsql_job_checkpoint_size_bytes", jobLabel); !ok || v <= 0 {
		t.Errorf("rsql_job_checkpoint_size_bytes = %v (%v), want > 0", v, ok)
	}
	for _, name := range []string{"rsql_job_records_out_total", "rsql_job_bad_records_total", "rsql_job_late_records_total",
		"rsql_job_checkpoint_epoch", "rsql_job_split_offset", "rsql_job_bytes_out_total",
		"rsql_job_checkpoint_duration_seconds", "go_goroutines"} {
		if _, ok := metricValue(text, name); !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("server: %v", err)
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
