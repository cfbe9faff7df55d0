package exec

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
)

// encodeJoinRows is the stored form save writes for one (side, key).
func encodeJoinRows(rows []sql.Row, ts []int64, flags []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(rows)))
	for i, r := range rows {
		b = append(b, flags[i])
		b = binary.AppendVarint(b, ts[i])
		b = sql.AppendRow(b, r)
	}
	return b
}

func TestJoinStateRoundTrip(t *testing.T) {
	rows := []sql.Row{{sql.Varchar("u1"), sql.Double(2.5)}, {sql.Null, sql.BigInt(7)}}
	b := encodeJoinRows(rows, []int64{1000, -5}, []byte{1, 2})
	var got []sql.Row
	var ts []int64
	var fl []byte
	if err := decodeJoinRows(b, 2, func(f byte, t int64, r sql.Row) {
		got = append(got, append(sql.Row(nil), r...))
		ts, fl = append(ts, t), append(fl, f)
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) || !reflect.DeepEqual(ts, []int64{1000, -5}) || !bytes.Equal(fl, []byte{1, 2}) {
		t.Fatalf("round trip: %v %v %v", got, ts, fl)
	}
	if err := decodeJoinRows(b, 3, func(byte, int64, sql.Row) {}); err == nil {
		t.Fatal("rows of the wrong width decoded")
	}
	for i := 0; i < len(b); i++ {
		if err := decodeJoinRows(b[:i], 2, func(byte, int64, sql.Row) {}); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
}

func FuzzDecodeJoinState(f *testing.F) {
	f.Add(encodeJoinRows([]sql.Row{{sql.Varchar("u1"), sql.Double(2.5)}}, []int64{1000}, []byte{1}), 2)
	f.Add(encodeJoinRows([]sql.Row{{sql.BigInt(1)}, {sql.Null}}, []int64{5, 6}, []byte{0, 3}), 1)
	f.Add([]byte{0}, 0)
	f.Fuzz(func(t *testing.T, b []byte, width int) {
		if width < 0 || width > 16 {
			return
		}
		var rows []sql.Row
		var ts []int64
		var fl []byte
		if err := decodeJoinRows(b, width, func(f byte, t int64, r sql.Row) {
			rows = append(rows, append(sql.Row(nil), r...))
			ts, fl = append(ts, t), append(fl, f)
		}); err != nil {
			return
		}
		again := encodeJoinRows(rows, ts, fl)
		if err := decodeJoinRows(again, width, func(byte, int64, sql.Row) {}); err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		if width > 0 {
			sameLiveness(t, b, width, 0)
		}
	})
}

// sweepJoin is an interval join whose left rows live until their column 0 (Nexmark q9's
// auction until its expires) and right rows a second past their time, over rows of width
// columns.
func sweepJoin(width int) *joinOp {
	return &joinOp{node: &planner.JoinNode{Mode: planner.JoinInterval, HasUntil: true, LeftUntil: 0,
		Lower: -1000, LeftWidth: width, RightWidth: width}}
}

// sameLiveness checks liveChunk over the stored chunk b, at a few watermarks and for both
// sides, against expired over its rows decoded whole: a chunk that decodes is live when one
// of its rows has not expired, and one that does not decode fails unless a live row comes
// before what is malformed.
func sameLiveness(t *testing.T, b []byte, width int, wm int64) {
	t.Helper()
	j := sweepJoin(width)
	for side := range 2 {
		for _, at := range []int64{wm - 1000, wm, wm + 1, wm + 1000, MaxWatermark} {
			want := false
			derr := decodeJoinRows(b, width, func(_ byte, ts int64, r sql.Row) {
				want = want || !j.expired(side, &jrow{row: r, ts: ts}, at)
			})
			got, err := j.liveChunk(b, side, at)
			switch {
			case derr == nil && (err != nil || got != want):
				t.Fatalf("side %d at %d: liveChunk %v, %v; decoded rows live: %v", side, at, got, err, want)
			case derr != nil && err == nil && !got:
				t.Fatalf("side %d at %d: a chunk that does not decode (%v) swept", side, at, derr)
			}
		}
	}
}

func TestJoinLiveChunk(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for range 200 {
		var rows []sql.Row
		var ts []int64
		var fl []byte
		for range 1 + r.Intn(5) {
			until := sql.Timestamp(r.Int63n(4000))
			if r.Intn(8) == 0 {
				until = sql.Null
			}
			rows = append(rows, sql.Row{until, sql.Varchar(strings.Repeat("x", r.Intn(40)))})
			ts, fl = append(ts, r.Int63n(4000)), append(fl, byte(r.Intn(4)))
		}
		b := encodeJoinRows(rows, ts, fl)
		sameLiveness(t, b, 2, r.Int63n(4000))
		for cut := range len(b) {
			sameLiveness(t, b[:cut], 2, r.Int63n(4000))
		}
	}
}

func TestSplitPosRoundTrip(t *testing.T) {
	for _, p := range []SplitPos{
		{Next: 5, MaxTs: 100, WM: 90},
		{Next: 0, MaxTs: MinWatermark, WM: MinWatermark},
		{Next: 7, MaxTs: 100, WM: 90, InWM: []int64{95, 90}},
	} {
		got, err := DecodeSplitPos(p.Encode(), 0)
		if err != nil || !reflect.DeepEqual(got, p) {
			t.Fatalf("%+v: got %+v, %v", p, got, err)
		}
	}
	// Positions written before watermarks were kept: the watermark is MaxTs - delay.
	old := binary.AppendVarint(binary.AppendVarint(nil, 3), 1000)
	if got, err := DecodeSplitPos(old, 200); err != nil || got.WM != 800 {
		t.Fatalf("old position: %+v %v", got, err)
	}
	b := SplitPos{Next: 7, MaxTs: 100, WM: 90, InWM: []int64{95, 90}}.Encode()
	base := len(SplitPos{Next: 7, MaxTs: 100, WM: 90}.Encode())
	for i := base + 1; i < len(b); i++ {
		if _, err := DecodeSplitPos(b[:i], 0); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
}

func FuzzDecodeSplitPos(f *testing.F) {
	f.Add(SplitPos{Next: 5, MaxTs: 100, WM: 90}.Encode())
	f.Add(SplitPos{Next: 7, MaxTs: 100, WM: 90, InWM: []int64{95, 90}}.Encode())
	f.Add([]byte{2, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeSplitPos(b, 0)
		if err != nil {
			return
		}
		again, err := DecodeSplitPos(p.Encode(), 0)
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("%+v re-encoded: %+v, %v", p, again, err)
		}
	})
}

// The expiry heap pops rows in time order whatever order they were pushed in, interleaved
// with pops.
func TestRowHeapOrder(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for round := 0; round < 200; round++ {
		var h rowHeap
		var want []int64
		for i := 0; i < r.Intn(300); i++ {
			if len(h) > 0 && r.Intn(4) == 0 {
				slices.Sort(want)
				got := h.pop().ts
				if got != want[0] {
					t.Fatalf("round %d: popped %d, want %d", round, got, want[0])
				}
				want = want[1:]
				continue
			}
			ts := r.Int63n(50)
			h.push(&jrow{ts: ts})
			want = append(want, ts)
		}
		slices.Sort(want)
		for _, w := range want {
			if got := h.pop().ts; got != w {
				t.Fatalf("round %d: drained %d, want %d", round, got, w)
			}
		}
		if len(h) != 0 {
			t.Fatalf("round %d: %d rows left", round, len(h))
		}
	}
}
