package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

func indexConfig(t *testing.T) Config {
	cfg := testConfig(t)
	cfg.IndexSlots, cfg.IndexEntries = 1, 16 // every key in one chain; many small files
	return cfg
}

// waitIndexed waits until the indexer has caught up with the log.
func waitIndexed(t *testing.T, b *Broker) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.idx.indexed.Load() < b.cl.committed.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("indexed up to %d of %d", b.idx.indexed.Load(), b.cl.committed.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func queryBodies(t *testing.T, b *Broker, topicName, key string, max int, begin, end int64) []string {
	t.Helper()
	msgs, err := b.QueryMessages(topicName, key, max, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return out
}

func appendKeyed(t *testing.T, b *Broker, topicName string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		m := Message{Key: fmt.Sprintf("k%d all", i%5), Body: []byte(fmt.Sprint("b", i)),
			Properties: map[string]string{PropUniqKey: fmt.Sprint("U", i)}}
		if _, err := b.Append(topicName, i%2, []Message{m}); err != nil {
			t.Fatal(err)
		}
	}
}

func want(from, n int, pick func(i int) bool) []string {
	var out []string
	for i := from; i < from+n; i++ {
		if pick(i) {
			out = append(out, fmt.Sprint("b", i))
		}
	}
	return out
}

// TestKeyIndexQuery: lookups by KEYS entry and by UNIQ_KEY return exactly the messages that
// carry the key, in store order, across index files, for the topic asked only, and within
// the time range; and the index survives a restart.
func TestKeyIndexQuery(t *testing.T) {
	cfg := indexConfig(t)
	b := mustOpen(t, cfg)
	b.CreateTopic("ix", 2)
	b.CreateTopic("other", 1)
	appendKeyed(t, b, "ix", 0, 100)
	if _, err := b.Append("other", 0, []Message{{Key: "k1", Body: []byte("not-ix")}}); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, b)
	if n := len(b.idx.files); n < 10 {
		t.Fatalf("%d index files for 300 keys at 16 per file", n)
	}
	check := func(b *Broker) {
		t.Helper()
		if got, w := queryBodies(t, b, "ix", "k1", 64, 0, 1<<62), want(0, 100, func(i int) bool { return i%5 == 1 }); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("k1: %v, want %v", got, w)
		}
		if got := queryBodies(t, b, "ix", "U42", 64, 0, 1<<62); fmt.Sprint(got) != "[b42]" {
			t.Fatalf("U42: %v", got)
		}
		if got := queryBodies(t, b, "ix", "all", 7, 0, 1<<62); len(got) != 7 {
			t.Fatalf("limit 7: %d results", len(got))
		}
		if got := queryBodies(t, b, "ix", "nope", 64, 0, 1<<62); len(got) != 0 {
			t.Fatalf("unknown key: %v", got)
		}
		if got := queryBodies(t, b, "ix", "k1", 64, 0, 1); len(got) != 0 {
			t.Fatalf("k1 before 1970: %v", got)
		}
	}
	check(b)
	b.Close()
	b = mustOpen(t, cfg)
	check(b)
	// More messages after the restart are indexed too.
	appendKeyed(t, b, "ix", 100, 10)
	waitIndexed(t, b)
	if got := queryBodies(t, b, "ix", "U105", 64, 0, 1<<62); fmt.Sprint(got) != "[b105]" {
		t.Fatalf("U105 after restart: %v", got)
	}
	b.Close()
}

// TestKeyIndexRebuilt: a lost index directory, a damaged file and a lost checkpoint are
// all repaired from the commit log, without duplicate results.
func TestKeyIndexRebuilt(t *testing.T) {
	cfg := indexConfig(t)
	b := mustOpen(t, cfg)
	b.CreateTopic("ix", 2)
	appendKeyed(t, b, "ix", 0, 60)
	waitIndexed(t, b)
	b.Close()
	k2 := want(0, 60, func(i int) bool { return i%5 == 2 })
	for name, damage := range map[string]func(){
		"index directory removed": func() { os.RemoveAll(filepath.Join(cfg.Dir, "index")) },
		"checkpoint removed":      func() { os.Remove(filepath.Join(cfg.Dir, "checkpoint")) },
		"file header damaged": func() {
			ents, _ := os.ReadDir(filepath.Join(cfg.Dir, "index"))
			sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
			p := filepath.Join(cfg.Dir, "index", ents[len(ents)/2].Name())
			f, _ := os.OpenFile(p, os.O_RDWR, 0)
			f.WriteAt([]byte("garbage!"), 0)
			f.Close()
		},
	} {
		damage()
		b = mustOpen(t, cfg)
		waitIndexed(t, b)
		if got := queryBodies(t, b, "ix", "k2", 64, 0, 1<<62); fmt.Sprint(got) != fmt.Sprint(k2) {
			t.Fatalf("%s: k2 gives %v, want %v", name, got, k2)
		}
		b.Close()
	}
}

// TestViewMessage: a message is found by its commit-log offset; other offsets are not.
func TestViewMessage(t *testing.T) {
	b := mustOpen(t, testConfig(t))
	defer b.Close()
	b.CreateTopic("v", 2)
	appendKeyed(t, b, "v", 0, 4)
	msgs, _, err := b.Pull(t.Context(), "v", 0, 0, 10, 0)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("pull: %v %d", err, len(msgs))
	}
	m, err := b.ViewMessage(msgs[1].PhysicalOffset)
	if err != nil || string(m.Body) != string(msgs[1].Body) {
		t.Fatalf("view: %v %q", err, m.Body)
	}
	if _, err := b.ViewMessage(msgs[1].PhysicalOffset + 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("view at a wrong offset: %v", err)
	}
}

func FuzzIndexFile(f *testing.F) {
	x := &indexFile{data: make([]byte, indexFileSize(4, 8)), hdr: indexHeader{slots: 4, capacity: 8}}
	for i := 0; i < 8; i++ {
		x.add(uint32(i%3), int64(i*100), int64(1000+i*1500))
	}
	x.setRange(800)
	f.Add(append([]byte(nil), x.data...), uint32(1))
	f.Add(x.data[:indexHeaderSize], uint32(0))
	bad := append([]byte(nil), x.data...)
	binary.BigEndian.PutUint32(bad[indexHeaderSize:], 7) // slot points at the last entry, whose chain loops
	f.Fuzz(func(t *testing.T, data []byte, hash uint32) {
		h, err := decodeIndexHeader(data, int64(len(data)))
		if err != nil {
			return
		}
		x := &indexFile{data: data, hdr: h}
		x.count.Store(h.count)
		x.beginTS.Store(h.beginTS)
		out := x.lookup(hash, -1<<62, 1<<62, 1<<20, nil)
		if len(out) > int(h.count) {
			t.Fatalf("%d results from %d entries", len(out), h.count)
		}
	})
}
