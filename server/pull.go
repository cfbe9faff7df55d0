package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"rsql/connectors"
	"rsql/exec"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Pull queries: a SELECT over materialized views (or without FROM) answers once, from the
// views' current rows. It is planned and run like every other query: each view is a bounded
// source of its rows (snapshotted when the query starts), so WHERE, GROUP BY, DISTINCT,
// ORDER BY, LIMIT/OFFSET and the rest work the same as anywhere.

// isPull reports whether a query reads only materialized views, tables (their latest
// versions) and constants.
func isPull(q *sql.Query) bool {
	if q.IsConstant() {
		return true
	}
	rels := q.Relations()
	n := 0
	for _, r := range rels {
		if pullable(r) {
			n++
		}
	}
	return n > 0 && n == len(rels)
}

// pullable reports whether a pull query can read r: a view's rows, or a table whose
// changelog is a topic (of the bundled broker or of Kafka) or a file.
func pullable(r *sql.Relation) bool {
	return r.IsView || r.IsTable && snapshotConnector(r.Connector())
}

// snapshotConnector reports whether a table of connector c can be read to its current end
// (tableSnapshot).
func snapshotConnector(c string) bool {
	return c == "broker" || c == "kafka" || c == "file"
}

// maxViewStages bounds the stages of a view's job whose rows ReadView looks for (a plan
// has a handful).
const maxViewStages = 32

// pull runs a pull query to its end and returns its rows.
func (e *Engine) pull(ctx context.Context, sess *Session, q *sql.Query) (*Result, error) {
	for _, r := range q.Relations() {
		if !pullable(r) {
			return nil, sql.Errorf(sql.CodeNotSupported, "a query reads materialized views and tables (a pull query) or streams (a push query), not both: %s is a stream", r.Name)
		}
	}
	_, plan, err := planner.Plan(q, planner.Options{Job: "pull", Sink: planner.SinkSpec{}, StateTTL: stateTTL(sess), Pull: true})
	if err != nil {
		return nil, err
	}
	lookup := e.pointLookupOf(q)
	var mu sync.Mutex
	var out []sql.Row
	var size int64
	env := exec.Env{
		// A pull query fails with its first row error, as PostgreSQL's statement does.
		FailOnRowError: true,
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			switch spec.Connector {
			case "values":
				return &rowSource{rows: []sql.Row{{}}}, nil
			case "view":
				// The view's committed rows (exec/tableout.go): from the local store, or
				// across instances from the shared checkpoint store, which holds every
				// unit's rows whichever instance runs it. They are streamed to the query
				// as they are read, not gathered first.
				d, ok := e.cat.Stream(spec.Stream)
				if !ok || d.Job == "" {
					return &rowSource{}, nil
				}
				return &viewSource{read: func(ctx context.Context, add func(sql.Row) error) error {
					var store exec.ViewReader = e.store
					if e.cluster != nil {
						store = sharedViews{ctx: ctx, cs: e.cluster.cs, job: d.Job}
					}
					if lookup != nil && strings.EqualFold(spec.Stream, lookup.view) && d.Job == lookup.job {
						// Only the keys WHERE fixes (pointget.go).
						return exec.LookupView(store, d.Job, lookup.stage, lookup.keys, add)
					}
					return exec.ReadView(store, d.Job, maxViewStages, add)
				}}, nil
			}
			if spec.FromStage < 0 && snapshotConnector(spec.Connector) {
				return e.tableSnapshot(spec)
			}
			return nil, fmt.Errorf("a pull query cannot read %s (connector %s)", spec.Stream, spec.Connector)
		},
		NewFormat: func(string, sql.Schema) (connectors.Format, error) { return rowFormat{}, nil },
		OnRow: func(r sql.Row) error {
			mu.Lock()
			defer mu.Unlock()
			row := append(sql.Row(nil), r...)
			size += rowBytes(row)
			if max := e.cfg.MaxResultBytes; max > 0 && size > max {
				return sql.Errorf(sql.CodeProgramLimit, "the result of this query is larger than the limit of %d bytes (after %d rows): narrow it with WHERE or LIMIT", max, len(out))
			}
			out = append(out, row)
			return nil
		},
		CheckpointInterval: -1,
	}
	job, err := exec.Start(ctx, "pull", plan, env)
	if err != nil {
		return nil, err
	}
	if err := job.Wait(); err != nil {
		var re *exec.RowError
		if errors.As(err, &re) && re.Stream != "" {
			return nil, re // the row's error, naming the view (or table) and the operator
		}
		var se *sql.Error
		if errors.As(err, &se) {
			return nil, se
		}
		return nil, err
	}
	if st := job.Stats(); st.Bad > 0 && len(st.BadErrors) > 0 {
		// A row that failed (division by zero, ...) fails the statement, as in PostgreSQL.
		return nil, rowFailure(st.BadErrors[0])
	}
	return &Result{Columns: q.OutputSchema(), Rows: &sliceRows{rows: out}, Tag: "SELECT"}, nil
}

// rowFailure turns the first failed row of a pull query into the statement's error.
func rowFailure(msg string) error {
	code := sql.CodeInvalidValue
	if i := strings.Index(msg, "ERROR "); i >= 0 && len(msg) >= i+11 {
		code = msg[i+6 : i+11]
		msg = strings.TrimPrefix(msg[i+11:], ": ")
	}
	return sql.Errorf(code, "%s", msg)
}

// rowSource is a bounded source of rows, one split, encoded with rowFormat.
type rowSource struct {
	rows []sql.Row
}

func (s *rowSource) Splits(context.Context) ([]string, error) { return []string{"0"}, nil }
func (s *rowSource) Bounded() bool                            { return true }
func (s *rowSource) Close() error                             { return nil }

func (s *rowSource) Open(_ context.Context, split string, offset int64) (connectors.SplitReader, error) {
	if split != "0" {
		return nil, fmt.Errorf("no split %s", split)
	}
	return &rowReader{rows: s.rows, pos: int(offset)}, nil
}

type rowReader struct {
	rows []sql.Row
	pos  int
}

func (r *rowReader) Read(_ context.Context, buf []connectors.Message, max int) ([]connectors.Message, error) {
	for ; r.pos < len(r.rows) && len(buf) < max; r.pos++ {
		buf = append(buf, connectors.Message{Offset: int64(r.pos), Body: sql.AppendRow(nil, r.rows[r.pos])})
	}
	if r.pos >= len(r.rows) {
		return buf, connectors.ErrEndOfSplit
	}
	return buf, nil
}

func (r *rowReader) Close() error { return nil }

// viewSource is a view's rows as a one-split bounded source: read, run by the split's
// reader in a goroutine of its own, hands them over in batches as it reads them, so a
// query over a large view holds a few batches of it, not all of it.
type viewSource struct {
	read func(ctx context.Context, add func(sql.Row) error) error
}

func (s *viewSource) Splits(context.Context) ([]string, error) { return []string{"0"}, nil }
func (s *viewSource) Bounded() bool                            { return true }
func (s *viewSource) Close() error                             { return nil }

// viewBatch is the rows a view's reader hands over at a time.
const viewBatch = 256

func (s *viewSource) Open(ctx context.Context, split string, offset int64) (connectors.SplitReader, error) {
	if split != "0" {
		return nil, fmt.Errorf("no split %s", split)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &viewReader{ch: make(chan []connectors.Message, 2), cancel: cancel}
	go func() {
		defer close(r.ch)
		var batch []connectors.Message
		var n int64
		send := func() error {
			select {
			case r.ch <- batch:
				batch = nil
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := s.read(ctx, func(row sql.Row) error {
			if n++; n <= offset {
				return nil // read before (the query's job started again)
			}
			batch = append(batch, connectors.Message{Offset: n - 1, Body: sql.AppendRow(nil, row)})
			if len(batch) < viewBatch {
				return nil
			}
			return send()
		})
		if err == nil && len(batch) > 0 {
			err = send()
		}
		r.err = err // read by Read after the channel is closed
	}()
	return r, nil
}

type viewReader struct {
	ch     chan []connectors.Message
	cancel context.CancelFunc
	err    error
	rest   []connectors.Message
}

func (r *viewReader) Read(ctx context.Context, buf []connectors.Message, max int) ([]connectors.Message, error) {
	for len(buf) < max {
		if len(r.rest) == 0 {
			var ok bool
			select {
			case r.rest, ok = <-r.ch:
			case <-ctx.Done():
				return buf, ctx.Err()
			}
			if !ok {
				if r.err != nil {
					return buf, r.err
				}
				return buf, connectors.ErrEndOfSplit
			}
		}
		k := min(len(r.rest), max-len(buf))
		buf = append(buf, r.rest[:k]...)
		r.rest = r.rest[k:]
	}
	return buf, nil
}

func (r *viewReader) Close() error {
	r.cancel()
	for range r.ch { // let the reading goroutine end
	}
	return nil
}

// sharedViews reads a job's committed view rows from the shared checkpoint store.
type sharedViews struct {
	ctx context.Context
	cs  *state.PostgresCheckpointStore
	job string
}

func (s sharedViews) Get(key []byte) ([]byte, bool, error) { return s.cs.GetJob(s.ctx, s.job, key) }

func (s sharedViews) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return s.cs.ScanJob(s.ctx, s.job, prefix, fn)
}

// rowFormat encodes rows with sql.AppendRow: the rows of views and constants.
type rowFormat struct{}

func (rowFormat) Decode(body []byte, dst sql.Row) (sql.Row, error) {
	r, n, err := sql.DecodeRow(body, dst)
	if err != nil {
		return nil, err
	}
	if n != len(body) {
		return nil, fmt.Errorf("row of %d bytes has %d more", n, len(body)-n)
	}
	return r, nil
}

func (rowFormat) Encode(dst []byte, r sql.Row) ([]byte, error) { return sql.AppendRow(dst, r), nil }

// tableSnapshot opens a table's changelog up to its current end, its records decoded with
// the table's format and handed on as rows (rowFormat).
func (e *Engine) tableSnapshot(spec planner.SourceSpec) (connectors.Source, error) {
	src, err := e.env("pull").OpenSource(spec)
	if err != nil {
		return nil, err
	}
	inner := src
	if s, ok := inner.(safeSource); ok {
		inner = s.Source
	}
	if bs, ok := inner.(interface{ Snapshot() error }); ok {
		if err := bs.Snapshot(); err != nil {
			src.Close()
			return nil, err
		}
	}
	if !src.Bounded() {
		src.Close()
		return nil, sql.Errorf(sql.CodeNotSupported, "a pull query cannot read table %s: its connector has no end to read to", spec.Stream)
	}
	name := spec.Options.Format
	if name == "" {
		name = "json"
	}
	if _, err := connectors.NewFormat(name, spec.Schema); err != nil {
		src.Close()
		return nil, err
	}
	return &decodedSource{Source: src, stream: spec.Stream, format: name, schema: spec.Schema, spec: spec}, nil
}

// decodedSource decodes another source's records with the stream's format and re-encodes
// each as a row (rowFormat); a record that does not decode fails the query, naming it.
// Splits are read concurrently and a Format is not safe for concurrent use, so each split
// reader has its own.
type decodedSource struct {
	connectors.Source
	stream string
	format string
	schema sql.Schema
	spec   planner.SourceSpec
}

func (s *decodedSource) Open(ctx context.Context, split string, offset int64) (connectors.SplitReader, error) {
	f, err := connectors.NewFormat(s.format, s.schema)
	if err != nil {
		return nil, err
	}
	r, err := s.Source.Open(ctx, split, offset)
	if err != nil {
		return nil, err
	}
	return &decodedReader{SplitReader: r, s: s, f: f, split: split, row: make(sql.Row, len(s.schema)), maxTs: math.MinInt64}, nil
}

type decodedReader struct {
	connectors.SplitReader
	s     *decodedSource
	f     connectors.Format
	split string
	row   sql.Row
	maxTs int64 // the largest event time read (a tombstone's time), MinInt64 before any
}

func (r *decodedReader) Read(ctx context.Context, buf []connectors.Message, max int) ([]connectors.Message, error) {
	start := len(buf)
	buf, err := r.SplitReader.Read(ctx, buf, max)
	spec := r.s.spec
	for i := start; i < len(buf); i++ {
		m := &buf[i]
		var row sql.Row
		var derr error
		if len(m.Body) == 0 && len(m.Key) > 0 && len(spec.PrimaryKey) > 0 {
			// A tombstone deletes its key (as a job reads it, exec.TombstoneRow).
			at := r.maxTs
			if at == math.MinInt64 {
				at = m.Timestamp
			}
			row, derr = exec.TombstoneRow(spec, m.Key, at, r.row[:0])
		} else {
			row, derr = r.f.Decode(m.Body, r.row[:0])
			if derr == nil && spec.EventTime >= 0 && spec.EventTime < len(row) && !row[spec.EventTime].IsNull() {
				if t := row[spec.EventTime].I; t > r.maxTs {
					r.maxTs = t
				}
			}
		}
		if derr != nil {
			return buf[:start], fmt.Errorf("table %s, split %s, offset %d: %w", r.s.stream, r.split, m.Offset, derr)
		}
		m.Body = sql.AppendRow(nil, row)
	}
	return buf, err
}
