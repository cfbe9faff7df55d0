package state

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"
)

// A batch larger than a memtable is written as a table file that RocksDB ingests (one
// atomic step, like a write) instead of through the memtable. Through the memtable, a
// checkpoint of tens of megabytes is held three times at once while it commits: the
// engine's batch, RocksDB's copy of it and the memtable it is inserted into (which then
// must be flushed whole anyway). As a table file it is held once, the file written a block
// at a time, its operations sorted by key through an index of 8 bytes each (Nexmark q5 at
// nexmark-flink's rate: a last checkpoint of 550,000 puts, 22 MB; docs/benchmarks.md,
// "Large checkpoints as table files").
//
// The file's operations take one sequence number, after every earlier write, so a key's
// last operation in the batch is the one written. A range deletion in a table file does not
// cover the file's own keys: a put followed in the batch by a deletion of a range holding
// it is left out of the file (the range's deletion covers what the store held of it), and a
// put after it is kept, as the batch says. A batch with an open-ended DropPrefix goes
// through the memtable.

// ingestPrefix names the table files being written for ingestion in the database's
// directory; OpenRocks removes those a crash left behind (RocksDB ignores them).
const ingestPrefix = "rsql-ingest-"

var ingestSeq atomic.Int64

// ingestRec locates one operation of a batch: the index of its segment (Batch.segments)
// in the high 16 bits, the offset of its record in the segment's buffer in the low 48.
type ingestRec uint64

// ingestBatch writes b as a table file and ingests it. It reports ok=false, having done
// nothing, when b does not go that way: smaller than a memtable, or with an open-ended
// DropPrefix.
func (s *Rocks) ingestBatch(b *Batch) (ok bool, err error) {
	if s.ingestBytes <= 0 || b.Size() < s.ingestBytes {
		return false, nil
	}
	segs := b.segments(nil)
	if len(segs) >= 1<<16 {
		return false, nil
	}

	type rangeDel struct {
		at         int // the operation's index in the batch
		start, end []byte
	}
	// each calls fn with every record of the batch, in order, and its index.
	each := func(fn func(i int, r ingestRec, tag byte, key, second []byte)) {
		i := 0
		for si, seg := range segs {
			for p := wbHeader; p < len(seg.buf); i++ {
				tag, key, second, next := readRecord(seg.buf, p)
				fn(i, ingestRec(uint64(si)<<48|uint64(p)), tag, key, second)
				p = next
			}
		}
	}
	for _, seg := range segs {
		if seg.open {
			return false, nil
		}
	}
	var ranges []rangeDel
	firstPoint := -1
	each(func(i int, _ ingestRec, tag byte, key, end []byte) {
		if tag == wbTagRangeDelete {
			ranges = append(ranges, rangeDel{at: i, start: key, end: end})
		} else if firstPoint < 0 {
			firstPoint = i
		}
	})
	// The range deletions recorded after some point operation, which may cover it.
	var later []rangeDel
	for _, r := range ranges {
		if firstPoint >= 0 && r.at > firstPoint {
			later = append(later, r)
		}
	}
	// The union of those ranges, sorted and disjoint: a key outside it (most keys: a later
	// range is often another operator's) is found so with one binary search, and only a key
	// inside it is checked against each later range.
	slices.SortFunc(later, func(x, y rangeDel) int { return bytes.Compare(x.start, y.start) })
	var union [][2][]byte
	for _, l := range later {
		if n := len(union); n > 0 && bytes.Compare(l.start, union[n-1][1]) <= 0 {
			if bytes.Compare(l.end, union[n-1][1]) > 0 {
				union[n-1][1] = l.end
			}
			continue
		}
		union = append(union, [2][]byte{l.start, l.end})
	}
	recs := make([]ingestRec, 0, b.Len()-len(ranges))
	each(func(i int, r ingestRec, tag byte, key, _ []byte) {
		if tag == wbTagRangeDelete {
			return
		}
		if u, _ := slices.BinarySearchFunc(union, key, func(x [2][]byte, k []byte) int {
			if bytes.Compare(x[1], k) <= 0 {
				return -1 // x ends at or before k
			}
			return 1
		}); u < len(union) && bytes.Compare(union[u][0], key) <= 0 {
			for _, l := range later {
				if l.at > i && bytes.Compare(key, l.start) >= 0 && bytes.Compare(key, l.end) < 0 {
					return // deleted by the range after it
				}
			}
		}
		recs = append(recs, r)
	})
	if len(recs) == 0 {
		return false, nil // a table file of range deletions alone: through the memtable
	}
	at := func(r ingestRec) (tag byte, key, value []byte) {
		tag, key, value, _ = readRecord(segs[r>>48].buf, int(r&(1<<48-1)))
		return tag, key, value
	}
	slices.SortStableFunc(recs, func(x, y ingestRec) int {
		_, kx, _ := at(x)
		_, ky, _ := at(y)
		return bytes.Compare(kx, ky)
	})

	path := filepath.Join(s.dir, fmt.Sprintf("%s%d-%d.sst", ingestPrefix, os.Getpid(), ingestSeq.Add(1)))
	if err := s.writeTable(path, recs, at, func(w *grocksdb.SSTFileWriter) error {
		for _, r := range ranges {
			if err := w.DeleteRange(r.start, r.end); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		os.Remove(path)
		return true, fmt.Errorf("state: write batch as a table file: %w", err)
	}
	io := grocksdb.NewDefaultIngestExternalFileOptions()
	defer io.Destroy()
	io.SetMoveFiles(true)
	if err := s.db.IngestExternalFile([]string{path}, io); err != nil {
		os.Remove(path)
		return true, fmt.Errorf("state: ingest batch: %w", err)
	}
	os.Remove(path) // moved: the database holds its own link
	s.ingested.Add(1)
	return true, nil
}

// writeTable writes the table file of recs (sorted by key; of equal keys the last wins)
// and the range deletions ranges adds.
func (s *Rocks) writeTable(path string, recs []ingestRec, at func(ingestRec) (byte, []byte, []byte), ranges func(*grocksdb.SSTFileWriter) error) error {
	eo := grocksdb.NewDefaultEnvOptions()
	defer eo.Destroy()
	w := grocksdb.NewSSTFileWriter(eo, s.opts)
	defer w.Destroy()
	if err := w.Open(path); err != nil {
		return err
	}
	for i, r := range recs {
		tag, key, value := at(r)
		if i+1 < len(recs) {
			if _, next, _ := at(recs[i+1]); bytes.Equal(next, key) {
				continue // a later operation on the key wins
			}
		}
		var err error
		if tag == wbTagPut {
			err = w.Put(key, value)
		} else {
			err = w.Delete(key)
		}
		if err != nil {
			return err
		}
	}
	if err := ranges(w); err != nil {
		return err
	}
	return w.Finish()
}

// removeIngestLeftovers removes the table files of ingestions a crash interrupted.
func removeIngestLeftovers(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ingestPrefix) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
