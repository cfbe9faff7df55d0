package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"rsql/broker/remoting"
)

// mqRow is one message queue's entry of a fastjson body keyed by message queue.
type mqRow struct {
	topic  string
	queue  int
	fields map[string]float64
}

// mqTable parses a body whose table is keyed by message-queue objects, as RocketMQ's Java
// tools read it: {"...":x,"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:{...},...}}.
func mqTable(t *testing.T, body []byte) []mqRow {
	t.Helper()
	re := regexp.MustCompile(`\{"brokerName":"([^"]*)","queueId":(\d+),"topic":"([^"]*)"\}:(\{[^{}]*\})`)
	var out []mqRow
	for _, m := range re.FindAllSubmatch(body, -1) {
		q, _ := strconv.Atoi(string(m[2]))
		r := mqRow{topic: string(m[3]), queue: q}
		if err := json.Unmarshal(m[4], &r.fields); err != nil {
			t.Fatalf("entry %s: %v", m[4], err)
		}
		out = append(out, r)
	}
	if !strings.Contains(string(body), `"offsetTable":{`) {
		t.Fatalf("no offsetTable in %s", body)
	}
	return out
}

func adminCall(t *testing.T, addr string, code int16, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	return rawCall(t, addr, &remoting.Command{Code: code, Opaque: 1, ExtFields: ext, Body: body})
}

// TestBrokerAdminConsumeStats: a group consumes part of a 4-queue topic; GET_CONSUME_STATS
// reports, per queue, the queue's end and the group's committed offset, and the lag they
// give is exactly what a consumer of the group then receives. Topic stats, cluster and
// runtime info, the consumer connection list and QUERY_TOPIC_CONSUME_BY_WHO agree.
func TestBrokerAdminConsumeStats(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "stat4", 4)
	p := newProducer(t, b)
	produced := map[int]int64{}
	for i := 0; i < 200; i++ {
		r, err := p.SendSync(context.Background(), primitive.NewMessage("stat4", []byte(fmt.Sprint("s", i))))
		if err != nil {
			t.Fatal(err)
		}
		produced[r.MessageQueue.QueueId]++
	}
	// Consume 70, one at a time, and leave the rest (orderly: exactly the consumed ones
	// are committed).
	var mu sync.Mutex
	consumed := map[int]int64{}
	seen := map[string]bool{}
	total := 0
	c := newPushConsumer(t, b, "g-stat", consumer.WithConsumerOrder(true))
	err := c.Subscribe("stat4", consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if total >= 70 {
			return consumer.SuspendCurrentQueueAMoment, nil
		}
		for _, m := range msgs {
			consumed[m.Queue.QueueId]++
			seen[string(m.Body)] = true
			total++
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitFor(60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return total >= 70 }) {
		t.Fatalf("consumed %d of 70", total)
	}
	// While it runs: its connection, and who consumes the topic.
	r := adminCall(t, b.Addr, 203, map[string]string{"consumerGroup": "g-stat"}, nil)
	var conns struct {
		ConnectionSet []struct {
			ClientID string `json:"clientId"`
			Language string `json:"language"`
		} `json:"connectionSet"`
		SubscriptionTable map[string]json.RawMessage `json:"subscriptionTable"`
		ConsumeType       string                     `json:"consumeType"`
	}
	if err := json.Unmarshal(r.Body, &conns); r.Code != 0 || err != nil || len(conns.ConnectionSet) != 1 ||
		conns.ConnectionSet[0].Language != "GO" || conns.SubscriptionTable["stat4"] == nil || conns.ConsumeType != "CONSUME_PASSIVELY" {
		t.Fatalf("consumer connections: code %d %v %s", r.Code, err, r.Body)
	}
	r = adminCall(t, b.Addr, 300, map[string]string{"topic": "stat4"}, nil)
	if !strings.Contains(string(r.Body), `"g-stat"`) {
		t.Fatalf("QUERY_TOPIC_CONSUME_BY_WHO: %s", r.Body)
	}
	c.Shutdown()
	if err := groupLeft(b.Addr, "g-stat", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := adminCall(t, b.Addr, 203, map[string]string{"consumerGroup": "g-stat"}, nil); r.Code != 206 {
		t.Fatalf("connections of a group gone: code %d", r.Code)
	}
	mu.Lock()
	consumedNow := total
	mu.Unlock()

	// The stats.
	r = adminCall(t, b.Addr, 208, map[string]string{"consumerGroup": "g-stat", "topic": "stat4"}, nil)
	rows := mqTable(t, r.Body)
	if r.Code != 0 || len(rows) != 4 {
		t.Fatalf("GET_CONSUME_STATS: code %d, %d queues: %s", r.Code, len(rows), r.Body)
	}
	var lag int64
	for _, row := range rows {
		bo, co := int64(row.fields["brokerOffset"]), int64(row.fields["consumerOffset"])
		if row.topic != "stat4" || bo != produced[row.queue] || co != consumed[row.queue] {
			t.Fatalf("queue %d: broker %d consumer %d, want %d and %d", row.queue, bo, co, produced[row.queue], consumed[row.queue])
		}
		if (row.fields["lastTimestamp"] > 0) != (co > 0) {
			t.Fatalf("queue %d: lastTimestamp %v with consumer offset %d", row.queue, row.fields["lastTimestamp"], co)
		}
		lag += bo - co
	}
	if lag != 200-int64(consumedNow) {
		t.Fatalf("lag %d, want %d", lag, 200-consumedNow)
	}
	if !regexp.MustCompile(`"consumeTps":[1-9]`).Match(r.Body) && !regexp.MustCompile(`"consumeTps":0\.0*[1-9]`).Match(r.Body) {
		t.Fatalf("consumeTps is 0 right after consuming: %s", r.Body[:60])
	}
	// Without a topic: every topic the group has offsets for.
	r = adminCall(t, b.Addr, 208, map[string]string{"consumerGroup": "g-stat"}, nil)
	if n := len(mqTable(t, r.Body)); n < 4 {
		t.Fatalf("GET_CONSUME_STATS without topic: %d queues", n)
	}
	// The lag is what the group receives next.
	var got []string
	c2 := newPushConsumer(t, b, "g-stat")
	c2.Subscribe("stat4", consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got = append(got, string(m.Body))
		}
		return consumer.ConsumeSuccess, nil
	})
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return int64(len(got)) >= lag })
	time.Sleep(time.Second)
	mu.Lock()
	if int64(len(got)) != lag {
		t.Fatalf("the group received %d messages after the stats said its lag was %d", len(got), lag)
	}
	for _, body := range got {
		if seen[body] {
			t.Fatalf("%s delivered again", body)
		}
	}
	mu.Unlock()

	// Topic stats.
	r = adminCall(t, b.Addr, 202, map[string]string{"topic": "stat4"}, nil)
	rows = mqTable(t, r.Body)
	if r.Code != 0 || len(rows) != 4 {
		t.Fatalf("GET_TOPIC_STATS_INFO: %d %s", r.Code, r.Body)
	}
	for _, row := range rows {
		if int64(row.fields["maxOffset"]) != produced[row.queue] || row.fields["minOffset"] != 0 || row.fields["lastUpdateTimestamp"] <= 0 {
			t.Fatalf("topic stats of queue %d: %v (produced %d)", row.queue, row.fields, produced[row.queue])
		}
	}
	if r := adminCall(t, b.Addr, 202, map[string]string{"topic": "nope"}, nil); r.Code != 17 {
		t.Fatalf("stats of an unknown topic: code %d", r.Code)
	}
	// Cluster info from the name server.
	r = adminCall(t, b.NS, 106, nil, nil)
	var ci struct {
		BrokerAddrTable map[string]struct {
			Cluster     string            `json:"cluster"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerAddrTable"`
		ClusterAddrTable map[string][]string `json:"clusterAddrTable"`
	}
	if err := json.Unmarshal(r.Body, &ci); err != nil || ci.BrokerAddrTable["broker-a"].BrokerAddrs["0"] != b.Addr ||
		fmt.Sprint(ci.ClusterAddrTable["DefaultCluster"]) != "[broker-a]" {
		t.Fatalf("cluster info: %v %s", err, r.Body)
	}
	// Runtime info.
	r = adminCall(t, b.Addr, 28, nil, nil)
	var kv struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(r.Body, &kv); err != nil {
		t.Fatal(err)
	}
	put, _ := strconv.Atoi(kv.Table["msgPutTotalTodayNow"])
	get, _ := strconv.Atoi(kv.Table["msgGetTotalTodayNow"])
	boot, _ := strconv.ParseInt(kv.Table["bootTimestamp"], 10, 64)
	if put < 200 || get < 200 || boot <= 0 || len(strings.Fields(kv.Table["putTps"])) != 3 || kv.Table["brokerVersionDesc"] == "" {
		t.Fatalf("runtime info: %v", kv.Table)
	}
}

// TestBrokerSubscriptionGroups: a consumer's heartbeat creates its subscription group
// (listed by the official admin client, kept across a kill -9); an admin update that
// disables consumption makes the group's pulls fail with 16; deleting removes it.
func TestBrokerSubscriptionGroups(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "sg", 1)
	c := newPushConsumer(t, b, "g-sg")
	c.Subscribe("sg", consumer.MessageSelector{}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	c.Shutdown()
	groups := func() map[string]admin.SubscriptionGroupConfig {
		a, err := admin.NewAdmin(admin.WithResolver(b.resolver()))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		w, err := a.GetAllSubscriptionGroup(context.Background(), b.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return w.SubscriptionGroupTable
	}
	if g, ok := groups()["g-sg"]; !ok || !g.ConsumeEnable || g.RetryMaxTimes != 16 {
		t.Fatalf("group created by heartbeat: %+v %v", g, ok)
	}
	b.killAndRestart()
	if _, ok := groups()["g-sg"]; !ok {
		t.Fatal("the subscription group is gone after a restart")
	}
	body, _ := json.Marshal(map[string]any{"groupName": "g-sg", "consumeEnable": false, "retryMaxTimes": 3})
	if r := adminCall(t, b.Addr, 200, nil, body); r.Code != 0 {
		t.Fatalf("update: %d %s", r.Code, r.Remark)
	}
	if g := groups()["g-sg"]; g.ConsumeEnable || g.RetryMaxTimes != 3 {
		t.Fatalf("after update: %+v", g)
	}
	r := adminCall(t, b.Addr, 352, map[string]string{"group": "g-sg"}, nil)
	if r.Code != 0 || !strings.Contains(string(r.Body), `"retryMaxTimes":3`) {
		t.Fatalf("GET_SUBSCRIPTIONGROUP_CONFIG: %d %s", r.Code, r.Body)
	}
	pull := adminCall(t, b.Addr, 11, map[string]string{"consumerGroup": "g-sg", "topic": "sg", "queueId": "0", "queueOffset": "0",
		"maxMsgNums": "1", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0"}, nil)
	if pull.Code != 16 {
		t.Fatalf("pull of a disabled group: code %d", pull.Code)
	}
	if r := adminCall(t, b.Addr, 207, map[string]string{"groupName": "g-sg"}, nil); r.Code != 0 {
		t.Fatalf("delete: %d", r.Code)
	}
	if _, ok := groups()["g-sg"]; ok {
		t.Fatal("deleted group still listed")
	}
}
