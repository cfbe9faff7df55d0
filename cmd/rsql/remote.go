package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"rsql/server"
	"rsql/sql"
)

// connectServer opens a Postgres-wire connection to an rsql server at addr (host:port).
func connectServer(ctx context.Context, addr string) (*pgconn.PgConn, error) {
	host, port := addr, "5433"
	if h, p, ok := cutLast(addr, ":"); ok {
		host, port = h, p
	}
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("postgres://rsql@%s:%s/rsql?sslmode=disable", host, port))
	if err != nil {
		return nil, &exitError{fmt.Sprintf("server address %q is not valid: %v", addr, err)}
	}
	// Cancelling a statement's context sends a CancelRequest, so the connection (and its
	// session settings) survive a cancelled push query.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, CancelRequestDelay: 0, DeadlineDelay: 5 * time.Second}
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, &exitError{fmt.Sprintf("no rsql server answers at %s: start one with `rsql server` (%v)", addr, err)}
	}
	return conn, nil
}

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
// statements (so SET lasts), reopened when it broke.
type remoteConn struct {
	addr string
	conn *pgconn.PgConn
}

func (rc *remoteConn) get(ctx context.Context) (*pgconn.PgConn, error) {
	if rc.conn != nil && !rc.conn.IsClosed() {
		return rc.conn, nil
	}
	conn, err := connectServer(ctx, rc.addr)
	if err != nil {
		return nil, err
	}
	rc.conn = conn
	return conn, nil
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
	conn, err := rc.get(ctx)
	if err != nil {
		return err
	}
	p := newPrinter(os.Stdout, jsonOut)
	mrr := conn.Exec(ctx, text)
	for mrr.NextResult() {
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
			cols[i] = sql.Column{Name: f.Name, Type: sql.Type{Kind: server.KindOfOID(f.DataTypeOID)}}
		}
		if err := p.result(ctx, &server.Result{Columns: cols, Rows: &wireRows{rr: rr, cols: cols}, Push: true}); err != nil {
			break
		}
	}
	if err := mrr.Close(); err != nil {
		var pe *pgconn.PgError
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
			n, _ := strconv.ParseInt(s, 10, 64)
			row[i] = sql.Value{K: w.cols[i].Type.Kind, I: n}
		case sql.KindDouble, sql.KindDecimal:
			f, _ := strconv.ParseFloat(s, 64)
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
