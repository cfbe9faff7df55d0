package server

import (
	"rsql/server/pgwire"
	"rsql/sql"
)

// The Postgres wire front end and the front-end contract (Session, Result, Executor) are
// pgwire's (server/pgwire); these names keep the engine's callers unchanged.
type (
	PGServer    = pgwire.Server
	PGConfig    = pgwire.Config
	Describer   = pgwire.Describer
	Description = pgwire.Description
	Session     = pgwire.Session
	Result      = pgwire.Result
	Rows        = pgwire.Rows
	Notice      = pgwire.Notice
	Executor    = pgwire.Executor
)

// NewPGServer is pgwire.NewServer.
func NewPGServer(exec Executor, cfg PGConfig) *PGServer { return pgwire.NewServer(exec, cfg) }

// NewSession is pgwire.NewSession.
func NewSession() *Session { return pgwire.NewSession() }

const (
	DefaultPGServerVersion   = pgwire.DefaultPGServerVersion
	DefaultPGMaxMessageBytes = pgwire.DefaultPGMaxMessageBytes
	DefaultMaxConnections    = pgwire.DefaultMaxConnections
	DefaultStartupTimeout    = pgwire.DefaultStartupTimeout
	DefaultMessageTimeout    = pgwire.DefaultMessageTimeout
)

// What the console shares with the wire: SQLSTATEs of authentication, error positions,
// command tags and the text form of values; and the statement scan Describe uses.
const (
	codeInvalidAuthorization = "28000"
	codeInvalidPassword      = "28P01"
)

func errorPosition(se *sql.Error, text string) int { return pgwire.ErrorPosition(se, text) }

func appendText(dst []byte, v sql.Value, t sql.Type) []byte { return pgwire.AppendText(dst, v, t) }

func commandTag(r *Result, n int64) string { return pgwire.CommandTag(r, n) }

func scanText(text string) (maxParam int, statements int) { return pgwire.ScanText(text) }
