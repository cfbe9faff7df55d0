package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"rsql/broker"
	"rsql/server"
)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testPrinter prints into buffers instead of stdout and stderr.
func testPrinter(jsonLines bool) (*printer, *syncBuffer, *syncBuffer) {
	out, errOut := &syncBuffer{}, &syncBuffer{}
	return &printer{w: bufio.NewWriter(out), err: errOut, json: jsonLines}, out, errOut
}

// testEngine is an engine with an in-process broker, in a temporary directory.
func testEngine(t *testing.T) *server.Engine {
	t.Helper()
	dir := t.TempDir()
	b, err := broker.Open(broker.Config{Dir: filepath.Join(dir, "broker")})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := server.Open(server.Config{DataDir: dir, StateBackend: "memory", Broker: b, Log: &syncBuffer{}})
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		b.Close()
	})
	return eng
}

// servePG serves eng over the Postgres wire on addr ("127.0.0.1:0" for any port) until the
// returned stop is called.
func servePG(t *testing.T, eng server.Executor, addr string) (string, func()) {
	t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port of a stopped server may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewPGServer(eng, server.PGConfig{})
	go srv.Serve(ln)
	var once sync.Once
	stop := func() { once.Do(func() { srv.Close() }) }
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

func exec1(t *testing.T, eng *server.Engine, text string) {
	t.Helper()
	res, err := eng.Execute(context.Background(), server.NewSession(), text, nil)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	for _, r := range res {
		if r.Rows != nil {
			r.Rows.Close()
		}
	}
}

func waitOutput(t *testing.T, buf *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q:\n%s", want, buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A push query prints its header as soon as it starts, before any row has arrived: run in
// the process, and through a server over the Postgres wire.
func TestPushQueryHeaderAtOnce(t *testing.T) {
	eng := testEngine(t)
	exec1(t, eng, "CREATE STREAM ev (a BIGINT, label VARCHAR) WITH (queues = 1)")
	addr, _ := servePG(t, eng, "127.0.0.1:0")
	header := " a | label\n---+-------\n"
	for _, remote := range []bool{false, true} {
		p, out, _ := testPrinter(false)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			if remote {
				rc := &remoteConn{addr: addr}
				defer rc.close()
				done <- rc.runTo(ctx, p, "SELECT a, label FROM ev", true)
				return
			}
			res, err := eng.Execute(ctx, server.NewSession(), "SELECT a, label FROM ev", nil)
			if err != nil {
				done <- err
				return
			}
			done <- p.result(ctx, res[0])
		}()
		waitOutput(t, out, header)
		if got := out.String(); got != header {
			t.Errorf("remote=%v: before any row the output is %q, want the header %q", remote, got, header)
		}
		exec1(t, eng, "INSERT INTO ev VALUES (7, 'seven')")
		waitOutput(t, out, " 7 | seven\n")
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("remote=%v: the push query did not stop on cancel", remote)
		}
	}
}

// Tables are sized from all their rows, a later wider value included, and a cell holding
// line breaks keeps the columns aligned (psql's '+' continuation).
func TestTableSizedFromAllRows(t *testing.T) {
	eng := testEngine(t)
	exec1(t, eng, "CREATE STREAM s (a BIGINT) WITH (queues = 1)")
	exec1(t, eng, "CREATE STREAM a_much_longer_stream_name (a BIGINT) WITH (queues = 1)")
	addr, _ := servePG(t, eng, "127.0.0.1:0")
	want := ` name                      | connector | target                    | format | job
---------------------------+-----------+---------------------------+--------+-----
 a_much_longer_stream_name | broker    | a_much_longer_stream_name | json   |    
 s                         | broker    | s                         | json   |    
(2 rows)
`
	// In the process, and over the wire.
	p, out, _ := testPrinter(false)
	res, err := eng.Execute(context.Background(), server.NewSession(), "SHOW STREAMS", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.result(context.Background(), res[0]); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("SHOW STREAMS printed\n%s\nwant\n%s", out.String(), want)
	}
	p, out, _ = testPrinter(false)
	rc := &remoteConn{addr: addr}
	defer rc.close()
	if err := rc.runTo(context.Background(), p, "SHOW STREAMS", true); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("SHOW STREAMS over the wire printed\n%s\nwant\n%s", out.String(), want)
	}

	// A multi-line cell (a job's statement as typed).
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	tw := newTextTable(w, []string{"id", "statement", "state"}, [][]string{
		{"job-1", "CREATE STREAM x AS\nSELECT a\nFROM s", "RUNNING"},
		{"job-22", "INSERT INTO y SELECT a FROM s", "FINISHED"},
	}, func(int) bool { return false })
	tw.header()
	tw.line([]string{"job-1", "CREATE STREAM x AS\nSELECT a\nFROM s", "RUNNING"}, tw.right)
	tw.line([]string{"job-22", "INSERT INTO y SELECT a FROM s", "FINISHED"}, tw.right)
	w.Flush()
	wantJobs := ` id     | statement                     | state   
--------+-------------------------------+----------
 job-1  | CREATE STREAM x AS           +| RUNNING 
        | SELECT a                     +|         
        | FROM s                        |         
 job-22 | INSERT INTO y SELECT a FROM s | FINISHED
`
	if b.String() != wantJobs {
		t.Errorf("multi-line cells printed\n%s\nwant\n%s", b.String(), wantJobs)
	}
}

// After the server restarts, the shell's next statement reconnects and runs instead of
// failing with a closed connection; the user is told the session was reset.
func TestRemoteShellReconnects(t *testing.T) {
	eng := testEngine(t)
	addr, stop := servePG(t, eng, "127.0.0.1:0")
	var notes []string
	rc := &remoteConn{addr: addr, check: true, note: func(s string) { notes = append(notes, s) }}
	defer rc.close()
	p, out, _ := testPrinter(false)
	if err := rc.runTo(context.Background(), p, "SET offset_reset = 'earliest'", true); err != nil {
		t.Fatal(err)
	}
	stop()
	servePG(t, eng, addr)
	if err := rc.runTo(context.Background(), p, "SELECT 1 + 1 AS two", true); err != nil {
		t.Fatalf("the first statement after a server restart failed: %v", err)
	}
	if !strings.Contains(out.String(), " two\n-----\n   2\n(1 row)\n") {
		t.Errorf("output after the restart:\n%s", out.String())
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "reconnected") {
		t.Errorf("notes %q, want one saying it reconnected", notes)
	}
}

// Stopping a push query over the wire (Ctrl-C cancels the statement's context) prints no
// error: the server's 57014 answers the client's own cancel request.
func TestRemotePushQueryStopsQuietly(t *testing.T) {
	eng := testEngine(t)
	exec1(t, eng, "CREATE STREAM ev (a BIGINT) WITH (queues = 1)")
	addr, _ := servePG(t, eng, "127.0.0.1:0")
	p, out, _ := testPrinter(false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	rc := &remoteConn{addr: addr}
	defer rc.close()
	go func() { done <- rc.runTo(ctx, p, "SELECT a FROM ev", true) }()
	waitOutput(t, out, " a\n---\n")
	exec1(t, eng, "INSERT INTO ev VALUES (7)")
	waitOutput(t, out, " 7\n")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("a push query stopped by its client: %v", err)
	}
}

// A push query that starts at the end of a quiet topic (offset_reset = 'latest') says once,
// after a moment without rows, that it waits for new records and how to read from the
// beginning: in the process (on the printer's stderr) and over the wire (a NoticeResponse).
// With offset_reset = 'earliest' it says nothing.
func TestPushQueryWaitingNotice(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Open(broker.Config{Dir: filepath.Join(dir, "broker")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	eng, err := server.Open(server.Config{DataDir: dir, StateBackend: "memory", Broker: b, Log: &syncBuffer{}, PushWaitNotice: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	exec1(t, eng, "CREATE STREAM ev (a BIGINT) WITH (queues = 1)")
	const want = "waiting for new records"

	p, _, errOut := testPrinter(false)
	ctx, cancel := context.WithCancel(context.Background())
	res, err := eng.Execute(ctx, server.NewSession(), "SELECT a FROM ev", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.result(ctx, res[0]) }()
	waitOutput(t, errOut, want)
	cancel()
	<-done
	if n := strings.Count(errOut.String(), want); n != 1 || !strings.Contains(errOut.String(), "SET offset_reset = 'earliest'") {
		t.Errorf("in the process: stderr %q", errOut.String())
	}

	addr, _ := servePG(t, eng, "127.0.0.1:0")
	notices := make(chan string, 4)
	cfg, err := pgconn.ParseConfig("postgres://rsql@" + addr + "/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices <- n.Message }
	conn, err := pgconn.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		got := <-notices
		if !strings.Contains(got, want) {
			t.Errorf("over the wire: notice %q", got)
		}
		cancel()
	}()
	conn.Exec(ctx, "SELECT a FROM ev").ReadAll()

	// Reading from the beginning: no such notice, the rows come.
	exec1(t, eng, "INSERT INTO ev VALUES (1)")
	sess := server.NewSession()
	if _, err := eng.Execute(context.Background(), sess, "SET offset_reset = 'earliest'", nil); err != nil {
		t.Fatal(err)
	}
	p, out, errOut := testPrinter(false)
	res, err = eng.Execute(context.Background(), sess, "SELECT a FROM ev LIMIT 1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.result(context.Background(), res[0]); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errOut.String(), want) || !strings.Contains(out.String(), "(1 row)") {
		t.Errorf("earliest: stdout %q stderr %q", out.String(), errOut.String())
	}
}
