package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrDataDirLocked says another rsql process holds the data directory.
var ErrDataDirLocked = errors.New("data directory is in use by another rsql process")

// dirLock is an exclusive flock on <data-dir>/LOCK, released by Close or by the process's
// death (the kernel drops flocks of dead processes, so a kill -9 never leaves it stale).
type dirLock struct{ f *os.File }

func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(dir, "LOCK"), err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s (stop the other process, or pass another --data-dir)", ErrDataDirLocked, dir)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return &dirLock{f: f}, nil
}

func (l *dirLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}
