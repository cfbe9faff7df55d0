package broker

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"testing"
)

// payload returns n bytes from a 16-letter alphabet (compressible about 2:1).
func payload(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.Intn(16))
	}
	return b
}

// TestCompressedBodiesInflateOnRead: a body stored compressed (as RocketMQ's clients send
// bodies from 4 KiB on) comes back inflated from Pull, Peek and DecodeRecords, with the
// flag cleared; one that does not inflate keeps its bytes and flag and says why.
func TestCompressedBodiesInflateOnRead(t *testing.T) {
	b := mustOpen(t, Config{Dir: t.TempDir(), SegmentSize: 16 << 20, FlushInterval: 10e6})
	defer b.Close()
	if err := b.CreateTopic("big", 1); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	sizes := []int{3 << 10, 5 << 10, 100 << 10, 4 << 20}
	var want [][]byte
	var batch []Message
	for _, n := range sizes {
		p := payload(r, n)
		want = append(want, p)
		batch = append(batch, Message{Key: "k", Body: CompressBody(nil, p), SysFlag: SysFlagCompressed})
	}
	// A body flagged compressed that is not zlib, and one that is cut short.
	good := CompressBody(nil, payload(r, 10<<10))
	batch = append(batch, Message{Body: []byte("not zlib at all"), SysFlag: SysFlagCompressed},
		Message{Body: good[:len(good)/2], SysFlag: SysFlagCompressed})
	if _, err := b.Append("big", 0, batch); err != nil {
		t.Fatal(err)
	}
	msgs, _, err := b.Pull(context.Background(), "big", 0, 0, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(batch) {
		t.Fatalf("pulled %d messages, want %d", len(msgs), len(batch))
	}
	for i, p := range want {
		m := msgs[i]
		if m.BodyErr != nil || !bytes.Equal(m.Body, p) || m.SysFlag&SysFlagCompressed != 0 {
			t.Errorf("message %d (%d bytes): err %v, body of %d bytes equal %v, sysFlag %x", i, len(p), m.BodyErr, len(m.Body), bytes.Equal(m.Body, p), m.SysFlag)
		}
	}
	for i := len(want); i < len(msgs); i++ {
		m := msgs[i]
		if !errors.Is(m.BodyErr, ErrBadBody) || m.SysFlag&SysFlagCompressed == 0 || !bytes.Equal(m.Body, batch[i].Body) {
			t.Errorf("bad message %d: err %v, sysFlag %x, body kept %v", i, m.BodyErr, m.SysFlag, bytes.Equal(m.Body, batch[i].Body))
		}
	}
	peeked, err := b.Peek("big", 0, 1, 1)
	if err != nil || len(peeked) != 1 || !bytes.Equal(peeked[0].Body, want[1]) {
		t.Errorf("Peek: %v, %d messages", err, len(peeked))
	}
}

func TestDecompressBodyLimits(t *testing.T) {
	zeros := CompressBody(nil, make([]byte, 1<<20)) // 1 MiB of zeros: about 1 KiB
	if out, err := DecompressBody(zeros, 1<<20); err != nil || len(out) != 1<<20 {
		t.Fatalf("at the limit: %d bytes, %v", len(out), err)
	}
	if _, err := DecompressBody(zeros, 1<<20-1); !errors.Is(err, ErrBadBody) {
		t.Fatalf("over the limit: %v, want ErrBadBody", err)
	}
	if _, err := DecompressBody(append(zeros, 'x'), 0); !errors.Is(err, ErrBadBody) {
		t.Fatalf("trailing bytes: %v, want ErrBadBody", err)
	}
	for _, in := range [][]byte{nil, {0x78}, {0x78, 0x9c}, zeros[:len(zeros)-1]} {
		if _, err := DecompressBody(in, 0); !errors.Is(err, ErrBadBody) {
			t.Errorf("%x: %v, want ErrBadBody", in, err)
		}
	}
}

// FuzzDecompressBody: any input inflates within the limit or fails with ErrBadBody; what
// inflates compresses and inflates back to itself.
func FuzzDecompressBody(f *testing.F) {
	f.Add(CompressBody(nil, []byte(`{"id":1,"payload":"abc"}`)))
	f.Add(CompressBody(nil, make([]byte, 64<<10)))
	f.Add([]byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	f.Add([]byte("plain text"))
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 1 << 20
		out, err := DecompressBody(in, limit)
		if err != nil {
			if !errors.Is(err, ErrBadBody) {
				t.Fatalf("error does not wrap ErrBadBody: %v", err)
			}
			return
		}
		if len(out) > limit {
			t.Fatalf("inflated to %d bytes, over the limit %d", len(out), limit)
		}
		back, err := DecompressBody(CompressBody(nil, out), limit)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
