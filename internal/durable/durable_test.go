package durable

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// faultFS is the real file system with one step made to fail.
type faultFS struct {
	failOn   string // "create", "write", "short", "sync", "close", "rename", "syncdir"
	err      error
	dirSyncs int
}

type faultFile struct {
	*os.File
	fs *faultFS
}

func (f faultFile) Write(p []byte) (int, error) {
	switch f.fs.failOn {
	case "write":
		return 0, f.fs.err
	case "short":
		return f.File.Write(p[:len(p)/2])
	}
	return f.File.Write(p)
}

func (f faultFile) Sync() error {
	if f.fs.failOn == "sync" {
		return f.fs.err
	}
	return f.File.Sync()
}

func (f faultFile) Close() error {
	err := f.File.Close()
	if f.fs.failOn == "close" {
		return f.fs.err
	}
	return err
}

func (fs *faultFS) Create(name string, perm os.FileMode) (File, error) {
	if fs.failOn == "create" {
		return nil, fs.err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{f, fs}, nil
}

func (fs *faultFS) Rename(o, n string) error {
	if fs.failOn == "rename" {
		return fs.err
	}
	return os.Rename(o, n)
}

func (fs *faultFS) Remove(name string) error { return os.Remove(name) }

func (fs *faultFS) SyncDir(dir string) error {
	fs.dirSyncs++
	if fs.failOn == "syncdir" {
		return fs.err
	}
	return SyncDir(dir)
}

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	fs := &faultFS{}
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteFile(fs, path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("content %q, %v; want %q", got, err, content)
		}
	}
	if fs.dirSyncs != 2 {
		t.Fatalf("directory fsynced %d times for 2 writes, want 2", fs.dirSyncs)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", st.Mode(), err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

// A failure at any step before the rename leaves the old content and no temporary file,
// and is returned.
func TestWriteFileFailureKeepsOldContent(t *testing.T) {
	for _, step := range []string{"create", "write", "short", "sync", "close", "rename"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.json")
			if err := WriteFile(OS, path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			fs := &faultFS{failOn: step, err: syscall.ENOSPC}
			err := WriteFile(fs, path, []byte("new content"), 0o644)
			if err == nil {
				t.Fatalf("a failed %s was not reported", step)
			}
			if step != "short" && !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("error %v does not wrap ENOSPC", err)
			}
			got, rerr := os.ReadFile(path)
			if rerr != nil || string(got) != "old" {
				t.Fatalf("after a failed %s: content %q, %v; want the old content", step, got, rerr)
			}
			if _, serr := os.Stat(path + ".tmp"); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("temporary file left behind after a failed %s: %v", step, serr)
			}
		})
	}
}

func TestWriteFileReportsDirSync(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	err := WriteFile(&faultFS{failOn: "syncdir", err: syscall.EIO}, path, []byte("x"), 0o644)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("a failed directory fsync gave %v, want EIO", err)
	}
}
