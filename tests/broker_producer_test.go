package tests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// sent is what a producer was told about one message.
type sent struct {
	tag, keys, prop string
	queue           int
	offset          int64 // -1 when unknown (one-way)
	offsetMsgID     string
}

// TestBrokerProducerSends sends with every producer mode to a topic that does not exist yet,
// then reads the topic back with the pull consumer and checks each message.
func TestBrokerProducerSends(t *testing.T) {
	b := startBroker(t)
	p := newProducer(t, b)
	topic := "produce-modes"
	ctx := context.Background()
	want := map[string]*sent{} // body -> expectation
	var mu sync.Mutex
	mk := func(body string, i int) *primitive.Message {
		m := primitive.NewMessage(topic, []byte(body))
		m.WithTag(fmt.Sprintf("tag%d", i%3))
		m.WithKeys([]string{fmt.Sprintf("key%d", i), "second"})
		m.WithProperty("custom", fmt.Sprintf("v-%d-é", i))
		mu.Lock()
		want[body] = &sent{tag: fmt.Sprintf("tag%d", i%3), keys: fmt.Sprintf("key%d second", i), prop: fmt.Sprintf("v-%d-é", i), offset: -1}
		mu.Unlock()
		return m
	}
	record := func(body string, r *primitive.SendResult, idx int) {
		mu.Lock()
		defer mu.Unlock()
		w := want[body]
		w.queue = r.MessageQueue.QueueId
		w.offset = r.QueueOffset + int64(idx)
		w.offsetMsgID = strings.Split(r.OffsetMsgID, ",")[idx]
	}
	// Sync (the first send auto-creates the topic).
	for i := 0; i < 20; i++ {
		body := fmt.Sprintf("sync-%d", i)
		r, err := p.SendSync(ctx, mk(body, i))
		if err != nil || r.Status != primitive.SendOK {
			t.Fatalf("sync send %d: %v %v", i, r, err)
		}
		record(body, r, 0)
	}
	// Async.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		body := fmt.Sprintf("async-%d", i)
		wg.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			if err != nil {
				errs <- err
				return
			}
			record(body, r, 0)
		}, mk(body, i))
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("async send: %v", err)
	}
	// One-way.
	for i := 0; i < 20; i++ {
		if err := p.SendOneWay(ctx, mk(fmt.Sprintf("oneway-%d", i), i)); err != nil {
			t.Fatal(err)
		}
	}
	// Batch: consecutive offsets in one queue.
	var batch []*primitive.Message
	for i := 0; i < 20; i++ {
		batch = append(batch, mk(fmt.Sprintf("batch-%d", i), i))
	}
	r, err := p.SendSync(ctx, batch...)
	if err != nil || r.Status != primitive.SendOK {
		t.Fatalf("batch send: %v %v", r, err)
	}
	if n := len(strings.Split(r.OffsetMsgID, ",")); n != 20 {
		t.Fatalf("batch send returned %d message ids, want 20", n)
	}
	for i := 0; i < 20; i++ {
		record(fmt.Sprintf("batch-%d", i), r, i)
	}

	mqs := queuesOf(t, b, topic)
	if len(mqs) != 4 {
		t.Fatalf("auto-created topic has %d queues, want 4", len(mqs))
	}
	pc := newPullConsumer(t, b, "produce-check")
	if err := pc.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	var got []*primitive.MessageExt
	// One-way sends are not acknowledged: wait until all 80 are stored.
	waitFor(30*time.Second, func() bool {
		got = got[:0]
		for _, mq := range mqs {
			got = append(got, pullQueue(t, pc, mq)...)
		}
		return len(got) >= 80
	})
	if len(got) != 80 {
		t.Fatalf("read %d messages, want 80", len(got))
	}
	perQueue := map[int][]int64{}
	for _, m := range got {
		w := want[string(m.Body)]
		if w == nil {
			t.Fatalf("unexpected message %q", m.Body)
		}
		delete(want, string(m.Body))
		if m.GetTags() != w.tag || m.GetKeys() != w.keys || m.GetProperty("custom") != w.prop || m.Topic != topic {
			t.Errorf("%s: tag %q keys %q prop %q topic %q; want %+v", m.Body, m.GetTags(), m.GetKeys(), m.GetProperty("custom"), m.Topic, w)
		}
		if w.offset >= 0 && (m.Queue.QueueId != w.queue || m.QueueOffset != w.offset || m.OffsetMsgId != w.offsetMsgID) {
			t.Errorf("%s: stored at queue %d offset %d id %s; send result said queue %d offset %d id %s",
				m.Body, m.Queue.QueueId, m.QueueOffset, m.OffsetMsgId, w.queue, w.offset, w.offsetMsgID)
		}
		if len(m.OffsetMsgId) != 32 {
			t.Errorf("%s: offset message id %q is not 32 hex digits", m.Body, m.OffsetMsgId)
		}
		perQueue[m.Queue.QueueId] = append(perQueue[m.Queue.QueueId], m.QueueOffset)
	}
	for q, offs := range perQueue {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("queue %d offsets are not dense: %v", q, offs)
			}
		}
	}
	if len(want) != 0 {
		t.Fatalf("%d messages missing", len(want))
	}
}
