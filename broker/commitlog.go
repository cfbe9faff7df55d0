package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

// segment is one commit-log file, mapped read-write over its whole size. res is the
// writer's: the bytes reserved on disk (fsys.go); nothing past it is written.
type segment struct {
	base int64
	f    *os.File
	data []byte
	// touched: pages of the mapping may have become resident since the last release
	// (resident.go).
	touched atomic.Bool
	res     reservation
	// writing: the writer appends to this segment and its mapping is advised for that
	// (resident.go, adviseWriting). Owned by the writer.
	writing bool
}

func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// segmentReserveChunk is how far ahead of the writer a segment's blocks are reserved.
const segmentReserveChunk = 4 << 20

func openSegment(fs storeFS, dir string, base, size int64) (*segment, error) {
	path := filepath.Join(dir, segmentName(base))
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: open segment: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("broker: stat segment %s: %w", path, err)
	}
	if st.Size() != size {
		if st.Size() > size {
			f.Close()
			return nil, fmt.Errorf("broker: segment %s is %d bytes, larger than the configured segment size %d", path, st.Size(), size)
		}
		if err := f.Truncate(size); err != nil {
			f.Close()
			return nil, fmt.Errorf("broker: size segment %s: %w", path, err)
		}
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("broker: map segment %s: %w", path, err)
	}
	s := &segment{base: base, f: f, data: data, res: reservation{size: size, chunk: segmentReserveChunk}}
	s.touched.Store(true)
	return s, nil
}

// reserve backs the segment's bytes up to rel+n on disk before the writer writes them.
func (s *segment) reserve(fs storeFS, rel, n int64) error {
	if rel+n <= s.res.reserved {
		return nil // (without formatting the name: this runs once per record)
	}
	return s.res.ensure(fs, s.f, "commit-log segment "+segmentName(s.base), rel+n)
}

func (s *segment) close() error {
	err := syscall.Munmap(s.data)
	if e := s.f.Close(); err == nil {
		err = e
	}
	return err
}

// commitLog is the sequence of segments. The writer fields (wpos) are owned by the holder of
// Broker.wmu; segs is guarded by mu (readers RLock while they copy out of a mapping).
type commitLog struct {
	dir     string
	segSize int64
	fs      storeFS

	mu   sync.RWMutex
	segs []*segment

	wpos      int64        // next write position; owned by the writer
	committed atomic.Int64 // records below are complete and readable
	flushed   atomic.Int64 // records below are fsynced

	pf prefaulter // maps reserved chunks ahead of the writer (prefault.go)
}

func openCommitLog(fs storeFS, dir string, segSize int64) (*commitLog, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	cl := &commitLog{dir: dir, segSize: segSize, fs: fs}
	var bases []int64
	for _, e := range ents {
		base, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || len(e.Name()) != 20 {
			continue
		}
		if base%segSize != 0 {
			return nil, fmt.Errorf("broker: segment %s is not aligned to the segment size %d (was the store written with another size?)", e.Name(), segSize)
		}
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	for _, b := range bases {
		s, err := openSegment(fs, dir, b, segSize)
		if err != nil {
			cl.close()
			return nil, err
		}
		cl.segs = append(cl.segs, s)
	}
	return cl, nil
}

func (cl *commitLog) close() error {
	cl.stopPrefault()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var first error
	for _, s := range cl.segs {
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	cl.segs = nil
	return first
}

// minOffset is the first retained byte.
func (cl *commitLog) minOffset() int64 {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	if len(cl.segs) == 0 {
		return cl.committed.Load()
	}
	return cl.segs[0].base
}

// segFor returns the segment holding off; caller holds mu.
func (cl *commitLog) segFor(off int64) *segment {
	if len(cl.segs) == 0 {
		return nil
	}
	i := int((off - cl.segs[0].base) / cl.segSize)
	if i < 0 || i >= len(cl.segs) {
		return nil
	}
	return cl.segs[i]
}

// reserve returns the bytes for a record of n bytes at cl.wpos, rolling to a new segment
// (after a blank marker) when the current one cannot hold n plus a blank marker. The bytes
// (and room for the blank marker after them) are reserved on disk first: on a full disk it
// fails with ErrNoSpace and the write position stays. Called by the writer only.
func (cl *commitLog) reserve(n int) ([]byte, int64, error) {
	pos := cl.wpos
	rel := pos % cl.segSize
	if rel+int64(n)+blankSize > cl.segSize {
		// Mark the rest of this segment as blank and move on. The marker's bytes were
		// reserved with the record before it (or with the segment's recovery).
		cl.mu.RLock()
		s := cl.segFor(pos)
		cl.mu.RUnlock()
		if s != nil {
			if err := s.reserve(cl.fs, rel, blankSize); err != nil {
				return nil, 0, err
			}
			binary.BigEndian.PutUint32(s.data[rel:], uint32(cl.segSize-rel))
			binary.BigEndian.PutUint32(s.data[rel+4:], magicBlank)
			if s.writing {
				s.writing = false
				adviseReading(s.data) // advice only: a failure changes nothing stored
			}
		}
		pos += cl.segSize - rel
		cl.wpos = pos
		rel = 0
	}
	cl.mu.RLock()
	s := cl.segFor(pos)
	cl.mu.RUnlock()
	if s == nil {
		ns, err := openSegment(cl.fs, cl.dir, pos-rel, cl.segSize)
		if err != nil {
			return nil, 0, err
		}
		cl.mu.Lock()
		cl.segs = append(cl.segs, ns)
		cl.mu.Unlock()
		s = ns
	}
	before := s.res.reserved
	if err := s.reserve(cl.fs, rel, min(int64(n)+blankSize, cl.segSize-rel)); err != nil {
		return nil, 0, err
	}
	if s.res.reserved > before {
		// Map the new chunk ahead, past the page this record starts on.
		cl.ahead(s, max(before, (rel+int64(n))/pageSize*pageSize+pageSize), s.res.reserved)
	}
	if !s.writing {
		s.writing = true
		adviseWriting(s.data) // advice only: a failure changes nothing stored
	}
	cl.wpos = pos + int64(n)
	return s.data[rel : rel+int64(n)], pos, nil
}

// rollback undoes an append that failed half-way: it zeroes what was written from start on
// in start's segment (so recovery cannot mistake it for data) and moves the write position
// back. Index entries written for it point past the log end and are ignored, then
// overwritten. Called by the writer only.
func (cl *commitLog) rollback(start int64) {
	cl.mu.RLock()
	s := cl.segFor(start)
	cl.mu.RUnlock()
	if s != nil {
		// Only reserved bytes were written (a blank marker and the records before a failed
		// reservation); the rest may have no blocks.
		end := min(cl.wpos-s.base, cl.segSize, s.res.reserved)
		if rel := start - s.base; end > rel {
			clear(s.data[rel:end])
		}
	}
	cl.wpos = start
}

// read copies size bytes at off into dst (appending). It fails when the range is not
// retained or not yet committed.
func (cl *commitLog) read(dst []byte, off int64, size int) ([]byte, error) {
	if off+int64(size) > cl.committed.Load() {
		return dst, fmt.Errorf("broker: commit-log range %d+%d is beyond the end", off, size)
	}
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	s := cl.segFor(off)
	if s == nil {
		return dst, fmt.Errorf("broker: commit-log offset %d is not retained", off)
	}
	rel := off - s.base
	if rel+int64(size) > cl.segSize {
		return dst, fmt.Errorf("broker: commit-log range %d+%d crosses a segment", off, size)
	}
	if !s.touched.Load() {
		s.touched.Store(true)
	}
	return append(dst, s.data[rel:rel+int64(size)]...), nil
}

// readRecord reads and validates the whole record at off.
func (cl *commitLog) readRecord(off int64) (recordView, error) {
	hdr, err := cl.read(nil, off, 8)
	if err != nil {
		return recordView{}, err
	}
	size := int(binary.BigEndian.Uint32(hdr))
	if size < recordFixedSize || int64(size) > cl.segSize {
		return recordView{}, &RecordError{Offset: off, Reason: fmt.Sprintf("size %d", size)}
	}
	buf, err := cl.read(nil, off, size)
	if err != nil {
		return recordView{}, err
	}
	return parseRecord(buf, off)
}

// flush fsyncs every segment that may hold data between flushed and committed.
func (cl *commitLog) flush() error {
	target := cl.committed.Load()
	from := cl.flushed.Load()
	if target <= from {
		return nil
	}
	// Hold the read lock through the fsyncs so retention cannot close a file under us.
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	for _, s := range cl.segs {
		if s.base+cl.segSize > from && s.base < target {
			if err := cl.fs.Datasync(s.f); err != nil {
				return fmt.Errorf("broker: fsync segment %d: %w", s.base, err)
			}
		}
	}
	cl.flushed.Store(target)
	return nil
}

// recover scans records from start (a record boundary), calling fn for each valid one, and
// returns the end of the valid log. Everything after the end is zeroed, and later segments
// removed.
func (cl *commitLog) recover(start int64, fn func(r *recordView, off int64)) (int64, error) {
	if len(cl.segs) == 0 {
		return start, nil
	}
	if start < cl.segs[0].base {
		start = cl.segs[0].base
	}
	last := cl.segs[len(cl.segs)-1]
	if start > last.base+cl.segSize {
		start = last.base
	}
	pos := start
	// The scan reads through the files, not the mappings: past the log's end a page may
	// have no blocks, and on some file systems (tmpfs) even reading such a page through a
	// mapping faults when the disk is full.
	var rd segReader
	for {
		s := cl.segFor(pos)
		if s == nil {
			break
		}
		rel := pos - s.base
		if rel+8 > cl.segSize {
			pos = s.base + cl.segSize
			continue
		}
		hdr, ok, err := rd.bytes(s, rel, 8)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		if binary.BigEndian.Uint32(hdr[4:]) == magicBlank {
			n := int64(binary.BigEndian.Uint32(hdr))
			if n == cl.segSize-rel {
				pos = s.base + cl.segSize
				continue
			}
			break
		}
		size := int64(binary.BigEndian.Uint32(hdr))
		if size < recordFixedSize || rel+size > cl.segSize {
			break
		}
		rec, ok, err := rd.bytes(s, rel, size)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		r, err := parseRecord(rec, pos)
		if err != nil || r.physOffset != pos {
			break
		}
		fn(&r, pos)
		pos += int64(r.size)
	}
	// Truncate the torn tail: zero the rest of the end segment, drop later ones. Nothing is
	// written through the mapping beyond the page of the log's end (those pages may have no
	// blocks on a full disk): the hole punched frees them, and where punching is not
	// supported zeros are written through the file, where a full disk is an error.
	if s := cl.segFor(pos); s != nil {
		rel := pos - s.base
		if err := cl.fs.PunchHole(s.f, rel, cl.segSize-rel); err != nil {
			return 0, fmt.Errorf("broker: zeroing the torn tail of segment %s: %w", segmentName(s.base), err)
		}
		// Fallocate does not zero a partial page reliably through an existing mapping on all
		// filesystems; zero the rest of the end's page by hand. That page holds the last
		// record's bytes, so it has its blocks.
		if rel%pageSize != 0 {
			clear(s.data[rel:min(cl.segSize, roundUpPage(rel))])
		}
		s.res.reserved = rel
		keep := 0
		for i, t := range cl.segs {
			if t == s {
				keep = i + 1
			}
		}
		for _, t := range cl.segs[keep:] {
			t.close()
			cl.fs.Remove(filepath.Join(cl.dir, segmentName(t.base)))
		}
		cl.segs = cl.segs[:keep]
	}
	return pos, nil
}

// dropOldest deletes the oldest segment (never the one being written).
func (cl *commitLog) dropOldest() (bool, error) {
	cl.mu.Lock()
	if len(cl.segs) < 2 || cl.segs[1].base > cl.committed.Load() {
		cl.mu.Unlock()
		return false, nil
	}
	s := cl.segs[0]
	cl.segs = cl.segs[1:]
	cl.mu.Unlock()
	s.close()
	if err := cl.fs.Remove(filepath.Join(cl.dir, segmentName(s.base))); err != nil {
		return true, fmt.Errorf("broker: delete segment: %w", err)
	}
	return true, nil
}

// retentionInfo returns an upper bound of the newest store time in the oldest segment (the
// store time of the next segment's first record, 0 if unknown), the total size and count.
func (cl *commitLog) retentionInfo() (int64, int64, int) {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	if len(cl.segs) == 0 {
		return 0, 0, 0
	}
	var ts int64
	if len(cl.segs) > 1 && cl.segs[1].base+recordFixedSize <= cl.committed.Load() {
		d := cl.segs[1].data
		if binary.BigEndian.Uint32(d[4:]) == magicMessage {
			ts = int64(binary.BigEndian.Uint64(d[56:]))
		}
	}
	return ts, int64(len(cl.segs)) * cl.segSize, len(cl.segs)
}

// segReader reads segments through their files in windows of 1 MiB (recovery).
type segReader struct {
	s   *segment
	at  int64 // buf holds the segment's bytes [at, at+len(buf))
	buf []byte
}

// bytes returns n bytes of s from rel, valid until the next call; false when the file
// holds fewer. A read error other than the file's end is returned: it is not a torn tail.
func (r *segReader) bytes(s *segment, rel, n int64) ([]byte, bool, error) {
	if r.s == s && rel >= r.at && rel+n <= r.at+int64(len(r.buf)) {
		return r.buf[rel-r.at : rel-r.at+n], true, nil
	}
	size := max(n, 1<<20)
	if cap(r.buf) < int(size) {
		r.buf = make([]byte, size)
	}
	k, err := s.f.ReadAt(r.buf[:size], rel)
	if err != nil && !errors.Is(err, io.EOF) {
		r.s = nil
		return nil, false, fmt.Errorf("broker: reading segment %s at %d: %w", segmentName(s.base), rel, err)
	}
	r.s, r.at, r.buf = s, rel, r.buf[:k]
	if int64(k) < n {
		return nil, false, nil
	}
	return r.buf[:n], true, nil
}

// appendRaw writes bytes copied from a master's log at pos, which must be the write
// position; they must lie in one segment. A slave's replicator (the single writer) only.
func (cl *commitLog) appendRaw(pos int64, data []byte) error {
	if pos != cl.wpos {
		return fmt.Errorf("broker: replicated bytes at %d, the log ends at %d", pos, cl.wpos)
	}
	rel := pos % cl.segSize
	if rel+int64(len(data)) > cl.segSize {
		return fmt.Errorf("broker: replicated bytes %d+%d cross a segment of %d bytes", pos, len(data), cl.segSize)
	}
	cl.mu.RLock()
	s := cl.segFor(pos)
	cl.mu.RUnlock()
	if s == nil {
		ns, err := openSegment(cl.fs, cl.dir, pos-rel, cl.segSize)
		if err != nil {
			return err
		}
		cl.mu.Lock()
		if n := len(cl.segs); n > 0 && cl.segs[n-1].base+cl.segSize != ns.base {
			cl.mu.Unlock()
			ns.close()
			return fmt.Errorf("broker: replicated segment %d does not follow segment %d", ns.base, cl.segs[n-1].base)
		}
		cl.segs = append(cl.segs, ns)
		cl.mu.Unlock()
		s = ns
	}
	if err := s.reserve(cl.fs, rel, int64(len(data))); err != nil {
		return err
	}
	copy(s.data[rel:], data)
	cl.wpos = pos + int64(len(data))
	return nil
}

// resetEmpty makes an empty log start at pos (a segment boundary): a new slave whose
// master no longer has the beginning of its log.
func (cl *commitLog) resetEmpty(pos int64) error {
	cl.mu.RLock()
	n := len(cl.segs)
	cl.mu.RUnlock()
	if n > 0 || cl.wpos != 0 || pos%cl.segSize != 0 {
		return fmt.Errorf("broker: the log can start at %d only when it is empty and at a segment boundary", pos)
	}
	cl.wpos = pos
	cl.committed.Store(pos)
	cl.flushed.Store(pos)
	return nil
}
