package state

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linxGnu/grocksdb"
)

// Values of MinBlobBytes or more go to blob files beside the table files (key-value
// separation) by default; overwritten, deleted and dropped values, a reopen and an export
// read back exactly what was written, and with the setting off no blob file is written.
func TestRocksLargeValuesInBlobFiles(t *testing.T) {
	for _, minBlob := range []int{0, -1} {
		t.Run(fmt.Sprint("MinBlobBytes ", minBlob), func(t *testing.T) {
			dir := t.TempDir()
			opts := RocksOptions{MinBlobBytes: minBlob}
			s, err := OpenRocks(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewSource(int64(minBlob)))
			want := map[string][]byte{}
			key := func() string { return fmt.Sprintf("k%05d", r.Intn(6000)) }
			// About 19 MB in three batches: more than two memtables, so tables (and blob
			// files) are flushed while values are overwritten and deleted.
			for round := 0; round < 3; round++ {
				b := &Batch{}
				for i := 0; i < 4000; i++ {
					k, v := key(), make([]byte, 100+r.Intn(3000))
					r.Read(v)
					b.Put([]byte(k), v)
					want[k] = v
				}
				for i := 0; i < 300; i++ {
					k := key()
					b.Delete([]byte(k))
					delete(want, k)
				}
				if err := s.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			b := &Batch{}
			b.DropPrefix([]byte("k01"))
			if err := s.Write(b); err != nil {
				t.Fatal(err)
			}
			for k := range want {
				if strings.HasPrefix(k, "k01") {
					delete(want, k)
				}
			}
			check := func(what string, st Store) {
				t.Helper()
				for k, v := range want {
					got, ok, err := st.Get([]byte(k))
					if err != nil || !ok || !bytes.Equal(got, v) {
						t.Fatalf("%s: %s: %d bytes, found %v, %v; want %d bytes", what, k, len(got), ok, err, len(v))
					}
				}
				n := 0
				err := st.Scan([]byte("k"), func(k, v []byte) error {
					n++
					if w, ok := want[string(k)]; !ok || !bytes.Equal(v, w) {
						return fmt.Errorf("key %s: %d bytes, wanted %v (%d bytes)", k, len(v), ok, len(w))
					}
					return nil
				})
				if err != nil || n != len(want) {
					t.Fatalf("%s: scan: %d keys, want %d: %v", what, n, len(want), err)
				}
			}
			check("written", s)
			// The memtables go to table (and blob) files in the background; wait for them.
			fo := grocksdb.NewDefaultFlushOptions()
			fo.SetWait(true)
			err = s.db.Flush(fo)
			fo.Destroy()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			blobs, err := filepath.Glob(filepath.Join(dir, "*.blob"))
			if err != nil {
				t.Fatal(err)
			}
			if minBlob >= 0 && len(blobs) == 0 {
				t.Fatal("no blob file: the large values are in the table files")
			}
			if minBlob < 0 && len(blobs) > 0 {
				t.Fatalf("%d blob files with blob files off", len(blobs))
			}
			s, err = OpenRocks(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			check("reopened", s)
			exp, err := s.Export([]byte("k"))
			if err != nil {
				t.Fatal(err)
			}
			other, err := OpenRocks(t.TempDir(), RocksOptions{MinBlobBytes: -minBlob - 1})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if err := other.Import(exp); err != nil {
				t.Fatal(err)
			}
			check("imported", other)
		})
	}
}
