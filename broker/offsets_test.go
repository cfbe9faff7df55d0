package broker

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOffsetJournalReplaysWithoutClose: commits are readable by a store opened after a
// crash (the first store is never closed), including those of a journal set aside by a
// compaction that did not finish, and a torn last record is ignored.
func TestOffsetJournalReplaysWithoutClose(t *testing.T) {
	dir := t.TempDir()
	s, err := openOffsets(osFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 100; i++ {
		if err := s.commit("g", offsetKey("t", int(i%4)), i); err != nil {
			t.Fatal(err)
		}
	}
	// A compaction that set the journal aside and died before writing the snapshot.
	if err := os.Rename(filepath.Join(dir, offsetsJournal), filepath.Join(dir, offsetsJournalOld)); err != nil {
		t.Fatal(err)
	}
	rec := appendOffsetRecord(nil, "g", offsetKey("t", 0), 1000)
	rec = appendOffsetRecord(rec, "h", offsetKey("u", 7), 5)
	torn := appendOffsetRecord(nil, "g", offsetKey("t", 1), 2000)
	if err := os.WriteFile(filepath.Join(dir, offsetsJournal), append(rec, torn[:len(torn)-2]...), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := openOffsets(osFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.close()
	for key, want := range map[[2]string]int64{{"g", "t@0"}: 1000, {"g", "t@1"}: 97, {"g", "t@2"}: 98, {"g", "t@3"}: 99, {"h", "u@7"}: 5} {
		if got, ok := s2.get(key[0], key[1]); !ok || got != want {
			t.Fatalf("%v: got %d (%v), want %d", key, got, ok, want)
		}
	}
	// Opening compacted: a snapshot and an empty journal, no leftover.
	if st, err := os.Stat(filepath.Join(dir, offsetsJournal)); err != nil || st.Size() != 0 {
		t.Fatalf("journal after open: %v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, offsetsJournalOld)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old journal left behind: %v", err)
	}
	s.close()
}

// TestOffsetCompactionKeepsCommits: commits made while and after a snapshot is written
// are all kept.
func TestOffsetCompactionKeepsCommits(t *testing.T) {
	dir := t.TempDir()
	s, err := openOffsets(osFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	for round := int64(0); round < 5; round++ {
		for q := 0; q < 3; q++ {
			s.commit("g", offsetKey("t", q), round*10+int64(q))
		}
		if err := s.compact(false); err != nil {
			t.Fatal(err)
		}
	}
	s.commit("g", offsetKey("t", 0), 999)
	// No close: reopen as after a crash.
	s2, err := openOffsets(osFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.close()
	for q, want := range []int64{999, 41, 42} {
		if got, _ := s2.get("g", offsetKey("t", q)); got != want {
			t.Fatalf("queue %d: %d, want %d", q, got, want)
		}
	}
	s.close()
}

func FuzzOffsetJournal(f *testing.F) {
	rec := appendOffsetRecord(nil, "group", "topic@3", 12345)
	f.Add(rec)
	f.Add(appendOffsetRecord(rec, "%SCHEDULE%", "SCHEDULE_TOPIC_XXXX@0", -1))
	f.Add(rec[:len(rec)-1])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, n, err := decodeOffsetJournal(data)
		if n < 0 || n > len(data) {
			t.Fatalf("valid prefix %d of %d bytes", n, len(data))
		}
		if (err == nil) != (n == len(data)) {
			t.Fatalf("err %v with valid prefix %d of %d", err, n, len(data))
		}
		if err != nil {
			var je *JournalError
			if !errors.As(err, &je) || je.Offset != n {
				t.Fatalf("error %v does not name byte %d", err, n)
			}
		}
		var again []byte
		for _, r := range recs {
			again = appendOffsetRecord(again, r.group, r.key, r.offset)
		}
		if !bytes.Equal(again, data[:n]) {
			t.Fatalf("re-encoding %d records gives %d bytes, valid prefix is %d", len(recs), len(again), n)
		}
	})
}
