package connectors

import (
	"encoding/binary"
	"testing"
)

func encodePositionForTest(offs []int64) []byte {
	out := binary.AppendUvarint(nil, uint64(len(offs)))
	for _, o := range offs {
		out = binary.AppendVarint(out, o)
	}
	return out
}

func TestDecodePosition(t *testing.T) {
	offs, err := decodePosition(encodePositionForTest([]int64{0, 5, 1 << 40}))
	if err != nil || len(offs) != 3 || offs[0] != 0 || offs[1] != 5 || offs[2] != 1<<40 {
		t.Fatalf("decodePosition = %v, %v", offs, err)
	}
	for _, bad := range [][]byte{nil, {0xff}, {2, 2}, append(encodePositionForTest([]int64{1}), 7), encodePositionForTest([]int64{-1})} {
		if _, err := decodePosition(bad); err == nil {
			t.Errorf("decodePosition(%x) accepted a bad mark", bad)
		}
	}
}

// FuzzDecodePosition: any bytes give offsets or an error, never a panic, and what decodes
// encodes back to the same bytes when written canonically.
func FuzzDecodePosition(f *testing.F) {
	f.Add(encodePositionForTest([]int64{0, 1, 2, 3}))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		offs, err := decodePosition(b)
		if err != nil {
			return
		}
		for _, o := range offs {
			if o < 0 {
				t.Fatalf("negative offset %d decoded", o)
			}
		}
		if again, err := decodePosition(encodePositionForTest(offs)); err != nil || len(again) != len(offs) {
			t.Fatalf("re-encoded mark does not decode: %v", err)
		}
	})
}
