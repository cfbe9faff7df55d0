package planner

import (
	"testing"

	"rsql/sql"
)

// bindSQL parses text (one SELECT, leading "--" comments allowed) and binds it against cat.
// A parse or bind error is returned; a text that is not one SELECT fails the test.
func bindSQL(t *testing.T, cat sql.Catalog, text string) (*sql.Query, error) {
	t.Helper()
	stmts, err := sql.Parse(text)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		t.Fatalf("want one statement, got %d", len(stmts))
	}
	sel, ok := stmts[0].(*sql.Select)
	if !ok {
		t.Fatalf("want a SELECT, got %T", stmts[0])
	}
	return sql.Bind(sel, cat)
}
