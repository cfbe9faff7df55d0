package broker

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"rsql/broker/remoting"
)

// Transactional messages, as RocketMQ keeps them (docs/broker.md, "Transactions"):
//
//   - A prepared message (property TRAN_MSG=true) is stored in queue 0 of
//     RMQ_SYS_TRANS_HALF_TOPIC with its target in REAL_TOPIC and REAL_QID; consumers of the
//     target never see it.
//   - Commit appends the message to its target queue (system flag "commit", the half
//     message's commit-log offset in PREPAREDTRANSACTIONOFFSET) and, in the same append, an
//     op record to queue 0 of RMQ_SYS_TRANS_OP_HALF_TOPIC: body the half message's queue
//     offset, tag "d". Rollback appends only the op record.
//   - A half message still open TransactionTimeout after it was born (or its
//     CHECK_IMMUNITY_TIME_IN_SECONDS) is checked back: CHECK_TRANSACTION_STATE goes to a
//     producer of its group, and an op record tagged "c" counts the check. Checks repeat
//     every TransactionCheckInterval; after TransactionCheckMax of them the message is
//     copied to TRANS_CHECK_MAX_TIME_TOPIC and closed with a "d" op record.
//
// Everything is in the commit log, so the state survives a restart: Open reads the op
// queue and the half queue from two low-water marks kept as offsets of group
// CID_RMQ_SYS_TRANS, and closes any half message whose commit was appended but whose op
// record was torn off by a crash.

const (
	halfTopic     = "RMQ_SYS_TRANS_HALF_TOPIC"
	opTopic       = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	checkMaxTopic = "TRANS_CHECK_MAX_TIME_TOPIC"
	txnGroup      = "CID_RMQ_SYS_TRANS"
	opTagDone     = "d"
	opTagCheck    = "c"
)

// halfEntry is one open transaction. Guarded by txnStore.mu.
type halfEntry struct {
	qoff, phys int64
	born       int64 // ms
	immunity   time.Duration
	group      string
	checks     int
	lastCheck  time.Time
	firstOp    int64 // op-queue offset of its first check record; -1: none
}

// txnStore is the open-transaction table. mu is taken before Broker.wmu (never after), and
// is held across a prepared append and its registration, so the table and the half queue
// agree whenever mu is free.
type txnStore struct {
	mu      sync.Mutex
	pending map[int64]*halfEntry // half queue offset -> entry
	byPhys  map[int64]int64      // half commit-log offset -> half queue offset (open only)
	doneOps map[int64]int64      // closed half queue offset -> op-queue offset of its "d" record
	local   localTxn             // in-process producers' checkers (txn_local.go); own mutex
}

func newTxnStore() *txnStore {
	return &txnStore{pending: map[int64]*halfEntry{}, byPhys: map[int64]int64{}, doneOps: map[int64]int64{}}
}

// isPrepared reports whether a message's properties mark it as a prepared transaction.
func isPrepared(props []byte) bool {
	v := propValue(props, PropTransactionPrepared)
	// Any value but a true one is not prepared, as Java's Boolean.parseBoolean reads it in
	// Apache RocketMQ: such a message is stored as an ordinary one.
	ok, _ := strconv.ParseBool(v)
	return ok
}

// appendHalf stores m (aimed at its real topic and queue) as a half message and registers
// it. It returns where the half message landed and the log end to wait for.
func (b *Broker) appendHalf(m inMsg) (putResult, int64, error) {
	if _, err := b.ensureTopic(halfTopic, 1, PermRead|PermWrite); err != nil {
		return putResult{}, 0, err
	}
	p := DecodeProperties(m.props)
	p[PropRealTopic] = m.topic
	p[PropRealQueue] = strconv.Itoa(m.queue)
	m.props = EncodeProperties(p)
	m.sysFlag &^= sysFlagTxnMask
	m.topic, m.queue = halfTopic, 0
	t := b.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	res, end, err := b.appendMsgs([]inMsg{m})
	if err != nil {
		return putResult{}, 0, err
	}
	t.open(res[0].queueOffset, res[0].phys, m.bornTS, p)
	return res[0], end, nil
}

// open registers a half message. Caller holds t.mu.
func (t *txnStore) open(qoff, phys, born int64, props map[string]string) {
	e := &halfEntry{qoff: qoff, phys: phys, born: born, group: props[PropProducerGroup], firstOp: -1}
	if s, err := strconv.ParseInt(props[PropCheckImmunity], 10, 64); err == nil && s > 0 {
		e.immunity = time.Duration(s) * time.Second
	}
	t.pending[qoff] = e
	t.byPhys[phys] = qoff
}

// close marks a half message closed by the op record at opOff. Caller holds t.mu.
func (t *txnStore) close(e *halfEntry, opOff int64) {
	delete(t.pending, e.qoff)
	delete(t.byPhys, e.phys)
	t.doneOps[e.qoff] = opOff
}

// EndTransaction is the producer's decision on a prepared message.
type EndTransaction struct {
	ProducerGroup string
	// HalfQueueOffset and HalfPhysOffset identify the half message (the send reply's
	// queueOffset and the commit-log offset inside its msgId).
	HalfQueueOffset int64
	HalfPhysOffset  int64
	Commit          bool
}

// EndTransaction commits or rolls back a prepared message. Deciding on one already closed
// is a no-op. It returns the log end that makes the decision durable (for FlushSync
// callers, see waitFlushed).
func (b *Broker) EndTransaction(e EndTransaction) (int64, error) {
	t := b.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	qoff, ok := t.byPhys[e.HalfPhysOffset]
	if !ok {
		r, err := b.cl.readRecord(e.HalfPhysOffset)
		if err == nil && r.topic == halfTopic {
			return 0, nil // already committed, rolled back or discarded
		}
		return 0, fmt.Errorf("%w: %d", ErrTxnNotFound, e.HalfPhysOffset)
	}
	h := t.pending[qoff]
	if h.group != e.ProducerGroup {
		return 0, fmt.Errorf("%w: producer group %q, prepared by %q", ErrTxnMismatch, e.ProducerGroup, h.group)
	}
	if h.qoff != e.HalfQueueOffset {
		return 0, fmt.Errorf("%w: transaction state table offset %d, prepared at %d", ErrTxnMismatch, e.HalfQueueOffset, h.qoff)
	}
	var ms []inMsg
	if e.Commit {
		m, err := b.committedAt(h.phys)
		if err != nil {
			return 0, err
		}
		ms = append(ms, m)
	}
	ms = append(ms, opRecord(opTagDone, h.qoff))
	return b.appendTxnOps(ms, func(res []putResult) { t.close(h, res[len(res)-1].queueOffset) })
}

// committedAt reads the half message stored at phys and rebuilds its target message.
func (b *Broker) committedAt(phys int64) (inMsg, error) {
	r, err := b.cl.readRecord(phys)
	if err != nil {
		return inMsg{}, fmt.Errorf("broker: reading prepared message: %w", err)
	}
	return b.committedMessage(&r)
}

// realQueue is the target queue a stored half or delayed message names in PropRealQueue.
// A value that is not a queue number is an error naming the property: such a record must
// be reported, not delivered to queue 0.
func realQueue(p map[string]string) (int, error) {
	v := p[PropRealQueue]
	q, err := strconv.Atoi(v)
	if err != nil || q < 0 {
		return -1, fmt.Errorf("broker: stored property %s=%q is not a queue number", PropRealQueue, v)
	}
	return q, nil
}

// committedMessage rebuilds the target message of a half message.
func (b *Broker) committedMessage(r *recordView) (inMsg, error) {
	p := DecodeProperties(r.props)
	real := p[PropRealTopic]
	qid, err := realQueue(p)
	if err != nil || real == "" {
		return inMsg{}, fmt.Errorf("broker: prepared message at %d has no valid REAL_TOPIC/REAL_QID: %w", r.physOffset, errors.Join(err))
	}
	delete(p, PropRealTopic)
	delete(p, PropRealQueue)
	delete(p, PropCheckTimes)
	if _, err := b.ensureTopic(real, qid+1, PermRead|PermWrite); err != nil {
		return inMsg{}, err
	}
	return inMsg{topic: real, queue: qid, flag: r.flag, sysFlag: r.sysFlag&^sysFlagTxnMask | sysFlagTxnCommit,
		bornTS: r.bornTS, bornHost: r.bornHost, reconsume: r.reconsume, body: r.body, props: EncodeProperties(p),
		tagsCode: TagsCode(p[PropTags]), prepared: r.physOffset}, nil
}

func opRecord(tag string, halfOffsets ...int64) inMsg {
	var sb strings.Builder
	for i, o := range halfOffsets {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(o, 10))
	}
	return inMsg{topic: opTopic, queue: 0, body: []byte(sb.String()), bornTS: time.Now().UnixMilli(),
		props: EncodeProperties(map[string]string{PropTags: tag}), tagsCode: TagsCode(tag)}
}

// appendTxnOps appends transaction records in one batch and, once they are in the log,
// lets done update the table. Caller holds b.txn.mu.
func (b *Broker) appendTxnOps(ms []inMsg, done func([]putResult)) (int64, error) {
	if _, err := b.ensureTopic(opTopic, 1, PermRead|PermWrite); err != nil {
		return 0, err
	}
	res, end, err := b.appendMsgs(ms)
	if err != nil {
		return 0, err
	}
	done(res)
	return end, nil
}

// txnCheck is one back-check to send: the half message re-encoded as the producer sees
// it (its target topic and queue), and the header fields.
type txnCheck struct {
	group           string
	record          []byte
	halfQueueOffset int64
	halfPhysOffset  int64
	uniqKey         string
	offsetMsgID     string
}

// dueChecks discards the open transactions checked TransactionCheckMax times, counts one
// more check of those due whose group has a producer connected (reachable; the others
// wait, uncounted), and returns the checks to send. Counts are kept in op records.
func (b *Broker) dueChecks(now time.Time, reachable func(group string) bool) ([]txnCheck, error) {
	t := b.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	var due []*halfEntry
	for _, e := range t.pending {
		imm := max(e.immunity, b.cfg.TransactionTimeout)
		if now.UnixMilli() < e.born+imm.Milliseconds() {
			continue
		}
		if !e.lastCheck.IsZero() && now.Sub(e.lastCheck) < b.cfg.TransactionCheckInterval {
			continue
		}
		if e.checks < b.cfg.TransactionCheckMax && !reachable(e.group) {
			continue
		}
		due = append(due, e)
	}
	sort.Slice(due, func(i, j int) bool { return due[i].qoff < due[j].qoff })
	var checks []txnCheck
	var checked []*halfEntry
	for _, e := range due {
		r, err := b.cl.readRecord(e.phys)
		if err != nil {
			// The half message is gone (retention): nothing can be committed any more.
			b.cfg.Logger.Warn("prepared message unreadable; closing it", "offset", e.phys, "err", err)
			if _, err := b.appendTxnOps([]inMsg{opRecord(opTagDone, e.qoff)}, func(res []putResult) { t.close(e, res[0].queueOffset) }); err != nil {
				return nil, err
			}
			continue
		}
		if e.checks >= b.cfg.TransactionCheckMax {
			// Kept for inspection, as RocketMQ does: the half message as stored.
			m := inMsg{topic: checkMaxTopic, queue: 0, flag: r.flag, sysFlag: r.sysFlag, bornTS: r.bornTS,
				bornHost: r.bornHost, reconsume: r.reconsume, body: r.body, props: r.props,
				tagsCode: TagsCode(propValue(r.props, PropTags))}
			if _, err := b.ensureTopic(checkMaxTopic, 1, PermRead|PermWrite); err != nil {
				return nil, err
			}
			b.cfg.Logger.Warn("transaction unresolved after the maximum number of checks; discarded",
				"group", e.group, "halfOffset", e.qoff, "checks", e.checks)
			if _, err := b.appendTxnOps([]inMsg{m, opRecord(opTagDone, e.qoff)}, func(res []putResult) { t.close(e, res[1].queueOffset) }); err != nil {
				return nil, err
			}
			continue
		}
		p := DecodeProperties(r.props)
		qid, err := realQueue(p)
		if err != nil {
			// The producer is still asked (it may roll back); a commit is refused.
			b.cfg.Logger.Error("prepared message has a malformed target queue", "group", e.group, "halfOffset", e.qoff, "err", err)
		}
		p[PropCheckTimes] = strconv.Itoa(e.checks + 1)
		view := inMsg{topic: p[PropRealTopic], queue: qid, flag: r.flag, sysFlag: r.sysFlag, bornTS: r.bornTS,
			bornHost: r.bornHost, reconsume: r.reconsume, body: r.body, props: EncodeProperties(p)}
		rec := make([]byte, view.size())
		encodeRecord(rec, &view, e.qoff, e.phys, r.storeTS, r.storeHost)
		checks = append(checks, txnCheck{group: e.group, record: rec, halfQueueOffset: e.qoff, halfPhysOffset: e.phys,
			uniqKey: p[PropUniqKey], offsetMsgID: MessageID(r.storeHost, e.phys)})
		checked = append(checked, e)
	}
	if len(checked) > 0 {
		offs := make([]int64, len(checked))
		for i, e := range checked {
			offs[i] = e.qoff
		}
		_, err := b.appendTxnOps([]inMsg{opRecord(opTagCheck, offs...)}, func(res []putResult) {
			for _, e := range checked {
				e.checks++
				e.lastCheck = now
				if e.firstOp < 0 {
					e.firstOp = res[0].queueOffset
				}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	b.saveTxnMarks()
	return checks, nil
}

// saveTxnMarks stores the low-water marks recovery starts from: the oldest open half
// message, and the oldest op record that still matters (one about a half message at or
// after that mark). Caller holds b.txn.mu.
func (b *Broker) saveTxnMarks() {
	t := b.txn
	hq, err1 := b.queue(halfTopic, 0)
	oq, err2 := b.queue(opTopic, 0)
	if err1 != nil || err2 != nil {
		return
	}
	halfLow := hq.max.Load()
	for q := range t.pending {
		halfLow = min(halfLow, q)
	}
	opLow := oq.max.Load()
	for q, o := range t.doneOps {
		if q < halfLow {
			delete(t.doneOps, q)
			continue
		}
		opLow = min(opLow, o)
	}
	for _, e := range t.pending {
		if e.firstOp >= 0 {
			opLow = min(opLow, e.firstOp)
		}
	}
	for topicName, low := range map[string]int64{halfTopic: halfLow, opTopic: opLow} {
		if cur, ok := b.QueryOffset(txnGroup, topicName, 0); !ok || cur != low {
			if err := b.CommitOffset(txnGroup, topicName, 0, low); err != nil {
				b.cfg.Logger.Error("storing the transaction marks failed", "err", err)
			}
		}
	}
}

// loadTransactions rebuilds the open-transaction table after recovery. committed holds
// the half-message offsets named by commit records replayed from the checkpoint on.
func (b *Broker) loadTransactions(committed map[int64]bool) error {
	t := b.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	hq, err := b.queue(halfTopic, 0)
	if err != nil {
		return nil // no transaction ever
	}
	done := map[int64]int64{}
	checks := map[int64]int{}
	firstOp := map[int64]int64{}
	if oq, err := b.queue(opTopic, 0); err == nil {
		low, _ := b.QueryOffset(txnGroup, opTopic, 0)
		for o := max(low, oq.min.Load()); o < oq.max.Load(); o++ {
			phys, _, _, ok := oq.get(o)
			if !ok {
				continue
			}
			r, err := b.cl.readRecord(phys)
			if err != nil {
				continue
			}
			tag := propValue(r.props, PropTags)
			for _, f := range strings.Split(string(r.body), ",") {
				h, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					b.cfg.Logger.Warn("transaction op record with a bad body; ignored", "opOffset", o)
					continue
				}
				switch tag {
				case opTagDone:
					done[h] = o
				case opTagCheck:
					checks[h]++
					if _, ok := firstOp[h]; !ok {
						firstOp[h] = o
					}
				}
			}
		}
	}
	low, _ := b.QueryOffset(txnGroup, halfTopic, 0)
	var repair []*halfEntry
	for q := max(low, hq.min.Load()); q < hq.max.Load(); q++ {
		if o, ok := done[q]; ok {
			t.doneOps[q] = o
			continue
		}
		phys, _, _, ok := hq.get(q)
		if !ok {
			continue
		}
		r, err := b.cl.readRecord(phys)
		if err != nil {
			continue
		}
		t.open(q, phys, r.bornTS, DecodeProperties(r.props))
		e := t.pending[q]
		e.checks = checks[q]
		if fo, ok := firstOp[q]; ok {
			e.firstOp = fo
		}
		if committed[phys] {
			repair = append(repair, e)
		}
	}
	if b.cfg.Role == RoleSlave {
		repair = nil // the master writes those op records; they arrive by replication
	}
	for _, e := range repair {
		if _, err := b.appendTxnOps([]inMsg{opRecord(opTagDone, e.qoff)}, func(res []putResult) { t.close(e, res[0].queueOffset) }); err != nil {
			return err
		}
	}
	if len(t.pending) > 0 || len(repair) > 0 {
		b.cfg.Logger.Info("open transactions recovered", "open", len(t.pending), "closedOnRecovery", len(repair))
	}
	b.saveTxnMarks()
	return nil
}

// OpenTransactions is the number of prepared messages neither committed nor rolled back.
func (b *Broker) OpenTransactions() int {
	b.txn.mu.Lock()
	defer b.txn.mu.Unlock()
	return len(b.txn.pending)
}

// sendHalf stores a prepared message and answers its send (§4.3): the half message's id
// and queue offset, the requested queue, and the client's message id as transactionId.
func (s *netServer) sendHalf(req *remoting.Command, m inMsg) (*remoting.Command, int64) {
	res, end, err := s.b.appendHalf(m)
	if err != nil {
		code := int16(respSystemError)
		if errors.Is(err, ErrMessageTooLarge) || errors.Is(err, ErrInvalidTopic) {
			code = respMessageIllegal
		}
		return req.Reply(code, err.Error()), 0
	}
	r := req.Reply(respSuccess, "")
	r.ExtFields = map[string]string{
		"msgId":         MessageID(s.b.host(), res.phys),
		"queueId":       strconv.Itoa(m.queue),
		"queueOffset":   strconv.FormatInt(res.queueOffset, 10),
		"transactionId": propValue(m.props, PropUniqKey),
		"MSG_REGION":    "DefaultRegion",
		"TRACE_ON":      "true",
	}
	return r, end
}

// endTransaction handles END_TRANSACTION (37): commitOrRollback 8 commits, 12 rolls back,
// 0 (the producer does not know yet) changes nothing.
func (s *netServer) endTransaction(req *remoting.Command) *remoting.Command {
	if s.b.cfg.Role == RoleSlave {
		return req.Reply(respSlaveNotAvailable, "a slave broker does not end transactions")
	}
	cr, err := req.ExtInt("commitOrRollback")
	if err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	if cr == 0 {
		return req.Reply(respSuccess, "")
	}
	if cr != sysFlagTxnCommit && cr != sysFlagTxnRollback {
		return req.Reply(respInvalidParameter, fmt.Sprintf("commitOrRollback %d: want 0, 8 or 12", cr))
	}
	qoff, err1 := req.ExtInt("tranStateTableOffset")
	phys, err2 := req.ExtInt("commitLogOffset")
	if err := errors.Join(err1, err2); err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	end, err := s.b.EndTransaction(EndTransaction{ProducerGroup: req.Ext("producerGroup"), HalfQueueOffset: qoff,
		HalfPhysOffset: phys, Commit: cr == sysFlagTxnCommit})
	if err != nil {
		s.b.cfg.Logger.Warn("end of transaction refused", "producerGroup", req.Ext("producerGroup"),
			"commitLogOffset", phys, "err", err)
		return req.Reply(respSystemError, err.Error())
	}
	if end > 0 {
		if err := s.b.waitDurable(end); err != nil {
			return req.Reply(durabilityCode(err), err.Error())
		}
	}
	return req.Reply(respSuccess, "")
}

// checkTransactions sends CHECK_TRANSACTION_STATE (39) for open transactions that are
// due, to a live producer of their group. The caller has done s.wg.Add(1).
func (s *netServer) checkTransactions() {
	defer s.wg.Done()
	tick := min(time.Second, s.b.cfg.TransactionCheckInterval/2, s.b.cfg.TransactionTimeout/2)
	t := time.NewTicker(max(tick, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if s.b.cfg.Role == RoleSlave {
			continue
		}
		checks, err := s.b.dueChecks(time.Now(), func(g string) bool { return s.producerConn(g) != nil })
		if err != nil {
			s.b.cfg.Logger.Error("transaction check failed", "err", err)
			continue
		}
		for _, c := range checks {
			pc := s.producerConn(c.group)
			if pc == nil {
				s.b.cfg.Logger.Warn("no producer of the group is connected to check a transaction",
					"group", c.group, "halfOffset", c.halfQueueOffset)
				continue
			}
			cmd := &remoting.Command{Code: codeCheckTransaction, Language: "GO", Version: 479, Opaque: s.opaque.Add(1),
				Flag: remoting.FlagOneway, Body: c.record, ExtFields: map[string]string{
					"tranStateTableOffset": strconv.FormatInt(c.halfQueueOffset, 10),
					"commitLogOffset":      strconv.FormatInt(c.halfPhysOffset, 10),
					"msgId":                c.uniqKey,
					"transactionId":        c.uniqKey,
					"offsetMsgId":          c.offsetMsgID,
				}}
			pc.send(cmd)
		}
	}
}
