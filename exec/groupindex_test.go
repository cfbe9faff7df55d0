package exec

import (
	"math"
	"math/rand/v2"
	"testing"

	"rsql/sql"
)

// The group table finds every group it holds and none it does not, through growth, many
// equal hashes (long probe runs that wrap around the table's end) and removals of the last
// group between insertions.
func TestGroupIndex(t *testing.T) {
	for _, narrow := range []bool{false, true} {
		testGroupIndex(t, narrow)
	}
}

func testGroupIndex(t *testing.T, narrow bool) {
	rng := rand.New(rand.NewPCG(3, 4))
	w := &win{keys: newKeyRows(1, narrow)}
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
		w.keys.add([]sql.Value{sql.BigInt(k)})
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

// Narrow key rows give back the values they were given, compare as sql.Equal does, and turn
// into whole values when a value with a string comes.
func TestKeyRowsNarrow(t *testing.T) {
	if !narrowKeyTypes([]sql.Type{sql.TypeBigInt, sql.TypeDouble, sql.TypeTimestamp}, 3) ||
		narrowKeyTypes([]sql.Type{sql.TypeBigInt, sql.TypeVarchar}, 2) || narrowKeyTypes(nil, 1) {
		t.Fatal("narrowKeyTypes")
	}
	r := newKeyRows(3, true)
	rows := [][]sql.Value{
		{sql.BigInt(-5), sql.Double(-0.0), sql.Timestamp(1700000000000)},
		{sql.Null, sql.Double(2.5), sql.Timestamp(0)},
		{sql.Int(7), sql.Double(math.NaN()), sql.Null},
	}
	for _, row := range rows {
		r.add(row)
	}
	check := func(what string) {
		t.Helper()
		for g, row := range rows {
			if !r.equal(g, row) || !valuesEqual(r.at(g), row) {
				t.Fatalf("%s: row %d is %v, want %v", what, g, r.at(g), row)
			}
		}
		if r.equal(0, rows[1]) || r.equal(1, []sql.Value{sql.Null, sql.Double(2.5), sql.Timestamp(1)}) {
			t.Fatalf("%s: unequal rows compare equal", what)
		}
		// +0 and -0 are equal DOUBLEs; BIGINT 7 equals INT 7.
		if !r.equal(0, []sql.Value{sql.BigInt(-5), sql.Double(0), sql.Timestamp(1700000000000)}) ||
			!r.equal(2, []sql.Value{sql.BigInt(7), sql.Double(math.NaN()), sql.Null}) {
			t.Fatalf("%s: equal values compare unequal", what)
		}
	}
	check("narrow")
	odd := []sql.Value{sql.Varchar("s"), sql.Double(1), sql.Null}
	r.add(odd)
	rows = append(rows, odd)
	if r.narrow {
		t.Fatal("still narrow after a string")
	}
	check("widened")
	r.truncate(1)
	r.reset(true)
	r.add(rows[0])
	if !r.narrow || !r.equal(0, rows[0]) {
		t.Fatal("reset")
	}
}
