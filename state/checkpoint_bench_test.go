package state

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// BenchmarkCheckpointCommit10k commits checkpoints of 10,000 changed keys of one split (plus
// its offset and the job's epoch): "upsert" overwrites the same 10,000 aggregation groups
// every epoch; "mixed" writes 8,000 groups of a new window and deletes 2,000 of an old one,
// as fired windows do. One op is one commit (building the batch is not timed); ms/commit is the figure in
// docs/benchmarks.md.
func BenchmarkCheckpointCommit10k(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) CheckpointStore
	}{
		{"postgres", func(b *testing.B) CheckpointStore { return openTestPostgres(b, newTestSchema()) }},
		{"local-rocksdb", func(b *testing.B) CheckpointStore {
			st, err := OpenRocks(b.TempDir(), RocksOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return NewLocalCheckpointStore(st)
		}},
	}
	for _, be := range backends {
		for _, mode := range []string{"upsert", "mixed"} {
			b.Run(be.name+"/"+mode, func(b *testing.B) {
				cs := be.open(b)
				const job, split = "bench-job", "queue-3"
				gen, err := cs.Acquire(bg, job, split, "bench")
				if err != nil {
					b.Fatal(err)
				}
				val := make([]byte, 24)
				batch := &Batch{}
				key := func(g, w int) []byte {
					return Key(nil, job, "s0.agg2", split, fmt.Appendf(nil, "user-%06d", g), int64(w)*1000, int64(w+1)*1000)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer() // building the batch is the operators' cost, not the store's
					batch.Reset()
					binary.LittleEndian.PutUint64(val, uint64(i))
					switch mode {
					case "upsert":
						for g := range 10000 {
							batch.Put(key(g, 0), val)
						}
					case "mixed":
						for g := range 8000 {
							batch.Put(key(g, i), val)
						}
						for g := range 2000 {
							batch.Delete(key(g, i-1))
						}
					}
					batch.Put(SplitPrefix(nil, job, "src0", split), binary.AppendVarint(nil, int64(i)))
					batch.Put(SplitPrefix(nil, job, JobOperator, "epoch"), binary.AppendVarint(nil, int64(i+1)))
					b.StartTimer()
					cp := &Checkpoint{Job: job, Epoch: int64(i + 1), State: batch,
						Splits: []SplitGeneration{{split, gen}}, Offsets: []CheckpointOffset{{split, int64(i)}}}
					if err := cs.Commit(bg, cp); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/commit")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
