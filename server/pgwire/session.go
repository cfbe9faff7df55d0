package pgwire

import (
	"context"

	"rsql/sql"

	"rsql/server/auth"
)

// Rows is a stream of result rows. Next returns io.EOF after the last row. For a push query
// Next blocks until a row arrives or ctx is done; Close stops the query.
type Rows interface {
	Next(ctx context.Context) (sql.Row, error)
	Close() error
}

// NoticeRows is what Rows may add: notices to send while the rows run (a push query that
// says, once, that it waits for new records). The front end sends each as it comes, between
// rows.
type NoticeRows interface {
	Notices() <-chan *Notice
}

// Result is the outcome of one statement.
type Result struct {
	// Columns is nil for statements that return no rows.
	Columns sql.Schema
	Rows    Rows
	// Tag is the command tag, e.g. "CREATE STREAM", "INSERT 0 3", "SELECT 5" (for row results
	// the front end counts rows itself and Tag holds only the verb, "SELECT").
	Tag string
	// Push is true for push queries (rows arrive over time).
	Push bool
	// Notice, when set, is a message for the client about what the statement did (sent as
	// a NoticeResponse before the command completes; printed on stderr by the CLI).
	Notice *Notice
}

// Notice is a PostgreSQL notice: severity NOTICE or WARNING, a SQLSTATE and a message.
type Notice struct {
	Severity, Code, Message string
}

// Session is one client's connection state: its settings (SET/SHOW) and who it is.
type Session struct {
	Settings map[string]string
	// User is the name the client authenticated as ("" in embedded runs).
	User string
	// Role is what the session may do (users.go); statements it may not run fail with
	// 42501. A session without a role may only read.
	Role auth.Role
}

// NewSession returns a session with the default settings and the admin role: the embedded
// front ends (rsql -c/-f, the shell) run as the user who started the process. The Postgres
// wire sets User and Role from authentication.
func NewSession() *Session {
	return &Session{Settings: map[string]string{"offset_reset": "latest"}, Role: auth.RoleAdmin}
}

// Executor runs SQL text for a session. Every front end (rsql -c/-f, the shell, the Postgres
// wire) goes through it. Statements run one at a time in order; the first error stops the
// text and is returned as *sql.Error when it is a SQL error.
type Executor interface {
	Execute(ctx context.Context, sess *Session, text string, params []sql.Value) ([]*Result, error)
}
