package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// GoMemoryFlag is the soft limit of the Go runtime's memory (heap, stacks, runtime data):
// as the heap nears it the garbage collector runs more often, instead of letting the heap
// grow to twice its live data before collecting (GOGC=100). RocksDB's memory (memtables,
// block cache, table readers) and the mapped binary are outside it.
//
// With RocksDB state the operators keep their state in bounded caches and hold the input
// when what a checkpoint must save outgrows them (docs/operations.md, "Memory"), so the
// live heap stays small and the limit bounds the process: the default,
// DefaultMaxGoMemoryMiB, keeps most Nexmark queries' processes within 256 MiB. Where the
// live heap is larger (state that stays in memory: distinct sets, windows, memory state)
// a limit near it would make the collector run again and again, freeing little: the limit
// in force follows the live heap up (keepLimit) to liveHeapFactor times it, so the
// collector runs when the heap has grown by half its live data (at most about twice as
// often as GOGC=100 has it, which collects after it has grown by all of it).
type GoMemoryFlag struct {
	MaxGoMemory int64 `name:"max-go-memory" default:"0" help:"Soft limit of the Go runtime's memory in MiB, raised to 1.5 times the live heap when that is larger: the garbage collector works harder as the heap nears it (0: 150 with RocksDB state, none with memory state; negative: none). GOMEMLIMIT in the environment takes precedence."`
}

// DefaultMaxGoMemoryMiB is the soft limit with RocksDB state when none is set.
const DefaultMaxGoMemoryMiB = 150

// apply sets the limit for a process whose state is in RocksDB (rocks) or in memory. It
// returns the limit set in bytes (0: none).
func (f GoMemoryFlag) apply(rocks bool) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	mib := f.MaxGoMemory
	if mib == 0 && rocks {
		mib = DefaultMaxGoMemoryMiB
	}
	if mib <= 0 {
		return 0
	}
	base := mib << 20
	debug.SetMemoryLimit(base)
	keepLimitFrom(base)
	return base
}

// limitBase is the limit keepLimit keeps (0: none); keeping starts once per process.
var (
	limitBase   atomic.Int64
	keepingOnce sync.Once
)

// keepLimitFrom has the limit kept at base or liveHeapFactor times the live heap after
// each collection.
func keepLimitFrom(base int64) {
	limitBase.Store(base)
	keepingOnce.Do(func() {
		afterEachGC(func() {
			if b := limitBase.Load(); b > 0 {
				keepLimit(b)
			}
		})
	})
}

// liveHeapFactor is how far above the live heap the limit in force is kept. At 2 (the
// heap GOGC=100 lets grow) Nexmark q9, q16 and q23 peaked 40-60 MiB higher with RocksDB
// state for the same events per CPU-second within the noise (docs/benchmarks.md, "The Go
// heap's headroom").
const liveHeapFactor = 1.5

// keepLimit sets the soft limit to base or liveHeapFactor times the live heap, the larger.
func keepLimit(base int64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	limit := max(base, int64(liveHeapFactor*float64(s[0].Value.Uint64())))
	if cur := debug.SetMemoryLimit(-1); cur != limit {
		debug.SetMemoryLimit(limit)
	}
}

// gcSentinel is an object whose finalizer runs once a collection found it unreachable. It
// holds a pointer so that it is not one of the tiny allocations that share a block (whose
// finalizers may never run).
type gcSentinel struct{ _ *byte }

// afterEachGC calls fn after each garbage collection (from the finalizer goroutine): it
// costs nothing while the process allocates nothing.
func afterEachGC(fn func()) {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		fn()
		afterEachGC(fn)
	})
}
