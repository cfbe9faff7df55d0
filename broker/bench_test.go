package broker

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"rsql/broker/remoting"
)

func benchAppend(b *testing.B, size, batch int) { benchAppendCfg(b, size, batch, false) }

func benchAppendCfg(b *testing.B, size, batch int, noIndex bool) {
	br, err := Open(Config{Dir: b.TempDir(), SegmentSize: 256 << 20, CheckpointInterval: time.Hour, DisableIndex: noIndex})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	br.CreateTopic("bench", 8)
	msgs := make([]Message, batch)
	for i := range msgs {
		msgs[i] = Message{Body: make([]byte, size)}
	}
	b.SetBytes(int64(size * batch))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := br.Append("bench", i%8, msgs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkAppend100Batch128(b *testing.B) { benchAppend(b, 100, 128) }
func BenchmarkAppend1KBatch128(b *testing.B)  { benchAppend(b, 1024, 128) }
func BenchmarkAppend100Single(b *testing.B)   { benchAppend(b, 100, 1) }

// The same without the key index's goroutine (which reads every record as it follows the
// log, on the same two cores).
func BenchmarkAppend100SingleNoIndex(b *testing.B)   { benchAppendCfg(b, 100, 1, true) }
func BenchmarkAppend100Batch128NoIndex(b *testing.B) { benchAppendCfg(b, 100, 128, true) }

func BenchmarkPull100(b *testing.B) {
	br, err := Open(Config{Dir: b.TempDir(), SegmentSize: 256 << 20, CheckpointInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	br.CreateTopic("bench", 1)
	msgs := make([]Message, 128)
	for i := range msgs {
		msgs[i] = Message{Body: make([]byte, 100)}
	}
	for i := 0; i < 800; i++ {
		br.Append("bench", 0, msgs)
	}
	b.ResetTimer()
	var off int64
	n := 0
	for i := 0; i < b.N; i++ {
		got, next, err := br.Pull(context.Background(), "bench", 0, off, 256, 0)
		if err != nil {
			b.Fatal(err)
		}
		n += len(got)
		off = next
		if len(got) == 0 {
			off = 0
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkCommitOffset: one consumer-offset commit (journalled with one write).
func BenchmarkCommitOffset(b *testing.B) {
	br, err := Open(Config{Dir: b.TempDir(), CheckpointInterval: time.Hour, DisableIndex: true})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	for i := 0; i < b.N; i++ {
		if err := br.CommitOffset("group", "topic", i%8, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadSQL92: a pull's scan of 100-byte messages with three properties through a
// SQL92 selector that keeps one in three.
func BenchmarkReadSQL92(b *testing.B) {
	br, err := Open(Config{Dir: b.TempDir(), SegmentSize: 256 << 20, CheckpointInterval: time.Hour, DisableIndex: true})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	br.CreateTopic("bench", 1)
	msgs := make([]Message, 128)
	for i := range msgs {
		msgs[i] = Message{Body: make([]byte, 100), Tags: "T", Properties: map[string]string{
			"a": strconv.Itoa(i), "b": []string{"x", "y", "z"}[i%3], "c": "some value"}}
	}
	for i := 0; i < 800; i++ {
		br.Append("bench", 0, msgs)
	}
	f := newSubFilter(ExprSQL92, "a > 5 AND b = 'x'")
	q, _ := br.queue("bench", 0)
	max := q.max.Load()
	var buf []byte
	b.ResetTimer()
	scanned := 0
	var off int64
	for i := 0; i < b.N; i++ {
		var next int64
		buf, _, next, _ = br.readRaw(q, off, 32, 4<<20, f, buf[:0])
		scanned += int(next - off)
		off = next
		if off >= max {
			off = 0
		}
	}
	b.ReportMetric(float64(scanned)/b.Elapsed().Seconds(), "scanned/s")
}

// BenchmarkAppend100Keyed: single appends of 100-byte messages with a key and a client
// message id, each indexed twice.
func BenchmarkAppend100Keyed(b *testing.B) {
	br, err := Open(Config{Dir: b.TempDir(), SegmentSize: 256 << 20, CheckpointInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	br.CreateTopic("bench", 8)
	body := make([]byte, 100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := Message{Key: "order-" + strconv.Itoa(i), Body: body,
			Properties: map[string]string{PropUniqKey: "U" + strconv.Itoa(i)}}
		if _, err := br.Append("bench", i%8, []Message{m}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// benchACLCheck: the access-control check of one signed send of body bytes with the
// headers rocketmq-client-go sends (V2 short names), against an account with per-topic
// permissions: what --acl-file adds to each send.
func benchACLCheck(b *testing.B, body int) {
	r, err := parseACL([]byte(testACL))
	if err != nil {
		b.Fatal(err)
	}
	a := &acl{}
	a.rules.Store(r)
	req := &remoting.Command{Code: codeSendMessageV2, Body: make([]byte, body), ExtFields: map[string]string{
		"a": "rsql-bench", "b": "orders", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1764583200000",
		"h": "0", "i": "UNIQ_KEY\x01AC110002000118B4AAC2\x02WAIT\x01true\x02", "j": "0", "k": "false", "m": "false"}}
	remoting.Credentials{AccessKey: "producer-ak", SecretKey: "producer-sk"}.Sign(req)
	local := netip.MustParseAddr("127.0.0.1")
	b.SetBytes(int64(body))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if reason := a.check(req, local, false); reason != "" {
			b.Fatal(reason)
		}
	}
}

func BenchmarkACLCheckSend100(b *testing.B)      { benchACLCheck(b, 100) }
func BenchmarkACLCheckSendBatch128(b *testing.B) { benchACLCheck(b, 128*(100+22)) }
