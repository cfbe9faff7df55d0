package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"testing"
)

// backends lists every Store implementation; each test body runs against all of them.
func backends(t *testing.T) map[string]func(t *testing.T) Store {
	return map[string]func(t *testing.T) Store{
		"memory": func(t *testing.T) Store { return NewMemory() },
		"rocksdb": func(t *testing.T) Store {
			s, err := OpenRocks(t.TempDir(), RocksOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

func forEachStore(t *testing.T, body func(t *testing.T, s Store)) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			body(t, s)
		})
	}
}

// model is the reference: a plain map, listed by sorting.
type model map[string]string

func (m model) list(prefix string) []string {
	var out []string
	for k, v := range m {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

func scanList(t *testing.T, s Store, prefix []byte) []string {
	t.Helper()
	var out []string
	if err := s.Scan(prefix, func(k, v []byte) error {
		out = append(out, string(k)+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStoreBasics(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		if _, ok, err := s.Get([]byte("a")); ok || err != nil {
			t.Fatalf("get on empty: ok=%v err=%v", ok, err)
		}
		key := []byte("a")
		if err := s.Put(key, []byte("1")); err != nil {
			t.Fatal(err)
		}
		key[0] = 'z' // the store must have copied the key
		v, ok, err := s.Get([]byte("a"))
		if !ok || err != nil || string(v) != "1" {
			t.Fatalf("get a: %q %v %v", v, ok, err)
		}
		if err := s.Delete([]byte("a")); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.Get([]byte("a")); ok {
			t.Fatal("a survived delete")
		}
		if err := s.Delete([]byte("never")); err != nil {
			t.Fatalf("delete of missing key: %v", err)
		}
	})
}

func TestStoreAgainstModel(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		m := model{}
		var b Batch
		// A deterministic mix of puts, deletes, batches and prefix drops.
		for i := 0; i < 2000; i++ {
			k := fmt.Sprintf("k%d/%03d", i%7, (i*37)%500)
			v := fmt.Sprintf("v%d", i)
			switch {
			case i%11 == 0:
				b.Delete([]byte(k))
				delete(m, k)
			case i%3 == 0:
				b.Put([]byte(k), []byte(v))
				m[k] = v
			default:
				if err := s.Write(&b); err != nil {
					t.Fatal(err)
				}
				b.Reset()
				if err := s.Put([]byte(k), []byte(v)); err != nil {
					t.Fatal(err)
				}
				m[k] = v
			}
		}
		if err := s.Write(&b); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"", "k3", "k3/", "k3/1", "nothing"} {
			if got, want := scanList(t, s, []byte(p)), m.list(p); !equal(got, want) {
				t.Fatalf("scan %q: %d entries, want %d", p, len(got), len(want))
			}
		}
		if err := s.DropPrefix([]byte("k4")); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			if k[:2] == "k4" {
				delete(m, k)
			}
		}
		if got, want := scanList(t, s, nil), m.list(""); !equal(got, want) {
			t.Fatalf("after drop: %d entries, want %d", len(got), len(want))
		}
	})
}

func TestStoreBatchOrderAndDrop(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		var b Batch
		b.Put([]byte("p/1"), []byte("x"))
		b.Put([]byte("p/2"), []byte("y"))
		b.Delete([]byte("p/1"))
		b.Put([]byte("q/1"), []byte("z"))
		if err := s.Write(&b); err != nil {
			t.Fatal(err)
		}
		if got := scanList(t, s, nil); !equal(got, []string{"p/2=y", "q/1=z"}) {
			t.Fatalf("got %v", got)
		}
		b.Reset()
		b.DropPrefix([]byte("p/"))
		b.Put([]byte("p/3"), []byte("w")) // after the drop in the same batch: survives
		if err := s.Write(&b); err != nil {
			t.Fatal(err)
		}
		if got := scanList(t, s, nil); !equal(got, []string{"p/3=w", "q/1=z"}) {
			t.Fatalf("got %v", got)
		}
		// A prefix of 0xff bytes has no finite upper bound.
		_ = s.Put([]byte{0xff, 0xff, 1}, []byte("a"))
		if err := s.DropPrefix([]byte{0xff, 0xff}); err != nil {
			t.Fatal(err)
		}
		if got := scanList(t, s, []byte{0xff}); len(got) != 0 {
			t.Fatalf("0xff prefix survived: %v", got)
		}
	})
}

func TestStoreSplitExportImport(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		// Keys of two splits of the same operator; "1" must not capture "10".
		for _, split := range []string{"1", "10", "2"} {
			for g := 0; g < 5; g++ {
				k := Key(nil, "job", "agg1", split, []byte{byte(g)}, int64(g)*1000-2000, int64(g)*1000-1000)
				if err := s.Put(k, []byte(split)); err != nil {
					t.Fatal(err)
				}
			}
		}
		p1 := SplitPrefix(nil, "job", "agg1", "1")
		got := scanList(t, s, p1)
		if len(got) != 5 {
			t.Fatalf("split 1 lists %d keys, want 5", len(got))
		}
		for _, kv := range got {
			if kv[len(kv)-2:] != "=1" {
				t.Fatalf("split 1 listed %q", kv)
			}
		}
		blob, err := s.Export(p1)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DropPrefix(p1); err != nil {
			t.Fatal(err)
		}
		if n := len(scanList(t, s, p1)); n != 0 {
			t.Fatalf("split 1 has %d keys after drop", n)
		}
		if n := len(scanList(t, s, OperatorPrefix(nil, "job", "agg1"))); n != 10 {
			t.Fatalf("other splits have %d keys after drop, want 10", n)
		}
		// Move split 1 to a fresh memory store and back.
		other := NewMemory()
		if err := other.Import(blob); err != nil {
			t.Fatal(err)
		}
		blob2, _ := other.Export(nil)
		if err := s.Import(blob2); err != nil {
			t.Fatal(err)
		}
		if got2 := scanList(t, s, p1); !equal(got, got2) {
			t.Fatalf("after import: %v, want %v", got2, got)
		}
		// Windows sort by start, negative starts first.
		var starts []string
		_ = s.Scan(p1, func(k, _ []byte) error { starts = append(starts, string(k[len(k)-16:len(k)-8])); return nil })
		if !sort.StringsAreSorted(starts) {
			t.Fatal("window starts out of order")
		}
		bad := append([]byte(nil), blob...)
		bad[len(bad)-5] ^= 1
		if err := s.Import(bad); !errors.Is(err, ErrCorruptExport) {
			t.Fatalf("corrupt import: %v", err)
		}
	})
}

func TestStoreClosed(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		_ = s.Close()
		if err := s.Put([]byte("a"), nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("put after close: %v", err)
		}
	})
}

func TestRocksReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenRocks(dir, RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Put([]byte("k"), []byte("v"))
	_ = s.Close()
	s, err = OpenRocks(dir, RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, ok, _ := s.Get([]byte("k")); !ok || !bytes.Equal(v, []byte("v")) {
		t.Fatalf("after reopen: %q %v", v, ok)
	}
}

func FuzzDecodeExport(f *testing.F) {
	w := newExportWriter()
	w.add([]byte("k1"), []byte("v1"))
	w.add(Key(nil, "j", "o", "s", []byte("key"), 0, 10), nil)
	f.Add(w.finish())
	f.Add(newExportWriter().finish())
	f.Add([]byte("RSX1"))
	f.Fuzz(func(t *testing.T, blob []byte) {
		// Also try the input with a valid checksum, so the entry parser is reached.
		if len(blob) >= 8 {
			fixed := append([]byte(nil), blob[:len(blob)-4]...)
			fixed = binary.LittleEndian.AppendUint32(fixed, crc32.Checksum(fixed, crcTable))
			_ = DecodeExport(fixed, func(k, v []byte) error { return nil })
		}
		n := 0
		err := DecodeExport(blob, func(k, v []byte) error {
			n += len(k) + len(v)
			return nil
		})
		if err == nil && n > len(blob) {
			t.Fatalf("entries longer than the blob")
		}
		if err != nil && !errors.Is(err, ErrCorruptExport) {
			t.Fatalf("error %v does not wrap ErrCorruptExport", err)
		}
	})
}

// A key written again holds the last value, whether it is as long as the one before,
// longer or shorter, and values handed out earlier do not change.
func TestStoreOverwrite(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		var first []byte
		for i, v := range []string{"abc", "xyz", "longer value", "s", "t"} {
			var b Batch
			b.Put([]byte("k"), []byte(v))
			if err := s.Write(&b); err != nil {
				t.Fatal(err)
			}
			got, ok, err := s.Get([]byte("k"))
			if err != nil || !ok || string(got) != v {
				t.Fatalf("after writing %q: %q %v %v", v, got, ok, err)
			}
			if i == 0 {
				first = got
			}
		}
		if string(first) != "abc" {
			t.Fatalf("a value read earlier changed to %q", first)
		}
	})
}
