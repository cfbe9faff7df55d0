package tests

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

type ack struct {
	queue  int
	offset int64
}

// TestBrokerKill9SyncFlush: with --flush sync, kill -9 the broker while producers send,
// restart it, and check every acknowledged message is at its acknowledged place, no queue
// holds a message twice, and queue offsets are dense.
func TestBrokerKill9SyncFlush(t *testing.T) {
	b := startBroker(t, "--flush", "sync")
	createTopic(t, b, "durable", 4)
	var mu sync.Mutex
	acked := map[string]ack{}
	var seq atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		p := newProducer(t, b, producer.WithRetry(0), producer.WithSendMsgTimeout(3*time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				body := fmt.Sprintf("d-%d", seq.Add(1))
				r, err := p.SendSync(context.Background(), primitive.NewMessage("durable", []byte(body)))
				if err != nil {
					return
				}
				mu.Lock()
				acked[body] = ack{r.MessageQueue.QueueId, r.QueueOffset}
				mu.Unlock()
			}
		}()
	}
	waitFor(30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 3000 })
	b.killAndRestart()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 3000 {
		t.Fatalf("only %d sends were acknowledged before the kill", len(acked))
	}
	pc := newPullConsumer(t, b, "durable-check")
	if err := pc.Subscribe("durable", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	found := map[string]ack{}
	for _, mq := range queuesOf(t, b, "durable") {
		msgs := pullQueue(t, pc, mq)
		for i, m := range msgs {
			if m.QueueOffset != int64(i) {
				t.Fatalf("queue %d: message %d has offset %d (offsets not dense)", mq.QueueId, i, m.QueueOffset)
			}
			if prev, dup := found[string(m.Body)]; dup && prev.queue == mq.QueueId {
				t.Fatalf("queue %d holds %s twice", mq.QueueId, m.Body)
			}
			found[string(m.Body)] = ack{mq.QueueId, m.QueueOffset}
		}
	}
	for body, a := range acked {
		if got, ok := found[body]; !ok || got != a {
			t.Fatalf("acknowledged %s at %+v; after restart found %+v (present %v)", body, a, got, ok)
		}
	}
	t.Logf("%d acknowledged, %d stored after kill -9 and restart", len(acked), len(found))
}
