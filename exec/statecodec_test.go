package exec

import (
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

func TestGroupStateRoundTrip(t *testing.T) {
	set := &sql.DistinctSet{}
	set.Add(sql.BigInt(1))
	set.Add(sql.BigInt(2))
	accs := []accum{{N: 3, I: -7, F: 2.5, V: sql.Varchar("m")}, {N: 2, Set: set}}
	b := appendGroupState(nil, []sql.Value{sql.Varchar("k"), sql.BigInt(9)}, -1000, 2000, accs)
	keys, start, end, got, err := decodeGroupState(b, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if keys[0] != sql.Varchar("k") || keys[1] != sql.BigInt(9) || start != -1000 || end != 2000 {
		t.Fatalf("keys %v window %d %d", keys, start, end)
	}
	if got[0].N != 3 || got[0].I != -7 || got[0].F != 2.5 || got[0].V != sql.Varchar("m") || got[1].N != 2 || got[1].Set.Len() != 0 {
		t.Fatalf("accs %+v", got)
	}
	if _, _, _, _, err := decodeGroupState(b, 2, 3); !errors.Is(err, errBadState) {
		t.Fatalf("wrong aggregate count: %v", err)
	}
	for i := 0; i < len(b); i++ {
		if _, _, _, _, err := decodeGroupState(b[:i], 2, 2); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
}

func FuzzDecodeGroupState(f *testing.F) {
	f.Add(appendGroupState(nil, []sql.Value{sql.Varchar("u1")}, 0, 1000, []accum{{N: 1, F: 2}, {N: 1, V: sql.Double(2)}}), 1, 2)
	f.Add(appendGroupState(nil, nil, 5, 6, []accum{{N: 1}}), 0, 1)
	// An earlier version's value with two distinct values inline.
	f.Add([]byte{0, 10, 12, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 3, 2, 2, 3, 4}, 0, 1)
	f.Add([]byte{0}, 0, 0)
	f.Fuzz(func(t *testing.T, b []byte, nk, na int) {
		if nk < 0 || na < 0 || nk > 8 || na > 8 {
			return
		}
		keys, start, end, accs, err := decodeGroupState(b, nk, na)
		if err != nil {
			if !errors.Is(err, errBadState) {
				t.Fatalf("error %v does not wrap errBadState", err)
			}
			return
		}
		again := appendGroupState(nil, keys, start, end, accs)
		if _, _, _, _, err := decodeGroupState(again, nk, na); err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
	})
}

// State written before aggregates were registrations (by the codec of that time) decodes
// into the same states, gives the same results through the registered aggregates, and is
// written back byte for byte.
func TestGroupStateOfEarlierVersionsDecodes(t *testing.T) {
	const stored = "020606757365722d310306c0a90780d30e08000000000000000000000006000000000000000000000102030e06540000000000000000000004000000000000001e4000000400000000000000000004000000000000f4bf000400000000000000000006027a7a00040000000000000000000502f2c00100"
	b, err := hex.DecodeString(stored)
	if err != nil {
		t.Fatal(err)
	}
	keys, start, end, accs, err := decodeGroupState(b, 2, 7)
	if err != nil {
		t.Fatal(err)
	}
	if keys[0] != sql.Varchar("user-1") || keys[1] != sql.BigInt(3) || start != 60000 || end != 120000 {
		t.Fatalf("keys %v window %d %d", keys, start, end)
	}
	specs := []planner.AggSpec{
		builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
		builtinAgg("COUNT(DISTINCT)", col(0), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("SUM", col(0), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("SUM", col(0), sql.TypeDouble, sql.TypeDouble),
		builtinAgg("MIN", col(0), sql.TypeDouble, sql.TypeDouble),
		builtinAgg("MAX", col(0), sql.TypeVarchar, sql.TypeVarchar),
		builtinAgg("SUM", col(0), sql.TypeNumeric, sql.TypeNumeric),
	}
	want := []string{"4", "1", "42", "7.5", "-1.25", "zz", "123.45"}
	for i, s := range specs {
		if err := s.Func.Decode(&accs[i]); err != nil {
			t.Fatal(err)
		}
		if got := sql.Text(s.Func.Result(&accs[i])); got != want[i] {
			t.Errorf("aggregate %d (%s) = %s, want %s", i, s.Text, got, want[i])
		}
	}
	// The COUNT(DISTINCT) value goes under a key of its own now: it is fresh (written at the
	// next checkpoint), and the group's value is the earlier one without it.
	if fresh := hex.EncodeToString(accs[1].Set.FreshChunk()); fresh != "02030e" {
		t.Errorf("fresh distinct values %s, want 02030e (BIGINT 7)", fresh)
	}
	wantHex := strings.Replace(stored, "0102030e", "00", 1)
	if again := hex.EncodeToString(appendGroupState(nil, keys, start, end, accs)); again != wantHex {
		t.Errorf("written back as\n%s\nwant\n%s", again, wantHex)
	}
}

// A pane group's key and value give back its keys, window and accumulators, and every
// truncation of either is refused.
func TestPaneGroupRoundTrip(t *testing.T) {
	prefix := state.SplitPrefix(nil, "j", "agg", "0")
	keys := []sql.Value{sql.Varchar("k"), sql.BigInt(-9)}
	key := append(panePrefix(nil, "j", "agg", "0", -2000), sql.AppendRow(nil, keys)...)
	accs := []accum{{N: 3, I: -7, F: 2.5, V: sql.Varchar("m")}, {N: 2}, {}, {F: math.Copysign(0, -1)}}
	value := appendPaneAccs(nil, accs)
	rest := key[len(prefix):]
	gk, start, end, got, err := decodePaneGroup(rest, value, 2000, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !sql.EqualRows(gk, keys) || start != -2000 || end != 0 || got[0] != accs[0] || got[1] != accs[1] || got[2] != accs[2] || !math.Signbit(got[3].F) {
		t.Fatalf("got keys %v window %d %d accs %+v", gk, start, end, got)
	}
	if n := len(appendPaneAccs(nil, []accum{{N: 300}})); n != 3 {
		t.Fatalf("a COUNT of 300 takes %d bytes, want 3", n)
	}
	for i := range rest {
		if _, _, _, _, err := decodePaneGroup(rest[:i], value, 2000, 2, 4); !errors.Is(err, errBadState) {
			t.Fatalf("key truncated at %d: %v", i, err)
		}
	}
	for i := range value {
		if _, _, _, _, err := decodePaneGroup(rest, value[:i], 2000, 2, 4); !errors.Is(err, errBadState) {
			t.Fatalf("value truncated at %d: %v", i, err)
		}
	}
	if _, _, _, _, err := decodePaneGroup(rest, value, 2000, 1, 4); !errors.Is(err, errBadState) {
		t.Fatalf("wrong key count: %v", err)
	}
	if _, _, _, _, err := decodePaneGroup(rest, append(value, 0x10), 2000, 2, 5); !errors.Is(err, errBadState) {
		t.Fatalf("unknown flags: %v", err)
	}
}

func FuzzDecodePaneGroup(f *testing.F) {
	prefix := len(state.SplitPrefix(nil, "j", "agg", "0"))
	key := append(panePrefix(nil, "j", "agg", "0", 0), sql.AppendRow(nil, []sql.Value{sql.BigInt(7)})...)
	f.Add(key[prefix:], appendPaneAccs(nil, []accum{{N: 4}}), 1, 1)
	f.Add([]byte{paneKeyMark}, []byte{0}, 0, 0)
	f.Fuzz(func(t *testing.T, rest, value []byte, nk, na int) {
		if nk < 0 || na < 0 || nk > 8 || na > 8 {
			return
		}
		keys, start, end, accs, err := decodePaneGroup(rest, value, 2000, nk, na)
		if err != nil {
			if !errors.Is(err, errBadState) {
				t.Fatalf("error %v does not wrap errBadState", err)
			}
			return
		}
		if end != start+2000 {
			t.Fatalf("window %d %d", start, end)
		}
		k := append(panePrefix(nil, "j", "agg", "0", start), sql.AppendRow(nil, keys)...)
		if _, _, _, _, err := decodePaneGroup(k[prefix:], appendPaneAccs(nil, accs), 2000, nk, na); err != nil {
			t.Fatalf("re-encoded pane group does not decode: %v", err)
		}
	})
}
