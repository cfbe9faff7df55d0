package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runRsqlIn runs the rsql binary in dir and returns its combined output and exit code.
func runRsqlIn(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(buildRsql(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("rsql %v: %v", args, err)
	}
	return string(out), 0
}

// Bad records are counted, named by line, sent to the dead-letter file, and the job goes on.
func TestBadRecordsGoToDeadLetterFile(t *testing.T) {
	dir := t.TempDir()
	input := strings.Join([]string{
		`{"id": 1, "v": 1.5, "ts": "2026-11-30T05:00:00Z"}`,
		`{"id": "two", "v": 2.5, "ts": "2026-11-30T05:00:01Z"}`, // wrong type
		`{"id": 3, "v": 3.5, "ts": "2026-11-30T05:00:02Z"`,      // malformed
		`{"id": 4, "v": 4.5}`,                                   // missing timestamp
		`{"id": 5, "v": 5.5, "ts": 1796014803000}`,
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `CREATE STREAM s (id BIGINT, v DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = 'in.jsonl', dlq_path = 'dlq.jsonl');
CREATE STREAM o WITH (connector = 'file', path = 'out.jsonl') AS SELECT id, v FROM s;`
	out, code := runRsqlIn(t, dir, "-c", script, "--data-dir", "data")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"bad=3", "line 2", "line 3", "line 4"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	got := readJSONLines(t, filepath.Join(dir, "out.jsonl"))
	if len(got) != 2 || canonNumber(got[0]["id"]) != "1" || canonNumber(got[1]["id"]) != "5" {
		t.Errorf("good records in the output: %v, want ids 1 and 5", got)
	}
	dlq, err := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(dlq)), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"two"`) {
		t.Errorf("dead-letter file holds %q, want the 3 bad records as they were", lines)
	}
}

// A syntax error names line and column, exits 1, and creates nothing: the earlier
// statements of the same text are not run either.
func TestBadSQLCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	script := "CREATE STREAM a (x BIGINT) WITH (connector = 'file', path = 'a.jsonl');\nSELECT x,\n  FROM a WHERE;\n"
	out, code := runRsqlIn(t, dir, "-c", script, "--data-dir", "data")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "42601") || !strings.Contains(out, "line 3, column 3") {
		t.Errorf("error does not give the SQLSTATE and line 3, column 3:\n%s", out)
	}
	out, code = runRsqlIn(t, dir, "-c", "DESCRIBE a", "--data-dir", "data")
	if code != 1 || !strings.Contains(out, "42P01") {
		t.Errorf("stream a exists after a failed script (exit %d):\n%s", code, out)
	}
	// Unknown column in a continuous query: no stream and no job are left behind.
	setup := "CREATE STREAM b (x BIGINT) WITH (connector = 'file', path = 'b.jsonl');"
	if out, code := runRsqlIn(t, dir, "-c", setup, "--data-dir", "data"); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = runRsqlIn(t, dir, "-c", "CREATE STREAM c WITH (connector = 'file', path = 'c.jsonl') AS SELECT y FROM b;", "--data-dir", "data")
	if code != 1 || !strings.Contains(out, "42703") {
		t.Errorf("unknown column: exit %d, want 1 with 42703:\n%s", code, out)
	}
	out, _ = runRsqlIn(t, dir, "-c", "SHOW STREAMS; SHOW JOBS;", "--data-dir", "data", "--format", "json")
	if strings.Contains(out, `"c"`) || strings.Contains(out, "job-") {
		t.Errorf("a failed CREATE left a stream or job behind:\n%s", out)
	}
}

// A value that cannot be represented (a DOUBLE overflow, a timestamp before year 1, an
// infinity the JSON sink cannot write) is an error of its row, as in PostgreSQL: the row
// goes to the stream's dead-letter file with its SQLSTATE, the other rows are written, and
// the bounded run succeeds.
func TestUnrepresentableValuesAreBadRows(t *testing.T) {
	dir := t.TempDir()
	input := strings.Join([]string{
		`{"id": 1, "v": 2, "ts": "2026-11-30T05:00:00Z"}`,
		`{"id": 2, "v": 1e300, "ts": "2026-11-30T05:00:01Z"}`, // v * v overflows
		`{"id": 3, "v": 3, "ts": "0001-01-01T00:00:00Z"}`,     // ts - 2 days is before year 1
		`{"id": 4, "v": -1, "ts": "2026-11-30T05:00:02Z"}`,    // the sink cannot write Infinity
		`{"id": 5, "v": 5, "ts": "2026-11-30T05:00:03Z"}`,
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `CREATE STREAM s (id BIGINT, v DOUBLE, ts TIMESTAMP) WITH (connector = 'file', path = 'in.jsonl', dlq_path = 'dlq.jsonl');
CREATE STREAM o WITH (connector = 'file', path = 'out.jsonl') AS
SELECT id, v * v AS sq, ts - INTERVAL '2' DAY AS before,
       CASE WHEN v < 0 THEN CAST('Infinity' AS DOUBLE PRECISION) ELSE v END AS w FROM s;`
	out, code := runRsqlIn(t, dir, "-c", script, "--data-dir", "data")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	got := readJSONLines(t, filepath.Join(dir, "out.jsonl"))
	if len(got) != 2 || canonNumber(got[0]["id"]) != "1" || canonNumber(got[1]["id"]) != "5" {
		t.Fatalf("output %v, want ids 1 and 5", got)
	}
	dlq := readJSONLines(t, filepath.Join(dir, "dlq.jsonl"))
	if len(dlq) != 3 {
		t.Fatalf("dead letters %v, want 3", dlq)
	}
	codes := map[string]bool{}
	for _, d := range dlq {
		e, _ := d["error"].(map[string]any)
		codes[fmt.Sprint(e["code"])] = true
	}
	for _, c := range []string{"22003", "22008"} {
		if !codes[c] {
			t.Errorf("no dead letter with SQLSTATE %s: %v", c, dlq)
		}
	}
}

// `rsql -f` without --server runs in an engine of its own even when a server answers on
// --pg-addr: the server's catalog does not change, relative paths are the client's, and
// the command returns once its bounded job has written everything. A stream on the broker
// fails with a message that names --server.
func TestRunFileIgnoresRunningServer(t *testing.T) {
	_, pgAddr := startServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte("{\"a\": 1}\n{\"a\": 2}\n{\"a\": 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "CREATE STREAM src (a BIGINT) WITH (connector = 'file', path = 'in.jsonl');\n" +
		"CREATE STREAM dst WITH (connector = 'file', path = 'out/dst.jsonl') AS SELECT a * 10 AS b FROM src;\n"
	if err := os.WriteFile(filepath.Join(dir, "p.sql"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildRsql(t), "-f", "p.sql")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RSQL_PG_ADDR="+pgAddr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rsql -f: %v\n%s", err, out)
	}
	got := readJSONLines(t, filepath.Join(dir, "out", "dst.jsonl"))
	if len(got) != 3 || canonNumber(got[2]["b"]) != "30" {
		t.Errorf("when rsql -f returned, out/dst.jsonl held %v", got)
	}
	show, errOut, err := runRsql(t, "", "--server", pgAddr, "--format", "json", "-c", "SHOW STREAMS")
	if err != nil || strings.TrimSpace(show) != "" {
		t.Errorf("the running server's catalog after rsql -f: %q (err %v, %s)", show, err, errOut)
	}
	cmd = exec.Command(buildRsql(t), "-c", "CREATE STREAM t (a BIGINT)")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RSQL_PG_ADDR="+pgAddr)
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--server") {
		t.Errorf("a broker stream in rsql -c without --server: %v\n%s", err, out)
	}
}
