package pgwire

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"rsql/server/auth"
)

// pgFuzzConn is a net.Conn that reads fixed bytes, then EOF, and discards what is written.
type pgFuzzConn struct {
	mu     sync.Mutex
	r      *bytes.Reader
	closed bool
	wrote  int
}

func (c *pgFuzzConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	n, err := c.r.Read(p)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (c *pgFuzzConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	c.wrote += len(p)
	return len(p), nil
}

func (c *pgFuzzConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

func (c *pgFuzzConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5433}
}
func (c *pgFuzzConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *pgFuzzConn) SetDeadline(t time.Time) error      { return nil }
func (c *pgFuzzConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *pgFuzzConn) SetWriteDeadline(t time.Time) error { return nil }

// runPGConn feeds data to one connection handler and fails when it panics or does not
// finish.
func runPGConn(t *testing.T, srv *Server, data []byte) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.serveConn(&pgFuzzConn{r: bytes.NewReader(data)}, false)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("connection handler hangs on %q", data)
	}
}

// pgFuzzExec answers every statement quickly; push queries end by themselves, as the
// fuzz input cannot cancel them.
func pgFuzzServer() *Server {
	return NewServer(pgDescribingExec{&pgTestExec{pushN: 2, pushEnd: true}}, Config{MaxMessageBytes: 1 << 20})
}

func pgStartupBytes() []byte {
	b, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "fuzz", "database": "rsql"}}).Encode(nil)
	return b
}

func pgMessages(msgs ...pgproto3.FrontendMessage) []byte {
	var out []byte
	for _, m := range msgs {
		out, _ = m.Encode(out)
	}
	return out
}

func FuzzPGStartup(f *testing.F) {
	ssl, _ := (&pgproto3.SSLRequest{}).Encode(nil)
	cancel, _ := (&pgproto3.CancelRequest{ProcessID: 1, SecretKey: []byte{1, 2, 3, 4}}).Encode(nil)
	v32, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion32, Parameters: map[string]string{"user": "u", "_pq_.x": "1"}}).Encode(nil)
	f.Add(pgStartupBytes())
	f.Add(append(ssl, pgStartupBytes()...))
	f.Add(cancel)
	f.Add(v32)
	f.Add([]byte{0, 0, 0, 8, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	srv := pgFuzzServer()
	f.Fuzz(func(t *testing.T, data []byte) {
		runPGConn(t, srv, data)
	})
}

func FuzzPGMessages(f *testing.F) {
	f.Add(pgMessages(&pgproto3.Query{String: "select typed; insert into x values (1)"}, &pgproto3.Terminate{}))
	f.Add(pgMessages(&pgproto3.Query{String: "fail oops"}, &pgproto3.Query{String: ""}, &pgproto3.Query{String: "push"}))
	f.Add(pgMessages(
		&pgproto3.Parse{Name: "s", Query: "echo $1, $2", ParameterOIDs: []uint32{20, 1700}},
		&pgproto3.Describe{ObjectType: 'S', Name: "s"},
		&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s", ParameterFormatCodes: []int16{1, 0}, Parameters: [][]byte{{0, 0, 0, 0, 0, 0, 0, 7}, []byte("1.5")}, ResultFormatCodes: []int16{1}},
		&pgproto3.Describe{ObjectType: 'P', Name: "p"},
		&pgproto3.Execute{Portal: "p", MaxRows: 1},
		&pgproto3.Execute{Portal: "p"},
		&pgproto3.Close{ObjectType: 'P', Name: "p"},
		&pgproto3.Sync{},
		&pgproto3.Flush{},
	))
	f.Add(pgMessages(
		&pgproto3.Parse{Query: "select many"},
		&pgproto3.Bind{ResultFormatCodes: []int16{0}},
		&pgproto3.Execute{MaxRows: 10},
		&pgproto3.Execute{MaxRows: 10},
		&pgproto3.Sync{},
		&pgproto3.Parse{Query: "push"},
		&pgproto3.Bind{},
		&pgproto3.Execute{},
		&pgproto3.Sync{},
	))
	f.Add(pgMessages(&pgproto3.Bind{PreparedStatement: "nope"}, &pgproto3.Execute{}, &pgproto3.Sync{}, &pgproto3.FunctionCall{Function: 1}))
	numeric := []byte{0, 2, 0, 0, 0x40, 0, 0, 2, 0, 12, 0x0d, 0x48}
	binary.BigEndian.PutUint16(numeric[6:], 2)
	f.Add(pgMessages(
		&pgproto3.Parse{Query: "echo $1", ParameterOIDs: []uint32{1700}},
		&pgproto3.Bind{ParameterFormatCodes: []int16{1}, Parameters: [][]byte{numeric}},
		&pgproto3.Execute{},
		&pgproto3.Sync{},
	))
	f.Add([]byte{'Q', 0, 0, 0, 3})
	f.Add([]byte{'Z', 0, 0, 0, 4})
	srv := pgFuzzServer()
	startup := pgStartupBytes()
	f.Fuzz(func(t *testing.T, data []byte) {
		runPGConn(t, srv, append(append([]byte(nil), startup...), data...))
	})
}

// fuzzUsers is a auth.UserStore of fixed users.
type fuzzUsers map[string]auth.UserDef

func (u fuzzUsers) User(name string) (auth.UserDef, bool) {
	d, ok := u[name]
	return d, ok
}

// FuzzPGAuth feeds a server that checks passwords (SCRAM-SHA-256) any bytes after the
// startup packet: the SASL messages of the exchange and whatever follows.
func FuzzPGAuth(f *testing.F) {
	secret, err := auth.NewSecret("pw")
	if err != nil {
		f.Fatal(err)
	}
	srv := NewServer(pgDescribingExec{&pgTestExec{pushN: 2, pushEnd: true}}, Config{MaxMessageBytes: 1 << 20,
		Auth: auth.SCRAM, Users: fuzzUsers{"fuzz": {Name: "fuzz", Role: auth.RoleReadOnly, Secret: secret}}})
	initial, _ := (&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=rOprNGfwEbeRWgbNEkqO")}).Encode(nil)
	resp, _ := (&pgproto3.SASLResponse{Data: []byte("c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")}).Encode(nil)
	f.Add(append(append([]byte(nil), initial...), resp...))
	f.Add(initial)
	wrongMech, _ := (&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256-PLUS", Data: []byte("p=tls-server-end-point,,n=,r=x")}).Encode(nil)
	f.Add(wrongMech)
	f.Add(pgMessages(&pgproto3.Query{String: "select 1"}))
	f.Add([]byte{'p', 0, 0, 0, 4})
	startup := pgStartupBytes()
	f.Fuzz(func(t *testing.T, data []byte) {
		runPGConn(t, srv, append(append([]byte(nil), startup...), data...))
	})
}
