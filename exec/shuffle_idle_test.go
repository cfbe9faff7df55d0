package exec

import (
	"context"
	"fmt"
	"testing"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// permutations returns every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// A downstream split's input watermark follows the idle statuses its producing splits
// write through the shuffle topic: the minimum over the active ones, the largest of the
// idle ones when none is active (docs/sql.md "Idle splits"), whatever order the producers
// go idle and come back in (a status message or rows), and the watermark the split applies
// never goes back. The statuses survive the checkpoint encoding.
func TestShuffleIdleProducers(t *testing.T) {
	producers := []string{"a", "b", "c"}
	base := map[string]int64{"a": 100, "b": 300, "c": 200}
	for _, goIdle := range permutations(3) {
		for _, back := range permutations(3) {
			for _, byRows := range []bool{false, true} {
				name := fmt.Sprintf("idle%v-back%v-rows%v", goIdle, back, byRows)
				t.Run(name, func(t *testing.T) {
					qs := &queueSink{q: make([][]connectors.Message, 1)}
					x := &shuffleOut{ctx: context.Background(), sink: qs, qs: qs, keys: []planner.Evaluator{col(0)}, n: 1, what: "t"}
					q := newQueueState(producers)
					wm := map[string]int64{}
					idle := map[string]bool{}
					applied := MinWatermark
					read := 0
					// apply reads what was written since the last call as the shuffle reader
					// does and checks the input's watermark against the rule.
					apply := func(step string) {
						t.Helper()
						var m shuffleMsg
						for ; read < len(qs.q[0]); read++ {
							if err := decodeShuffle(qs.q[0][read].Body, &m); err != nil {
								t.Fatal(err)
							}
							if m.isWM {
								q.setStatus(m.split, m.wm, m.idle)
							} else {
								q.activate(m.split)
							}
						}
						want := MaxWatermark
						for _, p := range producers {
							if !idle[p] {
								want = min(want, wm[p])
							}
						}
						if want == MaxWatermark {
							want = MinWatermark
							for _, p := range producers {
								want = max(want, wm[p])
							}
						}
						if got := q.watermark(); got != want {
							t.Fatalf("%s: input watermark %d, want %d (wms %v idle %v)", step, got, want, wm, idle)
						}
						if w := q.watermark(); w > applied {
							applied = w
						}
						// The checkpointed state gives the same watermark.
						back, err := decodeQueueStates(encodeQueueStates([]*queueState{q}))
						if err != nil {
							t.Fatal(err)
						}
						back[0].producers = producers
						if got, want := back[0].watermark(), q.watermark(); got != want {
							t.Fatalf("%s: watermark %d after the checkpoint round trip, want %d", step, got, want)
						}
					}
					for _, p := range producers {
						wm[p] = base[p]
						if err := x.SplitStatus(p, wm[p], false); err != nil {
							t.Fatal(err)
						}
					}
					apply("all active")
					if applied != 100 {
						t.Fatalf("watermark %d with every producer active, want 100", applied)
					}
					// Each producer goes idle: its instance pulls it up (here to 400 plus
					// its index, as instances that read different largest event times).
					for i, k := range goIdle {
						p := producers[k]
						wm[p], idle[p] = 400+int64(i), true
						if err := x.SplitStatus(p, wm[p], true); err != nil {
							t.Fatal(err)
						}
						apply("idle " + p)
					}
					if applied != 402 {
						t.Fatalf("watermark %d with every producer idle, want 402 (the largest)", applied)
					}
					// Each comes back with records: the applied watermark never goes back,
					// so rows of the other producers at or above it are not late.
					for _, k := range back {
						p := producers[k]
						before := applied
						idle[p] = false
						if byRows {
							b := &Batch{Split: p, Rows: []sql.Row{{sql.Varchar("u"), sql.BigInt(1)}}, Offsets: []int64{int64(len(qs.q[0]))}}
							if err := x.Process(b); err != nil {
								t.Fatal(err)
							}
						} else if err := x.SplitStatus(p, wm[p], false); err != nil {
							t.Fatal(err)
						}
						apply("active " + p)
						if applied < before {
							t.Fatalf("applied watermark went back from %d to %d", before, applied)
						}
						// The producer's watermark rises past the others' with its records.
						wm[p] += 100
						if err := x.SplitStatus(p, wm[p], false); err != nil {
							t.Fatal(err)
						}
						apply("rise " + p)
					}
				})
			}
		}
	}
}

// A finished producer neither holds the input back nor counts as active: with the others
// idle the input goes to their largest watermark, not to +inf.
func TestShuffleIdleAndFinished(t *testing.T) {
	q := newQueueState([]string{"a", "b", "c"})
	q.setStatus("a", MaxWatermark, false)
	q.setStatus("b", 50, true)
	if w := q.watermark(); w != MinWatermark {
		t.Fatalf("watermark %d with c silent, want none", w)
	}
	q.setStatus("c", 70, true)
	if w := q.watermark(); w != 70 || !q.allIdle() {
		t.Fatalf("watermark %d allIdle %v, want 70 and idle", w, q.allIdle())
	}
	q.activate("b")
	if w := q.watermark(); w != 50 || q.allIdle() {
		t.Fatalf("watermark %d allIdle %v after b's rows, want 50 and not idle", w, q.allIdle())
	}
}

// Messages and checkpoints written before idleness crossed exchanges read as active.
func TestShuffleIdleOldFormats(t *testing.T) {
	var m shuffleMsg
	if err := decodeShuffle([]byte("P\x02s0\x02"), &m); err != nil || !m.isWM || m.idle || m.wm != 1 {
		t.Fatalf("old P: %+v %v", m, err)
	}
	if err := decodeShuffle([]byte("P\x02s0\x02\x01"), &m); err != nil || !m.idle || m.wm != 1 {
		t.Fatalf("idle P: %+v %v", m, err)
	}
	if err := decodeShuffle([]byte("P\x02s0\x02\x02"), &m); err == nil {
		t.Fatal("unknown P flags decoded")
	}
	// version 1, one input, next 0, one producer "s0" with flags 2 (watermark) wm 5.
	old := []byte{1, 1, 0, 1, 2, 's', '0', 2, 10}
	qs, err := decodeQueueStates(old)
	if err != nil || len(qs) != 1 || qs[0].wms["s0"] != 5 || qs[0].idle["s0"] {
		t.Fatalf("old state: %+v %v", qs, err)
	}
	qs[0].idle["s0"] = true
	back, err := decodeQueueStates(encodeQueueStates(qs))
	if err != nil || !back[0].idle["s0"] || back[0].wms["s0"] != 5 {
		t.Fatalf("idle state round trip: %+v %v", back, err)
	}
}
