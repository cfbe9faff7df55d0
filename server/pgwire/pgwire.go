package pgwire

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"rsql/internal/listen"
	"rsql/server/auth"
	"rsql/sql"
)

// Config configures the Postgres wire front end. docs/security.md describes the
// protections for users; zero values take the defaults below.
type Config struct {
	// ServerVersion is reported as the server_version parameter.
	ServerVersion string
	// MaxMessageBytes bounds a client message (a query text, a Bind); a bigger one ends
	// the connection with an error.
	MaxMessageBytes int
	// MaxStatementBytes bounds the text of one Query or Parse message; a longer one fails
	// with 54001 and the session goes on. Negative: no limit.
	MaxStatementBytes int
	// MaxParams is the most parameters one statement may take (at most 65535, what Bind
	// can count).
	MaxParams int
	// MaxConnections is the most connections served at once, counting those still
	// starting up; one more is told 53300 "too many clients" and closed. Negative: no
	// limit.
	MaxConnections int
	// StartupTimeout bounds everything before the first ReadyForQuery: TLS negotiation,
	// the startup packet and authentication. A client slower than that is disconnected.
	StartupTimeout time.Duration
	// MessageTimeout bounds how long a message that has begun to arrive may take to
	// arrive whole; a client that stops in the middle of one is disconnected (08P01).
	MessageTimeout time.Duration
	// IdleTimeout, when positive, ends a session that sends nothing for that long between
	// messages (57P05), as PostgreSQL's idle_session_timeout. Default off.
	IdleTimeout time.Duration
	// Auth is how clients prove who they are (auth.Trust by default).
	Auth auth.Method
	// Users are the users SCRAM-SHA-256 checks passwords against and whose roles sessions
	// take. With auth.Trust and no Users, every session is an admin.
	Users auth.UserStore
	// TLS, when set, answers SSLRequest with 'S' and runs the rest of the connection over
	// TLS with this configuration; nil answers 'N' (no encryption).
	TLS *tls.Config
	// RequireTLS refuses (28000) clients that do not negotiate TLS first.
	RequireTLS bool
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultPGServerVersion   = "15.0 (rsql)"
	DefaultPGMaxMessageBytes = 4 << 20
	DefaultMaxConnections    = 200
	DefaultStartupTimeout    = 10 * time.Second
	DefaultMessageTimeout    = 60 * time.Second
)

func (c Config) withDefaults() Config {
	if c.ServerVersion == "" {
		c.ServerVersion = DefaultPGServerVersion
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultPGMaxMessageBytes
	}
	if c.MaxStatementBytes == 0 {
		c.MaxStatementBytes = sql.DefaultMaxStatementBytes
	}
	if c.MaxParams <= 0 || c.MaxParams > maxParams {
		c.MaxParams = maxParams
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.StartupTimeout <= 0 {
		c.StartupTimeout = DefaultStartupTimeout
	}
	if c.MessageTimeout <= 0 {
		c.MessageTimeout = DefaultMessageTimeout
	}
	if c.Auth == "" {
		c.Auth = auth.Trust
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Description is what the extended query protocol needs to know about one statement before
// running it.
type Description struct {
	// Params are the types of $1, $2, ...; it may be shorter than the number of
	// placeholders (the rest are unknown and arrive as VARCHAR text).
	Params []sql.Type
	// Columns are the result columns; nil when the statement returns no rows.
	Columns sql.Schema
}

// Describer is an optional capability of an Executor: describing a statement without
// running it. With it, the extended protocol's Describe of a prepared statement reports
// exact parameter types and result columns (what pgx's default mode relies on). Without
// it, parameters are of unknown type (text) and a row-returning statement without
// parameters is run at Describe time to learn its columns (its results are then used by
// the next Bind); one with parameters is described as returning no rows (NoData), and
// clients such as pgx then ask for the portal's description, which is exact.
type Describer interface {
	Describe(ctx context.Context, sess *Session, text string) (*Description, error)
}

// Server is the Postgres wire protocol (v3) front end. Each client connection gets a
// Session and runs its statements through the Executor one at a time.
type Server struct {
	exec Executor
	cfg  Config
	// mockKey derives the made-up salts of SCRAM exchanges for unknown users.
	mockKey []byte

	ctx    context.Context // cancelled by Close; parent of every connection's context
	cancel context.CancelCauseFunc

	mu        sync.Mutex // guards the fields below
	listeners map[net.Listener]struct{}
	conns     map[uint32]*pgConn // by process id, once started up
	netConns  map[net.Conn]struct{}
	refusing  int   // connections being told 53300
	stopped   error // why a listener stopped accepting, if one did
	nextPID   uint32
	closed    bool
	wg        sync.WaitGroup // one per connection goroutine
}

// maxRefusing bounds the connections being told "too many clients" at once; past it, a
// connection over the limit is closed without a word.
const maxRefusing = 32

// errServerClosing is the cause of connection contexts when the server shuts down.
var errServerClosing = errors.New("server is shutting down")

// NewServer returns a front end that runs statements through exec.
func NewServer(exec Executor, cfg Config) *Server {
	ctx, cancel := context.WithCancelCause(context.Background())
	key := make([]byte, 32)
	rand.Read(key)
	return &Server{
		exec:      exec,
		cfg:       cfg.withDefaults(),
		mockKey:   key,
		ctx:       ctx,
		cancel:    cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[uint32]*pgConn{},
		netConns:  map[net.Conn]struct{}{},
	}
}

// Serve accepts connections on ln until Close; it returns nil after Close. A temporary
// accept error (file descriptors running out, say) is logged and retried with backoff
// (internal/listen); any other stops this listener: Serve records it (Err reports it) and
// returns it. It may be called for several listeners.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var backoff listen.Backoff
	logf := func(msg string, args ...any) {
		s.cfg.Logger.Warn("pgwire: "+msg, append(args, "listener", ln.Addr().String())...)
	}
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			if backoff.Retry(err, logf) {
				continue
			}
			s.cfg.Logger.Error("pgwire: listener stopped", "listener", ln.Addr().String(), "err", err)
			s.mu.Lock()
			s.stopped = fmt.Errorf("Postgres-wire listener %s stopped: %w", ln.Addr(), err)
			s.mu.Unlock()
			return err
		}
		backoff.Accepted(logf)
		ok, over := s.startConn(nc)
		if !ok {
			nc.Close()
			continue
		}
		go func() {
			defer s.wg.Done()
			defer s.endConn(nc, over)
			s.serveConn(nc, over)
		}()
	}
}

// Err returns why a listener stopped accepting, or nil while every listener accepts.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// startConn counts a connection goroutine in, unless the server is closed (ok false) or
// too many connections are being refused already. over says the connection is past
// MaxConnections: it is to be told so and closed.
func (s *Server) startConn(nc net.Conn) (ok, over bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, false
	}
	if max := s.cfg.MaxConnections; max > 0 && len(s.netConns)-s.refusing >= max {
		if s.refusing >= maxRefusing {
			s.cfg.Logger.Warn("pgwire: too many connections; closing one without a word", "remote", nc.RemoteAddr().String())
			return false, true
		}
		s.refusing++
		over = true
	}
	s.wg.Add(1)
	s.netConns[nc] = struct{}{}
	return true, over
}

func (s *Server) endConn(nc net.Conn, over bool) {
	s.mu.Lock()
	delete(s.netConns, nc)
	if over {
		s.refusing--
	}
	s.mu.Unlock()
}

// Close stops accepting, ends every connection (their running statements are cancelled)
// and waits for the connection goroutines to finish.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	conns := make([]net.Conn, 0, len(s.netConns))
	for nc := range s.netConns {
		conns = append(conns, nc)
	}
	s.mu.Unlock()
	s.cancel(errServerClosing)
	for _, nc := range conns {
		nc.Close()
	}
	s.wg.Wait()
	return nil
}

// register gives c a process id and a secret key for cancel requests.
func (s *Server) register(c *pgConn) {
	var key [4]byte
	if _, err := rand.Read(key[:]); err != nil {
		binary.BigEndian.PutUint32(key[:], uint32(s.nextPID)*2654435761)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		s.nextPID++
		if s.nextPID == 0 {
			continue
		}
		if _, used := s.conns[s.nextPID]; !used {
			break
		}
	}
	c.pid = s.nextPID
	c.secret = key
	s.conns[c.pid] = c
}

func (s *Server) unregister(c *pgConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[c.pid] == c {
		delete(s.conns, c.pid)
	}
}

// cancelRequest cancels the running statement of the connection with process id pid when
// the secret key matches; otherwise it does nothing (as Postgres, it never answers).
func (s *Server) cancelRequest(pid uint32, secret []byte) {
	s.mu.Lock()
	c := s.conns[pid]
	s.mu.Unlock()
	if c == nil || subtle.ConstantTimeCompare(c.secret[:], secret) != 1 {
		s.cfg.Logger.Debug("pgwire: cancel request for an unknown backend", "pid", pid)
		return
	}
	c.cancelRunning()
}
