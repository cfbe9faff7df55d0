package exec

import (
	"bytes"
	"strconv"
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

// The outbox is encoded in place into a slot of outboxSize bytes, so the size must be exact
// for every length, including those at varint boundaries.
func TestOutboxSizeExact(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 129, 16383, 16384, 70000} {
		body := bytes.Repeat([]byte("b"), n)
		msgs := []connectors.Message{{Key: body[:n/2], Body: body}, {Body: body[:n/3]}}
		many := make([]connectors.Message, n%300)
		for _, ms := range [][]connectors.Message{msgs, many, nil} {
			enc := encodeOutbox(body[:n%200], ms)
			if got := outboxSize(body[:n%200], ms); got != len(enc) {
				t.Fatalf("n=%d, %d messages: outboxSize %d, encoded %d bytes", n, len(ms), got, len(enc))
			}
		}
	}
}

func TestSetIDs(t *testing.T) {
	msgs := make([]connectors.Message, 1234)
	setIDs(msgs, "job-7", 42, "3", false)
	for i := range msgs {
		if want := "job-7/42.3/" + strconv.Itoa(i); msgs[i].ID != want || unitMessageID("job-7", 42, "3", i) != want {
			t.Fatalf("message %d: ID %q, want %q", i, msgs[i].ID, want)
		}
	}
	setIDs(msgs, "job-7", 42, "", true)
	for i := range msgs {
		if want := "job-7/42/" + strconv.Itoa(i); msgs[i].ID != want || messageID("job-7", 42, i) != want {
			t.Fatalf("legacy message %d: ID %q, want %q", i, msgs[i].ID, want)
		}
	}
}
