package sql

import (
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// intValues is the integer part of a DistinctSet, in three stages by size. While it is
// small every value is in an intSet; once it has more than packedAfter values, those in
// [0, 2^32) — ids, the common argument of COUNT(DISTINCT) — go to a packed slice
// (packedIDs), and once those are more than bitmapAfter, to a compressed bitmap (roaring);
// the values outside that range stay in the intSet throughout.
//
// An intSet costs 11 to 21 bytes a value (8-byte slots, at most 3/4 full). Both the packed
// slice and the bitmap split the ids by their upper 16 bits into ranges of 65,536 and keep
// the lower 16 bits, 2 bytes a value where a range's values are sparse; the bitmap adds
// about 40 bytes of containers for each range it has values in, and the packed slice 4 (in
// one allocation for the whole set). Nexmark q16's sets of recent ids hold a few in each of
// many ranges, and took 20-35 MiB more in bitmaps (docs/benchmarks.md, "q16: ids in a
// packed slice before a bitmap"). Past bitmapAfter values a bitmap's search (binary, over
// its ranges) and dense ranges (a bit a value) are worth its overhead; below, an insertion
// into the packed slice moves at most a few kilobytes.
type intValues struct {
	small intSet
	// wide: the values in [0, 2^32) are in packed, or in bm once it is not nil.
	wide   bool
	packed packedIDs
	bm     *roaring.Bitmap
	n      int // values in packed or bm
}

// packedAfter is the size past which a set's values in [0, 2^32) move to the packed
// slice, and bitmapAfter the number of those past which they move to a bitmap.
const (
	packedAfter = 32
	bitmapAfter = 2048
)

func inBitmapRange(v int64) bool { return uint64(v) < 1<<32 }

func (s *intValues) len() int { return s.small.len() + s.n }

// has reports whether v is in the set.
func (s *intValues) has(v int64) bool {
	if s.wide && inBitmapRange(v) {
		if s.bm != nil {
			return s.bm.Contains(uint32(v))
		}
		return s.packed.has(uint32(v))
	}
	return s.small.has(v)
}

// add inserts v and reports whether it was new.
func (s *intValues) add(v int64) bool {
	if s.wide && inBitmapRange(v) {
		if s.bm != nil {
			if !s.bm.CheckedAdd(uint32(v)) {
				return false
			}
			s.n++
			return true
		}
		if !s.packed.add(uint32(v)) {
			return false
		}
		s.n++
		if s.n > bitmapAfter {
			s.bm = roaring.New()
			s.packed.each(func(x uint32) { s.bm.Add(x) })
			s.packed = nil
		}
		return true
	}
	if !s.small.add(v) {
		return false
	}
	if !s.wide && s.small.len() > packedAfter {
		s.toPacked()
	}
	return true
}

// toPacked moves the values in [0, 2^32) from the intSet to the packed slice.
func (s *intValues) toPacked() {
	s.wide = true
	var ids []uint32
	var rest intSet
	s.small.each(func(v int64) {
		if inBitmapRange(v) {
			ids = append(ids, uint32(v))
		} else {
			rest.add(v)
		}
	})
	slices.Sort(ids)
	for _, x := range ids {
		s.packed.add(x)
	}
	s.n = len(ids)
	s.small = rest
}

// remove takes v out and reports whether it was there.
func (s *intValues) remove(v int64) bool {
	if s.wide && inBitmapRange(v) {
		if s.bm != nil {
			if !s.bm.CheckedRemove(uint32(v)) {
				return false
			}
		} else if !s.packed.remove(uint32(v)) {
			return false
		}
		s.n--
		return true
	}
	return s.small.remove(v)
}

// appendChunk appends every value as a chunk value of kind k (appendIntChunkValue),
// without a call per value: a checkpoint rewrites large sets whole this way.
func (s *intValues) appendChunk(dst []byte, k Kind) []byte {
	if s.small.hasZero {
		dst = appendIntChunkValue(dst, k, 0)
	}
	for _, v := range s.small.slots {
		if v != 0 {
			dst = appendIntChunkValue(dst, k, v)
		}
	}
	p := s.packed
	for i, r := 0, p.ranges(); i < r; i++ {
		hi := uint32(p[1+i]) << 16
		start, end := p.span(i, r)
		for _, lo := range p[1+2*r+start : 1+2*r+end] {
			dst = appendIntChunkValue(dst, k, int64(hi|uint32(lo)))
		}
	}
	if s.bm != nil {
		var buf [256]uint32
		for it := s.bm.ManyIterator(); ; {
			n := it.NextMany(buf[:])
			if n == 0 {
				break
			}
			for _, v := range buf[:n] {
				dst = appendIntChunkValue(dst, k, int64(v))
			}
		}
	}
	return dst
}

// each calls fn with every value, in no particular order.
func (s *intValues) each(fn func(int64)) {
	s.small.each(fn)
	s.packed.each(func(x uint32) { fn(int64(x)) })
	if s.bm != nil {
		s.bm.Iterate(func(x uint32) bool {
			fn(int64(x))
			return true
		})
	}
}

// packedIDs is a set of uint32 in one slice, split by the values' upper 16 bits into
// ranges: p[0] is the number of ranges r; p[1:1+r] their upper 16 bits, ascending;
// p[1+r:1+2r] the index, among the values, of each range's first; p[1+2r:] the values'
// lower 16 bits, range by range, each range's ascending. A lookup is two binary searches
// (over the ranges, then in the range); the set never holds more than bitmapAfter+1
// values, so the indexes fit in 16 bits. An empty set is nil.
type packedIDs []uint16

func (p packedIDs) ranges() int {
	if len(p) == 0 {
		return 0
	}
	return int(p[0])
}

// span is where range i's values are among the values (p[1+2r:]) of a set of r ranges.
func (p packedIDs) span(i, r int) (start, end int) {
	start = int(p[1+r+i])
	if i+1 < r {
		return start, int(p[1+r+i+1])
	}
	return start, len(p) - 1 - 2*r
}

// search returns where x is or would go: the index of x's range (or where it would go),
// whether the range exists, the index of x's lower bits among the values (or where they
// would go), and whether x is there.
func (p packedIDs) search(x uint32) (i int, hasRange bool, j int, found bool) {
	if len(p) == 0 {
		return 0, false, 0, false
	}
	r := int(p[0])
	i, hasRange = slices.BinarySearch(p[1:1+r], uint16(x>>16))
	if !hasRange {
		if i < r {
			return i, false, int(p[1+r+i]), false
		}
		return i, false, len(p) - 1 - 2*r, false
	}
	start, end := p.span(i, r)
	vals := p[1+2*r:]
	k, found := slices.BinarySearch(vals[start:end], uint16(x))
	return i, true, start + k, found
}

func (p packedIDs) has(x uint32) bool {
	_, _, _, found := p.search(x)
	return found
}

// add inserts x and reports whether it was new.
func (p *packedIDs) add(x uint32) bool {
	_, found := p.insert(x)
	return !found
}

// insert inserts x unless it is there, and returns its index among the values and whether
// it was there already.
func (p *packedIDs) insert(x uint32) (at int, found bool) {
	i, hasRange, j, found := p.search(x)
	if found {
		return j, true
	}
	q := *p
	if len(q) == 0 {
		q = packedIDs{0}
	}
	r := int(q[0])
	if !hasRange {
		q = slices.Insert(q, 1+i, uint16(x>>16))
		r++
		q = slices.Insert(q, 1+r+i, uint16(j))
		q[0] = uint16(r)
	}
	q = slices.Insert(q, 1+2*r+j, uint16(x))
	for k := i + 1; k < r; k++ {
		q[1+r+k]++
	}
	*p = q
	return j, false
}

// remove takes x out and reports whether it was there.
func (p *packedIDs) remove(x uint32) bool {
	i, _, j, found := p.search(x)
	if !found {
		return false
	}
	q := *p
	r := int(q[0])
	start, end := q.span(i, r)
	q = slices.Delete(q, 1+2*r+j, 2+2*r+j)
	next := i + 1       // the first range after x's
	if end-start == 1 { // the range's last value: the range goes too
		q = slices.Delete(q, 1+r+i, 2+r+i)
		q = slices.Delete(q, 1+i, 2+i)
		r, next = r-1, i
		q[0] = uint16(r)
	}
	for k := next; k < r; k++ {
		q[1+r+k]--
	}
	if r == 0 {
		q = nil
	}
	*p = q
	return true
}

// each calls fn with every value in ascending order.
func (p packedIDs) each(fn func(uint32)) {
	r := p.ranges()
	for i := 0; i < r; i++ {
		hi := uint32(p[1+i]) << 16
		start, end := p.span(i, r)
		for _, lo := range p[1+2*r+start : 1+2*r+end] {
			fn(hi | uint32(lo))
		}
	}
}
