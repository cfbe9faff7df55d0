package sql

import (
	"math/rand"
	"slices"
	"testing"
)

// chunkValues decodes a chunk into its values' AppendValue forms, sorted, failing on a value
// written twice.
func chunkValues(t *testing.T, what string, chunk []byte) []string {
	t.Helper()
	var d DistinctSet
	if err := d.AddChunk(chunk); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var out []string
	d.Range(func(enc []byte) { out = append(out, string(enc)) })
	slices.Sort(out)
	var n int
	for p := 0; p < len(chunk); n++ {
		l := int(chunk[p]) // every test value's form is under 128 bytes
		p += 1 + l
	}
	if n != len(out) {
		t.Fatalf("%s: %d values in the chunk, %d distinct", what, n, len(out))
	}
	return out
}

// A family set answers for each member what a set of its own would — its size, its whole
// and fresh chunks, whether it has fresh values — through adds with random marks of values
// of every form (integers in and out of [0, 2^32), enough for the packed slice and the
// bitmaps, other kinds), checkpoints (ClearFresh) at random, and a restore from the members'
// chunks.
func TestDistinctFamilyMatchesSets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members int
		value   func(*rand.Rand) Value
	}{
		{"few ids", 4, func(r *rand.Rand) Value { return BigInt(r.Int63n(40)) }},
		{"ids", 4, func(r *rand.Rand) Value { return BigInt(r.Int63n(5000) * 37) }},
		{"many ids", 3, func(r *rand.Rand) Value { return BigInt(r.Int63n(100_000)) }},
		{"wide integers", 2, func(r *rand.Rand) Value { return BigInt(r.Int63n(3000)<<33 - 1<<40) }},
		{"mixed", 8, func(r *rand.Rand) Value {
			switch r.Intn(5) {
			case 0:
				return Varchar(string(rune('a' + r.Intn(26))))
			case 1:
				return BigInt(-r.Int63n(100))
			case 2:
				return Int(r.Int63n(50)) // another integer kind: kept encoded
			case 3:
				return Null
			}
			return BigInt(r.Int63n(4000))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(len(tc.name))))
			fam := NewDistinctFamily(tc.members)
			sets := make([]DistinctSet, tc.members)
			check := func(step int) {
				for m := range sets {
					if got, want := fam.MemberLen(m), sets[m].Len(); got != want {
						t.Fatalf("step %d, member %d: %d values, want %d", step, m, got, want)
					}
					if got, want := len(fam.AppendMemberFreshChunk(nil, m)) > 0, sets[m].HasFresh(); got != want {
						t.Fatalf("step %d, member %d: fresh %v, want %v", step, m, got, want)
					}
					got := chunkValues(t, "family's fresh chunk", fam.AppendMemberFreshChunk(nil, m))
					want := chunkValues(t, "set's fresh chunk", sets[m].FreshChunk())
					if !slices.Equal(got, want) {
						t.Fatalf("step %d, member %d: fresh %d values, want %d", step, m, len(got), len(want))
					}
				}
			}
			for step := 0; step < 30_000; step++ {
				v := tc.value(rng)
				marks := uint8(rng.Intn(1 << tc.members))
				fam.AddMarked(v, marks)
				for m := range sets {
					if marks&(1<<m) != 0 {
						sets[m].Add(v)
					}
				}
				if rng.Intn(1000) == 0 {
					check(step)
					fam.ClearFresh()
					for m := range sets {
						sets[m].ClearFresh()
					}
				}
			}
			check(-1)
			total := 0
			restored := NewDistinctFamily(tc.members)
			for m := range sets {
				total += sets[m].Len()
				got := chunkValues(t, "family's chunk", fam.AppendMemberChunk(nil, m))
				want := chunkValues(t, "set's chunk", sets[m].AppendChunk(nil))
				if !slices.Equal(got, want) {
					t.Fatalf("member %d: %d values, want %d", m, len(got), len(want))
				}
				if err := restored.AddMemberChunk(fam.AppendMemberChunk(nil, m), m, false); err != nil {
					t.Fatal(err)
				}
			}
			if fam.Len() != total {
				t.Fatalf("Len %d, want %d", fam.Len(), total)
			}
			if restored.HasFresh() {
				t.Fatal("a restored family has fresh values")
			}
			for m := range sets {
				if got, want := chunkValues(t, "restored", restored.AppendMemberChunk(nil, m)), chunkValues(t, "set", sets[m].AppendChunk(nil)); !slices.Equal(got, want) {
					t.Fatalf("restored member %d: %d values, want %d", m, len(got), len(want))
				}
			}
			// A set of one call joins a family with its fresh values fresh.
			joined := NewDistinctFamily(tc.members)
			if err := joined.AddMemberSet(&sets[0], 0); err != nil {
				t.Fatal(err)
			}
			if fresh := len(joined.AppendMemberFreshChunk(nil, 0)) > 0; joined.MemberLen(0) != sets[0].Len() || fresh != sets[0].HasFresh() {
				t.Fatalf("joined: %d values (fresh %v), want %d (%v)", joined.MemberLen(0), fresh, sets[0].Len(), sets[0].HasFresh())
			}
		})
	}
}

// A chunk that does not decode is refused with an error, whichever member it is for.
func TestDistinctFamilyBadChunk(t *testing.T) {
	fam := NewDistinctFamily(2)
	for _, b := range [][]byte{{5, 1}, {0}, {1, 0xff}, {2, byte(KindBigInt), 0x80}} {
		if err := fam.AddMemberChunk(b, 1, false); err == nil {
			t.Errorf("chunk %x: no error", b)
		}
	}
	if err := fam.AddMemberChunk(nil, 2, false); err == nil {
		t.Error("member 2 of 2: no error")
	}
}
