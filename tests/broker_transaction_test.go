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

	rocketmq "github.com/apache/rocketmq-client-go/v2"

	"rsql/broker/remoting"
)

// txnLedger is the application side of transactional sends: it decides each message's
// local transaction (at send time and when the broker checks back) and records the
// decision before the producer tells the broker, so a consumer can check that it never
// sees a message whose transaction is not committed yet.
type txnLedger struct {
	mu        sync.Mutex
	decide    func(body string, check bool) primitive.LocalTransactionState
	committed map[string]bool // body -> true once committed, false once rolled back
	checks    map[string]int
}

func newTxnLedger(decide func(body string, check bool) primitive.LocalTransactionState) *txnLedger {
	return &txnLedger{decide: decide, committed: map[string]bool{}, checks: map[string]int{}}
}

func (l *txnLedger) record(body string, check bool) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if check {
		l.checks[body]++
	}
	st := l.decide(body, check)
	switch st {
	case primitive.CommitMessageState:
		l.committed[body] = true
	case primitive.RollbackMessageState:
		l.committed[body] = false
	}
	return st
}

func (l *txnLedger) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	return l.record(string(m.Body), false)
}

func (l *txnLedger) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	return l.record(string(m.Body), true)
}

func (l *txnLedger) checked(body string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checks[body]
}

func newTxnProducer(t *testing.T, b *rsqlBroker, group string, l *txnLedger) rocketmq.TransactionProducer {
	t.Helper()
	p, err := rocketmq.NewTransactionProducer(l, producer.WithNsResolver(b.resolver()), producer.WithGroupName(group),
		producer.WithInstanceName(uniq("tp")), producer.WithRetry(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

// txnReader consumes a topic and records each delivery, flagging any message whose
// transaction the ledger has not committed at the moment it arrives.
type txnReader struct {
	mu         sync.Mutex
	got        map[string]int
	queue      map[string]int
	props      map[string]string
	violations []string
}

func startTxnReader(t *testing.T, b *rsqlBroker, group, topic string, l *txnLedger) *txnReader {
	t.Helper()
	r := &txnReader{got: map[string]int{}, queue: map[string]int{}, props: map[string]string{}}
	c := newPushConsumer(t, b, group)
	err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			body := string(m.Body)
			l.mu.Lock()
			committed, decided := l.committed[body]
			l.mu.Unlock()
			r.mu.Lock()
			if !decided || !committed {
				r.violations = append(r.violations, fmt.Sprintf("%s delivered while its transaction is decided=%v committed=%v", body, decided, committed))
			}
			r.got[body]++
			r.queue[body] = m.Queue.QueueId
			r.props[body] = m.GetProperty("k") + "/" + m.GetTags()
			r.mu.Unlock()
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
	return r
}

func (r *txnReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// check compares the deliveries with want (each exactly once) and reports violations.
func (r *txnReader) check(t *testing.T, want map[string]bool) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) > 0 {
		t.Fatalf("%d deliveries before commit or after rollback, first: %s", len(r.violations), r.violations[0])
	}
	for body, n := range r.got {
		if !want[body] {
			t.Fatalf("%s was delivered (%d times) but its transaction was not committed", body, n)
		}
		if n != 1 {
			t.Fatalf("%s delivered %d times", body, n)
		}
	}
	for body := range want {
		if r.got[body] == 0 {
			t.Fatalf("committed %s was never delivered (got %d of %d)", body, len(r.got), len(want))
		}
	}
}

func txnMessage(topic, body string) *primitive.Message {
	m := primitive.NewMessage(topic, []byte(body))
	m.WithTag("T")
	m.WithProperty("k", "v-"+body)
	return m
}

// decideByKind is the local transaction state of a test message "<kind>-<i>": "c" commits
// and "r" rolls back at send time; "u" is unknown until a check-back, which commits the even
// ones and rolls back the odd ones.
func decideByKind(body string, check bool) primitive.LocalTransactionState {
	kind, n, _ := strings.Cut(body, "-")
	i, _ := strconv.Atoi(n)
	switch {
	case kind == "c":
		return primitive.CommitMessageState
	case kind == "r":
		return primitive.RollbackMessageState
	case !check:
		return primitive.UnkonwnState
	case i%2 == 0:
		return primitive.CommitMessageState
	default:
		return primitive.RollbackMessageState
	}
}

// TestBrokerTransactions: with the official TransactionProducer, 20 transactions commit at
// once, 20 roll back, and 20 stay unknown until the broker checks back (then the even ones
// commit and the odd ones roll back). A consumer sees exactly the committed ones, once
// each, in the queue their send chose, with their properties, and never before the
// commit was decided.
func TestBrokerTransactions(t *testing.T) {
	b := startBroker(t, "--transaction-timeout", "1s", "--transaction-check-interval", "1s")
	createTopic(t, b, "txn", 4)
	l := newTxnLedger(decideByKind)
	r := startTxnReader(t, b, "g-txn", "txn", l)
	time.Sleep(2 * time.Second) // let the consumer take its queues
	p := newTxnProducer(t, b, "pg-txn", l)
	want := map[string]bool{}
	sentQueue := map[string]int{}
	for i := 0; i < 20; i++ {
		for _, kind := range []string{"c", "r", "u"} {
			body := fmt.Sprintf("%s-%d", kind, i)
			res, err := p.SendMessageInTransaction(context.Background(), txnMessage("txn", body))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != primitive.SendOK {
				t.Fatalf("%s: send status %v", body, res.Status)
			}
			sentQueue[body] = res.MessageQueue.QueueId
			if kind == "c" || (kind == "u" && i%2 == 0) {
				want[body] = true
			}
		}
	}
	if !waitFor(60*time.Second, func() bool { return r.count() >= len(want) }) {
		t.Fatalf("received %d of %d committed messages", r.count(), len(want))
	}
	for i := 0; i < 20; i++ {
		if n := l.checked(fmt.Sprintf("u-%d", i)); n == 0 {
			t.Fatalf("u-%d was delivered or dropped without a check-back", i)
		}
		for _, kind := range []string{"c", "r"} {
			if n := l.checked(fmt.Sprintf("%s-%d", kind, i)); n != 0 {
				t.Fatalf("%s-%d was decided at send time but checked back %d times", kind, i, n)
			}
		}
	}
	time.Sleep(3 * time.Second) // a late or repeated delivery, or another check, would show by now
	r.check(t, want)
	r.mu.Lock()
	defer r.mu.Unlock()
	for body := range want {
		if r.queue[body] != sentQueue[body] {
			t.Fatalf("%s arrived in queue %d, sent to %d", body, r.queue[body], sentQueue[body])
		}
		if r.props[body] != "v-"+body+"/T" {
			t.Fatalf("%s arrived with property/tag %q", body, r.props[body])
		}
	}
}

// TestBrokerTransactionsSurviveRestart: transactions committed before a kill -9 are
// delivered once; those still open (unknown) survive the restart and are resolved by
// check-backs to a producer of the group that connects afterwards.
func TestBrokerTransactionsSurviveRestart(t *testing.T) {
	b := startBroker(t, "--transaction-timeout", "2s", "--transaction-check-interval", "1s")
	createTopic(t, b, "txnr", 4)
	l := newTxnLedger(decideByKind)
	p := newTxnProducer(t, b, "pg-txnr", l)
	want := map[string]bool{}
	for i := 0; i < 10; i++ {
		for _, kind := range []string{"c", "r", "u"} {
			body := fmt.Sprintf("%s-%d", kind, i)
			if _, err := p.SendMessageInTransaction(context.Background(), txnMessage("txnr", body)); err != nil {
				t.Fatal(err)
			}
			if kind == "c" || (kind == "u" && i%2 == 0) {
				want[body] = true
			}
		}
	}
	p.Shutdown()
	b.killAndRestart()
	for i := 0; i < 10; i++ {
		if n := l.checked(fmt.Sprintf("u-%d", i)); n != 0 {
			t.Fatalf("u-%d checked before the restart (the test's timeout is too short for this machine)", i)
		}
	}
	r := startTxnReader(t, b, "g-txnr", "txnr", l)
	// A producer of the group learns the broker (and starts heartbeating to it) when it
	// sends: this one commits one more transaction.
	p2 := newTxnProducer(t, b, "pg-txnr", l)
	if _, err := p2.SendMessageInTransaction(context.Background(), txnMessage("txnr", "c-late")); err != nil {
		t.Fatal(err)
	}
	want["c-late"] = true
	if !waitFor(60*time.Second, func() bool { return r.count() >= len(want) }) {
		t.Fatalf("received %d of %d committed messages after the restart\n%s", r.count(), len(want), b.p.Stderr.String())
	}
	time.Sleep(3 * time.Second)
	r.check(t, want)
	for i := 0; i < 10; i++ {
		if n := l.checked(fmt.Sprintf("u-%d", i)); n == 0 {
			t.Fatalf("u-%d resolved without a check-back", i)
		}
	}
}

// TestBrokerTransactionDiscardedAfterMaxChecks: a transaction whose producer never knows
// is checked --transaction-check-max times, then moved to TRANS_CHECK_MAX_TIME_TOPIC and
// never delivered.
func TestBrokerTransactionDiscardedAfterMaxChecks(t *testing.T) {
	b := startBroker(t, "--transaction-timeout", "500ms", "--transaction-check-interval", "500ms", "--transaction-check-max", "2")
	createTopic(t, b, "txnd", 1)
	l := newTxnLedger(func(string, bool) primitive.LocalTransactionState { return primitive.UnkonwnState })
	r := startTxnReader(t, b, "g-txnd", "txnd", l)
	p := newTxnProducer(t, b, "pg-txnd", l)
	if _, err := p.SendMessageInTransaction(context.Background(), txnMessage("txnd", "u-0")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(30*time.Second, func() bool { return l.checked("u-0") >= 2 }) {
		t.Fatalf("checked %d times, want 2\n%s", l.checked("u-0"), b.p.Stderr.String())
	}
	if !waitFor(30*time.Second, func() bool {
		return rawCall(t, b.NS, &remoting.Command{Code: 105, Opaque: 1, ExtFields: map[string]string{"topic": "TRANS_CHECK_MAX_TIME_TOPIC"}}).Code == 0
	}) {
		t.Fatal("TRANS_CHECK_MAX_TIME_TOPIC was not created")
	}
	d := newPullConsumer(t, b, "g-txnd-max")
	if err := d.Subscribe("TRANS_CHECK_MAX_TIME_TOPIC", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	mq := &primitive.MessageQueue{Topic: "TRANS_CHECK_MAX_TIME_TOPIC", BrokerName: "broker-a", QueueId: 0}
	var parked []*primitive.MessageExt
	if !waitFor(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := d.PullFrom(ctx, mq, 0, 16)
		if err == nil && res.Status == primitive.PullFound {
			parked = res.GetMessageExts()
		}
		return len(parked) > 0
	}) {
		t.Fatal("the discarded transaction is not in TRANS_CHECK_MAX_TIME_TOPIC")
	}
	time.Sleep(2 * time.Second) // a third check or a delivery would show by now
	if n := l.checked("u-0"); n != 2 {
		t.Fatalf("checked %d times, want exactly 2", n)
	}
	if len(parked) != 1 || string(parked[0].Body) != "u-0" || parked[0].GetProperty("REAL_TOPIC") != "txnd" {
		t.Fatalf("TRANS_CHECK_MAX_TIME_TOPIC holds %v", parked)
	}
	r.check(t, map[string]bool{})
}
