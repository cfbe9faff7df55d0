package sql

import "math/bits"

// intSet is a set of int64 for DistinctSet: open addressing with linear probing in one flat
// slice, hashed by multiplication (Fibonacci hashing). A lookup touches one slot, and
// usually its neighbours in the same cache line, where a Go map walks a directory, a table
// and a control word first; that walk was the largest per-row cost of COUNT(DISTINCT)
// (docs/benchmarks.md, q16). The slice holds no pointers, so the garbage collector does not
// scan it. Zero marks an empty slot; the value 0 itself is kept in hasZero.
type intSet struct {
	slots   []int64 // len is a power of two (or 0)
	shift   uint8   // 64 − log2(len(slots))
	n       int     // values in slots (0 aside)
	hasZero bool
}

const intSetMinSlots = 8

func (s *intSet) len() int {
	if s.hasZero {
		return s.n + 1
	}
	return s.n
}

func (s *intSet) home(v int64) int {
	return int((uint64(v) * 0x9E3779B97F4A7C15) >> s.shift)
}

// has reports whether v is in the set.
func (s *intSet) has(v int64) bool {
	if v == 0 {
		return s.hasZero
	}
	if len(s.slots) == 0 {
		return false
	}
	mask := len(s.slots) - 1
	for i := s.home(v); ; i = (i + 1) & mask {
		switch s.slots[i] {
		case v:
			return true
		case 0:
			return false
		}
	}
}

// add inserts v and reports whether it was new.
func (s *intSet) add(v int64) bool {
	if v == 0 {
		if s.hasZero {
			return false
		}
		s.hasZero = true
		return true
	}
	if len(s.slots) == 0 {
		s.resize(intSetMinSlots)
	}
	mask := len(s.slots) - 1
	i := s.home(v)
	for ; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case v:
			return false
		case 0:
			goto insert
		}
	}
insert:
	// At most 3/4 full: probe runs stay short.
	if 4*(s.n+1) > 3*len(s.slots) {
		s.resize(2 * len(s.slots))
		s.insertNew(v)
	} else {
		s.slots[i] = v
	}
	s.n++
	return true
}

// insertNew puts v, known absent and non-zero, into its first empty slot.
func (s *intSet) insertNew(v int64) {
	mask := len(s.slots) - 1
	i := s.home(v)
	for s.slots[i] != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = v
}

func (s *intSet) resize(size int) {
	old := s.slots
	s.slots = make([]int64, size)
	s.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	for _, v := range old {
		if v != 0 {
			s.insertNew(v)
		}
	}
}

// remove takes v out and reports whether it was there. The slots after it are moved back
// (backward-shift deletion), so no tombstones are left to lengthen later probes.
func (s *intSet) remove(v int64) bool {
	if v == 0 {
		was := s.hasZero
		s.hasZero = false
		return was
	}
	if len(s.slots) == 0 {
		return false
	}
	mask := len(s.slots) - 1
	i := s.home(v)
	for ; s.slots[i] != v; i = (i + 1) & mask {
		if s.slots[i] == 0 {
			return false
		}
	}
	// i is the hole; move back each later value of the run whose home is not between the
	// hole and it (cyclically).
	for j := (i + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		h := s.home(s.slots[j])
		if (j-h)&mask >= (j-i)&mask {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = 0
	s.n--
	return true
}

// each calls fn with every value, in no particular order.
func (s *intSet) each(fn func(int64)) {
	if s.hasZero {
		fn(0)
	}
	for _, v := range s.slots {
		if v != 0 {
			fn(v)
		}
	}
}
