package exec

import (
	"context"
	"sync"
	"testing"
	"time"

	"rsql/broker"
	"rsql/state"
)

func TestEarlyCheckpointAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	for _, c := range []struct {
		name                      string
		now, due, lastEnd, lastEy time.Time
		want                      time.Time
		ok                        bool
	}{
		{"min after the last end", t0, t0.Add(900 * ms), t0.Add(-5 * ms), time.Time{}, t0.Add(5 * ms), true},
		{"at once when that is past", t0, t0.Add(900 * ms), t0.Add(-50 * ms), time.Time{}, t0, true},
		{"not later than due", t0, t0.Add(3 * ms), t0.Add(-5 * ms), time.Time{}, time.Time{}, false},
		{"one per adaptive wait", t0, t0.Add(900 * ms), t0.Add(-50 * ms), t0.Add(-500 * ms), time.Time{}, false},
		{"again after a wait", t0, t0.Add(900 * ms), t0.Add(-50 * ms), t0.Add(-time.Second), t0, true},
	} {
		got, ok := earlyCheckpointAt(c.now, c.due, c.lastEnd, c.lastEy, 10*ms, time.Second)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("%s: got %v %v, want %v %v", c.name, got.Sub(t0), ok, c.want.Sub(t0), c.ok)
		}
	}
}

// Rows a watermark releases into the outbox (a window that closed) are published by an
// early checkpoint, not after the adaptive interval: the job's commits are made slow, so the
// interval after the first one is ten times as long as that commit took, and the commit that
// publishes the window's rows still starts well before that interval is over.
func TestWindowRowsCheckpointEarly(t *testing.T) {
	b := openBrokerTopic(t, "events", 3)
	base := int64(1_796_000_000_000)
	appendAt := func(from, to int64) {
		for q := 0; q < 3; q++ {
			var msgs []broker.Message
			for ts := from; ts < to; ts += 10 {
				msgs = append(msgs, broker.Message{Body: []byte(event4{user: "u1", amount: 1, ts: base + ts, n: 1}.body())})
			}
			if _, err := b.Append("events", q, msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendAt(0, 500) // window [0, 1000) open: the watermark is 300 at most

	store := state.NewMemory()
	env := brokerEnv(b, store, true)
	env.CheckpointInterval, env.MinCheckpointInterval = time.Hour, time.Millisecond
	env.IdleTimeout = -1 // windows close by the watermark only
	var (
		mu         sync.Mutex
		n          int
		firstCost  time.Duration
		firstEnd   time.Time
		laterStart time.Time // of the second downstream commit, which holds the window's rows
	)
	entered, gate := make(chan struct{}), make(chan struct{})
	env.Commit = func(cp *CheckpointInfo) error {
		if len(cp.Offsets) == 0 || cp.Offsets[0].Stream != "bj-0-shuffle" {
			return store.Write(cp.State)
		}
		start := time.Now()
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			close(entered)
			<-gate
			time.Sleep(200 * time.Millisecond) // the cost: the next interval is ≥ 2 s
		}
		err := store.Write(cp.State)
		mu.Lock()
		if first {
			firstCost, firstEnd = time.Since(start), time.Now()
		} else if laterStart.IsZero() {
			laterStart = start
		}
		mu.Unlock()
		return err
	}
	j, err := Start(context.Background(), "bj", brokerPlan(), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	defer release()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no checkpoint")
	}
	// The first checkpoint passed the output stage; now the window closes.
	appendAt(1500, 1600)
	waitFor(t, "the window to close", func() bool { return j.Stats().Watermark >= base+1000 })
	release()
	waitFor(t, "the window's rows published", func() bool { return len(topicBodies(t, b, "out")) > 0 })
	mu.Lock()
	defer mu.Unlock()
	if laterStart.IsZero() {
		t.Fatal("rows published without a later commit")
	}
	if gap := laterStart.Sub(firstEnd); gap >= CheckpointCostFactor*firstCost {
		t.Fatalf("the commit publishing the window started %v after the first one ended (which took %v): no early checkpoint", gap, firstCost)
	}
	if ct := j.CheckpointTimes(); ct.Total.N < 2 || ct.Commit.Max < firstCost {
		t.Fatalf("checkpoint times: %d checkpoints, longest commit %v (the first took %v)", ct.Total.N, ct.Commit.Max, firstCost)
	}
}

func TestDurationHistogramQuantile(t *testing.T) {
	var h DurationHistogram
	if h.Quantile(0.5) != 0 {
		t.Fatal("empty histogram")
	}
	for i := 0; i < 98; i++ {
		h.add(3 * time.Microsecond) // bucket [2, 4) µs
	}
	h.add(100 * time.Microsecond) // [64, 128)
	h.add(5 * time.Millisecond)   // [4096, 8192) µs
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 4 * time.Microsecond}, {0.98, 128 * time.Microsecond}, {0.99, 5 * time.Millisecond}, {1, 5 * time.Millisecond}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("q %v: %v, want %v", c.q, got, c.want)
		}
	}
	if h.N != 100 || h.Max != 5*time.Millisecond {
		t.Fatalf("N %d Max %v", h.N, h.Max)
	}
}
