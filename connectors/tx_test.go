package connectors

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"rsql/broker"
)

// TestTxWriter runs one body against both transactional writers of the bundled broker, in
// process and over the RocketMQ protocol: prepared messages stay invisible, a commit shows
// them per queue in prepare order with their keys and ids, a rollback drops them, and a
// transaction left open by a writer that went away is decided by the group's next writer's
// check (in process: at once; over the protocol: by the broker's check-back).
func TestTxWriter(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: filepath.Join(t.TempDir(), "broker"), SegmentSize: 16 << 20,
		TransactionTimeout: 200 * time.Millisecond, TransactionCheckInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []topicPath{inProcessPath(), rocketMQPath()} {
		t.Run(p.name, func(t *testing.T) { txWriterBody(t, b, p) })
	}
}

func txWriterBody(t *testing.T, b *broker.Broker, p topicPath) {
	const queues = 3
	topic := "tx-" + p.name
	group := "rsql-tx-test-" + p.name
	src, sink := p.open(t, b, topic, queues)
	ts, ok := sink.(TxSink)
	if !ok {
		t.Fatalf("%T is not a TxSink", sink)
	}
	ctx := context.Background()
	var mu sync.Mutex
	asked := map[string]int{}
	decide := map[string]TxState{}
	check := func(txn string) TxState {
		mu.Lock()
		defer mu.Unlock()
		asked[txn]++
		return decide[txn]
	}
	w, err := ts.Transactional(ctx, group, check)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(txn string, n int) []Message {
		var out []Message
		for i := 0; i < n; i++ {
			out = append(out, Message{Key: []byte("k" + strconv.Itoa(i%5)), Body: []byte(fmt.Sprintf("%s-%d", txn, i)), ID: fmt.Sprintf("%s/%d", txn, i)})
		}
		return out
	}
	for _, txn := range []string{"A", "B", "C", "D"} {
		if err := w.Prepare(ctx, txn, batch(txn, 20)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Prepare(ctx, "A", batch("A2", 10)); err != nil { // a transaction takes several calls
		t.Fatal(err)
	}
	visible := func() []Message {
		var out []Message
		for q := 0; q < queues; q++ {
			out = append(out, drainSplit(t, src, strconv.Itoa(q), 0, 100)...)
		}
		return out
	}
	if got := visible(); len(got) != 0 {
		t.Fatalf("%d prepared messages visible before any commit", len(got))
	}
	if err := w.End(ctx, "A", true); err != nil {
		t.Fatal(err)
	}
	if err := w.End(ctx, "B", false); err != nil {
		t.Fatal(err)
	}
	if err := w.End(ctx, "nothing", true); err != nil {
		t.Fatalf("ending an empty transaction: %v", err)
	}
	// Per queue, A's messages in prepare order; each key on one queue; bodies and ids kept.
	want := append(batch("A", 20), batch("A2", 10)...)
	// checkCommitted compares each queue with want, the last tail messages as a set: a
	// broker's check-backs decide messages one by one, in no particular order. In process
	// a queue's messages are in prepare order, over the protocol those of each key.
	checkCommitted := func(want []Message, tail int) {
		t.Helper()
		seq := func(msgs []Message, k string) []string {
			var out []string
			for _, m := range msgs {
				if p.name == "in-process" || string(m.Key) == k {
					out = append(out, string(m.Body))
				}
			}
			return out
		}
		var got []Message
		for q := 0; q < queues; q++ {
			msgs := drainSplit(t, src, strconv.Itoa(q), 0, 100)
			keys := map[string]bool{}
			for _, m := range msgs {
				if QueueOf(m.Key, queues) != q {
					t.Errorf("key %s on queue %d, want %d", m.Key, q, QueueOf(m.Key, queues))
				}
				keys[string(m.Key)] = true
			}
			var wantQ, tailQ []Message
			for i, m := range want {
				if QueueOf(m.Key, queues) == q {
					wantQ = append(wantQ, m)
					if i >= len(want)-tail {
						tailQ = append(tailQ, m)
					}
				}
			}
			for _, m := range wantQ {
				keys[string(m.Key)] = true
			}
			for k := range keys {
				order, wantOrder := seq(msgs, k), seq(wantQ, k)
				if n := len(seq(tailQ, k)); len(order) == len(wantOrder) {
					slices.Sort(order[len(order)-n:])
					slices.Sort(wantOrder[len(wantOrder)-n:])
				}
				if !slices.Equal(order, wantOrder) {
					t.Errorf("queue %d key %q holds %v, want %v", q, k, order, wantOrder)
				}
			}
			got = append(got, msgs...)
		}
		for _, m := range got {
			txn, i, _ := cutLast(m.ID)
			if want := fmt.Sprintf("%s-%s", txn, i); string(m.Body) != want {
				t.Errorf("message %q has id %q", m.Body, m.ID)
			}
		}
	}
	checkCommitted(want, 0)
	// C and D stay open when their writer goes: the group's next writer ends D from its
	// record, and its check decides C.
	rec := w.Record("D")
	if len(rec) == 0 || w.Record("nothing") != nil {
		t.Fatalf("records: D %x, nothing %x", rec, w.Record("nothing"))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, err := ts.Transactional(ctx, group, check)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if err := w2.EndRecord(ctx, rec, true); err != nil {
		t.Fatal(err)
	}
	if err := w2.EndRecord(ctx, rec, true); err != nil && p.name == "in-process" {
		t.Fatalf("a repeated end of a record: %v", err)
	}
	checkCommitted(append(slices.Clone(want), batch("D", 20)...), 0)
	mu.Lock()
	decide["C"] = TxCommit
	mu.Unlock()
	if err := w2.EndRecord(ctx, []byte("Xjunk"), true); !errors.Is(err, ErrBadTxRecord) {
		t.Fatalf("a record of another kind: %v", err)
	}
	want = append(append(want, batch("D", 20)...), batch("C", 20)...)
	deadline := time.Now().Add(20 * time.Second)
	for len(visible()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	checkCommitted(want, 20)
	mu.Lock()
	defer mu.Unlock()
	if asked["C"] == 0 {
		t.Errorf("check-backs asked %v: never about C", asked)
	}
}

func cutLast(id string) (string, string, bool) {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '/' {
			return id[:i], id[i+1:], true
		}
	}
	return id, "", false
}

// FuzzTxRecords: the transaction records a writer leaves in a checkpoint decode without
// panicking, and what decodes encodes back to the same halves.
func FuzzTxRecords(f *testing.F) {
	f.Add(encodeBrokerTxRecord([]broker.HalfMessage{{QueueOffset: 1, PhysOffset: 4096}, {QueueOffset: 2, PhysOffset: 8192}}))
	f.Add(encodeRMQTxRecord([][]rmqHalf{{{queueOffset: 3, commitLogOffset: 77, msgID: "7F0000010001"}}, nil, {{queueOffset: 4, commitLogOffset: 99, msgID: "x"}}}))
	f.Add(encodeRMQTxRecord([][]rmqHalf{{{queueOffset: 5, commitLogOffset: 1 << 40, msgID: "AC1100", lane: 15}, {queueOffset: 6, commitLogOffset: 1<<40 + 300, msgID: "AC1101", lane: 3}}}))
	f.Add([]byte{'B', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{'R', 1, 1, 0, 2, 2, 200, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if hs, err := decodeBrokerTxRecord(b); err == nil {
			again, err := decodeBrokerTxRecord(encodeBrokerTxRecord(hs))
			if err != nil || !slices.Equal(again, hs) {
				t.Fatalf("in-process record %x: re-encoded %v, %v", b, again, err)
			}
		}
		if tq, err := decodeRMQTxRecord(b); err == nil {
			again, err := decodeRMQTxRecord(encodeRMQTxRecord(tq))
			if err != nil {
				t.Fatalf("protocol record %x: re-encoded: %v", b, err)
			}
			for q := range tq {
				if len(tq[q]) > 0 && (q >= len(again) || !slices.Equal(again[q], tq[q])) {
					t.Fatalf("protocol record %x: queue %d re-encoded differently", b, q)
				}
			}
		}
	})
}

// FuzzCheckedTxn: the body of a check-back from a broker is read without panicking.
func FuzzCheckedTxn(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 200, 0xda, 0xa3, 0x20, 0xa7})
	f.Add(storedRecord(0xDAA320A7, false, map[string]string{PropTxn: "1/2", "UNIQ_KEY": "u"}))
	f.Add(storedRecord(0xDAA320AB, true, map[string]string{PropTxn: "1/2"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkedTxn(b)
	})
}

// storedRecord lays out a record as RocketMQ stores and sends it, for checkedTxn.
func storedRecord(magic uint32, v6 bool, props map[string]string) []byte {
	be := binary.BigEndian
	host := 8
	var sysFlag uint32
	if v6 {
		host, sysFlag = 20, 0x30
	}
	var b []byte
	b = be.AppendUint32(b, 0) // size, not read
	b = be.AppendUint32(b, magic)
	b = append(b, make([]byte, 28)...) // CRC, queue, flag, queue offset, commit-log offset
	b = be.AppendUint32(b, sysFlag)
	b = append(b, make([]byte, 8+host+8+host+4+8)...)
	b = be.AppendUint32(b, 3)
	b = append(b, "abc"...)
	topic := "t1"
	if magic == 0xDAA320AB {
		b = be.AppendUint16(b, uint16(len(topic)))
	} else {
		b = append(b, byte(len(topic)))
	}
	b = append(b, topic...)
	p := broker.EncodeProperties(props)
	b = be.AppendUint16(b, uint16(len(p)))
	return append(b, p...)
}

func TestCheckedTxn(t *testing.T) {
	props := map[string]string{PropTxn: "00ff/42", "UNIQ_KEY": "u1", "TRAN_MSG": "true"}
	for _, c := range []struct {
		magic uint32
		v6    bool
	}{{0xDAA320A7, false}, {0xDAA320A7, true}, {0xDAA320AB, false}} {
		rec := storedRecord(c.magic, c.v6, props)
		txn, uniq, ok := checkedTxn(rec)
		if !ok || txn != "00ff/42" || uniq != "u1" {
			t.Errorf("magic %x v6 %v: %q %q %v", c.magic, c.v6, txn, uniq, ok)
		}
		if _, _, ok := checkedTxn(rec[:len(rec)-3]); ok {
			t.Errorf("magic %x v6 %v: a cut record is read", c.magic, c.v6)
		}
	}
}

// BenchmarkTxWriterProtocol: transactions of 3,000 100-byte messages over 30 keys to a
// 3-queue topic of a broker on loopback, through the RocketMQ-protocol writer: the time of
// Prepare and of End (commit) per message.
func BenchmarkTxWriterProtocol(b *testing.B) {
	br, err := broker.Open(broker.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if err := br.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	ns, _ := br.Addrs()
	ctx := context.Background()
	sink, err := OpenRocketMQSink(ctx, RocketMQConfig{NameServer: ns, CreateTopics: true, Group: "bench"}, "txbench", 3)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	w, err := sink.Transactional(ctx, "rsql-tx-bench", func(string) TxState { return TxUnknown })
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	const n = 3000
	msgs := make([]Message, n)
	body := make([]byte, 100)
	for i := range msgs {
		msgs[i] = Message{Key: []byte("user-" + strconv.Itoa(i%30)), Body: body}
	}
	var prep, end time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		txn := "t" + strconv.Itoa(i)
		t0 := time.Now()
		for j := 0; j < n; j += 500 {
			if err := w.Prepare(ctx, txn, msgs[j:j+500]); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		if err := w.End(ctx, txn, true); err != nil {
			b.Fatal(err)
		}
		prep += t1.Sub(t0)
		end += time.Since(t1)
	}
	b.ReportMetric(float64(prep.Microseconds())/float64(b.N*n), "prepare-µs/msg")
	b.ReportMetric(float64(end.Microseconds())/float64(b.N*n), "commit-µs/msg")
}
