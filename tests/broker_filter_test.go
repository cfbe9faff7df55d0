package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"rsql/broker/remoting"
)

// sqlMsg is one message of the SQL92 test: its properties as sent.
type sqlMsg struct {
	tag     string
	a, b, c string // "" = property absent
}

func sqlMessages(n int) []sqlMsg {
	var out []sqlMsg
	for i := 0; i < n; i++ {
		m := sqlMsg{tag: []string{"A", "B", "C", "D"}[i%4], a: strconv.Itoa(i)}
		if i%50 == 7 {
			m.a = "n/a"
		}
		switch i % 3 {
		case 0:
			m.b = "x"
		case 1:
			m.b = "y"
		}
		if i%5 == 0 {
			m.c = "hello-" + strconv.Itoa(i)
		}
		out = append(out, m)
	}
	return out
}

func (m sqlMsg) body(i int) string { return fmt.Sprintf("m%d", i) }

// num is a's value as an int, and whether it is one (RocketMQ: a property compared with
// an int literal that does not convert makes the whole selector fail).
func (m sqlMsg) num() (int, bool) {
	n, err := strconv.Atoi(m.a)
	return n, err == nil
}

// The selectors of the test, each with the same condition written in Go.
var sqlSelectors = []struct {
	expr string
	want func(m sqlMsg) bool
}{
	{"a > 5 AND b = 'x'", func(m sqlMsg) bool { n, ok := m.num(); return ok && n > 5 && m.b == "x" }},
	{"TAGS IN ('A', 'C') OR b IS NULL", func(m sqlMsg) bool { return m.tag == "A" || m.tag == "C" || m.b == "" }},
	{"a BETWEEN 100 AND 199 AND NOT (c IS NULL)", func(m sqlMsg) bool { n, ok := m.num(); return ok && n >= 100 && n <= 199 && m.c != "" }},
}

func sendSQLMessages(t *testing.T, b *rsqlBroker, topic string, msgs []sqlMsg) {
	t.Helper()
	p := newProducer(t, b)
	var batch []*primitive.Message
	for i, m := range msgs {
		pm := primitive.NewMessage(topic, []byte(m.body(i)))
		pm.WithTag(m.tag)
		for k, v := range map[string]string{"a": m.a, "b": m.b, "c": m.c} {
			if v != "" {
				pm.WithProperty(k, v)
			}
		}
		batch = append(batch, pm)
		if len(batch) == 50 || i == len(msgs)-1 {
			if _, err := p.SendSync(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
}

// TestBrokerSQL92Subscriptions: push consumers subscribed with SQL92 selectors over
// properties and TAGS receive exactly the matching messages (filtered on the broker), and
// so does a pull consumer.
func TestBrokerSQL92Subscriptions(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "sqlf", 4)
	msgs := sqlMessages(400)
	sendSQLMessages(t, b, "sqlf", msgs)
	type result struct {
		mu  sync.Mutex
		got map[string]int
	}
	results := make([]*result, len(sqlSelectors))
	for i, sel := range sqlSelectors {
		r := &result{got: map[string]int{}}
		results[i] = r
		c := newPushConsumer(t, b, fmt.Sprintf("g-sql-%d", i))
		err := c.Subscribe("sqlf", consumer.MessageSelector{Type: consumer.SQL92, Expression: sel.expr},
			func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				r.mu.Lock()
				defer r.mu.Unlock()
				for _, m := range ms {
					r.got[string(m.Body)]++
				}
				return consumer.ConsumeSuccess, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Shutdown() })
	}
	// A pull consumer with a selector of its own.
	pullSel := "b = 'y' AND a < 50"
	pullWant := func(m sqlMsg) bool { n, ok := m.num(); return m.b == "y" && ok && n < 50 }
	pc := newPullConsumer(t, b, "g-sql-pull")
	if err := pc.Subscribe("sqlf", consumer.MessageSelector{Type: consumer.SQL92, Expression: pullSel}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	pulled := map[string]int{}
	wantCount := func(f func(sqlMsg) bool) (map[string]bool, int) {
		w := map[string]bool{}
		for i, m := range msgs {
			if f(m) {
				w[m.body(i)] = true
			}
		}
		return w, len(w)
	}
	pullW, pullN := wantCount(pullWant)
	deadline := time.Now().Add(60 * time.Second)
	for len(pulled) < pullN && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cr, err := pc.Poll(ctx, time.Second)
		cancel()
		if err != nil {
			continue
		}
		for _, m := range cr.GetMsgList() {
			pulled[string(m.Body)]++
		}
		pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
	for i, sel := range sqlSelectors {
		want, n := wantCount(sel.want)
		r := results[i]
		if !waitFor(60*time.Second, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.got) >= n }) {
			t.Fatalf("%s: received %d of %d", sel.expr, len(r.got), n)
		}
		if n == 0 || n == len(msgs) {
			t.Fatalf("%s: the test's selector matches %d of %d messages; pick one that splits them", sel.expr, n, len(msgs))
		}
		time.Sleep(500 * time.Millisecond) // an extra delivery would show by now
		r.mu.Lock()
		for body, k := range r.got {
			if !want[body] || k != 1 {
				t.Errorf("%s: %s received %d times, matches %v", sel.expr, body, k, want[body])
			}
		}
		r.mu.Unlock()
	}
	if len(pulled) != pullN {
		t.Fatalf("pull consumer %s: got %d of %d", pullSel, len(pulled), pullN)
	}
	for body := range pulled {
		if !pullW[body] {
			t.Fatalf("pull consumer %s: %s does not match", pullSel, body)
		}
	}
}

// TestBrokerSQL92Malformed: a selector that does not compile is refused with
// SUBSCRIPTION_PARSE_FAILED (23): on a pull that carries it, on pulls of a group that
// subscribed with it by heartbeat, and by CHECK_CLIENT_CONFIG; such a consumer gets nothing.
func TestBrokerSQL92Malformed(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "sqlbad", 1)
	sendSQLMessages(t, b, "sqlbad", sqlMessages(50))
	pull := func(c net.Conn, group string, sysFlag int, sub, typ string) *remoting.Command {
		return rawCallOn(t, c, &remoting.Command{Code: 11, Opaque: 7, ExtFields: map[string]string{
			"consumerGroup": group, "topic": "sqlbad", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
			"sysFlag": strconv.Itoa(sysFlag), "commitOffset": "0", "suspendTimeoutMillis": "0",
			"subscription": sub, "subVersion": "0", "expressionType": typ}})
	}
	c, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := pull(c, "g-bad", 4, "a > ", "SQL92"); r.Code != 23 || r.Remark == "" {
		t.Fatalf("pull with a malformed selector: code %d %q, want 23", r.Code, r.Remark)
	}
	if r := pull(c, "g-bad", 4, "a > 5", "SQL92"); r.Code != 0 {
		t.Fatalf("pull with a good selector: code %d %q", r.Code, r.Remark)
	}
	// By heartbeat.
	hb, _ := json.Marshal(map[string]any{"clientID": "127.0.0.1@bad", "consumerDataSet": []any{map[string]any{
		"groupName": "g-bad-hb", "subscriptionDataSet": []any{map[string]any{"topic": "sqlbad", "subString": "a BETWEEN 5 AND 1", "expressionType": "SQL92"}}}}})
	if r := rawCallOn(t, c, &remoting.Command{Code: 34, Opaque: 8, Body: hb}); r.Code != 0 {
		t.Fatalf("heartbeat: %d", r.Code)
	}
	if r := pull(c, "g-bad-hb", 2, "", "TAG"); r.Code != 23 {
		t.Fatalf("pull of a group subscribed with a malformed selector: code %d %q, want 23", r.Code, r.Remark)
	}
	body, _ := json.Marshal(map[string]any{"clientId": "x", "group": "g", "subscriptionData": map[string]any{
		"topic": "sqlbad", "subString": "a = NULL", "expressionType": "SQL92"}})
	if r := rawCallOn(t, c, &remoting.Command{Code: 46, Opaque: 9, Body: body}); r.Code != 23 {
		t.Fatalf("CHECK_CLIENT_CONFIG with a malformed selector: code %d", r.Code)
	}
	// The official push consumer: it starts, and receives nothing.
	var mu sync.Mutex
	got := 0
	pc := newPushConsumer(t, b, "g-bad-push")
	if err := pc.Subscribe("sqlbad", consumer.MessageSelector{Type: consumer.SQL92, Expression: "a >"},
		func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			got += len(ms)
			mu.Unlock()
			return consumer.ConsumeSuccess, nil
		}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	// Wait until it is a member (its pulls are being refused), then a little longer.
	if !waitFor(30*time.Second, func() bool { ids, _ := consumerIDs(b.Addr, "g-bad-push"); return len(ids) == 1 }) {
		t.Fatal("the consumer never joined its group")
	}
	time.Sleep(3 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if got != 0 {
		t.Fatalf("a consumer with a malformed selector received %d messages", got)
	}
}
