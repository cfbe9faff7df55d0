package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// The Go memory limit: 160 MiB by default with RocksDB state, none with memory state or
// when negative, the flag's value otherwise, and GOMEMLIMIT left alone when set.
func TestGoMemoryFlag(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { limitBase.Store(0); debug.SetMemoryLimit(before) })
	for _, c := range []struct {
		mib   int64
		rocks bool
		want  int64 // the limit in force after apply, MiB; -1: unchanged
	}{
		{0, true, DefaultMaxGoMemoryMiB},
		{0, false, -1},
		{-1, true, -1},
		{300, false, 300},
		{300, true, 300},
	} {
		limitBase.Store(0)
		debug.SetMemoryLimit(math.MaxInt64)
		set := GoMemoryFlag{MaxGoMemory: c.mib}.apply(c.rocks)
		got := debug.SetMemoryLimit(-1)
		if c.want < 0 {
			if set != 0 || got != math.MaxInt64 {
				t.Fatalf("%d MiB, rocks %v: set %d, limit %d; want none", c.mib, c.rocks, set, got)
			}
			continue
		}
		if set != c.want<<20 || got != c.want<<20 {
			t.Fatalf("%d MiB, rocks %v: set %d, limit %d; want %d MiB", c.mib, c.rocks, set, got, c.want)
		}
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	(GoMemoryFlag{MaxGoMemory: 300}).apply(true)
	if debug.SetMemoryLimit(-1) != 1<<30 {
		t.Fatal("GOMEMLIMIT in the environment was overridden")
	}
}

// A live heap above the limit's share raises the limit to liveHeapFactor times it after a
// collection, and a heap that shrinks brings the limit back.
func TestGoMemoryLimitFollowsLiveHeap(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { limitBase.Store(0); debug.SetMemoryLimit(before) })
	const base = 4 << 20
	debug.SetMemoryLimit(base)
	keepLimitFrom(base)
	live := make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	deadline := time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) < int64(liveHeapFactor*64<<20) {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d with 64 MiB live: not raised to %.1f times the live heap", debug.SetMemoryLimit(-1), liveHeapFactor)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(live)
	live = nil
	for debug.SetMemoryLimit(-1) != base {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d with nothing live: not back to %d", debug.SetMemoryLimit(-1), base)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
