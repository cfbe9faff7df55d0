package broker

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

const cqEntrySize = 20

type cqFile struct {
	first int64 // first logical offset in the file
	f     *os.File
	data  []byte
	dirty atomic.Bool
	res   reservation // the writer's: bytes backed on disk (fsys.go)
}

// cqReserveChunk is how far ahead of the writer a consume-queue file is reserved (3,276
// entries): the files stay sparse beyond what is written.
const cqReserveChunk = 64 << 10

// consumeQueue indexes one (topic, queue): entry L is at byte L*20 of the queue's files.
// put is called by the writer only; files is guarded by mu; min and max are published
// atomically (max after the entry and the commit-log bytes are in place).
type consumeQueue struct {
	topic string
	id    int
	dir   string
	per   int64
	fs    storeFS

	mu    sync.RWMutex
	files []*cqFile
	// touched: pages of the files may have become resident since the last release
	// (resident.go); a queue nobody wrote or read is not released again.
	touched touchFlag
	closed  bool // set by close (topic deleted or broker closing); guarded by mu

	min atomic.Int64
	max atomic.Int64

	wmu  sync.Mutex
	wait chan struct{} // closed when max grows; nil when nobody waits
}

func openConsumeQueue(fs storeFS, root, topic string, id, per int) (*consumeQueue, error) {
	q := &consumeQueue{topic: topic, id: id, per: int64(per), fs: fs, dir: filepath.Join(root, topic, strconv.Itoa(id))}
	q.touched.mark()
	if err := fs.MkdirAll(q.dir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	ents, err := fs.ReadDir(q.dir)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	var starts []int64
	for _, e := range ents {
		n, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || len(e.Name()) != 20 {
			continue
		}
		if n%(q.per*cqEntrySize) != 0 {
			return nil, fmt.Errorf("broker: consume-queue file %s/%s does not match %d entries per file", q.dir, e.Name(), per)
		}
		starts = append(starts, n/cqEntrySize)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for _, s := range starts {
		f, err := q.openFile(s)
		if err != nil {
			q.close()
			return nil, err
		}
		q.files = append(q.files, f)
	}
	for i, f := range q.files {
		n, err := writtenEntries(f.f, q.per)
		if err != nil {
			q.close()
			return nil, fmt.Errorf("broker: read consume queue %s: %w", q.dir, err)
		}
		// Every page holding a written entry has its blocks; beyond the last one the file
		// may be sparse, and nothing beyond it needs clearing.
		f.res.reserved = min(f.res.size, roundUpPage(n*cqEntrySize))
		if i == 0 {
			q.min.Store(f.first)
		}
		if i == len(q.files)-1 {
			q.max.Store(f.first + n)
		}
	}
	return q, nil
}

// writtenEntries returns the number of entries of a consume-queue file up to its last
// written one (size not 0). It reads through the file, from the end, not through the
// mapping: the unwritten part may have no blocks, and on some file systems (tmpfs) reading
// such a page through a mapping faults when the disk is full.
func writtenEntries(f *os.File, per int64) (int64, error) {
	const chunk = 3276 // entries per read (64 KiB)
	buf := make([]byte, chunk*cqEntrySize)
	for end := per; end > 0; {
		from := max(0, end-chunk)
		b := buf[:(end-from)*cqEntrySize]
		if _, err := f.ReadAt(b, from*cqEntrySize); err != nil {
			return 0, err
		}
		for n := end; n > from; n-- {
			if binary.BigEndian.Uint32(b[(n-1-from)*cqEntrySize+8:]) != 0 {
				return n, nil
			}
		}
		end = from
	}
	return 0, nil
}

func (q *consumeQueue) openFile(first int64) (*cqFile, error) {
	path := filepath.Join(q.dir, fmt.Sprintf("%020d", first*cqEntrySize))
	f, err := q.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: open consume queue: %w", err)
	}
	size := q.per * cqEntrySize
	if st, err := f.Stat(); err != nil || st.Size() != size {
		if err := f.Truncate(size); err != nil {
			f.Close()
			return nil, fmt.Errorf("broker: size consume queue %s: %w", path, err)
		}
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("broker: map consume queue %s: %w", path, err)
	}
	adviseWriting(data) // advice only (resident.go): a failure changes nothing stored
	return &cqFile{first: first, f: f, data: data, res: reservation{size: size, chunk: cqReserveChunk}}, nil
}

func (q *consumeQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, f := range q.files {
		syscall.Munmap(f.data)
		f.f.Close()
	}
	q.files = nil
}

// fileFor returns the file holding entry off; caller holds mu.
func (q *consumeQueue) fileFor(off int64) *cqFile {
	if len(q.files) == 0 {
		return nil
	}
	i := int((off - q.files[0].first) / q.per)
	if off < q.files[0].first || i >= len(q.files) {
		return nil
	}
	return q.files[i]
}

// put writes entry off (the writer or recovery only).
func (q *consumeQueue) put(off, phys int64, size int32, tags int64) error {
	q.mu.RLock()
	f, closed := q.fileFor(off), q.closed
	q.mu.RUnlock()
	if closed {
		return fmt.Errorf("%w: %s queue %d was deleted", ErrTopicNotExist, q.topic, q.id)
	}
	if f == nil {
		first := off - off%q.per
		nf, err := q.openFile(first)
		if err != nil {
			return err
		}
		q.mu.Lock()
		if len(q.files) == 0 {
			q.min.Store(off)
		}
		q.files = append(q.files, nf)
		q.mu.Unlock()
		f = nf
	}
	at := (off - f.first) * cqEntrySize
	// (The name is formatted only when a chunk is reserved: not once per message.)
	if at+cqEntrySize > f.res.reserved {
		if err := f.res.ensure(q.fs, f.f, fmt.Sprintf("consume queue %s/%d", q.topic, q.id), at+cqEntrySize); err != nil {
			return err
		}
	}
	q.touched.mark()
	b := f.data[at:]
	binary.BigEndian.PutUint64(b, uint64(phys))
	binary.BigEndian.PutUint32(b[8:], uint32(size))
	binary.BigEndian.PutUint64(b[12:], uint64(tags))
	f.dirty.Store(true)
	return nil
}

// get reads entry off; ok is false when it is not retained or not written.
func (q *consumeQueue) get(off int64) (phys int64, size int32, tags int64, ok bool) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	f := q.fileFor(off)
	if f == nil {
		return 0, 0, 0, false
	}
	q.touched.mark()
	b := f.data[(off-f.first)*cqEntrySize:]
	phys = int64(binary.BigEndian.Uint64(b))
	size = int32(binary.BigEndian.Uint32(b[8:]))
	tags = int64(binary.BigEndian.Uint64(b[12:]))
	return phys, size, tags, size > 0
}

// truncate zeroes entries from off on (recovery only).
func (q *consumeQueue) truncate(off int64) {
	q.touched.mark()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.files) > 0 {
		f := q.files[len(q.files)-1]
		if f.first < off {
			// Only the reserved part can hold entries; the rest reads as zeros and may
			// have no blocks.
			if at := (off - f.first) * cqEntrySize; at < f.res.reserved {
				clear(f.data[at:f.res.reserved])
				f.dirty.Store(true)
			}
			break
		}
		syscall.Munmap(f.data)
		f.f.Close()
		q.fs.Remove(filepath.Join(q.dir, fmt.Sprintf("%020d", f.first*cqEntrySize)))
		q.files = q.files[:len(q.files)-1]
	}
	if q.max.Load() > off {
		q.max.Store(off)
	}
	if q.min.Load() > off {
		q.min.Store(off)
	}
}

// publish makes entries below max visible and wakes long polls.
func (q *consumeQueue) publish(max int64) {
	q.max.Store(max)
	q.wmu.Lock()
	if q.wait != nil {
		close(q.wait)
		q.wait = nil
	}
	q.wmu.Unlock()
}

// waitCh returns a channel closed at the next publish.
func (q *consumeQueue) waitCh() <-chan struct{} {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.wait == nil {
		q.wait = make(chan struct{})
	}
	return q.wait
}

func (q *consumeQueue) flush() error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	for _, f := range q.files {
		if f.dirty.Swap(false) {
			if err := q.fs.Datasync(f.f); err != nil {
				f.dirty.Store(true)
				return fmt.Errorf("broker: fsync consume queue %s: %w", q.dir, err)
			}
		}
	}
	return nil
}

// dropBelow removes files whose entries all point below the commit-log offset minPhys and
// moves min to the first entry at or above it.
func (q *consumeQueue) dropBelow(minPhys int64) {
	q.touched.mark()
	for {
		q.mu.RLock()
		if len(q.files) < 2 {
			q.mu.RUnlock()
			break
		}
		f := q.files[0]
		lastPhys := int64(binary.BigEndian.Uint64(f.data[(q.per-1)*cqEntrySize:]))
		q.mu.RUnlock()
		if lastPhys >= minPhys {
			break
		}
		q.mu.Lock()
		q.files = q.files[1:]
		q.mu.Unlock()
		syscall.Munmap(f.data)
		f.f.Close()
		q.fs.Remove(filepath.Join(q.dir, fmt.Sprintf("%020d", f.first*cqEntrySize)))
	}
	// Advance min past entries whose record is gone.
	lo, hi := q.min.Load(), q.max.Load()
	for lo < hi {
		mid := lo + (hi-lo)/2
		phys, _, _, ok := q.get(mid)
		if !ok || phys < minPhys {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo > q.min.Load() {
		q.min.Store(lo)
	}
}
