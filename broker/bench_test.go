package broker

import (
	"context"
	"testing"
	"time"
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
