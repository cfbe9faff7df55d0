package exec

import (
	"math/bits"
	"sync"
	"time"
)

// Checkpoint phase times: where a checkpoint's time goes, from the barrier's injection to
// the publication of the outbox, kept per job as histograms (Job.CheckpointTimes). The
// exactly-once output of a row waits for the rest of the epoch it belongs to and then for
// all of these phases, so they are what a latency tail is made of (docs/benchmarks.md,
// "Latency").

// DurationHistogram counts durations in buckets of powers of two microseconds: bucket 0
// holds durations under 1 µs, bucket i ≥ 1 those in [2^(i-1), 2^i) µs; the last bucket
// also holds everything longer.
type DurationHistogram struct {
	Buckets [28]int64
	N       int64
	Max     time.Duration
}

func (h *DurationHistogram) add(d time.Duration) {
	us := uint64(max(d, 0) / time.Microsecond)
	i := min(bits.Len64(us), len(h.Buckets)-1)
	h.Buckets[i]++
	h.N++
	h.Max = max(h.Max, d)
}

// Quantile returns an upper bound of the q-quantile (0 < q ≤ 1): the upper edge of the
// bucket holding it, or Max when that is smaller; 0 when the histogram is empty.
func (h *DurationHistogram) Quantile(q float64) time.Duration {
	if h.N == 0 {
		return 0
	}
	rank := int64(q * float64(h.N))
	if rank >= h.N {
		rank = h.N - 1
	}
	var seen int64
	for i, c := range h.Buckets {
		seen += c
		if seen > rank {
			return min(time.Duration(uint64(1)<<i)*time.Microsecond, h.Max)
		}
	}
	return h.Max
}

// CheckpointTimes are the phase histograms of the checkpoints a job committed. Align, Commit
// and Publish add up to Total.
type CheckpointTimes struct {
	// Align: from the barrier's injection until the last stage of the commit group handed
	// its part over (the barrier's way through the stages, behind the rows before it, and
	// each stage's wait for the previous commit).
	Align DurationHistogram
	// Commit: the atomic write of the checkpoint (Env.Commit).
	Commit DurationHistogram
	// Publish: appending the epoch's outbox to the sinks once the commit returned.
	Publish DurationHistogram
	// Total: from injection until the outbox is published.
	Total DurationHistogram
}

// cpTimesKeep is how many epochs back an injection time is kept for the commit groups that
// have not committed it yet.
const cpTimesKeep = 64

// cpTimes records checkpoint phases; the zero value is ready.
type cpTimes struct {
	mu       sync.Mutex
	injected map[int64]time.Time // epoch -> when its barrier was injected
	t        CheckpointTimes
}

// inject notes when the barrier of epoch was injected.
func (c *cpTimes) inject(epoch int64, at time.Time) {
	c.mu.Lock()
	if c.injected == nil {
		c.injected = map[int64]time.Time{}
	}
	c.injected[epoch] = at
	c.mu.Unlock()
}

// done records the phases of epoch, committed from start to committed and published by
// published. An epoch with no injection noted (a split handover's commit) counts from start.
func (c *cpTimes) done(epoch int64, start, committed, published time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inj, ok := c.injected[epoch]
	if !ok {
		inj = start
	}
	// Every commit group commits each epoch: an injection is kept until epochs well past it
	// have committed (commits land in epoch order within a group, groups run close).
	for e := range c.injected {
		if e < epoch-cpTimesKeep {
			delete(c.injected, e)
		}
	}
	c.t.Align.add(start.Sub(inj))
	c.t.Commit.add(committed.Sub(start))
	c.t.Publish.add(published.Sub(committed))
	c.t.Total.add(published.Sub(inj))
}

// CheckpointTimes returns the phase histograms of the job's checkpoints so far. A job with
// several commit groups (stages joined by shuffle topics) counts each group's commit of an
// epoch.
func (j *Job) CheckpointTimes() CheckpointTimes {
	j.cpTimes.mu.Lock()
	defer j.cpTimes.mu.Unlock()
	return j.cpTimes.t
}
