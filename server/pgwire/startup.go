package pgwire

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"rsql/server/auth"
)

// The start of a connection, up to ReadyForQuery: TLS negotiation (SSLRequest), the startup
// packet, authentication (trust or SCRAM-SHA-256), and the parameters a client learns. All
// of it must finish within Config.StartupTimeout (serveConn closes the socket then).

// SQLSTATE codes of the connection's start.
const (
	codeInvalidAuthorization = "28000"
	codeInvalidPassword      = "28P01"
	codeTooManyConnections   = "53300"
	codeIdleSessionTimeout   = "57P05"
	codeTooComplex           = "54001"
)

// Startup packets are length-prefixed without a type byte; PostgreSQL bounds them so.
const (
	minStartupPacket = 8
	maxStartupPacket = 10000
)

// readStartupPacket reads one startup-phase packet straight from r, never more than the
// packet (what follows may be a TLS handshake), and decodes it.
func readStartupPacket(r io.Reader) (pgproto3.FrontendMessage, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < minStartupPacket || n > maxStartupPacket {
		return nil, fmt.Errorf("invalid length of startup packet: %d", n)
	}
	buf := make([]byte, n)
	copy(buf, hdr[:])
	if _, err := io.ReadFull(r, buf[4:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return pgproto3.NewBackend(bytes.NewReader(buf), nil).ReceiveStartupMessage()
}

// negotiate reads startup packets until the StartupMessage: SSLRequest is answered 'S'
// and the connection goes on over TLS when the server has a certificate, 'N' otherwise;
// GSSENCRequest is answered 'N'; a CancelRequest is carried out and ends the connection.
func (c *pgConn) negotiate() (*pgproto3.StartupMessage, bool) {
	cfg := &c.srv.cfg
	for {
		msg, err := readStartupPacket(c.nc)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) {
				c.fatal(codeProtocolViolation, "invalid startup packet: "+err.Error())
			}
			return nil, false
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if cfg.TLS == nil || c.encrypted {
				c.out = append(c.out, 'N')
				if c.flush() != nil {
					return nil, false
				}
				continue
			}
			c.out = append(c.out, 'S')
			if c.flush() != nil {
				return nil, false
			}
			tc := tls.Server(c.nc, cfg.TLS)
			if err := tc.HandshakeContext(c.ctx); err != nil {
				cfg.Logger.Info("pgwire: TLS handshake failed", "remote", c.nc.RemoteAddr().String(), "err", err)
				return nil, false
			}
			c.nc, c.encrypted = tc, true
		case *pgproto3.GSSEncRequest:
			c.out = append(c.out, 'N')
			if c.flush() != nil {
				return nil, false
			}
		case *pgproto3.CancelRequest:
			c.srv.cancelRequest(m.ProcessID, m.SecretKey)
			return nil, false
		case *pgproto3.StartupMessage:
			return m, true
		default:
			return nil, false
		}
	}
}

// authenticate runs the authentication of the startup message's user and sets the
// session's user and role; it reports whether the connection goes on (otherwise the client
// was told why).
func (c *pgConn) authenticate(m *pgproto3.StartupMessage) bool {
	cfg := &c.srv.cfg
	user := m.Parameters["user"]
	remote := c.nc.RemoteAddr()
	if cfg.RequireTLS && !c.encrypted {
		c.fatal(codeInvalidAuthorization, "this server accepts only TLS connections: connect with sslmode=require (or verify-full)")
		return false
	}
	switch cfg.Auth {
	case auth.SCRAM:
		if user == "" {
			c.fatal(codeInvalidAuthorization, "no user name in the startup packet")
			return false
		}
		u, ok := c.scram(user)
		if !ok {
			return false
		}
		c.sess.User, c.sess.Role = u.Name, u.Role
	default:
		if !isLoopback(remote) {
			cfg.Logger.Warn("pgwire: refused a client from a non-loopback address (trust authentication)", "remote", remote.String(), "user", user)
			c.fatal(codeInvalidAuthorization, fmt.Sprintf("trust authentication is accepted only from loopback addresses, and %s is not one: the server must run with --auth scram-sha-256 to accept it", hostOf(remote)))
			return false
		}
		c.sess.User, c.sess.Role = user, auth.RoleAdmin
		if cfg.Users != nil {
			if u, ok := cfg.Users.User(user); ok {
				c.sess.User, c.sess.Role = u.Name, u.Role
			}
		}
		c.send(&pgproto3.AuthenticationOk{})
	}
	return true
}

// scram runs a SCRAM-SHA-256 exchange for user; it returns the user when the proof is
// right.
func (c *pgConn) scram(user string) (auth.UserDef, bool) {
	cfg := &c.srv.cfg
	var u auth.UserDef
	found := false
	if cfg.Users != nil {
		u, found = cfg.Users.User(user)
	}
	ex := auth.NewExchange(u.Secret, user, c.srv.mockKey)
	c.send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{auth.Mechanism}})
	if c.flush() != nil {
		return u, false
	}
	c.be.SetAuthType(pgproto3.AuthTypeSASL)
	msg, err := c.be.Receive()
	if err != nil {
		// psql hangs up here to ask for the password, then connects again.
		c.receiveFailed(err)
		return u, false
	}
	init, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok {
		c.fatal(codeProtocolViolation, fmt.Sprintf("expected a SASL response, got %T", msg))
		return u, false
	}
	if init.AuthMechanism != auth.Mechanism {
		c.fatal(codeInvalidAuthorization, fmt.Sprintf("SASL mechanism %q is not supported (%s is)", init.AuthMechanism, auth.Mechanism))
		return u, false
	}
	first, err := ex.First(init.Data)
	if err != nil {
		c.fatal(codeProtocolViolation, err.Error())
		return u, false
	}
	c.send(&pgproto3.AuthenticationSASLContinue{Data: first})
	if c.flush() != nil {
		return u, false
	}
	c.be.SetAuthType(pgproto3.AuthTypeSASLContinue)
	msg, err = c.be.Receive()
	if err != nil {
		c.receiveFailed(err)
		return u, false
	}
	resp, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		c.fatal(codeProtocolViolation, fmt.Sprintf("expected a SASL response, got %T", msg))
		return u, false
	}
	final, err := ex.Final(resp.Data)
	if errors.Is(err, auth.ErrWrongProof) {
		reason := "wrong password"
		switch {
		case !found:
			reason = "no such user"
		case u.Secret == "":
			reason = "the user has no password"
		}
		cfg.Logger.Warn("pgwire: password authentication failed", "user", user, "remote", c.nc.RemoteAddr().String(), "reason", reason)
		c.fatal(codeInvalidPassword, fmt.Sprintf("password authentication failed for user %q", user))
		return u, false
	}
	if err != nil {
		c.fatal(codeProtocolViolation, err.Error())
		return u, false
	}
	c.send(&pgproto3.AuthenticationSASLFinal{Data: final})
	c.send(&pgproto3.AuthenticationOk{})
	return u, true
}

// ready sends what a client learns once authenticated, then ReadyForQuery.
func (c *pgConn) ready(m *pgproto3.StartupMessage) bool {
	c.srv.register(c)
	for _, p := range [][2]string{
		{"server_version", c.srv.cfg.ServerVersion},
		{"server_encoding", "UTF8"},
		{"client_encoding", "UTF8"},
		{"DateStyle", "ISO, MDY"},
		{"integer_datetimes", "on"},
		{"standard_conforming_strings", "on"},
		{"TimeZone", "UTC"},
		{"IntervalStyle", "postgres"},
		{"application_name", m.Parameters["application_name"]},
		{"session_authorization", c.sess.User},
		{"is_superuser", map[bool]string{true: "on", false: "off"}[c.sess.Role == auth.RoleAdmin]},
	} {
		c.send(&pgproto3.ParameterStatus{Name: p[0], Value: p[1]})
	}
	c.send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret[:]})
	c.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	c.srv.cfg.Logger.Debug("pgwire: client connected", "pid", c.pid, "remote", c.nc.RemoteAddr().String(),
		"user", c.sess.User, "role", string(c.sess.Role), "tls", c.encrypted, "database", m.Parameters["database"])
	return c.flush() == nil
}

// negotiateVersion answers a startup message of a newer minor version or with protocol
// options rsql does not know.
func (c *pgConn) negotiateVersion(m *pgproto3.StartupMessage) {
	var unknown []string
	for k := range m.Parameters {
		if strings.HasPrefix(k, "_pq_.") {
			unknown = append(unknown, k)
		}
	}
	if m.ProtocolVersion != pgproto3.ProtocolVersion30 || len(unknown) > 0 {
		c.send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unknown})
	}
}

// fatal sends a FATAL error and flushes; the caller then ends the connection.
func (c *pgConn) fatal(code, msg string) {
	c.sendError(nil, &pgError{code: code, msg: msg, fatal: true}, "")
	c.flush()
}

// receiveFailed reports a failed Receive to the client when it is still there: a timeout
// or a malformed message.
func (c *pgConn) receiveFailed(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
	case errors.Is(err, errIdleTimeout):
		c.srv.cfg.Logger.Info("pgwire: idle session timed out", "pid", c.pid, "remote", c.nc.RemoteAddr().String())
		c.fatal(codeIdleSessionTimeout, "terminating connection due to idle-session timeout")
	case errors.Is(err, errMessageTimeout):
		c.srv.cfg.Logger.Info("pgwire: a message did not arrive whole in time", "pid", c.pid, "remote", c.nc.RemoteAddr().String())
		c.fatal(codeProtocolViolation, err.Error())
	default:
		c.fatal(codeProtocolViolation, "invalid message: "+err.Error())
	}
}

// isLoopback reports whether a is a loopback address (127.0.0.0/8, ::1) or a Unix socket.
func isLoopback(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ok && ip.Unmap().IsLoopback()
	case *net.UnixAddr:
		return true
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

func hostOf(a net.Addr) string {
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

var (
	// errMessageTimeout: a message began to arrive and did not finish within
	// Config.MessageTimeout.
	errMessageTimeout = errors.New("a message began to arrive but did not arrive whole in time")
	// errIdleTimeout: nothing arrived within Config.IdleTimeout between messages.
	errIdleTimeout = errors.New("idle-session timeout")
)

// frameReader gives pgproto3's decoder the bytes of one message at a time: it parses the
// message framing (a type byte and a length) itself and never hands out more than the
// message it is in, so it knows whether a message has begun. A message that has begun
// must arrive whole within msgTimeout of its first byte being read; between messages the
// wait is bounded by idleTimeout when it is positive. It is used by the connection's
// goroutine only.
type frameReader struct {
	r           *pumpReader
	msgTimeout  time.Duration
	idleTimeout time.Duration

	hdr     [5]byte
	hdrN    int       // bytes of the current message's header handed out
	left    int       // bytes of the current message's body still to hand out
	started time.Time // when the current message's first byte was handed out
}

func (f *frameReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	inMessage := f.hdrN > 0
	want := f.left
	if f.hdrN < len(f.hdr) {
		want = len(f.hdr) - f.hdrN
	}
	p = p[:min(len(p), want)]
	var deadline time.Time
	var timeoutErr error
	switch {
	case inMessage:
		deadline, timeoutErr = f.started.Add(f.msgTimeout), errMessageTimeout
	case f.idleTimeout > 0:
		deadline, timeoutErr = time.Now().Add(f.idleTimeout), errIdleTimeout
	}
	n, err := f.r.readUntil(p, deadline, timeoutErr)
	if n == 0 {
		return 0, err
	}
	if !inMessage {
		f.started = time.Now()
	}
	if f.hdrN < len(f.hdr) {
		copy(f.hdr[f.hdrN:], p[:n])
		f.hdrN += n
		if f.hdrN == len(f.hdr) {
			// A length below 4 is the decoder's to refuse; the message then ends here.
			f.left = max(0, int(int32(binary.BigEndian.Uint32(f.hdr[1:])))-4)
		}
	} else {
		f.left -= n
	}
	if f.hdrN == len(f.hdr) && f.left == 0 {
		f.hdrN = 0
	}
	return n, nil
}
