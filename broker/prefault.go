package broker

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Prefaulting the commit log. Advised MADV_RANDOM (resident.go), the segment being written
// takes one page fault per page the writer touches first, under the writer lock: about 4
// µs each, which makes appending large messages slower than it was with read-ahead. So when
// the writer reserves a new chunk of a segment (segmentReserveChunk, 4 MiB), a goroutine of
// the commit log maps that chunk writable ahead of it with MADV_POPULATE_WRITE (Linux 5.14;
// it faults the pages in without touching their bytes, so it may run while the writer
// writes there). The writer, reaching the chunk, finds its pages mapped. A kernel without
// it answers EINVAL once and the prefaulter stops trying; nothing else depends on it.

// noPrefault turns prefaulting off (BenchmarkAppendStalls compares).
var noPrefault bool

// prefaultStep is how much one MADV_POPULATE_WRITE call maps.
const prefaultStep = 128 << 10

// prefaultReq is a range of a segment to map ahead of the writer.
type prefaultReq struct {
	s        *segment
	from, to int64
}

// prefaulter is the commit log's prefaulting goroutine; the zero value is ready.
type prefaulter struct {
	once, stopOnce sync.Once
	reqs           chan prefaultReq
	stop, done     chan struct{}
	off            atomic.Bool // the kernel refused MADV_POPULATE_WRITE
}

// ahead asks for s.data[from:to] to be mapped; it never blocks the writer (a request that
// finds the queue full is dropped: the writer then faults those pages itself).
func (cl *commitLog) ahead(s *segment, from, to int64) {
	p := &cl.pf
	if p.off.Load() || to <= from || noPrefault {
		return
	}
	p.once.Do(func() {
		p.reqs, p.stop, p.done = make(chan prefaultReq, 4), make(chan struct{}), make(chan struct{})
		go cl.prefault()
	})
	select {
	case p.reqs <- prefaultReq{s, from, to}:
	default:
	}
}

func (cl *commitLog) prefault() {
	p := &cl.pf
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case r := <-p.reqs:
			// In steps of prefaultStep: the kernel holds the process's memory-map lock for
			// each call, and a long hold would hold up whatever waits to change the map
			// (the Go heap growing) and the page faults queued behind that.
			for from := r.from; from < r.to; from += prefaultStep {
				// Under the read lock the segment cannot be unmapped (dropOldest, close).
				cl.mu.RLock()
				if cl.segFor(r.s.base) == r.s {
					if err := unix.Madvise(r.s.data[from:min(from+prefaultStep, r.to)], unix.MADV_POPULATE_WRITE); err == unix.EINVAL {
						p.off.Store(true)
					}
				}
				cl.mu.RUnlock()
				if p.off.Load() {
					break
				}
			}
		}
	}
}

// stopPrefault stops the goroutine (if it started) and waits for it.
func (cl *commitLog) stopPrefault() {
	p := &cl.pf
	p.stopOnce.Do(func() {
		started := false
		p.once.Do(func() {}) // no goroutine may start from now on
		if p.stop != nil {
			started = true
			close(p.stop)
		}
		if started {
			<-p.done
		}
	})
}
