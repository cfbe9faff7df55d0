package exec

import (
	"errors"
	"testing"

	"rsql/sql"
)

func TestGroupStateRoundTrip(t *testing.T) {
	accs := []accum{{n: 3, i: -7, f: 2.5, v: sql.Varchar("m")}, {n: 2, set: map[string]struct{}{"\x03\x02": {}, "\x03\x04": {}}}}
	b := appendGroupState(nil, []sql.Value{sql.Varchar("k"), sql.BigInt(9)}, -1000, 2000, accs)
	keys, start, end, got, err := decodeGroupState(b, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if keys[0] != sql.Varchar("k") || keys[1] != sql.BigInt(9) || start != -1000 || end != 2000 {
		t.Fatalf("keys %v window %d %d", keys, start, end)
	}
	if got[0].n != 3 || got[0].i != -7 || got[0].f != 2.5 || got[0].v != sql.Varchar("m") || len(got[1].set) != 2 {
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
	f.Add(appendGroupState(nil, []sql.Value{sql.Varchar("u1")}, 0, 1000, []accum{{n: 1, f: 2}, {n: 1, v: sql.Double(2)}}), 1, 2)
	f.Add(appendGroupState(nil, nil, 5, 6, []accum{{set: map[string]struct{}{"a": {}}}}), 0, 1)
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
