package exec

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// sinkOp encodes rows with a Format and writes them to a connectors.Sink, one Write per
// batch. The message key is the KeyColumns' values as text, joined by '|'.
//
// The sink of an updating query (fold) writes a changelog keyed by KeyColumns: the changes
// of a key are folded to its last one, over a checkpoint's epoch on the exactly-once path
// (outbox.add) and over a batch otherwise (docs/sql.md, "Changelogs").
type sinkOp struct {
	ctx     context.Context
	sink    connectors.Sink
	format  connectors.Format
	keyCols []int
	// fold: the rows are changes by keyCols; foldKeys are the batch's messages' keys
	// (sql.AppendValue of each key column, so that no two keys share one), foldBuf their
	// scratch.
	fold     bool
	foldKeys []string
	// tombstones: a delete is written as its key without a body (a Kafka sink).
	tombstones bool
	foldBuf    []byte
	cnt        *counters
	msgs       []connectors.Message
	what       string // for errors
	// eo is set for exactly-once output: rows wait for the checkpoint that covers them.
	eo *outbox
	// tx is set instead for transactional output (sink_tx.go): rows are sent prepared at
	// once and committed after the checkpoint that covers them.
	tx *txOutput
	// stagedN and stagedB are what this sink added to cnt.stagedOut and cnt.stagedBytes
	// for its staged epoch; recovering: rows published by recovery were counted by the
	// checkpoint that stored them, and are not counted again.
	stagedN, stagedB int64
	recovering       bool
	// recover, when set, publishes what the outbox holds from before the job started; the
	// job runs it once the stage's inputs are open, before it reads anything.
	recover func() error
	// publishOnClose: the job ended normally without a last checkpoint (LIMIT): what eo
	// holds is written out at Close.
	publishOnClose bool
	// bad, schema: the stage's bad-record path for rows the format cannot encode (a
	// DOUBLE infinity in JSON), and the sink's schema; nil bad fails the batch instead.
	bad    *badRows
	schema sql.Schema
}

// write hands msgs to the sink and flushes it (exactly-once output).
func (s *sinkOp) write(msgs []connectors.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := s.sink.Write(s.ctx, msgs); err != nil {
		return &SinkError{Sink: s.what, Err: err}
	}
	if err := s.sink.Flush(s.ctx); err != nil {
		return &SinkError{Sink: s.what, Err: err}
	}
	s.count(int64(len(msgs)), bodyBytes(msgs))
	return nil
}

// count adds rows written to the job's counters (not while recovering).
func (s *sinkOp) count(n, nb int64) {
	if !s.recovering {
		s.cnt.out.Add(n)
		s.cnt.bytesOut.Add(nb)
	}
}

func bodyBytes(msgs []connectors.Message) int64 {
	var n int64
	for i := range msgs {
		n += int64(len(msgs[i].Body))
	}
	return n
}

// writeEntries writes the messages of entries and flushes the sink once.
func (s *sinkOp) writeEntries(entries []outboxEntry) error {
	var n, nb int64
	for _, e := range entries {
		if len(e.msgs) == 0 {
			continue
		}
		if err := s.sink.Write(s.ctx, e.msgs); err != nil {
			return &SinkError{Sink: s.what, Err: err}
		}
		n += int64(len(e.msgs))
		nb += bodyBytes(e.msgs)
	}
	if n == 0 {
		return nil
	}
	if err := s.sink.Flush(s.ctx); err != nil {
		return &SinkError{Sink: s.what, Err: err}
	}
	s.count(n, nb)
	return nil
}

// writeEpoch hands the entries of epoch to an EpochSink, which applies them at most once.
func (s *sinkOp) writeEpoch(epoch int64, entries []outboxEntry) error {
	es := make([]connectors.EpochEntry, 0, len(entries))
	var n, nb int64
	for _, e := range entries {
		if len(e.msgs) == 0 {
			continue
		}
		es = append(es, connectors.EpochEntry{Split: e.split, Msgs: e.msgs})
		n += int64(len(e.msgs))
		nb += bodyBytes(e.msgs)
	}
	if len(es) == 0 {
		return nil
	}
	if err := s.eo.es.WriteEpoch(s.ctx, s.eo.job, s.eo.stage, epoch, es); err != nil {
		return &SinkError{Sink: s.what, Err: err}
	}
	s.count(n, nb)
	return nil
}

// removed publishes the last entry of a split whose removal committed.
func (s *sinkOp) removed(split string) error {
	if s.eo == nil || s.eo.removing == nil || s.eo.removing.split != split {
		return nil
	}
	e := s.eo.removing
	s.eo.removing = nil
	if s.eo.es != nil {
		return s.writeEpoch(e.epoch, []outboxEntry{*e})
	}
	return s.write(e.msgs)
}

// committed is called once the checkpoint of epoch is durable.
func (s *sinkOp) committed(epoch int64) error {
	var err error
	switch {
	case s.tx != nil:
		err = s.tx.committed(s.ctx, s, epoch)
	case s.eo != nil:
		err = s.eo.committed(s, epoch)
	}
	if err == nil {
		s.stage(0, 0) // published: counted in cnt.out now
	}
	return err
}

// stage sets the rows and bytes the sink holds staged for the epoch being committed
// (counters.stagedOut).
func (s *sinkOp) stage(n, nb int64) {
	s.cnt.stagedOut.Add(n - s.stagedN)
	s.cnt.stagedBytes.Add(nb - s.stagedB)
	s.stagedN, s.stagedB = n, nb
}

func (s *sinkOp) Process(b *Batch) error {
	if len(b.Rows) == 0 {
		return nil
	}
	// Sinks may hold message bodies until Flush, so each batch gets fresh storage (one
	// allocation per batch, none per row).
	buf := make([]byte, 0, 96*len(b.Rows))
	s.msgs = s.msgs[:0]
	s.foldKeys = s.foldKeys[:0]
	now := nowMillis()
	for i, r := range b.Rows {
		start := len(buf)
		var err error
		buf, err = s.format.Encode(buf, r)
		if err != nil {
			if s.bad == nil {
				return &SinkError{Sink: s.what, Err: err}
			}
			buf = buf[:start]
			cause := &sql.Error{Code: sinkErrorCode(err), Message: "sink " + s.what + ": " + err.Error(), Pos: -1}
			if rerr := s.bad.reportAt(s.ctx, "sink", b.Split, rowOffset(b, i), r, s.schema, cause); rerr != nil {
				return rerr
			}
			continue
		}
		body := buf[start:len(buf):len(buf)]
		if s.tombstones && sql.IsDelete(r[len(r)-1]) {
			body, buf = nil, buf[:start]
		}
		var key []byte
		if len(s.keyCols) > 0 {
			ks := len(buf)
			for i, c := range s.keyCols {
				if i > 0 {
					buf = append(buf, '|')
				}
				buf = append(buf, r[c].String()...)
			}
			key = buf[ks:len(buf):len(buf)]
		}
		s.msgs = append(s.msgs, connectors.Message{Key: key, Body: body, Timestamp: now, Split: b.Split})
		if s.fold {
			s.foldBuf = s.foldBuf[:0]
			for _, c := range s.keyCols {
				s.foldBuf = sql.AppendValue(s.foldBuf, r[c])
			}
			s.foldKeys = append(s.foldKeys, string(s.foldBuf))
		}
	}
	if len(s.msgs) == 0 {
		return nil
	}
	if s.eo != nil {
		var keys []string
		if s.fold {
			keys = s.foldKeys
		}
		s.eo.add(b.Split, s.msgs, keys)
		return nil
	}
	if s.fold {
		s.msgs = foldByKey(s.msgs, s.foldKeys)
	}
	if s.tx != nil {
		if err := s.tx.prepare(s.ctx, s.msgs); err != nil {
			return &SinkError{Sink: s.what, Err: err}
		}
		return nil
	}
	if err := s.sink.Write(s.ctx, s.msgs); err != nil {
		return &SinkError{Sink: s.what, Err: err}
	}
	s.cnt.out.Add(int64(len(s.msgs)))
	s.cnt.bytesOut.Add(bodyBytes(s.msgs))
	return nil
}

func (s *sinkOp) Watermark(int64) error { return nil }
func (s *sinkOp) End() error            { return nil }

func (s *sinkOp) Control(c *Control) error {
	if c.Kind == Checkpoint && s.tx != nil {
		s.tx.checkpoint(c)
		if s.tx.staged != 0 {
			s.stage(s.tx.stagedN, s.tx.stagedB)
		}
		return nil
	}
	if s.eo != nil {
		var err error
		switch c.Kind {
		case Checkpoint:
			if err = s.eo.checkpoint(s.ctx, c); err == nil {
				var n, nb int64
				for _, e := range s.eo.staged {
					n += int64(len(e.msgs))
					nb += bodyBytes(e.msgs)
				}
				s.stage(n, nb)
			}
		case NewSplit:
			return s.eo.recoverSplit(s.ctx, s, c.Split)
		case RemoveSplit:
			err = s.eo.remove(s.ctx, c)
		}
		if err != nil {
			return &SinkError{Sink: s.what, Err: err}
		}
		return nil
	}
	if c.Kind == Checkpoint {
		if err := s.sink.Flush(s.ctx); err != nil {
			return &SinkError{Sink: s.what, Err: err}
		}
	}
	return nil
}

func (s *sinkOp) Close() error {
	var txErr error
	if s.tx != nil {
		txErr = s.tx.close(s, s.publishOnClose)
	}
	if s.eo != nil && s.publishOnClose {
		s.ctx = context.Background()
		var all []connectors.Message
		for _, e := range s.eo.staged {
			all = append(all, e.msgs...)
		}
		splits := make([]string, 0, len(s.eo.pending))
		for sp := range s.eo.pending {
			splits = append(splits, sp)
		}
		sort.Strings(splits)
		for _, sp := range splits {
			all = append(all, s.eo.pending[sp]...)
		}
		werr := s.write(all)
		s.eo.staged, s.eo.pending = nil, nil
		if werr != nil {
			s.sink.Close()
			return werr
		}
	}
	err := s.sink.Flush(context.Background())
	if cerr := s.sink.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = txErr
	}
	if err != nil {
		return &SinkError{Sink: s.what, Err: err}
	}
	return nil
}

func openSinkOp(ctx context.Context, env *Env, spec planner.SinkSpec, cnt *counters) (*sinkOp, error) {
	name := spec.Options.Format
	if name == "" {
		name = "json"
	}
	s, err := env.OpenSink(spec)
	if err != nil {
		return nil, &SinkError{Sink: sinkName(spec), Err: err}
	}
	var f connectors.Format = connectors.RowFormat{}
	if _, rows := s.(connectors.RowSink); !rows {
		if f, err = env.NewFormat(name, spec.Schema); err != nil {
			s.Close()
			return nil, &SinkError{Sink: sinkName(spec), Err: err}
		}
	}
	op := &sinkOp{ctx: ctx, sink: s, format: f, keyCols: spec.KeyColumns, cnt: cnt, what: sinkName(spec),
		fold: spec.Changes != planner.AppendOnly}
	// A Kafka topic's changelog ends a key with a tombstone, a record with the key and no
	// value (Kafka's compacted-topic convention; the Debezium envelope says delete itself).
	op.tombstones = op.fold && len(spec.KeyColumns) > 0 && spec.Options.Connector == "kafka" && name != "debezium-json"
	if rs, ok := s.(connectors.RejectSink); ok {
		// A row the sink's database refuses goes where the stage's bad rows go (its
		// dead-letter output), with the database's message.
		// They are stored (the dead-letter output flushed) before the sink commits.
		rs.SetReject(func(rows []connectors.RejectedRow) error {
			for _, r := range rows {
				row, derr := (connectors.RowFormat{}).Decode(r.Body, nil)
				if derr != nil {
					return &SinkError{Sink: op.what, Err: derr}
				}
				if err := op.bad.report(op.ctx, "sink", r.Split, row, op.schema, r.Cause); err != nil {
					return err
				}
			}
			if op.bad != nil && op.bad.st != nil {
				if dlq := op.bad.st.rootDLQ(op.bad.port); dlq != nil {
					return dlq.flush()
				}
			}
			return nil
		})
	}
	return op, nil
}

// foldByKey keeps the last of the messages of each key (keys[i] is msgs[i]'s), at the
// place of the key's first: a key's changes fold to its last row or delete, and the keys
// keep the order in which they first changed.
func foldByKey(msgs []connectors.Message, keys []string) []connectors.Message {
	if len(msgs) < 2 {
		return msgs
	}
	at := make(map[string]int, len(msgs))
	out := msgs[:0]
	for i := range msgs {
		if j, ok := at[keys[i]]; ok {
			out[j] = msgs[i]
			continue
		}
		at[keys[i]] = len(out)
		out = append(out, msgs[i])
	}
	return out
}

// callbackOp hands each row to a function (push queries). The row is valid only during the
// call.
type callbackOp struct {
	fn  func(sql.Row) error
	cnt *counters
}

func (c *callbackOp) Process(b *Batch) error {
	for _, r := range b.Rows {
		if err := c.fn(r); err != nil {
			return err
		}
		c.cnt.out.Add(1)
	}
	return nil
}
func (c *callbackOp) Watermark(int64) error  { return nil }
func (c *callbackOp) End() error             { return nil }
func (c *callbackOp) Control(*Control) error { return nil }
func (c *callbackOp) Close() error           { return nil }

// sideOutput writes rows that leave the main flow (late rows) to their own sink. Safe for
// concurrent use.
type sideOutput struct {
	mu sync.Mutex
	op sinkOp
}

func (o *sideOutput) Process(b *Batch) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.op.Process(b)
}

func (o *sideOutput) flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.op.sink.Flush(o.op.ctx); err != nil {
		return &SinkError{Sink: o.op.what, Err: err}
	}
	return nil
}

func (o *sideOutput) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.op.Close()
}

// rawOutput writes undecodable messages, as they were read, to a dead-letter sink. Safe for
// concurrent use (every split reader of a stage shares it).
type rawOutput struct {
	mu   sync.Mutex
	sink connectors.Sink
	what string
}

// write hands m, as read, to the sink; it keeps m's Offset and Split so the sink can tell
// copies of one record apart from different records (package doc).
func (o *rawOutput) write(ctx context.Context, m connectors.Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	msg := connectors.Message{Key: m.Key, Body: append([]byte(nil), m.Body...), Timestamp: m.Timestamp,
		Offset: m.Offset, Split: m.Split}
	if err := o.sink.Write(ctx, []connectors.Message{msg}); err != nil {
		return &SinkError{Sink: o.what, Err: err}
	}
	return nil
}

func (o *rawOutput) flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sink.Flush(context.Background())
}

func (o *rawOutput) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	err := o.sink.Flush(context.Background())
	if cerr := o.sink.Close(); err == nil {
		err = cerr
	}
	return err
}

// sideSpec turns a stream's late_topic/late_path (or dlq_topic/dlq_path) option into the
// sink spec of that side output, or returns ok=false when neither is set.
func sideSpec(src planner.SourceSpec, kind string, schema sql.Schema) (planner.SinkSpec, bool) {
	format := src.Options.Format
	if format == "" {
		format = "json"
	}
	topic, path := src.Options.LateTopic, src.Options.LatePath
	if kind == "dlq" {
		topic, path = src.Options.DLQTopic, src.Options.DLQPath
	}
	var spec planner.SinkSpec
	if t := topic; t != "" {
		conn := src.Connector
		if conn == "" || conn == "file" {
			conn = "broker"
		}
		spec = planner.SinkSpec{Stream: t, Connector: conn, Schema: schema,
			Options: connectors.StreamOptions{Connector: "broker", Topic: t, Format: format}}
	} else if p := path; p != "" {
		spec = planner.SinkSpec{Stream: p, Connector: "file", Schema: schema,
			Options: connectors.StreamOptions{Connector: "file", Path: p, Format: format}}
	} else {
		return planner.SinkSpec{}, false
	}
	if kind == "dlq" {
		spec.DLQOf = src.Stream
	}
	return spec, true
}

func sinkName(s planner.SinkSpec) string {
	if s.Stream != "" {
		return s.Stream
	}
	return strings.TrimSpace(s.Connector + " " + s.Options.Path)
}

func nowMillis() int64 { return time.Now().UnixMilli() }

// sinkErrorCode is the SQLSTATE of a value a format cannot encode: the code of an
// *sql.Error, else 22000 (data exception).
func sinkErrorCode(err error) string {
	var se *sql.Error
	if errors.As(err, &se) {
		return se.Code
	}
	return "22000"
}
