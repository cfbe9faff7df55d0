package sql

import (
	"math/rand"
	"sort"
	"testing"
)

type intSetOps interface {
	add(int64) bool
	remove(int64) bool
	has(int64) bool
	len() int
	each(func(int64))
}

// intSet against a Go map under random adds and removes, over a small range of values (so
// probe runs collide, wrap and are cut by removals) and with 0 and negative values.
func TestIntSetMatchesMap(t *testing.T) {
	testIntsMatchMap(t, func() intSetOps { return &intSet{} })
}

// intValues likewise: its sets pass bitmapAfter values, and the spans put values on both
// sides of the bitmap's range (negative, and at and past 2^32).
func TestIntValuesMatchMap(t *testing.T) {
	testIntsMatchMap(t, func() intSetOps { return &intValues{} })
}

func testIntsMatchMap(t *testing.T, newSet func() intSetOps) {
	for _, span := range []int64{5, 64, 1000, 1 << 20, 1 << 33, 1 << 40} {
		rng := rand.New(rand.NewSource(span))
		s := newSet()
		m := map[int64]struct{}{}
		for step := 0; step < 20000; step++ {
			v := rng.Int63n(span) - span/4
			if rng.Intn(3) == 0 {
				_, had := m[v]
				delete(m, v)
				if got := s.remove(v); got != had {
					t.Fatalf("span %d step %d: remove(%d) = %v, want %v", span, step, v, got, had)
				}
			} else {
				_, had := m[v]
				m[v] = struct{}{}
				if got := s.add(v); got == had {
					t.Fatalf("span %d step %d: add(%d) = %v, want %v", span, step, v, got, !had)
				}
			}
			if s.len() != len(m) {
				t.Fatalf("span %d step %d: len %d, want %d", span, step, s.len(), len(m))
			}
			if step%997 == 0 {
				var got, want []int64
				s.each(func(v int64) { got = append(got, v) })
				for v := range m {
					want = append(want, v)
					if !s.has(v) {
						t.Fatalf("span %d step %d: %d missing", span, step, v)
					}
				}
				sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
				sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
				if len(got) != len(want) {
					t.Fatalf("span %d step %d: each gave %d values, want %d", span, step, len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("span %d step %d: each gave %v, want %v", span, step, got, want)
					}
				}
			}
		}
	}
}

// The chunks of a set (whole and fresh) read back as the same set, for integers of every size
// (0, negative, 64-bit; enough of them for a bitmap, bitmapAfter) and for values kept encoded.
func TestDistinctChunkRoundTrip(t *testing.T) {
	var d DistinctSet
	vals := []Value{BigInt(0), BigInt(-1), BigInt(1 << 62), BigInt(-1 << 63), BigInt(300), Varchar("x"), Varchar(""), Int(5)}
	for i := range int64(2 * bitmapAfter) {
		vals = append(vals, BigInt(1000+i*70_001)) // across several of the bitmap's ranges
	}
	for _, v := range vals {
		d.Add(v)
	}
	for name, chunk := range map[string][]byte{"whole": d.AppendChunk(nil), "fresh": d.FreshChunk()} {
		var got DistinctSet
		if err := got.AddChunk(chunk); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Len() != d.Len() || d.Len() != len(vals) {
			t.Fatalf("%s: %d values, want %d", name, got.Len(), d.Len())
		}
		for _, v := range vals {
			if got.Add(v) {
				t.Fatalf("%s: %v missing", name, v)
			}
		}
	}
}

// packedIDs keeps its ranges ascending with their starts and values in order through adds
// and removes that create and empty ranges, against a Go map.
func TestPackedIDsMatchMap(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var p packedIDs
	m := map[uint32]bool{}
	for step := 0; step < 20000; step++ {
		// Few values in each of a few ranges, so ranges empty and come back.
		x := uint32(rng.Intn(6))<<16 | uint32(rng.Intn(8))*4099
		if rng.Intn(2) == 0 {
			if got := p.remove(x); got != m[x] {
				t.Fatalf("step %d: remove(%#x) = %v, want %v", step, x, got, m[x])
			}
			delete(m, x)
		} else {
			if got := p.add(x); got == m[x] {
				t.Fatalf("step %d: add(%#x) = %v, want %v", step, x, got, !m[x])
			}
			m[x] = true
		}
		if p.has(x) != m[x] {
			t.Fatalf("step %d: has(%#x) = %v", step, x, !m[x])
		}
		var got []uint32
		p.each(func(v uint32) { got = append(got, v) })
		if len(got) != len(m) || !sort.SliceIsSorted(got, func(i, j int) bool { return got[i] < got[j] }) {
			t.Fatalf("step %d: each gave %d values (sorted: %v), want %d", step, len(got), sort.SliceIsSorted(got, func(i, j int) bool { return got[i] < got[j] }), len(m))
		}
		for i := 1; i < len(got); i++ {
			if got[i] == got[i-1] {
				t.Fatalf("step %d: %#x twice", step, got[i])
			}
		}
		r := p.ranges()
		if len(p) != 0 && len(p) != 1+2*r+len(m) {
			t.Fatalf("step %d: %d slots for %d ranges and %d values", step, len(p), r, len(m))
		}
		for i := 0; i < r; i++ {
			if start, end := p.span(i, r); end <= start {
				t.Fatalf("step %d: range %#x kept with %d values", step, p[1+i], end-start)
			}
			if i > 0 && p[i] >= p[1+i] {
				t.Fatalf("step %d: ranges %#x, %#x out of order", step, p[i], p[1+i])
			}
		}
	}
}

// BenchmarkPackedIDs: lookups (and an add and a remove in 16) in 1,000 sets of 2,000 ids
// over 30 ranges of 65,536 each, the shape of Nexmark q16's sets of recent bidders and
// auctions, more of them than the caches hold.
func BenchmarkPackedIDs(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	sets := make([]packedIDs, 1000)
	ids := make([][]uint32, len(sets))
	for s := range sets {
		for len(ids[s]) < 2000 {
			x := uint32(rng.Intn(30))<<16 | uint32(rng.Intn(65536))
			if sets[s].add(x) {
				ids[s] = append(ids[s], x)
			}
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := rng.Intn(len(sets))
		x := ids[s][rng.Intn(len(ids[s]))]
		if !sets[s].has(x) {
			b.Fatal(x)
		}
		if i%16 == 0 {
			sets[s].remove(x)
			sets[s].add(x)
		}
	}
}
