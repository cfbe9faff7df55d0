package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// Exchanges through shuffle topics. When Env.ShuffleTopics is set and a stage reading a
// broker stream ends in an exchange whose downstream SourceSpec is on the broker, the
// upstream stage writes the shuffle topic "<job>-<stage>-shuffle" and the downstream stage
// reads it like any topic, each stage checkpointing on its own:
//
//   - A data message holds rows of one source split bound for one queue (hash(keys) mod
//     queues), each with its id (source offset, seq): seq numbers the rows one source
//     record produced. Ids are deterministic, so rows written again after the upstream
//     stage restarts from its checkpoint carry the ids they had.
//   - The downstream stage keeps, per queue and source split, the highest id it has
//     applied and drops rows at or below it; these marks are part of its checkpoint, with
//     its queue offsets and operator state, so a row affects committed state once.
//   - A watermark message goes to every queue when the upstream watermark rises; a queue's
//     watermark is the last one read from it and the downstream stage's watermark is the
//     minimum over its queues.
//
// Message bodies: 'D' uvarint len(split) split uvarint n, n × (varint offset, uvarint seq,
// sql.AppendRow row); 'W' varint watermark.

// QueueSink is a sink whose messages are addressed to queues (shuffle topics).
type QueueSink interface {
	Queues() int
	WriteQueue(ctx context.Context, queue int, msgs []connectors.Message) error
}

const (
	shuffleData      = 'D'
	shuffleWatermark = 'W'
)

// shuffleOut ends a stage by writing the shuffle topic.
type shuffleOut struct {
	ctx    context.Context
	sink   connectors.Sink
	qs     QueueSink
	keys   []planner.Evaluator
	n      int
	cols   []int
	bufs   [][]byte
	counts []int
	row    sql.Row
	msg    [1]connectors.Message
	what   string
	wm     int64
}

func (x *shuffleOut) Process(b *Batch) error {
	if b.Offsets == nil {
		return fmt.Errorf("%w: rows reach shuffle topic %s without source offsets", ErrBadPlan, x.what)
	}
	if x.bufs == nil {
		x.bufs = make([][]byte, x.n)
		x.counts = make([]int, x.n)
	}
	for q := range x.bufs {
		x.bufs[q], x.counts[q] = x.bufs[q][:0], 0
	}
	prev, seq := int64(-1), uint64(0)
	for i, r := range b.Rows {
		h := sql.HashSeed
		for _, k := range x.keys {
			h = sql.HashValue(h, k(r))
		}
		q := int(h % uint64(x.n))
		off := b.Offsets[i]
		if off == prev {
			seq++
		} else {
			prev, seq = off, 0
		}
		buf := binary.AppendVarint(x.bufs[q], off)
		buf = binary.AppendUvarint(buf, seq)
		if x.cols == nil {
			buf = sql.AppendRow(buf, r)
		} else {
			x.row = x.row[:0]
			for _, c := range x.cols {
				x.row = append(x.row, r[c])
			}
			buf = sql.AppendRow(buf, x.row)
		}
		x.bufs[q] = buf
		x.counts[q]++
	}
	for q, n := range x.counts {
		if n == 0 {
			continue
		}
		body := make([]byte, 0, len(x.bufs[q])+len(b.Split)+12)
		body = append(body, shuffleData)
		body = binary.AppendUvarint(body, uint64(len(b.Split)))
		body = append(body, b.Split...)
		body = binary.AppendUvarint(body, uint64(n))
		body = append(body, x.bufs[q]...)
		if err := x.write(q, body); err != nil {
			return err
		}
	}
	return nil
}

func (x *shuffleOut) write(q int, body []byte) error {
	x.msg[0] = connectors.Message{Body: body}
	if err := x.qs.WriteQueue(x.ctx, q, x.msg[:]); err != nil {
		return &SinkError{Sink: x.what, Err: err}
	}
	return nil
}

func (x *shuffleOut) Watermark(wm int64) error {
	if wm <= x.wm {
		return nil
	}
	x.wm = wm
	body := binary.AppendVarint([]byte{shuffleWatermark}, wm)
	for q := 0; q < x.n; q++ {
		if err := x.write(q, body); err != nil {
			return err
		}
	}
	return nil
}

func (x *shuffleOut) Control(c *Control) error {
	if c.Kind == Checkpoint {
		if err := x.sink.Flush(x.ctx); err != nil {
			return &SinkError{Sink: x.what, Err: err}
		}
	}
	return nil
}

func (x *shuffleOut) End() error   { return nil }
func (x *shuffleOut) Close() error { return x.sink.Close() }

var errBadShuffle = errors.New("corrupt shuffle message")

// shuffleRow is one decoded row of a data message.
type shuffleRow struct {
	off int64
	seq uint64
	row sql.Row
}

// decodeShuffle decodes a shuffle message: a watermark (isWM) or the rows of one source
// split. rows is reused.
func decodeShuffle(b []byte, rows []shuffleRow) (isWM bool, wm int64, split string, out []shuffleRow, err error) {
	out = rows[:0]
	if len(b) == 0 {
		return false, 0, "", out, errBadShuffle
	}
	switch b[0] {
	case shuffleWatermark:
		v, n := binary.Varint(b[1:])
		if n <= 0 || 1+n != len(b) {
			return false, 0, "", out, errBadShuffle
		}
		return true, v, "", out, nil
	case shuffleData:
	default:
		return false, 0, "", out, fmt.Errorf("%w: kind %#x", errBadShuffle, b[0])
	}
	p := 1
	l, n := binary.Uvarint(b[p:])
	if n <= 0 || l > uint64(len(b)-p-n) {
		return false, 0, "", out, errBadShuffle
	}
	p += n
	split = string(b[p : p+int(l)])
	p += int(l)
	cnt, n := binary.Uvarint(b[p:])
	if n <= 0 || cnt > uint64(len(b)-p) {
		return false, 0, "", out, errBadShuffle
	}
	p += n
	for i := uint64(0); i < cnt; i++ {
		off, n := binary.Varint(b[p:])
		if n <= 0 {
			return false, 0, "", out, errBadShuffle
		}
		p += n
		seq, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return false, 0, "", out, errBadShuffle
		}
		p += n
		var reuse sql.Row
		if len(out) < cap(out) {
			reuse = out[:len(out)+1][len(out)].row
		}
		row, n, err := sql.DecodeRow(b[p:], reuse)
		if err != nil {
			return false, 0, "", out, fmt.Errorf("%w: row %d: %v", errBadShuffle, i, err)
		}
		p += n
		out = append(out, shuffleRow{off: off, seq: seq, row: row})
	}
	if p != len(b) {
		return false, 0, "", out, errBadShuffle
	}
	return false, 0, split, out, nil
}

// dedupMark is the highest row id of one source split applied from one queue.
type dedupMark struct {
	off int64
	seq uint64
}

func (m dedupMark) covers(off int64, seq uint64) bool {
	return off < m.off || (off == m.off && seq <= m.seq)
}

func encodeMarks(m map[string]dedupMark) []byte {
	var out []byte
	out = binary.AppendUvarint(out, uint64(len(m)))
	for s, mk := range m {
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
		out = binary.AppendVarint(out, mk.off)
		out = binary.AppendUvarint(out, mk.seq)
	}
	return out
}

func decodeMarks(b []byte) (map[string]dedupMark, error) {
	cnt, n := binary.Uvarint(b)
	if n <= 0 || cnt > uint64(len(b)) {
		return nil, errBadShuffle
	}
	p := n
	m := make(map[string]dedupMark, cnt)
	for i := uint64(0); i < cnt; i++ {
		l, n := binary.Uvarint(b[p:])
		if n <= 0 || l > uint64(len(b)-p-n) {
			return nil, errBadShuffle
		}
		p += n
		s := string(b[p : p+int(l)])
		p += int(l)
		off, n := binary.Varint(b[p:])
		if n <= 0 {
			return nil, errBadShuffle
		}
		p += n
		seq, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return nil, errBadShuffle
		}
		p += n
		m[s] = dedupMark{off, seq}
	}
	if p != len(b) {
		return nil, errBadShuffle
	}
	return m, nil
}
