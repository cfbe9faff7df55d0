package server

import (
	"os"
	"strings"
	"testing"
)

// A view created before result columns took PostgreSQL's names (its catalog entry names a
// column "COUNT(*)") keeps its stored names after an upgrade: its job starts again from its
// statement, whose query now names the column count, and writes the columns by position;
// pull queries read the stored names (docs/operations.md, "Upgrading"). A new view over
// the same query takes the new names.
func TestViewKeepsStoredNamesAcrossUpgrade(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (k VARCHAR, v INT) WITH (queues = 1)")
	te.mustExec("SET offset_reset = 'earliest'")
	te.mustExec("INSERT INTO ev VALUES ('a', 1), ('a', 2), ('b', 3)")
	te.mustExec("CREATE MATERIALIZED VIEW per_k AS SELECT k, COUNT(*), SUM(v) FROM ev GROUP BY k")
	waitFor(t, "the view's rows", func() bool {
		_, rows, err := te.exec("SELECT * FROM per_k")
		return err == nil && len(rows[0]) == 2
	})
	res, _ := te.mustExec("SELECT * FROM per_k")
	if got := strings.Join(res[0].Columns.Names(), ","); got != "k,count,sum" {
		t.Fatalf("the new view's columns: %s", got)
	}
	// What the catalog of an older release holds: the names as the query's text.
	te.rewriteCatalog(func(data string) string {
		return strings.Replace(strings.Replace(data, `"name": "count"`, `"name": "COUNT(*)"`, 1), `"name": "sum"`, `"name": "SUM(v)"`, 1)
	})
	te.open()
	te.mustExec("INSERT INTO ev VALUES ('b', 4)")
	waitFor(t, "the view's job to go on after the restart", func() bool {
		_, rows, err := te.exec(`SELECT "COUNT(*)", "SUM(v)" FROM per_k WHERE k = 'b'`)
		return err == nil && len(rows[0]) == 1 && strings.Join(rows[0][0], ",") == "2,7"
	})
	res, rows := te.mustExec("SELECT * FROM per_k ORDER BY k")
	if got := strings.Join(res[0].Columns.Names(), ","); got != "k,COUNT(*),SUM(v)" {
		t.Errorf("after the upgrade the view's columns are %s, want its stored names", got)
	}
	if len(rows[0]) != 2 || strings.Join(rows[0][0], ",") != "a,2,3" {
		t.Errorf("after the upgrade the view holds %v", rows[0])
	}
}

// rewriteCatalog closes the engine and rewrites its catalog file with edit, as an older
// release would have written it; the edit must change something.
func (te *testEngine) rewriteCatalog(edit func(string) string) {
	te.t.Helper()
	if err := te.e.Close(); err != nil {
		te.t.Fatal(err)
	}
	path := te.path("catalog.json")
	data, err := os.ReadFile(path)
	if err != nil {
		te.t.Fatal(err)
	}
	old := edit(string(data))
	if old == string(data) {
		te.t.Fatalf("the edit changes nothing in the catalog:\n%s", data)
	}
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		te.t.Fatal(err)
	}
}
