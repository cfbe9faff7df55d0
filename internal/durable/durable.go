package durable

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File is what WriteFile needs of an open file.
type File interface {
	io.Writer
	Sync() error
	Close() error
}

// FS is the file-system operations WriteFile uses.
type FS interface {
	// Create creates or truncates name for writing with perm.
	Create(name string, perm os.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	// SyncDir fsyncs directory dir, making the creations, renames and removals of its
	// entries durable.
	SyncDir(dir string) error
}

// StateFS is FS with what a component that keeps its state in files replaced whole needs
// besides (the server's catalog, the name server's KV configuration): reading such a file
// and making its directory.
type StateFS interface {
	FS
	ReadFile(name string) ([]byte, error)
	MkdirAll(name string, perm os.FileMode) error
}

// OS is the real file system.
var OS StateFS = osFS{}

type osFS struct{}

func (osFS) Create(name string, perm os.FileMode) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
}
func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) SyncDir(dir string) error             { return SyncDir(dir) }
func (osFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }
func (osFS) MkdirAll(name string, perm os.FileMode) error {
	return os.MkdirAll(name, perm)
}

// SyncDir fsyncs a directory of the real file system.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFile replaces path with data atomically and durably: it writes path+".tmp" with
// perm, fsyncs it, renames it to path and fsyncs path's directory. On an error the
// temporary file is removed and path holds its old content (or does not exist, if it did
// not); the error names the step that failed. After an error of the final directory fsync
// path may hold either content.
func WriteFile(fs FS, path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	n, err := f.Write(data)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite
	}
	if err != nil {
		f.Close()
		fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fs.Remove(tmp)
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, path); err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fs.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("sync directory of %s: %w", path, err)
	}
	return nil
}
