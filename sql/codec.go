package sql

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Binary encoding of Values and Rows, used for operator state and state-store keys.
//
// A Value is one kind byte followed by its payload:
//
//	NULL                         (nothing)
//	BOOLEAN                      1 byte, 0 or 1
//	INT, BIGINT, TIMESTAMP,      zig-zag varint
//	INTERVAL
//	DECIMAL                      scale byte (≤ 18), zig-zag varint; or for a value
//	                             beyond 64 bits (numeric.go) 0xFF, uvarint length, text
//	DOUBLE                       8 bytes, IEEE 754 bits, little-endian
//	VARCHAR, JSON                uvarint length, bytes
//
// A Row is a uvarint count followed by that many Values. The encoding is deterministic: equal
// Values (same kind, same payload) encode to equal bytes, so an encoded row can be a map or
// store key.

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("corrupt encoded value")

// maxEncodedRow bounds the column count a decoder accepts, so corrupt input cannot make it
// allocate without limit.
const maxEncodedRow = 1 << 16

// AppendValue appends the encoding of v to dst.
func AppendValue(dst []byte, v Value) []byte {
	dst = append(dst, byte(v.K))
	switch v.K {
	case KindBool:
		if v.I != 0 {
			return append(dst, 1)
		}
		return append(dst, 0)
	case KindInt, KindBigInt, KindTimestamp, KindInterval:
		return binary.AppendVarint(dst, v.I)
	case KindDecimal:
		if v.S != "" {
			dst = append(dst, 0xFF)
			dst = binary.AppendUvarint(dst, uint64(len(v.S)))
			return append(dst, v.S...)
		}
		dst = append(dst, v.Scale)
		return binary.AppendVarint(dst, v.I)
	case KindDouble:
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.F()))
	case KindVarchar, KindJSON:
		dst = binary.AppendUvarint(dst, uint64(len(v.S)))
		return append(dst, v.S...)
	}
	return dst
}

// DecodeValue decodes one Value from the front of b and returns it with the number of bytes
// it used. Errors wrap ErrCorrupt and say at which byte decoding failed.
func DecodeValue(b []byte) (Value, int, error) { return decodeValue(b, true) }

// decodeValue is DecodeValue; without text, a VARCHAR's or JSON's bytes are checked and
// skipped, not copied (its S is empty).
func decodeValue(b []byte, text bool) (Value, int, error) {
	if len(b) == 0 {
		return Null, 0, fmt.Errorf("%w: empty input at byte 0", ErrCorrupt)
	}
	k := Kind(b[0])
	p := 1
	switch k {
	case KindNull:
		return Null, p, nil
	case KindBool:
		if len(b) < 2 || b[1] > 1 {
			return Null, 0, fmt.Errorf("%w: bad BOOLEAN at byte 1", ErrCorrupt)
		}
		return Value{K: KindBool, I: int64(b[1])}, 2, nil
	case KindInt, KindBigInt, KindTimestamp, KindInterval:
		i, n := binary.Varint(b[p:])
		if n <= 0 || !minimal(b[p:], n) {
			return Null, 0, fmt.Errorf("%w: bad %s varint at byte %d", ErrCorrupt, k, p)
		}
		return Value{K: k, I: i}, p + n, nil
	case KindDecimal:
		if len(b) < 2 {
			return Null, 0, fmt.Errorf("%w: DECIMAL without scale at byte 1", ErrCorrupt)
		}
		s := b[1]
		if s == 0xFF {
			l, n := binary.Uvarint(b[2:])
			if n <= 0 || !minimal(b[2:], n) || l > uint64(len(b)-2-n) {
				return Null, 0, fmt.Errorf("%w: bad DECIMAL text length at byte 2", ErrCorrupt)
			}
			text := string(b[2+n : 2+n+int(l)])
			v, ok := NumericFromString(text)
			if !ok || v.S != text {
				return Null, 0, fmt.Errorf("%w: bad DECIMAL text %q at byte %d", ErrCorrupt, text, 2+n)
			}
			return v, 2 + n + int(l), nil
		}
		if s > maxSmallScale {
			return Null, 0, fmt.Errorf("%w: DECIMAL scale %d at byte 1", ErrCorrupt, s)
		}
		i, n := binary.Varint(b[2:])
		if n <= 0 || !minimal(b[2:], n) {
			return Null, 0, fmt.Errorf("%w: bad DECIMAL varint at byte 2", ErrCorrupt)
		}
		return Value{K: KindDecimal, Scale: s, I: i}, 2 + n, nil
	case KindDouble:
		if len(b) < 9 {
			return Null, 0, fmt.Errorf("%w: short DOUBLE at byte 1", ErrCorrupt)
		}
		return Value{K: KindDouble, I: int64(binary.LittleEndian.Uint64(b[1:9]))}, 9, nil
	case KindVarchar, KindJSON:
		l, n := binary.Uvarint(b[p:])
		if n <= 0 || !minimal(b[p:], n) {
			return Null, 0, fmt.Errorf("%w: bad %s length at byte %d", ErrCorrupt, k, p)
		}
		p += n
		if l > uint64(len(b)-p) {
			return Null, 0, fmt.Errorf("%w: %s of %d bytes overruns input at byte %d", ErrCorrupt, k, l, p)
		}
		if !text {
			return Value{K: k}, p + int(l), nil
		}
		return Value{K: k, S: string(b[p : p+int(l)])}, p + int(l), nil
	}
	return Null, 0, fmt.Errorf("%w: unknown kind %d at byte 0", ErrCorrupt, b[0])
}

// minimal reports whether the n-byte varint at the front of b is the shortest encoding of its
// value, as the encoders write it: a longer one (a last byte of 0 after a continuation) would
// decode to an equal Value whose encoding differs, so a decoded key would not find itself.
func minimal(b []byte, n int) bool {
	return n == 1 || b[n-1] != 0
}

// AppendRow appends the encoding of r to dst.
func AppendRow(dst []byte, r Row) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(r)))
	for _, v := range r {
		dst = AppendValue(dst, v)
	}
	return dst
}

// DecodeRowColumn decodes of the Row at the front of b only its value at column col (Null
// when col is negative or past the row's end), and returns it with the row's width and the
// number of bytes the row used. It checks the whole row as DecodeRow does, without copying
// the text of the other columns: a reader that needs one column of many stored rows (a
// join's sweep of expired rows) allocates nothing.
func DecodeRowColumn(b []byte, col int) (v Value, width, n int, err error) {
	cnt, p := binary.Uvarint(b)
	if p <= 0 || !minimal(b, p) {
		return Null, 0, 0, fmt.Errorf("%w: bad row length at byte 0", ErrCorrupt)
	}
	if cnt > maxEncodedRow || cnt > uint64(len(b)-p) {
		return Null, 0, 0, fmt.Errorf("%w: row of %d values cannot fit in %d bytes", ErrCorrupt, cnt, len(b))
	}
	v = Null
	for i := 0; i < int(cnt); i++ {
		x, m, err := decodeValue(b[p:], i == col)
		if err != nil {
			return Null, 0, 0, fmt.Errorf("value %d at byte %d: %w", i, p, err)
		}
		if i == col {
			v = x
		}
		p += m
	}
	return v, int(cnt), p, nil
}

// DecodeRow decodes one Row from the front of b into row (reusing its storage) and returns it
// with the number of bytes used.
func DecodeRow(b []byte, row Row) (Row, int, error) {
	cnt, n := binary.Uvarint(b)
	if n <= 0 || !minimal(b, n) {
		return row[:0], 0, fmt.Errorf("%w: bad row length at byte 0", ErrCorrupt)
	}
	if cnt > maxEncodedRow || cnt > uint64(len(b)-n) {
		return row[:0], 0, fmt.Errorf("%w: row of %d values cannot fit in %d bytes", ErrCorrupt, cnt, len(b))
	}
	row = row[:0]
	p := n
	for i := uint64(0); i < cnt; i++ {
		v, m, err := DecodeValue(b[p:])
		if err != nil {
			return row[:0], 0, fmt.Errorf("value %d at byte %d: %w", i, p, err)
		}
		row = append(row, v)
		p += m
	}
	return row, p, nil
}
