package sql

import (
	"encoding/binary"
	"fmt"
)

// DistinctSet is the set of distinct non-NULL values of a DISTINCT aggregate (COUNT(DISTINCT
// x)). Two values are the same when their AppendValue forms are equal (so kinds never mix).
//
// Integer values of one kind (ids, the common argument) are kept as int64 in intValues (a
// flat open-addressing table without pointers while the set is small, then a compressed
// bitmap for the values in [0, 2^32); neither is scanned by the garbage collector); every
// other value is kept as its AppendValue form.
//
// The set remembers the values added since the last ClearFresh (FreshChunk), so a
// checkpoint writes only those instead of re-encoding the whole set (exec's state codec
// stores them as a chunk under a key of its own). A DistinctSet is used by one goroutine.
type DistinctSet struct {
	// fam, when set, makes this the set of a family of calls (distinct_family.go).
	fam   *distinctFamily
	kind  Kind // kind of the values in ints (KindNull before the first integer)
	ints  intValues
	strs  map[string]struct{}
	fresh []byte // AppendValue forms added since ClearFresh, each after its uvarint length
	// freshInts are the integers (of kind) added since ClearFresh, encoded only when a
	// checkpoint asks for them (AppendFreshChunk).
	freshInts []int64
	// Chunks is the number of chunks its owner stored under keys of the set's own (the
	// layout of earlier versions, read back and replaced at the next save); GroupChunks the
	// chunks of all of its group's distinct values stored together, and GroupWhole the
	// group's number of values when they were last stored whole. exec's state codec keeps
	// them (the same on each set of a group); the set itself never reads them.
	Chunks, GroupChunks, GroupWhole int32
}

func intKind(k Kind) bool {
	return k == KindInt || k == KindBigInt || k == KindTimestamp || k == KindInterval
}

// Add inserts v (NULL is ignored) and reports whether it was new.
func (d *DistinctSet) Add(v Value) bool {
	if v.K == KindNull {
		return false
	}
	if intKind(v.K) && (d.kind == KindNull || d.kind == v.K) {
		d.kind = v.K
		if !d.ints.add(v.I) {
			return false
		}
		d.freshInts = append(d.freshInts, v.I)
		return true
	}
	var buf [64]byte
	enc := AppendValue(buf[:0], v)
	if _, ok := d.strs[string(enc)]; ok {
		return false
	}
	if d.strs == nil {
		d.strs = map[string]struct{}{}
	}
	d.strs[string(enc)] = struct{}{}
	d.appendFresh(v)
	return true
}

func (d *DistinctSet) appendFresh(v Value) {
	var buf [64]byte
	enc := AppendValue(buf[:0], v)
	d.fresh = binary.AppendUvarint(d.fresh, uint64(len(enc)))
	d.fresh = append(d.fresh, enc...)
}

// AddSet inserts every value of src (those new to d are fresh).
func (d *DistinctSet) AddSet(src *DistinctSet) {
	src.Range(func(enc []byte) {
		if v, _, err := DecodeValue(enc); err == nil {
			d.Add(v)
		}
	})
}

// AddEncoded inserts a value given in AppendValue form (as Range and Fresh hand them out),
// without marking it fresh: it is what a restore from stored state uses.
func (d *DistinctSet) AddEncoded(enc []byte) error {
	v, n, err := DecodeValue(enc)
	if err != nil {
		return err
	}
	if n != len(enc) {
		return fmt.Errorf("%w: %d bytes after a distinct value", ErrCorrupt, len(enc)-n)
	}
	if intKind(v.K) && (d.kind == KindNull || d.kind == v.K) {
		d.kind = v.K
		d.ints.add(v.I)
		return nil
	}
	if v.K == KindNull {
		return nil
	}
	if d.strs == nil {
		d.strs = map[string]struct{}{}
	}
	d.strs[string(enc)] = struct{}{}
	return nil
}

// Remove takes v out of the set (the last copy of a value an updating input retracted) and
// reports whether it was there. The values added since ClearFresh are not changed.
func (d *DistinctSet) Remove(v Value) bool {
	if d == nil || v.K == KindNull {
		return false
	}
	if intKind(v.K) && d.kind == v.K {
		return d.ints.remove(v.I)
	}
	var buf [64]byte
	enc := AppendValue(buf[:0], v)
	if _, ok := d.strs[string(enc)]; ok {
		delete(d.strs, string(enc))
		return true
	}
	return false
}

// Len is the number of distinct values (of a family's set: the sum of its members').
func (d *DistinctSet) Len() int {
	if d == nil {
		return 0
	}
	if f := d.fam; f != nil {
		n := 0
		for _, c := range f.counts {
			n += int(c)
		}
		return n
	}
	return d.ints.len() + len(d.strs)
}

// Range calls fn with the AppendValue form of every value (valid during the call only), in
// no particular order.
func (d *DistinctSet) Range(fn func(enc []byte)) {
	if d == nil {
		return
	}
	var buf [16]byte
	d.ints.each(func(i int64) {
		fn(AppendValue(buf[:0], Value{K: d.kind, I: i}))
	})
	for s := range d.strs {
		fn([]byte(s))
	}
}

// FreshChunk returns the values added since the last ClearFresh as a chunk: each value's
// AppendValue form after its uvarint length (AddChunk reads it back).
func (d *DistinctSet) FreshChunk() []byte { return d.AppendFreshChunk(nil) }

// AppendFreshChunk appends FreshChunk's chunk to dst.
func (d *DistinctSet) AppendFreshChunk(dst []byte) []byte {
	if d == nil {
		return dst
	}
	dst = append(dst, d.fresh...)
	for _, i := range d.freshInts {
		dst = appendIntChunkValue(dst, d.kind, i)
	}
	return dst
}

// appendIntChunkValue appends integer i of kind k as a chunk value: its AppendValue form
// after its uvarint length, which is one byte (an integer's form is under 128 bytes).
func appendIntChunkValue(dst []byte, k Kind, i int64) []byte {
	at := len(dst)
	dst = AppendValue(append(dst, 0), Value{K: k, I: i})
	dst[at] = byte(len(dst) - at - 1)
	return dst
}

// AppendChunk appends every value of the set to dst as one chunk (as FreshChunk).
func (d *DistinctSet) AppendChunk(dst []byte) []byte {
	if d == nil {
		return dst
	}
	dst = d.ints.appendChunk(dst, d.kind)
	for s := range d.strs {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

// AddChunk inserts the values of a chunk (FreshChunk, AppendChunk) without marking them
// fresh: it is what a restore from stored state uses. It fails on a malformed chunk.
func (d *DistinctSet) AddChunk(b []byte) error { return eachChunkValue(b, d.AddEncoded) }

// eachChunkValue calls fn with each value of a chunk (per value its uvarint length and its
// AppendValue form). It fails on a malformed length and with fn's error, saying where.
func eachChunkValue(b []byte, fn func(enc []byte) error) error {
	for p := 0; p < len(b); {
		n, k := binary.Uvarint(b[p:])
		if k <= 0 || n == 0 || n > uint64(len(b)-p-k) {
			return fmt.Errorf("%w: bad distinct value length at byte %d", ErrCorrupt, p)
		}
		p += k
		if err := fn(b[p : p+int(n)]); err != nil {
			return fmt.Errorf("distinct value at byte %d: %w", p, err)
		}
		p += int(n)
	}
	return nil
}

// HasFresh reports whether values were added since the last ClearFresh.
func (d *DistinctSet) HasFresh() bool {
	if d != nil && d.fam != nil {
		return len(d.fam.fresh) > 0 || len(d.fam.freshInts) > 0
	}
	return d != nil && (len(d.fresh) > 0 || len(d.freshInts) > 0)
}

// ClearFresh forgets which values were added (they have been saved). A large buffer is
// dropped rather than kept, so a set that grew fast once does not hold its peak for ever.
func (d *DistinctSet) ClearFresh() {
	if d == nil {
		return
	}
	if f := d.fam; f != nil {
		f.fresh = dropOrTruncate(f.fresh, 4096)
		f.freshInts = dropOrTruncate(f.freshInts, 512)
		f.freshMarks = dropOrTruncate(f.freshMarks, 512)
		return
	}
	d.fresh = dropOrTruncate(d.fresh, 4096)
	d.freshInts = dropOrTruncate(d.freshInts, 512)
}

// dropOrTruncate empties s, keeping its array unless it holds more than most elements.
func dropOrTruncate[T any](s []T, most int) []T {
	if cap(s) > most {
		return nil
	}
	return s[:0]
}

// MarkAllFresh makes every value fresh again (its stored copy is gone: it must be written
// anew, e.g. under a session window's new bounds).
func (d *DistinctSet) MarkAllFresh() {
	if d == nil {
		return
	}
	d.fresh = d.AppendChunk(d.fresh[:0])
	d.freshInts = d.freshInts[:0]
}
