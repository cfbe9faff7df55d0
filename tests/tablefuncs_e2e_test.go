package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const splitTagsDDL = `CREATE FUNCTION split_tags(tags VARCHAR) RETURNS TABLE (tag VARCHAR, pos INT) LANGUAGE javascript AS $$
  if (tags === null) return [];
  return tags.split(',').map((t, i) => [t.trim(), i + 1]);
$$;
`

// Table functions from psql: a JavaScript table function created with dollar quoting, a
// push query joining a stream's rows with its rows, and a call with a wrong argument type
// reported with its SQLSTATE.
func TestTableFunctionsFromPsql(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatal("psql is needed (apt-get install postgresql-client)")
	}
	_, addr := startServer(t)
	script := filepath.Join(t.TempDir(), "ddl.sql")
	ddl := "CREATE STREAM tagged (id BIGINT, tags VARCHAR) WITH (queues = 1);\n" +
		"INSERT INTO tagged VALUES (1, 'a, b'), (2, 'c'), (3, NULL), (4, 'd,e');\n" + splitTagsDDL
	if err := os.WriteFile(script, []byte(ddl), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := psqlCmd(addr, "-f", script).CombinedOutput(); err != nil {
		t.Fatalf("psql -f: %v\n%s", err, out)
	}
	push := psqlCmd(addr, "-A", "-t", "-c", "SET offset_reset = 'earliest'", "-c",
		"SELECT t.id, s.tag, s.pos FROM tagged AS t CROSS JOIN LATERAL split_tags(t.tags) AS s LIMIT 5")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = push.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		push.Process.Kill()
		t.Fatal("the push query did not return its five rows")
	}
	if err != nil {
		t.Fatalf("push query: %v\n%s", err, out)
	}
	if got, want := string(out), "SET\n1|a|1\n1|b|2\n2|c|1\n4|d|1\n4|e|2\n"; got != want {
		t.Errorf("psql printed %q, want %q", got, want)
	}
	bad, _ := psqlCmd(addr, "-v", "VERBOSITY=verbose", "-c", "SELECT * FROM tagged CROSS JOIN LATERAL split_tags(id) AS s").CombinedOutput()
	if !strings.Contains(string(bad), "42883") || !strings.Contains(string(bad), "split_tags(bigint)") && !strings.Contains(string(bad), "split_tags(BIGINT)") {
		t.Errorf("a wrong argument type: %s", bad)
	}
}

// `rsql -f` runs a script with a built-in and a JavaScript table function over a file and
// returns once the bounded jobs wrote their rows.
func TestTableFunctionsFromRunFile(t *testing.T) {
	dir := t.TempDir()
	in := "{\"id\": 1, \"tags\": \"x,y,z\"}\n{\"id\": 2, \"tags\": \"\"}\n{\"id\": 3, \"tags\": \"w\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "CREATE STREAM src (id BIGINT, tags VARCHAR) WITH (connector = 'file', path = 'in.jsonl');\n" + splitTagsDDL +
		"CREATE STREAM builtin WITH (connector = 'file', path = 'out/builtin.jsonl') AS\n" +
		"  SELECT s.id, t.tag FROM src AS s CROSS JOIN LATERAL string_to_table(s.tags, ',') AS t(tag);\n" +
		"CREATE STREAM js WITH (connector = 'file', path = 'out/js.jsonl') AS\n" +
		"  SELECT s.id, t.tag, t.pos FROM src AS s LEFT JOIN LATERAL split_tags(s.tags) AS t ON TRUE;\n"
	if err := os.WriteFile(filepath.Join(dir, "p.sql"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildRsql(t), "-f", "p.sql")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rsql -f: %v\n%s", err, out)
	}
	rows := func(name string, cols ...string) []string {
		var out []string
		for _, r := range readJSONLines(t, filepath.Join(dir, "out", name)) {
			var parts []string
			for _, c := range cols {
				parts = append(parts, canonNumber(r[c]))
			}
			out = append(out, strings.Join(parts, " "))
		}
		return out
	}
	// STRING_TO_TABLE of '' gives no rows; split_tags('') gives one empty tag.
	if got, want := strings.Join(rows("builtin.jsonl", "id", "tag"), "|"), "1 x|1 y|1 z|3 w"; got != want {
		t.Errorf("builtin: %q, want %q", got, want)
	}
	if got, want := strings.Join(rows("js.jsonl", "id", "tag", "pos"), "|"), "1 x 1|1 y 2|1 z 3|2  1|3 w 1"; got != want {
		t.Errorf("js: %q, want %q", got, want)
	}
}
