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
	for p := s.packed; len(p) > 0; {
		hi, n := uint32(p[0])<<16, int(p[1])
		for _, lo := range p[2 : 2+n] {
			dst = appendIntChunkValue(dst, k, int64(hi|uint32(lo)))
		}
		p = p[2+n:]
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

// packedIDs is a set of uint32 in one slice: per range of 65,536 values that has any, in
// ascending order of ranges, the range's upper 16 bits, its number of values (at most
// bitmapAfter, under 65,536), then its values' lower 16 bits in ascending order.
type packedIDs []uint16

// find returns the index of the header of x's range, and whether the set has that range
// (if not, the index where its header would go).
func (p packedIDs) find(x uint32) (int, bool) {
	hi := uint16(x >> 16)
	i := 0
	for i < len(p) {
		switch h := p[i]; {
		case h == hi:
			return i, true
		case h > hi:
			return i, false
		}
		i += 2 + int(p[i+1])
	}
	return i, false
}

// search returns where x is or would go: the index of the header of x's range (or where
// it would go), whether the range exists, the index of x's lower bits in the range's values
// (or where they would go), and whether x is there.
func (p packedIDs) search(x uint32) (i int, hasRange bool, j int, found bool) {
	i, hasRange = p.find(x)
	if hasRange {
		j, found = slices.BinarySearch(p[i+2:i+2+int(p[i+1])], uint16(x))
	}
	return i, hasRange, j, found
}

func (p packedIDs) has(x uint32) bool {
	_, _, _, found := p.search(x)
	return found
}

// add inserts x and reports whether it was new.
func (p *packedIDs) add(x uint32) bool {
	i, hasRange, j, found := p.search(x)
	switch {
	case found:
		return false
	case !hasRange:
		*p = slices.Insert(*p, i, uint16(x>>16), 1, uint16(x))
	default:
		*p = slices.Insert(*p, i+2+j, uint16(x))
		(*p)[i+1]++
	}
	return true
}

// remove takes x out and reports whether it was there.
func (p *packedIDs) remove(x uint32) bool {
	i, _, j, found := p.search(x)
	switch {
	case !found:
		return false
	case (*p)[i+1] == 1: // the range's last value: its header goes too
		*p = slices.Delete(*p, i, i+3)
	default:
		*p = slices.Delete(*p, i+2+j, i+3+j)
		(*p)[i+1]--
	}
	return true
}

// each calls fn with every value in ascending order.
func (p packedIDs) each(fn func(uint32)) {
	for len(p) > 0 {
		hi, n := uint32(p[0])<<16, int(p[1])
		for _, lo := range p[2 : 2+n] {
			fn(hi | uint32(lo))
		}
		p = p[2+n:]
	}
}
