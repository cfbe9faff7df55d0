package connectors

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readAll drains a split reader in batches of max.
func readAll(t *testing.T, r SplitReader, max int) []Message {
	t.Helper()
	var all []Message
	for {
		var err error
		n := len(all)
		all, err = r.Read(context.Background(), all, max)
		if errors.Is(err, ErrEndOfSplit) {
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(all)-n > max {
			t.Fatalf("read %d messages, max %d", len(all)-n, max)
		}
		for _, m := range all[n:] {
			if m.Split != fileSplit {
				t.Fatalf("line %d says it is of split %q", m.Offset, m.Split)
			}
		}
	}
}

func TestFileSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.jsonl")
	content := "a\n\nbb\r\nccc\n\n\nlast-no-newline"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := OpenFileSource(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if !src.Bounded() {
		t.Fatal("file source not bounded")
	}
	splits, _ := src.Splits(context.Background())
	if len(splits) != 1 || splits[0] != "0" {
		t.Fatalf("splits %v", splits)
	}
	want := []Message{{Offset: 1, Body: []byte("a")}, {Offset: 3, Body: []byte("bb")}, {Offset: 4, Body: []byte("ccc")}, {Offset: 7, Body: []byte("last-no-newline")}}
	for _, max := range []int{1, 2, 100} {
		r, err := src.Open(context.Background(), "0", 0)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, r, max)
		if len(got) != len(want) {
			t.Fatalf("max %d: got %d messages", max, len(got))
		}
		for i := range want {
			if got[i].Offset != want[i].Offset || string(got[i].Body) != string(want[i].Body) {
				t.Fatalf("max %d: message %d = %d %q, want %d %q", max, i, got[i].Offset, got[i].Body, want[i].Offset, want[i].Body)
			}
		}
		// After the end it keeps saying so.
		if _, err := r.Read(context.Background(), nil, 1); !errors.Is(err, ErrEndOfSplit) {
			t.Fatalf("read after end: %v", err)
		}
		r.Close()
	}
	// Resuming at an offset skips the lines before it.
	r, _ := src.Open(context.Background(), "0", 4)
	got := readAll(t, r, 10)
	if len(got) != 2 || got[0].Offset != 4 || got[1].Offset != 7 {
		t.Fatalf("from offset 4: %+v", got)
	}
	r.Close()
	if _, err := src.Open(context.Background(), "1", 0); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("unknown split: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, _ = src.Open(context.Background(), "0", 0)
	if _, err := r.Read(ctx, nil, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v", err)
	}
}

func TestFileSourceLongLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "long.txt")
	long := bytes.Repeat([]byte("x"), 16<<20+123)
	var content []byte
	content = append(content, "short\n"...)
	content = append(content, long...)
	content = append(content, "\nafter\n"...)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := OpenFileSource(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r, _ := src.Open(context.Background(), "0", 0)
	got := readAll(t, r, 10)
	if len(got) != 3 || string(got[0].Body) != "short" || !bytes.Equal(got[1].Body, long) || string(got[2].Body) != "after" || got[2].Offset != 3 {
		t.Fatalf("got %d messages", len(got))
	}
}

func TestFileSourceErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.jsonl")
	if _, err := OpenFileSource(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing file: %v", err)
	}
	dir := t.TempDir()
	if _, err := OpenFileSource(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("directory: %v", err)
	}
}

func TestFileSink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "deeper", "out.jsonl")
	sink, err := OpenFileSink(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sink.Write(ctx, []Message{{Body: []byte(`{"a":1}`)}, {Body: []byte(`{"a":2}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "{\"a\":1}\n{\"a\":2}\n" {
		t.Fatalf("after flush: %q", b)
	}
	if err := sink.Write(ctx, []Message{{Body: []byte("x\ny")}}); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("body with newline: %v", err)
	}
	sink.Write(ctx, []Message{{Body: []byte("three")}})
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(ctx, []Message{{Body: []byte("late")}}); err == nil {
		t.Fatal("write after close accepted")
	}
	// Reopening appends; the file source reads back what the sink wrote.
	sink, _ = OpenFileSink(path)
	sink.Write(ctx, []Message{{Body: []byte("four")}})
	sink.Close()
	src, err := OpenFileSource(path)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := src.Open(ctx, "0", 0)
	got := readAll(t, r, 100)
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
	}
	if strings.Join(bodies, "|") != `{"a":1}|{"a":2}|three|four` {
		t.Fatalf("read back %v", bodies)
	}
	src.Close()

	// A path whose parent is a file cannot be created; the error names it.
	bad := filepath.Join(path, "child")
	if _, err := OpenFileSink(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad path: %v", err)
	}
}

func TestPrintSink(t *testing.T) {
	var buf bytes.Buffer
	s := NewPrintSink(&buf)
	s.Write(context.Background(), []Message{{Body: []byte("one")}, {Body: []byte("two")}})
	s.Write(context.Background(), nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "one\ntwo\n" {
		t.Fatalf("printed %q", buf.String())
	}
}

// A file sink as a de-duplicating sink: Truncate empties the file at open, Position is the
// file's size, IDsSince cuts the file back to a position and refuses one past the end.
func TestFileSinkPositions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	os.WriteFile(path, []byte("old\n"), 0o644)
	ctx := context.Background()
	s, err := OpenFileSinkWith(path, FileSinkOptions{Truncate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Write(ctx, []Message{{Body: []byte("a")}})
	pos, err := s.Position(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Write(ctx, []Message{{Body: []byte("b")}, {Body: []byte("c")}})
	s.Flush(ctx)
	if err := s.IDsSince(ctx, pos, "", func(string) { t.Error("a file reported an id") }); err != nil {
		t.Fatal(err)
	}
	s.Write(ctx, []Message{{Body: []byte("d")}})
	s.Flush(ctx)
	if b, _ := os.ReadFile(path); string(b) != "a\nd\n" {
		t.Fatalf("file holds %q, want a, d", b)
	}
	if err := s.IDsSince(ctx, binary.AppendVarint(nil, 100), "", nil); !errors.Is(err, ErrFileChanged) {
		t.Fatalf("a position past the end: %v", err)
	}
}

func FuzzFileSinkPosition(f *testing.F) {
	f.Add(binary.AppendVarint(nil, 3))
	f.Add(binary.AppendVarint(nil, 100))
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Add(append(binary.AppendVarint(nil, 1), 0))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, pos []byte) {
		path := filepath.Join(dir, "f")
		os.WriteFile(path, []byte("one\ntwo\n"), 0o644)
		s, err := OpenFileSinkWith(path, FileSinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		err = s.IDsSince(context.Background(), pos, "", nil)
		st, _ := os.Stat(path)
		if err == nil {
			if want, _ := binary.Varint(pos); st.Size() != want {
				t.Fatalf("cut to %d bytes, position says %d", st.Size(), want)
			}
		} else if st.Size() != 8 {
			t.Fatalf("a refused position changed the file to %d bytes", st.Size())
		}
	})
}
