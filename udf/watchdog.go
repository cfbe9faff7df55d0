package udf

import (
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The watchdog enforces the per-call limits of user code that cannot enforce them itself:
// one goroutine, running while any instance is registered, checks every tick whether an
// instance's current call has run past its time limit (in wall-clock time, while the
// process got at least that much CPU time), or (JavaScript, which has no heap
// of its own) whether the process has allocated more than the memory limit since the
// call began, and then interrupts it. A call costs two atomic stores when it begins and
// one store and one load when it ends; the watchdog takes the instance's lock only when
// it interrupts, and the caller only when it was interrupted.

const tick = 5 * time.Millisecond

// Reasons a call was interrupted.
const (
	reasonNone int32 = iota
	reasonTimeout
	reasonMemory
)

// watch guards the calls of one instance (a JavaScript VM or a wasm module instance),
// which its owner uses from one goroutine at a time.
type watch struct {
	timeout   atomic.Int64 // nanoseconds
	memLimit  uint64       // bytes the process may allocate during a call (0: no limit)
	interrupt func(int32)  // stops the running call; runs on the watchdog's goroutine

	seq    uint64        // the caller's: number of its last call
	active atomic.Uint64 // the running call's number, 0 between calls
	start  atomic.Int64  // when it began (watchdog clock, nanoseconds)
	fired  atomic.Uint64 // the call the watchdog is about to interrupt
	mu     sync.Mutex    // held by the watchdog while it interrupts; guards hit, reason
	hit    uint64        // the call it interrupted
	reason int32

	// the watchdog's own: the call it last saw, and the allocation count and the
	// process's CPU time then
	seen    uint64
	allocs0 uint64
	cpu0    time.Duration
}

// begin marks the start of a call.
func (w *watch) begin() {
	w.seq++
	w.start.Store(clock.Load())
	w.active.Store(w.seq)
}

// end marks the end of the current call and reports whether the watchdog interrupted
// it, and why (reasonNone when it did not). An interrupt may land just after the call
// returned; either way it is complete when end returns, so the caller may reset the
// instance.
func (w *watch) end() int32 {
	w.active.Store(0)
	if w.fired.Load() != w.seq {
		return reasonNone
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hit != w.seq {
		return reasonNone
	}
	return w.reason
}

// processCPU is the CPU time (user and system) of the whole process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 1 << 62 // unknown: judge by wall-clock time alone
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// newWatch returns a watch with the given limits that interrupts calls with interrupt.
func newWatch(timeout time.Duration, memLimit uint64, interrupt func(int32)) *watch {
	w := &watch{memLimit: memLimit, interrupt: interrupt}
	w.timeout.Store(int64(timeout))
	return w
}

var dog struct {
	mu      sync.Mutex
	watches map[*watch]struct{}
	running bool
}

// clock is the watchdog's time, nanoseconds since base: set when a watch is registered
// and advanced every tick while any is.
var (
	clock atomic.Int64
	base  = time.Now()
)

// register starts guarding w; unregister stops.
func register(w *watch) {
	dog.mu.Lock()
	defer dog.mu.Unlock()
	if dog.watches == nil {
		dog.watches = map[*watch]struct{}{}
	}
	dog.watches[w] = struct{}{}
	clock.Store(int64(time.Since(base)))
	if !dog.running {
		dog.running = true
		go watchdog()
	}
}

func unregister(w *watch) {
	dog.mu.Lock()
	delete(dog.watches, w)
	dog.mu.Unlock()
}

func watchdog() {
	t := time.NewTicker(tick)
	defer t.Stop()
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	var ws []*watch
	for range t.C {
		now := int64(time.Since(base))
		clock.Store(now)
		dog.mu.Lock()
		if len(dog.watches) == 0 {
			dog.running = false
			dog.mu.Unlock()
			return
		}
		ws = ws[:0]
		for w := range dog.watches {
			ws = append(ws, w)
		}
		dog.mu.Unlock()
		var allocs uint64
		read := false
		for _, w := range ws {
			s := w.active.Load()
			if s == 0 {
				continue
			}
			if w.memLimit > 0 && !read {
				metrics.Read(sample)
				allocs, read = sample[0].Value.Uint64(), true
			}
			if w.seen != s {
				w.seen, w.allocs0, w.cpu0 = s, allocs, processCPU()
				continue // give it a whole tick before judging
			}
			reason := reasonNone
			limit := w.timeout.Load()
			switch {
			// Over the limit in wall-clock time, and the process has had that much CPU time
			// since the call was first seen (less the tick before): a call whose thread the
			// machine did not run, on a loaded host, is not stopped for it.
			case now-w.start.Load() > limit && int64(processCPU()-w.cpu0) > limit-int64(tick):
				reason = reasonTimeout
			case w.memLimit > 0 && allocs-w.allocs0 > w.memLimit:
				reason = reasonMemory
			}
			if reason == reasonNone {
				continue
			}
			w.mu.Lock()
			w.fired.Store(s)
			if w.active.Load() == s {
				w.hit, w.reason = s, reason
				w.interrupt(reason)
			}
			w.mu.Unlock()
		}
	}
}
