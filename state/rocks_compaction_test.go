package state

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A database is compacted with universal compaction by default (RocksOptions.Leveled): the
// options RocksDB records in the database's directory say so, with the sorted runs and
// the uncompressed tables of state/rocks.go. A database written with leveled compaction (by
// an earlier rsql) opens with the defaults and reads back exactly what was written, and
// keeps doing so while new writes flush and merge sorted runs over its levels.
func TestRocksCompactionStyles(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewSource(7))
	want := map[string][]byte{}
	// writeRounds writes about 6 MB a round, small and large values, with overwrites and
	// deletes: several memtables, so tables are flushed and compacted.
	writeRounds := func(s *Rocks, rounds int) {
		t.Helper()
		for round := 0; round < rounds; round++ {
			b := &Batch{}
			for i := 0; i < 3000; i++ {
				k, v := fmt.Sprintf("k%05d", r.Intn(8000)), make([]byte, 20+r.Intn(2000))
				r.Read(v)
				b.Put([]byte(k), v)
				want[k] = v
			}
			for i := 0; i < 300; i++ {
				k := fmt.Sprintf("k%05d", r.Intn(8000))
				b.Delete([]byte(k))
				delete(want, k)
			}
			if err := s.Write(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string, s *Rocks) {
		t.Helper()
		got := map[string][]byte{}
		if err := s.Scan([]byte("k"), func(k, v []byte) error {
			got[string(k)] = bytes.Clone(v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("%s: key %s has %d bytes, want %d", what, k, len(got[k]), len(v))
			}
			if g, ok, err := s.Get([]byte(k)); err != nil || !ok || !bytes.Equal(g, v) {
				t.Fatalf("%s: Get %s: found %v, %v", what, k, ok, err)
			}
		}
	}

	old, err := OpenRocks(dir, RocksOptions{Leveled: true})
	if err != nil {
		t.Fatal(err)
	}
	writeRounds(old, 6)
	check("leveled", old)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if o := latestOptions(t, dir); !strings.Contains(o, "compaction_style=kCompactionStyleLevel") {
		t.Fatalf("leveled database's options:\n%s", o)
	}

	s, err := OpenRocks(dir, RocksOptions{})
	if err != nil {
		t.Fatalf("open a leveled database with the defaults: %v", err)
	}
	defer s.Close()
	o := latestOptions(t, dir)
	for _, opt := range []string{"compaction_style=kCompactionStyleUniversal", fmt.Sprint("level0_file_num_compaction_trigger=", universalSortedRuns), "compression=kNoCompression"} {
		if !strings.Contains(o, "\n  "+opt+"\n") {
			t.Errorf("the defaults' options lack %s", opt)
		}
	}
	check("reopened", s)
	writeRounds(s, 10)
	check("written with universal compaction", s)
}

// latestOptions is the text of the newest OPTIONS file RocksDB wrote in dir.
func latestOptions(t *testing.T, dir string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no OPTIONS file in %s: %v", dir, err)
	}
	num := func(name string) int {
		var n int
		fmt.Sscanf(strings.TrimPrefix(filepath.Base(name), "OPTIONS-"), "%d", &n)
		return n
	}
	sort.Slice(names, func(i, j int) bool { return num(names[i]) < num(names[j]) })
	b, err := os.ReadFile(names[len(names)-1])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRocksDisk checks Disk against the table and blob files in the database's directory,
// and that it reads zero once the store is closed.
func TestRocksDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenRocks(dir, RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(9))
	for round := 0; round < 8; round++ {
		b := &Batch{}
		for i := 0; i < 2000; i++ {
			v := make([]byte, 20+r.Intn(4000))
			r.Read(v)
			b.Put([]byte(fmt.Sprintf("k%05d", r.Intn(20000))), v)
		}
		if err := s.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	d := s.Disk()
	files := map[string]uint64{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			files[filepath.Ext(e.Name())] += uint64(info.Size())
		}
	}
	t.Logf("Disk %+v; files: %d bytes of tables, %d of blobs", d, files[".sst"], files[".blob"])
	// (A compaction may add or delete a file between the two readings.)
	for _, c := range []struct {
		what      string
		got, want uint64
	}{{"tables", d.Tables, files[".sst"]}, {"blobs", d.Blobs, files[".blob"]}} {
		if c.got == 0 || c.got < c.want/2 || c.got > 2*c.want {
			t.Errorf("%s: Disk says %d bytes, the directory holds %d", c.what, c.got, c.want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := s.Disk(); d != (RocksDisk{}) {
		t.Fatalf("Disk after Close: %+v", d)
	}
}
