package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func testConfig(t *testing.T) Config {
	return Config{Dir: t.TempDir(), SegmentSize: 64 << 10, QueueFileEntries: 64, MaxMessageSize: 16 << 10,
		FlushInterval: 10 * time.Millisecond, CheckpointInterval: time.Hour, RetentionCheckInterval: time.Hour}
}

func mustOpen(t *testing.T, cfg Config) *Broker {
	t.Helper()
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func body(q, i int) []byte {
	return []byte(fmt.Sprintf("q%d-m%d-%s", q, i, bytes.Repeat([]byte("x"), i%50)))
}

// appendN appends n messages one batch of 7 at a time to queue q.
func appendN(t *testing.T, b *Broker, topicName string, q, from, n int) {
	t.Helper()
	for i := from; i < from+n; {
		var batch []Message
		for j := 0; j < 7 && i < from+n; j++ {
			batch = append(batch, Message{Key: fmt.Sprint("k", i), Tags: fmt.Sprint("T", i%3),
				Properties: map[string]string{"i": fmt.Sprint(i)}, Body: body(q, i)})
			i++
		}
		first, err := b.Append(topicName, q, batch)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(i - len(batch)); first != want {
			t.Fatalf("append returned first offset %d, want %d", first, want)
		}
	}
}

// readAll pulls a queue from 0 and checks every message is the expected one, in order.
func readAll(t *testing.T, b *Broker, topicName string, q, want int) {
	t.Helper()
	var off int64
	n := 0
	for {
		msgs, next, err := b.Pull(context.Background(), topicName, q, off, 50, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if m.QueueOffset != int64(n) || !bytes.Equal(m.Body, body(q, n)) || m.Key != fmt.Sprint("k", n) ||
				m.Tags != fmt.Sprint("T", n%3) || m.Properties["i"] != fmt.Sprint(n) || m.Topic != topicName || m.Queue != q {
				t.Fatalf("queue %d message %d: got %+v", q, n, m)
			}
			n++
		}
		off = next
	}
	if n != want {
		t.Fatalf("queue %d: read %d messages, want %d", q, n, want)
	}
}

func TestAppendPullAcrossSegmentsAndReopen(t *testing.T) {
	cfg := testConfig(t)
	b := mustOpen(t, cfg)
	if err := b.CreateTopic("t1", 3); err != nil {
		t.Fatal(err)
	}
	for q := 0; q < 3; q++ {
		appendN(t, b, "t1", q, 0, 400)
	}
	for q := 0; q < 3; q++ {
		readAll(t, b, "t1", q, 400)
	}
	segs, _ := os.ReadDir(filepath.Join(cfg.Dir, "commitlog"))
	if len(segs) < 3 {
		t.Fatalf("expected several segments, got %d", len(segs))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = mustOpen(t, cfg)
	defer b.Close()
	for q := 0; q < 3; q++ {
		readAll(t, b, "t1", q, 400)
		appendN(t, b, "t1", q, 400, 10)
		readAll(t, b, "t1", q, 410)
	}
	if got := b.Topics(); len(got) != 2 || got[1].Name != "t1" || got[1].Queues != 3 {
		t.Fatalf("topics %+v", got)
	}
}

func TestRecoveryTruncatesTornTailAndRebuildsQueues(t *testing.T) {
	cfg := testConfig(t)
	b := mustOpen(t, cfg)
	b.CreateTopic("t", 2)
	appendN(t, b, "t", 0, 0, 100)
	appendN(t, b, "t", 1, 0, 1)
	end := b.cl.committed.Load()
	last, _ := b.queue("t", 1)
	phys, size, _, _ := last.get(0)
	if phys+int64(size) != end {
		t.Fatal("last record is not at the end")
	}
	b.Close()
	// Tear the last record (clobber its body) and lose every index and the checkpoint.
	seg := filepath.Join(cfg.Dir, "commitlog", segmentName(phys-phys%cfg.SegmentSize))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("garbage"), phys%cfg.SegmentSize+90)
	f.Close()
	os.RemoveAll(filepath.Join(cfg.Dir, "consumequeue"))
	os.Remove(filepath.Join(cfg.Dir, "checkpoint"))

	b = mustOpen(t, cfg)
	defer b.Close()
	readAll(t, b, "t", 0, 100)
	if m, _ := b.MaxOffset("t", 1); m != 0 {
		t.Fatalf("torn record still indexed: max %d", m)
	}
	if b.cl.committed.Load() != phys {
		t.Fatalf("log end %d, want %d", b.cl.committed.Load(), phys)
	}
	appendN(t, b, "t", 1, 0, 5)
	readAll(t, b, "t", 1, 5)
}

func TestLongPollWakesOnAppend(t *testing.T) {
	b := mustOpen(t, testConfig(t))
	defer b.Close()
	b.CreateTopic("lp", 1)
	done := make(chan []Message)
	go func() {
		msgs, _, _ := b.Pull(context.Background(), "lp", 0, 0, 10, time.Minute)
		done <- msgs
	}()
	time.Sleep(20 * time.Millisecond)
	if _, err := b.Append("lp", 0, []Message{{Body: []byte("hello")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case msgs := <-done:
		if len(msgs) != 1 || string(msgs[0].Body) != "hello" {
			t.Fatalf("got %+v", msgs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("long poll did not wake")
	}
	// Waiting with nothing to read returns empty at the deadline; a cancelled ctx errors.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := b.Pull(ctx, "lp", 0, 1, 10, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: %v", err)
	}
	if _, _, err := b.Pull(ctx, "lp", 0, 5, 10, 0); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("pull beyond end: %v", err)
	}
}

func TestOffsetsPersistAndTimestamps(t *testing.T) {
	cfg := testConfig(t)
	cfg.FlushMode = FlushSync
	b := mustOpen(t, cfg)
	b.CreateTopic("o", 1)
	appendN(t, b, "o", 0, 0, 10)
	time.Sleep(5 * time.Millisecond)
	mid := time.Now().UnixMilli()
	time.Sleep(5 * time.Millisecond)
	appendN(t, b, "o", 0, 10, 10)
	if o, _ := b.OffsetByTimestamp("o", 0, mid); o != 10 {
		t.Fatalf("offset by timestamp %d, want 10", o)
	}
	if o, _ := b.OffsetByTimestamp("o", 0, time.Now().Add(time.Hour).UnixMilli()); o != 20 {
		t.Fatalf("offset by future timestamp %d, want 20", o)
	}
	if _, ok := b.QueryOffset("g", "o", 0); ok {
		t.Fatal("offset before commit")
	}
	b.CommitOffset("g", "o", 0, 7)
	b.Close()
	b = mustOpen(t, cfg)
	defer b.Close()
	if o, ok := b.QueryOffset("g", "o", 0); !ok || o != 7 {
		t.Fatalf("offset after reopen %d %v", o, ok)
	}
}

func TestRetentionBySize(t *testing.T) {
	cfg := testConfig(t)
	cfg.RetentionBytes = 3 * cfg.SegmentSize
	b := mustOpen(t, cfg)
	defer b.Close()
	b.CreateTopic("r", 1)
	appendN(t, b, "r", 0, 0, 2000)
	if err := b.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	_, total, n := b.cl.retentionInfo()
	if total > cfg.RetentionBytes || n < 2 {
		t.Fatalf("after retention %d bytes in %d segments", total, n)
	}
	minO, _ := b.MinOffset("r", 0)
	if minO == 0 {
		t.Fatal("queue minimum did not move")
	}
	msgs, _, err := b.Pull(context.Background(), "r", 0, 0, 5, 0)
	if err != nil || len(msgs) == 0 || msgs[0].QueueOffset != minO || !bytes.Equal(msgs[0].Body, body(0, int(minO))) {
		t.Fatalf("pull from 0 after retention: %v %+v (min %d)", err, msgs, minO)
	}
}

func TestDelayedDelivery(t *testing.T) {
	cfg := testConfig(t)
	cfg.DelayLevels = []time.Duration{50 * time.Millisecond}
	b := mustOpen(t, cfg)
	defer b.Close()
	b.CreateTopic("d", 2)
	if _, err := b.Append("d", 1, []Message{{Body: []byte("later"), Properties: map[string]string{PropDelay: "1"}}}); err != nil {
		t.Fatal(err)
	}
	if m, _ := b.MaxOffset("d", 1); m != 0 {
		t.Fatal("delayed message delivered at once")
	}
	msgs, _, err := b.Pull(context.Background(), "d", 1, 0, 5, 20*time.Second)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "later" || msgs[0].Properties[PropDelay] != "" {
		t.Fatalf("delayed message: %v %+v", err, msgs)
	}
}

func TestConfigValidation(t *testing.T) {
	c := Config{}
	c.EnsureDefaults()
	if c.Validate() == nil {
		t.Fatal("empty Dir accepted")
	}
	c = Config{Dir: "x", SegmentSize: 1000}
	c.EnsureDefaults()
	if c.Validate() == nil {
		t.Fatal("tiny segment accepted")
	}
	if _, err := ParseFlushMode("sometimes"); err == nil {
		t.Fatal("bad flush mode accepted")
	}
}

func TestStoreLock(t *testing.T) {
	cfg := testConfig(t)
	b := mustOpen(t, cfg)
	defer b.Close()
	if _, err := Open(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

func TestTagsCodeMatchesJava(t *testing.T) {
	// Values of java.lang.String.hashCode.
	for s, want := range map[string]int64{"": 0, "A": 65, "TagA": 2598919, "hello world": 1794106052, "é": 233, "😀": 1772899} {
		if got := TagsCode(s); got != want {
			t.Errorf("TagsCode(%q) = %d, want %d", s, got, want)
		}
	}
}

func FuzzDecodeRecords(f *testing.F) {
	m := inMsg{topic: "t", body: []byte("body"), props: EncodeProperties(map[string]string{"TAGS": "a"})}
	buf := make([]byte, m.size())
	encodeRecord(buf, &m, 3, 100, 5, netipZero)
	f.Add(buf)
	f.Add(append(buf, buf...))
	f.Add(buf[:50])
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := DecodeRecords(b)
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error is not a RecordError: %v", err)
			}
			return
		}
		// Valid input: the records account for every byte, and re-encoding each message
		// yields a record of the same size.
		total := 0
		for _, m := range msgs {
			r := mustRecord(b, total)
			body := m.Body
			if r.sysFlag&SysFlagCompressed != 0 {
				body = r.body // inflated (or not): the stored bytes count
				if m.BodyErr == nil && m.SysFlag&SysFlagCompressed != 0 {
					t.Fatalf("an inflated body keeps the compressed flag")
				}
			}
			raw := inMsg{topic: m.Topic, body: body, props: r.props}
			total += raw.size()
		}
		if total != len(b) {
			t.Fatalf("records cover %d of %d bytes", total, len(b))
		}
	})
}

// mustRecord returns the record at off in b.
func mustRecord(b []byte, off int) recordView {
	r, err := parseRecord(b[off:], int64(off))
	if err != nil {
		panic(err)
	}
	return r
}

func FuzzDecodeBatch(f *testing.F) {
	item := func(body, props string) []byte {
		b := make([]byte, 20, 22+len(body)+len(props))
		total := 22 + len(body) + len(props)
		b[0], b[1], b[2], b[3] = byte(total>>24), byte(total>>16), byte(total>>8), byte(total)
		b[16], b[17], b[18], b[19] = byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body))
		b = append(b, body...)
		b = append(b, byte(len(props)>>8), byte(len(props)))
		return append(b, props...)
	}
	f.Add(item("hello", "TAGS\x01a\x02"))
	f.Add(append(item("x", ""), item("yy", "k\x01v\x02")...))
	f.Add([]byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := decodeBatch(b, inMsg{topic: "t"})
		if err != nil {
			return
		}
		total := 0
		for _, m := range ms {
			total += 22 + len(m.body) + len(m.props)
		}
		if total != len(b) {
			t.Fatalf("items cover %d of %d bytes", total, len(b))
		}
	})
}

// TestRecoveryDropsIndexPastLogEnd: when the log lost its tail but the queue index kept
// entries for it (an index flushed before its log), the entries are dropped on open and
// offsets stay dense.
func TestRecoveryDropsIndexPastLogEnd(t *testing.T) {
	cfg := testConfig(t)
	b := mustOpen(t, cfg)
	b.CreateTopic("t", 1)
	appendN(t, b, "t", 0, 0, 50)
	q, _ := b.queue("t", 0)
	cut, _, _, _ := q.get(40) // the log will end just before record 40
	b.Close()
	seg := filepath.Join(cfg.Dir, "commitlog", segmentName(cut-cut%cfg.SegmentSize))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, cfg.SegmentSize-cut%cfg.SegmentSize), cut%cfg.SegmentSize)
	f.Close()
	os.Remove(filepath.Join(cfg.Dir, "checkpoint"))
	b = mustOpen(t, cfg)
	defer b.Close()
	if m, _ := b.MaxOffset("t", 0); m != 40 {
		t.Fatalf("max offset after losing the log tail: %d, want 40", m)
	}
	readAll(t, b, "t", 0, 40)
	appendN(t, b, "t", 0, 40, 10)
	readAll(t, b, "t", 0, 50)
}

func TestRetentionByAge(t *testing.T) {
	cfg := testConfig(t)
	b := mustOpen(t, cfg)
	b.CreateTopic("r", 2)
	appendN(t, b, "r", 0, 0, 1500)
	b.Close()
	time.Sleep(20 * time.Millisecond)
	cfg.RetentionAge = 10 * time.Millisecond
	b = mustOpen(t, cfg)
	defer b.Close()
	appendN(t, b, "r", 1, 0, 5) // a fresh segment is not old
	if err := b.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if _, _, n := b.cl.retentionInfo(); n != 1 {
		t.Fatalf("%d segments left, want only the active one", n)
	}
	// Queue 0 now starts at its first record in the remaining (active) segment.
	minO, _ := b.MinOffset("r", 0)
	q, _ := b.queue("r", 0)
	phys, _, _, _ := q.get(minO)
	if minO == 0 || phys < b.cl.minOffset() {
		t.Fatalf("queue 0 minimum %d at log offset %d; log starts at %d", minO, phys, b.cl.minOffset())
	}
	if prev, _, _, ok := q.get(minO - 1); ok && prev >= b.cl.minOffset() {
		t.Fatalf("queue 0 minimum %d skips a retained record at %d", minO, prev)
	}
	msgs, _, err := b.Pull(context.Background(), "r", 0, 0, 1, 0)
	if err != nil || len(msgs) != 1 || msgs[0].QueueOffset != minO || !bytes.Equal(msgs[0].Body, body(0, int(minO))) {
		t.Fatalf("pull from 0: %v %+v", err, msgs)
	}
	readAll(t, b, "r", 1, 5)
}
