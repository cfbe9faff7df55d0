package broker

import (
	"os"
	"sync/atomic"
	"syscall"
)

// Resident memory of the mapped store files. The commit log, the consume queues and the
// key index are mapped MAP_SHARED, and every page the broker writes or a consumer reads
// stays in the process's resident set until it is unmapped: a broker holding 500 MiB of
// messages would count 500 MiB of RSS although the data is in its files. So the broker
// drops from its resident set the pages of the ranges that are complete and not being
// written (madvise MADV_DONTNEED): for a shared file mapping that only unmaps the pages —
// the files keep the data, a dirty page stays dirty in the page cache and is written back
// as usual, the page cache may keep the pages (and reclaims them under memory pressure,
// which it cannot do with pages held mapped), and a later read maps them again: a minor
// fault while they are still cached, a disk read otherwise.
//
// Every Config.ReleaseInterval the broker releases (releaseMapped): the commit log below its
// committed position minus residentTail, in the segments touched since the last release; every
// consume-queue and index page (their dirty pages stay dirty in the page cache and are
// written back as usual). And a pull (readRaw) releases the commit-log range it copied its
// records out of as soon as it is done, where that lies below the same limit
// (releaseRead): a consumer catching up far behind the head would otherwise keep mapped all
// it read in a ReleaseInterval, several times what it read when the queues' records are
// interleaved. What stays resident: the last residentTail bytes of the commit log before
// its committed position (consumers tailing the log read there), the chunk the writer
// reserved and had mapped ahead of it (prefault.go, at most segmentReserveChunk), the
// ranges of the pulls in progress, plus what was written or read by other means (key
// index, transactions, replication, lookups by time) since the last release.

const (
	// residentTail is how much of the commit log just below its committed position stays
	// mapped: consumers that keep up read there right after it was written.
	residentTail = 4 << 20
)

var pageSize = int64(os.Getpagesize())

// releaseMapped releases the mapped pages of the commit log, the consume queues and the
// index that may go (see above).
func (b *Broker) releaseMapped() error {
	if err := b.cl.release(); err != nil {
		return err
	}
	b.tmu.RLock()
	var qs []*consumeQueue
	for _, t := range b.topics {
		qs = append(qs, t.queues...)
	}
	b.tmu.RUnlock()
	for _, q := range qs {
		if err := q.release(); err != nil {
			return err
		}
	}
	if b.idx != nil {
		return b.idx.release()
	}
	return nil
}

// releasePages drops the whole pages inside data[from:to) from the resident set. data must
// be a shared file mapping: the pages' contents stay in the file (dirty ones are written
// back as usual).
func releasePages(data []byte, from, to int64) error {
	from = (from + pageSize - 1) / pageSize * pageSize
	to = min(to, int64(len(data))) / pageSize * pageSize
	if to <= from {
		return nil
	}
	return syscall.Madvise(data[from:to], syscall.MADV_DONTNEED)
}

// release drops the commit log's pages below its committed position minus residentTail, in
// the segments read or written since the last release.
func (cl *commitLog) release() error {
	limit := cl.committed.Load() - residentTail
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	for _, s := range cl.segs {
		if s.base >= limit {
			break
		}
		if !s.touched.Swap(false) {
			continue
		}
		hi := min(cl.segSize, limit-s.base)
		if hi < cl.segSize {
			s.touched.Store(true) // its tail is live: look again next time
		}
		if err := releasePages(s.data, 0, hi); err != nil {
			return err
		}
	}
	return nil
}

// readSpanGap: records of one read further apart than this are released as separate ranges,
// so that a read of a sparse queue does not walk the page tables of everything between them.
const readSpanGap = 1 << 20

// readSpan is the commit-log range a read (readRaw) copied records out of, released when
// the read is done (releaseRead). The zero value with cl set is ready.
type readSpan struct {
	cl       *commitLog
	from, to int64
}

// add extends the span over the record at off of size bytes, releasing the span first when
// the record does not continue it (before it, too far after it, another segment).
func (sp *readSpan) add(off, size int64) {
	if sp.to > sp.from && (off < sp.to || off-sp.to > readSpanGap || off/sp.cl.segSize != sp.from/sp.cl.segSize) {
		sp.done()
	}
	if sp.to <= sp.from {
		sp.from = off
	}
	sp.to = off + size
}

// done releases the span.
func (sp *readSpan) done() {
	if sp.to > sp.from {
		sp.cl.releaseRead(sp.from, sp.to)
	}
	sp.from, sp.to = 0, 0
}

// releaseRead drops the pages of [from, to), a range of one segment a reader has copied out,
// when they lie below the committed position minus residentTail: a consumer catching up far
// behind the head would otherwise keep every page it read mapped until the next release —
// with the records of several queues interleaved in the log, each queue's reader maps the
// whole span it crosses, so readers of four queues held about four times what they read per
// ReleaseInterval (docs/benchmarks.md, "A pull releases the log it read"). The edge pages
// go too: what is below the limit is complete and not written any more, and another reader
// of them maps them again (a minor fault). Releasing is advice: a failure changes nothing
// stored.
func (cl *commitLog) releaseRead(from, to int64) {
	limit := cl.committed.Load() - residentTail
	if min(to, limit) <= from {
		return
	}
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	s := cl.segFor(from)
	if s == nil {
		return
	}
	lo := (from - s.base) / pageSize * pageSize
	hi := min(roundUpPage(to-s.base), (limit-s.base)/pageSize*pageSize, cl.segSize)
	releasePages(s.data, lo, hi)
}

// release drops the queue's mapped pages; the writer maps the page it appends to again.
func (q *consumeQueue) release() error {
	if !q.touched.Swap(false) {
		return nil
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	for _, f := range q.files {
		if err := releasePages(f.data, 0, int64(len(f.data))); err != nil {
			return err
		}
	}
	return nil
}

// release drops the index files' mapped pages (files kept in memory have none).
func (s *indexService) release() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, x := range s.files {
		if x.f == nil || !x.touched.Swap(false) {
			continue
		}
		if err := releasePages(x.data, 0, int64(len(x.data))); err != nil {
			return err
		}
	}
	return nil
}

// Read-ahead on the writer's faults. A store file grows by the writer's first touch of each
// page of its mapping, and a page fault on a file mapping reads ahead: with the device's
// read-ahead window (8 MiB on the development machine's disk) one fault on a fresh page of
// a preallocated file makes the kernel allocate and zero-fill the whole window, about 20
// ms, while the writer holds Broker.wmu — every producer and every job's publish waits
// (docs/benchmarks.md, "Latency"). So the mappings the writer writes are advised
// MADV_RANDOM (no read-ahead; a fault maps one page): the commit-log segment being
// written, the consume queues and the key index (their reads are small and scattered
// anyway). A commit-log segment the writer has left is advised MADV_NORMAL again, so a
// consumer catching up from disk reads it with read-ahead.

// writingAdvice is the advice adviseWriting gives (a variable so that a benchmark can
// compare with read-ahead on: BenchmarkAppendStalls).
var writingAdvice = syscall.MADV_RANDOM

// adviseWriting turns read-ahead off on a mapping the writer appends to.
func adviseWriting(data []byte) error { return syscall.Madvise(data, writingAdvice) }

// adviseReading turns read-ahead back on once the writer has left the mapping.
func adviseReading(data []byte) error { return syscall.Madvise(data, syscall.MADV_NORMAL) }

// touchFlag says that pages of a mapping may have become resident since the last release:
// a release skips mappings nobody wrote or read since (with many idle topics, releasing
// every queue's pages each ReleaseInterval was most of an idle server's CPU).
type touchFlag struct{ atomic.Bool }

// mark sets the flag, writing the shared word only when it is not set yet.
func (t *touchFlag) mark() {
	if !t.Load() {
		t.Store(true)
	}
}
