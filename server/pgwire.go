package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"

	"rsql/sql"
)

// PGConfig configures the Postgres wire front end.
type PGConfig struct {
	// ServerVersion is reported as the server_version parameter.
	ServerVersion string
	// MaxMessageBytes bounds a client message (a query text, a Bind); a bigger one ends
	// the connection with an error.
	MaxMessageBytes int
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
}

// Defaults of PGConfig.
const (
	DefaultPGServerVersion   = "15.0 (rsql)"
	DefaultPGMaxMessageBytes = 64 << 20
)

func (c PGConfig) withDefaults() PGConfig {
	if c.ServerVersion == "" {
		c.ServerVersion = DefaultPGServerVersion
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultPGMaxMessageBytes
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

// PGServer is the Postgres wire protocol (v3) front end. Each client connection gets a
// Session and runs its statements through the Executor one at a time.
type PGServer struct {
	exec Executor
	cfg  PGConfig

	ctx    context.Context // cancelled by Close; parent of every connection's context
	cancel context.CancelCauseFunc

	mu        sync.Mutex // guards the fields below
	listeners map[net.Listener]struct{}
	conns     map[uint32]*pgConn // by process id, once started up
	netConns  map[net.Conn]struct{}
	nextPID   uint32
	closed    bool
	wg        sync.WaitGroup // one per connection goroutine
}

// errServerClosing is the cause of connection contexts when the server shuts down.
var errServerClosing = errors.New("server is shutting down")

// NewPGServer returns a front end that runs statements through exec.
func NewPGServer(exec Executor, cfg PGConfig) *PGServer {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &PGServer{
		exec:      exec,
		cfg:       cfg.withDefaults(),
		ctx:       ctx,
		cancel:    cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[uint32]*pgConn{},
		netConns:  map[net.Conn]struct{}{},
	}
}

// Serve accepts connections on ln until Close; it returns nil after Close and the accept
// error otherwise. It may be called for several listeners.
func (s *PGServer) Serve(ln net.Listener) error {
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
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if !s.startConn(nc) {
			nc.Close()
			return nil
		}
		go func() {
			defer s.wg.Done()
			defer s.endConn(nc)
			s.serveConn(nc)
		}()
	}
}

// startConn counts a connection goroutine in, unless the server is closed.
func (s *PGServer) startConn(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	s.netConns[nc] = struct{}{}
	return true
}

func (s *PGServer) endConn(nc net.Conn) {
	s.mu.Lock()
	delete(s.netConns, nc)
	s.mu.Unlock()
}

// Close stops accepting, ends every connection (their running statements are cancelled)
// and waits for the connection goroutines to finish.
func (s *PGServer) Close() error {
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
func (s *PGServer) register(c *pgConn) {
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

func (s *PGServer) unregister(c *pgConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[c.pid] == c {
		delete(s.conns, c.pid)
	}
}

// cancelRequest cancels the running statement of the connection with process id pid when
// the secret key matches; otherwise it does nothing (as Postgres, it never answers).
func (s *PGServer) cancelRequest(pid uint32, secret []byte) {
	s.mu.Lock()
	c := s.conns[pid]
	s.mu.Unlock()
	if c == nil || subtle.ConstantTimeCompare(c.secret[:], secret) != 1 {
		s.cfg.Logger.Debug("pgwire: cancel request for an unknown backend", "pid", pid)
		return
	}
	c.cancelRunning()
}
