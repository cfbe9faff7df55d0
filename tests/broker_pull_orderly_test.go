package tests

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestBrokerPullConsumerPoll: the pull consumer (Poll/ACK, with rebalance and offsets) reads
// every message once.
func TestBrokerPullConsumerPoll(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "pulled", 4)
	p := newProducer(t, b)
	produceBodies(t, p, "pulled", "p", 0, 1000)
	pc := newPullConsumer(t, b, "g-poll")
	if err := pc.Subscribe("pulled", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	got := map[string]int{}
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < 1000 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cr, err := pc.Poll(ctx, 2*time.Second)
		cancel()
		if err != nil {
			if consumer.IsNoNewMsgError(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, m := range cr.GetMsgList() {
			got[string(m.Body)]++
		}
		pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
	if len(got) != 1000 {
		t.Fatalf("polled %d distinct messages, want 1000", len(got))
	}
	for b, n := range got {
		if n != 1 {
			t.Fatalf("%s polled %d times", b, n)
		}
	}
}

// TestBrokerOrderlyConsumers: two orderly consumers of one group see each key's messages in
// send order, and no queue is ever consumed by both at once. The Go client keeps the locks
// of queues a rebalance takes from it, so a short lock expiry lets them move within one
// rebalance period instead of a minute.
func TestBrokerOrderlyConsumers(t *testing.T) {
	b := startBroker(t, "--lock-expiry", "2s")
	createTopic(t, b, "ordered", 4)
	var mu sync.Mutex
	last := map[string]int{}     // key -> last sequence number seen
	inFlight := map[int]string{} // queue -> consumer currently inside the handler
	count := 0
	var failures []string
	handler := func(name string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			q := msgs[0].Queue.QueueId
			mu.Lock()
			if other, busy := inFlight[q]; busy {
				failures = append(failures, fmt.Sprintf("queue %d consumed by %s and %s at once", q, other, name))
			}
			inFlight[q] = name
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			delete(inFlight, q)
			for _, m := range msgs {
				key, seqS, _ := strings.Cut(string(m.Body), "/")
				seq, _ := strconv.Atoi(seqS)
				if prev, ok := last[key]; ok && seq <= prev {
					failures = append(failures, fmt.Sprintf("key %s: %d after %d", key, seq, prev))
				}
				last[key] = seq
				count++
			}
			return consumer.ConsumeSuccess, nil
		}
	}
	for i := 0; i < 2; i++ {
		c := newPushConsumer(t, b, "g-orderly", consumer.WithConsumerOrder(true), consumer.WithConsumeMessageBatchMaxSize(8))
		if err := c.Subscribe("ordered", consumer.MessageSelector{}, handler(fmt.Sprint("c", i))); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Shutdown()
	}
	time.Sleep(2 * time.Second)
	p := newProducer(t, b, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	const keys, per = 16, 100
	for s := 0; s < per; s++ {
		for k := 0; k < keys; k++ {
			m := primitive.NewMessage("ordered", []byte(fmt.Sprintf("k%d/%d", k, s)))
			m.WithShardingKey(fmt.Sprint("k", k))
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !waitFor(90*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return count >= keys*per }) {
		t.Fatalf("consumed %d of %d", count, keys*per)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d order/lock violations, first: %s", len(failures), failures[0])
	}
	for k := 0; k < keys; k++ {
		if last[fmt.Sprint("k", k)] != per-1 {
			t.Fatalf("key k%d ended at %d", k, last[fmt.Sprint("k", k)])
		}
	}
}
