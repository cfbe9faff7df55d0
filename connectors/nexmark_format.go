package connectors

// The nexmark message format: the body of a nexmark source's message names its event (the
// generator's parameters and the event number) instead of holding its values, and
// decoding computes the values, as the source would have. A runtime that reads message
// bodies thus gets the rows without any text written or parsed: the generation moves from
// the reader into the decoder, on the same goroutine.
//
// Body, 50 bytes, integers little-endian:
//
//	[0]      'N' (format version 1)
//	[1]      table: 1 person, 2 auction, 3 bid
//	[2:10]   seed
//	[10:18]  event rate (events per second of event time, > 0)
//	[18:26]  base time (epoch ms)
//	[26:34]  columns to compute, as bits of the stream's schema (the others are NULL)
//	[34:42]  event number (>= 0, of the table's type)
//	[42:50]  generation time (epoch ms), the value of a p_time column

import (
	"encoding/binary"
	"errors"
	"fmt"

	"rsql/sql"
)

const (
	nexmarkBodyMagic  = 'N'
	nexmarkHeaderSize = 34
	nexmarkBodySize   = 50
)

type nexmarkHeader [nexmarkHeaderSize]byte

func nexmarkBodyHeader(o NexmarkOptions, mask uint64) nexmarkHeader {
	var h nexmarkHeader
	h[0], h[1] = nexmarkBodyMagic, byte(o.Table)
	binary.LittleEndian.PutUint64(h[2:], o.Seed)
	binary.LittleEndian.PutUint64(h[10:], uint64(o.EventRate))
	binary.LittleEndian.PutUint64(h[18:], uint64(o.BaseTime))
	binary.LittleEndian.PutUint64(h[26:], mask)
	return h
}

func appendNexmarkBody(dst []byte, h *nexmarkHeader, n, procTime int64) []byte {
	dst = append(dst, h[:]...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(n))
	return binary.LittleEndian.AppendUint64(dst, uint64(procTime))
}

// nexmarkFormat decodes nexmark bodies into rows of a stream's schema. It keeps the row
// maker of the last header it saw (all bodies of a source share one).
type nexmarkFormat struct {
	schema sql.Schema
	hdr    nexmarkHeader
	maker  *nexmarkRowMaker
}

func newNexmarkFormat(schema sql.Schema) *nexmarkFormat { return &nexmarkFormat{schema: schema} }

// errNexmarkEncode: rows cannot be written in the nexmark format.
var errNexmarkEncode = errors.New("format nexmark: only a nexmark source's messages are in this format; rows cannot be written in it")

func (f *nexmarkFormat) Encode(dst []byte, row sql.Row) ([]byte, error) { return dst, errNexmarkEncode }

func (f *nexmarkFormat) Decode(body []byte, row sql.Row) (sql.Row, error) {
	if len(body) != nexmarkBodySize || body[0] != nexmarkBodyMagic {
		return row, &DecodeError{Reason: fmt.Sprintf("not a nexmark event: %d bytes (want %d starting with 'N')", len(body), nexmarkBodySize)}
	}
	if f.maker == nil || string(body[:nexmarkHeaderSize]) != string(f.hdr[:]) {
		if err := f.setHeader(body[:nexmarkHeaderSize]); err != nil {
			return row, err
		}
	}
	n := int64(binary.LittleEndian.Uint64(body[34:]))
	if n < 0 || NexmarkKindOf(n) != f.maker.table {
		return row, &DecodeError{Reason: fmt.Sprintf("nexmark event number %d is not a %s", n, f.maker.table)}
	}
	return f.maker.appendRow(row[:0], n, int64(binary.LittleEndian.Uint64(body[42:]))), nil
}

func (f *nexmarkFormat) setHeader(h []byte) error {
	table := NexmarkKind(h[1])
	if table < NexmarkPerson || table > NexmarkBid {
		return &DecodeError{Reason: fmt.Sprintf("nexmark table %d is not 1 (person), 2 (auction) or 3 (bid)", h[1])}
	}
	rate := int64(binary.LittleEndian.Uint64(h[10:]))
	if rate <= 0 {
		return &DecodeError{Reason: fmt.Sprintf("nexmark event rate %d is not positive", rate)}
	}
	mask := binary.LittleEndian.Uint64(h[26:])
	if len(f.schema) < 64 && mask>>len(f.schema) != 0 {
		return &DecodeError{Reason: fmt.Sprintf("nexmark column mask %#x names columns beyond the schema's %d", mask, len(f.schema))}
	}
	gen := NewNexmarkGenerator(binary.LittleEndian.Uint64(h[2:]), rate, int64(binary.LittleEndian.Uint64(h[18:])))
	m, err := newNexmarkRowMaker(gen, table, f.schema)
	if err != nil {
		return &DecodeError{Reason: err.Error()}
	}
	for i := range m.fields {
		if mask&(1<<i) == 0 {
			m.fields[i] = nfNone
		}
	}
	f.maker = &m
	copy(f.hdr[:], h)
	return nil
}
