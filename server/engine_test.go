package server

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"rsql/connectors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"rsql/broker"
	"rsql/exec"
	"rsql/sql"
)

// testEngine is an engine on dir with an in-process broker (nil: none).
type testEngine struct {
	t    *testing.T
	dir  string
	b    *broker.Broker
	e    *Engine
	sess *Session
	log  strings.Builder
}

func newTestEngine(t *testing.T, withBroker bool) *testEngine {
	t.Helper()
	te := &testEngine{t: t, dir: t.TempDir(), sess: NewSession()}
	if withBroker {
		b, err := broker.Open(broker.Config{Dir: filepath.Join(te.dir, "broker")})
		if err != nil {
			t.Fatal(err)
		}
		te.b = b
		t.Cleanup(func() { b.Close() })
	}
	te.open()
	return te
}

func (te *testEngine) open() {
	te.t.Helper()
	// The tests' files live in the engine's directory, which is their file root.
	cfg := Config{DataDir: te.dir, StateBackend: "rocksdb", Log: io.Discard, FileRoots: []string{te.dir}}
	if te.b != nil {
		cfg.Broker = te.b
	}
	e, err := Open(cfg)
	if err != nil {
		te.t.Fatal(err)
	}
	te.e = e
	te.t.Cleanup(func() { e.Close() })
}

// path is a file in the engine's directory.
func (te *testEngine) path(name string) string { return filepath.Join(te.dir, name) }

// exec runs text and returns its results with their rows read.
func (te *testEngine) exec(text string) ([]*Result, [][][]string, error) {
	te.t.Helper()
	res, err := te.e.Execute(context.Background(), te.sess, text, nil)
	var rows [][][]string
	for _, r := range res {
		var rr [][]string
		if r.Rows != nil {
			for {
				row, rerr := r.Rows.Next(context.Background())
				if rerr != nil {
					if !errors.Is(rerr, io.EOF) && err == nil {
						err = rerr // the statement failed while its rows were read
					}
					break
				}
				cells := make([]string, len(row))
				for i, v := range row {
					if v.IsNull() {
						cells[i] = "NULL"
					} else {
						cells[i] = v.String()
					}
				}
				rr = append(rr, cells)
			}
			r.Rows.Close()
		}
		rows = append(rows, rr)
	}
	return res, rows, err
}

func (te *testEngine) mustExec(text string) ([]*Result, [][][]string) {
	te.t.Helper()
	res, rows, err := te.exec(text)
	if err != nil {
		te.t.Fatalf("%s: %v", text, err)
	}
	return res, rows
}

// wantCode fails unless text fails with SQLSTATE code and a message holding every one of
// parts.
func (te *testEngine) wantCode(text, code string, parts ...string) {
	te.t.Helper()
	_, _, err := te.exec(text)
	var se *sql.Error
	if !errors.As(err, &se) || se.Code != code {
		te.t.Fatalf("%s: got %v, want SQLSTATE %s", text, err, code)
	}
	for _, p := range parts {
		if !strings.Contains(se.Message, p) {
			te.t.Errorf("%s: message %q lacks %q", text, se.Message, p)
		}
	}
}

// jobStates returns SHOW JOBS as id -> state.
func (te *testEngine) jobStates() map[string]string {
	te.t.Helper()
	_, rows := te.mustExec("SHOW JOBS")
	out := map[string]string{}
	for _, r := range rows[0] {
		out[r[0]] = r[2]
	}
	return out
}

func (te *testEngine) waitJobs() {
	te.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := te.e.WaitJobs(ctx); err != nil {
		te.t.Fatalf("jobs did not end: %v", err)
	}
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ordersFile(t *testing.T, te *testEngine) {
	writeLines(t, te.path("orders.jsonl"),
		`{"id": 1, "user": "u1", "amount": 5}`,
		`{"id": 2, "user": "u2", "amount": 7}`,
		`{"id": 3, "user": "u1", "amount": 11}`)
	te.mustExec("CREATE STREAM orders (id BIGINT, user VARCHAR, amount BIGINT) WITH (connector = 'file', path = '" + te.path("orders.jsonl") + "')")
}

// CREATE OR REPLACE STREAM replaces the definition and its job; IF NOT EXISTS keeps what
// is there with a notice; a plain CREATE of a taken name fails.
func TestCreateOrReplaceStream(t *testing.T) {
	te := newTestEngine(t, true)
	ordersFile(t, te)
	out := te.path("big.jsonl")
	res, _ := te.mustExec("CREATE STREAM big WITH (connector = 'file', path = '" + out + "') AS SELECT id FROM orders WHERE amount > 6")
	if n := res[0].Notice; n == nil || !strings.Contains(n.Message, "started job job-1") {
		t.Errorf("CREATE STREAM AS notice: %+v", n)
	}
	te.waitJobs()
	if got := strings.Join(readLines(t, out), " "); got != `{"id":2} {"id":3}` {
		t.Fatalf("first definition wrote %s", got)
	}

	te.wantCode("CREATE STREAM big AS SELECT id FROM orders", "42710", "OR REPLACE")
	res, _ = te.mustExec("CREATE STREAM IF NOT EXISTS big AS SELECT id FROM orders")
	if n := res[0].Notice; res[0].Tag != "CREATE STREAM" || n == nil || n.Code != "42P07" || !strings.Contains(n.Message, `"big" already exists, skipping`) {
		t.Errorf("IF NOT EXISTS: tag %q notice %+v", res[0].Tag, n)
	}
	if st := te.jobStates(); len(st) != 1 {
		t.Fatalf("IF NOT EXISTS started a job: %v", st)
	}

	res, _ = te.mustExec("CREATE OR REPLACE STREAM big WITH (connector = 'file', path = '" + out + "') AS SELECT id, amount FROM orders WHERE amount > 10")
	if res[0].Tag != "CREATE STREAM" || res[0].Notice == nil || !strings.Contains(res[0].Notice.Message, "job-2") {
		t.Errorf("OR REPLACE: tag %q notice %+v", res[0].Tag, res[0].Notice)
	}
	te.waitJobs()
	if got := strings.Join(readLines(t, out), " "); got != `{"id":3,"amount":11}` {
		t.Errorf("after OR REPLACE the file holds %s, want only the new definition's output", got)
	}
	if _, rows := te.mustExec("DESCRIBE big"); len(rows[0]) != 2 {
		t.Errorf("DESCRIBE big after OR REPLACE: %v, want columns id and amount", rows[0])
	}

	// A stream another job reads is not replaced; nor is a view by a stream.
	te.mustExec("CREATE STREAM src (a BIGINT) WITH (queues = 1)")
	te.mustExec("CREATE STREAM sink1 (a BIGINT) WITH (queues = 1)")
	te.mustExec("INSERT INTO sink1 SELECT a FROM src")
	te.wantCode("CREATE OR REPLACE STREAM src (a BIGINT, b VARCHAR)", "55006", "job-3 reads it", "TERMINATE JOB job-3")
	te.wantCode("CREATE OR REPLACE STREAM sink1 (a BIGINT)", "55006", "job-3 writes it")
	te.mustExec("CREATE MATERIALIZED VIEW v AS SELECT a, COUNT(*) AS n FROM src GROUP BY a")
	te.wantCode("CREATE OR REPLACE STREAM v (a BIGINT)", "42809")
	te.wantCode("CREATE OR REPLACE STREAM big AS SELECT id FROM big", "0A000", "itself")
	// Once the reader is gone, the source stream is replaced.
	te.mustExec("TERMINATE JOB job-3")
	te.mustExec("DROP VIEW v")
	te.mustExec("CREATE OR REPLACE STREAM src (a BIGINT, b VARCHAR) WITH (queues = 1)")
	if _, rows := te.mustExec("DESCRIBE src"); len(rows[0]) != 2 {
		t.Errorf("DESCRIBE src after OR REPLACE: %v", rows[0])
	}
}

// The file-sink rule of docs/sql.md: a defining job's bounded output replaces the file
// (running a pipeline twice does not double it), an INSERT INTO job appends, a job started
// again continues its file exactly once, and a file has one writer.
func TestFileSinkRules(t *testing.T) {
	te := newTestEngine(t, true)
	ordersFile(t, te)
	out := te.path("totals.jsonl")
	writeLines(t, out, `{"stale":"output of an earlier run"}`)
	pipeline := "CREATE OR REPLACE STREAM totals WITH (connector = 'file', path = '" + out + "') AS SELECT user, COUNT(*) AS n FROM orders GROUP BY user EMIT CHANGES"
	// The changes of a key within one checkpoint epoch are folded to its last (docs/sql.md,
	// "Changelogs"): u1's count of 1 is replaced by its count of 2, in u1's place.
	want := []string{`{"user":"u1","n":2}`, `{"user":"u2","n":1}`}
	for run := 1; run <= 2; run++ {
		te.mustExec(pipeline)
		te.waitJobs()
		if got := readLines(t, out); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("run %d: %s holds %q, want %q", run, out, got, want)
		}
	}
	if tmp, _ := filepath.Glob(te.path(".totals.jsonl.*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}

	// INSERT INTO appends.
	te.mustExec("CREATE STREAM ids (id BIGINT) WITH (connector = 'file', path = '" + te.path("ids.jsonl") + "')")
	for i := 0; i < 2; i++ {
		res, _ := te.mustExec("INSERT INTO ids SELECT id FROM orders")
		if res[0].Tag != "INSERT 0 0" || res[0].Notice == nil || !strings.Contains(res[0].Notice.Message, "started job") {
			t.Errorf("INSERT INTO ... SELECT: tag %q notice %+v", res[0].Tag, res[0].Notice)
		}
		te.waitJobs()
	}
	if got := readLines(t, te.path("ids.jsonl")); len(got) != 6 {
		t.Errorf("two INSERT jobs wrote %d lines, want 6: %q", len(got), got)
	}

	// An unbounded job: its output survives a restart of rsql exactly once.
	te.mustExec("CREATE STREAM ev (id BIGINT) WITH (queues = 2)")
	live := te.path("live.jsonl")
	writeLines(t, live, "stale")
	te.mustExec("CREATE STREAM live WITH (connector = 'file', path = '" + live + "', checkpoint_interval = '50ms') AS SELECT id FROM ev")
	te.mustExec("SET offset_reset = 'earliest'")
	te.mustExec("INSERT INTO ev VALUES (1), (2), (3)")
	waitFor(t, "the first rows in the live file", func() bool { return len(readLines(t, live)) == 3 })
	// A second writer of the same file is refused while the job runs.
	te.wantCode("INSERT INTO live VALUES (9)", "55006", "one writer")
	te.mustExec("CREATE STREAM live2 (id BIGINT) WITH (connector = 'file', path = '" + live + "')")
	te.wantCode("INSERT INTO live2 SELECT id FROM ev", "55006", "one writer")
	if err := te.e.Close(); err != nil {
		t.Fatal(err)
	}
	te.open()
	te.mustExec("INSERT INTO ev VALUES (4), (5)")
	waitFor(t, "all rows in the live file", func() bool { return len(readLines(t, live)) >= 5 })
	time.Sleep(200 * time.Millisecond)
	got := readLines(t, live)
	sort.Strings(got)
	if strings.Join(got, " ") != `{"id":1} {"id":2} {"id":3} {"id":4} {"id":5}` {
		t.Errorf("after a restart the live file holds %q, want each row once and not the stale line", got)
	}
}

// SET checks names and values (values case-insensitively) and lists what is allowed.
func TestSetValidation(t *testing.T) {
	te := newTestEngine(t, false)
	te.mustExec("SET offset_reset = 'Earliest'")
	if _, rows := te.mustExec("SHOW offset_reset"); rows[0][0][0] != "earliest" {
		t.Errorf("SHOW offset_reset = %v", rows[0])
	}
	te.wantCode("SET offset_reset = 'bogus'", "22023", `"bogus"`, "earliest or latest")
	te.wantCode("SET offset_rest = 'earliest'", "22023", `"offset_rest"`, "offset_reset", "client_encoding")
	te.wantCode("SHOW nope", "22023", "offset_reset")
	te.mustExec("SET client_encoding TO 'utf-8'; SET DateStyle = 'ISO, MDY'; SET extra_float_digits = 3; SET application_name = 'psql'")
	te.wantCode("SET client_encoding = 'LATIN1'", "22023", "UTF8")
	_, rows := te.mustExec("SHOW ALL")
	got := map[string]string{}
	for _, r := range rows[0] {
		got[r[0]] = r[1]
	}
	if got["offset_reset"] != "earliest" || got["client_encoding"] != "UTF8" || got["timezone"] != "UTC" || len(got) != len(settings) {
		t.Errorf("SHOW ALL = %v", got)
	}
}

// BEGIN, COMMIT and ROLLBACK succeed with a notice that there are no transactions.
func TestTransactionStatements(t *testing.T) {
	te := newTestEngine(t, false)
	for _, c := range []struct{ stmt, tag, severity string }{
		{"BEGIN", "BEGIN", "NOTICE"},
		{"START TRANSACTION ISOLATION LEVEL SERIALIZABLE", "BEGIN", "NOTICE"},
		{"COMMIT", "COMMIT", "NOTICE"},
		{"END", "COMMIT", "NOTICE"},
		{"ROLLBACK", "ROLLBACK", "WARNING"},
	} {
		res, _ := te.mustExec(c.stmt)
		if res[0].Tag != c.tag || res[0].Notice == nil || res[0].Notice.Severity != c.severity || !strings.Contains(res[0].Notice.Message, "no transactions") {
			t.Errorf("%s: tag %q notice %+v", c.stmt, res[0].Tag, res[0].Notice)
		}
	}
}

// EXPLAIN of a statement that starts a job ends in that job's sink.
func TestExplainShowsSink(t *testing.T) {
	te := newTestEngine(t, true)
	ordersFile(t, te)
	te.mustExec("CREATE STREAM out (id BIGINT) WITH (queues = 1)")
	for _, c := range []struct{ stmt, sink string }{
		{"EXPLAIN CREATE STREAM x AS SELECT id FROM orders", "Sink x connector=broker"},
		{"EXPLAIN INSERT INTO out SELECT id FROM orders", "Sink out connector=broker"},
		{"EXPLAIN SELECT id FROM orders", "Sink client"},
	} {
		_, rows := te.mustExec(c.stmt)
		var text []string
		for _, r := range rows[0] {
			text = append(text, r[0])
		}
		if !strings.Contains(strings.Join(text, "\n"), c.sink) {
			t.Errorf("%s:\n%s\nwant %q", c.stmt, strings.Join(text, "\n"), c.sink)
		}
	}
}

// Topic names follow the broker's rule, and its own names are refused, with 42602.
func TestTopicNames(t *testing.T) {
	te := newTestEngine(t, true)
	for _, stmt := range []string{
		`CREATE STREAM "%RETRY%x" (a BIGINT)`,
		`CREATE STREAM "%DLQ%g" (a BIGINT)`,
		`CREATE STREAM "has space" (a BIGINT)`,
		`CREATE STREAM ok1 (a BIGINT) WITH (topic = 'a/b')`,
		`CREATE STREAM ok2 (a BIGINT) WITH (topic = 'TBW102')`,
		`CREATE STREAM ok3 (a BIGINT) WITH (dlq_topic = '%RETRY%g')`,
		`CREATE STREAM "` + strings.Repeat("x", 128) + `" (a BIGINT)`,
		`CREATE STREAM ok4 AS SELECT 1`, // not a topic error: checked last
	} {
		_, _, err := te.exec(stmt)
		var se *sql.Error
		if !errors.As(err, &se) {
			t.Errorf("%s: %v", stmt, err)
			continue
		}
		if stmt == `CREATE STREAM ok4 AS SELECT 1` {
			continue
		}
		if se.Code != sql.CodeInvalidName || !strings.Contains(se.Message, "topic") {
			t.Errorf("%s: %s %s, want 42602 with the rule", stmt, se.Code, se.Message)
		}
	}
	te.mustExec(`CREATE STREAM "Ok_Name-1|x%" (a BIGINT)`)
	// A file stream has no topic: any name.
	te.mustExec(`CREATE STREAM "a file stream" (a BIGINT) WITH (connector = 'file', path = '` + te.path("f.jsonl") + `')`)
}

// The unknown-option error lists every option there is; a bad value in INSERT ... VALUES
// gets PostgreSQL's code.
func TestOptionsAndValueErrors(t *testing.T) {
	te := newTestEngine(t, true)
	te.wantCode("CREATE STREAM s (a BIGINT) WITH (colour = 'red')", "22023", append(append([]string(nil), connectors.CommonOptions...), "path")...)
	te.wantCode("CREATE STREAM p (a BIGINT, b INT) WITH (key = 'a, c')", "42703", `no column "c"`)
	te.mustExec("CREATE STREAM p (a BIGINT, b INT) WITH (partitioned_by = 'b,a')")
	te.mustExec("CREATE STREAM s (a BIGINT, b INT) WITH (queues = 1)")
	te.wantCode("INSERT INTO s VALUES ('x', 1)", "22P02", "row 1, column a")
	te.wantCode("INSERT INTO s VALUES (1, 99999999999)", "22003", "column b")
}

// SHOW JOBS keeps a finished job's counters.
func TestShowJobsKeepsFinishedCounters(t *testing.T) {
	te := newTestEngine(t, false)
	ordersFile(t, te)
	te.mustExec("CREATE STREAM big WITH (connector = 'file', path = '" + te.path("big.jsonl") + "') AS SELECT id FROM orders WHERE amount > 6")
	te.waitJobs()
	_, rows := te.mustExec("SHOW JOBS")
	r := rows[0][0]
	if r[2] != "FINISHED" || r[4] != "3" || r[5] != "2" || r[9] != "0" || r[10] != "0" {
		t.Errorf("SHOW JOBS of a finished job: %q, want FINISHED with records_in 3, records_out 2, late 0, bad 0", r)
	}
	// They survive a restart.
	te.e.Close()
	te.open()
	_, rows = te.mustExec("SHOW JOBS")
	if r := rows[0][0]; r[4] != "3" || r[5] != "2" {
		t.Errorf("SHOW JOBS after a restart: %q", r)
	}
}

// topicMessages returns every message of topic on the in-process broker.
func (te *testEngine) topicMessages(topic string) []broker.Message {
	te.t.Helper()
	ti, ok := te.b.Topic(topic)
	if !ok {
		return nil
	}
	var out []broker.Message
	for q := 0; q < ti.Queues; q++ {
		for off := int64(0); ; {
			msgs, next, err := te.b.Pull(context.Background(), topic, q, off, 256, 0)
			if err != nil {
				te.t.Fatal(err)
			}
			out = append(out, msgs...)
			if len(msgs) == 0 || next <= off {
				break
			}
			off = next
		}
	}
	return out
}

// Several jobs (and a job started again) reading a stream with bad records leave one
// dead-letter copy of each bad record, with an id naming the stream, split and offset.
func TestDeadLetterOncePerRecord(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (id BIGINT) WITH (queues = 2, dlq_topic = 'ev_dlq')")
	var good, bad []broker.Message
	for i := 0; i < 10; i++ {
		bad = append(bad, broker.Message{Body: []byte(`{"id": "bad` + string(rune('a'+i)) + `"}`)})
		good = append(good, broker.Message{Body: []byte(`{"id": 1}`)})
	}
	for q := 0; q < 2; q++ {
		if _, err := te.b.Append("ev", q, append(append([]broker.Message(nil), good[:5]...), bad[q*5:q*5+5]...)); err != nil {
			t.Fatal(err)
		}
	}
	te.mustExec("CREATE STREAM a (id BIGINT) WITH (queues = 1)")
	te.mustExec("CREATE STREAM b (id BIGINT) WITH (queues = 1)")
	te.mustExec("INSERT INTO a SELECT id FROM ev")
	te.mustExec("INSERT INTO b SELECT id FROM ev")
	badOf := func(job string) string {
		_, rows := te.mustExec("SHOW JOBS")
		for _, r := range rows[0] {
			if r[0] == job {
				return r[10]
			}
		}
		return ""
	}
	waitFor(t, "both jobs to see the bad records", func() bool { return badOf("job-1") == "10" && badOf("job-2") == "10" })
	check := func(when string) {
		t.Helper()
		msgs := te.topicMessages("ev_dlq")
		ids := map[string]bool{}
		for _, m := range msgs {
			id := m.Properties["RSQL_ID"]
			if !strings.HasPrefix(id, "ev/") || ids[id] {
				t.Fatalf("%s: dead-letter message with id %q (seen before: %v)", when, id, ids[id])
			}
			ids[id] = true
		}
		if len(msgs) != 10 || !ids["ev/0/5"] || !ids["ev/1/9"] {
			t.Fatalf("%s: %d dead-letter messages with ids %v, want the 10 bad records once", when, len(msgs), ids)
		}
	}
	check("two jobs")
	// A new job reads the stream from its start again; so does one after a restart, when
	// the ids are read back from the topic.
	te.mustExec("CREATE STREAM c AS SELECT id FROM ev")
	waitFor(t, "the third job", func() bool { return badOf("job-3") == "10" })
	check("three jobs")
	te.e.Close()
	te.open()
	te.mustExec("CREATE STREAM d AS SELECT id FROM ev")
	waitFor(t, "the fourth job", func() bool { return badOf("job-4") == "10" })
	check("after a restart")
}

// On a single server SHOW UNITS lists each unit (stage, split) of a running job as this
// server's, and SHOW JOBS names them; a stage reading a shuffle topic has units too.
func TestShowUnitsSingleServer(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM src (a BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (queues = 2)")
	te.mustExec("CREATE STREAM sink1 (a BIGINT, n BIGINT) WITH (queues = 1)")
	te.mustExec("INSERT INTO sink1 SELECT a, COUNT(*) AS n FROM TUMBLE(src, ts, INTERVAL '1' SECOND) GROUP BY a, window_start")
	var units []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, rows := te.mustExec("SHOW UNITS")
		units = units[:0]
		for _, r := range rows[0] {
			if r[0] != "job-1" || r[4] != "this server" || r[6] != "true" {
				t.Fatalf("SHOW UNITS row %q: want job-1's units on this server", r)
			}
			units = append(units, r[1])
		}
		if len(units) >= 6 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The source stage's two queues, the aggregation stage's shuffle queues.
	want := []string{"0/0", "0/1"}
	for q := 0; q < exec.DefaultExchangeQueues; q++ {
		want = append(want, "1/"+strconv.Itoa(q))
	}
	if !slices.Equal(units, want) {
		t.Fatalf("SHOW UNITS: units %v, want %v", units, want)
	}
	_, rows := te.mustExec("SHOW JOBS")
	if got := rows[0][0][12]; got != "this server: "+strings.Join(units, " ") {
		t.Errorf("SHOW JOBS units: %q, want this server with %v", got, units)
	}
}
