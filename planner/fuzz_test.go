package planner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rsql/sql"
)

// FuzzPlan plans whatever SELECT text parses and binds against the golden catalog: the
// planner must return a plan or an error, never panic, and a plan must pass validate and
// explain itself.
func FuzzPlan(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.sql")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(string(b))
		}
	}
	cat := goldenCatalog()
	f.Fuzz(func(t *testing.T, text string) {
		stmts, err := sql.Parse(text)
		if err != nil {
			return
		}
		for _, st := range stmts {
			sel, ok := st.(*sql.Select)
			if !ok {
				continue
			}
			q, err := sql.Bind(sel, cat)
			if err != nil {
				continue
			}
			for _, job := range []string{"", "fz"} {
				l, p, err := Plan(q, Options{Job: job})
				if err != nil {
					var se *sql.Error
					if !asSQLError(err, &se) {
						t.Fatalf("planning %q: error %v is not a *sql.Error", text, err)
					}
					continue
				}
				if err := validate(l); err != nil {
					t.Fatalf("planning %q: %v", text, err)
				}
				if out := Explain(l, p); !strings.Contains(out, "Stage 0") {
					t.Fatalf("EXPLAIN of %q has no stage:\n%s", text, out)
				}
			}
		}
	})
}
