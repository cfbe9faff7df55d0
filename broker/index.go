package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The key index (docs/broker.md, "Key index") maps "topic#key" to commit-log offsets, for
// every key in a message's KEYS property (space-separated) and its UNIQ_KEY. It lives in
// Dir/index/, one file per time span (Config.IndexSpan) or per Config.IndexEntries
// entries, named by the commit-log offset of the first record it covers (20 digits):
//
//	header   56 bytes: magic "RIDX", version 1, slot count, entry capacity (uint32 each),
//	         first and last store time (ms), first and last record offset covered (int64
//	         each), entry count (uint32), 4 spare bytes
//	slots    slot count × uint32: 1 + number of the newest entry whose key hashes there
//	         (0: none)
//	entries  capacity × 20 bytes: key hash (uint32), record offset (int64), seconds
//	         after the first store time (uint32), 1 + number of the previous entry in the
//	         same slot (uint32; 0: none)
//
// Appends index their records as they write them, under the writer's lock. After a
// start, an indexer goroutine first indexes what the log holds beyond the index (resuming
// from the checkpoint, which records how far the flushed index goes) and then hands over;
// so a crash only re-indexes, and duplicate entries are harmless: lookups verify every hit
// against the record and drop repeats. A file whose header does not decode is deleted and
// its range indexed again.

const (
	indexMagic      = 0x52494458 // "RIDX"
	indexVersion    = 1
	indexHeaderSize = 56
	indexEntrySize  = 20
)

// indexHeader is the decoded header of an index file.
type indexHeader struct {
	slots, capacity    uint32
	beginTS, endTS     int64
	beginPhys, endPhys int64
	count              uint32
}

// IndexError describes an index file that does not decode.
type IndexError struct {
	Path   string
	Reason string
}

func (e *IndexError) Error() string {
	return fmt.Sprintf("broker: index file %s: %s", e.Path, e.Reason)
}

func indexFileSize(slots, capacity uint32) int64 {
	return indexHeaderSize + int64(slots)*4 + int64(capacity)*indexEntrySize
}

// decodeIndexHeader checks an index file's header against the file's size.
func decodeIndexHeader(b []byte, size int64) (indexHeader, error) {
	var h indexHeader
	if len(b) < indexHeaderSize {
		return h, fmt.Errorf("header of %d bytes is truncated", len(b))
	}
	be := binary.BigEndian
	if m := be.Uint32(b); m != indexMagic {
		return h, fmt.Errorf("magic %08X", m)
	}
	if v := be.Uint32(b[4:]); v != indexVersion {
		return h, fmt.Errorf("version %d is not %d", v, indexVersion)
	}
	h.slots, h.capacity = be.Uint32(b[8:]), be.Uint32(b[12:])
	h.beginTS, h.endTS = int64(be.Uint64(b[16:])), int64(be.Uint64(b[24:]))
	h.beginPhys, h.endPhys = int64(be.Uint64(b[32:])), int64(be.Uint64(b[40:]))
	h.count = be.Uint32(b[48:])
	switch {
	case h.slots == 0 || h.capacity == 0 || h.slots > 1<<26 || h.capacity > 1<<28:
		return h, fmt.Errorf("geometry %d slots × %d entries is out of range", h.slots, h.capacity)
	case indexFileSize(h.slots, h.capacity) != size:
		return h, fmt.Errorf("%d slots and %d entries need %d bytes, the file has %d", h.slots, h.capacity, indexFileSize(h.slots, h.capacity), size)
	case h.count > h.capacity:
		return h, fmt.Errorf("%d entries exceed the capacity %d", h.count, h.capacity)
	case h.beginPhys < 0 || h.endPhys < h.beginPhys:
		return h, fmt.Errorf("record range %d..%d is invalid", h.beginPhys, h.endPhys)
	}
	return h, nil
}

func encodeIndexHeader(b []byte, h *indexHeader) {
	be := binary.BigEndian
	be.PutUint32(b, indexMagic)
	be.PutUint32(b[4:], indexVersion)
	be.PutUint32(b[8:], h.slots)
	be.PutUint32(b[12:], h.capacity)
	be.PutUint64(b[16:], uint64(h.beginTS))
	be.PutUint64(b[24:], uint64(h.endTS))
	be.PutUint64(b[32:], uint64(h.beginPhys))
	be.PutUint64(b[40:], uint64(h.endPhys))
	be.PutUint32(b[48:], h.count)
}

// indexFile is one file, mapped. The indexer writes; lookups read entries below count
// (published atomically after the entry and its slot are written). hdr is the writer's.
type indexFile struct {
	path  string
	f     *os.File // nil for an in-memory file (tests)
	data  []byte
	hdr   indexHeader
	count atomic.Uint32
	// beginTS and endTS are published for lookups choosing files by time.
	beginTS, endTS atomic.Int64
	dirty          atomic.Bool
	// touched: pages may have become resident since the last release (resident.go).
	touched touchFlag
	// The writer's: the bytes backed on disk (fsys.go) — the header and slots from the
	// start, the entries as they are added — and fs to reserve more; a file whose slots
	// could not be reserved takes no entries (readOnly).
	res      reservation
	fs       storeFS
	readOnly bool
}

// indexReserveChunk is how far ahead of the writer an index file's entries are reserved.
const indexReserveChunk = 64 << 10

// reserve backs the file's bytes up to end (nothing for an in-memory file).
func (x *indexFile) reserve(end int64) error {
	if x.f == nil || end <= x.res.reserved {
		return nil // (without formatting the name: this runs once per record)
	}
	return x.res.ensure(x.fs, x.f, "index file "+filepath.Base(x.path), end)
}

func keyHash(topicName, key string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(topicName))
	h.Write([]byte{'#'})
	h.Write([]byte(key))
	return h.Sum32()
}

// add appends an entry. The writer only; false when the file is full, an error when the
// entry's bytes cannot be reserved on disk.
func (x *indexFile) add(hash uint32, phys, storeTS int64) (bool, error) {
	x.touched.mark()
	h := &x.hdr
	if h.count >= h.capacity || x.readOnly {
		return false, nil
	}
	if err := x.reserve(indexHeaderSize + int64(h.slots)*4 + int64(h.count+1)*indexEntrySize); err != nil {
		return false, err
	}
	if h.count == 0 && h.beginTS == 0 {
		h.beginTS = storeTS
		x.beginTS.Store(storeTS)
	}
	be := binary.BigEndian
	slot := indexHeaderSize + int64(hash%h.slots)*4
	prev := be.Uint32(x.data[slot:])
	n := h.count
	e := x.data[indexHeaderSize+int64(h.slots)*4+int64(n)*indexEntrySize:]
	be.PutUint32(e, hash)
	be.PutUint64(e[4:], uint64(phys))
	be.PutUint32(e[12:], uint32(max(0, (storeTS-h.beginTS)/1000)))
	be.PutUint32(e[16:], prev)
	be.PutUint32(x.data[slot:], n+1)
	h.count = n + 1
	h.endTS = max(h.endTS, storeTS)
	// The header on disk follows every entry (a slot may point at the newest entry only
	// if the count covers it).
	encodeIndexHeader(x.data, h)
	x.endTS.Store(h.endTS)
	x.count.Store(h.count)
	x.dirty.Store(true)
	return true, nil
}

// setRange records that records up to endPhys are covered, and writes the header (of a
// file that takes entries: the header of one that does not may have no blocks).
func (x *indexFile) setRange(endPhys int64) {
	x.touched.mark()
	if x.readOnly {
		return
	}
	x.hdr.endPhys = endPhys
	encodeIndexHeader(x.data, &x.hdr)
	x.dirty.Store(true)
}

// lookup returns the record offsets of entries with the key hash stored in [begin, end]
// (ms; the entries keep seconds), newest first. It follows a slot's chain only through
// entries below the published count and strictly backwards, so a damaged file can yield
// wrong offsets (which the caller verifies) but never loops.
func (x *indexFile) lookup(hash uint32, begin, end int64, limit int, out []int64) []int64 {
	x.touched.mark()
	count := x.count.Load()
	slots := x.hdr.slots
	be := binary.BigEndian
	slot := indexHeaderSize + int64(hash%slots)*4
	var n uint32
	if x.readOnly && x.f != nil {
		// The slots of a file opened on a full disk may have no blocks: read them through
		// the file (on tmpfs, reading such a page through the mapping faults).
		var b [4]byte
		if _, err := x.f.ReadAt(b[:], slot); err != nil {
			return out
		}
		n = be.Uint32(b[:])
	} else {
		n = be.Uint32(x.data[slot:])
	}
	base := x.beginTS.Load()
	for n > 0 && n <= count && len(out) < limit {
		e := x.data[indexHeaderSize+int64(slots)*4+int64(n-1)*indexEntrySize:]
		if be.Uint32(e) == hash {
			ts := base + int64(be.Uint32(e[12:]))*1000
			// Seconds are truncated: keep an entry whose second overlaps the range.
			if ts+999 >= begin && ts <= end {
				out = append(out, int64(be.Uint64(e[4:])))
			}
		}
		prev := be.Uint32(e[16:])
		if prev >= n {
			break
		}
		n = prev
	}
	return out
}

func (x *indexFile) flush() error {
	if x.f == nil || !x.dirty.Swap(false) {
		return nil
	}
	if err := x.fs.Datasync(x.f); err != nil {
		x.dirty.Store(true)
		return fmt.Errorf("broker: fsync index %s: %w", x.path, err)
	}
	return nil
}

func (x *indexFile) close() {
	if x.f != nil {
		syscall.Munmap(x.data)
		x.f.Close()
	}
}

// indexService owns the index files. mu guards files. One writer adds entries: the
// indexer goroutine until it has caught up (live false), then whoever holds Broker.wmu.
type indexService struct {
	fs               storeFS
	dir              string
	slots, capacity  uint32
	span             time.Duration
	mu               sync.RWMutex
	files            []*indexFile
	indexed          atomic.Int64 // records below this commit-log offset are indexed
	kick             chan struct{}
	lastTS, lastPhys atomic.Int64 // store time and offset of the last record indexed
	// live: the index has caught up, and appends index their records themselves.
	live atomic.Bool
	// The indexer goroutine's: a read buffer and the last topic name read.
	scratch   []byte
	lastTopic string
}

// openIndex opens the index files. rebuildFrom is the commit-log offset from which
// entries were lost (files that did not decode were deleted), or -1.
func openIndex(fs storeFS, dir string, slots, capacity int, span time.Duration, log func(string, ...any)) (x *indexService, rebuildFrom int64, err error) {
	x = &indexService{fs: fs, dir: dir, slots: uint32(slots), capacity: uint32(capacity), span: span, kick: make(chan struct{}, 1)}
	rebuildFrom = -1
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, fmt.Errorf("broker: %w", err)
	}
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("broker: %w", err)
	}
	var names []string
	for _, e := range ents {
		if _, err := strconv.ParseInt(e.Name(), 10, 64); err == nil && len(e.Name()) == 20 {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for i, name := range names {
		f, err := openIndexFile(fs, filepath.Join(dir, name))
		if err != nil {
			// Drop it and everything after: the indexer covers that range again.
			log("index file unreadable; it is rebuilt from the commit log", "err", err)
			// Cannot fail: names holds only 20-digit names (above).
			rebuildFrom, _ = strconv.ParseInt(name, 10, 64)
			for _, n := range names[i:] {
				fs.Remove(filepath.Join(dir, n))
			}
			break
		}
		x.files = append(x.files, f)
	}
	return x, rebuildFrom, nil
}

func openIndexFile(fs storeFS, path string) (*indexFile, error) {
	f, err := fs.OpenFile(path, os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	hb := make([]byte, indexHeaderSize)
	if _, err := f.ReadAt(hb, 0); err != nil {
		f.Close()
		return nil, &IndexError{Path: path, Reason: "header unreadable: " + err.Error()}
	}
	h, err := decodeIndexHeader(hb, st.Size())
	if err != nil {
		f.Close()
		return nil, &IndexError{Path: path, Reason: err.Error()}
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("broker: map index %s: %w", path, err)
	}
	adviseWriting(data) // advice only (resident.go): a failure changes nothing stored
	x := &indexFile{path: path, f: f, data: data, hdr: h, fs: fs, res: reservation{size: st.Size(), chunk: indexReserveChunk}}
	x.touched.mark()
	// The slots are written at random: back them all before taking entries. On a full disk
	// the file serves lookups and takes nothing more (a new file takes over when there is
	// space).
	if err := x.reserve(indexHeaderSize + int64(h.slots)*4); err != nil {
		x.readOnly = true
	} else {
		x.res.reserved = max(x.res.reserved, min(x.res.size, roundUpPage(indexHeaderSize+int64(h.slots)*4+int64(h.count)*indexEntrySize)))
	}
	x.count.Store(h.count)
	x.beginTS.Store(h.beginTS)
	x.endTS.Store(h.endTS)
	return x, nil
}

func (s *indexService) newFile(beginPhys int64) (*indexFile, error) {
	path := filepath.Join(s.dir, fmt.Sprintf("%020d", beginPhys))
	size := indexFileSize(s.slots, s.capacity)
	f, err := s.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: create index: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, fmt.Errorf("broker: size index %s: %w", path, err)
	}
	x := &indexFile{path: path, f: f, hdr: indexHeader{slots: s.slots, capacity: s.capacity, beginPhys: beginPhys, endPhys: beginPhys},
		fs: s.fs, res: reservation{size: size, chunk: indexReserveChunk}}
	if err := x.reserve(indexHeaderSize + int64(s.slots)*4); err != nil {
		f.Close()
		s.fs.Remove(path)
		return nil, err
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("broker: map index %s: %w", path, err)
	}
	adviseWriting(data) // advice only (resident.go): a failure changes nothing stored
	x.data = data
	x.touched.mark()
	encodeIndexHeader(data, &x.hdr)
	return x, nil
}

// current returns the file to add to, rolling to a new one when the last is full or
// spans more than the configured time. The writer only.
func (s *indexService) current(phys, storeTS int64) (*indexFile, error) {
	s.mu.RLock()
	var last *indexFile
	if len(s.files) > 0 {
		last = s.files[len(s.files)-1]
	}
	s.mu.RUnlock()
	if last != nil && last.hdr.count < last.hdr.capacity && !last.readOnly &&
		(last.hdr.count == 0 || storeTS-last.hdr.beginTS < s.span.Milliseconds()) {
		return last, nil
	}
	nf, err := s.newFile(phys)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.files = append(s.files, nf)
	s.mu.Unlock()
	return nf, nil
}

// indexRecord adds the keys of one record. The writer only.
func (s *indexService) indexRecord(topicName string, props []byte, phys, storeTS int64) error {
	if IsSystemTopic(topicName) && !strings.HasPrefix(topicName, "%RETRY%") && !strings.HasPrefix(topicName, "%DLQ%") {
		return nil
	}
	if k, ok := propLookup(props, PropKeys); ok {
		for k != "" {
			var key string
			key, k, _ = strings.Cut(k, " ")
			if key == "" {
				continue
			}
			if err := s.add(topicName, key, phys, storeTS); err != nil {
				return err
			}
		}
	}
	if u, ok := propLookup(props, PropUniqKey); ok && u != "" {
		return s.add(topicName, u, phys, storeTS)
	}
	return nil
}

func (s *indexService) add(topicName, key string, phys, storeTS int64) error {
	for attempt := 0; ; attempt++ {
		f, err := s.current(phys, storeTS)
		if err != nil {
			return err
		}
		ok, err := f.add(keyHash(topicName, key), phys, storeTS)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if attempt > 0 {
			return fmt.Errorf("broker: a new index file is full")
		}
	}
}

// advance records that everything below end is indexed (the index's writer only).
func (s *indexService) advance(end, storeTS int64) {
	s.lastTS.Store(storeTS)
	s.lastPhys.Store(end)
	s.indexed.Store(end)
	if f := s.last(); f != nil {
		f.setRange(end)
	}
}

// indexAppended indexes a record just written by the single writer (holding Broker.wmu)
// when the index has caught up with the log; otherwise the indexer goroutine will reach
// it. A failure hands indexing back to the goroutine, which retries from the indexed
// position.
func (b *Broker) indexAppended(topicName string, props []byte, phys, end, storeTS int64) {
	s := b.idx
	if s == nil || !s.live.Load() {
		return
	}
	if err := s.indexRecord(topicName, props, phys, storeTS); err != nil {
		s.live.Store(false)
		b.cfg.Logger.Error("indexing an appended message failed; the indexer takes over", "err", err)
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return
	}
	s.advance(end, storeTS)
}

// lookup returns up to limit record offsets for topic#key stored in [begin, end] (ms),
// ascending, without repeats.
func (s *indexService) lookup(topicName, key string, limit int, begin, end int64) []int64 {
	hash := keyHash(topicName, key)
	s.mu.RLock()
	files := append([]*indexFile(nil), s.files...)
	s.mu.RUnlock()
	var out []int64
	// Newest file first: with a limit, the most recent matches win.
	for i := len(files) - 1; i >= 0 && len(out) < limit*2; i-- {
		f := files[i]
		if f.count.Load() == 0 || f.endTS.Load() < begin || f.beginTS.Load() > end {
			continue
		}
		out = f.lookup(hash, begin, end, limit*2, out)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	uniq := out[:0]
	for i, o := range out {
		if i == 0 || o != out[i-1] {
			uniq = append(uniq, o)
		}
	}
	return uniq
}

func (s *indexService) flush() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.files {
		if err := f.flush(); err != nil {
			return err
		}
	}
	return nil
}

// dropBelow removes files whose records all lie below the commit-log offset minPhys
// (never the last one).
func (s *indexService) dropBelow(minPhys int64) {
	s.mu.Lock()
	var drop []*indexFile
	for len(s.files) > 1 && s.files[1].hdr.beginPhys <= minPhys {
		drop = append(drop, s.files[0])
		s.files = s.files[1:]
	}
	s.mu.Unlock()
	for _, f := range drop {
		f.close()
		s.fs.Remove(f.path)
	}
}

func (s *indexService) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		f.close()
	}
	s.files = nil
}

// indexer indexes what the log holds beyond the index (after a restart or a lost index)
// without holding up appends; once it has nearly caught up it takes the writer's lock,
// indexes the rest and hands over: from then on appends index their records as they write
// them (indexAppended). It stays idle until a failure hands indexing back. The caller has
// done b.wg.Add(1).
func (b *Broker) indexer() {
	defer b.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if !b.idx.live.Load() {
			err := b.catchUpIndex()
			if err == nil {
				b.wmu.Lock()
				if err = b.catchUpIndex(); err == nil {
					b.idx.live.Store(true)
				}
				b.wmu.Unlock()
			}
			if err != nil {
				b.cfg.Logger.Error("indexing failed", "err", err)
			}
		}
		select {
		case <-b.done:
			return
		case <-b.idx.kick:
		case <-t.C:
		}
	}
}

// catchUpIndex indexes the records between the indexed position and the log end.
func (b *Broker) catchUpIndex() error {
	s := b.idx
	end := b.cl.committed.Load()
	pos := s.indexed.Load()
	for pos < end {
		if min := b.cl.minOffset(); pos < min {
			pos = min
			continue
		}
		hdr, err := b.cl.read(nil, pos, 8)
		if err != nil {
			return err
		}
		rel := pos % b.cl.segSize
		if binary.BigEndian.Uint32(hdr[4:]) == magicBlank || rel+recordFixedSize > b.cl.segSize {
			pos += b.cl.segSize - rel
			s.indexed.Store(pos)
			continue
		}
		r, err := b.recordKeys(pos)
		if err != nil {
			return fmt.Errorf("indexing the record at %d: %w", pos, err)
		}
		if err := s.indexRecord(r.topic, r.props, pos, r.storeTS); err != nil {
			return err
		}
		pos += int64(r.size)
		s.advance(pos, r.storeTS)
	}
	return nil
}

// recordKeys reads what the index needs of the record at pos — size, store time, topic
// and properties — without copying or checking its body (recovery and replication have
// validated the log).
func (b *Broker) recordKeys(pos int64) (recordView, error) {
	var r recordView
	s := b.idx
	h, err := b.cl.read(s.scratch[:0], pos, 88)
	if err != nil {
		return r, err
	}
	be := binary.BigEndian
	r.size = int(be.Uint32(h))
	bodyLen := int(be.Uint32(h[84:]))
	if be.Uint32(h[4:]) != magicMessage || r.size < recordFixedSize || bodyLen < 0 || 88+bodyLen+3 > r.size {
		return r, &RecordError{Offset: pos, Reason: "header does not decode"}
	}
	r.storeTS = int64(be.Uint64(h[56:]))
	r.physOffset = pos
	tail, err := b.cl.read(h[:0], pos+88+int64(bodyLen), r.size-88-bodyLen)
	if err != nil {
		return r, err
	}
	s.scratch = tail[:0] // reused by the next record; props below alias it until then
	tl := int(tail[0])
	if 1+tl+2 > len(tail) {
		return r, &RecordError{Offset: pos, Reason: "topic length exceeds the record"}
	}
	if r.topic = s.lastTopic; r.topic != string(tail[1:1+tl]) {
		r.topic = string(tail[1 : 1+tl])
		s.lastTopic = r.topic
	}
	pl := int(be.Uint16(tail[1+tl:]))
	if 3+tl+pl != len(tail) {
		return r, &RecordError{Offset: pos, Reason: "properties do not end the record"}
	}
	r.props = tail[3+tl:]
	return r, nil
}

func (s *indexService) last() *indexFile {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.files) == 0 {
		return nil
	}
	return s.files[len(s.files)-1]
}

// QueryMessages returns up to max messages of a topic carrying key in KEYS or as UNIQ_KEY,
// stored between begin and end (epoch ms), oldest first. Right after Open, until the
// indexer has caught up with the log, the newest messages may not be found yet.
func (b *Broker) QueryMessages(topicName, key string, max int, begin, end int64) ([]Message, error) {
	recs, err := b.queryRecords(topicName, key, max, begin, end)
	if err != nil {
		return nil, err
	}
	out := make([]Message, len(recs))
	for i := range recs {
		out[i] = recs[i].message()
	}
	return out, nil
}

// queryRecords looks a key up in the index and returns the records that really carry it.
func (b *Broker) queryRecords(topicName, key string, limit int, begin, end int64) ([]recordView, error) {
	if b.idx == nil {
		return nil, errors.New("broker: the key index is disabled")
	}
	if limit <= 0 {
		return nil, nil
	}
	var out []recordView
	for _, phys := range b.idx.lookup(topicName, key, limit, begin, end) {
		r, err := b.cl.readRecord(phys)
		if err != nil || r.physOffset != phys || r.topic != topicName || r.storeTS < begin || r.storeTS > end || !hasKey(r.props, key) {
			continue
		}
		out = append(out, r)
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

func hasKey(props []byte, key string) bool {
	if u, ok := propLookup(props, PropUniqKey); ok && u == key {
		return true
	}
	if k, ok := propLookup(props, PropKeys); ok && key != "" {
		for _, f := range strings.Split(k, " ") { // RocketMQ's key separator: one space
			if f == key {
				return true
			}
		}
	}
	return false
}

// ViewMessage returns the message stored at a commit-log offset (the offset inside an
// offsetMsgId); ErrNotFound when there is none.
func (b *Broker) ViewMessage(phys int64) (Message, error) {
	r, err := b.cl.readRecord(phys)
	if err != nil || r.physOffset != phys {
		return Message{}, fmt.Errorf("%w at commit-log offset %d", ErrNotFound, phys)
	}
	return r.message(), nil
}
