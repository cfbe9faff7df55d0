package state

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/linxGnu/grocksdb"
)

// The batch's own encoding must be byte for byte what RocksDB's WriteBatch builds from the
// same operations, since the RocksDB store hands it over as is.
func TestBatchRepMatchesRocksWriteBatch(t *testing.T) {
	long := bytes.Repeat([]byte("v"), 300) // two-byte length prefix
	var b Batch
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	b.Put([]byte("a"), []byte("1"))
	wb.Put([]byte("a"), []byte("1"))
	b.Put([]byte(""), nil)
	wb.Put([]byte(""), nil)
	b.Delete([]byte("gone"))
	wb.Delete([]byte("gone"))
	b.Put(bytes.Repeat([]byte("k"), 200), long)
	wb.Put(bytes.Repeat([]byte("k"), 200), long)
	b.DropPrefix([]byte("p\xff"))
	wb.DeleteRange([]byte("p\xff"), []byte("q"))
	v := b.PutValue([]byte("filled"), 5)
	copy(v, "hello")
	wb.Put([]byte("filled"), []byte("hello"))
	rep, ok := b.rocksRep()
	if !ok {
		t.Fatal("batch has no RocksDB encoding")
	}
	if want := wb.Data(); !bytes.Equal(rep, want) {
		t.Fatalf("encoding differs:\n got %q\nwant %q", rep, want)
	}
	var got []string
	_ = b.Each(func(kind OpKind, k, v []byte) error {
		got = append(got, fmt.Sprintf("%d:%s=%d", kind, k[:min(len(k), 3)], len(v)))
		return nil
	})
	if want := "0:a=1 0:=0 1:gon=0 0:kkk=300 2:p\xff=0 0:fil=5"; strings.Join(got, " ") != want {
		t.Fatalf("Each: got %q, want %q", strings.Join(got, " "), want)
	}
	b.DropPrefix([]byte{0xff, 0xff})
	if _, ok := b.rocksRep(); ok {
		t.Fatal("an open-ended DropPrefix has no range encoding")
	}
	b.Reset()
	if _, ok := b.rocksRep(); ok {
		t.Fatal("empty batch after Reset")
	}
	b.Put([]byte("x"), []byte("y"))
	wb2 := grocksdb.NewWriteBatch()
	defer wb2.Destroy()
	wb2.Put([]byte("x"), []byte("y"))
	if rep, _ := b.rocksRep(); !bytes.Equal(rep, wb2.Data()) {
		t.Fatalf("after Reset: got %q, want %q", rep, wb2.Data())
	}
}

// A batch mixing the direct encoding's operations with an open-ended DropPrefix still
// applies in order on RocksDB.
func TestRocksWriteOpenDropPrefix(t *testing.T) {
	s, err := OpenRocks(t.TempDir(), RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put([]byte{0xff, 0xff, 1}, []byte("old")); err != nil {
		t.Fatal(err)
	}
	var b Batch
	b.Put([]byte("keep"), []byte("1"))
	b.DropPrefix([]byte{0xff, 0xff})
	b.Put([]byte{0xff, 0xff, 2}, []byte("new"))
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	var keys []string
	_ = s.Scan(nil, func(k, v []byte) error { keys = append(keys, fmt.Sprintf("%x=%s", k, v)); return nil })
	if want := "6b656570=1 ffff02=new"; strings.Join(keys, " ") != want {
		t.Fatalf("got %q, want %q", strings.Join(keys, " "), want)
	}
}

// batchOps lists b's operations (Each) as kind:key=value, space-separated.
func batchOps(b *Batch) string {
	var got []string
	_ = b.Each(func(kind OpKind, k, v []byte) error {
		got = append(got, fmt.Sprintf("%d:%s=%s", kind, k, v))
		return nil
	})
	return strings.Join(got, " ")
}

// Link adds another batch's operations without copying them: Each lists the batch's own
// (those recorded after linking too), then each linked part's in the order linked; Len and
// Size count them all; Reset lets the parts go without emptying them; and the RocksDB
// store writes them all, whether the first operations are the batch's own, its first
// part's (the batch has none of its own) or cannot be copied (an open-ended DropPrefix).
func TestBatchLink(t *testing.T) {
	var own, p1, p2, empty Batch
	p1.Put([]byte("b1"), []byte("x"))
	p1.Delete([]byte("gone"))
	p2.DropPrefix([]byte("d"))
	p2.Put([]byte("d2"), []byte("y"))
	own.Put([]byte("a"), []byte("1"))
	own.Link(&p1)
	own.Link(&empty)
	own.Link(nil)
	own.Link(&p2)
	own.Put([]byte("a2"), []byte("2")) // after linking: still before the parts
	if want := "0:a=1 0:a2=2 0:b1=x 1:gone= 2:d= 0:d2=y"; batchOps(&own) != want {
		t.Fatalf("Each: %q, want %q", batchOps(&own), want)
	}
	if own.Len() != 6 || own.Size() != len(own.buf)+len(p1.buf)+len(p2.buf) {
		t.Fatalf("Len %d, Size %d", own.Len(), own.Size())
	}
	var outer Batch
	outer.Link(&own) // a part with parts of its own
	if batchOps(&outer) != batchOps(&own) || outer.Len() != 6 {
		t.Fatalf("nested: %q (%d ops)", batchOps(&outer), outer.Len())
	}

	for _, c := range []struct {
		name, kept string
		b          func() *Batch
	}{
		{"own first", " \xff\xff\x01=old", func() *Batch { return &own }},
		{"no own operations", " \xff\xff\x01=old", func() *Batch { return &outer }},
		{"open-ended first", "", func() *Batch {
			var o Batch
			o.DropPrefix([]byte{0xff, 0xff})
			o.Link(&own)
			return &o
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := OpenRocks(t.TempDir(), RocksOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, k := range []string{"gone", "d1", "\xff\xff\x01"} {
				if err := s.Put([]byte(k), []byte("old")); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Write(c.b()); err != nil {
				t.Fatal(err)
			}
			var keys []string
			_ = s.Scan(nil, func(k, v []byte) error { keys = append(keys, fmt.Sprintf("%s=%s", k, v)); return nil })
			if want := "a=1 a2=2 b1=x d2=y" + c.kept; strings.Join(keys, " ") != want {
				t.Fatalf("stored %q, want %q", strings.Join(keys, " "), want)
			}
		})
	}

	own.Reset()
	if own.Len() != 0 || batchOps(&own) != "" || p1.Len() != 2 || p2.Len() != 2 {
		t.Fatalf("after Reset: %d ops (%q); parts %d and %d ops", own.Len(), batchOps(&own), p1.Len(), p2.Len())
	}
}
