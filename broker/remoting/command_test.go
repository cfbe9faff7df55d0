package remoting

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		c := &Command{Code: 105, Language: "GO", Version: 317, Opaque: 7, Flag: 1, Remark: "r",
			ExtFields: map[string]string{"topic": "t1", "n": "5"}, Body: []byte("body"), SerializeType: st}
		f, err := Encode(nil, c)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ReadFrame(bytes.NewReader(f), 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("type %d: got %+v want %+v", st, got, c)
		}
	}
}

func TestDecodeGoClientHeader(t *testing.T) {
	h := `{"code":105,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"topic":"t1","n":3}}`
	p := append([]byte{0, 0, 0, byte(len(h))}, h...)
	c, err := Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Code != 105 || c.Opaque != 7 || c.Ext("topic") != "t1" || c.Ext("n") != "3" || c.Body != nil {
		t.Fatalf("decoded %+v", c)
	}
}

func TestBadFrames(t *testing.T) {
	if _, err := ReadFrame(bytes.NewReader([]byte{0x7f, 0, 0, 0}), 16<<20, nil); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 10, 1, 2}), 16<<20, nil); err == nil {
		t.Fatal("truncated frame accepted")
	}
	for _, p := range [][]byte{{}, {0, 0, 0, 9, '{'}, {0, 0, 0, 1, '['}, {5, 0, 0, 0}, {1, 0, 0, 2, 0, 1}} {
		if _, err := Decode(p); err == nil {
			t.Fatalf("Decode(%v) accepted garbage", p)
		}
	}
}

func FuzzDecode(f *testing.F) {
	c := &Command{Code: 10, Language: "GO", Opaque: 1, ExtFields: map[string]string{"a": "b"}, Body: []byte("x")}
	j, _ := Encode(nil, c)
	c.SerializeType = SerializeRocketMQ
	r, _ := Encode(nil, c)
	f.Add(j[4:])
	f.Add(r[4:])
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := Decode(p)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a FrameError: %v", err)
			}
			return
		}
		// A decoded command re-encodes and decodes to the same fields.
		out, err := Encode(nil, c)
		if err != nil {
			return
		}
		c2, err := Decode(out[4:])
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if c2.Code != c.Code || c2.Opaque != c.Opaque || !bytes.Equal(c2.Body, c.Body) || len(c2.ExtFields) != len(c.ExtFields) {
			t.Fatalf("round trip changed the command: %+v vs %+v", c, c2)
		}
	})
}
