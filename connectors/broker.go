package connectors

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rsql/broker"
)

// BrokerSource reads a topic of the bundled broker in the same process. Its splits are the
// topic's queues ("0", "1", ...); offsets are queue offsets. It never ends (unbounded),
// unless Snapshot bounded it.
type BrokerSource struct {
	b      *broker.Broker
	topic  string
	queues int
	// Wait is how long one Read waits for new messages before returning none (default 15s:
	// a new message ends the wait at once, and the runtime notices idleness and stops
	// readers without the reader returning, so a long wait costs no latency; a short one
	// costs an idle job's CPU, docs/benchmarks.md "Idle jobs").
	Wait time.Duration
	// until, when set (Snapshot), is each queue's end: the source is bounded and a split
	// ends there.
	until []int64
}

// Snapshot makes the source bounded: each queue is read up to the end it has now, then its
// split ends (a pull query's view of a topic).
func (s *BrokerSource) Snapshot() error {
	until := make([]int64, s.queues)
	for q := range until {
		end, err := s.b.MaxOffset(s.topic, q)
		if err != nil {
			return fmt.Errorf("topic %s queue %d: %w", s.topic, q, err)
		}
		until[q] = end
	}
	s.until = until
	return nil
}

// OpenBrokerSource opens topic, creating it with queues queues when it does not exist.
func OpenBrokerSource(b *broker.Broker, topic string, queues int) (*BrokerSource, error) {
	n, err := ensureTopic(b, topic, queues)
	if err != nil {
		return nil, err
	}
	return &BrokerSource{b: b, topic: topic, queues: n, Wait: 15 * time.Second}, nil
}

func ensureTopic(b *broker.Broker, topic string, queues int) (int, error) {
	if ti, ok := b.Topic(topic); ok {
		return ti.Queues, nil
	}
	if queues <= 0 {
		queues = 4
	}
	if err := b.CreateTopic(topic, queues); err != nil {
		return 0, fmt.Errorf("topic %s: %w", topic, err)
	}
	if ti, ok := b.Topic(topic); ok {
		return ti.Queues, nil
	}
	return queues, nil
}

func (s *BrokerSource) Splits(ctx context.Context) ([]string, error) {
	out := make([]string, s.queues)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out, nil
}

func (s *BrokerSource) Bounded() bool { return s.until != nil }
func (s *BrokerSource) Close() error  { return nil }

func (s *BrokerSource) Open(ctx context.Context, split string, offset int64) (SplitReader, error) {
	q, err := strconv.Atoi(split)
	if err != nil || q < 0 || q >= s.queues {
		return nil, fmt.Errorf("topic %s has no queue %q (it has %d)", s.topic, split, s.queues)
	}
	r := &brokerReader{s: s, queue: q, split: strconv.Itoa(q)}
	r.next.Store(offset)
	return r, nil
}

// brokerReader reads one queue. Read is called by one goroutine at a time; Lag may be
// called concurrently with it, so next is atomic.
type brokerReader struct {
	s     *BrokerSource
	queue int
	split string
	next  atomic.Int64
}

func (r *brokerReader) Read(ctx context.Context, buf []Message, max int) ([]Message, error) {
	from := r.next.Load()
	if r.s.until != nil {
		end := r.s.until[r.queue]
		if from >= end {
			return buf, ErrEndOfSplit
		}
		max = int(min(int64(max), end-from))
	}
	msgs, next, err := r.s.b.Pull(ctx, r.s.topic, r.queue, from, max, r.s.Wait)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return buf, err
		}
		return buf, fmt.Errorf("topic %s queue %d offset %d: %w", r.s.topic, r.queue, from, err)
	}
	for i := range msgs {
		m := &msgs[i]
		buf = append(buf, Message{Offset: m.QueueOffset, Key: []byte(m.Key), Body: m.Body, Timestamp: m.StoreTimestamp,
			ID: m.Properties[PropMessageID], Split: r.split, Err: m.BodyErr})
	}
	r.next.Store(next)
	return buf, nil
}

// Lag is how many messages the queue holds beyond what was read.
func (r *brokerReader) Lag() int64 {
	max, err := r.s.b.MaxOffset(r.s.topic, r.queue)
	if err != nil {
		return -1
	}
	return max - r.next.Load()
}

func (r *brokerReader) Close() error { return nil }

// BrokerSink appends to a topic of the bundled broker, choosing the queue by hash(key) mod
// queues (messages without a key rotate over the queues). Safe for concurrent use.
type BrokerSink struct {
	b      *broker.Broker
	topic  string
	queues int
	mu     sync.Mutex
	rr     int
	byQ    [][]broker.Message
}

// OpenBrokerSink opens topic for writing, creating it with queues queues if needed.
func OpenBrokerSink(b *broker.Broker, topic string, queues int) (*BrokerSink, error) {
	n, err := ensureTopic(b, topic, queues)
	if err != nil {
		return nil, err
	}
	return &BrokerSink{b: b, topic: topic, queues: n, byQ: make([][]broker.Message, n)}, nil
}

// QueueOf returns the queue a key goes to: fnv-1a(key) mod queues.
func QueueOf(key []byte, queues int) int {
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(queues))
}

// pickQueue is the sinks' queue choice: QueueOf(key) for a keyed message, otherwise the
// next queue in rotation (*rr advances).
func pickQueue(key []byte, queues int, rr *int) int {
	if len(key) > 0 {
		return QueueOf(key, queues)
	}
	q := *rr % queues
	*rr++
	return q
}

func (s *BrokerSink) Write(ctx context.Context, msgs []Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.byQ {
		s.byQ[i] = s.byQ[i][:0]
	}
	for _, m := range msgs {
		q := pickQueue(m.Key, s.queues, &s.rr)
		bm := brokerMessage(m)
		if m.ID != "" {
			bm.Properties = map[string]string{PropMessageID: m.ID}
		}
		s.byQ[q] = append(s.byQ[q], bm)
	}
	for q, batch := range s.byQ {
		if len(batch) == 0 {
			continue
		}
		if _, err := s.b.Append(s.topic, q, batch); err != nil {
			return fmt.Errorf("topic %s queue %d: %w", s.topic, q, err)
		}
	}
	return nil
}

// Queues is the number of queues of the topic.
func (s *BrokerSink) Queues() int { return s.queues }

// WriteQueue appends msgs to one queue, in order (shuffle topics choose queues themselves).
func (s *BrokerSink) WriteQueue(ctx context.Context, queue int, msgs []Message) error {
	if queue < 0 || queue >= s.queues {
		return fmt.Errorf("topic %s has no queue %d (it has %d)", s.topic, queue, s.queues)
	}
	batch := make([]broker.Message, len(msgs))
	for i, m := range msgs {
		batch[i] = brokerMessage(m)
	}
	if _, err := s.b.Append(s.topic, queue, batch); err != nil {
		return fmt.Errorf("topic %s queue %d: %w", s.topic, queue, err)
	}
	return nil
}

// brokerMessage converts m for Append. A body of broker.CompressThreshold bytes or more is
// stored zlib-compressed with the compressed flag, as RocketMQ's clients send it: every
// reader (in process, or any client over the protocol) gets it back inflated.
func brokerMessage(m Message) broker.Message {
	bm := broker.Message{Key: string(m.Key), Body: m.Body}
	if len(m.Body) >= broker.CompressThreshold {
		bm.Body = broker.CompressBody(nil, m.Body)
		bm.SysFlag = broker.SysFlagCompressed
	}
	return bm
}

// PropMessageID is the message property that holds connectors.Message.ID on the broker.
const PropMessageID = "RSQL_ID"

// Position returns a mark of the topic's current end (the next offset of every queue):
// every message written after the call is stored after it.
func (s *BrokerSink) Position(ctx context.Context) ([]byte, error) {
	var out []byte
	out = binary.AppendUvarint(out, uint64(s.queues))
	for q := 0; q < s.queues; q++ {
		m, err := s.b.MaxOffset(s.topic, q)
		if err != nil {
			return nil, fmt.Errorf("topic %s queue %d: %w", s.topic, q, err)
		}
		out = binary.AppendVarint(out, m)
	}
	return out, nil
}

// OriginPosition is the position before every message of a topic with queues queues (of
// BrokerSink and RocketMQSink): IDsSince from it reads the whole topic.
func OriginPosition(queues int) []byte {
	out := binary.AppendUvarint(nil, uint64(queues))
	for q := 0; q < queues; q++ {
		out = binary.AppendVarint(out, 0)
	}
	return out
}

// IDsSince calls fn with the ID (property RSQL_ID) of every message stored after pos (a
// Position of this topic) whose ID starts with prefix.
func (s *BrokerSink) IDsSince(ctx context.Context, pos []byte, prefix string, fn func(id string)) error {
	n, k := binary.Uvarint(pos)
	if k <= 0 || n > 1<<16 {
		return fmt.Errorf("topic %s: bad position mark", s.topic)
	}
	pos = pos[k:]
	for q := 0; q < int(n); q++ {
		from, k := binary.Varint(pos)
		if k <= 0 {
			return fmt.Errorf("topic %s: bad position mark", s.topic)
		}
		pos = pos[k:]
		if q >= s.queues {
			continue
		}
		end, err := s.b.MaxOffset(s.topic, q)
		if err != nil {
			return fmt.Errorf("topic %s queue %d: %w", s.topic, q, err)
		}
		for from < end {
			msgs, next, err := s.b.Pull(ctx, s.topic, q, from, 256, 0)
			if err != nil {
				return fmt.Errorf("topic %s queue %d offset %d: %w", s.topic, q, from, err)
			}
			for i := range msgs {
				if id := msgs[i].Properties[PropMessageID]; id != "" && strings.HasPrefix(id, prefix) {
					fn(id)
				}
			}
			if next <= from {
				break
			}
			from = next
		}
	}
	return nil
}

// Flush is a no-op: Append has already handed the messages to the broker, whose flush
// policy decides when they reach the disk.
func (s *BrokerSink) Flush(ctx context.Context) error { return nil }
func (s *BrokerSink) Close() error                    { return nil }
