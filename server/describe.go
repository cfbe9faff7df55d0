package server

import (
	"context"
	"strings"

	"rsql/server/pgwire"
	"rsql/sql"
)

// Describe implements Describer for the Postgres wire's extended protocol: the result
// columns of a statement, without running it (nothing is created or started). Parameters
// are described as unknown, so clients send them as text.
func (e *Engine) Describe(ctx context.Context, sess *Session, text string) (*Description, error) {
	// Bind with NULL for every $n the text refers to: the shape does not depend on them.
	n, _ := pgwire.ScanText(text)
	return e.describeText(ctx, sess, text, make([]sql.Value, n))
}

func (e *Engine) describeText(ctx context.Context, sess *Session, text string, params []sql.Value) (*Description, error) {
	if catalogQuery(text) {
		return nil, errNoSystemCatalogs
	}
	stmts, err := sql.ParseLimited(text, params, e.cfg.Limits)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return &Description{}, nil
	}
	switch s := stmts[0].(type) {
	case *sql.Select:
		q, err := e.bind(s)
		if err != nil {
			return nil, err
		}
		return &Description{Columns: q.OutputSchema()}, nil
	case *sql.ShowStmt, *sql.ShowVar, *sql.Describe, *sql.Explain:
		// Read-only: run it for its columns.
		r, err := e.exec(ctx, sess, s)
		if err != nil {
			return nil, err
		}
		if r.Rows != nil {
			r.Rows.Close()
		}
		return &Description{Columns: r.Columns}, nil
	}
	return &Description{}, nil
}

// errNoSystemCatalogs answers the catalog queries PostgreSQL clients send (psql's \d
// family, drivers' type lookups), which rsql cannot parse.
var errNoSystemCatalogs = sql.Errorf(sql.CodeNotSupported,
	"rsql has no PostgreSQL system catalogs (pg_catalog, information_schema): use SHOW STREAMS, SHOW VIEWS, SHOW JOBS or DESCRIBE name")

// catalogQuery reports whether text reads PostgreSQL's system catalogs.
func catalogQuery(text string) bool {
	t := strings.ToLower(text)
	return strings.Contains(t, "pg_catalog.") || strings.Contains(t, "information_schema.")
}
