package exec

import (
	"context"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
)

// wmMessages decodes the watermark messages of queue q: (split, wm, idle) in order.
func wmMessages(t *testing.T, qs *queueSink, q int) []shuffleMsg {
	t.Helper()
	var out []shuffleMsg
	for _, m := range qs.q[q] {
		var sm shuffleMsg
		if err := decodeShuffle(m.Body, &sm); err != nil {
			t.Fatal(err)
		}
		if sm.isWM {
			out = append(out, shuffleMsg{isWM: true, split: sm.split, wm: sm.wm, idle: sm.idle})
		}
	}
	return out
}

// A source split whose watermark rises with every small batch writes it to the shuffle
// topic's queues at most once per gap (the stage's tick), not once per batch: the newest
// rise goes out at the first status report after the gap, and at once on a change of idle
// status, at the end of input and at a checkpoint. Every queue gets the same messages.
func TestShuffleWatermarkGap(t *testing.T) {
	const queues = 4
	qs := &queueSink{q: make([][]connectors.Message, queues)}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	x := &shuffleOut{ctx: context.Background(), sink: qs, qs: qs, keys: []planner.Evaluator{col(0)}, n: queues, what: "t",
		gap: 100 * time.Millisecond, now: func() time.Time { return now }}
	// 1000 batches a millisecond apart, each raising the watermark of s0 (and, every other
	// one, of s1): one second of input.
	for i := 1; i <= 1000; i++ {
		now = now.Add(time.Millisecond)
		if err := x.SplitStatus("s0", int64(i), false); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := x.SplitStatus("s1", int64(i), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Per split: the first rise, then one per 100 ms of the second.
	if x.wmMsgs > 2*11*queues {
		t.Fatalf("%d watermark messages for 1000 rises of s0 and 500 of s1 in one second; want at most %d (one per split, queue and 100 ms)", x.wmMsgs, 2*11*queues)
	}
	if len(x.pending) == 0 {
		t.Fatalf("no rise held back after the last batch")
	}
	// A report after the gap writes the held rise (the stage's tick).
	now = now.Add(150 * time.Millisecond)
	if err := x.SplitStatus("s0", 1000, false); err != nil {
		t.Fatal(err)
	}
	if err := x.SplitStatus("s1", 1000, false); err != nil {
		t.Fatal(err)
	}
	if len(x.pending) != 0 {
		t.Fatalf("rises still held after the gap: %v", x.pending)
	}
	for q := 0; q < queues; q++ {
		last := map[string]int64{}
		for _, m := range wmMessages(t, qs, q) {
			if m.wm <= last[m.split] {
				t.Fatalf("queue %d: watermark of %s went from %d to %d", q, m.split, last[m.split], m.wm)
			}
			last[m.split] = m.wm
		}
		if last["s0"] != 1000 || last["s1"] != 1000 {
			t.Fatalf("queue %d: last watermarks %v, want 1000 for s0 and s1", q, last)
		}
	}

	// Within the gap: a rise is held, a checkpoint writes it.
	before := x.wmMsgs
	now = now.Add(time.Millisecond)
	x.SplitStatus("s0", 1001, false)
	if x.wmMsgs != before {
		t.Fatalf("a rise within the gap was written at once")
	}
	if err := x.Control(&Control{Kind: Checkpoint}); err != nil {
		t.Fatal(err)
	}
	if x.wmMsgs != before+queues || x.wms["s0"] != 1001 {
		t.Fatalf("a checkpoint did not write the held rise: %d messages (want %d), s0 at %d", x.wmMsgs, before+queues, x.wms["s0"])
	}
	// Within the gap: going idle and the end of input are written at once.
	now = now.Add(time.Millisecond)
	x.SplitStatus("s1", 1002, true)
	if got := wmMessages(t, qs, 0); !got[len(got)-1].idle || got[len(got)-1].wm != 1002 {
		t.Fatalf("idle status within the gap not written: last message %+v", got[len(got)-1])
	}
	now = now.Add(time.Millisecond)
	x.SplitStatus("s0", MaxWatermark, false)
	if got := wmMessages(t, qs, 3); got[len(got)-1].wm != MaxWatermark {
		t.Fatalf("end of input within the gap not written: last message %+v", got[len(got)-1])
	}
	// A removed split writes its held rise before another owner may take it.
	now = now.Add(time.Second)
	x.SplitStatus("s2", 5, false)
	now = now.Add(time.Millisecond)
	x.SplitStatus("s2", 6, false)
	if err := x.Control(&Control{Kind: RemoveSplit, Split: "s2"}); err != nil {
		t.Fatal(err)
	}
	if got := wmMessages(t, qs, 1); got[len(got)-1].split != "s2" || got[len(got)-1].wm != 6 {
		t.Fatalf("a removed split's held rise not written: last message %+v", got[len(got)-1])
	}
}
