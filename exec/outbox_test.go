package exec

import (
	"bytes"
	"testing"

	"rsql/connectors"
)

func TestOutboxRoundTrip(t *testing.T) {
	msgs := []connectors.Message{{Key: []byte("u1"), Body: []byte(`{"a":1}`)}, {Body: []byte("x")}, {Key: []byte("k"), Body: nil}}
	pos := []byte{4, 1, 2, 3, 4}
	p, got, err := decodeOutbox(encodeOutbox(pos, msgs))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, pos) || len(got) != len(msgs) {
		t.Fatalf("pos %x, %d messages", p, len(got))
	}
	for i := range msgs {
		if !bytes.Equal(got[i].Key, msgs[i].Key) || !bytes.Equal(got[i].Body, msgs[i].Body) {
			t.Fatalf("message %d: %q %q", i, got[i].Key, got[i].Body)
		}
	}
	for _, bad := range [][]byte{nil, {5, 1}, {0, 3, 1}, append(encodeOutbox(pos, msgs), 0)} {
		if _, _, err := decodeOutbox(bad); err == nil {
			t.Errorf("decodeOutbox(%x) accepted", bad)
		}
	}
}

func FuzzDecodeOutbox(f *testing.F) {
	f.Add(encodeOutbox([]byte{1, 2}, []connectors.Message{{Key: []byte("k"), Body: []byte("b")}}))
	f.Add(encodeOutbox(nil, nil))
	f.Add([]byte{0, 255, 255, 255, 255, 15})
	f.Fuzz(func(t *testing.T, b []byte) {
		pos, msgs, err := decodeOutbox(b)
		if err != nil {
			return
		}
		if again := encodeOutbox(pos, msgs); !bytes.Equal(again, b) {
			// Non-minimal varints decode too; re-encoding must at least decode the same.
			p2, m2, err := decodeOutbox(again)
			if err != nil || !bytes.Equal(p2, pos) || len(m2) != len(msgs) {
				t.Fatalf("re-encoding %x does not round-trip", b)
			}
		}
	})
}
