package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
)

// collector records the bodies a push consumer receives.
type collector struct {
	mu   sync.Mutex
	got  map[string]int
	at   map[string]time.Time
	meta map[string]*primitive.MessageExt
}

func newCollector() *collector {
	return &collector{got: map[string]int{}, at: map[string]time.Time{}, meta: map[string]*primitive.MessageExt{}}
}

func (c *collector) handle(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.got[string(m.Body)]++
		if _, ok := c.at[string(m.Body)]; !ok {
			c.at[string(m.Body)] = time.Now()
		}
		c.meta[string(m.Body)] = m
	}
	return consumer.ConsumeSuccess, nil
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func startCollector(t *testing.T, b *rsqlBroker, group, topic string, opts ...consumer.Option) *collector {
	t.Helper()
	col := newCollector()
	c := newPushConsumer(t, b, group, opts...)
	if err := c.Subscribe(topic, consumer.MessageSelector{}, col.handle); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })
	return col
}

func sendBodies(t *testing.T, p rocketmq.Producer, topic string, bodies ...string) []*primitive.SendResult {
	t.Helper()
	var out []*primitive.SendResult
	for _, body := range bodies {
		r, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
		if err != nil || r.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", body, r, err)
		}
		out = append(out, r)
	}
	return out
}

func bodies(prefix string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// TestBrokerClientFeatures checks the official client's remaining features one by one
// against the broker: broadcasting, delayed messages, consuming from a timestamp,
// namespaces, message trace, and 4 MB bodies.
func TestBrokerClientFeatures(t *testing.T) {
	b := startBroker(t)
	p := newProducer(t, b)

	t.Run("broadcasting", func(t *testing.T) {
		createTopic(t, b, "bcast", 4)
		// Broadcasting consumers keep their offsets in $HOME/.rocketmq_client_go/<group>:
		// a group of its own, removed afterwards.
		group := fmt.Sprintf("g-bcast-%d-%d", os.Getpid(), time.Now().UnixNano())
		t.Cleanup(func() { os.RemoveAll(filepath.Join(os.Getenv("HOME"), ".rocketmq_client_go", group)) })
		c1 := startCollector(t, b, group, "bcast", consumer.WithConsumerModel(consumer.BroadCasting))
		c2 := startCollector(t, b, group, "bcast", consumer.WithConsumerModel(consumer.BroadCasting))
		time.Sleep(2 * time.Second)
		sendBodies(t, p, "bcast", bodies("b", 40)...)
		for i, c := range []*collector{c1, c2} {
			if !waitFor(30*time.Second, func() bool { return c.count() == 40 }) {
				t.Fatalf("broadcast consumer %d received %d of 40", i, c.count())
			}
		}
	})

	t.Run("delay", func(t *testing.T) {
		createTopic(t, b, "delayed", 1)
		col := startCollector(t, b, "g-delay", "delayed")
		time.Sleep(2 * time.Second)
		m := primitive.NewMessage("delayed", []byte("later"))
		m.WithDelayTimeLevel(2) // 5 s
		sent := time.Now()
		if r, err := p.SendSync(context.Background(), m); err != nil || r.Status != primitive.SendOK {
			t.Fatalf("send: %v %v", r, err)
		}
		sendBodies(t, p, "delayed", "now")
		if !waitFor(30*time.Second, func() bool { return col.count() == 2 }) {
			t.Fatalf("received %d of 2", col.count())
		}
		col.mu.Lock()
		defer col.mu.Unlock()
		if d := col.at["later"].Sub(sent); d < 4500*time.Millisecond {
			t.Fatalf("a level-2 (5 s) delayed message arrived after %v", d)
		}
		if col.meta["later"].GetProperty("DELAY") != "" || col.meta["later"].Topic != "delayed" {
			t.Fatalf("delivered delayed message: %v", col.meta["later"])
		}
	})

	t.Run("from timestamp", func(t *testing.T) {
		createTopic(t, b, "stamped", 2)
		sendBodies(t, p, "stamped", bodies("old", 10)...)
		time.Sleep(1100 * time.Millisecond)
		from := time.Now().Add(100 * time.Millisecond).Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(from) + 100*time.Millisecond)
		sendBodies(t, p, "stamped", bodies("new", 10)...)
		col := startCollector(t, b, "g-stamp", "stamped", consumer.WithConsumeFromWhere(consumer.ConsumeFromTimestamp),
			consumer.WithConsumeTimestamp(from.Format("20060102150405")))
		if !waitFor(30*time.Second, func() bool { return col.count() >= 10 }) {
			t.Fatalf("received %d", col.count())
		}
		time.Sleep(500 * time.Millisecond)
		col.mu.Lock()
		defer col.mu.Unlock()
		for body := range col.got {
			if !strings.HasPrefix(body, "new-") {
				t.Fatalf("consuming from %v delivered %s", from, body)
			}
		}
	})

	t.Run("namespace", func(t *testing.T) {
		np := newProducer(t, b, producer.WithNamespace("tenant1"))
		sendBodies(t, np, "spaced", bodies("n", 5)...)
		if len(queuesOf(t, b, "tenant1%spaced")) == 0 {
			t.Fatalf("no topic %q on the broker", "tenant1%spaced")
		}
		col := startCollector(t, b, "g-ns", "spaced", consumer.WithNamespace("tenant1"))
		if !waitFor(30*time.Second, func() bool { return col.count() == 5 }) {
			t.Fatalf("received %d of 5", col.count())
		}
	})

	t.Run("trace", func(t *testing.T) {
		tp := newProducer(t, b, producer.WithTrace(&primitive.TraceConfig{GroupName: "trace-pg", Access: primitive.Local,
			Resolver: b.resolver()}))
		rs := sendBodies(t, tp, "traced", "t-1")
		col := startCollector(t, b, "g-trace", "RMQ_SYS_TRACE_TOPIC")
		if !waitFor(30*time.Second, func() bool {
			col.mu.Lock()
			defer col.mu.Unlock()
			for body := range col.got {
				if strings.Contains(body, rs[0].MsgID) {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no trace record of %s among %d", rs[0].MsgID, col.count())
		}
	})

	t.Run("4 MB body", func(t *testing.T) {
		createTopic(t, b, "big", 1)
		const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
		r := rand.New(rand.NewSource(1))
		big := make([]byte, 4_000_000)
		for i := range big {
			big[i] = letters[r.Intn(len(letters))]
		}
		sendBodies(t, p, "big", string(big))
		col := startCollector(t, b, "g-big", "big")
		if !waitFor(30*time.Second, func() bool { return col.count() == 1 }) {
			t.Fatal("the 4 MB message was not delivered")
		}
		col.mu.Lock()
		defer col.mu.Unlock()
		if col.got[string(big)] != 1 {
			t.Fatal("the 4 MB body arrived changed")
		}
	})
}
