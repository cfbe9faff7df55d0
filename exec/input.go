package exec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// input is one input of a stage that reads something: a stream's splits (sourceInput) or
// the queues of an upstream stage's shuffle topic (shuffleInput). An in-process edge has no
// input value: the upstream stage's exchange (exchangeOut) sends its events to the stage.
//
// open opens what reader rd of split sp reads at its position (rd.next) and sets the
// reader up: it runs on a goroutine of its own once the stage calls rd.start, decodes
// batches and sends them to the stage's channel; rd.cancel stops it and rd.readerDone is
// closed when it has returned.
type input interface {
	splits(ctx context.Context) ([]string, error)
	open(ctx context.Context, st *stage, sp *split, rd *reader) error
	// idleTimeout is how long a split may go without records before it stops holding the
	// watermark back (0: never).
	idleTimeout() time.Duration
	// flush makes the input's side output (dead letters) durable at a checkpoint.
	flush() error
	close() error
}

// sourceInput reads a declared stream.
type sourceInput struct {
	spec    planner.SourceSpec
	src     connectors.Source
	idle    time.Duration
	dlq     *rawOutput
	batchSz int
}

func openSourceInput(ctx context.Context, env *Env, spec planner.SourceSpec) (*sourceInput, error) {
	if env.OpenSource == nil || env.NewFormat == nil {
		return nil, fmt.Errorf("%w: reading %s needs Env.OpenSource and Env.NewFormat", ErrMissingEnv, spec.Stream)
	}
	in := &sourceInput{spec: spec, idle: env.IdleTimeout, batchSz: env.BatchSize}
	opts := spec.Options
	if opts.IdleSet {
		in.idle = opts.IdleTimeout
	}
	if in.idle < 0 {
		in.idle = 0
	}
	if dspec, ok := sideSpec(spec, "dlq", spec.Schema); ok {
		if env.OpenSink == nil {
			return nil, fmt.Errorf("%w: dead-letter output %s needs Env.OpenSink", ErrMissingEnv, dspec.Stream)
		}
		s, err := env.OpenSink(dspec)
		if err != nil {
			return nil, &SinkError{Sink: sinkName(dspec), Err: err}
		}
		in.dlq = &rawOutput{sink: s, what: sinkName(dspec)}
	}
	src, err := env.OpenSource(spec)
	if err != nil {
		in.close()
		return nil, &SourceError{Stream: spec.Stream, Err: err}
	}
	in.src = src
	// Check the format now so a bad one fails Start, not a reader.
	if _, err := env.NewFormat(formatName(spec), spec.Schema); err != nil {
		in.close()
		return nil, &SourceError{Stream: spec.Stream, Err: err}
	}
	return in, nil
}

func (in *sourceInput) splits(ctx context.Context) ([]string, error) {
	s, err := in.src.Splits(ctx)
	if err != nil {
		return nil, &SourceError{Stream: in.spec.Stream, Err: err}
	}
	return s, nil
}

func (in *sourceInput) idleTimeout() time.Duration { return in.idle }

func (in *sourceInput) flush() error {
	if in.dlq == nil {
		return nil
	}
	return in.dlq.flush()
}

func (in *sourceInput) close() error {
	var first error
	if in.dlq != nil {
		first = in.dlq.close()
	}
	if in.src != nil {
		if err := in.src.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (in *sourceInput) open(ctx context.Context, st *stage, sp *split, rd *reader) error {
	env := &st.job.env
	format, err := env.NewFormat(formatName(in.spec), in.spec.Schema)
	if err != nil {
		return &SourceError{Stream: in.spec.Stream, Split: rd.raw, Err: err}
	}
	if rs, ok := in.src.(connectors.RowSource); ok {
		// The source hands typed rows of the stage's columns: nothing to encode or decode.
		rr, err := rs.OpenRows(ctx, rd.raw, rd.next)
		if err != nil {
			return &SourceError{Stream: in.spec.Stream, Split: rd.raw, Err: err}
		}
		setReader(ctx, rd, rr, func(rctx context.Context) { in.readRows(rctx, st, sp, rd, rr) })
		return nil
	}
	r, err := in.src.Open(ctx, rd.raw, rd.next)
	if err != nil {
		return &SourceError{Stream: in.spec.Stream, Split: rd.raw, Err: err}
	}
	setReader(ctx, rd, r, func(rctx context.Context) { in.read(rctx, st, sp, rd, r, format) })
	return nil
}

// readRows is the split reader of a RowSource: the source appends its rows straight into
// the split's pooled batches. Its rows hold the stage's columns (spec.Columns), so the
// event time is the row's EventTime column.
func (in *sourceInput) readRows(ctx context.Context, st *stage, sp *split, rd *reader, r connectors.RowReader) {
	defer close(rd.readerDone)
	defer r.Close()
	spec := in.spec
	env := &st.job.env
	// A stage ending in a shuffle topic tracks each row's source offset for the rows' ids; a
	// one-off query for the offset or line its first row error names (rowerrors.go).
	shuffles := st.plan.Exchange != nil && st.job.shuffleOut(st.plan.ID) || env.FailOnRowError
	readMax := MinWatermark
	width := len(spec.Schema)
	if spec.Columns != nil {
		width = len(spec.Columns)
	}
	var rb connectors.RowBatch
	for {
		ob := rd.pool.get(ctx)
		if ob == nil {
			return
		}
		ob.Split = sp.name
		rb.Width, rb.Values, rb.Offsets = width, ob.vals[:0], ob.offs[:0]
		err := r.ReadRows(ctx, &rb, env.BatchSize)
		ob.vals, ob.offs = rb.Values, rb.Offsets
		n := rb.Len()
		if rb.Width != width || len(rb.Values) != n*width {
			ob.release()
			select {
			case st.in <- event{kind: evError, err: &SourceError{Stream: spec.Stream, Split: rd.raw,
				Err: fmt.Errorf("%w: the source's rows have %d values of width %d; the stage reads %d columns", ErrBadPlan, len(rb.Values), rb.Width, width)}}:
			case <-ctx.Done():
			}
			return
		}
		if n > 0 {
			for i := 1; i <= n; i++ {
				ob.ends = append(ob.ends, i*width)
			}
			if spec.EventTime >= 0 {
				et := spec.EventTime
				for i := 0; i < n; i++ {
					v := ob.vals[i*width+et]
					if v.K == sql.KindNull {
						continue
					}
					if v.I > ob.maxTs {
						ob.maxTs = v.I
					}
				}
			} else {
				ob.maxTs = env.Now().UnixMilli()
			}
			ob.lastOffset = ob.offs[n-1]
			ob.cut()
			if shuffles {
				ob.Offsets = ob.offs
			}
			sentMax := ob.maxTs
			select {
			case st.in <- event{kind: evData, input: rd.input, split: sp, rd: rd, data: ob}:
			case <-ctx.Done():
				return
			}
			if spec.EventTime >= 0 {
				readMax = max(readMax, sentMax)
				st.waitAligned(ctx, rd, readMax)
			}
		} else {
			ob.release()
		}
		if errors.Is(err, connectors.ErrEndOfSplit) {
			select {
			case st.in <- event{kind: evEnd, input: rd.input, split: sp, rd: rd}:
			case <-ctx.Done():
			}
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				select {
				case st.in <- event{kind: evError, err: &SourceError{Stream: spec.Stream, Split: rd.raw, Err: err}}:
				case <-ctx.Done():
				}
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// setReader prepares rd: until the stage starts it, the reader is only open and the
// stage's end (or the split's removal) closes it.
func setReader(ctx context.Context, rd *reader, r interface{ Close() error }, run func(context.Context)) {
	rctx, cancel := context.WithCancel(ctx)
	rd.cancel, rd.readerDone, rd.pool = cancel, make(chan struct{}), newBatchPool(splitBatches)
	if l, ok := r.(interface{ Lag() int64 }); ok {
		rd.lag = l.Lag
	}
	rd.abort = func() { cancel(); r.Close(); close(rd.readerDone) }
	rd.start = func() { go run(rctx) }
}

// read is a split reader: it reads messages, decodes them into the split's pooled batches
// and sends them to the stage. Bad records are counted, reported with their offset and sent
// to the dead-letter output; they never stop the job.
func (in *sourceInput) read(ctx context.Context, st *stage, sp *split, rd *reader, r connectors.SplitReader, format connectors.Format) {
	defer close(rd.readerDone)
	defer r.Close()
	spec := in.spec
	env := &st.job.env
	input := rd.input
	msgs := make([]connectors.Message, 0, env.BatchSize)
	full := make(sql.Row, 0, len(spec.Schema))
	line := spec.Connector == "file"
	// A stage ending in a shuffle topic tracks each row's source offset for the rows' ids; a
	// one-off query for the offset or line its first row error names (rowerrors.go).
	shuffles := st.plan.Exchange != nil && st.job.shuffleOut(st.plan.ID) || env.FailOnRowError
	readMax := MinWatermark
	send := func(ev event) bool {
		select {
		case st.in <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		var err error
		msgs, err = r.Read(ctx, msgs[:0], env.BatchSize)
		if len(msgs) > 0 {
			var nb int64
			for i := range msgs {
				nb += int64(len(msgs[i].Body))
			}
			st.job.cnt.bytesIn.Add(nb)
			ob := rd.pool.get(ctx)
			if ob == nil {
				return
			}
			ob.Split = sp.name
			for i := range msgs {
				m := &msgs[i]
				derr := m.Err // a body the source could not read (one that does not inflate)
				switch {
				case derr != nil:
				case len(m.Body) == 0 && len(m.Key) > 0 && len(spec.PrimaryKey) > 0:
					at := max(readMax, ob.maxTs)
					if at == MinWatermark {
						at = m.Timestamp
					}
					full, derr = tombstone(spec, m.Key, at, full[:0])
				default:
					full, derr = format.Decode(m.Body, full[:0])
				}
				ts := int64(0)
				if derr == nil {
					ts, derr = eventTime(spec, full)
				}
				if derr != nil {
					rerr := &RecordError{Stream: spec.Stream, Split: rd.raw, Offset: m.Offset, Line: line, Err: derr}
					st.job.recordBad(rerr)
					if in.dlq != nil {
						if werr := in.dlq.write(ctx, *m); werr != nil {
							send(event{kind: evError, err: werr})
							return
						}
					}
					continue
				}
				// Kept for every row: a shuffle's ids, and where a row an operator fails
				// on was read (stage.offsetOf).
				ob.offs = append(ob.offs, m.Offset)
				if spec.Columns == nil {
					ob.vals = append(ob.vals, full...)
				} else {
					for _, c := range spec.Columns {
						ob.vals = append(ob.vals, full[c])
					}
				}
				ob.ends = append(ob.ends, len(ob.vals))
				if ts > ob.maxTs {
					ob.maxTs = ts
				}
			}
			ob.lastOffset = msgs[len(msgs)-1].Offset
			if spec.EventTime < 0 {
				ob.maxTs = env.Now().UnixMilli()
			}
			ob.cut()
			if shuffles {
				ob.Offsets = ob.offs
			}
			sentMax := ob.maxTs
			if !send(event{kind: evData, input: input, split: sp, rd: rd, data: ob}) {
				return
			}
			if spec.EventTime >= 0 {
				readMax = max(readMax, sentMax)
				st.waitAligned(ctx, rd, readMax)
			}
		}
		if errors.Is(err, connectors.ErrEndOfSplit) {
			send(event{kind: evEnd, input: input, split: sp, rd: rd})
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				send(event{kind: evError, err: &SourceError{Stream: spec.Stream, Split: rd.raw, Err: err}})
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// TombstoneRow is tombstone for readers of a table's changelog outside a job (a pull
// query's snapshot of the table).
func TombstoneRow(spec planner.SourceSpec, key []byte, at int64, full sql.Row) (sql.Row, error) {
	return tombstone(spec, key, at, full)
}

// tombstone is the row of a table's tombstone (a keyed message with an empty body): the
// delete of the key, at time at (the largest event time its split has read, or the
// message's timestamp before any): NULLs but for the key, the change column and the time.
func tombstone(spec planner.SourceSpec, key []byte, at int64, full sql.Row) (sql.Row, error) {
	op := spec.Schema.Index(sql.ChangeColumn)
	if len(spec.PrimaryKey) != 1 || op < 0 {
		return full, &connectors.DecodeError{Reason: "an empty message is a tombstone only for a table with a one-column primary key"}
	}
	for range spec.Schema {
		full = append(full, sql.Null)
	}
	pk := spec.PrimaryKey[0]
	v, err := sql.CastValue(sql.Varchar(string(key)), spec.Schema[pk].Type)
	if err != nil {
		return full, &connectors.DecodeError{Field: spec.Schema[pk].Name, Reason: "the tombstone's key: " + err.Error()}
	}
	full[pk], full[op] = v, sql.Varchar("delete")
	if spec.EventTime >= 0 {
		col := spec.EventTime
		if spec.Columns != nil {
			col = spec.Columns[col]
		}
		full[col] = sql.Value{K: sql.KindTimestamp, I: at}
	}
	return full, nil
}

// eventTime returns a decoded row's event time, or an error when it has none.
func eventTime(spec planner.SourceSpec, full sql.Row) (int64, error) {
	if spec.EventTime < 0 {
		return 0, nil
	}
	col := spec.EventTime
	if spec.Columns != nil {
		col = spec.Columns[col]
	}
	if col >= len(full) {
		return 0, &connectors.DecodeError{Reason: "record has no event-time column"}
	}
	v := full[col]
	switch v.K {
	case sql.KindTimestamp, sql.KindBigInt, sql.KindInt:
		return v.I, nil
	case sql.KindNull:
		return 0, &connectors.DecodeError{Field: spec.Schema[col].Name, Reason: "missing event time"}
	}
	return 0, &connectors.DecodeError{Field: spec.Schema[col].Name, Reason: "event time is not a TIMESTAMP"}
}

func formatName(spec planner.SourceSpec) string {
	if f := spec.Options.Format; f != "" {
		return f
	}
	return "json"
}

// shuffleInput reads the queues of an upstream stage's shuffle topic (shuffle.go).
type shuffleInput struct {
	spec planner.SourceSpec
	src  connectors.Source
}

func (in *shuffleInput) splits(ctx context.Context) ([]string, error) {
	return in.src.Splits(ctx)
}

// idleTimeout: a queue's "event time" is the last upstream watermark read from it; the
// upstream stage writes one to every queue, so queues never go idle.
func (in *shuffleInput) idleTimeout() time.Duration { return 0 }
func (in *shuffleInput) flush() error               { return nil }
func (in *shuffleInput) close() error               { return in.src.Close() }

func (in *shuffleInput) open(ctx context.Context, st *stage, sp *split, rd *reader) error {
	r, err := in.src.Open(ctx, rd.raw, rd.next)
	if err != nil {
		return &SourceError{Stream: in.spec.Stream, Split: rd.raw, Err: err}
	}
	own := rd.shuf.clone()
	setReader(ctx, rd, r, func(rctx context.Context) { in.read(rctx, st, sp, rd, r, own) })
	return nil
}

// read reads one queue of an upstream stage's shuffle topic: rows whose id the split has
// already applied are dropped; watermark messages set their producing split's watermark,
// and the input's watermark for the split (the minimum over the producing splits) goes
// with the batches. q is the reader's own copy of what the split applied; each batch
// carries the changes to it.
func (in *shuffleInput) read(ctx context.Context, st *stage, sp *split, rd *reader, r connectors.SplitReader, q *queueState) {
	defer close(rd.readerDone)
	defer r.Close()
	env := &st.job.env
	msgs := make([]connectors.Message, 0, env.BatchSize)
	var m shuffleMsg
	send := func(ev event) bool {
		select {
		case st.in <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	qwm := q.watermark()
	readMax := qwm
	var ob *ownedBatch
	newBatch := func() bool {
		if ob = rd.pool.get(ctx); ob == nil {
			return false
		}
		ob.Split = sp.name
		return true
	}
	for {
		var err error
		msgs, err = r.Read(ctx, msgs[:0], env.BatchSize)
		if len(msgs) > 0 {
			if !newBatch() {
				return
			}
			for i := range msgs {
				msg := &msgs[i]
				if msg.Err != nil {
					st.job.recordBad(&RecordError{Stream: in.spec.Stream, Split: rd.raw, Offset: msg.Offset, Err: msg.Err})
					continue
				}
				if derr := decodeShuffle(msg.Body, &m); derr != nil {
					st.job.recordBad(&RecordError{Stream: in.spec.Stream, Split: rd.raw, Offset: msg.Offset, Err: derr})
					continue
				}
				if m.isWM {
					if m.allSplits {
						q.setWM("", m.wm, true)
						for p, w := range q.wms {
							ob.marks = append(ob.marks, markUpd{split: p, isWM: true, wm: w})
						}
					} else {
						q.setStatus(m.split, m.wm, m.idle)
						ob.marks = append(ob.marks, markUpd{split: m.split, isWM: true, wm: q.wms[m.split], idle: m.idle})
					}
					w := q.watermark()
					if w <= qwm {
						continue
					}
					// The rows before the input's watermark rose are processed before it
					// applies, the rows after it after: the batch ends here, and the reader
					// stays aligned.
					qwm = w
					ob.maxTs = w
					ob.lastOffset = msg.Offset
					ob.cut()
					if !send(event{kind: evData, input: rd.input, split: sp, rd: rd, data: ob}) {
						return
					}
					readMax = max(readMax, w)
					st.waitAligned(ctx, rd, readMax)
					if !newBatch() {
						return
					}
					continue
				}
				if q.activate(m.split) {
					// Rows of a producing split that said it was idle: it is active again
					// (it holds the input's watermark from now on, which never goes back).
					ob.marks = append(ob.marks, markUpd{split: m.split, isWM: true, wm: q.wms[m.split]})
				}
				mk, seen := q.marks[m.split]
				kept := false
				for _, sr := range m.rows {
					if seen && mk.covers(sr.off, sr.seq) {
						continue
					}
					mk, seen, kept = dedupMark{sr.off, sr.seq}, true, true
					ob.vals = append(ob.vals, sr.row...)
					ob.ends = append(ob.ends, len(ob.vals))
				}
				if kept {
					q.marks[m.split] = mk
					ob.marks = append(ob.marks, markUpd{split: m.split, mark: mk})
				}
				if len(ob.ends) >= env.BatchSize && i < len(msgs)-1 {
					// A message holds many rows: batches end at a message boundary once
					// they hold BatchSize rows, so each stays within the pool's bound.
					ob.lastOffset = msg.Offset
					ob.cut()
					if !send(event{kind: evData, input: rd.input, split: sp, rd: rd, data: ob}) || !newBatch() {
						return
					}
				}
			}
			ob.lastOffset = msgs[len(msgs)-1].Offset
			ob.cut()
			if !send(event{kind: evData, input: rd.input, split: sp, rd: rd, data: ob}) {
				return
			}
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				send(event{kind: evError, err: &SourceError{Stream: in.spec.Stream, Split: rd.raw, Err: err}})
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}
