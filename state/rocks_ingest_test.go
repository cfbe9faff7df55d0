package state

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// A batch of at least a memtable's size is written as a table file, and the store then
// holds what it holds when the same batch goes through the memtable: random puts,
// deletes, repeated keys and range deletions before and after the keys they cover, over
// keys the store held before, in a batch with linked parts.
func TestRocksIngestsLargeBatchesAsWritten(t *testing.T) {
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 7))
		key := func() []byte { return fmt.Appendf(nil, "k%02d/%03d", rng.IntN(20), rng.IntN(300)) }
		var before Batch
		for range 2000 {
			before.Put(key(), []byte("old"))
		}
		var own, part Batch
		for i := range 6000 {
			b := &own
			if i%3 == 0 {
				b = &part
			}
			switch r := rng.IntN(100); {
			case r < 70:
				b.Put(key(), fmt.Appendf(nil, "v%d", i))
			case r < 95:
				b.Delete(key())
			default:
				b.DropPrefix(fmt.Appendf(nil, "k%02d/%d", rng.IntN(20), rng.IntN(3)))
			}
		}
		own.Link(&part)

		stores := make([]*Rocks, 2)
		for i := range stores {
			s, err := OpenRocks(t.TempDir(), RocksOptions{WriteBufferBytes: 64 << 10, NoIngest: i == 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Write(&before); err != nil {
				t.Fatal(err)
			}
			if err := s.Write(&own); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			stores[i] = s
		}
		if n := stores[0].ingested.Load(); n != 1 || stores[1].ingested.Load() != 0 {
			t.Fatalf("seed %d: %d and %d batches ingested, want 1 and 0", seed, n, stores[1].ingested.Load())
		}
		contents := func(s *Rocks) string {
			var kv []string
			if err := s.Scan(nil, func(k, v []byte) error { kv = append(kv, string(k)+"="+string(v)); return nil }); err != nil {
				t.Fatal(err)
			}
			return strings.Join(kv, " ")
		}
		if got, want := contents(stores[0]), contents(stores[1]); got != want {
			t.Fatalf("seed %d: ingested batch left\n%s\nthe memtable's\n%s", seed, got, want)
		}
		// Reads and later writes see it as any write.
		var after Batch
		after.DropPrefix([]byte("k0"))
		for _, s := range stores {
			if err := s.Write(&after); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := contents(stores[0]), contents(stores[1]); got != want || strings.Contains(got, "k0") {
			t.Fatalf("seed %d: after a later write\n%s\nwant\n%s", seed, got, want)
		}
	}
}

// A batch below a memtable's size, or with an open-ended DropPrefix, goes through the
// memtable; a table file a crash left behind is removed when the store opens.
func TestRocksIngestOnlyLargeBatches(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenRocks(dir, RocksOptions{WriteBufferBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var small, open Batch
	small.Put([]byte("a"), []byte("1"))
	for i := range 10_000 {
		open.Put(fmt.Appendf(nil, "b%05d", i), []byte("value"))
	}
	open.DropPrefix([]byte{0xff})
	for _, b := range []*Batch{&small, &open} {
		if err := s.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.ingested.Load(); n != 0 {
		t.Fatalf("%d batches ingested", n)
	}
	if v, ok, _ := s.Get([]byte("b09999")); !ok || string(v) != "value" {
		t.Fatalf("b09999: %q %v", v, ok)
	}
	s.Close()
	left := dir + "/" + ingestPrefix + "1-1.sst"
	if err := os.WriteFile(left, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = OpenRocks(dir, RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(left); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a crash's table file is still there after opening")
	}
}
