package connectors

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
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
	// CreateTopics creates a missing topic (admin UPDATE_AND_CREATE_TOPIC) on every master
	// broker of the cluster, found from the name server's cluster info as RocketMQ's admin
	// tool does (mqadmin updateTopic -c); a topic's queue count is then per broker. When
	// false, a missing topic is an error.
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

// sortQueues orders a topic's queues by broker then queue id: split i (and the queue a key
// hashes to, QueueOf) is the i-th. With one broker, split i is queue id i.
func sortQueues(mqs []*primitive.MessageQueue) []*primitive.MessageQueue {
	out := append([]*primitive.MessageQueue(nil), mqs...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].BrokerName != out[j].BrokerName {
			return out[i].BrokerName < out[j].BrokerName
		}
		return out[i].QueueId < out[j].QueueId
	})
	return out
}

// ensureRocketMQTopic returns the topic's queues, creating the topic with queues queues on
// each master broker of the cluster (cfg.CreateTopics) when it has no route.
func ensureRocketMQTopic(ctx context.Context, cfg RocketMQConfig, topic string, queues int) ([]*primitive.MessageQueue, error) {
	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{cfg.NameServer})),
		admin.WithCredentials(cfg.clientCredentials()))
	if err != nil {
		return nil, fmt.Errorf("topic %s: admin client for name server %s: %w", topic, cfg.NameServer, err)
	}
	defer a.Close()
	mqs, err := a.FetchPublishMessageQueues(ctx, topic)
	if err == nil && len(mqs) > 0 {
		return sortQueues(mqs), nil
	}
	if !cfg.CreateTopics {
		if err == nil {
			err = errors.New("no queues")
		}
		return nil, fmt.Errorf("topic %s has no route at name server %s (create it first): %v", topic, cfg.NameServer, err)
	}
	masters, err := masterBrokers(ctx, cfg.Credentials, cfg.NameServer, cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("topic %s does not exist and cannot be created: %w", topic, err)
	}
	if queues <= 0 {
		queues = 4
	}
	for _, addr := range masters {
		if err := createTopicOn(ctx, cfg.Credentials, addr, topic, queues); err != nil {
			return nil, fmt.Errorf("topic %s: create on broker %s: %w", topic, addr, err)
		}
	}
	// The name server learns the route from the brokers; ask until it has every broker's.
	var last error
	for i := 0; i < 50; i++ {
		mqs, err := a.FetchPublishMessageQueues(ctx, topic)
		if err == nil && len(mqs) >= queues*len(masters) {
			return sortQueues(mqs), nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %s: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("topic %s was created on %v but has no full route at name server %s: %v", topic, masters, cfg.NameServer, last)
}

// RocketMQSource reads a topic over the RocketMQ protocol with rocketmq-client-go's pull
// consumer. Its splits are the topic's queues ("0", "1", ...; see sortQueues), offsets are
// queue offsets, and it never ends (unbounded). Safe for concurrent use; each SplitReader is
// used by one goroutine.
type RocketMQSource struct {
	cfg   RocketMQConfig
	topic string
	pc    rocketmq.PullConsumer

	mu  sync.Mutex
	mqs []*primitive.MessageQueue
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
		return nil, fmt.Errorf("topic %s: start the pull consumer at %s: %w", topic, cfg.NameServer, err)
	}
	s := &RocketMQSource{cfg: cfg, topic: topic, pc: pc}
	if _, err := s.Splits(ctx); err != nil {
		pc.Shutdown()
		return nil, err
	}
	return s, nil
}

func (s *RocketMQSource) queues() ([]*primitive.MessageQueue, error) {
	mqs, err := s.pc.GetTopicRouteInfo(s.topic)
	if err != nil {
		return nil, fmt.Errorf("topic %s: route at name server %s: %w", s.topic, s.cfg.NameServer, err)
	}
	if len(mqs) == 0 {
		return nil, fmt.Errorf("topic %s has no queues at name server %s", s.topic, s.cfg.NameServer)
	}
	return sortQueues(mqs), nil
}

// Splits lists the topic's queues as "0".."n-1".
func (s *RocketMQSource) Splits(ctx context.Context) ([]string, error) {
	mqs, err := s.queues()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.mqs = mqs
	s.mu.Unlock()
	out := make([]string, len(mqs))
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
	mqs := s.mqs
	s.mu.Unlock()
	q, err := strconv.Atoi(split)
	if err != nil || q < 0 || q >= len(mqs) {
		return nil, fmt.Errorf("topic %s has no queue %q (it has %d)", s.topic, split, len(mqs))
	}
	if offset < 0 {
		return nil, fmt.Errorf("topic %s queue %d: offset %d is negative", s.topic, q, offset)
	}
	mq := *mqs[q]
	r := &rocketMQReader{s: s, split: q, splitName: split, mq: &mq, next: offset, fetch: offset}
	r.maxSeen.Store(-1)
	return r, nil
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
	closed      bool
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
			r.pending = nil
		case <-timer.C:
			return buf, nil
		case <-ctx.Done():
			return buf, ctx.Err()
		}
		if out.at != r.fetch {
			continue // an answer for another offset; ask again
		}
		if out.err != nil {
			return buf, r.errorf("pull: %v", out.err)
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
			}
		case primitive.PullNoNewMsg:
			// The broker's long poll ended without data; wait on within this Read's time.
		case primitive.PullNoMsgMatched:
			if res.NextBeginOffset > r.fetch {
				r.fetch, r.next = res.NextBeginOffset, res.NextBeginOffset
			}
		case primitive.PullOffsetIllegal:
			if r.fetch < res.MinOffset {
				// Retention removed what was asked for: start at the oldest kept message.
				r.fetch, r.next = res.MinOffset, res.MinOffset
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
	if l := max - r.next; l > 0 {
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
	cfg   RocketMQConfig
	topic string
	p     rocketmq.Producer
	sel   *forcedQueueSelector
	n     int

	mu  sync.Mutex
	rr  int
	byQ [][]*primitive.Message

	rmu sync.Mutex
	src *RocketMQSource // opened on first Position/IDsSince
}

// forcedQueueSelector picks the queue of the batch being sent (set under the sink's lock).
type forcedQueueSelector struct {
	queue int // index into the sorted queues
	err   error
}

func (f *forcedQueueSelector) Select(_ *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	sorted := sortQueues(mqs)
	if f.queue < len(sorted) {
		return sorted[f.queue]
	}
	f.err = fmt.Errorf("the producer sees %d queues, fewer than the %d the sink partitions over", len(sorted), f.queue+1)
	return sorted[f.queue%len(sorted)]
}

// OpenRocketMQSink opens topic for writing, creating it with queues queues (cfg.CreateTopics)
// when it does not exist.
func OpenRocketMQSink(ctx context.Context, cfg RocketMQConfig, topic string, queues int) (*RocketMQSink, error) {
	cfg = cfg.withDefaults()
	mqs, err := ensureRocketMQTopic(ctx, cfg, topic, queues)
	if err != nil {
		return nil, err
	}
	sel := &forcedQueueSelector{}
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{cfg.NameServer})),
		producer.WithGroupName(cfg.Group), producer.WithInstanceName(instanceName("sink")),
		producer.WithQueueSelector(sel), producer.WithRetry(2), producer.WithSendMsgTimeout(cfg.SendTimeout),
		producer.WithCredentials(cfg.clientCredentials()))
	if err != nil {
		return nil, fmt.Errorf("topic %s: producer: %w", topic, err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("topic %s: start the producer at %s: %w", topic, cfg.NameServer, err)
	}
	return &RocketMQSink{cfg: cfg, topic: topic, p: p, sel: sel, n: len(mqs), byQ: make([][]*primitive.Message, len(mqs))}, nil
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
	mqs := src.mqs
	src.mu.Unlock()
	if len(mqs) != s.n {
		return nil, fmt.Errorf("topic %s: the source sees %d queues, the sink %d", s.topic, len(mqs), s.n)
	}
	out := binary.AppendUvarint(nil, uint64(s.n))
	for q, mq := range mqs {
		m := *mq
		off, err := src.pc.OffsetForTimestamp(&m, farFuture)
		if err != nil {
			return nil, fmt.Errorf("topic %s queue %d: end offset: %w", s.topic, q, err)
		}
		out = binary.AppendVarint(out, max(off, 0))
	}
	return out, nil
}

// IDsSince calls fn with the ID (property RSQL_ID) of every message stored after pos (a
// Position of this topic) whose ID starts with prefix. It reads each queue from pos until a
// read finds nothing within the source's wait.
func (s *RocketMQSink) IDsSince(ctx context.Context, pos []byte, prefix string, fn func(id string)) error {
	offs, err := decodePosition(pos)
	if err != nil {
		return fmt.Errorf("topic %s: %w", s.topic, err)
	}
	src, err := s.reader(ctx)
	if err != nil {
		return err
	}
	var buf []Message
	for q, from := range offs {
		if q >= s.n {
			continue
		}
		r, err := src.Open(ctx, strconv.Itoa(q), from)
		if err != nil {
			return err
		}
		for {
			buf, err = r.Read(ctx, buf[:0], 256)
			if err != nil {
				r.Close()
				return err
			}
			if len(buf) == 0 {
				break
			}
			for i := range buf {
				if id := buf[i].ID; id != "" && strings.HasPrefix(id, prefix) {
					fn(id)
				}
			}
		}
		r.Close()
	}
	return nil
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
	s.sel.queue, s.sel.err = q, nil
	res, err := s.p.SendSync(ctx, batch...)
	if err == nil && s.sel.err != nil {
		err = s.sel.err
	}
	if err == nil && res.Status != primitive.SendOK {
		err = fmt.Errorf("send status %v", res.Status)
	}
	if err != nil {
		return fmt.Errorf("topic %s queue %d: send %d messages: %w", s.topic, q, len(batch), err)
	}
	return nil
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
