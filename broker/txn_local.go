package broker

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"
)

// In-process transactions: the engine's transactional sink (docs/guarantees.md) prepares
// and ends half messages through these calls instead of the protocol. They are the same
// half messages and op records as a network producer's (transaction.go), so recovery, the
// check-back counts and the discard after TransactionCheckMax apply unchanged; only
// batching differs (one append for a batch of prepared messages, one for a batch of
// decisions), and the check-back of a group whose producer is in process calls the
// TxnChecker registered for it instead of sending CHECK_TRANSACTION_STATE.

// HalfMessage names a prepared message: its offset in the half queue and in the commit log
// (the tranStateTableOffset and commitLogOffset of END_TRANSACTION).
type HalfMessage struct {
	QueueOffset int64
	PhysOffset  int64
}

// TxnState is a producer's decision on a prepared message.
type TxnState int8

const (
	// TxnUnknown leaves the message open: it is checked again later (and discarded after
	// TransactionCheckMax checks).
	TxnUnknown TxnState = iota
	TxnCommit
	TxnRollback
)

// TxnChecker answers the check-back of a prepared message of its group. m is the message
// as its producer sent it (Topic and Queue are its target); it is called on a broker
// goroutine and must not block for long.
type TxnChecker func(m Message) TxnState

// endChunk bounds the decisions written in one append (each chunk is atomic: its committed
// messages and its op record land together or, after a crash, are repaired on recovery).
const endChunk = 1024

// localTxn holds the in-process producers' checkers. Guarded by its own mutex, never held
// while a checker runs or txnStore.mu is taken.
type localTxn struct {
	mu       sync.Mutex
	checkers map[string]*localChecker
	loop     bool // the check loop runs
}

// localChecker is one registration (its address tells registrations apart).
type localChecker struct{ check TxnChecker }

func (l *localTxn) get(group string) TxnChecker {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.checkers[group]; c != nil {
		return c.check
	}
	return nil
}

// Prepare stores msgs as prepared messages of producer group aimed at queue queue of
// topicName, in order, in one append, and returns where each landed. Consumers of the
// topic see none of them until EndTransactions commits them. With FlushSync (or
// ReplicationSync) it returns once they are durable (replicated).
func (b *Broker) Prepare(group, topicName string, queue int, msgs []Message) ([]HalfMessage, error) {
	if group == "" {
		return nil, fmt.Errorf("%w: a prepared message needs a producer group", ErrTxnMismatch)
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	if _, err := b.queue(topicName, queue); err != nil {
		return nil, err
	}
	if _, err := b.ensureTopic(halfTopic, 1, PermRead|PermWrite); err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	qid := strconv.Itoa(queue)
	ins := make([]inMsg, len(msgs))
	for i := range msgs {
		m := msgs[i]
		p := make(map[string]string, len(m.Properties)+6)
		for k, v := range m.Properties {
			p[k] = v
		}
		p[PropTransactionPrepared] = "true"
		p[PropProducerGroup] = group
		p[PropRealTopic] = topicName
		p[PropRealQueue] = qid
		m.Properties, m.SysFlag = p, m.SysFlag&^sysFlagTxnMask
		ins[i] = fromMessage(halfTopic, 0, &m, now)
	}
	t := b.txn
	t.mu.Lock()
	res, end, err := b.appendMsgs(ins)
	if err != nil {
		t.mu.Unlock()
		return nil, err
	}
	owner := map[string]string{PropProducerGroup: group}
	out := make([]HalfMessage, len(res))
	for i, r := range res {
		t.open(r.queueOffset, r.phys, ins[i].bornTS, owner)
		out[i] = HalfMessage{QueueOffset: r.queueOffset, PhysOffset: r.phys}
	}
	t.mu.Unlock()
	return out, b.waitDurable(end)
}

// EndTransactions commits (their messages reach their queues in the order of hs) or rolls
// back prepared messages of group. A message already committed, rolled back or discarded
// is skipped, so a decision may be repeated; one that was never prepared, or prepared by
// another group, is an error (ErrTxnNotFound, ErrTxnMismatch) and nothing after it is
// decided. Decisions are appended in chunks of up to 1,024, each atomic.
func (b *Broker) EndTransactions(group string, hs []HalfMessage, commit bool) error {
	for len(hs) > 0 {
		n := min(len(hs), endChunk)
		end, err := b.endChunk(group, hs[:n], commit)
		if err != nil {
			return err
		}
		if end > 0 {
			if err := b.waitDurable(end); err != nil {
				return err
			}
		}
		hs = hs[n:]
	}
	return nil
}

func (b *Broker) endChunk(group string, hs []HalfMessage, commit bool) (int64, error) {
	t := b.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	var ms []inMsg
	var closing []*halfEntry
	seen := make(map[int64]bool, len(hs))
	for _, h := range hs {
		qoff, ok := t.byPhys[h.PhysOffset]
		if !ok || seen[qoff] {
			if ok {
				continue
			}
			r, err := b.cl.readRecord(h.PhysOffset)
			if err == nil && r.topic == halfTopic && r.queueOffset == h.QueueOffset {
				continue // already decided (or discarded)
			}
			return 0, fmt.Errorf("%w: %d", ErrTxnNotFound, h.PhysOffset)
		}
		e := t.pending[qoff]
		if e.group != group {
			return 0, fmt.Errorf("%w: producer group %q, prepared by %q", ErrTxnMismatch, group, e.group)
		}
		if e.qoff != h.QueueOffset {
			return 0, fmt.Errorf("%w: half queue offset %d, prepared at %d", ErrTxnMismatch, h.QueueOffset, e.qoff)
		}
		if commit {
			m, err := b.committedAt(e.phys)
			if err != nil {
				return 0, err
			}
			ms = append(ms, m)
		}
		seen[qoff] = true
		closing = append(closing, e)
	}
	if len(closing) == 0 {
		return 0, nil
	}
	offs := make([]int64, len(closing))
	for i, e := range closing {
		offs[i] = e.qoff
	}
	ms = append(ms, opRecord(opTagDone, offs...))
	return b.appendTxnOps(ms, func(res []putResult) {
		op := res[len(res)-1].queueOffset
		for _, e := range closing {
			t.close(e, op)
		}
	})
}

// SetTransactionChecker makes check the in-process producer of group: first every prepared
// message of the group still open is decided by it (this returns after those decisions are
// written), then open ones are checked back through it as TransactionTimeout and
// TransactionCheckInterval say, as a network producer's are. The returned function removes
// it. A group has at most one checker (ErrTxnChecker).
func (b *Broker) SetTransactionChecker(group string, check TxnChecker) (func(), error) {
	if b.cfg.Role == RoleSlave {
		return nil, ErrReadOnly
	}
	if b.closed.Load() {
		return nil, ErrClosed
	}
	l := &b.txn.local
	l.mu.Lock()
	if l.checkers[group] != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrTxnChecker, group)
	}
	if l.checkers == nil {
		l.checkers = map[string]*localChecker{}
	}
	reg := &localChecker{check: check}
	l.checkers[group] = reg
	start := !l.loop
	l.loop = true
	l.mu.Unlock()
	remove := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.checkers[group] == reg {
			delete(l.checkers, group)
		}
	}
	if start {
		b.wg.Add(1)
		go b.localChecks()
	}
	if err := b.resolveOpen(group, check); err != nil {
		remove()
		return nil, err
	}
	return remove, nil
}

// resolveOpen decides every open prepared message of group with check, in prepare order.
func (b *Broker) resolveOpen(group string, check TxnChecker) error {
	t := b.txn
	t.mu.Lock()
	var open []*halfEntry
	for _, e := range t.pending {
		if e.group == group {
			open = append(open, e)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i].qoff < open[j].qoff })
	views := make([]Message, 0, len(open))
	hs := make([]HalfMessage, 0, len(open))
	for _, e := range open {
		r, err := b.cl.readRecord(e.phys)
		if err != nil {
			continue // unreadable: the check loop closes it
		}
		v, err := producerView(&r)
		if err != nil {
			// The checker still decides it (it may roll back); a commit is refused.
			b.cfg.Logger.Error("prepared message has a malformed target queue", "group", group, "halfOffset", e.qoff, "err", err)
		}
		views = append(views, v)
		hs = append(hs, HalfMessage{QueueOffset: e.qoff, PhysOffset: e.phys})
	}
	t.mu.Unlock()
	return b.decide(group, check, views, hs)
}

// decide asks check about each message and writes the commits, then the rollbacks.
func (b *Broker) decide(group string, check TxnChecker, views []Message, hs []HalfMessage) error {
	var commits, rollbacks []HalfMessage
	for i := range views {
		switch check(views[i]) {
		case TxnCommit:
			commits = append(commits, hs[i])
		case TxnRollback:
			rollbacks = append(rollbacks, hs[i])
		}
	}
	return errors.Join(b.EndTransactions(group, commits, true), b.EndTransactions(group, rollbacks, false))
}

// producerView is a half message as its producer sent it: its target topic and queue, the
// transaction's properties without the broker's own. A malformed target queue is an error
// (the view then has queue -1).
func producerView(r *recordView) (Message, error) {
	m := r.message()
	var err error
	if p := m.Properties; p != nil {
		m.Topic = p[PropRealTopic]
		m.Queue, err = realQueue(p)
		delete(p, PropRealTopic)
		delete(p, PropRealQueue)
	}
	m.QueueOffset = r.queueOffset
	return m, err
}

// localChecks checks back the open transactions of groups with an in-process checker, on
// the schedule checkTransactions keeps for network producers. The caller has done
// b.wg.Add(1).
func (b *Broker) localChecks() {
	defer b.wg.Done()
	tick := min(time.Second, b.cfg.TransactionCheckInterval/2, b.cfg.TransactionTimeout/2)
	tk := time.NewTicker(max(tick, 50*time.Millisecond))
	defer tk.Stop()
	l := &b.txn.local
	for {
		select {
		case <-b.done:
			return
		case <-tk.C:
		}
		checks, err := b.dueChecks(time.Now(), func(g string) bool { return l.get(g) != nil })
		if err != nil {
			b.cfg.Logger.Error("transaction check failed", "err", err)
			continue
		}
		for _, c := range checks {
			check := l.get(c.group)
			if check == nil {
				continue
			}
			r, err := parseRecord(c.record, c.halfPhysOffset)
			if err != nil {
				continue
			}
			v := r.message() // dueChecks encoded it as the producer sees it
			if err := b.decide(c.group, check, []Message{v},
				[]HalfMessage{{QueueOffset: c.halfQueueOffset, PhysOffset: c.halfPhysOffset}}); err != nil {
				b.cfg.Logger.Warn("in-process transaction check failed", "group", c.group, "err", err)
			}
		}
	}
}
