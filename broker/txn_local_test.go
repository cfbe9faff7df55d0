package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func prepareBodies(t *testing.T, b *Broker, group string, queue int, bodies ...string) []HalfMessage {
	t.Helper()
	msgs := make([]Message, len(bodies))
	for i, s := range bodies {
		msgs[i] = Message{Key: "k-" + s, Body: []byte(s), Properties: map[string]string{"TXN": s[:1]}}
	}
	hs, err := b.Prepare(group, "out", queue, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != len(bodies) {
		t.Fatalf("%d half messages for %d prepared", len(hs), len(bodies))
	}
	return hs
}

// TestPrepareAndEndInProcess: prepared batches are invisible, a commit makes them visible
// in the order given with their key and properties, a rollback drops them, a repeated
// decision changes nothing and a mistaken one is refused.
func TestPrepareAndEndInProcess(t *testing.T) {
	b := mustOpen(t, testConfig(t))
	defer b.Close()
	if err := b.CreateTopic("out", 2); err != nil {
		t.Fatal(err)
	}
	a := prepareBodies(t, b, "g", 1, "a1", "a2", "a3")
	r := prepareBodies(t, b, "g", 1, "r1", "r2")
	c := prepareBodies(t, b, "g", 1, "c1")
	if got := queueBodies(t, b, "out", 1); len(got) != 0 {
		t.Fatalf("prepared messages visible before their commit: %v", got)
	}
	if n := b.OpenTransactions(); n != 6 {
		t.Fatalf("%d open transactions, want 6", n)
	}
	if err := b.EndTransactions("g", append(slices.Clone(c), a...), true); err != nil {
		t.Fatal(err)
	}
	if err := b.EndTransactions("g", r, false); err != nil {
		t.Fatal(err)
	}
	// Repeated decisions are no-ops, even the opposite one.
	if err := b.EndTransactions("g", append(slices.Clone(a), r...), true); err != nil {
		t.Fatal(err)
	}
	if err := b.EndTransactions("g", c, false); err != nil {
		t.Fatal(err)
	}
	want := []string{"c1", "a1", "a2", "a3"}
	if got := queueBodies(t, b, "out", 1); !slices.Equal(got, want) {
		t.Fatalf("committed %v, want %v", got, want)
	}
	msgs, err := b.Peek("out", 1, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Key != "k-"+string(m.Body) || m.Properties["TXN"] != string(m.Body[:1]) || m.Properties[PropRealTopic] != "" {
			t.Fatalf("committed message %q: key %q properties %v", m.Body, m.Key, m.Properties)
		}
	}
	if n := b.OpenTransactions(); n != 0 {
		t.Fatalf("%d open transactions after every decision", n)
	}
	o := prepareBodies(t, b, "g", 0, "o1")
	if err := b.EndTransactions("other", o, true); !errors.Is(err, ErrTxnMismatch) {
		t.Fatalf("another group's decision: %v", err)
	}
	if err := b.EndTransactions("g", []HalfMessage{{QueueOffset: 0, PhysOffset: 7}}, true); !errors.Is(err, ErrTxnNotFound) {
		t.Fatalf("a decision on nothing prepared: %v", err)
	}
	if _, err := b.Prepare("g", "nosuch", 0, []Message{{Body: []byte("x")}}); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("prepare to a missing topic: %v", err)
	}
	if _, err := b.Prepare("", "out", 0, []Message{{Body: []byte("x")}}); err == nil {
		t.Fatal("prepare without a producer group accepted")
	}
}

func queueBodies(t *testing.T, b *Broker, topicName string, q int) []string {
	t.Helper()
	msgs, err := b.Peek(topicName, q, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return out
}

// TestCheckerResolvesAfterRestart: prepared messages survive a crash; a checker registered
// afterwards decides every open one of its group at once — commit, rollback, or unknown
// (left open) — and sees each as its producer sent it. Another group's stay open.
func TestCheckerResolvesAfterRestart(t *testing.T) {
	cfg := testConfig(t)
	cfg.TransactionTimeout = time.Hour
	b := mustOpen(t, cfg)
	if err := b.CreateTopic("out", 1); err != nil {
		t.Fatal(err)
	}
	prepareBodies(t, b, "g", 0, "c1", "r1", "c2", "u1", "r2")
	prepareBodies(t, b, "h", 0, "c9")
	b.Close()
	os.Remove(filepath.Join(cfg.Dir, "checkpoint"))
	b = mustOpen(t, cfg)
	defer b.Close()
	if n := b.OpenTransactions(); n != 6 {
		t.Fatalf("%d open transactions after the restart, want 6", n)
	}
	var asked []string
	remove, err := b.SetTransactionChecker("g", func(m Message) TxnState {
		if m.Topic != "out" || m.Queue != 0 || m.Key != "k-"+string(m.Body) || m.Properties[PropProducerGroup] != "g" {
			t.Errorf("checker saw %q as topic %q queue %d key %q properties %v", m.Body, m.Topic, m.Queue, m.Key, m.Properties)
		}
		asked = append(asked, string(m.Body))
		switch m.Properties["TXN"] {
		case "c":
			return TxnCommit
		case "r":
			return TxnRollback
		}
		return TxnUnknown
	})
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if want := []string{"c1", "r1", "c2", "u1", "r2"}; !slices.Equal(asked, want) {
		t.Fatalf("checker asked about %v, want %v (its group's, in prepare order)", asked, want)
	}
	if got, want := queueBodies(t, b, "out", 0), []string{"c1", "c2"}; !slices.Equal(got, want) {
		t.Fatalf("after the check: %v, want %v", got, want)
	}
	if n := b.OpenTransactions(); n != 2 {
		t.Fatalf("%d open transactions, want 2 (u1, and c9 of another group)", n)
	}
	if _, err := b.SetTransactionChecker("g", func(Message) TxnState { return TxnCommit }); !errors.Is(err, ErrTxnChecker) {
		t.Fatalf("a second checker for the group: %v", err)
	}
}

// TestCheckerChecksBack: a message left open past TransactionTimeout is checked back
// through the in-process checker until it decides; a removed checker is asked nothing.
func TestCheckerChecksBack(t *testing.T) {
	cfg := testConfig(t)
	cfg.TransactionTimeout = 100 * time.Millisecond
	cfg.TransactionCheckInterval = 100 * time.Millisecond
	b := mustOpen(t, cfg)
	defer b.Close()
	if err := b.CreateTopic("out", 1); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	decision := TxnUnknown
	checks := 0
	remove, err := b.SetTransactionChecker("g", func(m Message) TxnState {
		mu.Lock()
		defer mu.Unlock()
		checks++
		return decision
	})
	if err != nil {
		t.Fatal(err)
	}
	prepareBodies(t, b, "g", 0, "x1")
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return checks >= 2 })
	if got := queueBodies(t, b, "out", 0); len(got) != 0 {
		t.Fatalf("visible while the checker says unknown: %v", got)
	}
	mu.Lock()
	decision = TxnCommit
	mu.Unlock()
	waitUntil(t, func() bool { return len(queueBodies(t, b, "out", 0)) == 1 })
	remove()
	mu.Lock()
	checks = 0
	mu.Unlock()
	prepareBodies(t, b, "g", 0, "x2")
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if checks != 0 {
		t.Fatalf("a removed checker was asked %d times", checks)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("condition not met within 10s"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
