package server

import (
	"rsql/server/pgwire"
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
	NoticeRows  = pgwire.NoticeRows
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
