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
	x := &shuffleOut{ctx: context.Background(), sink: qs, qs: qs, keys: []planner.Evaluator{col(0)}, n: 3, what: "t", wm: MinWatermark}
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
	if err := x.Watermark(1234); err != nil {
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
		var rows []shuffleRow
		for _, m := range msgs {
			isWM, wm, split, rs, err := decodeShuffle(m.Body, rows)
			rows = rs
			if err != nil {
				t.Fatalf("queue %d: %v", q, err)
			}
			if isWM {
				sawWM = wm == 1234
				continue
			}
			mk, seen := marks[split]
			for _, r := range rs {
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
	s.eo.pending = []connectors.Message{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}
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
	if err := ds.Write(context.Background(), []connectors.Message{{Body: []byte("a"), ID: messageID("j", 7, 0)}}); err != nil {
		t.Fatal(err)
	}
	s2 := &sinkOp{ctx: context.Background(), sink: ds, cnt: &counters{}, what: "out"}
	s2.eo = &outbox{job: "j", stage: 1, store: store, ds: ds}
	if err := s2.eo.recover(context.Background(), s2); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ds.bodies(), ","); got != "a,b,c" {
		t.Fatalf("sink holds %s, want a,b,c", got)
	}
	if want := "j/7/0 j/7/1 j/7/2"; strings.Join(ds.ids, " ") != want {
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
	n := 0
	store.Scan(OutboxPrefix("j", 1), func(k, v []byte) error { n++; return nil })
	if n != 0 {
		t.Fatalf("%d outbox entries left", n)
	}
}

func FuzzDecodeShuffle(f *testing.F) {
	f.Add([]byte("W\x02"))
	f.Add(append([]byte("D\x02s0\x01\x04\x00"), sql.AppendRow(nil, sql.Row{sql.Varchar("u1"), sql.BigInt(3)})...))
	f.Add([]byte("D\x00\x00"))
	f.Add([]byte("Dxx"))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeShuffle(b, nil)
		decodeMarks(b)
	})
}
