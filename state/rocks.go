package state

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"
)

// RocksOptions configure a RocksDB store.
type RocksOptions struct {
	// Sync makes every Write wait for the write-ahead log to reach the disk. Off by default:
	// checkpoints that must survive a machine crash are committed to the checkpoint store.
	Sync bool
	// BlockCacheBytes is the LRU block cache size (default 8 MiB). Operators keep their
	// hot state in memory and read the store when a split's state is loaded and when an
	// aggregation without a window reads back a group gone from its bounded cache (a
	// group not used for a while, exec/agg_cache.go), so the cache serves little; a small
	// one keeps RocksDB's memory bounded.
	BlockCacheBytes uint64
	// WriteBufferBytes is the size of one memtable (default 8 MiB). Checkpoint
	// batches insert tens of thousands of small keys into the memtable; in a memtable that
	// fits the CPU cache an insert costs about half of one in RocksDB's default 64 MiB
	// (BenchmarkRocksWriteCheckpoint), which more than pays for the more frequent flushes.
	WriteBufferBytes uint64
	// WriteBuffers is how many memtables may exist at once, the one written and those
	// waiting to be flushed (default 2): with the block cache, it bounds RocksDB's memory
	// to about BlockCacheBytes + WriteBuffers × WriteBufferBytes (docs/benchmarks.md,
	// the RocksDB memory of q5).
	WriteBuffers int
	// MinBlobBytes: values of at least this many bytes are kept in blob files beside the
	// table files (RocksDB's integrated BlobDB, key-value separation), so compactions
	// rewrite the keys and a reference instead of the value (default 512; negative: every
	// value in the table files). The large values are a join's chunks of rows and a
	// distinct set's chunks, written once and read back rarely; in the tables every
	// compaction level rewrote them (q20 runs 1.4 times the events per CPU-second without
	// that), and with their keys alone in the tables the index and filter blocks held in
	// memory are a fraction of the size (docs/benchmarks.md, "Large values in blob files").
	// Blob files whose values were mostly overwritten or deleted are rewritten by the
	// compactions of the oldest quarter (blob garbage collection).
	MinBlobBytes int
	// Leveled uses RocksDB's leveled compaction, with its defaults, instead of universal
	// compaction with up to universalSortedRuns sorted runs and uncompressed table files
	// (the default). The state is written once a checkpoint, read back now and then and mostly
	// deleted whole (a window, an expired key); with leveled compaction every row was
	// rewritten at each of the levels it went down, and RocksDB's compaction threads took
	// more CPU than the operators (Nexmark q23: about 40 % of the process's CPU in a profile).
	// Universal compaction merges sorted runs of similar size, so a row is rewritten a few
	// times, not once a level, at the cost of disk space: up to about three times the live
	// data while a full merge runs (docs/operations.md, "Memory"; docs/benchmarks.md,
	// "Universal compaction").
	Leveled bool
	// NoIngest writes every batch through the memtable; by default a batch of at least
	// WriteBufferBytes is written as a table file that RocksDB ingests (rocks_ingest.go).
	NoIngest bool
}

// universalSortedRuns is how many sorted runs universal compaction lets accumulate before
// it merges them (RocksDB's level0_file_num_compaction_trigger, whose default is 4): a row
// is then rewritten about half as often, and a Get that misses the memtable asks up to that
// many Bloom filters (docs/benchmarks.md, "Universal compaction": 8 against 4 and 16).
const universalSortedRuns = 8

// Rocks is a Store in a RocksDB database (grocksdb over the system librocksdb).
type Rocks struct {
	mu     sync.RWMutex // readers: every operation; writer: Close
	closed bool
	db     *grocksdb.DB
	opts   *grocksdb.Options
	bbto   *grocksdb.BlockBasedTableOptions
	cache  *grocksdb.Cache
	ro     *grocksdb.ReadOptions
	wo     *grocksdb.WriteOptions
	dir    string
	// ingestBytes: a batch of at least this many bytes is written as a table file
	// (rocks_ingest.go; the memtable's size, 0: never).
	ingestBytes int
	ingested    atomic.Int64 // batches written as table files
}

// OpenRocks opens (creating if missing) the RocksDB database in dir.
func OpenRocks(dir string, o RocksOptions) (*Rocks, error) {
	if o.BlockCacheBytes == 0 {
		o.BlockCacheBytes = 8 << 20
	}
	fixMalloc()
	s := &Rocks{}
	s.cache = grocksdb.NewLRUCache(o.BlockCacheBytes)
	s.bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	s.bbto.SetBlockCache(s.cache)
	// A Bloom filter per table file (about 10 bits a key, 1 % false positives): a Get of
	// a key the database does not hold (an aggregation's group cache asking for a new
	// group, exec/agg_cache.go) then reads no block of the files that cannot hold it.
	s.bbto.SetFilterPolicy(grocksdb.NewBloomFilterFull(10))
	s.opts = grocksdb.NewDefaultOptions()
	s.opts.SetCreateIfMissing(true)
	s.opts.SetBlockBasedTableFactory(s.bbto)
	if o.WriteBufferBytes == 0 {
		o.WriteBufferBytes = 8 << 20
	}
	s.opts.SetWriteBufferSize(o.WriteBufferBytes)
	if o.WriteBuffers <= 0 {
		o.WriteBuffers = 2
	}
	s.opts.SetMaxWriteBufferNumber(o.WriteBuffers)
	if o.MinBlobBytes == 0 {
		o.MinBlobBytes = 512
	}
	if o.MinBlobBytes > 0 {
		s.opts.EnableBlobFiles(true)
		s.opts.SetMinBlobSize(uint64(o.MinBlobBytes))
		s.opts.EnableBlobGC(true)
	}
	if !o.Leveled {
		s.opts.SetCompactionStyle(grocksdb.UniversalCompactionStyle)
		s.opts.SetLevel0FileNumCompactionTrigger(universalSortedRuns)
		// Writes slow down and stop at RocksDB's default multiples of its default trigger.
		s.opts.SetLevel0SlowdownWritesTrigger(universalSortedRuns * 5)
		s.opts.SetLevel0StopWritesTrigger(universalSortedRuns * 9)
		// The values worth compressing are in blob files, which are not compressed; what
		// the tables hold (keys, small values) saved little and cost a compression per
		// merge (q9, q19, q23: 7-12 % more events per CPU-second without it).
		s.opts.SetCompression(grocksdb.NoCompression)
	}
	db, err := grocksdb.OpenDb(s.opts, dir)
	if err != nil {
		s.opts.Destroy()
		s.bbto.Destroy()
		s.cache.Destroy()
		return nil, fmt.Errorf("state: open RocksDB in %s: %w", dir, err)
	}
	s.db = db
	s.dir = dir
	s.ingestBytes = int(o.WriteBufferBytes)
	if o.NoIngest {
		s.ingestBytes = 0
	}
	removeIngestLeftovers(dir)
	s.ro = grocksdb.NewDefaultReadOptions()
	s.wo = grocksdb.NewDefaultWriteOptions()
	s.wo.SetSync(o.Sync)
	return s, nil
}

func (s *Rocks) Get(key []byte) ([]byte, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, false, ErrClosed
	}
	sl, err := s.db.Get(s.ro, key)
	if err != nil {
		return nil, false, fmt.Errorf("state: get: %w", err)
	}
	defer sl.Free()
	if !sl.Exists() {
		return nil, false, nil
	}
	return append([]byte(nil), sl.Data()...), true, nil
}

func (s *Rocks) Put(key, value []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.Put(s.wo, key, value)
}

func (s *Rocks) Delete(key []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.Delete(s.wo, key)
}

func (s *Rocks) scan(prefix []byte, fn func(key, value []byte) error) error {
	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	if end := PrefixEnd(prefix); end != nil {
		ro.SetIterateUpperBound(end)
	}
	it := s.db.NewIterator(ro)
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		k, v := it.Key(), it.Value()
		err := fn(k.Data(), v.Data())
		k.Free()
		v.Free()
		if err != nil {
			return err
		}
	}
	return it.Err()
}

func (s *Rocks) Scan(prefix []byte, fn func(key, value []byte) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.scan(prefix, fn)
}

func (s *Rocks) Write(b *Batch) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if b.Len() == 0 {
		return nil
	}
	if ok, err := s.ingestBatch(b); ok {
		return err
	}
	wb, err := s.writeBatch(b)
	if err != nil {
		return err
	}
	defer wb.Destroy()
	if err := s.db.Write(s.wo, wb); err != nil {
		return fmt.Errorf("state: write batch: %w", err)
	}
	return nil
}

// writeBatch converts b into a RocksDB write batch: a copy of the encoding of its first
// operations (b's own, or its first linked part's when b has none) in one call into RocksDB,
// then the operations of its other linked parts one by one (a checkpoint links the largest
// part first: exec/commit.go); every operation one by one when the first cannot be copied
// (an open-ended DropPrefix).
func (s *Rocks) writeBatch(b *Batch) (*grocksdb.WriteBatch, error) {
	segs := b.segments(nil)
	for len(segs) > 1 && segs[0].n == 0 {
		segs = segs[1:]
	}
	wb, rest := grocksdb.NewWriteBatch(), segs
	if rep, ok := segs[0].rocksRep(); ok {
		wb.Destroy()
		wb, rest = grocksdb.WriteBatchFrom(rep), segs[1:]
	}
	for _, seg := range rest {
		if err := s.addOps(wb, seg); err != nil {
			wb.Destroy()
			return nil, err
		}
	}
	return wb, nil
}

// addOps adds seg's own operations to wb one by one. An error (of the scan that lists the
// keys of an all-0xff prefix, or of the batch's encoding) fails the write: a batch without
// some of its deletions must not be written.
func (s *Rocks) addOps(wb *grocksdb.WriteBatch, seg *Batch) error {
	err := seg.eachOwn(func(kind OpKind, k, v []byte) error {
		switch kind {
		case OpPut:
			wb.Put(k, v)
		case OpDelete:
			wb.Delete(k)
		case OpDropPrefix:
			return s.dropInto(wb, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: write batch: %w", err)
	}
	return nil
}

// dropInto records the deletion of prefix's key range in wb.
func (s *Rocks) dropInto(wb *grocksdb.WriteBatch, prefix []byte) error {
	if end := PrefixEnd(prefix); end != nil {
		wb.DeleteRange(prefix, end)
		return nil
	}
	// prefix is all 0xff: no finite upper bound, delete key by key.
	return s.scan(prefix, func(k, _ []byte) error { wb.Delete(k); return nil })
}

func (s *Rocks) Export(prefix []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	w := newExportWriter()
	// An iterator reads one consistent view of the database.
	if err := s.scan(prefix, func(k, v []byte) error { w.add(k, v); return nil }); err != nil {
		return nil, fmt.Errorf("state: export: %w", err)
	}
	return w.finish(), nil
}

func (s *Rocks) Import(blob []byte) error {
	b, err := importBatch(blob)
	if err != nil {
		return err
	}
	return s.Write(b)
}

func (s *Rocks) DropPrefix(prefix []byte) error {
	b := &Batch{}
	b.DropPrefix(prefix)
	return s.Write(b)
}

// Close closes the database; later calls return ErrClosed.
func (s *Rocks) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.db.Close()
	s.ro.Destroy()
	s.wo.Destroy()
	s.opts.Destroy()
	s.bbto.Destroy()
	s.cache.Destroy()
	return nil
}

// RocksMemory is what RocksDB's own accounting says it holds in memory, in bytes.
type RocksMemory struct {
	// Memtables is the memtables' size: the one written and those waiting for their flush.
	Memtables uint64 `json:"memtables"`
	// TableReaders is the table files' index and filter blocks, held outside the block
	// cache for every open file.
	TableReaders uint64 `json:"table_readers"`
	// BlockCache is the block cache's usage.
	BlockCache uint64 `json:"block_cache"`
}

// Total is the sum of the parts.
func (m RocksMemory) Total() uint64 { return m.Memtables + m.TableReaders + m.BlockCache }

// Max is the larger of each part of m and o.
func (m RocksMemory) Max(o RocksMemory) RocksMemory {
	return RocksMemory{Memtables: max(m.Memtables, o.Memtables), TableReaders: max(m.TableReaders, o.TableReaders),
		BlockCache: max(m.BlockCache, o.BlockCache)}
}

// RocksDisk is the size of a database's files on disk.
type RocksDisk struct {
	// Tables is the table files' size, with those a compaction is replacing until it
	// deletes them.
	Tables uint64 `json:"tables"`
	// Blobs is the blob files' size (the values of at least RocksOptions.MinBlobBytes).
	Blobs uint64 `json:"blobs"`
}

// Max is the larger of each part of d and o.
func (d RocksDisk) Max(o RocksDisk) RocksDisk {
	return RocksDisk{Tables: max(d.Tables, o.Tables), Blobs: max(d.Blobs, o.Blobs)}
}

// Disk reads RocksDB's accounting of its table and blob files (zero once the store is
// closed): what the state takes on disk, merges under way included (docs/operations.md,
// "Memory").
func (s *Rocks) Disk() RocksDisk {
	var d RocksDisk
	s.whileOpen(func() {
		d.Tables, _ = s.db.GetIntProperty("rocksdb.total-sst-files-size")
		d.Blobs, _ = s.db.GetIntProperty("rocksdb.total-blob-file-size")
	})
	return d
}

// Memory reads RocksDB's accounting of its memory (zero once the store is closed).
func (s *Rocks) Memory() RocksMemory {
	var m RocksMemory
	s.whileOpen(func() {
		m.Memtables, _ = s.db.GetIntProperty("rocksdb.cur-size-all-mem-tables")
		m.TableReaders, _ = s.db.GetIntProperty("rocksdb.estimate-table-readers-mem")
		m.BlockCache = s.cache.GetUsage()
	})
	return m
}

// whileOpen runs read under the store's read lock, unless the store is closed.
func (s *Rocks) whileOpen(read func()) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.closed {
		read()
	}
}
