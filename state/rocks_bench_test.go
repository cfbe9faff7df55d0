package state

import (
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"
)

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRocksWriteCheckpoint commits checkpoints shaped like the pipeline benchmark's
// (docs/benchmarks.md, "Pipeline"): 20,000 aggregation groups of open windows written (in
// hash order, as an operator dirties them), the 20,000 of the previous checkpoint deleted
// (their windows fired), and a 5 MB outbox value replacing the previous one. One op is one
// commit, building the batch included; cpu-ms/op is the process's CPU time per commit, every
// thread (RocksDB's flushes and compactions included).
//
//   - "now": Rocks.Write as it is (the batch's own RocksDB encoding handed over in one call,
//     8 MiB memtables);
//   - "per-op-64MiB": as before: converted operation by operation, 64 MiB memtables;
//   - "encoded-64MiB": the encoding alone.
func BenchmarkRocksWriteCheckpoint(b *testing.B) {
	for _, mode := range []string{"now", "per-op-64MiB", "encoded-64MiB"} {
		b.Run(mode, func(b *testing.B) {
			o := RocksOptions{}
			if mode != "now" {
				o.WriteBufferBytes = 64 << 20
			}
			s, err := OpenRocks(b.TempDir(), o)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			val := make([]byte, 40)
			var key []byte
			groupKey := func(epoch, g int) []byte {
				key = SplitPrefix(key[:0], "bench-job", "s1.agg1", "3")
				key = binary.BigEndian.AppendUint64(key, uint64((g*7919)%20000))
				return binary.BigEndian.AppendUint64(key, uint64(epoch))
			}
			outKey := func(epoch int) []byte {
				return binary.BigEndian.AppendUint64(SplitPrefix(nil, "bench-job", "out", "1"), uint64(epoch))
			}
			outbox := make([]byte, 5<<20)
			batch := &Batch{}
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				batch.Reset()
				for g := 0; g < 20000; g++ {
					if i > 0 {
						batch.Delete(groupKey(i-1, g))
					}
					batch.Put(groupKey(i, g), val)
				}
				if i > 0 {
					batch.Delete(outKey(i - 1))
				}
				batch.Put(outKey(i), outbox)
				if mode == "per-op-64MiB" {
					wb := grocksdb.NewWriteBatch()
					if err = s.addOps(wb, batch); err == nil {
						err = s.db.Write(s.wo, wb)
					}
					wb.Destroy()
				} else {
					err = s.Write(batch)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}
