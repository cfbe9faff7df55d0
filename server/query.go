package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"rsql/connectors"
	"rsql/exec"
	"rsql/planner"
	"rsql/sql"
)

func (e *Engine) createView(s *sql.CreateView, sess *Session) (*Result, error) {
	if old, exists := e.cat.Stream(s.Name); exists {
		if s.IfNotExists {
			return skipped("view", old), nil
		}
		if !s.OrReplace {
			return nil, sql.Errorf(sql.CodeDuplicate, "stream or view %q already exists (CREATE OR REPLACE MATERIALIZED VIEW replaces it, IF NOT EXISTS keeps it)", s.Name)
		}
		if !old.IsView {
			return nil, sql.Errorf(sql.CodeWrongObjectType, "%q is a stream: CREATE OR REPLACE MATERIALIZED VIEW replaces views only (DROP STREAM %s first)", old.Name, old.Name)
		}
	}
	q, funcs, err := e.bindContinuous(s.As)
	if err != nil {
		return nil, err
	}
	if s.OrReplace && slices.Contains(relationNames(q), strings.ToLower(s.Name)) {
		return nil, sql.Errorf(sql.CodeNotSupported, "CREATE OR REPLACE MATERIALIZED VIEW %s cannot read %s itself", s.Name, s.Name)
	}
	if err := uniqueColumns(q.OutputSchema(), "materialized view", s.Name); err != nil {
		return nil, err
	}
	d := &StreamDef{Name: s.Name, Columns: columnDefs(q.OutputSchema()), Options: map[string]string{"connector": "view"},
		IsView: true, Statement: s.Text}
	sink := planner.SinkSpec{Stream: s.Name, Connector: "view", Schema: d.Schema()}
	if s.OrReplace {
		return e.replace(*d, &JobDef{Statement: s.Text, StateTTL: stateTTL(sess), Functions: funcs}, q, sink, "CREATE MATERIALIZED VIEW")
	}
	id, err := e.startNewJob(s.Text, d, q, funcs, sink, stateTTL(sess))
	if err != nil {
		return nil, err
	}
	return &Result{Tag: "CREATE MATERIALIZED VIEW", Notice: e.startedNotice(id, d.Name)}, nil
}

// query runs a SELECT: a pull query over a materialized view, or a push query over a stream.
func (e *Engine) query(ctx context.Context, sess *Session, s *sql.Select) (*Result, error) {
	q, err := e.bind(s)
	if err != nil {
		return nil, err
	}
	if isPull(q) {
		return e.pull(ctx, sess, q)
	}
	if err := viewInStreamQuery(q, "a push query"); err != nil {
		return nil, err
	}
	_, plan, err := planner.Plan(q, planner.Options{Job: "push", Sink: planner.SinkSpec{}, StateTTL: stateTTL(sess)})
	if err != nil {
		return nil, err
	}
	rows := &pushRows{ch: make(chan sql.Row, 256)}
	jctx, cancel := context.WithCancel(context.Background())
	env := e.env("push")
	env.FailOnRowError = true // a one-off query fails with its first row error
	cols := q.OutputSchema()
	updating := plan.Stages[len(plan.Stages)-1].Sink.Changes != planner.AppendOnly
	if updating {
		// Each change of an updating query shows its kind, in a last column op (insert or
		// delete), as RisingWave's SUBSCRIBE does (docs/sql.md, "Changelogs").
		cols = append(append(sql.Schema{}, cols...), sql.Column{Name: "op", Type: sql.TypeVarchar})
	}
	env.OnRow = func(r sql.Row) error {
		rows.seen.Store(true)
		c := append(sql.Row(nil), r...)
		if updating {
			c[len(c)-1] = opName(c[len(c)-1])
		}
		select {
		case rows.ch <- c:
			return nil
		case <-jctx.Done():
			return jctx.Err()
		}
	}
	env.Store = nil // a push query keeps its state in memory and checkpoints nowhere
	// Nothing of a push query outlives it: its exchange stays in process.
	env.ShuffleTopics = false
	latest := sess.Settings["offset_reset"] != "earliest" && e.cfg.Broker != nil
	if latest {
		// Like ksqlDB's auto.offset.reset: a push query over a topic starts at its end.
		b := e.cfg.Broker
		env.InitialOffset = func(src planner.SourceSpec, split string) int64 {
			if src.Connector != "broker" || src.FromStage >= 0 {
				return 0
			}
			q, err := strconv.Atoi(split)
			if err != nil {
				return 0
			}
			end, err := b.MaxOffset(src.Options.TopicOf(src.Stream), q)
			if err != nil {
				return 0
			}
			return end
		}
	}
	job, err := exec.Start(jctx, "push", plan, env)
	if err != nil {
		cancel()
		return nil, err
	}
	rows.cancel = cancel
	go func() {
		rows.err = job.Wait()
		close(rows.ch)
	}()
	if latest && readsTopic(plan) {
		// Starting at the end of a quiet topic looks like a hang: say once what it waits for.
		rows.notices = make(chan *Notice, 1)
		go func() {
			t := time.NewTimer(e.cfg.PushWaitNotice)
			defer t.Stop()
			select {
			case <-t.C:
				if !rows.seen.Load() {
					rows.notices <- &Notice{Severity: "NOTICE", Code: "00000", Message: "waiting for new records: a push query reads the records that arrive after it starts (offset_reset = 'latest'); SET offset_reset = 'earliest' reads from the oldest retained record"}
				}
			case <-jctx.Done():
			}
		}()
	}
	return &Result{Columns: cols, Rows: rows, Tag: "SELECT", Push: true}, nil
}

var opInsert, opDeleteText = sql.Varchar("insert"), sql.Varchar("delete")

// opName is the op column's text for a change column's value.
func opName(v sql.Value) sql.Value {
	if sql.IsDelete(v) {
		return opDeleteText
	}
	return opInsert
}

// pushRows streams the rows of a push query; Close stops its job.
type pushRows struct {
	ch     chan sql.Row
	cancel context.CancelFunc
	err    error // set before ch is closed
	// seen is set at the first row; notices carries the notice that the query waits for
	// new records (nil when it reads from the beginning).
	seen    atomic.Bool
	notices chan *Notice
}

// Notices implements pgwire.NoticeRows.
func (r *pushRows) Notices() <-chan *Notice { return r.notices }

// readsTopic reports whether plan reads a topic of the broker (not only files).
func readsTopic(plan *planner.Physical) bool {
	for _, st := range plan.Stages {
		for _, in := range st.Inputs {
			if in.FromStage < 0 && in.Connector == "broker" {
				return true
			}
		}
	}
	return false
}

func (r *pushRows) Next(ctx context.Context) (sql.Row, error) {
	select {
	case row, ok := <-r.ch:
		if !ok {
			if r.err != nil && !errors.Is(r.err, context.Canceled) {
				return nil, r.err
			}
			return nil, io.EOF
		}
		return row, nil
	case <-ctx.Done():
		r.cancel()
		return nil, ctx.Err()
	}
}

func (r *pushRows) Close() error {
	r.cancel()
	for range r.ch {
	}
	return nil
}

// rowBytes is about what row takes in memory.
func rowBytes(row sql.Row) int64 {
	n := int64(24) // the slice header
	for _, v := range row {
		n += int64(unsafe.Sizeof(v)) + int64(len(v.S))
	}
	return n
}

// insertValues appends the VALUES rows to the stream's sink, encoded in its format.
func (e *Engine) insertValues(ctx context.Context, s *sql.Insert) (*Result, error) {
	d, ok := e.cat.Stream(s.Target)
	if !ok {
		return nil, sql.Errorf(sql.CodeUnknownTable, "stream %q does not exist", s.Target)
	}
	if d.IsView {
		return nil, sql.Errorf(sql.CodeNotSupported, "cannot INSERT INTO materialized view %q", d.Name)
	}
	if err := e.checkFileWriter(d, "INSERT INTO "+d.Name); err != nil {
		return nil, err
	}
	schema := d.Schema()
	cols := make([]int, 0, len(schema))
	if s.Columns == nil {
		for i := range schema {
			cols = append(cols, i)
		}
	} else {
		for _, name := range s.Columns {
			i := schema.Index(name)
			if i < 0 {
				return nil, sql.Errorf(sql.CodeUnknownColumn, "stream %s has no column %q", d.Name, name)
			}
			cols = append(cols, i)
		}
	}
	var format connectors.Format = connectors.RowFormat{} // a table of a database takes rows
	if d.StreamOptions().Connector != "postgres" {
		var err error
		if format, err = connectors.NewFormat(d.StreamOptions().Format, schema); err != nil {
			return nil, err
		}
	}
	msgs := make([]connectors.Message, 0, len(s.Values))
	for n, vals := range s.Values {
		if len(vals) != len(cols) {
			return nil, sql.Errorf(sql.CodeSyntax, "VALUES row %d has %d values for %d columns", n+1, len(vals), len(cols))
		}
		row := make(sql.Row, len(schema))
		for i, x := range vals {
			v, err := sql.Eval(x, nil)
			if err != nil {
				return nil, err
			}
			c := schema[cols[i]]
			if v, err = sql.CastValue(v, c.Type); err != nil {
				code := sql.CodeInvalidText
				var se *sql.Error
				if errors.As(err, &se) {
					code = se.Code
				}
				return nil, sql.Errorf(code, "VALUES row %d, column %s: %v", n+1, c.Name, err)
			}
			row[cols[i]] = v
		}
		body, err := format.Encode(nil, row)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, connectors.Message{Body: body})
	}
	spec, err := planner.StreamSink(d.Name, d.Options, schema)
	if err != nil {
		return nil, err
	}
	sink, err := e.env("insert").OpenSink(spec)
	if err != nil {
		return nil, err
	}
	if err := sink.Write(ctx, msgs); err != nil {
		sink.Close()
		return nil, err
	}
	if err := sink.Flush(ctx); err != nil {
		sink.Close()
		return nil, err
	}
	if err := sink.Close(); err != nil {
		return nil, err
	}
	return &Result{Tag: fmt.Sprintf("INSERT 0 %d", len(msgs))}, nil
}
