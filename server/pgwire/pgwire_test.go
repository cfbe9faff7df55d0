package pgwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"

	"rsql/sql"
)

// pgTestRows yields fixed rows.
type pgTestRows struct {
	rows   []sql.Row
	i      int
	closed *bool
}

func (r *pgTestRows) Next(ctx context.Context) (sql.Row, error) {
	if r.i >= len(r.rows) {
		return nil, io.EOF
	}
	r.i++
	return r.rows[r.i-1], nil
}

func (r *pgTestRows) Close() error {
	if r.closed != nil {
		*r.closed = true
	}
	return nil
}

// pgTestPush yields n rows at once (0, 1, ...), then blocks until its context is done, as a
// push query waiting for input does. When limit > 0 it ends after limit rows instead.
type pgTestPush struct {
	n, limit int
	i        int
	waiting  chan struct{} // closed when Next first blocks
	once     sync.Once
	closed   chan struct{}
}

func (r *pgTestPush) Next(ctx context.Context) (sql.Row, error) {
	if r.limit > 0 && r.i >= r.limit {
		return nil, io.EOF
	}
	if r.i < r.n {
		r.i++
		return sql.Row{sql.BigInt(int64(r.i - 1)), sql.Varchar("row " + strconv.Itoa(r.i-1))}, nil
	}
	r.once.Do(func() { close(r.waiting) })
	<-ctx.Done()
	return nil, ctx.Err()
}

func (r *pgTestPush) Close() error {
	select {
	case <-r.closed:
	default:
		close(r.closed)
	}
	return nil
}

var pgTypedCols = sql.Schema{
	{Name: "b", Type: sql.TypeBool},
	{Name: "i", Type: sql.TypeInt},
	{Name: "big", Type: sql.TypeBigInt},
	{Name: "d", Type: sql.TypeDouble},
	{Name: "dec", Type: sql.Type{Kind: sql.KindDecimal, Precision: 10, Scale: 2}},
	{Name: "s", Type: sql.TypeVarchar},
	{Name: "ts", Type: sql.TypeTimestamp},
	{Name: "j", Type: sql.TypeJSON},
}

var pgTSValue = time.Date(2026, 11, 30, 5, 0, 10, 123e6, time.UTC)

var pgTypedRows = []sql.Row{
	{sql.Bool(true), sql.Int(-42), sql.BigInt(math.MaxInt64), sql.Double(2.5), sql.Decimal(-12345, 2), sql.Varchar("héllo, world"), sql.Timestamp(pgTSValue.UnixMilli()), sql.JSONValue(`{"a":[1,2]}`)},
	{sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null},
}

var pgPushCols = sql.Schema{{Name: "n", Type: sql.TypeBigInt}, {Name: "label", Type: sql.TypeVarchar}}

// pgTestExec is an Executor with a fixed repertoire of statements:
//
//	select 1            one INT row
//	select typed        pgTypedRows
//	select many         1000 BIGINT rows
//	echo $1, $2, ...    one row holding the parameters (types from describeParams)
//	insert ...          tag INSERT 0 3
//	push                a push query: pushN rows, then waits
//	push limit          a push query of 3 rows that ends
//	fail ...            a syntax error at the word "oops"
type pgTestExec struct {
	mu       sync.Mutex
	pushN    int
	pushEnd  bool // push ends after pushN rows instead of waiting
	lastPush *pgTestPush
	calls    int
	closed   []*bool
	// echoTypes are the parameter types Describe reports for echo.
	echoTypes []sql.Type
}

func (e *pgTestExec) statement(ctx context.Context, text string, params []sql.Value) (*Result, error) {
	t := strings.TrimSpace(text)
	low := strings.ToLower(t)
	switch {
	case low == "select 1":
		return &Result{Columns: sql.Schema{{Name: "?column?", Type: sql.TypeInt}}, Rows: &pgTestRows{rows: []sql.Row{{sql.Int(1)}}}, Tag: "SELECT"}, nil
	case low == "select typed":
		closed := new(bool)
		e.mu.Lock()
		e.closed = append(e.closed, closed)
		e.mu.Unlock()
		return &Result{Columns: pgTypedCols, Rows: &pgTestRows{rows: pgTypedRows, closed: closed}, Tag: "SELECT"}, nil
	case low == "select many":
		rows := make([]sql.Row, 1000)
		for i := range rows {
			rows[i] = sql.Row{sql.BigInt(int64(i))}
		}
		return &Result{Columns: sql.Schema{{Name: "n", Type: sql.TypeBigInt}}, Rows: &pgTestRows{rows: rows}}, nil
	case strings.HasPrefix(low, "echo"):
		cols := make(sql.Schema, len(params))
		for i, p := range params {
			k := p.K
			if i < len(e.echoTypes) {
				k = e.echoTypes[i].Kind
			}
			if k == sql.KindNull {
				k = sql.KindVarchar
			}
			cols[i] = sql.Column{Name: fmt.Sprintf("p%d", i+1), Type: sql.Type{Kind: k, Scale: p.Scale, Precision: 18}}
		}
		return &Result{Columns: cols, Rows: &pgTestRows{rows: []sql.Row{append(sql.Row(nil), params...)}}}, nil
	case strings.HasPrefix(low, "insert"):
		return &Result{Tag: "INSERT 0 3"}, nil
	case low == "push":
		r := &pgTestPush{n: e.pushN, waiting: make(chan struct{}), closed: make(chan struct{})}
		if e.pushEnd {
			r.limit = e.pushN
		}
		e.mu.Lock()
		e.lastPush = r
		e.mu.Unlock()
		return &Result{Columns: pgPushCols, Rows: r, Push: true, Tag: "SELECT"}, nil
	case low == "push limit":
		return &Result{Columns: pgPushCols, Rows: &pgTestPush{n: 3, limit: 3, waiting: make(chan struct{}), closed: make(chan struct{})}, Push: true}, nil
	case strings.HasPrefix(low, "fail"):
		pos := strings.Index(text, "oops")
		return nil, &sql.Error{Code: sql.CodeSyntax, Message: `syntax error at or near "oops"`, Pos: pos, Line: 1, Column: pos + 1}
	}
	return nil, sql.Errorf(sql.CodeNotSupported, "unknown test statement %q", t)
}

func (e *pgTestExec) Execute(ctx context.Context, sess *Session, text string, params []sql.Value) ([]*Result, error) {
	e.mu.Lock()
	e.calls++
	e.mu.Unlock()
	var out []*Result
	offset := 0
	for _, part := range strings.Split(text, ";") {
		if strings.TrimSpace(part) == "" {
			offset += len(part) + 1
			continue
		}
		r, err := e.statement(ctx, part, params)
		if err != nil {
			var se *sql.Error
			if errors.As(err, &se) && se.Pos >= 0 {
				se.Pos += offset
			}
			return out, err
		}
		out = append(out, r)
		offset += len(part) + 1
	}
	return out, nil
}

// pgDescribingExec adds Describe to pgTestExec.
type pgDescribingExec struct{ *pgTestExec }

func (e pgDescribingExec) Describe(ctx context.Context, sess *Session, text string) (*Description, error) {
	low := strings.ToLower(strings.TrimSpace(text))
	switch {
	case low == "select 1":
		return &Description{Columns: sql.Schema{{Name: "?column?", Type: sql.TypeInt}}}, nil
	case low == "select typed":
		return &Description{Columns: pgTypedCols}, nil
	case low == "select many":
		return &Description{Columns: sql.Schema{{Name: "n", Type: sql.TypeBigInt}}}, nil
	case strings.HasPrefix(low, "echo"):
		n, _ := ScanText(text)
		d := &Description{}
		for i := 0; i < n; i++ {
			t := sql.TypeVarchar
			if i < len(e.echoTypes) {
				t = e.echoTypes[i]
			}
			d.Params = append(d.Params, t)
			d.Columns = append(d.Columns, sql.Column{Name: fmt.Sprintf("p%d", i+1), Type: sql.Type{Kind: t.Kind, Precision: 18}})
		}
		return d, nil
	case strings.HasPrefix(low, "insert"):
		return &Description{}, nil
	case strings.HasPrefix(low, "push"):
		return &Description{Columns: pgPushCols}, nil
	case strings.HasPrefix(low, "fail"):
		_, err := e.statement(ctx, text, nil)
		return nil, err
	}
	return nil, sql.Errorf(sql.CodeNotSupported, "unknown test statement %q", text)
}

func listenLoopback(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startPGServer serves exec on a loopback port and returns its address.
func startPGServer(t *testing.T, ex Executor) (*Server, string) {
	t.Helper()
	srv := NewServer(ex, Config{})
	ln := listenLoopback(t)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, ln.Addr().String()
}

func pgConnect(t testing.TB, addr string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://tester@%s:%s/rsql?sslmode=disable", host, port))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	// Cancel a query on context cancellation with a CancelRequest and keep the connection
	// (pgx's default closes it).
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Minute}
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

var pgAllModes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheStatement,
	pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeDescribeExec,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

func TestPGStartupParameters(t *testing.T) {
	_, addr := startPGServer(t, pgDescribingExec{&pgTestExec{}})
	conn := pgConnect(t, addr, pgx.QueryExecModeSimpleProtocol)
	pc := conn.PgConn()
	want := map[string]string{
		"server_version": DefaultPGServerVersion, "client_encoding": "UTF8", "DateStyle": "ISO, MDY",
		"integer_datetimes": "on", "standard_conforming_strings": "on", "TimeZone": "UTC",
	}
	for k, v := range want {
		if got := pc.ParameterStatus(k); got != v {
			t.Errorf("ParameterStatus(%s) = %q, want %q", k, got, v)
		}
	}
	if pc.PID() == 0 {
		t.Error("no BackendKeyData")
	}
}

func TestPGTypedScan(t *testing.T) {
	for _, withDescribe := range []bool{true, false} {
		te := &pgTestExec{}
		var ex Executor = te
		if withDescribe {
			ex = pgDescribingExec{te}
		}
		_, addr := startPGServer(t, ex)
		for _, mode := range pgAllModes {
			t.Run(fmt.Sprintf("describe=%v/%v", withDescribe, mode), func(t *testing.T) {
				conn := pgConnect(t, addr, mode)
				ctx := context.Background()
				var one int32
				if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
					t.Fatalf("select 1: %v %v", one, err)
				}
				rows, err := conn.Query(ctx, "select typed")
				if err != nil {
					t.Fatal(err)
				}
				fds := rows.FieldDescriptions()
				wantOIDs := []uint32{16, 23, 20, 701, 1700, 25, 1114, 114}
				if len(fds) != len(wantOIDs) {
					t.Fatalf("%d fields", len(fds))
				}
				for i, fd := range fds {
					if fd.DataTypeOID != wantOIDs[i] || fd.Name != pgTypedCols[i].Name {
						t.Errorf("field %d: %s oid %d, want %s oid %d", i, fd.Name, fd.DataTypeOID, pgTypedCols[i].Name, wantOIDs[i])
					}
				}
				var (
					b   bool
					i   int32
					big int64
					d   float64
					dec string
					s   string
					ts  time.Time
					j   map[string]any
				)
				if !rows.Next() {
					t.Fatalf("no row: %v", rows.Err())
				}
				if err := rows.Scan(&b, &i, &big, &d, &dec, &s, &ts, &j); err != nil {
					t.Fatal(err)
				}
				if !b || i != -42 || big != math.MaxInt64 || d != 2.5 || dec != "-123.45" || s != "héllo, world" || !ts.Equal(pgTSValue) || fmt.Sprint(j["a"]) != "[1 2]" {
					t.Errorf("row 1: %v %v %v %v %v %q %v %v", b, i, big, d, dec, s, ts, j)
				}
				var (
					nb  *bool
					ni  *int32
					nbg *int64
					nd  *float64
					nde *string
					ns  *string
					nts *time.Time
					nj  *string
				)
				if !rows.Next() {
					t.Fatalf("no row 2: %v", rows.Err())
				}
				if err := rows.Scan(&nb, &ni, &nbg, &nd, &nde, &ns, &nts, &nj); err != nil {
					t.Fatal(err)
				}
				if nb != nil || ni != nil || nbg != nil || nd != nil || nde != nil || ns != nil || nts != nil || nj != nil {
					t.Errorf("row 2 not all NULL")
				}
				if rows.Next() {
					t.Fatal("a third row")
				}
				if rows.Err() != nil {
					t.Fatal(rows.Err())
				}
				if tag := rows.CommandTag().String(); tag != "SELECT 2" {
					t.Errorf("tag %q", tag)
				}
				tag, err := conn.Exec(ctx, "insert into t values (1)")
				if err != nil || tag.String() != "INSERT 0 3" {
					t.Errorf("insert: %q %v", tag, err)
				}
				var n int
				many, _ := conn.Query(ctx, "select many")
				var sum int64
				for many.Next() {
					var v int64
					many.Scan(&v)
					sum += v
					n++
				}
				if many.Err() != nil || n != 1000 || sum != 999*1000/2 {
					t.Errorf("select many: %d rows, sum %d, %v", n, sum, many.Err())
				}
				// Every result's rows were closed once the client had them.
				te.mu.Lock()
				for i, closed := range te.closed {
					if !*closed {
						t.Errorf("rows of query %d not closed", i)
					}
				}
				te.mu.Unlock()
			})
		}
	}
}

func TestPGParameters(t *testing.T) {
	ex := &pgTestExec{echoTypes: []sql.Type{sql.TypeBigInt, sql.TypeDouble, sql.TypeVarchar, sql.TypeBool, sql.TypeTimestamp, sql.TypeInt, {Kind: sql.KindDecimal, Precision: 18, Scale: 3}, sql.TypeJSON}}
	_, addr := startPGServer(t, pgDescribingExec{ex})
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			conn := pgConnect(t, addr, mode)
			var (
				big int64
				d   float64
				s   string
				b   bool
				ts  time.Time
				i   int32
				dec float64
				j   string
			)
			err := conn.QueryRow(context.Background(), "echo $1, $2, $3, $4, $5, $6, $7, $8",
				int64(-1<<40), 3.25, "it's", true, pgTSValue, int32(7), "12.345", `{"k":"v"}`).
				Scan(&big, &d, &s, &b, &ts, &i, &dec, &j)
			if err != nil {
				t.Fatal(err)
			}
			if big != -1<<40 || d != 3.25 || s != "it's" || !b || !ts.Equal(pgTSValue) || i != 7 || dec != 12.345 || j != `{"k":"v"}` {
				t.Fatalf("echo: %v %v %q %v %v %v %v %q", big, d, s, b, ts, i, dec, j)
			}
			// NULL parameters.
			var np *int64
			if err := conn.QueryRow(context.Background(), "echo $1, $2, $3, $4, $5, $6, $7, $8", nil, nil, nil, nil, nil, nil, nil, nil).Scan(&np, nil, nil, nil, nil, nil, nil, nil); err != nil || np != nil {
				t.Fatalf("null params: %v %v", np, err)
			}
		})
	}
	// Without a Describer the parameters are text.
	_, addr2 := startPGServer(t, &pgTestExec{})
	conn := pgConnect(t, addr2, pgx.QueryExecModeCacheStatement)
	var s1, s2 string
	if err := conn.QueryRow(context.Background(), "echo $1, $2", "a", "b").Scan(&s1, &s2); err != nil || s1 != "a" || s2 != "b" {
		t.Fatalf("text params: %q %q %v", s1, s2, err)
	}
}

func TestPGErrors(t *testing.T) {
	_, addr := startPGServer(t, pgDescribingExec{&pgTestExec{}})
	for _, mode := range pgAllModes {
		t.Run(mode.String(), func(t *testing.T) {
			conn := pgConnect(t, addr, mode)
			ctx := context.Background()
			_, err := conn.Exec(ctx, "fail here: oops")
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a PgError", err)
			}
			if pe.Code != sql.CodeSyntax || pe.Message != `syntax error at or near "oops"` || pe.Position != 12 {
				t.Fatalf("got code %s message %q position %d", pe.Code, pe.Message, pe.Position)
			}
			// Still usable.
			var one int32
			if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("after error: %v %v", one, err)
			}
			if _, err := conn.Exec(ctx, "no such thing"); !errors.As(err, &pe) || pe.Code != sql.CodeNotSupported {
				t.Fatalf("unknown statement: %v", err)
			}
		})
	}
}

func TestPGSimpleProtocolMultipleStatements(t *testing.T) {
	_, addr := startPGServer(t, &pgTestExec{})
	conn := pgConnect(t, addr, pgx.QueryExecModeSimpleProtocol)
	ctx := context.Background()
	results, err := conn.PgConn().Exec(ctx, "select 1; insert into x values (1); select typed").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d results", len(results))
	}
	if results[0].CommandTag.String() != "SELECT 1" || string(results[0].Rows[0][0]) != "1" {
		t.Errorf("result 1: %s %q", results[0].CommandTag, results[0].Rows)
	}
	if results[1].CommandTag.String() != "INSERT 0 3" || results[1].FieldDescriptions != nil {
		t.Errorf("result 2: %s", results[1].CommandTag)
	}
	want := []string{"t", "-42", "9223372036854775807", "2.5", "-123.45", "héllo, world", "2026-11-30 05:00:10.123", `{"a":[1,2]}`}
	for i, w := range want {
		if got := string(results[2].Rows[0][i]); got != w {
			t.Errorf("text of %s: %q, want %q", pgTypedCols[i].Name, got, w)
		}
	}
	if results[2].Rows[1][0] != nil {
		t.Errorf("NULL sent as %q", results[2].Rows[1][0])
	}
	// The error ends the text after the statements before it; its position counts
	// characters of the whole text.
	results, err = conn.PgConn().Exec(ctx, "select 1; fail é oops; select 1").ReadAll()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Position != 18 || len(results) != 1 || results[0].CommandTag.String() != "SELECT 1" {
		t.Fatalf("got %d results, %v", len(results), err)
	}
	// Empty query.
	if results, err := conn.PgConn().Exec(ctx, " ; ").ReadAll(); err != nil || len(results) != 1 || results[0].CommandTag.String() != "" {
		t.Fatalf("empty query: %v %v", results, err)
	}
}

func TestPGRowLimitPortalSuspended(t *testing.T) {
	ex := pgDescribingExec{&pgTestExec{}}
	_, addr := startPGServer(t, ex)
	conn := pgConnect(t, addr, pgx.QueryExecModeSimpleProtocol)
	pc := conn.PgConn()
	ctx := context.Background()
	if _, err := pc.Prepare(ctx, "many", "select many", nil); err != nil {
		t.Fatal(err)
	}
	// Drive Bind/Execute(limit)/Execute/Sync by hand with the frontend.
	fe := pc.Frontend()
	fe.SendBind(&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "many", ResultFormatCodes: []int16{1}})
	fe.SendExecute(&pgproto3.Execute{Portal: "p", MaxRows: 400})
	fe.SendExecute(&pgproto3.Execute{Portal: "p", MaxRows: 400})
	fe.SendExecute(&pgproto3.Execute{Portal: "p", MaxRows: 400})
	fe.SendExecute(&pgproto3.Execute{Portal: "p"})
	fe.SendSync(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []string
	rows := 0
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			rows++
			if len(m.Values[0]) != 8 {
				t.Fatalf("binary int8 of %d bytes", len(m.Values[0]))
			}
			continue
		case *pgproto3.CommandComplete:
			got = append(got, fmt.Sprintf("%d rows, complete %s", rows, m.CommandTag))
		case *pgproto3.PortalSuspended:
			got = append(got, fmt.Sprintf("%d rows, suspended", rows))
		case *pgproto3.ReadyForQuery:
			got = append(got, "ready")
		default:
			got = append(got, fmt.Sprintf("%T", msg))
			continue
		}
		rows = 0
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	want := "BindComplete|400 rows, suspended|400 rows, suspended|200 rows, complete SELECT 1000|0 rows, complete SELECT 1000|ready"
	if strings.Join(got, "|") != strings.ReplaceAll(want, "BindComplete", "*pgproto3.BindComplete") {
		t.Fatalf("got %s", strings.Join(got, "|"))
	}
	// The connection still works.
	var one int32
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatal(err)
	}
}

func TestPGExtendedErrorSkipsToSync(t *testing.T) {
	_, addr := startPGServer(t, pgDescribingExec{&pgTestExec{}})
	conn := pgConnect(t, addr, pgx.QueryExecModeSimpleProtocol)
	fe := conn.PgConn().Frontend()
	fe.SendBind(&pgproto3.Bind{PreparedStatement: "nope"})
	fe.SendExecute(&pgproto3.Execute{})
	fe.SendParse(&pgproto3.Parse{Query: "select 1"}) // skipped
	fe.SendSync(&pgproto3.Sync{})
	fe.SendParse(&pgproto3.Parse{Query: "select 1; select 1"})
	fe.SendSync(&pgproto3.Sync{})
	fe.Flush()
	var got []string
	for len(got) < 4 {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			got = append(got, "error "+m.Code)
		case *pgproto3.ReadyForQuery:
			got = append(got, "ready")
		default:
			got = append(got, fmt.Sprintf("%T", msg))
		}
	}
	if strings.Join(got, "|") != "error 26000|ready|error 42601|ready" {
		t.Fatalf("got %v", got)
	}

	// Closed portals and statements are gone; duplicates are refused.
	fe.SendParse(&pgproto3.Parse{Name: "s", Query: "select 1"})
	fe.SendParse(&pgproto3.Parse{Name: "s", Query: "select 1"})
	fe.SendSync(&pgproto3.Sync{})
	fe.SendBind(&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s"})
	fe.SendClose(&pgproto3.Close{ObjectType: 'P', Name: "p"})
	fe.SendExecute(&pgproto3.Execute{Portal: "p"})
	fe.SendSync(&pgproto3.Sync{})
	fe.SendClose(&pgproto3.Close{ObjectType: 'S', Name: "s"})
	fe.SendBind(&pgproto3.Bind{PreparedStatement: "s"})
	fe.SendSync(&pgproto3.Sync{})
	fe.SendParse(&pgproto3.Parse{Query: ""})
	fe.SendBind(&pgproto3.Bind{})
	fe.SendExecute(&pgproto3.Execute{})
	fe.SendSync(&pgproto3.Sync{})
	fe.Flush()
	got = nil
	for ready := 0; ready < 4; {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			got = append(got, "error "+m.Code)
		case *pgproto3.ReadyForQuery:
			got = append(got, "ready")
			ready++
		default:
			got = append(got, strings.TrimPrefix(fmt.Sprintf("%T", msg), "*pgproto3."))
		}
	}
	want := "ParseComplete|error 42P05|ready|BindComplete|CloseComplete|error 34000|ready|CloseComplete|error 26000|ready|ParseComplete|BindComplete|EmptyQueryResponse|ready"
	if strings.Join(got, "|") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
}

func TestPGPushQueryCancel(t *testing.T) {
	ex := &pgTestExec{pushN: 5}
	_, addr := startPGServer(t, pgDescribingExec{ex})
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) {
			conn := pgConnect(t, addr, mode)
			ctx, cancel := context.WithCancel(context.Background())
			rows, err := conn.Query(ctx, "push")
			if err != nil {
				t.Fatal(err)
			}
			// The rows stream before the query ends.
			for i := 0; i < 5; i++ {
				if !rows.Next() {
					t.Fatalf("row %d: %v", i, rows.Err())
				}
				var n int64
				var label string
				if err := rows.Scan(&n, &label); err != nil || n != int64(i) || label != "row "+strconv.Itoa(i) {
					t.Fatalf("row %d: %d %q %v", i, n, label, err)
				}
			}
			ex.mu.Lock()
			push := ex.lastPush
			ex.mu.Unlock()
			<-push.waiting
			cancel() // pgx sends a CancelRequest
			if rows.Next() {
				t.Fatal("a row after cancel")
			}
			var pe *pgconn.PgError
			if err := rows.Err(); !errors.As(err, &pe) || pe.Code != "57014" || pe.Message != "canceling statement due to user request" {
				t.Fatalf("after cancel: %v", err)
			}
			<-push.closed // the query was stopped
			var one int32
			if err := conn.QueryRow(context.Background(), "select 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("after cancel: %v", err)
			}
			// A push query that ends by itself completes normally.
			var n int
			prow, _ := conn.Query(context.Background(), "push limit")
			for prow.Next() {
				n++
			}
			if prow.Err() != nil || n != 3 || prow.CommandTag().String() != "SELECT 3" {
				t.Fatalf("push limit: %d rows, %v, %s", n, prow.Err(), prow.CommandTag())
			}
		})
	}
}

func TestPGCancelRequestExplicit(t *testing.T) {
	ex := &pgTestExec{pushN: 0}
	_, addr := startPGServer(t, ex)
	conn := pgConnect(t, addr, pgx.QueryExecModeSimpleProtocol)
	pc := conn.PgConn()
	errc := make(chan error, 1)
	go func() {
		_, err := pc.Exec(context.Background(), "push").ReadAll()
		errc <- err
	}()
	for {
		ex.mu.Lock()
		push := ex.lastPush
		ex.mu.Unlock()
		if push != nil {
			<-push.waiting
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A cancel request with the wrong key does nothing; the right one cancels.
	host, port, _ := net.SplitHostPort(addr)
	bad, err := net.Dial("tcp", net.JoinHostPort(host, port))
	if err != nil {
		t.Fatal(err)
	}
	bad.Write([]byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e, byte(pc.PID() >> 24), byte(pc.PID() >> 16), byte(pc.PID() >> 8), byte(pc.PID()), 1, 2, 3, 4})
	bad.Close()
	if err := pc.CancelRequest(context.Background()); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("got %v", err)
	}
}

func TestPGClientGoneStopsPushQuery(t *testing.T) {
	ex := &pgTestExec{pushN: 1}
	_, addr := startPGServer(t, ex)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// Startup and a push query by hand, then hang up.
	startup := []byte{0, 0, 0, 0, 0, 3, 0, 0}
	startup = append(startup, "user\x00x\x00\x00"...)
	startup[3] = byte(len(startup))
	nc.Write(startup)
	q := append([]byte{'Q', 0, 0, 0, 0}, "push\x00"...)
	q[4] = byte(len(q) - 1)
	nc.Write(q)
	for {
		ex.mu.Lock()
		push := ex.lastPush
		ex.mu.Unlock()
		if push != nil {
			<-push.waiting
			nc.Close()
			<-push.closed // stopped because the client went away
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPGServerClose(t *testing.T) {
	ex := &pgTestExec{pushN: 0}
	srv, addr := startPGServer(t, ex)
	conn := pgConnect(t, addr, pgx.QueryExecModeSimpleProtocol)
	errc := make(chan error, 1)
	go func() {
		_, err := conn.PgConn().Exec(context.Background(), "push").ReadAll()
		errc <- err
	}()
	for {
		ex.mu.Lock()
		push := ex.lastPush
		ex.mu.Unlock()
		if push != nil {
			<-push.waiting
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.Close()
	if err := <-errc; err == nil {
		t.Fatal("push query survived Close")
	}
}

func TestPsql(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("psql not installed")
	}
	_, addr := startPGServer(t, &pgTestExec{})
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(psql, "-X", "-h", host, "-p", port, "-U", "rsql", "-d", "rsql", "-c", "select 1")
	cmd.Env = append(cmd.Environ(), "PGCONNECT_TIMEOUT=10", "PGPASSWORD=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	want := " ?column? \n----------\n        1\n(1 row)\n\n"
	if string(out) != want {
		t.Fatalf("psql printed %q, want %q", out, want)
	}
	cmd = exec.Command(psql, "-X", "-h", host, "-p", port, "-U", "rsql", "-d", "rsql", "-c", "fail oops")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `ERROR:  syntax error at or near "oops"`) || !strings.Contains(string(out), "LINE 1: fail oops") {
		t.Fatalf("psql error: %v\n%s", err, out)
	}
}

// Without a Describer, a statement with parameters is described as having no columns
// (NoData); pgx then describes the portal, which runs the statement once.
func TestPGDescribeWithoutDescriber(t *testing.T) {
	te := &pgTestExec{echoTypes: []sql.Type{sql.TypeVarchar, sql.TypeVarchar}}
	_, addr := startPGServer(t, te)
	conn := pgConnect(t, addr, pgx.QueryExecModeCacheStatement)
	var a, b string
	if err := conn.QueryRow(context.Background(), "echo $1, $2", "x", "y").Scan(&a, &b); err != nil || a != "x" || b != "y" {
		t.Fatalf("got %q %q %v", a, b, err)
	}
	var one int32
	if err := conn.QueryRow(context.Background(), "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("select 1: %v", err)
	}
	te.mu.Lock()
	calls := te.calls
	te.mu.Unlock()
	if calls != 2 { // each statement ran once (select 1 at Describe, its results kept for Bind)
		t.Fatalf("%d executions", calls)
	}
}
