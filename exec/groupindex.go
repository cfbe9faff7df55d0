package exec

import (
	"math/bits"

	"rsql/sql"
)

// A window's groups are found by key hash in w.slots: open addressing with linear probing,
// each slot the group's number + 1 (0: empty), the table a power of two at most half full.
// Four bytes a slot, against the twenty-odd a Go map of hash to group spends an entry, and
// a probe is one load next to the previous one; the groups keep their hashes, so growing
// rehashes nothing.

// home is the first slot probed for hash h.
func (w *win) home(h uint64) int {
	return int((h * 0x9E3779B97F4A7C15) >> (64 - w.slotBits))
}

// find returns the group with hash h and key values ks, or -1.
func (w *win) find(h uint64, ks []sql.Value) int32 {
	if len(w.slots) == 0 {
		return -1
	}
	mask := len(w.slots) - 1
	for i := w.home(h); ; i = (i + 1) & mask {
		s := w.slots[i]
		if s == 0 {
			return -1
		}
		if g := s - 1; w.groups[g].hash == h && w.keys.equal(int(g), ks) {
			return g
		}
	}
}

// index adds group g (already in w.groups) to the table.
func (w *win) index(g int32) {
	if 2*len(w.groups) > len(w.slots) {
		w.growSlots()
		return // growSlots indexed every group, g included
	}
	w.place(g)
}

func (w *win) place(g int32) {
	mask := len(w.slots) - 1
	i := w.home(w.groups[g].hash)
	for w.slots[i] != 0 {
		i = (i + 1) & mask
	}
	w.slots[i] = g + 1
}

// growSlots doubles the table (16 slots at least) and indexes every group again.
func (w *win) growSlots() {
	n := max(16, 2*len(w.slots))
	for n < 2*len(w.groups) {
		n *= 2
	}
	w.slots = make([]int32, n)
	w.slotBits = uint(bits.TrailingZeros(uint(n)))
	for g := range w.groups {
		w.place(int32(g))
	}
}

// unindexLast removes the last group from the table. Emptying its slot is enough: the
// group was the last one placed (growSlots places groups in order), in the first empty slot
// of its probe; no entry placed before it probed past that slot, since it was empty then,
// so the table is as it was before the group came.
func (w *win) unindexLast() {
	g := int32(len(w.groups) - 1)
	mask := len(w.slots) - 1
	i := w.home(w.groups[g].hash)
	for w.slots[i] != g+1 {
		i = (i + 1) & mask
	}
	w.slots[i] = 0
}

// clearSlots empties the table, keeping it.
func (w *win) clearSlots() { clear(w.slots) }
