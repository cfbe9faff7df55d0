package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"rsql/broker/remoting"
)

// routeAddrs returns the broker addresses a name server lists for a topic.
func routeAddrs(t *testing.T, ns, topic string) map[string]string {
	t.Helper()
	r := rawCall(t, ns, &remoting.Command{Code: 105, Opaque: 1, ExtFields: map[string]string{"topic": topic}})
	var route struct {
		BrokerDatas []struct {
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if r.Code != 0 || json.Unmarshal(r.Body, &route) != nil || len(route.BrokerDatas) != 1 {
		return nil
	}
	return route.BrokerDatas[0].BrokerAddrs
}

// TestBrokerReplicationSyncKill9: a master with --flush sync --replication sync and its
// slave. Producers send; the slave is frozen (SIGSTOP) and the master killed with SIGKILL
// while it is; every send acknowledged SEND_OK is on the slave at its queue and offset. A consumer group that consumed from the
// master goes on from the slave (its offsets were copied), the slave refuses writes, and
// after the documented promotion (restart the slave's directory as a master) producers
// write to it and nothing acknowledged is lost.
func TestBrokerReplicationSyncKill9(t *testing.T) {
	m := startBroker(t, "--flush", "sync", "--replication", "sync")
	s := startBroker(t, "--role", "slave", "--master", m.Addr)
	createTopic(t, m, "repl", 4)
	// The master lists its slave once it replicates.
	if !waitFor(30*time.Second, func() bool { return routeAddrs(t, m.NS, "repl")["1"] == s.Addr }) {
		t.Fatalf("the master does not list its slave: %v", routeAddrs(t, m.NS, "repl"))
	}
	// A consumer group reads from the master while producers send.
	var cmu sync.Mutex
	received := map[string]bool{}
	handler := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		cmu.Lock()
		defer cmu.Unlock()
		for _, m := range msgs {
			received[string(m.Body)] = true
		}
		return consumer.ConsumeSuccess, nil
	}
	c1 := newPushConsumer(t, m, "g-repl")
	c1.Subscribe("repl", consumer.MessageSelector{}, handler)
	if err := c1.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	var notOK atomic.Int64
	var seq atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		p := newProducer(t, m, producer.WithRetry(0), producer.WithSendMsgTimeout(3*time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				body := fmt.Sprintf("r-%d", seq.Add(1))
				r, err := p.SendSync(context.Background(), primitive.NewMessage("repl", []byte(body)))
				if err != nil {
					return
				}
				if r.Status != primitive.SendOK {
					notOK.Add(1)
					continue
				}
				mu.Lock()
				acked[body] = ack{r.MessageQueue.QueueId, r.QueueOffset}
				mu.Unlock()
			}
		}()
	}
	waitFor(60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 2000 })
	time.Sleep(6 * time.Second) // the group commits offsets (every 5 s), the slave copies them (every 2 s)
	// Freeze the slave, so the master is ahead of it while producers go on sending, and
	// kill the master then: with asynchronous replication the sends acknowledged meanwhile
	// would be lost; with sync replication none of them is acknowledged.
	syscall.Kill(s.p.Cmd.Process.Pid, syscall.SIGSTOP)
	mu.Lock()
	beforeFreeze := len(acked)
	mu.Unlock()
	time.Sleep(time.Second)
	m.p.Kill()
	syscall.Kill(s.p.Cmd.Process.Pid, syscall.SIGCONT)
	wg.Wait()
	c1.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 2000 {
		t.Fatalf("only %d sends acknowledged before the kill", len(acked))
	}
	t.Logf("%d sends acknowledged while the slave was frozen", len(acked)-beforeFreeze)
	// The slave stands in for its master (read-only) once the master stops answering.
	if !waitFor(30*time.Second, func() bool { return routeAddrs(t, s.NS, "repl")["0"] == s.Addr }) {
		t.Fatalf("the slave's route after the master died: %v", routeAddrs(t, s.NS, "repl"))
	}
	checkAcked := func(b *rsqlBroker, stage string) {
		t.Helper()
		pc := newPullConsumer(t, b, uniq("repl-check"))
		if err := pc.Subscribe("repl", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
			t.Fatal(err)
		}
		if err := pc.Start(); err != nil {
			t.Fatal(err)
		}
		defer pc.Shutdown()
		found := map[string]ack{}
		for q := 0; q < 4; q++ {
			// (The route of a slave standing in is read-only: it has no queues to publish to.)
			mq := &primitive.MessageQueue{Topic: "repl", BrokerName: "broker-a", QueueId: q}
			for i, msg := range pullQueue(t, pc, mq) {
				if msg.QueueOffset != int64(i) {
					t.Fatalf("%s: queue %d: message %d has offset %d", stage, mq.QueueId, i, msg.QueueOffset)
				}
				found[string(msg.Body)] = ack{mq.QueueId, msg.QueueOffset}
			}
		}
		for body, a := range acked {
			if got, ok := found[body]; !ok || got != a {
				t.Fatalf("%s: acknowledged %s at %+v; found %+v (present %v)\n%s", stage, body, a, got, ok, s.p.Stderr.String())
			}
		}
		t.Logf("%s: %d acknowledged (%d answered without a slave's confirmation), %d stored", stage, len(acked), notOK.Load(), len(found))
	}
	checkAcked(s, "slave after kill -9 of the master")

	// The group goes on from the slave: it receives what it had not received.
	c2 := newPushConsumer(t, s, "g-repl")
	c2.Subscribe("repl", consumer.MessageSelector{}, handler)
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitFor(60*time.Second, func() bool {
		cmu.Lock()
		defer cmu.Unlock()
		for body := range acked {
			if !received[body] {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the group did not receive every acknowledged message from the slave")
	}
	c2.Shutdown()
	// A slave takes no writes.
	r := rawCall(t, s.Addr, &remoting.Command{Code: 10, Opaque: 1, Body: []byte("x"),
		ExtFields: map[string]string{"producerGroup": "p", "topic": "repl", "queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0"}})
	if r.Code != 14 {
		t.Fatalf("send to a slave: code %d", r.Code)
	}

	// Promotion: restart the slave's directory as a master on its ports.
	if err := s.p.Stop(); err != nil {
		t.Fatal(err)
	}
	s.extra = []string{"--flush", "sync"}
	s.start()
	if addrs := routeAddrs(t, s.NS, "repl"); addrs["0"] != s.Addr || len(addrs) != 1 {
		t.Fatalf("the promoted broker's route: %v", addrs)
	}
	p := newProducer(t, s)
	for i := 0; i < 100; i++ {
		body := fmt.Sprintf("after-%d", i)
		res, err := p.SendSync(context.Background(), primitive.NewMessage("repl", []byte(body)))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send to the promoted broker: %v %v", err, res)
		}
		acked[body] = ack{res.MessageQueue.QueueId, res.QueueOffset}
	}
	checkAcked(s, "promoted slave")
	if !strings.Contains(s.p.Stderr.String(), "role=master") {
		t.Fatalf("the promoted broker did not start as a master:\n%s", s.p.Stderr.String())
	}
}
