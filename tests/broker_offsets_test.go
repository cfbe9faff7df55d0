package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"rsql/broker/remoting"
)

// queryOffsets asks the broker for a group's committed offsets of queues 0..n-1 (-1: none).
func queryOffsets(addr, group, topic string, n int) ([]int64, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var out []int64
	for q := 0; q < n; q++ {
		r, err := remoting.RoundTrip(c, &remoting.Command{Code: 14, Opaque: int32(q + 1), ExtFields: map[string]string{
			"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(q)}}, 1<<20)
		if err != nil {
			return nil, err
		}
		switch r.Code {
		case 0:
			o, err := strconv.ParseInt(r.ExtFields["offset"], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("offset reply %v", r.ExtFields)
			}
			out = append(out, o)
		case 22:
			out = append(out, -1)
		default:
			return nil, fmt.Errorf("QUERY_CONSUMER_OFFSET answered %d %s", r.Code, r.Remark)
		}
	}
	return out, nil
}

func storedOffsets(t *testing.T, b *rsqlBroker, group, topic string, n int) []int64 {
	t.Helper()
	out, err := queryOffsets(b.Addr, group, topic, n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// consumerIDs asks the broker for a group's client ids.
func consumerIDs(addr, group string) ([]string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r, err := remoting.RoundTrip(c, &remoting.Command{Code: 38, Opaque: 1, ExtFields: map[string]string{"consumerGroup": group}}, 1<<20)
	if err != nil {
		return nil, err
	}
	var body struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return nil, fmt.Errorf("consumer list %q: %v", r.Body, err)
	}
	return body.ConsumerIDList, nil
}

// groupLeft waits up to wait until the broker lists no client in group.
func groupLeft(addr, group string, wait time.Duration) error {
	var last error
	if waitFor(wait, func() bool {
		ids, err := consumerIDs(addr, group)
		last = err
		return err == nil && len(ids) == 0
	}) {
		return nil
	}
	return fmt.Errorf("the broker still lists clients of %s (%v)", group, last)
}

// TestBrokerShutdownCommitsDurable: a push consumer (alternately concurrent and orderly)
// consumes a 4-queue topic and shuts down; its final offset commits are one-way frames
// written just before the connection closes. 50 times over (10 at once), once the broker
// has noticed the connection close (the client left its group), every queue's offset is
// stored; and after a kill -9 and restart right after the last one, all 50 groups' offsets
// are still there.
func TestBrokerShutdownCommitsDurable(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "sdr", 4)
	p := newProducer(t, b)
	produceBodies(t, p, "sdr", "m", 0, 400)
	want := fmt.Sprint([]int64{100, 100, 100, 100})
	const runs, parallel = 50, 10
	run := func(i int) error {
		group := fmt.Sprintf("g-sdr-%d", i)
		orderly := i%2 == 1
		var n atomic.Int64
		c := newPushConsumer(t, b, group, consumer.WithConsumerOrder(orderly))
		err := c.Subscribe("sdr", consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			n.Add(int64(len(msgs)))
			return consumer.ConsumeSuccess, nil
		})
		if err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return err
		}
		// Everything consumed and the client's own offsets caught up (it updates them just
		// after the handler returns).
		if !waitFor(60*time.Second, func() bool { return n.Load() >= 400 && c.GetOffsetDiffMap()["sdr"] == 0 }) {
			c.Shutdown()
			return fmt.Errorf("run %d: consumed %d of 400, client lag %v", i, n.Load(), c.GetOffsetDiffMap())
		}
		if err := c.Shutdown(); err != nil {
			return err
		}
		// The client unregisters from its group first and then writes its final commits
		// (one-way, on the same connection) before closing it, so the group may be seen
		// gone a moment before the commits are applied: they must all be stored soon after.
		// The Go client's heartbeat can race its shutdown and register the group again on a
		// fresh connection (seen once in a few hundred runs: listed for the channel's
		// expiry, minutes); the commits, written before, must be stored all the same, so
		// that wait is a synchronization point, not the check.
		if err := groupLeft(b.Addr, group, 10*time.Second); err != nil {
			t.Logf("run %d: %v; checking its offsets all the same", i, err)
		}
		var got []int64
		if !waitFor(10*time.Second, func() bool {
			got, err = queryOffsets(b.Addr, group, "sdr", 4)
			return err == nil && fmt.Sprint(got) == want
		}) {
			return fmt.Errorf("run %d (orderly %v): stored offsets %v after shutdown, want %v (%v)", i, orderly, got, want, err)
		}
		return nil
	}
	for i := 0; i < runs; i += parallel {
		errs := make(chan error, parallel)
		for j := i; j < i+parallel; j++ {
			go func() { errs <- run(j) }()
		}
		for j := 0; j < parallel; j++ {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	b.killAndRestart()
	for i := 0; i < runs; i++ {
		group := fmt.Sprintf("g-sdr-%d", i)
		if got := fmt.Sprint(storedOffsets(t, b, group, "sdr", 4)); got != want {
			t.Fatalf("after kill -9: group %s has offsets %v, want %v", group, got, want)
		}
	}
}

// TestBrokerOneWayCommitBeforeClose: at the protocol level, a client heartbeats into a
// group, writes one-way offset commits for four queues and closes at once (also with an
// abortive close, which sends RST); each commit is stored by the time the broker drops the
// client, and survives kill -9.
func TestBrokerOneWayCommitBeforeClose(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "owc", 4)
	const runs = 40
	for i := 0; i < runs; i++ {
		group := fmt.Sprintf("g-owc-%d", i)
		c, err := net.Dial("tcp", b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		hb, _ := json.Marshal(map[string]any{"clientID": "127.0.0.1@owc" + strconv.Itoa(i), "consumerDataSet": []any{
			map[string]any{"groupName": group, "subscriptionDataSet": []any{map[string]any{"topic": "owc", "subString": "*"}}}}})
		if r := rawCallOn(t, c, &remoting.Command{Code: 34, Opaque: 1, Body: hb}); r.Code != 0 {
			t.Fatalf("heartbeat: %d", r.Code)
		}
		var frames []byte
		for q := 0; q < 4; q++ {
			frames, _ = remoting.Encode(frames, &remoting.Command{Code: 15, Opaque: int32(10 + q), Flag: remoting.FlagOneway,
				ExtFields: map[string]string{"consumerGroup": group, "topic": "owc", "queueId": strconv.Itoa(q),
					"commitOffset": strconv.Itoa(i*10 + q)}})
		}
		if _, err := c.Write(frames); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			c.(*net.TCPConn).SetLinger(0)
		}
		c.Close()
		if err := groupLeft(b.Addr, group, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint([]int{i * 10, i*10 + 1, i*10 + 2, i*10 + 3})
		if got := storedOffsets(t, b, group, "owc", 4); fmt.Sprint(got) != want {
			t.Fatalf("run %d: stored %v, want %v", i, got, want)
		}
	}
	b.killAndRestart()
	for i := 0; i < runs; i++ {
		want := fmt.Sprint([]int{i * 10, i*10 + 1, i*10 + 2, i*10 + 3})
		if got := storedOffsets(t, b, fmt.Sprintf("g-owc-%d", i), "owc", 4); fmt.Sprint(got) != want {
			t.Fatalf("after kill -9: run %d stored %v, want %v", i, got, want)
		}
	}
}
