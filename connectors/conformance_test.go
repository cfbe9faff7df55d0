package connectors

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"rsql/broker"
)

// quietRocketMQ drops rocketmq-client-go's logs in tests.
type quietRocketMQ struct{}

func (quietRocketMQ) Debug(string, map[string]interface{})   {}
func (quietRocketMQ) Info(string, map[string]interface{})    {}
func (quietRocketMQ) Warning(string, map[string]interface{}) {}
func (quietRocketMQ) Error(string, map[string]interface{})   {}
func (quietRocketMQ) Fatal(string, map[string]interface{})   {}
func (quietRocketMQ) Level(string)                           {}
func (quietRocketMQ) OutputPath(string) error                { return nil }

func init() { rlog.SetLogger(quietRocketMQ{}) }

// topicPath is one way of reaching a topic of the bundled broker: in process, or over the
// RocketMQ protocol. open returns a source and a sink over the same topic.
type topicPath struct {
	name string
	open func(t *testing.T, b *broker.Broker, topic string, queues int) (Source, Sink)
}

func inProcessPath() topicPath {
	return topicPath{name: "in-process", open: func(t *testing.T, b *broker.Broker, topic string, queues int) (Source, Sink) {
		sink, err := OpenBrokerSink(b, topic, queues)
		if err != nil {
			t.Fatal(err)
		}
		src, err := OpenBrokerSource(b, topic, queues)
		if err != nil {
			t.Fatal(err)
		}
		// drainSplit ends at the first empty read: a short wait keeps the tests quick (and
		// within the transaction timeouts TestTxWriter sets).
		src.Wait = 50 * time.Millisecond
		return src, sink
	}}
}

func rocketMQPath() topicPath {
	return topicPath{name: "rocketmq", open: func(t *testing.T, b *broker.Broker, topic string, queues int) (Source, Sink) {
		ns, _ := b.Addrs()
		cfg := RocketMQConfig{NameServer: ns, CreateTopics: true, Group: "conformance"}
		ctx := context.Background()
		// The sink creates the topic through the admin API, on the master broker the name
		// server's cluster info names; the source finds its route.
		sink, err := OpenRocketMQSink(ctx, cfg, topic, queues)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sink.Close() })
		src, err := OpenRocketMQSource(ctx, cfg, topic, queues)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		return src, sink
	}}
}

// TestConformance runs one body against both ways of reaching the bundled broker.
func TestConformance(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: filepath.Join(t.TempDir(), "broker"), SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []topicPath{inProcessPath(), rocketMQPath()} {
		t.Run(p.name, func(t *testing.T) { conformance(t, b, p) })
	}
}

// drainSplit reads split from offset until a Read returns nothing (the queue is drained).
func drainSplit(t *testing.T, src Source, split string, offset int64, max int) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := src.Open(ctx, split, offset)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []Message
	for {
		n := len(out)
		out, err = r.Read(ctx, out, max)
		if err != nil {
			t.Fatalf("split %s: %v", split, err)
		}
		if len(out) == n {
			return out
		}
		for _, m := range out[n:] {
			if m.Split != split {
				t.Fatalf("split %s: message at offset %d says it is of split %q", split, m.Offset, m.Split)
			}
		}
	}
}

func conformance(t *testing.T, b *broker.Broker, p topicPath) {
	const queues = 4
	topic := "conf-" + p.name
	src, sink := p.open(t, b, topic, queues)
	ctx := context.Background()

	// Splits are the queues.
	splits, err := src.Splits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0", "1", "2", "3"}; !reflect.DeepEqual(splits, want) {
		t.Fatalf("splits = %v, want %v", splits, want)
	}
	if src.Bounded() {
		t.Fatal("a topic source must be unbounded")
	}

	// Keyed writes, in two Write calls, in a known order per key.
	type rec struct{ key, body string }
	var written []rec
	var batch []Message
	for i := 0; i < 300; i++ {
		key := "user-" + strconv.Itoa(i%37)
		body := fmt.Sprintf(`{"user":%q,"seq":%d}`, key, i)
		written = append(written, rec{key, body})
		batch = append(batch, Message{Key: []byte(key), Body: []byte(body)})
		if i == 149 || i == 299 {
			if err := sink.Write(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Expected content of each queue, computed from the partitioning rule alone.
	wantQ := make([][]rec, queues)
	for _, w := range written {
		q := QueueOf([]byte(w.key), queues)
		wantQ[q] = append(wantQ[q], w)
	}
	// What the broker holds, checked without the connector under test.
	for q := 0; q < queues; q++ {
		max, err := b.MaxOffset(topic, q)
		if err != nil {
			t.Fatal(err)
		}
		if max != int64(len(wantQ[q])) {
			t.Fatalf("broker queue %d holds %d messages, want %d", q, max, len(wantQ[q]))
		}
	}

	full := make([][]Message, queues)
	for q := 0; q < queues; q++ {
		got := drainSplit(t, src, strconv.Itoa(q), 0, 16)
		full[q] = got
		if len(got) != len(wantQ[q]) {
			t.Fatalf("queue %d: read %d messages, want %d", q, len(got), len(wantQ[q]))
		}
		for i, m := range got {
			if m.Offset != int64(i) {
				t.Fatalf("queue %d: message %d has offset %d", q, i, m.Offset)
			}
			if string(m.Key) != wantQ[q][i].key || string(m.Body) != wantQ[q][i].body {
				t.Fatalf("queue %d offset %d: got key %q body %s, want key %q body %s", q, i, m.Key, m.Body, wantQ[q][i].key, wantQ[q][i].body)
			}
			if m.Timestamp <= 0 {
				t.Fatalf("queue %d offset %d: no store timestamp", q, i)
			}
		}
	}

	// Reading from an offset gives exactly the tail of the full read.
	q0 := "0"
	from := int64(len(full[0]) / 3)
	tail := drainSplit(t, src, q0, from, 7)
	if !sameMessages(tail, full[0][from:]) {
		t.Fatalf("read from offset %d differs from the full read's tail", from)
	}

	// Resume: read part with one reader, then a new reader from the next offset.
	r, err := src.Open(ctx, "1", 0)
	if err != nil {
		t.Fatal(err)
	}
	part, err := r.Read(ctx, nil, 5)
	if err != nil || len(part) == 0 || len(part) > 5 {
		t.Fatalf("first read: %d messages, %v (want 1..5)", len(part), err)
	}
	// Lag is what the queue holds beyond what was read.
	lagger, ok := r.(interface{ Lag() int64 })
	if !ok {
		t.Fatal("split reader has no Lag")
	}
	if got, want := lagger.Lag(), int64(len(full[1])-len(part)); got != want {
		t.Fatalf("lag after reading %d of %d = %d, want %d", len(part), len(full[1]), got, want)
	}
	r.Close()
	next := part[len(part)-1].Offset + 1
	rest := drainSplit(t, src, "1", next, 64)
	if !sameMessages(append(part, rest...), full[1]) {
		t.Fatalf("resuming at offset %d did not give the rest of the queue exactly", next)
	}

	// Bounded wait: a drained queue's Read returns nothing and no error, then picks up a
	// message written later.
	q := QueueOf([]byte("late-key"), queues)
	r, err = src.Open(ctx, strconv.Itoa(q), int64(len(full[q])))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got, err := r.Read(rctx, nil, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("read of a drained queue: %d messages, %v; want none and no error", len(got), err)
	}
	if rctx.Err() != nil {
		t.Fatal("read of a drained queue did not return within its wait")
	}
	if err := sink.Write(ctx, []Message{{Key: []byte("late-key"), Body: []byte(`{"late":true}`)}}); err != nil {
		t.Fatal(err)
	}
	for len(got) == 0 && rctx.Err() == nil {
		if got, err = r.Read(rctx, got, 10); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1 || string(got[0].Body) != `{"late":true}` || got[0].Offset != int64(len(full[q])) {
		t.Fatalf("after the late write: got %+v", got)
	}
	if l := r.(interface{ Lag() int64 }).Lag(); l != 0 {
		t.Fatalf("lag at the end of the queue = %d, want 0", l)
	}

	// Errors name the topic and the queue.
	if _, err := src.Open(ctx, "9", 0); err == nil || !strings.Contains(err.Error(), topic) || !strings.Contains(err.Error(), `"9"`) {
		t.Fatalf("opening queue 9: %v; want an error naming topic %s and queue 9", err, topic)
	}
	if _, err := src.Open(ctx, "x", 0); err == nil || !strings.Contains(err.Error(), topic) {
		t.Fatalf("opening split x: %v; want an error naming topic %s", err, topic)
	}
	beyond, err := src.Open(ctx, "2", int64(len(full[2])+100))
	if err != nil {
		t.Fatal(err)
	}
	defer beyond.Close()
	_, err = beyond.Read(rctx, nil, 10)
	for err == nil && rctx.Err() == nil {
		_, err = beyond.Read(rctx, nil, 10)
	}
	if err == nil || !strings.Contains(err.Error(), "topic "+topic) || !strings.Contains(err.Error(), "queue 2") {
		t.Fatalf("reading beyond the end: %v; want an error naming topic %s and queue 2", err, topic)
	}

	conformanceDedup(t, b, topic, sink)

	// Unkeyed messages rotate over the queues: every queue gets some.
	before := make([]int64, queues)
	for i := range before {
		before[i], _ = b.MaxOffset(topic, i)
	}
	var unkeyed []Message
	for i := 0; i < 4*queues; i++ {
		unkeyed = append(unkeyed, Message{Body: []byte(strconv.Itoa(i))})
	}
	if err := sink.Write(ctx, unkeyed); err != nil {
		t.Fatal(err)
	}
	for i := range before {
		after, _ := b.MaxOffset(topic, i)
		if after-before[i] != 4 {
			t.Fatalf("queue %d got %d of %d unkeyed messages, want an even spread", i, after-before[i], len(unkeyed))
		}
	}
}

// dedupSink is what exactly-once writers need of a sink (exec.DedupSink) plus the queue
// writes of shuffle topics.
type dedupSink interface {
	Position(ctx context.Context) ([]byte, error)
	IDsSince(ctx context.Context, pos []byte, prefix string, fn func(id string)) error
	WriteQueue(ctx context.Context, queue int, msgs []Message) error
	Queues() int
}

func conformanceDedup(t *testing.T, b *broker.Broker, topic string, sink Sink) {
	ctx := context.Background()
	ds, ok := sink.(dedupSink)
	if !ok {
		t.Fatalf("%T lacks Position/IDsSince/WriteQueue/Queues", sink)
	}
	if ds.Queues() != 4 {
		t.Fatalf("Queues() = %d, want 4", ds.Queues())
	}
	pos, err := ds.Position(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	want := map[string]bool{}
	for i := 0; i < 40; i++ {
		m := Message{Key: []byte("k" + strconv.Itoa(i%7)), Body: []byte(strconv.Itoa(i))}
		switch i % 4 {
		case 0, 1:
			m.ID = "job-3/7/" + strconv.Itoa(i)
			want[m.ID] = true
		case 2:
			m.ID = "job-3/8/" + strconv.Itoa(i)
		}
		msgs = append(msgs, m)
	}
	if err := sink.Write(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	if err := ds.IDsSince(ctx, pos, "job-3/7/", func(id string) {
		if got[id] {
			t.Errorf("id %s reported twice", id)
		}
		got[id] = true
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("IDsSince found %d ids, want %d: %v", len(got), len(want), got)
	}
	// A position taken now sees none of them.
	pos, err = ds.Position(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := ds.IDsSince(ctx, pos, "job-3/", func(string) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("IDsSince from the end found %d ids", n)
	}
	if err := ds.IDsSince(ctx, []byte{0xff}, "job-3/", func(string) {}); err == nil || !strings.Contains(err.Error(), topic) {
		t.Fatalf("IDsSince of a bad mark: %v; want an error naming topic %s", err, topic)
	}

	// WriteQueue puts messages in the queue asked for, whatever their keys.
	before, _ := b.MaxOffset(topic, 2)
	if err := ds.WriteQueue(ctx, 2, []Message{{Key: []byte("a"), Body: []byte("1")}, {Key: []byte("b"), Body: []byte("2")}, {Body: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	after, _ := b.MaxOffset(topic, 2)
	if after-before != 3 {
		t.Fatalf("WriteQueue(2) of 3 messages grew queue 2 by %d", after-before)
	}
	msgs2, _, err := b.Pull(ctx, topic, 2, before, 10, 0)
	if err != nil || len(msgs2) != 3 || string(msgs2[0].Body) != "1" || string(msgs2[2].Body) != "3" {
		t.Fatalf("queue 2 after WriteQueue: %d messages, %v", len(msgs2), err)
	}
	if err := ds.WriteQueue(ctx, 9, []Message{{Body: []byte("x")}}); err == nil || !strings.Contains(err.Error(), topic) || !strings.Contains(err.Error(), "9") {
		t.Fatalf("WriteQueue(9): %v; want an error naming topic %s and queue 9", err, topic)
	}
}

func sameMessages(a, b []Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Offset != b[i].Offset || string(a[i].Key) != string(b[i].Key) || string(a[i].Body) != string(b[i].Body) {
			return false
		}
	}
	return true
}

// TestRocketMQMissingTopic: without a broker address a missing topic is an error naming it.
func TestRocketMQMissingTopic(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: filepath.Join(t.TempDir(), "broker"), SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ns, _ := b.Addrs()
	ctx := context.Background()
	_, err = OpenRocketMQSource(ctx, RocketMQConfig{NameServer: ns}, "no-such-topic", 4)
	if err == nil || !strings.Contains(err.Error(), "no-such-topic") {
		t.Fatalf("source over a missing topic: %v; want an error naming it", err)
	}
	_, err = OpenRocketMQSink(ctx, RocketMQConfig{NameServer: ns}, "no-such-topic", 4)
	if err == nil || !strings.Contains(err.Error(), "no-such-topic") {
		t.Fatalf("sink over a missing topic: %v; want an error naming it", err)
	}
}
