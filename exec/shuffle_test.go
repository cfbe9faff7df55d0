package exec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// queueSink records shuffle messages per queue.
type queueSink struct{ q [][]connectors.Message }

func (s *queueSink) Queues() int { return len(s.q) }
func (s *queueSink) WriteQueue(_ context.Context, q int, msgs []connectors.Message) error {
	for _, m := range msgs {
		s.q[q] = append(s.q[q], connectors.Message{Body: append([]byte(nil), m.Body...)})
	}
	return nil
}
func (s *queueSink) Write(context.Context, []connectors.Message) error { return nil }
func (s *queueSink) Flush(context.Context) error                       { return nil }
func (s *queueSink) Close() error                                      { return nil }

// A replayed upstream batch (same source offsets, different batch boundaries) is dropped
// row for row by the dedup marks; new rows pass; watermarks reach every queue.
func TestShuffleIdsDedupReplay(t *testing.T) {
	qs := &queueSink{q: make([][]connectors.Message, 3)}
	x := &shuffleOut{ctx: context.Background(), sink: qs, qs: qs, keys: []planner.Evaluator{col(0)}, n: 3, what: "t"}
	batch := func(from, to int64) *Batch {
		b := &Batch{Split: "s0"}
		for o := from; o < to; o++ {
			// Two rows per source record (as a hop window assignment would make).
			for k := 0; k < 2; k++ {
				b.Rows = append(b.Rows, sql.Row{sql.Varchar(fmt.Sprintf("u%d", o%5)), sql.BigInt(o*10 + int64(k))})
				b.Offsets = append(b.Offsets, o)
			}
		}
		return b
	}
	for _, b := range []*Batch{batch(0, 10), batch(10, 20)} {
		if err := x.Process(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.SplitWatermark("s0", 1234); err != nil {
		t.Fatal(err)
	}
	// The upstream restarts from offset 5 and reads in other batch sizes.
	for _, b := range []*Batch{batch(5, 12), batch(12, 25)} {
		if err := x.Process(b); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int64]int{}
	for q, msgs := range qs.q {
		marks := map[string]dedupMark{}
		sawWM := false
		var sm shuffleMsg
		for _, m := range msgs {
			if err := decodeShuffle(m.Body, &sm); err != nil {
				t.Fatalf("queue %d: %v", q, err)
			}
			if sm.isWM {
				sawWM = sm.wm == 1234 && sm.split == "s0" && !sm.allSplits
				continue
			}
			split := sm.split
			mk, seen := marks[split]
			for _, r := range sm.rows {
				if seen && mk.covers(r.off, r.seq) {
					continue
				}
				mk, seen = dedupMark{r.off, r.seq}, true
				got[r.row[1].I]++
			}
			marks[split] = mk
		}
		if !sawWM {
			t.Errorf("queue %d has no watermark message", q)
		}
		back, err := decodeMarks(encodeMarks(marks))
		if err != nil || len(back) != len(marks) || back["s0"] != marks["s0"] {
			t.Errorf("marks round trip: %v %v", back, err)
		}
	}
	for o := int64(0); o < 25; o++ {
		for k := int64(0); k < 2; k++ {
			if got[o*10+k] != 1 {
				t.Errorf("row %d delivered %d times", o*10+k, got[o*10+k])
			}
		}
	}
	if len(got) != 50 {
		t.Errorf("%d distinct rows, want 50", len(got))
	}
}

// dedupSink is a memSink that keeps message ids.
type dedupSink struct {
	memSink
	ids []string
}

func (s *dedupSink) Write(ctx context.Context, msgs []connectors.Message) error {
	for _, m := range msgs {
		s.ids = append(s.ids, m.ID)
	}
	return s.memSink.Write(ctx, msgs)
}
func (s *dedupSink) Position(context.Context) ([]byte, error) { return []byte{byte(len(s.ids))}, nil }
func (s *dedupSink) IDsSince(_ context.Context, pos []byte, prefix string, fn func(string)) error {
	for _, id := range s.ids[pos[0]:] {
		if strings.HasPrefix(id, prefix) {
			fn(id)
		}
	}
	return nil
}

// The outbox: rows wait for the commit; an entry committed but published only in part is
// completed on recovery without writing any row twice.
func TestOutboxPublishesAfterCommitAndRecovers(t *testing.T) {
	store := state.NewMemory()
	ds := &dedupSink{}
	s := &sinkOp{ctx: context.Background(), sink: ds, cnt: &counters{}, what: "out"}
	s.eo = &outbox{job: "j", stage: 1, store: store, ds: ds}
	s.eo.add("q", []connectors.Message{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}, nil)
	c := &Control{Kind: Checkpoint, Epoch: 7, State: &state.Batch{}}
	if err := s.Control(c); err != nil {
		t.Fatal(err)
	}
	if len(ds.ids) != 0 {
		t.Fatal("rows written before their checkpoint committed")
	}
	if err := store.Write(c.State); err != nil {
		t.Fatal(err)
	}
	// Crash in the middle of publishing: only "a" reached the sink.
	if err := ds.Write(context.Background(), []connectors.Message{{Body: []byte("a"), ID: unitMessageID("j", 7, "q", 0)}}); err != nil {
		t.Fatal(err)
	}
	s2 := &sinkOp{ctx: context.Background(), sink: ds, cnt: &counters{}, what: "out"}
	s2.eo = &outbox{job: "j", stage: 1, store: store, ds: ds}
	if err := s2.eo.recover(context.Background(), s2, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ds.bodies(), ","); got != "a,b,c" {
		t.Fatalf("sink holds %s, want a,b,c", got)
	}
	if want := "j/7.q/0 j/7.q/1 j/7.q/2"; strings.Join(ds.ids, " ") != want {
		t.Fatalf("ids %v, want %s", ds.ids, want)
	}
	// The next checkpoint deletes the published entry.
	c2 := &Control{Kind: Checkpoint, Epoch: 8, State: &state.Batch{}}
	if err := s2.Control(c2); err != nil {
		t.Fatal(err)
	}
	if err := store.Write(c2.State); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(store, state.OperatorPrefix(nil, "j", "out1")); n != 0 {
		t.Fatalf("%d outbox entries left", n)
	}
}

func countKeys(store state.Store, prefix []byte) int {
	n := 0
	store.Scan(prefix, func(k, v []byte) error { n++; return nil })
	return n
}

// An outbox entry belongs to its split: a split removed from one sink (its rows since the
// last checkpoint committed as its last entry, published after that commit) and added to
// another — the crash of the first between commit and publication included — reaches the
// sink once; an entry written before splits had their own entries is still recovered.
func TestOutboxEntryMovesWithItsSplit(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			ctx := context.Background()
			store := state.NewMemory()
			ds := &dedupSink{}
			// An entry of an older version, under the stage's own key, committed and not published.
			legacy := &state.Batch{}
			legacy.Put(legacyOutboxKey("j", 1, 3), encodeOutbox([]byte{0}, []connectors.Message{{Body: []byte("old")}}))
			if err := store.Write(legacy); err != nil {
				t.Fatal(err)
			}
			open := func() *sinkOp {
				s := &sinkOp{ctx: ctx, sink: ds, cnt: &counters{}, what: "out"}
				s.eo = &outbox{job: "j", stage: 1, store: store, ds: ds}
				return s
			}
			a := open()
			if err := a.eo.recover(ctx, a, nil); err != nil {
				t.Fatal(err)
			}
			a.eo.add("0", []connectors.Message{{Body: []byte("x0")}}, nil)
			a.eo.add("1", []connectors.Message{{Body: []byte("y0")}}, nil)
			c := &Control{Kind: Checkpoint, Epoch: 10, State: &state.Batch{}}
			if err := a.Control(c); err != nil {
				t.Fatal(err)
			}
			if err := store.Write(c.State); err != nil {
				t.Fatal(err)
			}
			if err := a.committed(10); err != nil {
				t.Fatal(err)
			}
			a.eo.add("1", []connectors.Message{{Body: []byte("y1")}, {Body: []byte("y2")}}, nil)
			rm := &Control{Kind: RemoveSplit, Split: "1", Epoch: 11, State: &state.Batch{}}
			if err := a.Control(rm); err != nil {
				t.Fatal(err)
			}
			if err := store.Write(rm.State); err != nil {
				t.Fatal(err)
			}
			if !crash {
				if err := a.removed("1"); err != nil {
					t.Fatal(err)
				}
			}
			b := open()
			if err := b.eo.recover(ctx, b, func(sp string) bool { return sp == "0" }); err != nil {
				t.Fatal(err)
			}
			if err := b.Control(&Control{Kind: NewSplit, Split: "1"}); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(ds.bodies(), ","); got != "old,x0,y0,y1,y2" {
				t.Fatalf("sink holds %s, want old,x0,y0,y1,y2 once each", got)
			}
		})
	}
}

// A split's watermark from a shuffle input is the minimum over the upstream stage's splits:
// a producing split that has said nothing holds it back, a watermark only rises, and the
// state (marks, watermarks, offset) round-trips through its checkpoint encoding.
func TestQueueStateWatermark(t *testing.T) {
	q := newQueueState([]string{"0", "1", "2"})
	q.setWM("0", 50, false)
	q.setWM("2", 70, false)
	if w := q.watermark(); w != MinWatermark {
		t.Fatalf("watermark %d with split 1 silent, want none", w)
	}
	q.setWM("1", 40, false)
	if w := q.watermark(); w != 40 {
		t.Fatalf("watermark %d, want 40", w)
	}
	q.setWM("1", 30, false) // a producer that moved and restarted from an older checkpoint
	if w := q.watermark(); w != 40 {
		t.Fatalf("watermark went back to %d", w)
	}
	q.setWM("", 60, true) // a 'W' of an older version: every producer
	if w := q.watermark(); w != 60 {
		t.Fatalf("watermark %d after W 60, want 60", w)
	}
	q.marks["0"] = dedupMark{off: 12, seq: 3}
	q.marks["9"] = dedupMark{off: -1, seq: 0}
	q.next = 1234
	other := newQueueState(nil)
	other.wms["x"] = MaxWatermark
	back, err := decodeQueueStates(encodeQueueStates([]*queueState{q, other}))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0].next != 1234 || back[0].marks["0"] != q.marks["0"] || back[0].marks["9"] != q.marks["9"] ||
		len(back[0].wms) != 3 || back[0].wms["2"] != 70 || back[1].wms["x"] != MaxWatermark || len(back[1].marks) != 0 {
		t.Fatalf("round trip: %+v %+v", back[0], back[1])
	}
}

func FuzzDecodeShuffle(f *testing.F) {
	f.Add([]byte("W\x02"))
	f.Add([]byte("P\x02s0\x02"))
	f.Add(append([]byte("D\x02s0\x01\x04\x00"), sql.AppendRow(nil, sql.Row{sql.Varchar("u1"), sql.BigInt(3)})...))
	f.Add([]byte("D\x00\x00"))
	f.Add([]byte("Dxx"))
	q := newQueueState(nil)
	q.marks["s0"], q.wms["s0"], q.wms["s1"] = dedupMark{4, 1}, 99, 3
	f.Add(encodeQueueStates([]*queueState{q, newQueueState(nil)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m shuffleMsg
		decodeShuffle(b, &m)
		decodeMarks(b)
		if qs, err := decodeQueueStates(b); err == nil {
			again, err := decodeQueueStates(encodeQueueStates(qs))
			if err != nil || len(again) != len(qs) {
				t.Fatalf("shuffle state %x does not round-trip: %v", b, err)
			}
		}
	})
}
