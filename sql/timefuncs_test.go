package sql

import (
	"math/rand"
	"testing"
)

// A format remembered for its unit of time gives what the format gives, for timestamps in
// order (the remembered unit reused), out of order, before the epoch and on the units'
// edges; a format with microseconds is not remembered.
func TestMemoDateFormatMatchesFormat(t *testing.T) {
	formats := []string{"%Y-%m-%d", "%H:%i", "%Y-%m-%d %H:%i:%s", "%h %p", "%W %D %j %x-%v", "%T|%r", "%%i", "literal", "%i%"}
	wantUnits := []int64{86_400_000, 60_000, 1_000, 3_600_000, 86_400_000, 1_000, 86_400_000, 86_400_000, 60_000}
	r := rand.New(rand.NewSource(3))
	for fi, format := range formats {
		direct, unit := compileDateFormat(format)
		if unit != wantUnits[fi] {
			t.Errorf("compileDateFormat(%q)'s unit = %d, want %d", format, unit, wantUnits[fi])
		}
		memo := memoDateFormat(direct, unit)
		ms := int64(1_700_000_000_000)
		for i := 0; i < 20000; i++ {
			switch r.Intn(4) {
			case 0:
				ms += int64(r.Intn(2000)) // in order
			case 1:
				ms = r.Int63n(4_000_000_000_000) - 2_000_000_000_000 // anywhere, before the epoch too
			case 2:
				ms = floorDiv(ms, unit)*unit - int64(r.Intn(2)) // a unit's first ms, or the last before it
			default:
				ms -= int64(r.Intn(100_000)) // back
			}
			if got, want := memo(ms), direct(ms); got != want {
				t.Fatalf("format %q at %d: %q, want %q", format, ms, got, want)
			}
		}
	}
	if _, unit := compileDateFormat("%s.%f"); unit != 1 {
		t.Error("a format with microseconds has a unit above 1 ms")
	}
}
