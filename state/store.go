package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Store is a key-value store of operator state.
type Store interface {
	// Get returns a copy of the value stored under key; ok is false when there is none.
	Get(key []byte) (value []byte, ok bool, err error)
	// Put stores value under key.
	Put(key, value []byte) error
	// Delete removes key (no error when it is absent).
	Delete(key []byte) error
	// Scan calls fn for every key that starts with prefix, in ascending key order. key and
	// value are valid only during the call. An error from fn stops the scan and is returned.
	Scan(prefix []byte, fn func(key, value []byte) error) error
	// Write applies every operation of b atomically, in order.
	Write(b *Batch) error
	// Export returns a consistent copy of every entry under prefix, encoded as a blob that
	// Import accepts (on this store or another).
	Export(prefix []byte) ([]byte, error)
	// Import writes every entry of a blob made by Export, atomically.
	Import(blob []byte) error
	// DropPrefix deletes every key that starts with prefix.
	DropPrefix(prefix []byte) error
	Close() error
}

// Errors of the package.
var (
	ErrClosed        = errors.New("state: store is closed")
	ErrCorruptExport = errors.New("state: corrupt export blob")
)

// OpKind is the kind of one Batch operation.
type OpKind uint8

// Batch operations.
const (
	OpPut OpKind = iota
	OpDelete
	OpDropPrefix
)

// Batch is an ordered list of writes applied atomically by Store.Write. Keys and values are
// copied into the batch, so callers may reuse their buffers. A Batch is not safe for
// concurrent use; Reset makes it reusable without allocating.
//
// buf is laid out as a RocksDB write batch (a 12-byte header: sequence number and operation
// count, then per operation a tag byte, the varint-prefixed key and, for puts and range
// deletions, the varint-prefixed value or range end), so the RocksDB store hands it to the
// database in one call without re-encoding, and Each reads the operations back from it: a
// checkpoint of many small groups costs its encoding and nothing per operation besides.
type Batch struct {
	buf []byte
	n   int // operations recorded
	// open: a DropPrefix whose prefix has no finite end (all 0xff) was recorded, under the
	// tag wbTagOpenDrop that RocksDB does not know; stores must then apply the batch
	// operation by operation.
	open bool
	// parts are the batches linked after b's own operations (Link), written with them
	// without being copied into buf.
	parts []*Batch
}

// RocksDB write batch record tags (db/dbformat.h: kTypeDeletion, kTypeValue,
// kTypeRangeDeletion), the batch's own tag of an open-ended DropPrefix, and the header size.
const (
	wbTagDelete      = 0x0
	wbTagPut         = 0x1
	wbTagRangeDelete = 0xF
	wbTagOpenDrop    = 0x7F
	wbHeader         = 12
)

// record starts an operation: the header when the batch is empty, the tag and the key.
func (b *Batch) record(tag byte, key []byte) {
	if len(b.buf) == 0 {
		b.buf = append(b.buf, make([]byte, wbHeader)...)
	}
	b.buf = append(b.buf, tag)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(key)))
	b.buf = append(b.buf, key...)
	b.n++
}

// Put records a put of value under key.
func (b *Batch) Put(key, value []byte) {
	b.record(wbTagPut, key)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(value)))
	b.buf = append(b.buf, value...)
}

// PutValue records a put under key of a value of n bytes and returns the value's storage
// inside the batch (length n, capacity n) for the caller to fill in place; it is valid
// until the next operation on b. Large values (the checkpoint's outbox) are thus encoded
// once, straight into the batch.
func (b *Batch) PutValue(key []byte, n int) []byte {
	b.record(wbTagPut, key)
	b.buf = binary.AppendUvarint(b.buf, uint64(n))
	off := len(b.buf)
	b.buf = append(b.buf, make([]byte, n)...)
	return b.buf[off : off+n : off+n]
}

// Delete records a delete of key.
func (b *Batch) Delete(key []byte) { b.record(wbTagDelete, key) }

// DropPrefix records the deletion of every key starting with prefix.
func (b *Batch) DropPrefix(prefix []byte) {
	end := PrefixEnd(prefix)
	if end == nil {
		// No finite range: stores expand it when they apply the batch.
		b.open = true
		b.record(wbTagOpenDrop, prefix)
		return
	}
	b.record(wbTagRangeDelete, prefix)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(end)))
	b.buf = append(b.buf, end...)
}

// Len returns the number of operations recorded, its linked parts' included.
func (b *Batch) Len() int {
	n := b.n
	for _, p := range b.parts {
		n += p.Len()
	}
	return n
}

// Size returns the bytes the batch's keys and values take in its encoding, its linked
// parts' included.
func (b *Batch) Size() int {
	n := len(b.buf)
	for _, p := range b.parts {
		n += p.Size()
	}
	return n
}

// Reset empties the batch, keeping its storage; the parts it linked are let go (not
// reset: they belong to their callers).
func (b *Batch) Reset() {
	b.buf, b.n, b.open = b.buf[:0], 0, false
	clear(b.parts)
	b.parts = b.parts[:0]
}

// rocksRep returns the batch's own operations (not its linked parts') as a RocksDB write
// batch representation, or ok=false when they cannot be expressed as one (an open-ended
// DropPrefix) or there are none.
func (b *Batch) rocksRep() (rep []byte, ok bool) {
	if b.open || b.n == 0 || uint64(b.n) > 0xffffffff {
		return nil, false
	}
	clear(b.buf[:8])
	binary.LittleEndian.PutUint32(b.buf[8:wbHeader], uint32(b.n))
	return b.buf, true
}

// Each calls fn for each operation in order (value is nil except for OpPut; for
// OpDropPrefix key is the prefix). key and value are valid only during the call. A
// checkpoint store that commits a Batch elsewhere (e.g. in one Postgres transaction with the
// source offsets) replays it with Each.
func (b *Batch) Each(fn func(kind OpKind, key, value []byte) error) error {
	if err := b.eachOwn(fn); err != nil {
		return err
	}
	for _, p := range b.parts {
		if err := p.Each(fn); err != nil {
			return err
		}
	}
	return nil
}

// segments appends to dst the batches whose own operations make up b's, in order: b, then
// its parts' segments.
func (b *Batch) segments(dst []*Batch) []*Batch {
	dst = append(dst, b)
	for _, p := range b.parts {
		dst = p.segments(dst)
	}
	return dst
}

// eachOwn is Each over b's own operations.
func (b *Batch) eachOwn(fn func(kind OpKind, key, value []byte) error) error {
	for p := wbHeader; p < len(b.buf); {
		tag, k, second, next := readRecord(b.buf, p)
		p = next
		var kind OpKind
		var v []byte
		switch tag {
		case wbTagPut:
			kind, v = OpPut, second
		case wbTagDelete:
			kind = OpDelete
		case wbTagRangeDelete, wbTagOpenDrop:
			kind = OpDropPrefix
		}
		if err := fn(kind, k, v); err != nil {
			return err
		}
	}
	return nil
}

// readRecord reads the record at p of a batch's buf: its tag, its key, its second field
// (a put's value, a range deletion's end; nil otherwise) and the offset after it.
func readRecord(buf []byte, p int) (tag byte, key, second []byte, next int) {
	field := func() []byte {
		l, n := binary.Uvarint(buf[p:])
		p += n
		f := buf[p : p+int(l) : p+int(l)]
		p += int(l)
		return f
	}
	tag = buf[p]
	p++
	key = field()
	if tag == wbTagPut || tag == wbTagRangeDelete {
		second = field()
	}
	return tag, key, second, p
}

// Link adds every operation of o to b without copying them: a batch's operations are its
// own, in the order recorded (after the call too), then its linked parts', in the order
// linked. o must not change until b has been written or reset. A checkpoint links the
// parts its stages wrote instead of copying them into one (docs/architecture.md, "Stages
// and the operator contract").
func (b *Batch) Link(o *Batch) {
	if o == nil || o.Len() == 0 {
		return
	}
	b.parts = append(b.parts, o)
}

// PrefixEnd returns the smallest key greater than every key starting with prefix, or nil
// when there is none (prefix is all 0xff).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Export blob: magic "RSX1", then entries (uvarint key length, key, uvarint value length,
// value), then a CRC-32 (Castagnoli) of everything before it, little-endian.
var exportMagic = []byte("RSX1")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type exportWriter struct{ buf []byte }

func newExportWriter() *exportWriter { return &exportWriter{buf: append([]byte(nil), exportMagic...)} }

func (w *exportWriter) add(k, v []byte) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(k)))
	w.buf = append(w.buf, k...)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(v)))
	w.buf = append(w.buf, v...)
}

func (w *exportWriter) finish() []byte {
	return binary.LittleEndian.AppendUint32(w.buf, crc32.Checksum(w.buf, crcTable))
}

// DecodeExport checks an Export blob and calls fn for each entry in order. key and value
// alias blob. Errors wrap ErrCorruptExport and give the byte offset.
func DecodeExport(blob []byte, fn func(key, value []byte) error) error {
	if len(blob) < len(exportMagic)+4 || string(blob[:len(exportMagic)]) != string(exportMagic) {
		return fmt.Errorf("%w: missing header", ErrCorruptExport)
	}
	body := blob[:len(blob)-4]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(blob[len(blob)-4:]) {
		return fmt.Errorf("%w: checksum mismatch", ErrCorruptExport)
	}
	p := len(exportMagic)
	for p < len(body) {
		var kv [2][]byte
		for i := range kv {
			l, n := binary.Uvarint(body[p:])
			if n <= 0 || l > uint64(len(body)-p-n) {
				return fmt.Errorf("%w: bad length at byte %d", ErrCorruptExport, p)
			}
			p += n
			kv[i] = body[p : p+int(l) : p+int(l)]
			p += int(l)
		}
		if err := fn(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// importBatch decodes blob into a batch.
func importBatch(blob []byte) (*Batch, error) {
	b := &Batch{}
	err := DecodeExport(blob, func(k, v []byte) error { b.Put(k, v); return nil })
	return b, err
}
