package broker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"rsql/internal/durable"
)

// The store maps its commit-log segments, consume queues and index files and writes into
// the mappings. A file is sized with ftruncate, which allocates nothing: writing a page the
// file system cannot back (the disk is full) does not fail a write call, it kills the
// process with SIGBUS, and recovery on the same full disk would die the same way. So no
// mapped byte is written before its blocks are reserved (fallocate): every mapped file keeps
// a reserved prefix that grows ahead of its writer in chunks, and a reservation that fails
// — ENOSPC above all — is an error of the write that needed it (ErrNoSpace). The broker then
// refuses that send and goes on serving reads; the next send after space returns succeeds.

// storeFS is the store's file-system seam: every file operation of the broker's store goes
// through it — the mapped files (commit log, consume queues, index: opened, reserved,
// flushed, the commit log's torn tail zeroed, removed), the offsets journal, the files
// replaced whole (topics.json, offsets.json, checkpoint, subscriptionGroups.json, through
// durable.WriteFile), the ACL file (read and stat), the store's LOCK and the directories.
// Direct are only the mappings themselves (mmap, munmap, madvise: memory operations, not
// file operations a test could fail without a fake mapping); the stat, ftruncate (sizing) and
// reads on a mapped file's *os.File, which the mapping needs as a real file (a test fails
// the OpenFile that returns it, or the Allocate and Datasync done on it); and the device
// statistics of the runtime report (admin.go). The broker uses osFS; tests substitute one
// that fails on demand (in the style of pebble's vfs and errorfs, faultfs_test.go).
//
// The durability rule: a file replaced whole is replaced with durable.WriteFile (temporary
// file, fsync, rename, fsync of the directory), and whatever the new file supersedes (the
// offsets journal a snapshot covers) is dropped only after WriteFile returned nil.
type storeFS interface {
	durable.FS // Create, Rename, Remove, SyncDir
	// OpenFile opens a file to be mapped (the mapping needs the *os.File).
	OpenFile(name string, flag int, perm os.FileMode) (*os.File, error)
	// Allocate reserves blocks for bytes [off, off+n) of f, within its size.
	Allocate(f *os.File, off, n int64) error
	// Datasync flushes a mapped file's data (fdatasync).
	Datasync(f *os.File) error
	// OpenJournal opens an append-only journal (the offsets journal).
	OpenJournal(name string, flag int, perm os.FileMode) (journalFile, error)
	// PunchHole makes bytes [off, off+n) of f read as zeros without writing through its
	// mapping: it frees their blocks, and where punching is not supported writes zeros
	// through the file (skipping 1 MiB blocks already zero), where a full disk is an error.
	PunchHole(f *os.File, off, n int64) error
	// Lock takes an exclusive advisory lock (flock) on name, creating it; closing the file
	// releases it. ErrLocked: another process holds it.
	Lock(name string) (io.Closer, error)
	ReadFile(name string) ([]byte, error)
	Stat(name string) (os.FileInfo, error)
	ReadDir(name string) ([]os.DirEntry, error)
	MkdirAll(name string, perm os.FileMode) error
	RemoveAll(name string) error
}

// journalFile is what the offsets journal needs of its file.
type journalFile interface {
	io.Writer
	Truncate(size int64) error
	Seek(offset int64, whence int) (int64, error)
	Sync() error
	Close() error
}

// osFS is the real file system.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

func (osFS) Create(name string, perm os.FileMode) (durable.File, error) {
	return durable.OS.Create(name, perm)
}

func (osFS) OpenJournal(name string, flag int, perm os.FileMode) (journalFile, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (osFS) SyncDir(dir string) error                     { return durable.SyncDir(dir) }
func (osFS) ReadFile(name string) ([]byte, error)         { return os.ReadFile(name) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, ErrLocked
	}
	return f, nil
}

func (osFS) PunchHole(f *os.File, off, n int64) error {
	const punch = 0x1 | 0x2 // FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE
	if err := syscall.Fallocate(int(f.Fd()), punch, off, n); err != nil {
		return zeroRange(f, off, off+n)
	}
	return nil
}

// zeroRange writes zeros over [from, to) of f through the file (not the mapping), skipping
// 1 MiB blocks that already read as zeros.
func zeroRange(f *os.File, from, to int64) error {
	const block = 1 << 20
	buf := make([]byte, block)
	zeros := make([]byte, block)
	for at := from; at < to; at += block {
		n := min(block, to-at)
		if _, err := f.ReadAt(buf[:n], at); err == nil && bytes.Equal(buf[:n], zeros[:n]) {
			continue
		}
		if _, err := f.WriteAt(zeros[:n], at); err != nil {
			return err
		}
	}
	return nil
}

func (osFS) Allocate(f *os.File, off, n int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, off, n)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS):
			return allocateByWriting(f, off, n)
		}
		return err
	}
}

// allocateByWriting reserves blocks where fallocate is not supported, as the C library's
// posix_fallocate does: it writes a zero byte into every 4 KiB block of the range whose
// first byte reads as zero (so data already there is never changed), through the file, where
// a full disk is an error rather than a signal.
func allocateByWriting(f *os.File, off, n int64) error {
	var b [1]byte
	for at := off &^ (pageSize - 1); at < off+n; at += pageSize {
		p := max(at, off)
		if _, err := f.ReadAt(b[:], p); err == nil && b[0] != 0 {
			continue
		}
		if _, err := f.WriteAt([]byte{0}, p); err != nil {
			return err
		}
	}
	return nil
}

func roundUpPage(n int64) int64 { return (n + pageSize - 1) &^ (pageSize - 1) }

// ErrNoSpace says the store's device is full (or the quota spent): the append that needed
// the space was refused, nothing of it is stored, and reads go on. It wraps the system's
// error.
var ErrNoSpace = errors.New("broker: no space left for the store")

// reservation tracks the reserved prefix of one mapped file. Its owner is the file's single
// writer.
type reservation struct {
	reserved int64 // bytes [0, reserved) are backed by blocks
	size     int64 // the file's size
	chunk    int64 // how far ahead of a write to reserve
}

// ensure reserves the file up to end (at least), ahead by the chunk when the disk allows
// and otherwise exactly to the page after end.
func (r *reservation) ensure(fs storeFS, f *os.File, name string, end int64) error {
	if end <= r.reserved {
		return nil
	}
	if end > r.size {
		return fmt.Errorf("broker: %s: a write up to byte %d exceeds the file's %d bytes", name, end, r.size)
	}
	to := min(r.size, roundUpPage(max(end, r.reserved+r.chunk)))
	err := fs.Allocate(f, r.reserved, to-r.reserved)
	if err != nil && to > roundUpPage(end) {
		to = min(r.size, roundUpPage(end))
		err = fs.Allocate(f, r.reserved, to-r.reserved)
	}
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return fmt.Errorf("%w: reserving bytes %d to %d of %s: %w", ErrNoSpace, r.reserved, to, name, err)
		}
		return fmt.Errorf("broker: reserving bytes %d to %d of %s: %w", r.reserved, to, name, err)
	}
	r.reserved = to
	return nil
}
