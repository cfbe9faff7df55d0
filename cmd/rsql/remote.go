package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"rsql/server"
	"rsql/sql"

	"rsql/server/pgwire"
)

// connectServer opens a Postgres-wire connection to an rsql server at addr (host:port).
func connectServer(ctx context.Context, addr string) (*pgconn.PgConn, error) {
	host, port := addr, "5433"
	if h, p, ok := cutLast(addr, ":"); ok {
		host, port = h, p
	}
	// The user is rsql unless RSQL_USER says; the password comes from RSQL_PASSWORD, or
	// PGPASSWORD (and the rest of libpq's PG* variables, such as PGSSLMODE and
	// PGSSLROOTCERT, apply). TLS is used when the server offers it (sslmode=prefer).
	user := os.Getenv("RSQL_USER")
	if user == "" {
		user = server.AdminUser
	}
	sslmode := "?sslmode=prefer"
	if os.Getenv("PGSSLMODE") != "" {
		sslmode = ""
	}
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("postgres://%s@%s:%s/rsql%s", url.PathEscape(user), host, port, sslmode))
	if err != nil {
		return nil, &exitError{fmt.Sprintf("server address %q is not valid: %v", addr, err)}
	}
	if pw := os.Getenv("RSQL_PASSWORD"); pw != "" {
		cfg.Password = pw
	}
	// Cancelling a statement's context sends a CancelRequest, so the connection (and its
	// session settings) survive a cancelled push query.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, CancelRequestDelay: 0, DeadlineDelay: 5 * time.Second}
	}
	// Notices (what a statement did, BEGIN's "no transactions") go to stderr as the
	// embedded engine's do.
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		fmt.Fprintf(os.Stderr, "%s: %s\n", n.Severity, n.Message)
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			// A server answered and refused: say why.
			hint := ""
			if pe.Code == "28P01" || pe.Code == "28000" {
				hint = fmt.Sprintf(" (user %s: set RSQL_PASSWORD, or PGPASSWORD; RSQL_USER names another user)", user)
			}
			return nil, &refusedError{exitError{fmt.Sprintf("the rsql server at %s refused the connection: %s%s", addr, pe.Message, hint)}}
		}
		return nil, &exitError{fmt.Sprintf("no rsql server answers at %s: start one with `rsql server` (%v)", addr, err)}
	}
	return conn, nil
}

// refusedError is a connection a server refused (authentication, too many clients): a
// server runs there.
type refusedError struct{ exitError }

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// runRemote sends text to a server over the simple query protocol and prints each result
// as it streams in.
func runRemote(ctx context.Context, addr, text string, jsonOut bool) error {
	rc := &remoteConn{addr: addr}
	defer rc.close()
	return rc.run(ctx, text, jsonOut)
}

// remoteConn is the shell's connection to a server: opened on first use, kept across
// statements (so SET lasts), reopened when it broke (the server restarted): the statement
// that finds it broken runs on the new connection.
type remoteConn struct {
	addr string
	conn *pgconn.PgConn
	// check makes get test a connection kept from an earlier statement with a round trip
	// before using it (the shell: the server may have restarted in between).
	check bool
	// note receives what the user should know (a reconnection); nil: stderr.
	note func(string)
}

func (rc *remoteConn) get(ctx context.Context) (*pgconn.PgConn, error) {
	if rc.conn != nil && !rc.conn.IsClosed() {
		if !rc.check {
			return rc.conn, nil
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := rc.conn.Ping(pctx)
		cancel()
		if err == nil {
			return rc.conn, nil
		}
	}
	reconnect := rc.conn != nil
	if reconnect {
		rc.conn.Close(context.Background())
		rc.conn = nil
	}
	conn, err := connectServer(ctx, rc.addr)
	if err != nil {
		return nil, err
	}
	rc.conn = conn
	if reconnect {
		rc.tell(fmt.Sprintf("the connection to %s was lost (did the server restart?): reconnected; session settings are back to their defaults", rc.addr))
	}
	return conn, nil
}

func (rc *remoteConn) tell(msg string) {
	if rc.note != nil {
		rc.note(msg)
		return
	}
	fmt.Fprintln(os.Stderr, msg)
}

func (rc *remoteConn) close() {
	if rc.conn != nil {
		rc.conn.Close(context.Background())
		rc.conn = nil
	}
}

// catalogNames lists the server's stream, view and job names.
func (rc *remoteConn) catalogNames(ctx context.Context) []string {
	conn, err := rc.get(ctx)
	if err != nil {
		return nil
	}
	var names []string
	for _, q := range []string{"SHOW STREAMS", "SHOW VIEWS", "SHOW JOBS"} {
		res := conn.ExecParams(ctx, q, nil, nil, nil, nil).Read()
		if res.Err != nil {
			continue
		}
		for _, r := range res.Rows {
			if len(r) > 0 && r[0] != nil {
				names = append(names, string(r[0]))
			}
		}
	}
	return names
}

func (rc *remoteConn) run(ctx context.Context, text string, jsonOut bool) error {
	return rc.runTo(ctx, newPrinter(os.Stdout, jsonOut), text, true)
}

// streamingOf says, per statement of text, how its rows print: the server does not say
// whether a result is a push query, so a SELECT over a relation prints as a table when all
// its rows come at once and as they come otherwise; other results are tables.
func streamingOf(text string) []streaming {
	stmts, err := sql.Parse(text)
	if err != nil {
		return nil
	}
	out := make([]streaming, len(stmts))
	for i, st := range stmts {
		out[i] = streamNever
		if sel, ok := st.(*sql.Select); ok && sel.From != "" {
			out[i] = streamAfter
		}
	}
	return out
}

// runTo runs text and prints its results with p. retry allows one more attempt on a new
// connection when the kept one broke before the server saw the statement.
func (rc *remoteConn) runTo(ctx context.Context, p *printer, text string, retry bool) error {
	conn, err := rc.get(ctx)
	if err != nil {
		return err
	}
	modes := streamingOf(text)
	started := false
	mrr := conn.Exec(ctx, text)
	for i := 0; mrr.NextResult(); i++ {
		started = true
		rr := mrr.ResultReader()
		fields := rr.FieldDescriptions()
		if len(fields) == 0 {
			tag, err := rr.Close()
			if err != nil {
				break
			}
			p.result(ctx, &server.Result{Tag: tag.String()})
			continue
		}
		cols := make(sql.Schema, len(fields))
		for i, f := range fields {
			cols[i] = sql.Column{Name: f.Name, Type: sql.Type{Kind: pgwire.KindOfOID(f.DataTypeOID)}}
		}
		mode := streamAfter
		if i < len(modes) {
			mode = modes[i]
		}
		if err := p.resultMode(ctx, &server.Result{Columns: cols, Rows: &wireRows{rr: rr, cols: cols}}, mode); err != nil {
			break
		}
	}
	if err := mrr.Close(); err != nil && !started && retry && rc.check && pgconn.SafeToRetry(err) {
		// The connection broke before the server saw the statement: run it on a new one.
		rc.conn.Close(context.Background())
		return rc.runTo(ctx, p, text, false)
	} else if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == sql.CodeQueryCanceled && ctx.Err() != nil {
			// The user stopped the statement (Ctrl-C): what it printed stands, as it does
			// in the process; the server's "canceling statement" is no error to show.
			return nil
		}
		if errors.As(err, &pe) {
			se := &sql.Error{Code: pe.Code, Message: pe.Message, Pos: -1}
			if pe.Position > 0 {
				se.Line, se.Column = lineCol(text, int(pe.Position))
			}
			return &exitError{describeError(text, se)}
		}
		return &exitError{err.Error()}
	}
	return nil
}

// lineCol turns a 1-based character position into a line and column.
func lineCol(text string, pos int) (int, int) {
	line, col, n := 1, 1, 0
	for _, r := range text {
		n++
		if n == pos {
			break
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// wireRows adapts a pgconn result to server.Rows, turning text values into typed values.
type wireRows struct {
	rr   *pgconn.ResultReader
	cols sql.Schema
}

func (w *wireRows) Next(ctx context.Context) (sql.Row, error) {
	if !w.rr.NextRow() {
		if _, err := w.rr.Close(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	vals := w.rr.Values()
	row := make(sql.Row, len(vals))
	for i, b := range vals {
		if b == nil {
			continue
		}
		s := string(b)
		switch w.cols[i].Type.Kind {
		case sql.KindBool:
			row[i] = sql.Bool(s == "t" || s == "true")
		case sql.KindInt, sql.KindBigInt:
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("column %q: the server sent %q, which is not an integer", w.cols[i].Name, s)
			}
			row[i] = sql.Value{K: w.cols[i].Type.Kind, I: n}
		case sql.KindDecimal:
			// NUMERIC keeps every digit the server sent.
			if _, err := strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("column %q: the server sent %q, which is not a number", w.cols[i].Name, s)
			}
			row[i] = sql.Value{K: sql.KindDecimal, S: s}
		case sql.KindDouble:
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("column %q: the server sent %q, which is not a number", w.cols[i].Name, s)
			}
			row[i] = sql.Double(f)
		case sql.KindTimestamp:
			if ms, ok := sql.ParseTimestamp(s); ok {
				row[i] = sql.Timestamp(ms)
			} else {
				row[i] = sql.Varchar(s)
			}
		case sql.KindJSON:
			row[i] = sql.JSONValue(s)
		default:
			row[i] = sql.Varchar(s)
		}
	}
	return row, nil
}

func (w *wireRows) Close() error { _, err := w.rr.Close(); return err }
