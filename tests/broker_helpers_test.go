package tests

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
)

// silentLog drops the RocketMQ client's logging.
type silentLog struct{}

func (silentLog) Debug(string, map[string]interface{})   {}
func (silentLog) Info(string, map[string]interface{})    {}
func (silentLog) Warning(string, map[string]interface{}) {}
func (silentLog) Error(string, map[string]interface{})   {}
func (silentLog) Fatal(string, map[string]interface{})   {}
func (silentLog) Level(string)                           {}
func (silentLog) OutputPath(string) error                { return nil }

func init() { rlog.SetLogger(silentLog{}) }

// rsqlBroker is a running `rsql broker` process.
type rsqlBroker struct {
	p       *proc
	dir     string
	NS      string // name-server address
	Addr    string // broker address
	extra   []string
	t       testing.TB
	stopped bool
}

// startBroker runs `rsql broker` on free ports with its data in a fresh directory (or dir,
// when restarting), with small segments; extra flags are appended.
func startBroker(t testing.TB, extra ...string) *rsqlBroker {
	t.Helper()
	b := &rsqlBroker{dir: t.TempDir(), NS: freePort(t), Addr: freePort(t), extra: extra, t: t}
	b.start()
	return b
}

func (b *rsqlBroker) start() {
	b.t.Helper()
	args := append([]string{"broker", "--data-dir", b.dir, "--namesrv-addr", b.NS, "--broker-addr", b.Addr,
		"--segment-size", "16MiB"}, b.extra...)
	b.p = startProc(b.t, buildRsql(b.t), args...)
	waitListening(b.t, b.p, b.NS)
	waitListening(b.t, b.p, b.Addr)
}

// restart kills the broker with SIGKILL and starts it again on the same ports and data.
func (b *rsqlBroker) killAndRestart() {
	b.t.Helper()
	b.p.Kill()
	b.start()
}

func (b *rsqlBroker) resolver() primitive.NsResolver {
	return primitive.NewPassthroughResolver([]string{b.NS})
}

var instanceSeq atomic.Int64

// uniq names a client instance so several clients in this process stay distinct.
func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, instanceSeq.Add(1)) }

func newProducer(t testing.TB, b *rsqlBroker, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	opts = append([]producer.Option{producer.WithNsResolver(b.resolver()), producer.WithInstanceName(uniq("p")),
		producer.WithGroupName(uniq("pg")), producer.WithRetry(2)}, opts...)
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

func newPushConsumer(t testing.TB, b *rsqlBroker, group string, opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	opts = append([]consumer.Option{consumer.WithNsResolver(b.resolver()), consumer.WithGroupName(group),
		consumer.WithInstance(uniq("c")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}, opts...)
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createTopic creates a topic through the admin client.
func createTopic(t testing.TB, b *rsqlBroker, topic string, queues int) {
	t.Helper()
	a, err := admin.NewAdmin(admin.WithResolver(b.resolver()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = a.CreateTopic(context.Background(), admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(b.Addr),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues))
	if err != nil {
		t.Fatal(err)
	}
}

// pullQueue reads a whole queue from offset 0 with the pull consumer's PullFrom. It stops
// at the queue's max offset as reported by the broker (a pull at the end would long-poll),
// so it must not be used on an empty queue.
func pullQueue(t testing.TB, pc rocketmq.PullConsumer, mq *primitive.MessageQueue) []*primitive.MessageExt {
	t.Helper()
	var out []*primitive.MessageExt
	var off int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := pc.PullFrom(ctx, mq, off, 256)
		cancel()
		if err != nil {
			t.Fatalf("pull %v at %d: %v", mq, off, err)
		}
		if res.Status != primitive.PullFound {
			return out
		}
		out = append(out, res.GetMessageExts()...)
		off = res.NextBeginOffset
		if off >= res.MaxOffset {
			return out
		}
	}
}

func newPullConsumer(t testing.TB, b *rsqlBroker, group string) rocketmq.PullConsumer {
	t.Helper()
	pc, err := rocketmq.NewPullConsumer(consumer.WithNsResolver(b.resolver()), consumer.WithGroupName(group),
		consumer.WithInstance(uniq("pull")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// queuesOf returns the topic's queues from the name server.
func queuesOf(t testing.TB, b *rsqlBroker, topic string) []*primitive.MessageQueue {
	t.Helper()
	a, err := admin.NewAdmin(admin.WithResolver(b.resolver()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mqs, err := a.FetchPublishMessageQueues(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return mqs
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}
