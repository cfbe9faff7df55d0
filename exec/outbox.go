package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"rsql/connectors"
	"rsql/state"
)

// DedupSink is a sink that can tell which of a writer's messages it already holds. A job's
// main sink that implements it gets exactly-once output (see docs/guarantees.md): rows
// produced between two checkpoints are held back, stored in the checkpoint itself (the
// "outbox"), and written with deterministic ids ("<job>/<epoch>/<seq>", Message.ID) only
// after that checkpoint is committed. On start, outbox entries still in the store are
// written again, skipping the ids the sink already holds after the entry's Position.
type DedupSink interface {
	// Position returns a mark of the sink's current end: every message written after the
	// call is stored after it.
	Position(ctx context.Context) ([]byte, error)
	// IDsSince calls fn with the ID of every message stored after pos whose ID starts with
	// prefix.
	IDsSince(ctx context.Context, pos []byte, prefix string, fn func(id string)) error
}

// outbox is the exactly-once state of a sinkOp.
type outbox struct {
	job     string
	stage   int
	store   state.Store
	ds      DedupSink
	pending []connectors.Message // produced since the last checkpoint
	// pendingBytes is the size of pending's keys and bodies; past maxOutboxBytes the sink
	// calls full (the job's kickCheckpoint), so the rows held back stay bounded in bytes
	// whatever the checkpoint interval.
	pendingBytes int
	full         func()
	staged       []connectors.Message // in the checkpoint being committed
	epoch        int64                // of staged
	drop         [][]byte             // outbox keys already published: deleted by the next checkpoint
}

// maxOutboxBytes is how much output an outbox holds back before it asks for a checkpoint.
var maxOutboxBytes = 32 << 20 // a variable for tests

// add holds msgs back until the next checkpoint.
func (o *outbox) add(msgs []connectors.Message) {
	o.pending = append(o.pending, msgs...)
	for i := range msgs {
		o.pendingBytes += len(msgs[i].Key) + len(msgs[i].Body)
	}
	if o.pendingBytes >= maxOutboxBytes && o.full != nil {
		o.full()
	}
}

// outboxKey is the store key of a stage's outbox entry of epoch: OutboxPrefix and the
// epoch as 8 big-endian bytes.
func outboxKey(job string, stage int, epoch int64) []byte {
	return binary.BigEndian.AppendUint64(OutboxPrefix(job, stage), uint64(epoch))
}

func messageID(job string, epoch int64, seq int) string {
	return job + "/" + strconv.FormatInt(epoch, 10) + "/" + strconv.Itoa(seq)
}

// encodeOutbox encodes an outbox entry: uvarint len(pos) pos, uvarint n, then n times
// uvarint len(key) key uvarint len(body) body.
func encodeOutbox(pos []byte, msgs []connectors.Message) []byte {
	return appendOutbox(make([]byte, 0, outboxSize(pos, msgs)), pos, msgs)
}

// outboxSize is the exact length of encodeOutbox(pos, msgs).
func outboxSize(pos []byte, msgs []connectors.Message) int {
	n := uvarintLen(len(pos)) + len(pos) + uvarintLen(len(msgs))
	for i := range msgs {
		k, b := len(msgs[i].Key), len(msgs[i].Body)
		n += uvarintLen(k) + k + uvarintLen(b) + b
	}
	return n
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

func appendOutbox(out, pos []byte, msgs []connectors.Message) []byte {
	out = binary.AppendUvarint(out, uint64(len(pos)))
	out = append(out, pos...)
	out = binary.AppendUvarint(out, uint64(len(msgs)))
	for i := range msgs {
		out = binary.AppendUvarint(out, uint64(len(msgs[i].Key)))
		out = append(out, msgs[i].Key...)
		out = binary.AppendUvarint(out, uint64(len(msgs[i].Body)))
		out = append(out, msgs[i].Body...)
	}
	return out
}

// setIDs gives msgs[i] the ID messageID(job, epoch, i); the IDs share one string.
func setIDs(msgs []connectors.Message, job string, epoch int64) {
	prefix := messageID(job, epoch, 0)
	prefix = prefix[:len(prefix)-1]
	buf := make([]byte, 0, len(msgs)*(len(prefix)+7))
	ends := make([]int, len(msgs))
	for i := range msgs {
		buf = append(buf, prefix...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		ends[i] = len(buf)
	}
	all := string(buf)
	start := 0
	for i := range msgs {
		msgs[i].ID = all[start:ends[i]]
		start = ends[i]
	}
}

var errBadOutbox = errors.New("corrupt outbox entry")

// decodeOutbox is the inverse of encodeOutbox; the returned slices alias b.
func decodeOutbox(b []byte) (pos []byte, msgs []connectors.Message, err error) {
	chunk := func() ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errBadOutbox
		}
		c := b[k : k+int(n) : k+int(n)]
		b = b[k+int(n):]
		return c, nil
	}
	if pos, err = chunk(); err != nil {
		return nil, nil, err
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, nil, errBadOutbox
	}
	b = b[k:]
	msgs = make([]connectors.Message, 0, n)
	for i := uint64(0); i < n; i++ {
		key, err := chunk()
		if err != nil {
			return nil, nil, err
		}
		body, err := chunk()
		if err != nil {
			return nil, nil, err
		}
		if len(key) == 0 {
			key = nil
		}
		msgs = append(msgs, connectors.Message{Key: key, Body: body})
	}
	if len(b) != 0 {
		return nil, nil, errBadOutbox
	}
	return pos, msgs, nil
}

// recover writes what committed outbox entries hold and the sink lacks. It runs before the
// job reads anything.
func (o *outbox) recover(ctx context.Context, s *sinkOp) error {
	type entry struct {
		key, val []byte
	}
	var entries []entry
	err := o.store.Scan(OutboxPrefix(o.job, o.stage), func(k, v []byte) error {
		entries = append(entries, entry{append([]byte(nil), k...), append([]byte(nil), v...)})
		return nil
	})
	if err != nil {
		return &SinkError{Sink: s.what, Err: fmt.Errorf("read outbox: %w", err)}
	}
	prefixLen := len(OutboxPrefix(o.job, o.stage))
	for _, e := range entries {
		if len(e.key) != prefixLen+8 {
			return &SinkError{Sink: s.what, Err: fmt.Errorf("outbox key of %d bytes: %w", len(e.key), errBadOutbox)}
		}
		epoch := int64(binary.BigEndian.Uint64(e.key[prefixLen:]))
		pos, msgs, err := decodeOutbox(e.val)
		if err != nil {
			return &SinkError{Sink: s.what, Err: fmt.Errorf("outbox of epoch %d: %w", epoch, err)}
		}
		have := map[string]bool{}
		if err := o.ds.IDsSince(ctx, pos, messageID(o.job, epoch, 0)[:len(messageID(o.job, epoch, 0))-1], func(id string) { have[id] = true }); err != nil {
			return &SinkError{Sink: s.what, Err: fmt.Errorf("outbox of epoch %d: %w", epoch, err)}
		}
		missing := msgs[:0]
		for i := range msgs {
			id := messageID(o.job, epoch, i)
			if !have[id] {
				msgs[i].ID = id
				missing = append(missing, msgs[i])
			}
		}
		if err := s.write(missing); err != nil {
			return err
		}
		o.drop = append(o.drop, e.key)
	}
	return nil
}

// checkpoint stores the rows produced since the last checkpoint in the checkpoint's batch
// and deletes the entries published since. The task calls it only once the previous
// checkpoint's commit and publication (committed, on the committer goroutine) are over, so
// staged and drop are its own again; between the two, committed uses only staged, epoch
// and drop and the task only pending.
func (o *outbox) checkpoint(ctx context.Context, c *Control) error {
	for _, k := range o.drop {
		c.State.Delete(k)
	}
	o.drop = o.drop[:0]
	o.staged, o.pending = o.pending, o.staged[:0]
	o.pendingBytes = 0
	o.epoch = c.Epoch
	if len(o.staged) == 0 {
		return nil
	}
	pos, err := o.ds.Position(ctx)
	if err != nil {
		return err
	}
	// Encoded once, in place in the checkpoint's batch.
	n := outboxSize(pos, o.staged)
	v := c.State.PutValue(outboxKey(o.job, o.stage, c.Epoch), n)
	if got := appendOutbox(v[:0], pos, o.staged); len(got) != n {
		return fmt.Errorf("outbox of epoch %d: encoded %d bytes, sized %d", c.Epoch, len(got), n)
	}
	return nil
}

// committed publishes the staged rows of epoch, whose checkpoint is now durable. It runs on
// the task's committer goroutine (see task.commit).
func (o *outbox) committed(s *sinkOp, epoch int64) error {
	if epoch != o.epoch || len(o.staged) == 0 {
		return nil
	}
	setIDs(o.staged, o.job, epoch)
	if err := s.write(o.staged); err != nil {
		return err
	}
	clear(o.staged)
	o.staged = o.staged[:0]
	o.drop = append(o.drop, outboxKey(o.job, o.stage, epoch))
	return nil
}
