package connectors

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"rsql/broker"
	"rsql/broker/remoting"
)

// Transactional writing over the RocketMQ protocol (docs/guarantees.md, "Transactional
// output"), to the bundled broker of another process or to Apache RocketMQ:
//
//   - Prepared messages are sent one request each (SEND_MESSAGE_V2) — RocketMQ refuses
//     transactional messages in a batch — but pipelined: a Prepare call writes the
//     requests of all its messages for a broker at once and then collects the answers.
//     They carry TRAN_MSG (and the prepared flag in sysFlag), the writer's group as PGROUP
//     (where check-backs go), a client message id of the writer's own (UNIQ_KEY), the key
//     as KEYS and the transaction as RSQL_TXN.
//   - rocketmq-client-go ends a transaction only right after its send, with the outcome of
//     a local callback, one-way, and its transaction producer registers its group with a
//     broker only once it has sent to one (so check-backs of a restarted writer would wait
//     for its first send); its sends cost a goroutine and a connection-wide lock each. The
//     writer therefore does without it and keeps a connection of its own to each master
//     broker of the topic (brokerLink, rsql's remoting codec): it sends there, registers the
//     group there with a heartbeat as soon as it starts and every 20 s, answers the
//     CHECK_TRANSACTION_STATE requests that arrive on it with END_TRANSACTION (one-way,
//     fromTransactionCheck, as rocketmq-client-go does), and sends End's END_TRANSACTION
//     as requests. A queue's messages are spread over txLanes lanes by key (unkeyed ones
//     in rotation); a lane waits for each answer before its next request, so the messages
//     of a key reach their queue in prepare order whichever way the broker schedules
//     requests (Apache RocketMQ ends transactions on a thread pool). Lanes and queues are
//     ended in parallel.

// rmqHalf is what END_TRANSACTION needs of a prepared message, and its lane.
type rmqHalf struct {
	queueOffset     int64 // tranStateTableOffset
	commitLogOffset int64
	msgID           string // the client's message id (UNIQ_KEY), also its transactionId
	lane            int    // 0 to txLanes-1: messages of a lane are ended one after the other
}

// txLanes is how many END_TRANSACTION requests of one queue may be in flight at once.
const txLanes = 16

// laneOf is the lane of the i-th message of a Prepare call: by key (a hash independent of
// the queue's, so a queue's keys spread over all lanes), in rotation without one.
func laneOf(key []byte, i int) int {
	if len(key) == 0 {
		return i % txLanes
	}
	return int(crc32.ChecksumIEEE(key) % txLanes)
}

// rmqTxWriter is a TxWriter over the RocketMQ protocol.
type rmqTxWriter struct {
	s     *RocketMQSink
	group string
	ids   *uniqIDs
	mqs   []*primitive.MessageQueue // queue i of the sink
	links []*brokerLink             // the master broker of mqs[i]
	all   []*brokerLink             // one per broker

	mu   sync.Mutex
	rr   int
	txns map[string][][]rmqHalf // per transaction, per queue, in prepare order
}

// Transactional starts transactional writing to the sink's topic as producer group group.
func (s *RocketMQSink) Transactional(ctx context.Context, group string, check TxCheck) (TxWriter, error) {
	route, err := fetchRoute(ctx, s.cfg.Credentials, s.cfg.NameServer, s.topic)
	if err != nil {
		return nil, err
	}
	mqs, addrs, err := layoutQueues(s.topic, s.layout, route)
	if err != nil {
		return nil, err
	}
	w := &rmqTxWriter{s: s, group: group, ids: newUniqIDs(), mqs: mqs, links: make([]*brokerLink, len(mqs)), txns: map[string][][]rmqHalf{}}
	byAddr := map[string]*brokerLink{}
	clientID := "rsql@" + instanceName("tx")
	for i, a := range addrs {
		l := byAddr[a]
		if l == nil {
			l = newBrokerLink(a, clientID, group, check, s.cfg.Credentials)
			byAddr[a] = l
			w.all = append(w.all, l)
		}
		w.links[i] = l
	}
	for _, l := range w.all {
		if err := l.start(ctx); err != nil {
			w.closeLinks()
			return nil, fmt.Errorf("topic %s: transactional writing as %s: %w", s.topic, group, err)
		}
	}
	return w, nil
}

// layoutQueues lists the queues of the sink's layout (its queue order: rocketmq_layout.go)
// with their master's address in the route; a broker of the layout without a route now
// (down) is ErrUnavailable, never another queue.
func layoutQueues(topic string, layout []queueRef, r *topicRoute) ([]*primitive.MessageQueue, []string, error) {
	addr := map[string]string{}
	for _, bd := range r.BrokerDatas {
		addr[bd.BrokerName] = bd.BrokerAddrs["0"]
	}
	mqs := make([]*primitive.MessageQueue, len(layout))
	addrs := make([]string, len(layout))
	for i, q := range layout {
		if addr[q.broker] == "" {
			return nil, nil, fmt.Errorf("%w: topic %s: broker %s of its layout has no master in the route", ErrUnavailable, topic, q.broker)
		}
		mqs[i] = &primitive.MessageQueue{Topic: topic, BrokerName: q.broker, QueueId: q.id}
		addrs[i] = addr[q.broker]
	}
	return mqs, addrs, nil
}

func (w *rmqTxWriter) Prepare(ctx context.Context, txn string, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	hs := make([]rmqHalf, len(msgs))
	qs := make([]int, len(msgs))
	w.mu.Lock()
	for i := range msgs {
		qs[i] = pickQueue(msgs[i].Key, len(w.mqs), &w.rr)
		hs[i].lane = laneOf(msgs[i].Key, w.rr+i)
	}
	w.mu.Unlock()
	// The requests of each broker, written at once.
	byLink := map[*brokerLink][]int{}
	for i := range msgs {
		l := w.links[qs[i]]
		byLink[l] = append(byLink[l], i)
	}
	born := strconv.FormatInt(time.Now().UnixMilli(), 10)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for l, idx := range byLink {
		reqs := make([]*remoting.Command, len(idx))
		for k, i := range idx {
			hs[i].msgID = w.ids.next()
			reqs[k] = w.sendRequest(msgs[i], txn, hs[i].msgID, w.mqs[qs[i]].QueueId, born)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps, err := l.callMany(ctx, reqs)
			for k, i := range idx {
				if err == nil {
					err = halfOf(resps[k], &hs[i])
				}
				if err != nil {
					q := qs[i]
					mu.Lock()
					errs = append(errs, fmt.Errorf("topic %s queue %d (broker %s queue %d): prepare: %w",
						w.s.topic, q, w.mqs[q].BrokerName, w.mqs[q].QueueId, err))
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	w.mu.Lock()
	t := w.txns[txn]
	if t == nil {
		t = make([][]rmqHalf, len(w.mqs))
		w.txns[txn] = t
	}
	for i := range hs {
		t[qs[i]] = append(t[qs[i]], hs[i])
	}
	w.mu.Unlock()
	return nil
}

// sysFlagPrepared is the sysFlag bit of a prepared transactional message.
const sysFlagPrepared = 1 << 2

// sendRequest is the SEND_MESSAGE_V2 request of m as a prepared message of txn.
func (w *rmqTxWriter) sendRequest(m Message, txn, uniq string, queueID int, born string) *remoting.Command {
	props := map[string]string{
		PropTxn: txn, primitive.PropertyTransactionPrepared: "true", primitive.PropertyProducerGroup: w.group,
		primitive.PropertyUniqueClientMessageIdKeyIndex: uniq, primitive.PropertyWaitStoreMsgOk: "true",
	}
	if len(m.Key) > 0 {
		props[primitive.PropertyKeys] = string(m.Key)
	}
	if m.ID != "" {
		props[PropMessageID] = m.ID
	}
	return &remoting.Command{Code: reqSendMessageV2, Body: m.Body, ExtFields: map[string]string{
		"a": w.group, "b": w.s.topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(queueID),
		"f": strconv.Itoa(sysFlagPrepared), "g": born, "h": "0", "i": string(broker.EncodeProperties(props)),
		"j": "0", "k": "false", "l": "16", "m": "false",
	}}
}

// halfOf reads the handle of a prepared message from the answer to its send.
func halfOf(r *remoting.Command, h *rmqHalf) error {
	if r.Code != respSuccess {
		return fmt.Errorf("the broker answers code %d: %s", r.Code, r.Remark)
	}
	id := r.Ext("msgId")
	mid, err := primitive.UnmarshalMsgID([]byte(id))
	if err != nil {
		return fmt.Errorf("the broker's message id %q: %w", id, err)
	}
	qoff, err := strconv.ParseInt(r.Ext("queueOffset"), 10, 64)
	if err != nil {
		return fmt.Errorf("the broker's queue offset %q: %w", r.Ext("queueOffset"), err)
	}
	h.queueOffset, h.commitLogOffset = qoff, mid.Offset
	return nil
}

// uniqIDs makes client message ids (UNIQ_KEY) as RocketMQ's clients do: 32 hex digits, a
// prefix fixed per writer (random here, where clients put their address and process id)
// and a counter.
type uniqIDs struct {
	prefix string
	n      atomic.Uint64
}

func newUniqIDs() *uniqIDs {
	var b [8]byte
	crand.Read(b[:])
	return &uniqIDs{prefix: strings.ToUpper(hex.EncodeToString(b[:]))}
}

func (u *uniqIDs) next() string {
	return u.prefix + fmt.Sprintf("%016X", u.n.Add(1))
}

func (w *rmqTxWriter) End(ctx context.Context, txn string, commit bool) error {
	w.mu.Lock()
	t := w.txns[txn]
	w.mu.Unlock()
	if err := w.endHalves(ctx, t, commit); err != nil {
		return fmt.Errorf("topic %s: end transaction %s: %w", w.s.topic, txn, err)
	}
	w.mu.Lock()
	delete(w.txns, txn)
	w.mu.Unlock()
	return nil
}

// endHalves ends each lane's messages in turn, the lanes of every queue in parallel.
func (w *rmqTxWriter) endHalves(ctx context.Context, t [][]rmqHalf, commit bool) error {
	decision := txnRollback
	if commit {
		decision = txnCommit
	}
	errs := make([]error, len(t)*txLanes)
	var wg sync.WaitGroup
	for q, hs := range t {
		var lanes [txLanes][]rmqHalf
		for _, h := range hs {
			lanes[h.lane] = append(lanes[h.lane], h)
		}
		for l, lhs := range lanes {
			if len(lhs) == 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, h := range lhs {
					if err := w.links[q].end(ctx, w.group, h, decision); err != nil {
						errs[q*txLanes+l] = fmt.Errorf("queue %d: %w", q, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Record is 'R', uvarint queues, uvarint n, then n times uvarint queue, uvarint lane,
// varint half queue offset, varint commit-log offset, uvarint len(msgId) msgId; a queue's
// messages in prepare order.
func (w *rmqTxWriter) Record(txn string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return encodeRMQTxRecord(w.txns[txn])
}

const rmqTxRecordKind = 'R'

func encodeRMQTxRecord(t [][]rmqHalf) []byte {
	n := 0
	for _, hs := range t {
		n += len(hs)
	}
	if n == 0 {
		return nil
	}
	out := binary.AppendUvarint([]byte{rmqTxRecordKind}, uint64(len(t)))
	out = binary.AppendUvarint(out, uint64(n))
	for q, hs := range t {
		for _, h := range hs {
			out = binary.AppendUvarint(out, uint64(q))
			out = binary.AppendUvarint(out, uint64(h.lane))
			out = binary.AppendVarint(out, h.queueOffset)
			out = binary.AppendVarint(out, h.commitLogOffset)
			out = binary.AppendUvarint(out, uint64(len(h.msgID)))
			out = append(out, h.msgID...)
		}
	}
	return out
}

// decodeRMQTxRecord is the inverse of encodeRMQTxRecord.
func decodeRMQTxRecord(rec []byte) ([][]rmqHalf, error) {
	if len(rec) == 0 {
		return nil, nil
	}
	if rec[0] != rmqTxRecordKind {
		return nil, fmt.Errorf("%w: kind %q, want %q (RocketMQ protocol)", ErrBadTxRecord, rec[0], rmqTxRecordKind)
	}
	rec = rec[1:]
	uv := func(what string, i int) (uint64, error) {
		v, k := binary.Uvarint(rec)
		if k <= 0 {
			return 0, fmt.Errorf("%w: message %d has no %s", ErrBadTxRecord, i, what)
		}
		rec = rec[k:]
		return v, nil
	}
	sv := func(what string, i int) (int64, error) {
		v, k := binary.Varint(rec)
		if k <= 0 || v < 0 {
			return 0, fmt.Errorf("%w: message %d has no %s", ErrBadTxRecord, i, what)
		}
		rec = rec[k:]
		return v, nil
	}
	nq, err := uv("queue count", -1)
	if err != nil || nq == 0 || nq > 1<<16 {
		return nil, fmt.Errorf("%w: bad queue count", ErrBadTxRecord)
	}
	n, err := uv("message count", -1)
	if err != nil || n > uint64(len(rec))/4 {
		return nil, fmt.Errorf("%w: bad message count", ErrBadTxRecord)
	}
	t := make([][]rmqHalf, nq)
	for i := 0; i < int(n); i++ {
		q, err := uv("queue", i)
		if err != nil {
			return nil, err
		}
		if q >= nq {
			return nil, fmt.Errorf("%w: message %d is of queue %d of %d", ErrBadTxRecord, i, q, nq)
		}
		var h rmqHalf
		lane, err := uv("lane", i)
		if err != nil {
			return nil, err
		}
		if lane >= txLanes {
			return nil, fmt.Errorf("%w: message %d is of lane %d of %d", ErrBadTxRecord, i, lane, txLanes)
		}
		h.lane = int(lane)
		if h.queueOffset, err = sv("queue offset", i); err != nil {
			return nil, err
		}
		if h.commitLogOffset, err = sv("commit-log offset", i); err != nil {
			return nil, err
		}
		l, err := uv("message id", i)
		if err != nil || l > uint64(len(rec)) {
			return nil, fmt.Errorf("%w: message %d has no message id", ErrBadTxRecord, i)
		}
		h.msgID = string(rec[:l])
		rec = rec[l:]
		t[q] = append(t[q], h)
	}
	if len(rec) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last message", ErrBadTxRecord, len(rec))
	}
	return t, nil
}

func (w *rmqTxWriter) EndRecord(ctx context.Context, rec []byte, commit bool) error {
	t, err := decodeRMQTxRecord(rec)
	if err != nil {
		return fmt.Errorf("topic %s: %w", w.s.topic, err)
	}
	if len(t) > 0 && len(t) != len(w.mqs) {
		return fmt.Errorf("topic %s: a transaction recorded over %d queues, the topic has %d now", w.s.topic, len(t), len(w.mqs))
	}
	if err := w.endHalves(ctx, t, commit); err != nil {
		return fmt.Errorf("topic %s: end a recorded transaction: %w", w.s.topic, err)
	}
	return nil
}

func (w *rmqTxWriter) Close() error {
	w.closeLinks()
	return nil
}

func (w *rmqTxWriter) closeLinks() {
	for _, l := range w.all {
		l.close()
	}
}

// The request codes and values a brokerLink uses.
const (
	reqSendMessageV2    = 310
	reqHeartbeat        = 34
	reqEndTransaction   = 37
	reqCheckTransaction = 39
	txnCommit           = "8"
	txnRollback         = "12"
	linkHeartbeat       = 20 * time.Second
	linkRedial          = 2 * time.Second
	linkRequestTimeout  = 10 * time.Second
	linkMaxFrame        = 16 << 20
	remotingLanguage    = "GO"
	remotingVersion     = 479
)

// brokerLink is a writer's connection to one broker: requests are multiplexed by opaque (a
// reader goroutine hands each answer to its caller), the broker's CHECK_TRANSACTION_STATE
// requests are answered on it, and a heartbeat registers the writer's group on it when it
// is dialled and every 20 s. A broken connection is dialled again by the next request or
// within 2 s by the heartbeat loop. Every request it sends is signed with creds (a broker
// with access control; nothing when they are empty).
type brokerLink struct {
	addr, clientID, group string
	check                 TxCheck
	creds                 remoting.Credentials

	mu      sync.Mutex // guards the fields below; wmu serialises writes
	c       net.Conn
	wmu     sync.Mutex
	pending map[int32]chan *remoting.Command
	closed  bool
	done    chan struct{}
	loop    sync.WaitGroup
}

func newBrokerLink(addr, clientID, group string, check TxCheck, creds remoting.Credentials) *brokerLink {
	return &brokerLink{addr: addr, clientID: clientID, group: group, check: check, creds: creds, done: make(chan struct{})}
}

// start dials the broker, registers the group and keeps the link up until close.
func (l *brokerLink) start(ctx context.Context) error {
	if _, err := l.conn(ctx); err != nil {
		return err
	}
	l.loop.Add(1)
	go l.keepAlive()
	return nil
}

// conn returns the live connection, dialling (and registering the group) when there is none.
func (l *brokerLink) conn(ctx context.Context) (net.Conn, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, net.ErrClosed
	}
	if c := l.c; c != nil {
		l.mu.Unlock()
		return c, nil
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, linkRequestTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", l.addr)
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", l.addr, err)
	}
	l.mu.Lock()
	if l.closed || l.c != nil {
		// Closed meanwhile, or another caller dialled first: use theirs.
		cur, closed := l.c, l.closed
		l.mu.Unlock()
		c.Close()
		if closed {
			return nil, net.ErrClosed
		}
		return cur, nil
	}
	l.c = c
	l.pending = map[int32]chan *remoting.Command{}
	l.mu.Unlock()
	l.loop.Add(1)
	go l.read(c)
	if err := l.heartbeat(ctx); err != nil {
		l.drop(c)
		return nil, err
	}
	return c, nil
}

// heartbeat registers the group as a producer on the connection.
func (l *brokerLink) heartbeat(ctx context.Context) error {
	body, err := json.Marshal(map[string]any{"clientID": l.clientID,
		"producerDataSet": []map[string]string{{"groupName": l.group}}, "consumerDataSet": []any{}})
	if err != nil {
		return err
	}
	resp, err := l.call(ctx, &remoting.Command{Code: reqHeartbeat, Body: body})
	if err != nil {
		return err
	}
	if resp.Code != respSuccess {
		return fmt.Errorf("broker %s refuses the heartbeat of %s (code %d: %s)", l.addr, l.group, resp.Code, resp.Remark)
	}
	return nil
}

func (l *brokerLink) keepAlive() {
	defer l.loop.Done()
	last := time.Now()
	t := time.NewTicker(linkRedial)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		l.mu.Lock()
		up := l.c != nil
		l.mu.Unlock()
		switch {
		case !up:
			if _, err := l.conn(context.Background()); err == nil {
				last = time.Now()
			}
		case time.Since(last) >= linkHeartbeat:
			if err := l.heartbeat(context.Background()); err == nil {
				last = time.Now()
			}
		}
	}
}

// call sends req and waits for its answer.
func (l *brokerLink) call(ctx context.Context, req *remoting.Command) (*remoting.Command, error) {
	c, err := l.conn(ctx)
	if err != nil {
		return nil, err
	}
	req.Language, req.Version, req.Opaque = remotingLanguage, remotingVersion, adminOpaque.Add(1)
	l.creds.Sign(req)
	ch := make(chan *remoting.Command, 1)
	l.mu.Lock()
	if l.c != c {
		l.mu.Unlock()
		return nil, fmt.Errorf("broker %s: connection lost", l.addr)
	}
	l.pending[req.Opaque] = ch
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if l.pending != nil {
			delete(l.pending, req.Opaque)
		}
		l.mu.Unlock()
	}()
	if err := l.write(c, req); err != nil {
		return nil, err
	}
	t := time.NewTimer(linkRequestTimeout)
	defer t.Stop()
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("broker %s: connection lost before the answer", l.addr)
		}
		return resp, nil
	case <-t.C:
		l.drop(c)
		return nil, fmt.Errorf("broker %s: no answer within %v", l.addr, linkRequestTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// callMany sends reqs in one write and waits for all their answers (in reqs' order).
func (l *brokerLink) callMany(ctx context.Context, reqs []*remoting.Command) ([]*remoting.Command, error) {
	c, err := l.conn(ctx)
	if err != nil {
		return nil, err
	}
	chs := make([]chan *remoting.Command, len(reqs))
	var frames []byte
	for i, req := range reqs {
		req.Language, req.Version, req.Opaque = remotingLanguage, remotingVersion, adminOpaque.Add(1)
		l.creds.Sign(req)
		if frames, err = remoting.Encode(frames, req); err != nil {
			return nil, err
		}
		chs[i] = make(chan *remoting.Command, 1)
	}
	l.mu.Lock()
	if l.c != c {
		l.mu.Unlock()
		return nil, fmt.Errorf("broker %s: connection lost", l.addr)
	}
	for i, req := range reqs {
		l.pending[req.Opaque] = chs[i]
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if l.pending != nil {
			for _, req := range reqs {
				delete(l.pending, req.Opaque)
			}
		}
		l.mu.Unlock()
	}()
	l.wmu.Lock()
	c.SetWriteDeadline(time.Now().Add(linkRequestTimeout))
	_, err = c.Write(frames)
	l.wmu.Unlock()
	if err != nil {
		l.drop(c)
		return nil, fmt.Errorf("broker %s: %w", l.addr, err)
	}
	t := time.NewTimer(linkRequestTimeout)
	defer t.Stop()
	resps := make([]*remoting.Command, len(reqs))
	for i, ch := range chs {
		select {
		case resp, ok := <-ch:
			if !ok {
				return nil, fmt.Errorf("broker %s: connection lost before the answer", l.addr)
			}
			resps[i] = resp
		case <-t.C:
			l.drop(c)
			return nil, fmt.Errorf("broker %s: no answer within %v", l.addr, linkRequestTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return resps, nil
}

func (l *brokerLink) write(c net.Conn, cmd *remoting.Command) error {
	f, err := remoting.Encode(nil, cmd)
	if err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	c.SetWriteDeadline(time.Now().Add(linkRequestTimeout))
	if _, err := c.Write(f); err != nil {
		l.drop(c)
		return fmt.Errorf("broker %s: %w", l.addr, err)
	}
	return nil
}

// read hands answers to their callers and check-backs to answerCheck until c fails.
func (l *brokerLink) read(c net.Conn) {
	defer l.loop.Done()
	defer l.drop(c)
	var buf []byte
	for {
		p, err := remoting.ReadFrame(c, linkMaxFrame, buf[:0])
		if err != nil {
			return
		}
		buf = p
		cmd, err := remoting.Decode(p)
		if err != nil {
			return
		}
		if cmd.IsResponse() {
			l.mu.Lock()
			ch := l.pending[cmd.Opaque]
			delete(l.pending, cmd.Opaque)
			l.mu.Unlock()
			if ch != nil {
				ch <- cmd
			}
			continue
		}
		if cmd.Code == reqCheckTransaction {
			go l.answerCheck(c, cmd)
		}
	}
}

// answerCheck decides the prepared message a check-back is about by its transaction and
// tells the broker (nothing when the answer is "unknown": the broker asks again later).
func (l *brokerLink) answerCheck(c net.Conn, req *remoting.Command) {
	txn, uniq, ok := checkedTxn(req.Body)
	if !ok {
		return
	}
	var decision string
	switch l.check(txn) {
	case TxCommit:
		decision = txnCommit
	case TxRollback:
		decision = txnRollback
	default:
		return
	}
	msgID := req.Ext("msgId")
	if uniq != "" {
		msgID = uniq
	}
	txnID := req.Ext("transactionId")
	if txnID == "" {
		txnID = msgID
	}
	end := &remoting.Command{Code: reqEndTransaction, Language: remotingLanguage, Version: remotingVersion,
		Opaque: adminOpaque.Add(1), Flag: remoting.FlagOneway, ExtFields: map[string]string{
			"producerGroup":        l.group,
			"tranStateTableOffset": req.Ext("tranStateTableOffset"),
			"commitLogOffset":      req.Ext("commitLogOffset"),
			"commitOrRollback":     decision,
			"fromTransactionCheck": "true",
			"msgId":                msgID,
			"transactionId":        txnID,
		}}
	l.creds.Sign(end)
	l.write(c, end)
}

// checkedTxn reads the transaction (PropTxn) and the client message id (UNIQ_KEY) of the
// message a check-back carries, a record in RocketMQ's stored layout (docs/broker.md):
// fixed fields, hosts of 8 or (IPv6) 20 bytes, body, topic (a 1-byte length, 2 with the
// second magic code), properties. ok is false when the body is not such a record.
func checkedTxn(body []byte) (txn, uniq string, ok bool) {
	const (
		magicV1    = 0xDAA320A7
		magicV2    = 0xDAA320AB
		bornHostV6 = 0x10
		storeHost6 = 0x20
	)
	be := binary.BigEndian
	if len(body) < 40 {
		return "", "", false
	}
	magic := be.Uint32(body[4:])
	if magic != magicV1 && magic != magicV2 {
		return "", "", false
	}
	sysFlag := be.Uint32(body[36:])
	p := 40 + 8 // born timestamp
	p += 8
	if sysFlag&bornHostV6 != 0 {
		p += 12
	}
	p += 8 // store timestamp
	p += 8
	if sysFlag&storeHost6 != 0 {
		p += 12
	}
	p += 4 + 8 // reconsume times, prepared transaction offset
	next := func(width int) ([]byte, bool) {
		if p+width > len(body) {
			return nil, false
		}
		var n int
		switch width {
		case 1:
			n = int(body[p])
		case 2:
			n = int(be.Uint16(body[p:]))
		default:
			n = int(be.Uint32(body[p:]))
		}
		p += width
		if n < 0 || n > len(body)-p {
			return nil, false
		}
		v := body[p : p+n]
		p += n
		return v, true
	}
	if _, ok := next(4); !ok { // body
		return "", "", false
	}
	topicWidth := 1
	if magic == magicV2 {
		topicWidth = 2
	}
	if _, ok := next(topicWidth); !ok {
		return "", "", false
	}
	props, ok := next(2)
	if !ok {
		return "", "", false
	}
	pm := broker.DecodeProperties(props)
	return pm[PropTxn], pm[primitive.PropertyUniqueClientMessageIdKeyIndex], true
}

// end sends END_TRANSACTION for h and waits for the broker's answer.
func (l *brokerLink) end(ctx context.Context, group string, h rmqHalf, decision string) error {
	resp, err := l.call(ctx, &remoting.Command{Code: reqEndTransaction, ExtFields: map[string]string{
		"producerGroup":        group,
		"tranStateTableOffset": strconv.FormatInt(h.queueOffset, 10),
		"commitLogOffset":      strconv.FormatInt(h.commitLogOffset, 10),
		"commitOrRollback":     decision,
		"fromTransactionCheck": "false",
		"msgId":                h.msgID,
		"transactionId":        h.msgID,
	}})
	if err != nil {
		return err
	}
	if resp.Code != respSuccess {
		return fmt.Errorf("broker %s answers code %d: %s", l.addr, resp.Code, resp.Remark)
	}
	return nil
}

// drop forgets c (when it is still the link's connection) and fails the requests waiting on it.
func (l *brokerLink) drop(c net.Conn) {
	c.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != c {
		return
	}
	l.c = nil
	for _, ch := range l.pending {
		close(ch)
	}
	l.pending = nil
}

func (l *brokerLink) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	c := l.c
	l.mu.Unlock()
	close(l.done)
	if c != nil {
		l.drop(c)
	}
	l.loop.Wait()
}
