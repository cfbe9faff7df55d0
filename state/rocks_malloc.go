package state

/*
#cgo LDFLAGS: -lpthread
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

// limitArenas bounds the C allocator's arenas to n. 0 where it has no such setting.
static int limitArenas(int n) {
#ifdef M_ARENA_MAX
	return mallopt(M_ARENA_MAX, n);
#else
	return 0;
#endif
}

// arenasAtStart bounds the arenas as the program loads, before any thread but the first
// exists (an arena made stays for good): one for each online processor, two to eight,
// unless MALLOC_ARENA_MAX is set. fixMalloc sets the bound again from GOMAXPROCS.
__attribute__((constructor)) static void arenasAtStart(void) {
	if (getenv("MALLOC_ARENA_MAX") != NULL) {
		return;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	limitArenas(n < 2 ? 2 : n > 8 ? 8 : (int)n);
}

static pthread_barrier_t arenaBarrier;
static void *volatile arenaBlocks[64];

// allocTogether allocates a block kept until every thread has one (the compiler may not
// drop an allocation stored where others can see it).
static void *allocTogether(void *arg) {
	long i = (long)arg;
	arenaBlocks[i] = malloc(4096);
	pthread_barrier_wait(&arenaBarrier);
	free(arenaBlocks[i]);
	arenaBlocks[i] = NULL;
	return NULL;
}

// countArenas has threads threads allocate at the same time, then counts the arenas the
// allocator reports (malloc_info's heaps); -1 when it cannot tell.
static int countArenas(int threads) {
	pthread_t t[64];
	if (threads > 64) {
		threads = 64;
	}
	if (pthread_barrier_init(&arenaBarrier, NULL, threads) != 0) {
		return -1;
	}
	int started = 0;
	for (; started < threads; started++) {
		if (pthread_create(&t[started], NULL, allocTogether, (void *)(long)started) != 0) {
			break;
		}
	}
	if (started < threads) {
		// The barrier would never open: report nothing rather than hang.
		return -1;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(t[i], NULL);
	}
	pthread_barrier_destroy(&arenaBarrier);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL) {
		return -1;
	}
	int ok = malloc_info(0, f) == 0;
	fclose(f);
	int n = 0;
	for (char *p = buf; ok && (p = strstr(p, "<heap nr=")) != NULL; p++) {
		n++;
	}
	free(buf);
	return ok ? n : -1;
}
*/
import "C"

import (
	"os"
	"runtime"
	"sync"
)

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
//
// It also bounds glibc's arenas (mallocArenas): by default a thread that allocates while
// the others' arenas are busy gets an arena of its own, up to eight per core, and each
// keeps the memory freed in it. RocksDB's threads (flushes, compactions, blob files) and
// the Go threads calling into it spread over the arenas (six holding 22 MiB at Nexmark
// q9's peak); with two, q9's C side held 7-10 MiB less for the same events per CPU-second
// (docs/benchmarks.md, "The C allocator's arenas").
//
// Both are process-wide and set once, when the first RocksDB store opens; the arenas'
// bound is set as the program loads too (arenasAtStart), since arenas made before it stay.
// MALLOC_ARENA_MAX in the environment takes precedence over the arenas' bound.
func fixMalloc() {
	fixMallocOnce.Do(func() {
		C.fixMmapThreshold(C.int(mmapThreshold))
		if os.Getenv("MALLOC_ARENA_MAX") == "" {
			C.limitArenas(C.int(mallocArenas()))
		}
	})
}

// mallocArenas is how many arenas the C allocator may have: one for each processor Go
// runs on, at least two and at most eight.
func mallocArenas() int { return min(max(runtime.GOMAXPROCS(0), 2), 8) }

// countArenas is how many arenas the C allocator has after threads threads allocated at
// once (-1: unknown), for tests.
func countArenas(threads int) int { return int(C.countArenas(C.int(threads))) }

// onlineProcessors is the count arenasAtStart bounds the arenas by (sysconf's online
// processors, which may exceed runtime.NumCPU: that counts the processors the process
// may run on).
func onlineProcessors() int { return int(C.sysconf(C._SC_NPROCESSORS_ONLN)) }
