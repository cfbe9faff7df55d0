package connectors

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rsql/sql"
)

func TestFileRoots(t *testing.T) {
	dir := t.TempDir()
	a, b, outside := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "outside")
	for _, d := range []string{a, b, outside, filepath.Join(a, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(a, "in.txt"), "one\ntwo\n")
	write(filepath.Join(b, "b.txt"), "b\n")
	write(filepath.Join(outside, "secret.txt"), "secret\n")
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(outside, "secret.txt"), filepath.Join(a, "leak.txt"))
	link("../outside", filepath.Join(a, "outdir"))
	link("in.txt", filepath.Join(a, "rel-alias.txt"))
	link(filepath.Join(a, "in.txt"), filepath.Join(a, "abs-alias.txt"))
	link(filepath.Join(b, "b.txt"), filepath.Join(a, "to-b.txt")) // into another root

	r, err := OpenFileRoots(a, b)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Abs("x/y.txt"); got != filepath.Join(a, "x", "y.txt") {
		t.Errorf("Abs(x/y.txt) = %s: relative paths start at the first root", got)
	}

	for _, p := range []string{"/etc/passwd", "../outside/secret.txt", filepath.Join(outside, "secret.txt"), "leak.txt", "outdir/secret.txt", "outdir/new.txt", dir} {
		if _, err := r.Check(p); !errors.Is(err, ErrOutsideFileRoots) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
			t.Errorf("Check(%s): %v, want ErrOutsideFileRoots naming both roots", p, err)
		}
		if _, err := r.OpenSource(p); !errors.Is(err, ErrOutsideFileRoots) {
			t.Errorf("OpenSource(%s): %v", p, err)
		}
		if _, err := r.OpenSink(p, FileSinkOptions{}); !errors.Is(err, ErrOutsideFileRoots) {
			t.Errorf("OpenSink(%s): %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Fatal("a sink wrote through a link out of its root")
	}

	read := func(src Source) string {
		t.Helper()
		sr, err := src.Open(context.Background(), "0", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer sr.Close()
		msgs, _ := sr.Read(context.Background(), nil, 10)
		var out []string
		for _, m := range msgs {
			out = append(out, string(m.Body))
		}
		return strings.Join(out, ",")
	}
	for _, p := range []string{"in.txt", filepath.Join(a, "in.txt"), "rel-alias.txt", "abs-alias.txt", "sub/../in.txt"} {
		src, err := r.OpenSource(p)
		if err != nil {
			t.Fatalf("OpenSource(%s): %v", p, err)
		}
		if got := read(src); got != "one,two" {
			t.Errorf("%s reads %q", p, got)
		}
		src.Close()
	}
	src, err := r.OpenSource("to-b.txt")
	if err != nil || read(src) != "b" {
		t.Fatalf("a link into the other root: %v", err)
	}
	src.Close()

	sink, err := r.OpenSink("sub/deeper/out.txt", FileSinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sink.Write(context.Background(), []Message{{Body: []byte("x")}})
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(a, "sub", "deeper", "out.txt")); string(data) != "x\n" {
		t.Fatalf("sink output %q", data)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.Rename("sub/deeper/out.txt", "sub/moved.txt"))
	must(r.WriteFile("empty.txt", nil))
	must(r.Remove("empty.txt"))
	if err := r.Rename("sub/moved.txt", filepath.Join(b, "moved.txt")); err == nil {
		t.Fatal("a rename across roots")
	}

	// A link swapped in after the source was opened: the next Open refuses it (os.Root).
	write(filepath.Join(a, "later.txt"), "fine\n")
	src, err = r.OpenSource("later.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	must(os.Remove(filepath.Join(a, "later.txt")))
	link(filepath.Join(outside, "secret.txt"), filepath.Join(a, "later.txt"))
	if sr, err := src.Open(context.Background(), "0", 0); err == nil {
		msgs, _ := sr.Read(context.Background(), nil, 10)
		sr.Close()
		t.Fatalf("read through a swapped link: %d messages", len(msgs))
	}

	// No sandbox: paths as given.
	var none *FileRoots
	if _, err := none.Check(filepath.Join(outside, "secret.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileRoots(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing root opened")
	}
}

// A file that does not exist is PostgreSQL's undefined_file (58P01), naming the path as
// resolved: relative to the first root.
func TestMissingFileIsUndefinedFile(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenFileRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.OpenSource("nope.jsonl")
	var se *sql.Error
	if !errors.As(err, &se) || se.Code != sql.CodeUndefinedFile || !strings.Contains(se.Message, filepath.Join(dir, "nope.jsonl")) {
		t.Fatalf("got %v, want 58P01 naming %s", err, filepath.Join(dir, "nope.jsonl"))
	}
}

// A path outside the roots names them and the flag that adds one, without speaking of a
// server: rsql -c and the shell run an engine of their own with roots of their own.
func TestOutsideFileRootsMessage(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenFileRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.OpenSource("/etc/passwd")
	if !errors.Is(err, ErrOutsideFileRoots) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "--file-root DIR allows another directory") || strings.Contains(err.Error(), "server") {
		t.Fatalf("got %v", err)
	}
}
