package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// Exchanges through shuffle topics. When Env.ShuffleTopics is set and every stage feeding
// a stage reads broker streams (shuffleEdges), each of them writes its shuffle topic
// "<job>-<stage>-shuffle" and the downstream stage reads them like any topics, each stage
// checkpointing on its own:
//
//   - A data message holds rows of one producing split (a split of the upstream stage)
//     bound for one queue (hash(keys) mod queues), each with its id (source offset, seq):
//     seq numbers the rows one source record produced. Ids are deterministic, so rows
//     written again after the upstream split restarts from its checkpoint — on this
//     instance or another — carry the ids they had.
//   - A watermark message names its producing split: when a split's watermark rises, or it
//     goes idle or active again (docs/sql.md "Idle splits"), the upstream stage writes
//     (split, watermark, idle) to every queue, after the rows that split produced before it.
//     A data message says its producing split is active.
//   - Each downstream split reads the queue of its name of every input topic. Per input
//     and producing split it keeps the highest id applied, dropping rows at or below it,
//     and the last watermark and idle status read. The input's watermark for the split is
//     the minimum over the upstream stage's active splits (all of them, wherever they run:
//     one that has said nothing yet holds it back); when none is active, the largest
//     watermark of the idle ones (queueState.watermark). Idleness is decided by the
//     instance that runs a producing split, so the downstream split applies the rule one
//     instance would apply to all of them, and idle producers on other instances do not
//     hold back the last windows. A producing split that moves to another instance, or is
//     taken over after a crash, neither lets the watermark run ahead nor holds it back once
//     its new owner goes on. Marks, watermarks, idle statuses and queue offsets are part of
//     the split's checkpoint (ShuffleKey), with its operator state: they move with the
//     split.
//
// Message bodies: 'D' uvarint len(split) split uvarint n, n × (varint offset, uvarint seq,
// sql.AppendRow row); 'P' uvarint len(split) split varint watermark [flags byte, 1: idle]
// (the flags byte is written only for an idle split, so an active split's message is the
// one written before idleness crossed exchanges). 'W' varint watermark (written before
// watermarks named their split) applies to every producing split.

// QueueSink is a sink whose messages are addressed to queues (shuffle topics).
type QueueSink interface {
	Queues() int
	WriteQueue(ctx context.Context, queue int, msgs []connectors.Message) error
}

const (
	shuffleData      = 'D'
	shuffleWatermark = 'W' // read only: a watermark for every producing split
	shuffleSplitWM   = 'P'
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
	wms    map[string]int64 // the last watermark written per producing split
	idle   map[string]bool  // the producing splits last written as idle
	// A rising watermark of an active split is written at most once per gap (the stage's
	// tick): the split's newest one waits in pending until the gap has passed since the
	// last write (its stage reports every split's status at every advance, batch or tick,
	// so it goes out at the first advance after that). Without it, every batch a source
	// split reads costs a watermark message to every queue, read back by every downstream
	// split: with small batches (input read as it arrives, units spread over instances)
	// as many messages as data (docs/benchmarks.md "Scale-out"). A change of idle status,
	// the end of input (MaxWatermark), a checkpoint and a removed split write at once.
	gap     time.Duration
	now     func() time.Time
	written map[string]time.Time // when each split's watermark was last written
	pending map[string]int64     // rises not written yet, per split
	wmMsgs  int                  // watermark messages written (one per queue), for tests
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

// Watermark: the stage's watermark says nothing per split; SplitWatermark writes them.
func (x *shuffleOut) Watermark(int64) error { return nil }

// SplitWatermark writes split's watermark, as an active split's, to every queue when it
// rose.
func (x *shuffleOut) SplitWatermark(split string, wm int64) error {
	return x.SplitStatus(split, wm, false)
}

// SplitStatus writes split's watermark and idle status to every queue when the watermark
// rose or the status changed (the watermark written never goes back).
func (x *shuffleOut) SplitStatus(split string, wm int64, idle bool) error {
	if x.wms == nil {
		x.wms, x.idle = map[string]int64{}, map[string]bool{}
		x.written, x.pending = map[string]time.Time{}, map[string]int64{}
	}
	if p, ok := x.pending[split]; ok {
		wm = max(wm, p)
	}
	last, ok := x.wms[split]
	if ok && wm <= last && idle == x.idle[split] {
		return nil
	}
	if ok {
		wm = max(wm, last)
	}
	if ok && idle == x.idle[split] && wm != MaxWatermark && x.gap > 0 {
		if now := x.now(); now.Sub(x.written[split]) < x.gap {
			x.pending[split] = wm
			return nil
		}
	}
	return x.writeStatus(split, wm, idle)
}

// writeStatus writes split's watermark and idle status to every queue.
func (x *shuffleOut) writeStatus(split string, wm int64, idle bool) error {
	delete(x.pending, split)
	if x.gap > 0 {
		x.written[split] = x.now()
	}
	x.wms[split] = wm
	if idle {
		x.idle[split] = true
	} else {
		delete(x.idle, split)
	}
	body := make([]byte, 0, 3+len(split)+binary.MaxVarintLen64)
	body = append(body, shuffleSplitWM)
	body = binary.AppendUvarint(body, uint64(len(split)))
	body = append(body, split...)
	body = binary.AppendVarint(body, wm)
	if idle {
		body = append(body, 1)
	}
	for q := 0; q < x.n; q++ {
		if err := x.write(q, body); err != nil {
			return err
		}
		x.wmMsgs++
	}
	return nil
}

// outPending reports whether out holds a watermark rise back (shuffleOut.gap): the
// stage's ticks must not slow down until it is written.
func outPending(out any) bool {
	x, ok := out.(*shuffleOut)
	return ok && len(x.pending) > 0
}

// writePending writes the rises still waiting for their gap to pass.
func (x *shuffleOut) writePending() error {
	for _, split := range slices.Sorted(maps.Keys(x.pending)) {
		if err := x.writeStatus(split, x.pending[split], x.idle[split]); err != nil {
			return err
		}
	}
	return nil
}

func (x *shuffleOut) Control(c *Control) error {
	if c.Kind == RemoveSplit {
		// The unit's last rise goes out before another owner may write the split's
		// watermark; the split may come back here later: its watermark and status are then
		// written again from its checkpoint, whatever another owner wrote meanwhile.
		if p, ok := x.pending[c.Split]; ok {
			if err := x.writeStatus(c.Split, p, x.idle[c.Split]); err != nil {
				return err
			}
		}
		delete(x.wms, c.Split)
		delete(x.idle, c.Split)
		delete(x.written, c.Split)
	}
	if c.Kind == Checkpoint {
		if err := x.writePending(); err != nil {
			return err
		}
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

// shuffleMsg is a decoded shuffle message: rows of split, or a watermark of split (all
// producing splits when allSplits: the old 'W' form) and whether split is idle.
type shuffleMsg struct {
	isWM      bool
	allSplits bool
	idle      bool
	wm        int64
	split     string
	rows      []shuffleRow
}

// readSplit reads the producing split's name that follows a message's kind byte (uvarint
// length, bytes) into m.split and returns where the rest begins; ok is false when b is too
// short for it.
func (m *shuffleMsg) readSplit(b []byte) (p int, ok bool) {
	l, n := binary.Uvarint(b[1:])
	if n <= 0 || l > uint64(len(b)-1-n) {
		return 0, false
	}
	p = 1 + n
	m.split = string(b[p : p+int(l)])
	return p + int(l), true
}

// decodeShuffle decodes a shuffle message into m; m.rows is reused.
func decodeShuffle(b []byte, m *shuffleMsg) error {
	*m = shuffleMsg{rows: m.rows[:0]}
	if len(b) == 0 {
		return errBadShuffle
	}
	switch b[0] {
	case shuffleWatermark:
		v, n := binary.Varint(b[1:])
		if n <= 0 || 1+n != len(b) {
			return errBadShuffle
		}
		m.isWM, m.allSplits, m.wm = true, true, v
		return nil
	case shuffleSplitWM:
		p, ok := m.readSplit(b)
		if !ok {
			return errBadShuffle
		}
		v, n := binary.Varint(b[p:])
		if n <= 0 {
			return errBadShuffle
		}
		switch rest := b[p+n:]; {
		case len(rest) == 0:
		case len(rest) == 1 && rest[0] == 1:
			m.idle = true
		default:
			return errBadShuffle
		}
		m.isWM, m.wm = true, v
		return nil
	case shuffleData:
	default:
		return fmt.Errorf("%w: kind %#x", errBadShuffle, b[0])
	}
	p, ok := m.readSplit(b)
	if !ok {
		return errBadShuffle
	}
	cnt, n := binary.Uvarint(b[p:])
	if n <= 0 || cnt > uint64(len(b)-p) {
		return errBadShuffle
	}
	p += n
	out := m.rows
	for i := uint64(0); i < cnt; i++ {
		off, n := binary.Varint(b[p:])
		if n <= 0 {
			return errBadShuffle
		}
		p += n
		seq, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return errBadShuffle
		}
		p += n
		var reuse sql.Row
		if len(out) < cap(out) {
			reuse = out[:len(out)+1][len(out)].row
		}
		row, n, err := sql.DecodeRow(b[p:], reuse)
		if err != nil {
			m.rows = out
			return fmt.Errorf("%w: row %d: %v", errBadShuffle, i, err)
		}
		p += n
		out = append(out, shuffleRow{off: off, seq: seq, row: row})
	}
	m.rows = out
	if p != len(b) {
		return errBadShuffle
	}
	return nil
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

// queueState is what a split reading shuffle topics has applied from one input: the
// queue's next offset, and per producing split (the upstream stage's split that wrote the
// rows) the highest row id applied, the last watermark read and whether it said it was
// idle. producers are the upstream stage's splits, the ones whose watermarks the input's
// watermark waits for.
type queueState struct {
	next      int64
	producers []string
	marks     map[string]dedupMark
	wms       map[string]int64
	idle      map[string]bool // producers whose last word was that they are idle
}

func newQueueState(producers []string) *queueState {
	return &queueState{producers: producers, marks: map[string]dedupMark{}, wms: map[string]int64{}, idle: map[string]bool{}}
}

func (q *queueState) clone() *queueState {
	c := &queueState{next: q.next, producers: q.producers, marks: make(map[string]dedupMark, len(q.marks)),
		wms: make(map[string]int64, len(q.wms)), idle: make(map[string]bool, len(q.idle))}
	for k, v := range q.marks {
		c.marks[k] = v
	}
	for k, v := range q.wms {
		c.wms[k] = v
	}
	for k := range q.idle {
		c.idle[k] = true
	}
	return c
}

// setStatus records producer's watermark (it only rises) and idle status.
func (q *queueState) setStatus(producer string, wm int64, idle bool) {
	q.setWM(producer, wm, false)
	if idle {
		q.idle[producer] = true
	} else {
		delete(q.idle, producer)
	}
}

// activate marks producer active (its rows arrived); it reports whether it was idle.
func (q *queueState) activate(producer string) bool {
	if !q.idle[producer] {
		return false
	}
	delete(q.idle, producer)
	return true
}

// setWM records producer's watermark (it only rises); all: every producer's (a 'W'
// message).
func (q *queueState) setWM(producer string, wm int64, all bool) {
	if all {
		for _, p := range q.producers {
			q.setWM(p, wm, false)
		}
		for p := range q.wms {
			q.setWM(p, wm, false)
		}
		return
	}
	if cur, ok := q.wms[producer]; !ok || wm > cur {
		q.wms[producer] = wm
	}
}

// watermark is the input's watermark: MinWatermark while a producing split has said
// nothing; else the minimum over the active producing splits (not idle, not finished);
// when none is active, the largest watermark of the idle ones. That is docs/sql.md "Idle
// splits" applied across instances: an instance pulls its idle splits up to its live
// splits' watermark, or, when all of its splits are idle, to the largest event time it
// read, so the largest an idle producer reports is what one instance running every
// producing split would pull them all to. Without a list of producers it is the same over
// those heard from.
func (q *queueState) watermark() int64 {
	active, idle := MaxWatermark, MinWatermark
	anyIdle := false
	one := func(p string, w int64) {
		switch {
		case q.idle[p]:
			idle, anyIdle = max(idle, w), true
		default:
			active = min(active, w)
		}
	}
	if len(q.producers) == 0 {
		if len(q.wms) == 0 {
			return MinWatermark
		}
		for p, w := range q.wms {
			one(p, w)
		}
	} else {
		for _, p := range q.producers {
			w, ok := q.wms[p]
			if !ok {
				return MinWatermark
			}
			one(p, w)
		}
	}
	if active == MaxWatermark && anyIdle {
		return idle // every producer is idle or finished
	}
	return active
}

// allIdle reports whether every producing split has said it is idle or finished, and one
// is idle: a split reading only such inputs is idle for the stages after it.
func (q *queueState) allIdle() bool {
	names := q.producers
	if len(names) == 0 {
		for p := range q.wms {
			names = append(names, p)
		}
	}
	anyIdle := false
	for _, p := range names {
		w, ok := q.wms[p]
		switch {
		case !ok:
			return false
		case q.idle[p]:
			anyIdle = true
		case w != MaxWatermark:
			return false
		}
	}
	return anyIdle
}

// splitStatuser is an output told each split's idle status with its watermark (a shuffle
// topic, which hands both to the stage after it).
type splitStatuser interface {
	SplitStatus(split string, wm int64, idle bool) error
}

// splitIdle is whether sp counts as idle for the stages after this one: a source split
// that is idle, or a split reading shuffle topics whose every producer is idle or finished.
func (st *stage) splitIdle(sp *split) bool {
	if sp.done {
		return false
	}
	if sp.input >= 0 {
		return sp.idle
	}
	if !st.shuffleIn || len(sp.rds) == 0 {
		return false
	}
	for _, rd := range sp.rds {
		if rd.shuf == nil || !rd.shuf.allIdle() {
			return false
		}
	}
	return true
}

// reportStatus tells an output that keeps split statuses (a shuffle topic) sp's watermark
// and idle status; it writes only when one changed.
func (st *stage) reportStatus(sp *split) error {
	if ss, ok := st.out.(splitStatuser); ok {
		return ss.SplitStatus(sp.name, sp.wm, st.splitIdle(sp))
	}
	return nil
}

// encodeQueueStates encodes the states of a split's inputs (ShuffleKey's value): a version
// byte 1, uvarint n, then per input: varint next, uvarint m, m × (uvarint len(producer)
// producer, flags byte (1: mark, 2: watermark, 4: idle), [varint offset uvarint seq],
// [varint wm]). States written before idleness crossed exchanges have no 4 flag: their
// producers read as active.
func encodeQueueStates(qs []*queueState) []byte {
	out := []byte{1}
	out = binary.AppendUvarint(out, uint64(len(qs)))
	for _, q := range qs {
		out = binary.AppendVarint(out, q.next)
		names := make([]string, 0, len(q.marks)+len(q.wms))
		for p := range q.marks {
			names = append(names, p)
		}
		for p := range q.wms {
			if _, ok := q.marks[p]; !ok {
				names = append(names, p)
			}
		}
		for p := range q.idle {
			_, m := q.marks[p]
			_, w := q.wms[p]
			if !m && !w {
				names = append(names, p)
			}
		}
		sort.Strings(names)
		out = binary.AppendUvarint(out, uint64(len(names)))
		for _, p := range names {
			out = binary.AppendUvarint(out, uint64(len(p)))
			out = append(out, p...)
			mk, hasMark := q.marks[p]
			wm, hasWM := q.wms[p]
			var flags byte
			if hasMark {
				flags |= 1
			}
			if hasWM {
				flags |= 2
			}
			if q.idle[p] {
				flags |= 4
			}
			out = append(out, flags)
			if hasMark {
				out = binary.AppendVarint(out, mk.off)
				out = binary.AppendUvarint(out, mk.seq)
			}
			if hasWM {
				out = binary.AppendVarint(out, wm)
			}
		}
	}
	return out
}

// decodeQueueStates is the inverse of encodeQueueStates (producers are left empty).
func decodeQueueStates(b []byte) ([]*queueState, error) {
	if len(b) == 0 || b[0] != 1 {
		return nil, fmt.Errorf("%w: shuffle state version", errBadShuffle)
	}
	p := 1
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return 0, false
		}
		p += n
		return v, true
	}
	sv := func() (int64, bool) {
		v, n := binary.Varint(b[p:])
		if n <= 0 {
			return 0, false
		}
		p += n
		return v, true
	}
	cnt, ok := uv()
	if !ok || cnt > uint64(len(b)) {
		return nil, errBadShuffle
	}
	out := make([]*queueState, 0, cnt)
	for i := uint64(0); i < cnt; i++ {
		q := newQueueState(nil)
		if q.next, ok = sv(); !ok {
			return nil, errBadShuffle
		}
		m, ok := uv()
		if !ok || m > uint64(len(b)) {
			return nil, errBadShuffle
		}
		for k := uint64(0); k < m; k++ {
			l, ok := uv()
			if !ok || l > uint64(len(b)-p) {
				return nil, errBadShuffle
			}
			name := string(b[p : p+int(l)])
			p += int(l)
			if p >= len(b) {
				return nil, errBadShuffle
			}
			flags := b[p]
			p++
			if flags&^7 != 0 {
				return nil, errBadShuffle
			}
			if flags&4 != 0 {
				q.idle[name] = true
			}
			if flags&1 != 0 {
				off, ok1 := sv()
				seq, ok2 := uv()
				if !ok1 || !ok2 {
					return nil, errBadShuffle
				}
				q.marks[name] = dedupMark{off, seq}
			}
			if flags&2 != 0 {
				wm, ok := sv()
				if !ok {
					return nil, errBadShuffle
				}
				q.wms[name] = wm
			}
		}
		out = append(out, q)
	}
	if p != len(b) {
		return nil, errBadShuffle
	}
	return out, nil
}

// markUpd is a producing split's new dedup mark (isWM false) or watermark and idle status.
type markUpd struct {
	split string
	isWM  bool
	idle  bool
	mark  dedupMark
	wm    int64
}

// shuffleProducers lists, per input of a stage reading shuffle topics, the splits of the
// upstream stage (once; every split of the stage shares the lists).
func (st *stage) shuffleProducers(ctx context.Context) ([][]string, error) {
	if st.producers != nil {
		return st.producers, nil
	}
	out := make([][]string, len(st.plan.Inputs))
	for i, src := range st.plan.Inputs {
		up := st.job.stageByID(src.FromStage)
		if up == nil {
			return nil, fmt.Errorf("%w: stage %d reads stage %d, which does not exist", ErrBadPlan, st.plan.ID, src.FromStage)
		}
		names, err := stageSplits(ctx, st.job.plan, up.plan, st.job.env.ExchangeQueues, func(ctx context.Context, k int) ([]string, error) {
			return up.inputs[k].splits(ctx)
		})
		if err != nil {
			return nil, err
		}
		out[i] = names
	}
	st.producers = out
	return out, nil
}

// loadShuffleState sets up the readers of a split of a stage reading shuffle topics, one
// per input, from what its checkpoint says it applied (ShuffleKey; DedupKey and the
// position's offset for a split checkpointed before ShuffleKey existed).
func (st *stage) loadShuffleState(ctx context.Context, sp *split, pos SplitPos) error {
	env := &st.job.env
	producers, err := st.shuffleProducers(ctx)
	if err != nil {
		return err
	}
	var qs []*queueState
	if v, ok, err := env.Store.Get(ShuffleKey(st.job.name, st.plan.ID, sp.name)); err != nil {
		return &StateError{Op: "shuffle", Split: sp.name, Err: err}
	} else if ok {
		if qs, err = decodeQueueStates(v); err != nil {
			return &StateError{Op: "shuffle", Split: sp.name, Err: err}
		}
		if len(qs) != len(st.plan.Inputs) {
			return &StateError{Op: "shuffle", Split: sp.name, Err: fmt.Errorf("%w: %d inputs checkpointed, the stage has %d", errBadShuffle, len(qs), len(st.plan.Inputs))}
		}
	} else {
		qs = make([]*queueState, len(st.plan.Inputs))
		for i := range qs {
			qs[i] = newQueueState(nil)
		}
		qs[0].next = pos.Next
		if v, ok, err := env.Store.Get(DedupKey(st.job.name, st.plan.ID, sp.name)); err != nil {
			return &StateError{Op: "dedup", Split: sp.name, Err: err}
		} else if ok {
			m, err := decodeMarks(v)
			if err != nil {
				return &StateError{Op: "dedup", Split: sp.name, Err: err}
			}
			qs[0].marks = m
			sp.dropDedup = true
		}
	}
	for i, q := range qs {
		q.producers = producers[i]
		sp.rds = append(sp.rds, &reader{input: i, raw: sp.name, next: q.next, shuf: q})
	}
	return nil
}
