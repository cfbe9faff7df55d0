package connectors

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"rsql/sql"
)

// MaxLineBytes is the longest line the file source reads; a longer line is an error that
// names the file and the line.
const MaxLineBytes = 256 << 20

// fileSplit is the id of a file source's only split.
const fileSplit = "0"

// FileSource is a bounded source over a text file with one record per line.
type FileSource struct {
	path   string
	target fileTarget
	mu     sync.Mutex
	open   map[*fileReader]struct{} // readers to close with the source; guarded by mu
}

// OpenFileSource returns a bounded source with one split ("0") whose messages are the
// lines of the file at path (relative paths are relative to the working directory).
// A message's Offset is its 1-based line number; empty lines are skipped (their numbers
// are not reused); a trailing "\r" is dropped. The file must exist now; it is opened
// again by each Open.
func OpenFileSource(path string) (Source, error) {
	return (*FileRoots)(nil).OpenSource(path)
}

// OpenSource is OpenFileSource within the sandbox: a path it does not allow is an error
// wrapping ErrOutsideFileRoots, and relative paths are relative to the first root.
func (r *FileRoots) OpenSource(path string) (Source, error) {
	t, err := r.resolve(path)
	if err != nil {
		return nil, err
	}
	st, err := t.stat()
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(r.escapeErr(path, err), ErrOutsideFileRoots) {
		// PostgreSQL's undefined_file, with the path as resolved (relative paths start at
		// the first file root, or the working directory: docs/security.md).
		where := t.display
		if abs, aerr := filepath.Abs(where); aerr == nil {
			where = abs
		}
		return nil, sql.Errorf(sql.CodeUndefinedFile, "file source %s: could not open file %q: no such file or directory", path, where)
	}
	if err != nil {
		return nil, fmt.Errorf("file source %s: %w", path, r.escapeErr(path, err))
	}
	if st.IsDir() {
		return nil, fmt.Errorf("file source %s: is a directory", path)
	}
	return &FileSource{path: path, target: t, open: map[*fileReader]struct{}{}}, nil
}

// Splits returns the one split "0".
func (s *FileSource) Splits(ctx context.Context) ([]string, error) { return []string{fileSplit}, nil }

// Bounded is true: a file ends.
func (s *FileSource) Bounded() bool { return true }

// Open reads the file from line offset (lines before it are skipped; 0 and 1 both mean
// the first line).
func (s *FileSource) Open(ctx context.Context, split string, offset int64) (SplitReader, error) {
	if split != fileSplit {
		return nil, fmt.Errorf("file source %s: no split %q (the only split is %q)", s.path, split, fileSplit)
	}
	fh, err := s.target.open(os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("file source %s: %w", s.path, err)
	}
	r := &fileReader{src: s, path: s.path, f: fh, br: bufio.NewReaderSize(fh, 256<<10), skipBefore: offset}
	s.mu.Lock()
	s.open[r] = struct{}{}
	s.mu.Unlock()
	return r, nil
}

// Close closes every reader still open.
func (s *FileSource) Close() error {
	s.mu.Lock()
	readers := make([]*fileReader, 0, len(s.open))
	for r := range s.open {
		readers = append(readers, r)
	}
	s.mu.Unlock()
	var errs []error
	for _, r := range readers {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

// fileReader reads one file's lines. It is used by one goroutine at a time.
type fileReader struct {
	src        *FileSource
	path       string
	f          *os.File
	br         *bufio.Reader
	line       int64 // number of the last line read
	skipBefore int64
	long       []byte // assembly buffer for lines longer than br's buffer
	done       bool
	closed     bool
}

// readLine returns the next line without its line end. The slice is valid until the
// next call.
func (r *fileReader) readLine() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = r.br.ReadSlice('\n')
			if len(r.long)+len(b) > MaxLineBytes {
				// Skip the rest of the line so the error names it but the reader stays sane.
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = r.br.ReadSlice('\n')
				}
				r.line++
				return nil, fmt.Errorf("file source %s: line %d is longer than %d bytes", r.path, r.line, MaxLineBytes)
			}
			r.long = append(r.long, b...)
		}
		b = r.long
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("file source %s: after line %d: %w", r.path, r.line, err)
	}
	if len(b) == 0 && errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	r.line++
	b = bytes.TrimSuffix(b, []byte{'\n'})
	b = bytes.TrimSuffix(b, []byte{'\r'})
	return b, nil
}

// Read appends up to max lines to buf. Each call's bodies live in one fresh block of
// memory, so messages stay valid after later calls. After the last line it returns
// ErrEndOfSplit (with no messages).
func (r *fileReader) Read(ctx context.Context, buf []Message, max int) ([]Message, error) {
	if r.closed {
		return buf, fmt.Errorf("file source %s: read after close", r.path)
	}
	if err := ctx.Err(); err != nil {
		return buf, err
	}
	if r.done {
		return buf, ErrEndOfSplit
	}
	if max <= 0 {
		max = 1
	}
	start := len(buf)
	var block []byte
	type span struct{ off, n int }
	var spans [64]span
	spanList := spans[:0]
	for len(spanList) < max {
		line, err := r.readLine()
		if err == io.EOF {
			r.done = true
			break
		}
		if err != nil {
			return buf, err
		}
		if len(line) == 0 || r.line < r.skipBefore {
			continue
		}
		spanList = append(spanList, span{len(block), len(line)})
		block = append(block, line...)
		buf = append(buf, Message{Offset: r.line, Split: fileSplit})
		if len(block) >= 4<<20 {
			break // keep a batch's memory bounded
		}
	}
	for i, sp := range spanList {
		buf[start+i].Body = block[sp.off : sp.off+sp.n : sp.off+sp.n]
	}
	if len(spanList) == 0 && r.done {
		return buf, ErrEndOfSplit
	}
	return buf, nil
}

func (r *fileReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.src.mu.Lock()
	delete(r.src.open, r)
	r.src.mu.Unlock()
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("file source %s: %w", r.path, err)
	}
	return nil
}

// FileSink appends message bodies to a file, one per line. It is safe for concurrent use.
//
// It is also a de-duplicating sink for a job's exactly-once output (Position and IDsSince,
// the contract of exec.DedupSink), on the condition that the job is the file's only
// writer: a file cannot store message ids, so IDsSince cuts the file back to the position
// the job's last checkpoint recorded, and the job writes what it held from there again.
// docs/sql.md ("File sinks") gives the rule users see.
type FileSink struct {
	path string
	mu   sync.Mutex // guards everything below
	f    *os.File
	w    *bufio.Writer
}

// FileSinkOptions say how OpenFileSinkWith opens the file.
type FileSinkOptions struct {
	// Truncate empties the file when it is opened (a new job's output starts afresh);
	// otherwise writes append to what the file holds.
	Truncate bool
}

// OpenFileSink opens (creating it and its parent directories if needed) the file at path
// for appending. Writes are buffered; Flush writes them out and fsyncs the file.
func OpenFileSink(path string) (Sink, error) {
	return OpenFileSinkWith(path, FileSinkOptions{})
}

// OpenFileSinkWith is OpenFileSink with options.
func OpenFileSinkWith(path string, opts FileSinkOptions) (*FileSink, error) {
	return (*FileRoots)(nil).OpenSink(path, opts)
}

// OpenSink is OpenFileSinkWith within the sandbox: a path it does not allow is an error
// wrapping ErrOutsideFileRoots, and relative paths are relative to the first root.
func (r *FileRoots) OpenSink(path string, opts FileSinkOptions) (*FileSink, error) {
	t, err := r.resolve(path)
	if err != nil {
		return nil, err
	}
	if err := t.mkdirParent(); err != nil {
		return nil, fmt.Errorf("file sink %s: %w", path, r.escapeErr(path, err))
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if opts.Truncate {
		flags |= os.O_TRUNC
	}
	fh, err := t.open(flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file sink %s: %w", path, r.escapeErr(path, err))
	}
	return &FileSink{path: path, f: fh, w: bufio.NewWriterSize(fh, 256<<10)}, nil
}

// escapeErr turns os.Root's refusal of a path that leads out of its root (a symbolic link
// swapped in after resolve looked) into ErrOutsideFileRoots naming the roots; other errors
// pass.
func (r *FileRoots) escapeErr(path string, err error) error {
	if r == nil {
		return err
	}
	if _, rerr := r.resolve(path); rerr != nil && errors.Is(rerr, ErrOutsideFileRoots) {
		return rerr
	}
	return err
}

// Position returns the file's size after writing out the buffer: every line written after
// the call is stored after it.
func (s *FileSink) Position(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushLocked(); err != nil {
		return nil, err
	}
	st, err := s.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("file sink %s: %w", s.path, err)
	}
	return binary.AppendVarint(nil, st.Size()), nil
}

// IDsSince cuts the file back to pos (a Position of this file) and reports no ids: a file
// keeps no message ids, and everything after pos was written by the output being
// recovered, which its writer then writes again in full. A file shorter than pos was
// changed by something else, and is an error.
func (s *FileSink) IDsSince(ctx context.Context, pos []byte, prefix string, fn func(id string)) error {
	size, n := binary.Varint(pos)
	if n <= 0 || n != len(pos) || size < 0 {
		return fmt.Errorf("file sink %s: bad position mark", s.path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushLocked(); err != nil {
		return err
	}
	st, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	if st.Size() < size {
		return fmt.Errorf("file sink %s: the file holds %d bytes but the job's last checkpoint wrote up to byte %d: it was changed outside rsql (%w)", s.path, st.Size(), size, ErrFileChanged)
	}
	if err := s.f.Truncate(size); err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	return nil
}

// Write buffers each body followed by a line end. A body holding a line end would split
// the record, so it is refused.
func (s *FileSink) Write(ctx context.Context, msgs []Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return fmt.Errorf("file sink %s: write after close", s.path)
	}
	for i := range msgs {
		if bytes.IndexByte(msgs[i].Body, '\n') >= 0 {
			return fmt.Errorf("file sink %s: a record body holds a line break; the file connector writes one record per line", s.path)
		}
	}
	for i := range msgs {
		s.w.Write(msgs[i].Body)
		if err := s.w.WriteByte('\n'); err != nil {
			return fmt.Errorf("file sink %s: %w", s.path, err)
		}
	}
	return nil
}

// Flush writes out the buffer and fsyncs the file.
func (s *FileSink) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

func (s *FileSink) flushLocked() error {
	if s.f == nil {
		return fmt.Errorf("file sink %s: flush after close", s.path)
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	return nil
}

// Close flushes and closes the file.
func (s *FileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.flushLocked()
	if cerr := s.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("file sink %s: %w", s.path, cerr)
	}
	s.f = nil
	return err
}

// PrintSink writes each message body and a line end to an io.Writer (a terminal, a push
// query's output, a test buffer). It is safe for concurrent use.
type PrintSink struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewPrintSink returns a sink that prints bodies to w, one per line, one Write call per
// batch.
func NewPrintSink(w io.Writer) *PrintSink { return &PrintSink{w: w} }

// Write prints msgs.
func (s *PrintSink) Write(ctx context.Context, msgs []Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = s.buf[:0]
	for i := range msgs {
		s.buf = append(s.buf, msgs[i].Body...)
		s.buf = append(s.buf, '\n')
	}
	if len(s.buf) == 0 {
		return nil
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return fmt.Errorf("print sink: %w", err)
	}
	return nil
}

// Flush flushes w when it has a Flush method (a *bufio.Writer).
func (s *PrintSink) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("print sink: %w", err)
		}
	}
	return nil
}

// Close flushes; it does not close w.
func (s *PrintSink) Close() error { return s.Flush(context.Background()) }
