package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
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

// outbox is the exactly-once state of a sinkOp. Rows are held per split (the unit whose
// operators produced them, Batch.Split), and each checkpoint stores one entry per split
// with rows, under that split's key (UnitOutboxPrefix): an entry moves with its split, so
// the instance that takes a split over publishes what its previous owner committed and
// did not publish. Message ids are "<job>/<epoch>.<split>/<seq>" (entryIDs); entries of an
// epoch share one sink position.
type outbox struct {
	job   string
	stage int
	store state.Store
	ds    DedupSink
	// es is set instead of ds for a sink that applies an epoch's entries atomically and
	// skips the epochs it already holds (a database table): entries carry no sink position
	// and no message ids.
	es      connectors.EpochSink
	pending map[string][]connectors.Message // per split, produced since the last checkpoint
	// folded: per split, where in pending each key's change is, for the sink of an updating
	// query (add with keys): a key's later change replaces its earlier one of the epoch.
	folded map[string]map[string]int
	staged []outboxEntry // in the checkpoint being committed
	epoch  int64         // of staged
	drop   []outboxKey   // entries already published: deleted by the next checkpoint
	// removing is the last entry of a split being removed, published once its commit is done.
	removing *outboxEntry
	// recovered: splits whose entries the start-up recovery published (their NewSplit
	// has nothing left to do).
	recovered map[string]bool
	// pendingBytes is the size of pending's keys and bodies; past maxOutboxBytes the sink
	// calls full (the job's kickCheckpoint), so the rows held back stay bounded in bytes
	// whatever the checkpoint interval.
	pendingBytes int
	full         func()
}

// maxOutboxBytes is how much output an outbox holds back before it asks for a checkpoint.
var maxOutboxBytes = 32 << 20 // a variable for tests

type outboxEntry struct {
	split string
	msgs  []connectors.Message
	epoch int64 // of the entry of a split being removed
}

type outboxKey struct {
	split string // "" for an entry written before splits had their own
	key   []byte
}

// unitOutboxKey is the store key of split's outbox entry of epoch: UnitOutboxPrefix and
// the epoch as 8 big-endian bytes.
func unitOutboxKey(job string, stage int, split string, epoch int64) []byte {
	return binary.BigEndian.AppendUint64(UnitOutboxPrefix(job, stage, split), uint64(epoch))
}

// outboxKey is the store key of a stage's outbox entry of epoch as written before splits
// had their own: OutboxPrefix and the epoch as 8 big-endian bytes.
func legacyOutboxKey(job string, stage int, epoch int64) []byte {
	return binary.BigEndian.AppendUint64(OutboxPrefix(job, stage), uint64(epoch))
}

// messageID is the id of row seq of a stage's outbox entry of epoch as written before
// splits had their own entries.
func messageID(job string, epoch int64, seq int) string {
	return job + "/" + strconv.FormatInt(epoch, 10) + "/" + strconv.Itoa(seq)
}

// epochIDPrefix is the prefix of the ids of every row of an epoch: unit entries'
// ("<job>/<epoch>.") or, legacy, the stage's ("<job>/<epoch>/").
func epochIDPrefix(job string, epoch int64, legacy bool) string {
	sep := "."
	if legacy {
		sep = "/"
	}
	return job + "/" + strconv.FormatInt(epoch, 10) + sep
}

// unitMessageID is the id of row seq of split's outbox entry of epoch.
func unitMessageID(job string, epoch int64, split string, seq int) string {
	return epochIDPrefix(job, epoch, false) + split + "/" + strconv.Itoa(seq)
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

// setIDs gives msgs[i] the id of row i of split's entry of epoch (legacy: the stage's
// entry, messageID); the IDs share one string.
func setIDs(msgs []connectors.Message, job string, epoch int64, split string, legacy bool) {
	prefix := epochIDPrefix(job, epoch, legacy)
	if !legacy {
		prefix += split + "/"
	}
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

// storedEntry is an outbox entry read back from the store.
type storedEntry struct {
	key    outboxKey
	epoch  int64
	pos    []byte
	msgs   []connectors.Message
	legacy bool
}

// scanEntries reads the entries under prefix (keys: prefix + 8-byte epoch); split names
// their split ("" for legacy entries), or, when unit, the split is read from each key.
func (o *outbox) scanEntries(prefix []byte, legacy bool, keep func(split string) bool) ([]storedEntry, error) {
	var out []storedEntry
	err := o.store.Scan(prefix, func(k, v []byte) error {
		split := ""
		if !legacy {
			_, _, sp, rest, ok := state.KeyParts(k)
			if !ok || len(rest) != 8 {
				return fmt.Errorf("outbox key %x: %w", k, errBadOutbox)
			}
			split = string(sp)
			if keep != nil && !keep(split) {
				return nil
			}
		} else if len(k) != len(prefix)+8 {
			return fmt.Errorf("outbox key of %d bytes: %w", len(k), errBadOutbox)
		}
		epoch := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
		pos, msgs, err := decodeOutbox(append([]byte(nil), v...))
		if err != nil {
			return fmt.Errorf("outbox of epoch %d: %w", epoch, err)
		}
		out = append(out, storedEntry{key: outboxKey{split: split, key: append([]byte(nil), k...)}, epoch: epoch, pos: pos, msgs: msgs, legacy: legacy})
		return nil
	})
	return out, err
}

// recover writes what committed outbox entries hold and the sink lacks: the stage's
// entries written before splits had their own, and the entries of the splits owns accepts
// (every split when nil). It runs before the job reads anything. Entries of one epoch are
// recovered together (they share a sink position, and a sink that cannot store ids cuts
// itself back to it).
func (o *outbox) recover(ctx context.Context, s *sinkOp, owns func(split string) bool) error {
	legacy, err := o.scanEntries(OutboxPrefix(o.job, o.stage), true, nil)
	if err != nil {
		return &SinkError{Sink: s.what, Err: fmt.Errorf("read outbox: %w", err)}
	}
	units, err := o.scanEntries(state.OperatorPrefix(nil, o.job, OutboxOperator+strconv.Itoa(o.stage)), false, owns)
	if err != nil {
		return &SinkError{Sink: s.what, Err: fmt.Errorf("read outbox: %w", err)}
	}
	if o.recovered == nil {
		o.recovered = map[string]bool{}
	}
	for _, e := range units {
		o.recovered[e.key.split] = true
	}
	return o.publishStored(ctx, s, append(legacy, units...))
}

// recoverSplit is recover for the entries of one split (a split that joins a running
// stage: its previous owner's last entries).
func (o *outbox) recoverSplit(ctx context.Context, s *sinkOp, split string) error {
	if o.recovered[split] {
		return nil
	}
	entries, err := o.scanEntries(UnitOutboxPrefix(o.job, o.stage, split), false, nil)
	if err != nil {
		return &SinkError{Sink: s.what, Err: fmt.Errorf("read outbox of split %s: %w", split, err)}
	}
	if o.recovered == nil {
		o.recovered = map[string]bool{}
	}
	o.recovered[split] = true
	return o.publishStored(ctx, s, entries)
}

// publishStored writes the rows of entries the sink does not hold yet, epoch by epoch, and
// marks the entries for deletion by the next checkpoint.
func (o *outbox) publishStored(ctx context.Context, s *sinkOp, entries []storedEntry) error {
	s.recovering = true // counted by the checkpoint that stored them
	defer func() { s.recovering = false }()
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].epoch < entries[j].epoch })
	for i := 0; i < len(entries); {
		k := i
		for k < len(entries) && entries[k].epoch == entries[i].epoch && entries[k].legacy == entries[i].legacy {
			k++
		}
		group := entries[i:k]
		epoch, legacy := group[0].epoch, group[0].legacy
		if o.es != nil {
			batch := make([]outboxEntry, len(group))
			for j, e := range group {
				batch[j] = outboxEntry{split: e.key.split, msgs: e.msgs}
			}
			if err := s.writeEpoch(epoch, batch); err != nil {
				return err
			}
			for _, e := range group {
				o.drop = append(o.drop, e.key)
			}
			i = k
			continue
		}
		have := map[string]bool{}
		if err := o.ds.IDsSince(ctx, group[0].pos, epochIDPrefix(o.job, epoch, legacy), func(id string) { have[id] = true }); err != nil {
			return &SinkError{Sink: s.what, Err: fmt.Errorf("outbox of epoch %d: %w", epoch, err)}
		}
		var missing []connectors.Message
		for _, e := range group {
			setIDs(e.msgs, o.job, epoch, e.key.split, legacy)
			for _, m := range e.msgs {
				if !have[m.ID] {
					missing = append(missing, m)
				}
			}
		}
		if err := s.write(missing); err != nil {
			return err
		}
		for _, e := range group {
			o.drop = append(o.drop, e.key)
		}
		i = k
	}
	return nil
}

// add holds the rows of a batch of split until their checkpoint. With keys (keys[i] is
// msgs[i]'s key: the sink of an updating query) the epoch's changes are folded by key: a
// message replaces the pending one of its key, which keeps its place, so an epoch holds one
// change per key, the last, in the order the keys first changed (docs/sql.md,
// "Changelogs"). The entry stored at the checkpoint is the folded one, so its message ids
// (setIDs) are the same when a restart publishes it again.
func (o *outbox) add(split string, msgs []connectors.Message, keys []string) {
	if o.pending == nil {
		o.pending = map[string][]connectors.Message{}
	}
	if keys == nil {
		o.pending[split] = append(o.pending[split], msgs...)
		for i := range msgs {
			o.pendingBytes += len(msgs[i].Key) + len(msgs[i].Body)
		}
	} else {
		if o.folded == nil {
			o.folded = map[string]map[string]int{}
		}
		at := o.folded[split]
		if at == nil {
			at = map[string]int{}
			o.folded[split] = at
		}
		p := o.pending[split]
		for i := range msgs {
			m := ownMessage(msgs[i])
			n := len(m.Key) + len(m.Body)
			if j, ok := at[keys[i]]; ok {
				o.pendingBytes += n - len(p[j].Key) - len(p[j].Body)
				p[j] = m
				continue
			}
			at[keys[i]] = len(p)
			p = append(p, m)
			o.pendingBytes += n
		}
		o.pending[split] = p
	}
	if o.pendingBytes >= maxOutboxBytes && o.full != nil {
		o.full()
	}
}

// ownMessage is m with its key and body copied into storage of their own: a folded
// message must not keep its whole batch's buffer alive after the batch's other changes
// were replaced, so that pendingBytes is what the outbox holds.
func ownMessage(m connectors.Message) connectors.Message {
	k := len(m.Key)
	b := make([]byte, k+len(m.Body))
	copy(b, m.Key)
	copy(b[k:], m.Body)
	if m.Key != nil {
		m.Key = b[:k:k]
	}
	m.Body = b[k:len(b):len(b)]
	return m
}

// checkpoint stores the rows produced since the last checkpoint in the checkpoint's batch,
// one entry per split, and deletes the entries published since. The stage's goroutine
// calls it only once the previous checkpoint's commit and publication (committed, on the
// commit group's goroutine) are over, so staged and drop are its own again; between the
// two, committed uses only staged, epoch and drop and the stage only pending.
func (o *outbox) checkpoint(ctx context.Context, c *Control) error {
	for _, k := range o.drop {
		c.State.Delete(k.key)
	}
	o.drop = o.drop[:0]
	// The published entries' row slices are reused for the splits' next rows.
	for i, e := range o.staged {
		if len(o.pending[e.split]) == 0 && cap(e.msgs) > 0 {
			o.pending[e.split] = e.msgs[:0]
		}
		o.staged[i] = outboxEntry{}
	}
	o.staged = o.staged[:0]
	splits := make([]string, 0, len(o.pending))
	for sp, msgs := range o.pending {
		if len(msgs) > 0 {
			splits = append(splits, sp)
		}
	}
	sort.Strings(splits)
	for _, sp := range splits {
		o.staged = append(o.staged, outboxEntry{split: sp, msgs: o.pending[sp]})
		o.pending[sp] = nil
	}
	for _, at := range o.folded {
		clear(at) // the next epoch folds afresh
	}
	o.pendingBytes = 0
	o.epoch = c.Epoch
	if len(o.staged) == 0 {
		return nil
	}
	var pos []byte
	if o.ds != nil {
		var err error
		if pos, err = o.ds.Position(ctx); err != nil {
			return err
		}
	}
	for _, e := range o.staged {
		// Encoded once, in place in the checkpoint's batch.
		n := outboxSize(pos, e.msgs)
		v := c.State.PutValue(unitOutboxKey(o.job, o.stage, e.split, c.Epoch), n)
		if got := appendOutbox(v[:0], pos, e.msgs); len(got) != n {
			return fmt.Errorf("outbox of epoch %d: encoded %d bytes, sized %d", c.Epoch, len(got), n)
		}
	}
	return nil
}

// committed publishes the staged rows of epoch, whose checkpoint is now durable. It runs on
// the commit group's goroutine (commit.go), after the group committed the epoch.
func (o *outbox) committed(s *sinkOp, epoch int64) error {
	if epoch != o.epoch || len(o.staged) == 0 {
		return nil
	}
	if o.es != nil {
		if err := s.writeEpoch(epoch, o.staged); err != nil {
			return err
		}
	} else {
		for _, e := range o.staged {
			setIDs(e.msgs, o.job, epoch, e.split, false)
		}
		if err := s.writeEntries(o.staged); err != nil {
			return err
		}
	}
	for i := range o.staged {
		e := &o.staged[i]
		clear(e.msgs)
		e.msgs = e.msgs[:0] // published: the next checkpoint reuses the slice
		o.drop = append(o.drop, outboxKey{split: e.split, key: unitOutboxKey(o.job, o.stage, e.split, epoch)})
	}
	o.epoch = 0
	return nil
}

// remove stages the rows split produced since the last checkpoint as its last entry, under
// the epoch of the RemoveSplit c, and deletes its entries published since: c.State is the
// split's final commit. Once that commit is done, removed publishes the entry; the entry
// itself stays with the split, for its next owner to check (recoverSplit).
func (o *outbox) remove(ctx context.Context, c *Control) error {
	kept := o.drop[:0]
	for _, k := range o.drop {
		if k.split == c.Split {
			c.State.Delete(k.key)
		} else {
			kept = append(kept, k)
		}
	}
	o.drop = kept
	delete(o.recovered, c.Split)
	msgs := o.pending[c.Split]
	delete(o.pending, c.Split)
	delete(o.folded, c.Split)
	o.removing = nil
	if len(msgs) == 0 {
		return nil
	}
	var pos []byte
	if o.ds != nil {
		var err error
		if pos, err = o.ds.Position(ctx); err != nil {
			return err
		}
	}
	c.State.Put(unitOutboxKey(o.job, o.stage, c.Split, c.Epoch), encodeOutbox(pos, msgs))
	setIDs(msgs, o.job, c.Epoch, c.Split, false)
	o.removing = &outboxEntry{split: c.Split, msgs: msgs, epoch: c.Epoch}
	return nil
}
