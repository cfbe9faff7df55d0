package broker

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAppendStalls appends 64 MiB in appends of 64 messages of 160 bytes (a paced
// producer's batches) to fresh files and reports the slowest appends: with read-ahead on
// the writer's mappings (readahead), the first touch of each fresh read-ahead window of a
// preallocated file (8 MiB on the development machine's disk) stalls the append while the
// kernel fills the window; advised MADV_RANDOM (now, no-prefault) there is no such stall,
// and the pages are mapped ahead of the writer (now) or by its own faults (no-prefault). One
// op is the whole 64 MiB.
//
//	go test -run '^$' -bench AppendStalls -benchtime 3x ./broker/
func BenchmarkAppendStalls(b *testing.B) {
	for _, mode := range []string{"now", "no-prefault", "readahead"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "readahead" {
				defer func(a int) { writingAdvice = a }(writingAdvice)
				writingAdvice = syscall.MADV_NORMAL
			}
			noPrefault = mode != "now"
			msgs := make([]Message, 64)
			for i := range msgs {
				msgs[i] = Message{Body: make([]byte, 160)}
			}
			per := (64 << 20) / (64 * 160)
			var lat []time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				br, err := Open(Config{Dir: b.TempDir(), CheckpointInterval: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				if err := br.CreateTopic("bench", 4); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for j := 0; j < per; j++ {
					start := time.Now()
					if _, err := br.Append("bench", j%4, msgs); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				br.Close()
				b.StartTimer()
			}
			slices.Sort(lat)
			over := len(lat) - slices.IndexFunc(lat, func(d time.Duration) bool { return d > 5*time.Millisecond })
			if over > len(lat) {
				over = 0
			}
			b.ReportMetric(float64(lat[len(lat)*999/1000].Microseconds())/1000, "p99.9-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(float64(over)/float64(b.N), "appends>5ms/op")
		})
	}
}
