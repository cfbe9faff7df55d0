package sql

import "github.com/RoaringBitmap/roaring/v2"

// intValues is the integer part of a DistinctSet. While it is small every value is in an
// intSet; once it has more than bitmapAfter values, those in [0, 2^32) — ids, the common
// argument of COUNT(DISTINCT) — go to a compressed bitmap (roaring) and only the others
// stay in the intSet.
//
// An intSet costs 11 to 21 bytes a value (8-byte slots, at most 3/4 full); a roaring bitmap
// costs 2 bytes a value where values are sparse (under 4,096 in a range of 65,536) and one
// bit of each range where they are dense, and finds a value by a binary search over the
// ranges, so recent ids (the usual case) stay in the processor's cache. Nexmark q16's
// 23 million distinct values took about 320 MB as intSets (docs/benchmarks.md,
// "COUNT(DISTINCT) in compressed bitmaps"). A set of a few values stays an intSet: a bitmap's
// fixed cost (about a hundred bytes) is more than a few slots.
type intValues struct {
	small intSet
	bm    *roaring.Bitmap // nil until the set has more than bitmapAfter values
	n     int             // values in bm
}

// bitmapAfter is the size past which a set's values in [0, 2^32) move to a bitmap.
const bitmapAfter = 32

func inBitmapRange(v int64) bool { return uint64(v) < 1<<32 }

func (s *intValues) len() int { return s.small.len() + s.n }

// has reports whether v is in the set.
func (s *intValues) has(v int64) bool {
	if s.bm != nil && inBitmapRange(v) {
		return s.bm.Contains(uint32(v))
	}
	return s.small.has(v)
}

// add inserts v and reports whether it was new.
func (s *intValues) add(v int64) bool {
	if s.bm != nil && inBitmapRange(v) {
		if !s.bm.CheckedAdd(uint32(v)) {
			return false
		}
		s.n++
		return true
	}
	if !s.small.add(v) {
		return false
	}
	if s.bm == nil && s.small.len() > bitmapAfter {
		s.toBitmap()
	}
	return true
}

// toBitmap moves the values in [0, 2^32) from the intSet to a new bitmap.
func (s *intValues) toBitmap() {
	s.bm = roaring.New()
	var rest intSet
	s.small.each(func(v int64) {
		if inBitmapRange(v) {
			s.bm.Add(uint32(v))
			s.n++
		} else {
			rest.add(v)
		}
	})
	s.small = rest
}

// remove takes v out and reports whether it was there.
func (s *intValues) remove(v int64) bool {
	if s.bm != nil && inBitmapRange(v) {
		if !s.bm.CheckedRemove(uint32(v)) {
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
	if s.bm != nil {
		s.bm.Iterate(func(x uint32) bool {
			fn(int64(x))
			return true
		})
	}
}
