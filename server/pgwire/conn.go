package pgwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgproto3"

	"rsql/sql"

	"rsql/server/auth"
)

// SQLSTATE codes the front end itself reports.
const (
	codeProtocolViolation = "08P01"
	codeQueryCanceled     = "57014"
	codeAdminShutdown     = "57P01"
	codeUnknownStatement  = "26000"
	codeUnknownPortal     = "34000"
	codeDuplicateStmt     = "42P05"
	codeDuplicatePortal   = "42P03"
	codeInvalidParam      = "22P02"
	codeUndefinedParam    = "42P02"
)

// maxParams is the most parameters a statement can take (Bind counts them in 16 bits).
const maxParams = 65535

var (
	// errUserCancel is the cause of a statement context cancelled by a CancelRequest.
	errUserCancel = errors.New("canceling statement due to user request")
	// errClientGone is the cause of a connection context whose client went away.
	errClientGone = errors.New("client closed the connection")
	errPortalDone = errors.New("portal closed")
)

// pgError is an error the front end reports with its own SQLSTATE.
type pgError struct {
	code, msg string
	fatal     bool
}

func (e *pgError) Error() string { return e.msg }

func protoErr(format string, args ...any) error {
	return &pgError{code: codeProtocolViolation, msg: fmt.Sprintf(format, args...)}
}

// flushAt is the output size at which rows are written out without waiting for the end.
const flushAt = 64 << 10

// pgConn is one client connection. Its goroutine (serveConn) owns everything except the
// fields guarded by runMu, which a CancelRequest on another connection touches.
type pgConn struct {
	srv    *Server
	nc     net.Conn
	rd     *pumpReader
	be     *pgproto3.Backend
	out    []byte
	sess   *Session
	pid    uint32
	secret [4]byte

	ctx    context.Context // the connection's life; cause errClientGone or errServerClosing
	cancel context.CancelCauseFunc

	runMu     sync.Mutex
	runCancel context.CancelCauseFunc // the running statement's, or nil; guarded by runMu

	stmts      map[string]*pgStmt
	portals    map[string]*pgPortal
	skipToSync bool   // after an error in the extended protocol
	writeErr   error  // the connection is dead once writing failed
	encrypted  bool   // the connection runs over TLS
	current    string // the statement text being run, for the log of a panic
}

// pgStmt is a prepared statement.
type pgStmt struct {
	name      string
	text      string
	empty     bool
	paramOIDs []uint32
	desc      *Description // from a Describer, or nil
	// pre holds results of running the statement at Describe time (no Describer), for
	// the next Bind without parameters; preCtx/preCancel are their context.
	pre       []*Result
	preCtx    context.Context
	preCancel context.CancelCauseFunc
}

// pgPortal is a bound statement.
type pgPortal struct {
	name    string
	stmt    *pgStmt
	params  []sql.Value
	formats []int16 // result format codes as given by Bind
	ctx     context.Context
	cancel  context.CancelCauseFunc

	ran    bool
	result *Result // the statement's result, once run
	stream *rowStream
	done   bool // CommandComplete sent for a statement without rows
}

// serveConn runs one connection. over says the server already serves MaxConnections: the
// client is told so (53300) once it has sent its startup message. A panic in the
// connection's goroutine is logged with the statement it was running and ends this
// connection only.
func (s *Server) serveConn(nc net.Conn, over bool) {
	ctx, cancel := context.WithCancelCause(s.ctx)
	c := &pgConn{
		srv:     s,
		nc:      nc,
		sess:    NewSession(),
		ctx:     ctx,
		cancel:  cancel,
		stmts:   map[string]*pgStmt{},
		portals: map[string]*pgPortal{},
	}
	c.sess.Role = "" // until authentication says
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.Error("pgwire: connection panicked; closing it", "panic", p, "pid", c.pid,
				"user", c.sess.User, "statement", auth.LogStatement(c.current), "stack", string(debug.Stack()))
		}
		for name := range c.portals {
			c.closePortal(name)
		}
		for name := range c.stmts {
			c.closeStmt(name)
		}
		s.unregister(c)
		cancel(errClientGone)
		if c.rd != nil {
			c.rd.close()
		}
		c.nc.Close()
		nc.Close()
	}()
	// Everything before ReadyForQuery must finish in time: the timer closes the socket,
	// which fails whatever read or handshake is waiting.
	var expired atomic.Bool
	timer := time.AfterFunc(s.cfg.StartupTimeout, func() {
		expired.Store(true)
		nc.Close()
	})
	defer timer.Stop()
	logExpired := func() {
		if expired.Load() {
			s.cfg.Logger.Info("pgwire: a client did not finish starting up in time; disconnected",
				"remote", nc.RemoteAddr().String(), "timeout", s.cfg.StartupTimeout)
		}
	}
	m, ok := c.negotiate()
	if !ok {
		logExpired()
		return
	}
	if over {
		s.cfg.Logger.Warn("pgwire: too many connections; refused one", "remote", nc.RemoteAddr().String(), "max", s.cfg.MaxConnections)
		c.fatal(codeTooManyConnections, fmt.Sprintf("sorry, too many clients already (the server takes %d connections at once)", s.cfg.MaxConnections))
		return
	}
	c.negotiateVersion(m)
	c.rd = newPumpReader(c.nc, func() { cancel(errClientGone) })
	fr := &frameReader{r: c.rd, msgTimeout: s.cfg.MessageTimeout}
	c.be = pgproto3.NewBackend(fr, nil)
	c.be.SetMaxBodyLen(s.cfg.MaxMessageBytes)
	if !c.authenticate(m) {
		logExpired()
		return
	}
	if !timer.Stop() {
		logExpired()
		return
	}
	if !c.ready(m) {
		return
	}
	fr.idleTimeout = s.cfg.IdleTimeout
	for c.writeErr == nil {
		msg, err := c.be.Receive()
		if err != nil {
			c.receiveFailed(err)
			return
		}
		if _, ok := msg.(*pgproto3.Terminate); ok {
			return
		}
		if c.skipToSync {
			if _, ok := msg.(*pgproto3.Sync); !ok {
				continue
			}
			c.skipToSync = false
		}
		if !c.handle(msg) {
			return
		}
	}
}

// handle runs one message; it reports whether the connection goes on.
func (c *pgConn) handle(msg pgproto3.FrontendMessage) bool {
	switch m := msg.(type) {
	case *pgproto3.Query:
		c.simpleQuery(m.String)
	case *pgproto3.Parse:
		c.extended(c.parse(m))
	case *pgproto3.Bind:
		c.extended(c.bind(m))
	case *pgproto3.Describe:
		c.extended(c.describe(m))
	case *pgproto3.Execute:
		c.extended(c.execute(m))
	case *pgproto3.Close:
		if m.ObjectType == 'S' {
			c.closeStmt(m.Name)
		} else {
			c.closePortal(m.Name)
		}
		c.send(&pgproto3.CloseComplete{})
	case *pgproto3.Sync:
		for name := range c.portals {
			c.closePortal(name)
		}
		c.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		c.flush()
	case *pgproto3.Flush:
		c.flush()
	case *pgproto3.CopyData, *pgproto3.CopyDone:
		// Outside COPY these are ignored, as Postgres does.
	case *pgproto3.CopyFail:
	case *pgproto3.FunctionCall:
		c.extended(&pgError{code: sql.CodeNotSupported, msg: "function calls are not supported"})
	default:
		c.sendError(nil, &pgError{code: codeProtocolViolation, msg: fmt.Sprintf("unexpected message %T", msg), fatal: true}, "")
		c.flush()
		return false
	}
	return c.writeErr == nil
}

// extended reports an error of an extended-protocol message and skips to the next Sync.
func (c *pgConn) extended(err error) {
	if err == nil {
		return
	}
	c.sendError(nil, err, "")
	c.skipToSync = true
}

// send appends msg to the output buffer.
func (c *pgConn) send(msg pgproto3.BackendMessage) {
	out, err := msg.Encode(c.out)
	if err != nil {
		c.srv.cfg.Logger.Error("pgwire: encoding a message", "message", fmt.Sprintf("%T", msg), "err", err)
		return
	}
	c.out = out
}

// flush writes the output buffer to the client.
func (c *pgConn) flush() error {
	if c.writeErr != nil {
		return c.writeErr
	}
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.nc.Write(c.out)
	if cap(c.out) > 4*flushAt {
		c.out = make([]byte, 0, flushAt)
	} else {
		c.out = c.out[:0]
	}
	if err != nil {
		c.writeErr = err
		c.cancel(errClientGone)
	}
	return err
}

// beginStatement makes the context of a statement that a CancelRequest can cancel.
func (c *pgConn) beginStatement() (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(c.ctx)
	c.setRunning(cancel)
	return ctx, cancel
}

func (c *pgConn) setRunning(cancel context.CancelCauseFunc) {
	c.runMu.Lock()
	c.runCancel = cancel
	c.runMu.Unlock()
}

// cancelRunning cancels the running statement, if any. Called from other goroutines.
func (c *pgConn) cancelRunning() {
	c.runMu.Lock()
	cancel := c.runCancel
	c.runMu.Unlock()
	if cancel != nil {
		cancel(errUserCancel)
	}
}

// sendError appends an ErrorResponse for err. ctx is the statement's context (its cause
// tells a cancelled statement from a failed one); text is the statement text, for the
// error position.
func (c *pgConn) sendError(ctx context.Context, err error, text string) {
	resp := &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: sql.CodeInternal, Message: err.Error()}
	var cause error
	if ctx != nil && ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	var se *sql.Error
	var pe *pgError
	switch {
	case errors.Is(cause, errUserCancel):
		resp.Code, resp.Message = codeQueryCanceled, errUserCancel.Error()
	case errors.Is(cause, errServerClosing):
		resp.Severity, resp.SeverityUnlocalized = "FATAL", "FATAL"
		resp.Code, resp.Message = codeAdminShutdown, "terminating connection due to administrator command"
	case errors.As(err, &pe):
		resp.Code, resp.Message = pe.code, pe.msg
		if pe.fatal {
			resp.Severity, resp.SeverityUnlocalized = "FATAL", "FATAL"
		}
	case errors.As(err, &se):
		if se.Code != "" {
			resp.Code = se.Code
		}
		if pos := ErrorPosition(se, text); pos > 0 {
			resp.Position = int32(pos)
			resp.Message = se.Message
		}
	}
	c.send(resp)
}

// ErrorPosition returns the 1-based character position of se in text, or 0.
func ErrorPosition(se *sql.Error, text string) int {
	if text == "" {
		return 0
	}
	if se.Pos >= 0 && se.Pos <= len(text) && (se.Pos > 0 || se.Line > 0) {
		return utf8.RuneCountInString(text[:se.Pos]) + 1
	}
	if se.Line > 0 && se.Column > 0 {
		off := 0
		for line := 1; line < se.Line; line++ {
			nl := strings.IndexByte(text[off:], '\n')
			if nl < 0 {
				return 0
			}
			off += nl + 1
		}
		return utf8.RuneCountInString(text[:off]) + se.Column
	}
	return 0
}

// recoverExecutor reports a panic of the Executor as an internal error of the statement,
// logged with the statement (passwords redacted).
func recoverExecutor(err *error, logger interface{ Error(string, ...any) }, sess *Session, text string) {
	if p := recover(); p != nil {
		logger.Error("pgwire: executor panicked", "panic", p, "user", sess.User, "statement", auth.LogStatement(text), "stack", string(debug.Stack()))
		*err = sql.Errorf(sql.CodeInternal, "internal error: %v", p)
	}
}

// execute runs text through the Executor; a panic there fails the statement, not the server.
func (s *Server) execute(ctx context.Context, sess *Session, text string, params []sql.Value) (results []*Result, err error) {
	defer recoverExecutor(&err, s.cfg.Logger, sess, text)
	if err := s.checkText(text); err != nil {
		return nil, err
	}
	return s.exec.Execute(ctx, sess, text, params)
}

// checkText refuses (54001) a query text longer than MaxStatementBytes, before anything
// parses it.
func (s *Server) checkText(text string) error {
	if max := s.cfg.MaxStatementBytes; max > 0 && len(text) > max {
		return &pgError{code: codeTooComplex, msg: fmt.Sprintf("statement too complex: the query text is %d bytes, more than the limit of %d bytes (send the statements one at a time)", len(text), max)}
	}
	return nil
}

func (s *Server) describe(d Describer, ctx context.Context, sess *Session, text string) (desc *Description, err error) {
	defer recoverExecutor(&err, s.cfg.Logger, sess, text)
	if err := s.checkText(text); err != nil {
		return nil, err
	}
	desc, err = d.Describe(ctx, sess, text)
	if err == nil && desc == nil {
		desc = &Description{}
	}
	return desc, err
}

func nextRow(rows Rows, ctx context.Context) (row sql.Row, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = sql.Errorf(sql.CodeInternal, "internal error: %v", p)
		}
	}()
	return rows.Next(ctx)
}

// closeResults closes the rows of results.
func closeResults(results []*Result) {
	for _, r := range results {
		if r != nil && r.Rows != nil {
			r.Rows.Close()
		}
	}
}

// CommandTag is the CommandComplete tag of r after n rows.
func CommandTag(r *Result, n int64) string {
	if r.Columns == nil {
		if r.Tag == "" {
			return "OK"
		}
		return r.Tag
	}
	if r.Tag == "" || strings.EqualFold(r.Tag, "SELECT") {
		return fmt.Sprintf("SELECT %d", n)
	}
	return r.Tag
}

// rowDescription describes cols with the given (expanded) formats.
func rowDescription(cols sql.Schema, formats []int16) *pgproto3.RowDescription {
	fields := make([]pgproto3.FieldDescription, len(cols))
	for i, col := range cols {
		oid, size, mod := typeOID(col.Type)
		fields[i] = pgproto3.FieldDescription{Name: []byte(col.Name), DataTypeOID: oid, DataTypeSize: size, TypeModifier: mod}
		if formats != nil {
			fields[i].Format = formats[i]
		}
	}
	return &pgproto3.RowDescription{Fields: fields}
}

// expandFormats turns Bind's result format codes into one per column.
func expandFormats(codes []int16, n int) ([]int16, error) {
	out := make([]int16, n)
	switch len(codes) {
	case 0:
	case 1:
		for i := range out {
			out[i] = codes[0]
		}
	default:
		if len(codes) != n {
			return nil, protoErr("bind message has %d result formats but the query has %d columns", len(codes), n)
		}
		copy(out, codes)
	}
	for _, f := range out {
		if f != formatText && f != formatBinary {
			return nil, protoErr("unknown result format code %d", f)
		}
	}
	return out, nil
}

// simpleQuery runs a Query message: every statement of text, then ReadyForQuery.
func (c *pgConn) simpleQuery(text string) {
	defer func() {
		c.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		c.flush()
	}()
	if err := c.srv.checkText(text); err != nil {
		c.sendError(nil, err, "")
		return
	}
	if _, n := ScanText(text); n == 0 {
		c.send(&pgproto3.EmptyQueryResponse{})
		return
	}
	ctx, cancel := c.beginStatement()
	c.current = text
	defer func() {
		c.current = ""
		c.setRunning(nil)
		cancel(nil)
	}()
	results, err := c.srv.execute(ctx, c.sess, text, nil)
	for i, r := range results {
		if r == nil {
			continue
		}
		if rerr := c.sendResult(ctx, r); rerr != nil {
			closeResults(results[i+1:])
			c.sendError(ctx, rerr, text)
			return
		}
		if c.writeErr != nil {
			closeResults(results[i+1:])
			return
		}
	}
	if err != nil {
		c.sendError(ctx, err, text)
	}
}

// sendNotice sends r's notice, if any.
func (c *pgConn) sendNotice(r *Result) {
	if n := r.Notice; n != nil {
		c.send(&pgproto3.NoticeResponse{Severity: n.Severity, SeverityUnlocalized: n.Severity, Code: n.Code, Message: n.Message})
	}
}

// sendResult sends one result of a simple query: its rows and its CommandComplete.
func (c *pgConn) sendResult(ctx context.Context, r *Result) error {
	c.sendNotice(r)
	if r.Columns == nil {
		if r.Rows != nil {
			r.Rows.Close()
		}
		c.send(&pgproto3.CommandComplete{CommandTag: []byte(CommandTag(r, 0))})
		return nil
	}
	formats := make([]int16, len(r.Columns))
	c.send(rowDescription(r.Columns, formats))
	if r.Push {
		// The client learns the columns now, not with the first row (which may be long in
		// coming).
		if err := c.flush(); err != nil {
			return err
		}
	}
	st := newRowStream(ctx, r, formats)
	sent, _, err := c.streamRows(ctx, st, 0)
	st.close()
	if err != nil {
		return err
	}
	c.send(&pgproto3.CommandComplete{CommandTag: []byte(CommandTag(r, sent))})
	return nil
}

// parse handles Parse.
func (c *pgConn) parse(m *pgproto3.Parse) error {
	if m.Name != "" {
		if _, ok := c.stmts[m.Name]; ok {
			return &pgError{code: codeDuplicateStmt, msg: fmt.Sprintf("prepared statement %q already exists", m.Name)}
		}
	} else {
		c.closeStmt("")
	}
	if err := c.srv.checkText(m.Query); err != nil {
		return err
	}
	nparams, count := ScanText(m.Query)
	if count > 1 {
		return &pgError{code: sql.CodeSyntax, msg: "cannot insert multiple commands into a prepared statement"}
	}
	if nparams > c.srv.cfg.MaxParams {
		return &pgError{code: codeUndefinedParam, msg: fmt.Sprintf("there is no parameter $%d: a statement takes at most %d", nparams, c.srv.cfg.MaxParams)}
	}
	st := &pgStmt{name: m.Name, text: m.Query, empty: count == 0}
	if d, ok := c.srv.exec.(Describer); ok && !st.empty {
		ctx, cancel := c.beginStatement()
		desc, err := c.srv.describe(d, ctx, c.sess, m.Query)
		c.setRunning(nil)
		if err != nil {
			c.sendError(ctx, err, m.Query)
			cancel(nil)
			c.skipToSync = true
			return nil
		}
		cancel(nil)
		st.desc = desc
		nparams = max(nparams, len(desc.Params))
	}
	nparams = max(nparams, len(m.ParameterOIDs))
	if nparams > c.srv.cfg.MaxParams {
		return &pgError{code: codeUndefinedParam, msg: fmt.Sprintf("a statement takes at most %d parameters", c.srv.cfg.MaxParams)}
	}
	st.paramOIDs = make([]uint32, nparams)
	for i := range st.paramOIDs {
		switch {
		case i < len(m.ParameterOIDs) && m.ParameterOIDs[i] != 0:
			st.paramOIDs[i] = m.ParameterOIDs[i]
		case st.desc != nil && i < len(st.desc.Params) && st.desc.Params[i].Kind != sql.KindNull:
			st.paramOIDs[i], _, _ = typeOID(st.desc.Params[i])
		default:
			// Unknown, as PostgreSQL says of an untyped placeholder: clients then send the
			// value as text in its own type's form, and binding converts that text to the
			// type the placeholder's context needs.
			st.paramOIDs[i] = oidUnknown
		}
	}
	c.stmts[m.Name] = st
	c.send(&pgproto3.ParseComplete{})
	return nil
}

func (c *pgConn) closeStmt(name string) {
	st, ok := c.stmts[name]
	if !ok {
		return
	}
	delete(c.stmts, name)
	if st.pre != nil {
		closeResults(st.pre)
		st.preCancel(errPortalDone)
		st.pre = nil
	}
}

// bind handles Bind.
func (c *pgConn) bind(m *pgproto3.Bind) error {
	st, ok := c.stmts[m.PreparedStatement]
	if !ok {
		return &pgError{code: codeUnknownStatement, msg: fmt.Sprintf("prepared statement %q does not exist", m.PreparedStatement)}
	}
	if m.DestinationPortal != "" {
		if _, ok := c.portals[m.DestinationPortal]; ok {
			return &pgError{code: codeDuplicatePortal, msg: fmt.Sprintf("portal %q already exists", m.DestinationPortal)}
		}
	} else {
		c.closePortal("")
	}
	if len(m.Parameters) != len(st.paramOIDs) {
		return protoErr("bind message supplies %d parameters, but prepared statement %q requires %d", len(m.Parameters), st.name, len(st.paramOIDs))
	}
	pf := m.ParameterFormatCodes
	if len(pf) > 1 && len(pf) != len(m.Parameters) {
		return protoErr("bind message has %d parameter formats but %d parameters", len(pf), len(m.Parameters))
	}
	params := make([]sql.Value, len(m.Parameters))
	for i, data := range m.Parameters {
		format := int16(formatText)
		switch len(pf) {
		case 0:
		case 1:
			format = pf[0]
		default:
			format = pf[i]
		}
		v, err := decodeParam(data, st.paramOIDs[i], format)
		if err != nil {
			return &pgError{code: codeInvalidParam, msg: fmt.Sprintf("parameter $%d: %s", i+1, err.Error())}
		}
		params[i] = v
	}
	p := &pgPortal{name: m.DestinationPortal, stmt: st, params: params, formats: append([]int16(nil), m.ResultFormatCodes...)}
	p.ctx, p.cancel = context.WithCancelCause(c.ctx)
	c.portals[p.name] = p
	c.send(&pgproto3.BindComplete{})
	return nil
}

func (c *pgConn) closePortal(name string) {
	p, ok := c.portals[name]
	if !ok {
		return
	}
	delete(c.portals, name)
	if p.stream != nil {
		p.stream.close()
	} else if p.result != nil && p.result.Rows != nil && !p.done {
		p.result.Rows.Close()
	}
	p.cancel(errPortalDone)
}

// describe handles Describe.
func (c *pgConn) describe(m *pgproto3.Describe) error {
	if m.ObjectType == 'S' {
		st, ok := c.stmts[m.Name]
		if !ok {
			return &pgError{code: codeUnknownStatement, msg: fmt.Sprintf("prepared statement %q does not exist", m.Name)}
		}
		c.send(&pgproto3.ParameterDescription{ParameterOIDs: st.paramOIDs})
		var cols sql.Schema
		switch {
		case st.desc != nil:
			cols = st.desc.Columns
		case !st.empty && len(st.paramOIDs) == 0 && returnsRows(st.text):
			// No Describer: learn the columns by running the statement now.
			if st.pre == nil {
				ctx, cancel := context.WithCancelCause(c.ctx)
				c.setRunning(cancel)
				results, err := c.srv.execute(ctx, c.sess, st.text, nil)
				c.setRunning(nil)
				if err != nil {
					closeResults(results)
					c.sendError(ctx, err, st.text)
					cancel(nil)
					c.skipToSync = true
					return nil
				}
				st.pre, st.preCtx, st.preCancel = results, ctx, cancel
			}
			if len(st.pre) > 0 && st.pre[0] != nil {
				cols = st.pre[0].Columns
			}
		}
		if cols == nil {
			c.send(&pgproto3.NoData{})
		} else {
			c.send(rowDescription(cols, nil))
		}
		return nil
	}
	p, ok := c.portals[m.Name]
	if !ok {
		return &pgError{code: codeUnknownPortal, msg: fmt.Sprintf("portal %q does not exist", m.Name)}
	}
	if err := c.runPortal(p); err != nil {
		c.sendError(p.ctx, err, p.stmt.text)
		c.skipToSync = true
		return nil
	}
	if p.result == nil || p.result.Columns == nil {
		c.send(&pgproto3.NoData{})
		return nil
	}
	formats, err := expandFormats(p.formats, len(p.result.Columns))
	if err != nil {
		return err
	}
	c.send(rowDescription(p.result.Columns, formats))
	return nil
}

// runPortal runs the portal's statement once (at its first Describe or Execute).
func (c *pgConn) runPortal(p *pgPortal) error {
	if p.ran {
		return nil
	}
	p.ran = true
	st := p.stmt
	if st.empty {
		return nil
	}
	var results []*Result
	if st.pre != nil && len(p.params) == 0 {
		// Adopt the results run at Describe time, with their context.
		results = st.pre
		p.cancel(errPortalDone)
		p.ctx, p.cancel = st.preCtx, st.preCancel
		st.pre, st.preCtx, st.preCancel = nil, nil, nil
	} else {
		c.setRunning(p.cancel)
		var err error
		results, err = c.srv.execute(p.ctx, c.sess, st.text, p.params)
		c.setRunning(nil)
		if err != nil {
			closeResults(results)
			return err
		}
	}
	// One statement gives one result; keep the first that is there.
	for i, r := range results {
		if r != nil && p.result == nil {
			p.result = r
			closeResults(results[i+1:])
			break
		}
	}
	return nil
}

// execute handles Execute.
func (c *pgConn) execute(m *pgproto3.Execute) error {
	p, ok := c.portals[m.Portal]
	if !ok {
		return &pgError{code: codeUnknownPortal, msg: fmt.Sprintf("portal %q does not exist", m.Portal)}
	}
	if err := c.runPortal(p); err != nil {
		c.sendError(p.ctx, err, p.stmt.text)
		c.skipToSync = true
		return nil
	}
	if p.stmt.empty {
		c.send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	r := p.result
	if r == nil {
		c.send(&pgproto3.CommandComplete{CommandTag: []byte("OK")})
		return nil
	}
	if r.Columns == nil {
		if !p.done && r.Rows != nil {
			r.Rows.Close()
		}
		if !p.done {
			c.sendNotice(r)
		}
		p.done = true
		c.send(&pgproto3.CommandComplete{CommandTag: []byte(CommandTag(r, 0))})
		return nil
	}
	if p.stream == nil {
		formats, err := expandFormats(p.formats, len(r.Columns))
		if err != nil {
			return err
		}
		p.stream = newRowStream(p.ctx, r, formats)
		if r.Push {
			// What Describe answered (the columns) reaches the client before the first row.
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
	c.setRunning(p.cancel)
	sent, suspended, err := c.streamRows(p.ctx, p.stream, int(m.MaxRows))
	c.setRunning(nil)
	if err != nil {
		c.sendError(p.ctx, err, p.stmt.text)
		c.skipToSync = true
		c.closePortal(p.name)
		return nil
	}
	if suspended {
		c.send(&pgproto3.PortalSuspended{})
		return nil
	}
	_ = sent
	c.send(&pgproto3.CommandComplete{CommandTag: []byte(CommandTag(r, p.stream.count))})
	return nil
}

// rowStream reads one result's rows. For a push query a producer goroutine reads ahead
// (so the front end can tell when no row is waiting and flush); it owns rows until close.
type rowStream struct {
	rows     Rows
	cols     sql.Schema
	formats  []int16
	push     bool
	count    int64 // rows sent so far
	finished bool  // io.EOF seen

	ctx    context.Context // the producer's
	cancel context.CancelFunc
	ch     chan streamItem
	done   chan struct{} // closed when the producer returns
	// notices are the rows' notices while they run (NoticeRows), nil when none.
	notices <-chan *Notice
}

type streamItem struct {
	data []byte // one encoded DataRow
	err  error
}

func newRowStream(ctx context.Context, r *Result, formats []int16) *rowStream {
	st := &rowStream{rows: r.Rows, cols: r.Columns, formats: formats, push: r.Push}
	if st.rows == nil {
		st.finished = true
		return st
	}
	if st.push {
		st.ctx, st.cancel = context.WithCancel(ctx)
		st.ch = make(chan streamItem, 256)
		st.done = make(chan struct{})
		if nr, ok := r.Rows.(NoticeRows); ok {
			st.notices = nr.Notices()
		}
		go st.produce()
	}
	return st
}

// produce runs in its own goroutine: it reads rows, encodes them and hands them over.
func (st *rowStream) produce() {
	defer close(st.done)
	for {
		row, err := nextRow(st.rows, st.ctx)
		var it streamItem
		if err != nil {
			it.err = err
		} else {
			it.data, it.err = appendDataRow(nil, row, st.cols, st.formats)
		}
		select {
		case st.ch <- it:
		case <-st.ctx.Done():
			return
		}
		if it.err != nil {
			return
		}
	}
}

// close stops the producer, if any, and closes the rows.
func (st *rowStream) close() {
	if st.rows == nil {
		return
	}
	if st.push {
		st.cancel()
		<-st.done
	}
	st.rows.Close()
	st.rows = nil
}

// streamRows sends up to max rows of st (all when max is 0). suspended is true when it
// stopped because of max.
func (c *pgConn) streamRows(ctx context.Context, st *rowStream, max int) (sent int64, suspended bool, err error) {
	limit := int64(max)
	more := func() bool { return limit == 0 || sent < limit }
	if st.finished {
		return 0, false, nil
	}
	if !st.push {
		for more() {
			row, err := nextRow(st.rows, ctx)
			if errors.Is(err, io.EOF) {
				st.finished = true
				return sent, false, nil
			}
			if err != nil {
				return sent, false, err
			}
			if c.out, err = appendDataRow(c.out, row, st.cols, st.formats); err != nil {
				return sent, false, err
			}
			sent++
			st.count++
			if len(c.out) >= flushAt {
				if err := c.flush(); err != nil {
					return sent, false, err
				}
			}
		}
		return sent, true, nil
	}
	// take handles one item; it reports whether the stream goes on.
	take := func(it streamItem) (bool, error) {
		if errors.Is(it.err, io.EOF) {
			st.finished = true
			return false, nil
		}
		if it.err != nil {
			return false, it.err
		}
		c.out = append(c.out, it.data...)
		sent++
		st.count++
		return true, nil
	}
	for more() {
		var it streamItem
		select {
		case it = <-st.ch:
		case n := <-st.notices:
			if n != nil {
				c.send(&pgproto3.NoticeResponse{Severity: n.Severity, SeverityUnlocalized: n.Severity, Code: n.Code, Message: n.Message})
				if err := c.flush(); err != nil {
					return sent, false, err
				}
			} else {
				st.notices = nil // closed: no more
			}
			continue
		case <-ctx.Done():
			return sent, false, context.Cause(ctx)
		}
		goOn, err := take(it)
		// Take whatever else is already waiting, then flush the batch.
	drain:
		for goOn && err == nil && more() && len(c.out) < flushAt {
			select {
			case it = <-st.ch:
				goOn, err = take(it)
			default:
				break drain
			}
		}
		if err != nil {
			return sent, false, err
		}
		if ferr := c.flush(); ferr != nil {
			return sent, false, ferr
		}
		if !goOn {
			return sent, false, nil
		}
	}
	return sent, true, nil
}

// pumpReader reads the socket in its own goroutine, so the connection notices a client
// that goes away while a statement runs (a push query waiting for rows). It buffers at
// most pumpLimit bytes ahead of the reader.
type pumpReader struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte // guarded by mu
	err    error  // guarded by mu: the socket's read error, once seen
	closed bool   // guarded by mu: the connection ended; the pump stops
	gone   func() // guarded by mu: called once when the client is gone and all it sent is read
}

// close stops the pump (the caller closes the socket, which ends a pending read).
func (r *pumpReader) close() {
	r.mu.Lock()
	r.closed = true
	r.cond.Broadcast()
	r.mu.Unlock()
}

const pumpLimit = 1 << 20

// newPumpReader starts reading nc. gone is called when the socket read fails with
// nothing left unread (the client closed the connection or it broke).
func newPumpReader(nc net.Conn, gone func()) *pumpReader {
	r := &pumpReader{gone: gone}
	r.cond = sync.NewCond(&r.mu)
	go func() {
		tmp := make([]byte, 32<<10)
		for {
			r.mu.Lock()
			for len(r.buf) >= pumpLimit && !r.closed {
				r.cond.Wait()
			}
			closed := r.closed
			r.mu.Unlock()
			if closed {
				return
			}
			n, err := nc.Read(tmp)
			r.mu.Lock()
			r.buf = append(r.buf, tmp[:n]...)
			if err != nil {
				r.err = err
			}
			var call func()
			if err != nil && len(r.buf) == 0 {
				call, r.gone = r.gone, nil
			}
			r.cond.Broadcast()
			r.mu.Unlock()
			if call != nil {
				call()
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

func (r *pumpReader) Read(p []byte) (int, error) { return r.readUntil(p, time.Time{}, nil) }

// readUntil is Read that gives up with timeoutErr when nothing has arrived by deadline (no
// deadline when it is zero).
func (r *pumpReader) readUntil(p []byte, deadline time.Time, timeoutErr error) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) == 0 && r.err == nil && !deadline.IsZero() {
		wake := time.AfterFunc(time.Until(deadline), func() {
			r.mu.Lock()
			r.cond.Broadcast()
			r.mu.Unlock()
		})
		defer wake.Stop()
	}
	for len(r.buf) == 0 && r.err == nil {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return 0, timeoutErr
		}
		r.cond.Wait()
	}
	if len(r.buf) > 0 {
		n := copy(p, r.buf)
		r.buf = r.buf[n:]
		if len(r.buf) == 0 {
			r.buf = nil
			if r.err != nil && r.gone != nil {
				// The client closed after sending more; that is now all consumed.
				go r.gone()
				r.gone = nil
			}
		}
		r.cond.Broadcast()
		return n, nil
	}
	return 0, r.err
}
