package exec

import (
	"math/rand/v2"
	"testing"

	"rsql/sql"
)

// The group table finds every group it holds and none it does not, through growth, many
// equal hashes (long probe runs that wrap around the table's end) and removals of the last
// group between insertions.
func TestGroupIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	w := &win{keys: newPagedRows[sql.Value](1)}
	var removed []int64 // key values of removed groups
	hashOf := func(k int64) uint64 {
		if k%3 == 0 {
			return uint64(k % 5) // few distinct hashes: collisions
		}
		return uint64(k) * 0x51_7cc1_b727_220a
	}
	add := func(k int64) {
		h := hashOf(k)
		if w.find(h, []sql.Value{sql.BigInt(k)}) >= 0 {
			t.Fatalf("key %d found before it was added", k)
		}
		g := int32(len(w.groups))
		w.groups = append(w.groups, group{hash: h})
		w.keys.add()[0] = sql.BigInt(k)
		w.index(g)
	}
	next := int64(0)
	for range 5000 {
		add(next)
		next++
		if rng.IntN(4) == 0 {
			g := len(w.groups) - 1
			removed = append(removed, w.keys.at(g)[0].I)
			w.unindexLast()
			w.groups = w.groups[:g]
			w.keys.truncate(g)
		}
		if rng.IntN(500) == 0 {
			for g := range w.groups {
				k := w.keys.at(g)[0]
				if got := w.find(hashOf(k.I), []sql.Value{k}); got != int32(g) {
					t.Fatalf("key %d: group %d, want %d (%d groups, %d slots)", k.I, got, g, len(w.groups), len(w.slots))
				}
			}
			for _, k := range removed {
				if got := w.find(hashOf(k), []sql.Value{sql.BigInt(k)}); got >= 0 {
					t.Fatalf("removed key %d found as group %d", k, got)
				}
			}
		}
	}
	if 2*len(w.groups) > len(w.slots) {
		t.Fatalf("%d groups in %d slots: more than half full", len(w.groups), len(w.slots))
	}
	w.clearSlots()
	w.groups = w.groups[:0]
	if w.find(hashOf(1), []sql.Value{sql.BigInt(1)}) >= 0 {
		t.Fatal("found after clearing")
	}
}
