package state

/*
#include <malloc.h>

// fixMmapThreshold makes the C allocator serve every block of at least threshold bytes
// with its own mapping, returned to the system when freed. 0 where the allocator has no
// such setting.
static int fixMmapThreshold(int threshold) {
#ifdef M_MMAP_THRESHOLD
	return mallopt(M_MMAP_THRESHOLD, threshold);
#else
	return 0;
#endif
}
*/
import "C"

import "sync"

// mmapThreshold is the size from which RocksDB's allocations (through the C allocator) get
// mappings of their own.
const mmapThreshold = 256 << 10

var fixMallocOnce sync.Once

// fixMalloc stops glibc's allocator from keeping the copies of large write batches
// (state.Batch's encoding, copied into RocksDB at every checkpoint) after they are freed.
// By default glibc raises its mmap threshold to the size of the largest mapped block freed
// (up to 32 MiB), so from the second checkpoint on each batch copy comes from the heap,
// whose freed memory stays in the process: q5 with RocksDB state held about 40 MiB more
// (docs/benchmarks.md). A fixed threshold keeps large blocks mapped and unmapped on free.
// It is process-wide and set once, when the first RocksDB store opens.
func fixMalloc() {
	fixMallocOnce.Do(func() { C.fixMmapThreshold(C.int(mmapThreshold)) })
}
