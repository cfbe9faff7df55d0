package tests

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
)

// deliveries records which consumer received which message body, and how often.
type deliveries struct {
	mu     sync.Mutex
	by     map[string][]int // body -> consumer indexes, one per delivery
	queue  map[string]int   // body -> queue id
	unique atomic.Int64
}

func newDeliveries() *deliveries { return &deliveries{by: map[string][]int{}, queue: map[string]int{}} }

func (d *deliveries) handler(idx int) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, m := range msgs {
			b := string(m.Body)
			if len(d.by[b]) == 0 {
				d.unique.Add(1)
			}
			d.by[b] = append(d.by[b], idx)
			d.queue[b] = m.Queue.QueueId
		}
		return consumer.ConsumeSuccess, nil
	}
}

// produceBodies sends bodies prefix-from..prefix-(to-1) in batches of 100, round-robin over queues.
func produceBodies(t *testing.T, p rocketmq.Producer, topic, prefix string, from, to int) {
	t.Helper()
	for i := from; i < to; {
		var batch []*primitive.Message
		for j := 0; j < 100 && i < to; j++ {
			batch = append(batch, primitive.NewMessage(topic, []byte(prefix+strconv.Itoa(i))))
			i++
		}
		if _, err := p.SendSync(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
	}
}

func startConsumers(t *testing.T, b *rsqlBroker, group, topic string, n int, d *deliveries, sel consumer.MessageSelector) []rocketmq.PushConsumer {
	t.Helper()
	var cs []rocketmq.PushConsumer
	for i := 0; i < n; i++ {
		c := newPushConsumer(t, b, group, consumer.WithPullBatchSize(64), consumer.WithConsumeMessageBatchMaxSize(64))
		if err := c.Subscribe(topic, sel, d.handler(i)); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Shutdown() })
		cs = append(cs, c)
	}
	return cs
}

// TestBrokerClusteringExactlyOnce: 3 consumers of one group on an 8-queue topic receive each
// of 100,000 messages exactly once between them, and each consumer gets a share.
func TestBrokerClusteringExactlyOnce(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "cluster8", 8)
	d := newDeliveries()
	startConsumers(t, b, "g-cluster", "cluster8", 3, d, consumer.MessageSelector{})
	// Let the group settle (membership changes trigger immediate rebalances).
	time.Sleep(2 * time.Second)
	p := newProducer(t, b)
	const n = 100000
	produceBodies(t, p, "cluster8", "m", 0, n)
	if !waitFor(90*time.Second, func() bool { return d.unique.Load() == n }) {
		t.Fatalf("received %d distinct messages of %d", d.unique.Load(), n)
	}
	time.Sleep(500 * time.Millisecond) // let any duplicate show up
	d.mu.Lock()
	defer d.mu.Unlock()
	share := map[int]int{}
	for body, who := range d.by {
		if len(who) != 1 {
			t.Fatalf("%s delivered %d times (to consumers %v)", body, len(who), who)
		}
		share[who[0]]++
	}
	if len(share) != 3 {
		t.Fatalf("messages went to %d consumers, want 3: %v", len(share), share)
	}
}

// TestBrokerConsumerFailover: when a consumer stops, its queues move to the others, which
// resume from the committed offsets; nothing is lost, the stopped consumer gets nothing more,
// and redeliveries happen only on queues that changed owner.
func TestBrokerConsumerFailover(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "failover8", 8)
	d := newDeliveries()
	cs := startConsumers(t, b, "g-failover", "failover8", 3, d, consumer.MessageSelector{})
	time.Sleep(2 * time.Second)
	p := newProducer(t, b)
	produceBodies(t, p, "failover8", "a", 0, 5000)
	if !waitFor(60*time.Second, func() bool { return d.unique.Load() == 5000 }) {
		t.Fatalf("phase 1: received %d of 5000", d.unique.Load())
	}
	if err := cs[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	produceBodies(t, p, "failover8", "b", 0, 5000)
	if !waitFor(60*time.Second, func() bool { return d.unique.Load() == 10000 }) {
		t.Fatalf("phase 2: received %d of 10000 after a consumer stopped", d.unique.Load())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	afterStop := 0
	for i := 0; i < 5000; i++ {
		who := d.by["b"+strconv.Itoa(i)]
		for _, w := range who {
			if w == 2 {
				afterStop++
			}
		}
	}
	if afterStop != 0 {
		t.Fatalf("the stopped consumer received %d messages after it stopped", afterStop)
	}
	// A redelivery is only allowed for a queue that changed owner (at-least-once while a
	// rebalance hands a queue over).
	owners := map[int]map[int]bool{}
	for body, who := range d.by {
		q := d.queue[body]
		if owners[q] == nil {
			owners[q] = map[int]bool{}
		}
		for _, w := range who {
			owners[q][w] = true
		}
	}
	for body, who := range d.by {
		if len(who) > 1 && len(owners[d.queue[body]]) < 2 {
			t.Fatalf("%s delivered %d times from queue %d, which never changed owner", body, len(who), d.queue[body])
		}
	}
}

// TestBrokerTagSubscription: a consumer subscribed to "A || C" gets exactly those tags.
func TestBrokerTagSubscription(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "tagged", 4)
	p := newProducer(t, b)
	want := map[string]bool{}
	for i := 0; i < 300; i++ {
		tag := []string{"A", "B", "C"}[i%3]
		m := primitive.NewMessage("tagged", []byte(fmt.Sprintf("%s-%d", tag, i)))
		m.WithTag(tag)
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		if tag != "B" {
			want[string(m.Body)] = true
		}
	}
	var mu sync.Mutex
	got := map[string]string{}
	c := newPushConsumer(t, b, "g-tags")
	err := c.Subscribe("tagged", consumer.MessageSelector{Type: consumer.TAG, Expression: "A || C"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				got[string(m.Body)] = m.GetTags()
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	waitFor(60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= len(want) })
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("received %d messages, want %d", len(got), len(want))
	}
	for body, tag := range got {
		if !want[body] || tag == "B" {
			t.Fatalf("unexpected %s with tag %s", body, tag)
		}
	}
}

// TestBrokerRetryAndDLQ: ConsumeRetryLater redelivers through %RETRY%<group> with the
// reconsume count rising, and after the maximum the message lands in %DLQ%<group>.
func TestBrokerRetryAndDLQ(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "retried", 1)
	p := newProducer(t, b)
	m := primitive.NewMessage("retried", []byte("poison"))
	m.WithTag("T1")
	m.WithProperty("k", "v")
	sr, err := p.SendSync(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var times []int32
	c := newPushConsumer(t, b, "g-retry", consumer.WithMaxReconsumeTimes(2))
	err = c.Subscribe("retried", consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if string(m.Body) != "poison" || m.Topic != "retried" || m.GetTags() != "T1" || m.GetProperty("k") != "v" {
				t.Errorf("redelivered message changed: %v", m)
			}
			times = append(times, m.ReconsumeTimes)
		}
		if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
			cc.DelayLevelWhenNextConsume = 1 // 1 s instead of 10 s
		}
		return consumer.ConsumeRetryLater, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	var dlq []*primitive.MessageExt
	// The DLQ topic appears with the first dead letter, which the consumer sends back after
	// its third delivery returns; a consumer started before the topic has a route fails and
	// stays failed, so each attempt takes a new one.
	var d rocketmq.PushConsumer
	if !waitFor(60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(times) >= 3
	}) {
		t.Fatalf("deliveries %v, want 3", times)
	}
	var dmu sync.Mutex
	if !waitFor(30*time.Second, func() bool {
		c := newPushConsumer(t, b, "g-dlq-reader")
		if c.Subscribe("%DLQ%g-retry", consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			dmu.Lock()
			defer dmu.Unlock()
			dlq = append(dlq, msgs...)
			return consumer.ConsumeSuccess, nil
		}) != nil {
			return false
		}
		if c.Start() != nil {
			c.Shutdown()
			return false
		}
		d = c
		return true
	}) {
		t.Fatal("cannot consume the DLQ topic")
	}
	defer d.Shutdown()
	waitFor(60*time.Second, func() bool { dmu.Lock(); defer dmu.Unlock(); return len(dlq) > 0 })
	time.Sleep(1500 * time.Millisecond) // a fourth delivery would show up by now
	mu.Lock()
	defer mu.Unlock()
	if len(times) != 3 || times[0] != 0 || times[1] != 1 || times[2] != 2 {
		t.Fatalf("reconsume times of the deliveries %v, want [0 1 2]", times)
	}
	dmu.Lock()
	defer dmu.Unlock()
	if len(dlq) != 1 || string(dlq[0].Body) != "poison" || dlq[0].ReconsumeTimes != 3 ||
		dlq[0].GetProperty("RETRY_TOPIC") != "retried" || dlq[0].GetProperty("ORIGIN_MESSAGE_ID") == "" {
		t.Fatalf("DLQ holds %v", dlq)
	}
	_ = sr
}
