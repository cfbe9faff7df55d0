package durabletest

import (
	"os"
	"strings"
	"sync"

	"rsql/internal/durable"
)

// The kinds of operation FS can fail.
const (
	Create  = "create"
	Write   = "write" // a short write: half the bytes are written, then the error
	Sync    = "sync"  // a file's fsync
	Close   = "close"
	Rename  = "rename" // matched on the new name
	SyncDir = "syncdir"
	Read    = "read" // ReadFile
	Mkdir   = "mkdir"
)

// Faults decides which operation fails: Arm names one, Fail is asked before each operation.
// Test file systems other than FS (the broker's wider one) embed it so that every seam
// arms its faults the same way. Its zero value fails nothing.
type Faults struct {
	mu    sync.Mutex
	kind  string
	match string
	nth   int // fail the nth matching operation (1-based); 0: never
	seen  int
	err   error
	fired int
}

// Arm makes the nth (1-based) operation of kind on a name containing match fail with err,
// and only that one; nth 0 disarms.
func (f *Faults) Arm(kind, match string, nth int, err error) {
	f.mu.Lock()
	f.kind, f.match, f.nth, f.seen, f.err = kind, match, nth, 0, err
	f.mu.Unlock()
}

// Fired is how many faults fired.
func (f *Faults) Fired() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

// Fail counts an operation of kind on name and returns the armed error when it is the one.
func (f *Faults) Fail(kind, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nth == 0 || kind != f.kind || !strings.Contains(name, f.match) {
		return nil
	}
	f.seen++
	if f.seen != f.nth {
		return nil
	}
	f.fired++
	return f.err
}

// FS is the real file system that fails what Arm asks. Its zero value fails nothing.
type FS struct {
	Faults
}

var _ durable.StateFS = (*FS)(nil)

func (f *FS) fail(kind, name string) error { return f.Fail(kind, name) }

type file struct {
	*os.File
	fs *FS
}

func (h file) Write(p []byte) (int, error) {
	if err := h.fs.fail(Write, h.Name()); err != nil {
		n, _ := h.File.Write(p[:len(p)/2])
		return n, err
	}
	return h.File.Write(p)
}

func (h file) Sync() error {
	if err := h.fs.fail(Sync, h.Name()); err != nil {
		return err
	}
	return h.File.Sync()
}

func (h file) Close() error {
	err := h.File.Close()
	if ferr := h.fs.fail(Close, h.Name()); ferr != nil {
		return ferr
	}
	return err
}

func (f *FS) Create(name string, perm os.FileMode) (durable.File, error) {
	if err := f.fail(Create, name); err != nil {
		return nil, err
	}
	h, err := durable.OS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return file{h.(*os.File), f}, nil
}

func (f *FS) Rename(oldpath, newpath string) error {
	if err := f.fail(Rename, newpath); err != nil {
		return err
	}
	return durable.OS.Rename(oldpath, newpath)
}

func (f *FS) Remove(name string) error { return durable.OS.Remove(name) }

func (f *FS) SyncDir(dir string) error {
	if err := f.fail(SyncDir, dir); err != nil {
		return err
	}
	return durable.OS.SyncDir(dir)
}

func (f *FS) ReadFile(name string) ([]byte, error) {
	if err := f.fail(Read, name); err != nil {
		return nil, err
	}
	return durable.OS.ReadFile(name)
}

func (f *FS) MkdirAll(name string, perm os.FileMode) error {
	if err := f.fail(Mkdir, name); err != nil {
		return err
	}
	return durable.OS.MkdirAll(name, perm)
}
