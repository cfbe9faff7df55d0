package pgwire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// startPGServerWith serves ex with cfg on a loopback port.
func startPGServerWith(t *testing.T, ex Executor, cfg Config) (*Server, string) {
	t.Helper()
	srv := NewServer(ex, cfg)
	ln := listenLoopback(t)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return srv, ln.Addr().String()
}

// connectAs opens a pgx connection with a user, password and sslmode.
func connectAs(ctx context.Context, addr, user, password, sslmode string) (*pgx.Conn, error) {
	host, port, _ := net.SplitHostPort(addr)
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s@%s:%s/rsql?sslmode=%s", user, host, port, sslmode))
	if err != nil {
		return nil, err
	}
	cfg.Password = password
	return pgx.ConnectConfig(ctx, cfg)
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Trust authentication takes only loopback clients: one from another address is refused
// with 28000 before it can run anything.
func TestPGTrustOnlyFromLoopback(t *testing.T) {
	srv := NewServer(&pgTestExec{}, Config{})
	defer srv.Close()
	for _, remote := range []string{"10.1.2.3:5000", "[2001:db8::1]:5000", "127.0.0.1:5000", "[::1]:5000"} {
		server, client := net.Pipe()
		ap := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(remote))
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.serveConn(&remoteConn{Conn: server, remote: ap}, false)
		}()
		fe := pgproto3.NewFrontend(client, client)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "x"}})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		loopback := strings.HasPrefix(remote, "127.") || strings.HasPrefix(remote, "[::1]")
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			if loopback || m.Code != codeInvalidAuthorization || !strings.Contains(m.Message, "loopback") {
				t.Errorf("client at %s: %s %s", remote, m.Code, m.Message)
			}
		case *pgproto3.AuthenticationOk:
			if !loopback {
				t.Errorf("client at %s was let in without a password", remote)
			}
		default:
			t.Errorf("client at %s got %T", remote, msg)
		}
		client.Close()
		<-done
	}
}

type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c *remoteConn) RemoteAddr() net.Addr { return c.remote }

// Past MaxConnections a client is told 53300; once one leaves, the next is served.
func TestPGMaxConnections(t *testing.T) {
	_, addr := startPGServerWith(t, &pgTestExec{}, Config{MaxConnections: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := connectAs(ctx, addr, "u", "", "disable")
	if err != nil {
		t.Fatal(err)
	}
	b, err := connectAs(ctx, addr, "u", "", "disable")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if c, err := connectAs(ctx, addr, "u", "", "disable"); pgCode(err) != codeTooManyConnections {
		if c != nil {
			c.Close(ctx)
		}
		t.Fatalf("a third connection: %v, want 53300", err)
	}
	a.Close(ctx)
	// The server notices a's end on its own time.
	var c *pgx.Conn
	for i := 0; ; i++ {
		if c, err = connectAs(ctx, addr, "u", "", "disable"); err == nil {
			break
		}
		if pgCode(err) != codeTooManyConnections || i > 100 {
			t.Fatalf("after one left: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var n int
	if err := c.QueryRow(ctx, "select 1", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil || n != 1 {
		t.Fatalf("select 1: %d %v", n, err)
	}
	c.Close(ctx)
}

// A client that sends its startup packet a byte at a time is disconnected once
// StartupTimeout passes, and so is one that stops in the middle of a message later
// (MessageTimeout) or, with IdleTimeout, one that sends nothing (57P05).
func TestPGSlowClientsTimeOut(t *testing.T) {
	_, addr := startPGServerWith(t, &pgTestExec{}, Config{StartupTimeout: 300 * time.Millisecond, MessageTimeout: 300 * time.Millisecond})
	startup, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "u"}}).Encode(nil)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	closed := make(chan error, 1)
	go func() {
		for _, b := range startup {
			if _, err := nc.Write([]byte{b}); err != nil {
				closed <- err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		closed <- nil
	}()
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("slow startup: the server did not close the connection: %v", err)
	}
	if err := <-closed; err == nil {
		t.Fatal("the whole startup packet went through a byte at a time")
	}

	// Started up, then half a message.
	nc2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	fe := pgproto3.NewFrontend(nc2, nc2)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "u"}})
	fe.Flush()
	nc2.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	// The Query header promises 100 bytes; 3 come.
	nc2.Write([]byte{'Q', 0, 0, 0, 104, 's', 'e', 'l'})
	msg, err := fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := msg.(*pgproto3.ErrorResponse); !ok || e.Code != codeProtocolViolation || e.Severity != "FATAL" {
		t.Fatalf("half a message: %#v", msg)
	}

	// Idle sessions, when configured.
	_, addr3 := startPGServerWith(t, &pgTestExec{}, Config{IdleTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := connectAs(ctx, addr3, "u", "", "disable")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "select 1", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	_, err = c.Exec(ctx, "select 1", pgx.QueryExecModeSimpleProtocol)
	if err == nil {
		t.Fatal("an idle session outlived the idle timeout")
	}
}

// A query text longer than MaxStatementBytes fails with 54001 without ending the session.
func TestPGStatementTooLong(t *testing.T) {
	_, addr := startPGServerWith(t, &pgTestExec{}, Config{MaxStatementBytes: 100})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := connectAs(ctx, addr, "u", "", "disable")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	long := "select 1 " + strings.Repeat(" ", 200)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeDescribeExec} {
		if _, err := c.Exec(ctx, long, mode); pgCode(err) != codeTooComplex {
			t.Errorf("mode %v: %v, want 54001", mode, err)
		}
	}
	var n int
	if err := c.QueryRow(ctx, "select 1", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil || n != 1 {
		t.Fatalf("after: %d %v", n, err)
	}
}

// fakeListener returns errs from Accept, one per call, then the connections of a real
// listener.
type fakeListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *fakeListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// Serve survives running out of file descriptors (it retries) and reports a listener that
// stopped for good.
func TestPGAcceptErrors(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: &osSyscallError{syscall.EMFILE}}
	ln := &fakeListener{Listener: listenLoopback(t), errs: []error{emfile, emfile, emfile}}
	srv := NewServer(&pgTestExec{}, Config{})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := connectAs(ctx, ln.Addr().String(), "u", "", "disable")
	if err != nil {
		t.Fatalf("after three EMFILE: %v", err)
	}
	c.Close(ctx)
	if err := srv.Err(); err != nil {
		t.Fatalf("Err after retried errors: %v", err)
	}
	srv.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}

	broken := &fakeListener{Listener: listenLoopback(t), errs: []error{errors.New("listener broke")}}
	srv2 := NewServer(&pgTestExec{}, Config{})
	defer srv2.Close()
	if err := srv2.Serve(broken); err == nil {
		t.Fatal("Serve went on after a permanent error")
	}
	if err := srv2.Err(); err == nil || !strings.Contains(err.Error(), "listener broke") {
		t.Fatalf("Err: %v", err)
	}
}

// osSyscallError is an errno as the os package wraps it.
type osSyscallError struct{ errno syscall.Errno }

func (e *osSyscallError) Error() string { return "accept4: " + e.errno.Error() }
func (e *osSyscallError) Unwrap() error { return e.errno }

// A startup packet claiming more than PostgreSQL's bound is refused without reading it.
func TestPGStartupPacketBounds(t *testing.T) {
	_, addr := startPGServerWith(t, &pgTestExec{}, Config{})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<30)
	nc.Write(hdr[:])
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	out, _ := io.ReadAll(nc)
	if !strings.Contains(string(out), "invalid length of startup packet") {
		t.Fatalf("answer to a 1 GiB startup packet: %q", out)
	}
}
