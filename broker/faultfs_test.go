package broker

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"

	"rsql/internal/durable"
	"rsql/internal/durable/durabletest"
)

// faultFS is the real file system that fails the nth operation of one kind on files whose
// name contains match (in the style of pebble's errorfs). Kinds: "sync" (a file's fsync),
// "write" (a short write: half the bytes, then err), "rename", "punch" (zeroing a mapped
// file's range).
type faultFS struct {
	osFS
	durabletest.Faults
}

func (f *faultFS) arm(kind, match string, nth int, err error) { f.Arm(kind, match, nth, err) }

func (f *faultFS) fail(kind, name string) error { return f.Fail(kind, name) }

type faultFile struct {
	*os.File
	fs *faultFS
}

func (f faultFile) Write(p []byte) (int, error) {
	if err := f.fs.fail("write", f.Name()); err != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, err
	}
	return f.File.Write(p)
}

func (f faultFile) Sync() error {
	if err := f.fs.fail("sync", f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFS) Create(name string, perm os.FileMode) (durable.File, error) {
	fh, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{fh, f}, nil
}

func (f *faultFS) OpenJournal(name string, flag int, perm os.FileMode) (journalFile, error) {
	fh, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{fh, f}, nil
}

func (f *faultFS) Datasync(file *os.File) error {
	if err := f.fail("sync", file.Name()); err != nil {
		return err
	}
	return f.osFS.Datasync(file)
}

func (f *faultFS) PunchHole(file *os.File, off, n int64) error {
	if err := f.fail("punch", file.Name()); err != nil {
		return err
	}
	return f.osFS.PunchHole(file, off, n)
}

func (f *faultFS) Rename(o, n string) error {
	if err := f.fail("rename", n); err != nil {
		return err
	}
	return os.Rename(o, n)
}

// reopenReal closes b (whose error may be the injected one) and opens the store with the
// real file system.
func reopenReal(t *testing.T, b *Broker, cfg Config) *Broker {
	t.Helper()
	b.Close()
	cfg.fs = nil
	return mustOpen(t, cfg)
}

// A failed fsync of a topic-config write fails CreateTopic; the topics created before it
// and their messages are there after a reopen.
func TestFaultConfigSyncFails(t *testing.T) {
	fs := &faultFS{}
	cfg := testConfig(t)
	cfg.fs = fs
	b := mustOpen(t, cfg)
	if err := b.CreateTopic("a", 2); err != nil {
		t.Fatal(err)
	}
	appendN(t, b, "a", 1, 0, 20)
	fs.arm("sync", "topics.json", 1, syscall.EIO)
	if err := b.CreateTopic("b", 2); !errors.Is(err, syscall.EIO) {
		t.Fatalf("CreateTopic with a failing fsync: %v, want EIO", err)
	}
	if fs.Fired() != 1 {
		t.Fatalf("the fault fired %d times", fs.Fired())
	}
	b = reopenReal(t, b, cfg)
	defer b.Close()
	msgs, err := b.Peek("a", 1, 0, 100)
	if err != nil || len(msgs) != 20 {
		t.Fatalf("after reopen: %d messages of 20, %v", len(msgs), err)
	}
}

// With FlushSync, a failed fsync of the commit log fails the send waiting for it; what was
// acknowledged before is there after a reopen.
func TestFaultCommitLogSyncFails(t *testing.T) {
	fs := &faultFS{}
	cfg := testConfig(t)
	cfg.FlushMode = FlushSync
	cfg.fs = fs
	b := mustOpen(t, cfg)
	if err := b.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	appendN(t, b, "t", 0, 0, 30)
	fs.arm("sync", "commitlog", 1, syscall.EIO)
	if _, err := b.Append("t", 0, []Message{{Body: []byte("x")}}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("an append whose fsync failed: %v, want EIO", err)
	}
	b = reopenReal(t, b, cfg)
	defer b.Close()
	msgs, err := b.Peek("t", 0, 0, 100)
	if err != nil || len(msgs) < 30 {
		t.Fatalf("after reopen: %d messages, %v; want the 30 acknowledged", len(msgs), err)
	}
	for i := range 30 {
		if string(msgs[i].Body) != string(body(0, i)) {
			t.Fatalf("message %d: %q", i, msgs[i].Body)
		}
	}
}

// A short write of the offsets journal fails that commit and no other: the commits
// acknowledged before and after it are there after a reopen.
func TestFaultOffsetJournalShortWrite(t *testing.T) {
	fs := &faultFS{}
	cfg := testConfig(t)
	cfg.fs = fs
	b := mustOpen(t, cfg)
	if err := b.CreateTopic("t", 3); err != nil {
		t.Fatal(err)
	}
	if err := b.CommitOffset("g", "t", 0, 5); err != nil {
		t.Fatal(err)
	}
	fs.arm("write", offsetsJournal, 1, io.ErrShortWrite)
	if err := b.CommitOffset("g", "t", 1, 7); err == nil {
		t.Fatal("a short journal write was not reported")
	}
	if err := b.CommitOffset("g", "t", 2, 9); err != nil {
		t.Fatal(err)
	}
	// Reopen without a checkpoint: what is acknowledged must come from the journal.
	b.offsets.mu.Lock()
	j := b.offsets.j
	b.offsets.j = nil // Close does not compact: the journal alone must hold the commits
	b.offsets.mu.Unlock()
	j.Close()
	b = reopenReal(t, b, cfg)
	defer b.Close()
	for q, want := range map[int]int64{0: 5, 2: 9} {
		if off, ok := b.QueryOffset("g", "t", q); !ok || off != want {
			t.Fatalf("queue %d: offset %d, %v after reopen; want %d", q, off, ok, want)
		}
	}
}

// ENOSPC renaming the new offsets snapshot fails the checkpoint (Close) and loses no
// acknowledged commit: the journals it would have replaced are still there.
func TestFaultOffsetSnapshotRenameNoSpace(t *testing.T) {
	fs := &faultFS{}
	cfg := testConfig(t)
	cfg.fs = fs
	b := mustOpen(t, cfg)
	if err := b.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	appendN(t, b, "t", 0, 0, 10)
	for q := range 2 {
		if err := b.CommitOffset("g", "t", q, int64(3+q)); err != nil {
			t.Fatal(err)
		}
	}
	fs.arm("rename", offsetsSnapshot, 1, syscall.ENOSPC)
	if err := b.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close with a failing snapshot rename: %v, want ENOSPC", err)
	}
	if fs.Fired() != 1 {
		t.Fatalf("the fault fired %d times", fs.Fired())
	}
	b = reopenReal(t, b, cfg)
	defer b.Close()
	for q := range 2 {
		if off, ok := b.QueryOffset("g", "t", q); !ok || off != int64(3+q) {
			t.Fatalf("queue %d: offset %d, %v after reopen; want %d", q, off, ok, 3+q)
		}
	}
	if msgs, err := b.Peek("t", 0, 0, 100); err != nil || len(msgs) != 10 {
		t.Fatalf("after reopen: %d messages of 10, %v", len(msgs), err)
	}
}
