package connectors

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"rsql/broker/remoting"
)

// RocketMQConfig says how to reach a RocketMQ cluster (any name server: the bundled broker's
// or Apache RocketMQ's).
type RocketMQConfig struct {
	// NameServer is the name server's host:port (an "http://" prefix is ignored).
	NameServer string
	// CreateTopics creates a missing topic (admin UPDATE_AND_CREATE_TOPIC) on the master
	// brokers of the cluster, found from the name server's cluster info as RocketMQ's admin
	// tool does (mqadmin updateTopic -c): its queues spread over them and its layout recorded
	// as the topic's ordered-topic configuration (rocketmq_layout.go). When false, a missing
	// topic is an error.
	CreateTopics bool
	// Cluster is the cluster whose masters CreateTopics uses; "" is the name server's only
	// cluster (several are an error).
	Cluster string
	// Group is the consumer and producer group (default "rsql-connector"). Sources commit no
	// offsets to it: the reader's offsets are the caller's (checkpoints).
	Group string
	// Wait is how long one Read waits for new messages before returning none (default 200ms).
	Wait time.Duration
	// SendTimeout bounds one send (default 10s).
	SendTimeout time.Duration
	// Credentials sign every request (clients and admin calls) for a broker with access
	// control (docs/security.md); zero: unsigned.
	Credentials remoting.Credentials
}

func (c RocketMQConfig) withDefaults() RocketMQConfig {
	c.NameServer = strings.TrimPrefix(c.NameServer, "http://")
	if c.Group == "" {
		c.Group = "rsql-connector"
	}
	if c.Wait <= 0 {
		c.Wait = 200 * time.Millisecond
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 10 * time.Second
	}
	return c
}

// clientCredentials are Credentials for rocketmq-client-go (which signs when both keys
// are set).
func (c RocketMQConfig) clientCredentials() primitive.Credentials {
	return primitive.Credentials{AccessKey: c.Credentials.AccessKey, SecretKey: c.Credentials.SecretKey,
		SecurityToken: c.Credentials.SecurityToken}
}

// instanceSeq makes each client's instance name unique: rocketmq-client-go shares one client
// per instance name, and a shared client refuses a second consumer of the same group.
var instanceSeq atomic.Int64

func instanceName(kind string) string {
	return fmt.Sprintf("rsql-%s-%d-%d", kind, os.Getpid(), instanceSeq.Add(1))
}

// RocketMQSource reads a topic over the RocketMQ protocol with rocketmq-client-go's pull
// consumer. Its splits are the queues of the topic's layout ("0", "1", ...; see
// rocketmq_layout.go), offsets are queue offsets, and it never ends (unbounded). Safe for
// concurrent use; each SplitReader is used by one goroutine.
type RocketMQSource struct {
	cfg   RocketMQConfig
	topic string
	pc    rocketmq.PullConsumer

	mu     sync.Mutex
	layout []queueRef
}

// OpenRocketMQSource opens topic on the cluster behind cfg.NameServer, creating it with
// queues queues (cfg.CreateTopics) when it does not exist.
func OpenRocketMQSource(ctx context.Context, cfg RocketMQConfig, topic string, queues int) (*RocketMQSource, error) {
	cfg = cfg.withDefaults()
	if _, err := ensureRocketMQTopic(ctx, cfg, topic, queues); err != nil {
		return nil, err
	}
	pc, err := rocketmq.NewPullConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{cfg.NameServer})),
		consumer.WithGroupName(cfg.Group), consumer.WithInstance(instanceName("source")),
		consumer.WithAutoCommit(false), consumer.WithCredentials(cfg.clientCredentials()))
	if err != nil {
		return nil, fmt.Errorf("topic %s: pull consumer: %w", topic, err)
	}
	// Assigning no queue keeps the consumer's own background pulling off: this source pulls
	// each queue itself, from the offsets it is given.
	if err := pc.Assign(topic, nil); err != nil {
		return nil, fmt.Errorf("topic %s: pull consumer: %w", topic, err)
	}
	if err := pc.Start(); err != nil {
		return nil, Unavailable(fmt.Errorf("topic %s: start the pull consumer at %s: %w", topic, cfg.NameServer, err))
	}
	s := &RocketMQSource{cfg: cfg, topic: topic, pc: pc}
	if _, err := s.Splits(ctx); err != nil {
		pc.Shutdown()
		return nil, err
	}
	return s, nil
}

// Splits lists the queues of the topic's layout as "0".."n-1".
func (s *RocketMQSource) Splits(ctx context.Context) ([]string, error) {
	qs, _, err := topicLayout(ctx, s.cfg.Credentials, s.cfg.NameServer, s.topic)
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, Unavailable(fmt.Errorf("topic %s has no queues at name server %s", s.topic, s.cfg.NameServer))
	}
	s.mu.Lock()
	s.layout = qs
	s.mu.Unlock()
	out := make([]string, len(qs))
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out, nil
}

func (s *RocketMQSource) Bounded() bool { return false }

// Close shuts the pull consumer down; it commits no offsets.
func (s *RocketMQSource) Close() error { return s.pc.Shutdown() }

// Open reads split from offset (the first offset not yet processed).
func (s *RocketMQSource) Open(ctx context.Context, split string, offset int64) (SplitReader, error) {
	s.mu.Lock()
	qs := s.layout
	s.mu.Unlock()
	q, err := strconv.Atoi(split)
	if err != nil || q < 0 || q >= len(qs) {
		return nil, fmt.Errorf("topic %s has no queue %q (it has %d)", s.topic, split, len(qs))
	}
	if offset < 0 {
		return nil, fmt.Errorf("topic %s queue %d: offset %d is negative", s.topic, q, offset)
	}
	mq := s.messageQueue(qs[q])
	r := &rocketMQReader{s: s, split: q, splitName: split, mq: mq, next: offset, fetch: offset}
	r.maxSeen.Store(-1)
	r.returned.Store(offset)
	return r, nil
}

// messageQueue is the client library's name of a queue of the layout.
func (s *RocketMQSource) messageQueue(q queueRef) *primitive.MessageQueue {
	return &primitive.MessageQueue{Topic: s.topic, BrokerName: q.broker, QueueId: q.id}
}

type pullOutcome struct {
	res *primitive.PullResult
	err error
	at  int64 // the offset pulled from
}

// rocketMQReader keeps at most one pull in flight. The client's pulls are long polls that
// the broker holds until data arrives (up to its suspend limit) and ignore the caller's
// context, so Read waits for the pull's answer at most Wait and otherwise leaves it pending
// for the next Read: reads stay bounded and new messages still arrive with long-poll latency.
type rocketMQReader struct {
	s         *RocketMQSource
	split     int
	splitName string
	mq        *primitive.MessageQueue
	// next is the offset of the next message Read returns; fetch the offset the next pull
	// asks for (beyond next when held has messages pulled but not yet returned).
	next, fetch int64
	held        []Message
	pending     chan pullOutcome // nil when no pull is in flight
	maxSeen     atomic.Int64     // the queue's max offset in the latest answer; -1 before one
	// returned mirrors next for Lag, which another goroutine calls.
	returned atomic.Int64
	closed   bool
	// The pull in flight: when it started, when the broker was last probed about it, and
	// how many probes in a row found records it should have answered with (probe).
	pendingSince, probedAt time.Time
	suspect                int
}

// probeEvery is how long a pull may go unanswered before the reader asks the broker, on a
// connection of its own, whether it is alive and what the queue holds. The client library
// does not fail a request whose connection closed: without the probe, a broker killed and
// started again would leave the pull waiting out its 30 s timeout.
const probeEvery = 3 * time.Second

// probe checks a pull that has gone unanswered for probeEvery: an error when the broker does
// not answer, or when twice in a row the queue held records beyond the pull's offset (the
// broker started again and the pull is lost with its old connection); nil while the queue
// is simply empty there.
func (r *rocketMQReader) probe(ctx context.Context) error {
	now := time.Now()
	if now.Sub(r.pendingSince) < probeEvery || now.Sub(r.probedAt) < probeEvery {
		return nil
	}
	r.probedAt = now
	ctx, cancel := context.WithTimeout(ctx, probeEvery)
	defer cancel()
	end, err := r.s.maxOffset(ctx, r.split)
	if err != nil {
		r.pending = nil // the lost pull's answer, if any, is dropped
		return fmt.Errorf("topic %s queue %d (broker %s queue %d) offset %d: no answer to a pull for %v, and the broker does not answer: %w",
			r.s.topic, r.split, r.mq.BrokerName, r.mq.QueueId, r.next, now.Sub(r.pendingSince).Round(time.Second), err)
	}
	if end <= r.fetch {
		r.suspect = 0
		return nil
	}
	if r.suspect++; r.suspect < 2 {
		return nil
	}
	r.pending = nil
	return Unavailable(fmt.Errorf("topic %s queue %d (broker %s queue %d) offset %d: no answer to a pull for %v while the queue holds records up to %d (the broker started again?)",
		r.s.topic, r.split, r.mq.BrokerName, r.mq.QueueId, r.next, now.Sub(r.pendingSince).Round(time.Second), end))
}

func (r *rocketMQReader) errorf(format string, args ...any) error {
	return fmt.Errorf("topic %s queue %d offset %d: %s", r.s.topic, r.split, r.next, fmt.Sprintf(format, args...))
}

func (r *rocketMQReader) start(max int) {
	ch := make(chan pullOutcome, 1)
	mq, at := *r.mq, r.fetch
	go func() {
		res, err := r.s.pc.PullFrom(context.Background(), &mq, at, max)
		if err == nil && res != nil {
			for {
				old := r.maxSeen.Load()
				if res.MaxOffset <= old || r.maxSeen.CompareAndSwap(old, res.MaxOffset) {
					break
				}
			}
		}
		ch <- pullOutcome{res: res, err: err, at: at}
	}()
	r.pending = ch
	r.pendingSince = time.Now()
}

// take moves up to max held messages to buf.
func (r *rocketMQReader) take(buf []Message, max int) []Message {
	n := min(max, len(r.held))
	buf = append(buf, r.held[:n]...)
	r.held = r.held[n:]
	r.next = buf[len(buf)-1].Offset + 1
	if len(r.held) == 0 {
		r.held = nil
		r.next = r.fetch
	}
	r.returned.Store(r.next)
	return buf
}

// Read appends up to max messages from the reader's offset on. It returns none (and a nil
// error) when nothing arrived within the source's Wait.
func (r *rocketMQReader) Read(ctx context.Context, buf []Message, max int) ([]Message, error) {
	if r.closed {
		return buf, r.errorf("reader is closed")
	}
	if max <= 0 {
		max = 32
	}
	if len(r.held) > 0 {
		return r.take(buf, max), nil
	}
	timer := time.NewTimer(r.s.cfg.Wait)
	defer timer.Stop()
	for {
		if r.pending == nil {
			r.start(max)
		}
		var out pullOutcome
		select {
		case out = <-r.pending:
			r.pending, r.suspect = nil, 0
		case <-timer.C:
			return buf, r.probe(ctx)
		case <-ctx.Done():
			return buf, ctx.Err()
		}
		if out.at != r.fetch {
			continue // an answer for another offset; ask again
		}
		if out.err != nil {
			// The broker unreachable, restarting, not in the route now, or slow: the job
			// starts again from its checkpoint once it answers.
			return buf, Unavailable(fmt.Errorf("topic %s queue %d (broker %s queue %d) offset %d: pull: %w",
				r.s.topic, r.split, r.mq.BrokerName, r.mq.QueueId, r.next, out.err))
		}
		res := out.res
		switch res.Status {
		case primitive.PullFound:
			for _, m := range res.GetMessageExts() {
				if m.QueueOffset < r.fetch {
					continue
				}
				r.held = append(r.held, Message{Offset: m.QueueOffset, Key: []byte(m.GetKeys()), Body: m.Body,
					Timestamp: m.StoreTimestamp, ID: m.GetProperty(PropMessageID), Split: r.splitName})
			}
			if len(r.held) > 0 {
				r.fetch = max64(res.NextBeginOffset, r.held[len(r.held)-1].Offset+1)
				return r.take(buf, max), nil
			}
			if res.NextBeginOffset > r.fetch {
				r.fetch, r.next = res.NextBeginOffset, res.NextBeginOffset
				r.returned.Store(r.next)
			}
		case primitive.PullNoNewMsg:
			// The broker's long poll ended without data; wait on within this Read's time.
		case primitive.PullNoMsgMatched:
			if res.NextBeginOffset > r.fetch {
				r.fetch, r.next = res.NextBeginOffset, res.NextBeginOffset
				r.returned.Store(r.next)
			}
		case primitive.PullOffsetIllegal:
			if r.fetch < res.MinOffset {
				// Retention removed what was asked for: start at the oldest kept message.
				r.fetch, r.next = res.MinOffset, res.MinOffset
				r.returned.Store(r.next)
				continue
			}
			return buf, r.errorf("offset out of range (the queue holds offsets %d to %d)", res.MinOffset, res.MaxOffset)
		default:
			return buf, r.errorf("unexpected pull status %v", res.Status)
		}
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// Lag is how many messages the queue held beyond what was read, as of the latest pull answer
// (every Read that reaches the broker refreshes it); -1 before the first answer.
func (r *rocketMQReader) Lag() int64 {
	max := r.maxSeen.Load()
	if max < 0 {
		return -1
	}
	if l := max - r.returned.Load(); l > 0 {
		return l
	}
	return 0
}

// Close stops reading. A pull still in flight ends on its own (its answer is dropped).
func (r *rocketMQReader) Close() error {
	r.closed = true
	r.pending, r.held = nil, nil
	return nil
}

// RocketMQSink sends messages to a topic over the RocketMQ protocol with rocketmq-client-go's
// producer. A keyed message goes to queue QueueOf(key, queues) — the same partitioning as
// BrokerSink — through a queue selector; messages without a key rotate over the queues. The
// key travels as the message's KEYS property, Message.ID as property RSQL_ID (PropMessageID), so
// Position and IDsSince make it a de-duplicating sink like BrokerSink. Safe for concurrent use.
type RocketMQSink struct {
	cfg    RocketMQConfig
	topic  string
	p      rocketmq.Producer
	sel    *forcedQueueSelector
	layout []queueRef
	n      int

	mu  sync.Mutex
	rr  int
	byQ [][]*primitive.Message

	rmu sync.Mutex
	src *RocketMQSource // opened on first Position/IDsSince
}

// forcedQueueSelector picks the queue of the batch being sent (set under the sink's lock):
// that queue of the layout or, when the producer's route lacks it (its broker is down),
// none — the send then fails instead of going to another queue.
type forcedQueueSelector struct {
	queue queueRef
	err   error
}

func (f *forcedQueueSelector) Select(_ *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	for _, mq := range mqs {
		if mq.BrokerName == f.queue.broker && mq.QueueId == f.queue.id {
			return mq
		}
	}
	f.err = Unavailable(fmt.Errorf("queue %d of broker %s is not in the route now (the broker is down?)", f.queue.id, f.queue.broker))
	return nil
}

// OpenRocketMQSink opens topic for writing, creating it with queues queues (cfg.CreateTopics)
// when it does not exist.
func OpenRocketMQSink(ctx context.Context, cfg RocketMQConfig, topic string, queues int) (*RocketMQSink, error) {
	cfg = cfg.withDefaults()
	layout, err := ensureRocketMQTopic(ctx, cfg, topic, queues)
	if err != nil {
		return nil, err
	}
	sel := &forcedQueueSelector{}
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{cfg.NameServer})),
		producer.WithGroupName(cfg.Group), producer.WithInstanceName(instanceName("sink")),
		// No retries inside the client: a send that failed after reaching the broker (a
		// timeout, a broker killed before it answered) may be stored, and sending it again
		// would store it twice. The error goes to the caller, whose restart checks what the
		// topic holds (IDsSince) before it sends again.
		producer.WithQueueSelector(sel), producer.WithRetry(0), producer.WithSendMsgTimeout(cfg.SendTimeout),
		producer.WithCredentials(cfg.clientCredentials()))
	if err != nil {
		return nil, fmt.Errorf("topic %s: producer: %w", topic, err)
	}
	if err := p.Start(); err != nil {
		return nil, Unavailable(fmt.Errorf("topic %s: start the producer at %s: %w", topic, cfg.NameServer, err))
	}
	return &RocketMQSink{cfg: cfg, topic: topic, p: p, sel: sel, layout: layout, n: len(layout), byQ: make([][]*primitive.Message, len(layout))}, nil
}

// Queues is the number of queues the sink partitions over.
func (s *RocketMQSink) Queues() int { return s.n }

// sendBatch caps one send's message count and bytes (the broker caps a frame).
const (
	sendBatchMsgs  = 256
	sendBatchBytes = 1 << 20
)

// Write sends msgs, one batch per queue (split at sendBatchMsgs/sendBatchBytes), and returns
// once the broker acknowledged every send.
func (s *RocketMQSink) Write(ctx context.Context, msgs []Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.byQ {
		s.byQ[i] = s.byQ[i][:0]
	}
	for _, m := range msgs {
		q := pickQueue(m.Key, s.n, &s.rr)
		s.byQ[q] = append(s.byQ[q], s.message(m))
	}
	for q, batch := range s.byQ {
		if err := s.sendAll(ctx, q, batch); err != nil {
			return err
		}
	}
	return nil
}

// message converts m: the key travels as KEYS, the ID as property RSQL_ID.
func (s *RocketMQSink) message(m Message) *primitive.Message {
	pm := primitive.NewMessage(s.topic, m.Body)
	if len(m.Key) > 0 {
		pm.WithKeys([]string{string(m.Key)})
	}
	if m.ID != "" {
		pm.WithProperty(PropMessageID, m.ID)
	}
	return pm
}

// WriteQueue sends msgs to one queue (split number), in order: shuffle topics choose queues
// themselves.
func (s *RocketMQSink) WriteQueue(ctx context.Context, queue int, msgs []Message) error {
	if queue < 0 || queue >= s.n {
		return fmt.Errorf("topic %s has no queue %d (it has %d)", s.topic, queue, s.n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	batch := make([]*primitive.Message, len(msgs))
	for i, m := range msgs {
		batch[i] = s.message(m)
	}
	return s.sendAll(ctx, queue, batch)
}

// sendAll sends batch to queue q in sends of at most sendBatchMsgs/sendBatchBytes.
func (s *RocketMQSink) sendAll(ctx context.Context, q int, batch []*primitive.Message) error {
	for len(batch) > 0 {
		n, size := 0, 0
		for n < len(batch) && n < sendBatchMsgs && (n == 0 || size+len(batch[n].Body) <= sendBatchBytes) {
			size += len(batch[n].Body)
			n++
		}
		if err := s.send(ctx, q, batch[:n]); err != nil {
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// reader returns the sink's own source over its topic, opened on first use (for Position and
// IDsSince).
func (s *RocketMQSink) reader(ctx context.Context) (*RocketMQSource, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.src == nil {
		src, err := OpenRocketMQSource(ctx, s.cfg, s.topic, s.n)
		if err != nil {
			return nil, err
		}
		s.src = src
	}
	return s.src, nil
}

// farFuture is a store timestamp later than any message: searching for it answers the end of
// a queue (the bundled broker answers the max offset; Apache RocketMQ the last message's
// offset, a lower bound that only makes IDsSince look at one more message).
const farFuture = int64(1) << 50

// Position returns a mark of the topic's end (per queue, as the broker's offset search for a
// far-future time answers): every message written after the call is stored after it.
func (s *RocketMQSink) Position(ctx context.Context) ([]byte, error) {
	src, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	src.mu.Lock()
	qs := src.layout
	src.mu.Unlock()
	if len(qs) != s.n {
		return nil, fmt.Errorf("topic %s: the source sees %d queues, the sink %d", s.topic, len(qs), s.n)
	}
	out := binary.AppendUvarint(nil, uint64(s.n))
	for q, ref := range qs {
		off, err := src.pc.OffsetForTimestamp(src.messageQueue(ref), farFuture)
		if err != nil {
			return nil, Unavailable(fmt.Errorf("topic %s queue %d: end offset: %w", s.topic, q, err))
		}
		out = binary.AppendVarint(out, max(off, 0))
	}
	return out, nil
}

// IDsSince calls fn with the ID (property RSQL_ID) of every message stored after pos (a
// Position of this topic) whose ID starts with prefix. It reads each queue from pos to the
// end the broker reports when asked (GET_MAX_OFFSET): a slow answer — a broker just started
// again — is waited for, never taken for the end.
func (s *RocketMQSink) IDsSince(ctx context.Context, pos []byte, prefix string, fn func(id string)) error {
	offs, err := decodePosition(pos)
	if err != nil {
		return fmt.Errorf("topic %s: %w", s.topic, err)
	}
	src, err := s.reader(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var buf []Message
	for q, from := range offs {
		if q >= s.n {
			continue
		}
		end, err := src.maxOffset(ctx, q)
		if err != nil {
			return err
		}
		if from >= end {
			continue
		}
		r, err := src.Open(ctx, strconv.Itoa(q), from)
		if err != nil {
			return err
		}
		for next := from; next < end; {
			buf, err = r.Read(ctx, buf[:0], 256)
			if err == nil && ctx.Err() != nil {
				err = Unavailable(fmt.Errorf("topic %s queue %d: reading offsets %d to %d for the ids written: %w", s.topic, q, next, end, ctx.Err()))
			}
			if err != nil {
				r.Close()
				return err
			}
			for i := range buf {
				if id := buf[i].ID; id != "" && strings.HasPrefix(id, prefix) {
					fn(id)
				}
				next = buf[i].Offset + 1
			}
		}
		r.Close()
	}
	return nil
}

// maxOffset asks the broker of queue q (split number) for its end: the offset the next
// message gets.
func (s *RocketMQSource) maxOffset(ctx context.Context, q int) (int64, error) {
	s.mu.Lock()
	qs := s.layout
	s.mu.Unlock()
	if q < 0 || q >= len(qs) {
		return 0, fmt.Errorf("topic %s has no queue %d (it has %d)", s.topic, q, len(qs))
	}
	route, err := fetchRoute(ctx, s.cfg.Credentials, s.cfg.NameServer, s.topic)
	if err != nil {
		return 0, err
	}
	addr := route.masterAddrs()[qs[q].broker]
	if addr == "" {
		return 0, Unavailable(fmt.Errorf("topic %s queue %d: broker %s has no route now", s.topic, q, qs[q].broker))
	}
	resp, err := rmqCall(ctx, s.cfg.Credentials, addr, reqGetMaxOffset, map[string]string{"topic": s.topic, "queueId": strconv.Itoa(qs[q].id)})
	if err != nil {
		return 0, Unavailable(fmt.Errorf("topic %s queue %d: end offset at %s: %w", s.topic, q, addr, err))
	}
	if resp.Code != respSuccess {
		return 0, Unavailable(fmt.Errorf("topic %s queue %d: end offset at %s: code %d: %s", s.topic, q, addr, resp.Code, resp.Remark))
	}
	return resp.ExtInt("offset")
}

// decodePosition reads a Position mark: the queue count, then each queue's offset (varints).
func decodePosition(pos []byte) ([]int64, error) {
	n, k := binary.Uvarint(pos)
	if k <= 0 || n > 1<<16 {
		return nil, errors.New("bad position mark: no queue count")
	}
	pos = pos[k:]
	offs := make([]int64, 0, n)
	for q := 0; q < int(n); q++ {
		off, k := binary.Varint(pos)
		if k <= 0 || off < 0 {
			return nil, fmt.Errorf("bad position mark: queue %d has no offset", q)
		}
		pos = pos[k:]
		offs = append(offs, off)
	}
	if len(pos) != 0 {
		return nil, fmt.Errorf("bad position mark: %d bytes after the last queue", len(pos))
	}
	return offs, nil
}

func (s *RocketMQSink) send(ctx context.Context, q int, batch []*primitive.Message) error {
	s.sel.queue, s.sel.err = s.layout[q], nil
	res, err := s.p.SendSync(ctx, batch...)
	if s.sel.err != nil {
		err = s.sel.err
	}
	if err == nil && res.Status != primitive.SendOK {
		// Stored, but not as durable as asked (a slave missing): sent again on retry.
		err = Unavailable(fmt.Errorf("send status %v", res.Status))
	}
	if err != nil {
		return sendError(fmt.Errorf("topic %s queue %d (broker %s queue %d): send %d messages: %w", s.topic, q, s.layout[q].broker, s.layout[q].id, len(batch), err))
	}
	return nil
}

// sendError marks a failed send ErrUnavailable unless the broker refused the messages
// themselves: MESSAGE_ILLEGAL (13, too large), INVALID_PARAMETER (29) or a code it does not
// support (3), which a retry would meet again. The client library reports a broker's refusal
// only as text ("CODE: 13, DESC: ..."); everything else — connections, timeouts, routes,
// SYSTEM_ERROR, SERVICE_NOT_AVAILABLE (a full disk), NO_PERMISSION (a slave standing in) —
// can pass.
func sendError(err error) error {
	msg := err.Error()
	for _, code := range []string{"13", "29", "3"} {
		if strings.Contains(msg, "CODE: "+code+",") || strings.Contains(msg, "CODE: "+code+" ") {
			return err
		}
	}
	return Unavailable(err)
}

// Flush is a no-op: Write returns after the broker acknowledged the sends, and the broker's
// flush policy decides when they reach its disk.
func (s *RocketMQSink) Flush(ctx context.Context) error { return nil }

// Close shuts the producer (and the reader Position/IDsSince use) down.
func (s *RocketMQSink) Close() error {
	s.rmu.Lock()
	src := s.src
	s.src = nil
	s.rmu.Unlock()
	var errs []error
	if src != nil {
		errs = append(errs, src.Close())
	}
	errs = append(errs, s.p.Shutdown())
	return errors.Join(errs...)
}
