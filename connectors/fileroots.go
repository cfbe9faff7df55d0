package connectors

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutsideFileRoots is the error of a file path the sandbox does not allow: outside every
// root, or reaching out of one through a symbolic link. The error wrapping it names the path
// and the roots.
var ErrOutsideFileRoots = errors.New("outside the allowed file roots")

// FileRoots is the sandbox of the file connector (docs/security.md, "File sandbox"): the
// directories under which file sources and sinks may read and write. A relative path is
// relative to the first root. A path is allowed when it is lexically under a root and,
// following symbolic links, stays under it: the files are opened through os.Root, which
// refuses a link or ".." that leads out of the root at the moment of opening, so a link
// swapped in after the check does not escape either.
//
// A nil *FileRoots is no sandbox: paths are used as given, relative to the working
// directory. Methods are safe for concurrent use.
type FileRoots struct {
	roots []fileRoot
}

type fileRoot struct {
	dir  string   // absolute and clean, as configured
	real string   // dir with symbolic links resolved
	root *os.Root // opened on real
}

// OpenFileRoots opens the roots dirs (each must be an existing directory) in order; the
// first is where relative paths start.
func OpenFileRoots(dirs ...string) (*FileRoots, error) {
	if len(dirs) == 0 {
		return nil, errors.New("file roots: none given")
	}
	r := &FileRoots{}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("file root %s: %w", d, err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("file root %s: %w", d, err)
		}
		root, err := os.OpenRoot(real)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("file root %s: %w", d, err)
		}
		r.roots = append(r.roots, fileRoot{dir: abs, real: real, root: root})
	}
	return r, nil
}

// Close closes the roots.
func (r *FileRoots) Close() error {
	if r == nil {
		return nil
	}
	for _, fr := range r.roots {
		fr.root.Close()
	}
	return nil
}

// Dirs returns the roots as configured (absolute).
func (r *FileRoots) Dirs() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.roots))
	for i, fr := range r.roots {
		out[i] = fr.dir
	}
	return out
}

// Abs returns the absolute, clean form of path: relative to the first root in a sandbox,
// to the working directory without one.
func (r *FileRoots) Abs(path string) string {
	if r != nil && !filepath.IsAbs(path) {
		return filepath.Join(r.roots[0].dir, path)
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return filepath.Clean(path)
}

// Check returns the absolute form of path if the sandbox allows it, and an error wrapping
// ErrOutsideFileRoots that names the roots otherwise. Symbolic links of the part of the
// path that exists are followed: one that leads out of every root is refused.
func (r *FileRoots) Check(path string) (string, error) {
	t, err := r.resolve(path)
	if err != nil {
		return "", err
	}
	return t.display, nil
}

// fileTarget is a resolved path: a name within an opened root, or a plain path (no sandbox).
type fileTarget struct {
	root    *os.Root  // nil without a sandbox
	fr      *fileRoot // the root, in a sandbox
	name    string    // relative to root; the plain path without a sandbox
	display string    // absolute path, for messages
}

// resolve checks path and says how to reach it: the path must lie under a root as
// written, and where its symbolic links lead (the part of it that exists) under a root
// too. The name returned is relative to the root of that real location, so os.Root sees
// no link (unless one is swapped in later, which it then refuses).
func (r *FileRoots) resolve(path string) (fileTarget, error) {
	if path == "" {
		return fileTarget{}, errors.New("file: empty path")
	}
	if r == nil {
		return fileTarget{name: path, display: path}, nil
	}
	abs := r.Abs(path)
	if r.under(abs) < 0 {
		return fileTarget{}, r.outside(path, "")
	}
	real, err := evalExisting(abs)
	if err != nil {
		return fileTarget{}, fmt.Errorf("file %s: %w", path, err)
	}
	i := r.under(real)
	if i < 0 {
		return fileTarget{}, r.outside(path, fmt.Sprintf("a symbolic link leads to %s", real))
	}
	rel, err := filepath.Rel(r.roots[i].real, real)
	if err != nil {
		return fileTarget{}, fmt.Errorf("file %s: %w", path, err)
	}
	return fileTarget{root: r.roots[i].root, fr: &r.roots[i], name: rel, display: abs}, nil
}

// under returns the index of the root that abs lies under (as configured or with its links
// resolved), the deepest when several do; -1 when none.
func (r *FileRoots) under(abs string) int {
	best, bestLen := -1, 0
	for i, fr := range r.roots {
		for _, base := range []string{fr.dir, fr.real} {
			if underDir(abs, base) && len(base) > bestLen {
				best, bestLen = i, len(base)
			}
		}
	}
	return best
}

func (r *FileRoots) outside(path, why string) error {
	msg := fmt.Sprintf("file %s is %v", path, ErrOutsideFileRoots)
	if why != "" {
		msg = fmt.Sprintf("file %s: %s, %v", path, why, ErrOutsideFileRoots)
	}
	// The roots are those of the rsql that runs the statement: a server's, or the shell's
	// or rsql -c/-f's own engine (docs/security.md, "File sandbox").
	return &outsideError{msg: msg + ": " + strings.Join(r.Dirs(), ", ") + " (--file-root DIR allows another directory)"}
}

type outsideError struct{ msg string }

func (e *outsideError) Error() string { return e.msg }
func (e *outsideError) Is(target error) bool {
	return target == ErrOutsideFileRoots
}

// underDir reports whether path is base or under it (both absolute and clean).
func underDir(path, base string) bool {
	if path == base {
		return true
	}
	if !strings.HasSuffix(base, string(filepath.Separator)) {
		base += string(filepath.Separator)
	}
	return strings.HasPrefix(path, base)
}

// evalExisting resolves the symbolic links of the longest existing prefix of path and
// appends the rest (which does not exist yet, so holds no links).
func evalExisting(path string) (string, error) {
	rest := ""
	p := path
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return path, nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// open opens the target's file.
func (t fileTarget) open(flag int, perm os.FileMode) (*os.File, error) {
	if t.root == nil {
		return os.OpenFile(t.name, flag, perm)
	}
	return t.root.OpenFile(t.name, flag, perm)
}

func (t fileTarget) stat() (os.FileInfo, error) {
	if t.root == nil {
		return os.Stat(t.name)
	}
	return t.root.Stat(t.name)
}

func (t fileTarget) mkdirParent() error {
	dir := filepath.Dir(t.name)
	if dir == "." || dir == string(filepath.Separator) {
		return nil
	}
	if t.root == nil {
		return os.MkdirAll(dir, 0o755)
	}
	return t.root.MkdirAll(dir, 0o755)
}

// Rename moves oldpath to newpath; both must be allowed, under the same root.
func (r *FileRoots) Rename(oldpath, newpath string) error {
	from, err := r.resolve(oldpath)
	if err != nil {
		return err
	}
	to, err := r.resolve(newpath)
	if err != nil {
		return err
	}
	if from.root == nil {
		return os.Rename(from.name, to.name)
	}
	if from.fr != to.fr {
		return fmt.Errorf("rename %s to %s: not under the same file root", oldpath, newpath)
	}
	return from.root.Rename(from.name, to.name)
}

// Remove removes the file at path, if the sandbox allows the path.
func (r *FileRoots) Remove(path string) error {
	t, err := r.resolve(path)
	if err != nil {
		return err
	}
	if t.root == nil {
		return os.Remove(t.name)
	}
	return t.root.Remove(t.name)
}

// WriteFile writes data to the file at path (created or emptied first).
func (r *FileRoots) WriteFile(path string, data []byte) error {
	t, err := r.resolve(path)
	if err != nil {
		return err
	}
	f, err := t.open(os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadFile reads the regular file at path, refusing one larger than max bytes.
func (r *FileRoots) ReadFile(path string, max int64) ([]byte, error) {
	t, err := r.resolve(path)
	if err != nil {
		return nil, err
	}
	f, err := t.open(os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > max {
		return nil, fmt.Errorf("%s must be a file of at most %d bytes", path, max)
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}
