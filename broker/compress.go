package broker

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Compressed bodies (docs/broker.md, "Compressed bodies"): RocketMQ producers send a body of
// at least CompressThreshold bytes zlib-compressed, with SysFlagCompressed set in the
// message's system flag. The broker stores such a body as it came and hands it out the same
// way over the protocol (clients decompress); the in-process reads (Pull, Peek, the key
// lookups, DecodeRecords) decompress it, bounded by MaxBodySize.

// CompressThreshold is the body size from which RocketMQ's clients compress (4 KiB); the
// engine's in-process writers follow it.
const CompressThreshold = 4 << 10

// MaxBodySize caps a decompressed body (64 MiB): a stored message is at most
// Config.MaxMessageSize compressed, and zlib expands at most about 1000 times, so without a
// cap a 4 MiB message could claim gigabytes.
const MaxBodySize = 64 << 20

// ErrBadBody says a body flagged as compressed does not decompress: not a zlib stream,
// truncated, a checksum mismatch, or larger than the cap.
var ErrBadBody = errors.New("broker: compressed body does not decompress")

// zlibReaders keeps decompressors: each holds about 40 KiB of window and tables.
var zlibReaders sync.Pool

// DecompressBody inflates a zlib body of at most limit bytes (MaxBodySize when limit <= 0).
// The result is a new slice; errors wrap ErrBadBody and say why.
func DecompressBody(b []byte, limit int) ([]byte, error) {
	if limit <= 0 {
		limit = MaxBodySize
	}
	src := bytes.NewReader(b)
	var zr io.ReadCloser
	if v := zlibReaders.Get(); v != nil {
		zr = v.(io.ReadCloser)
		if err := zr.(zlib.Resetter).Reset(src, nil); err != nil {
			zlibReaders.Put(zr)
			return nil, fmt.Errorf("%w: %v (%d bytes)", ErrBadBody, err, len(b))
		}
	} else {
		var err error
		if zr, err = zlib.NewReader(src); err != nil {
			return nil, fmt.Errorf("%w: %v (%d bytes)", ErrBadBody, err, len(b))
		}
	}
	defer zlibReaders.Put(zr)
	// Start at a guess of the inflated size (compressed JSON is about a quarter), within
	// the cap; the buffer grows as needed, never past limit+1 bytes.
	out := bytes.NewBuffer(make([]byte, 0, min(4*len(b)+64, limit+1)))
	n, err := io.Copy(out, io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v (after %d bytes out of %d in)", ErrBadBody, err, n, len(b))
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: it inflates beyond the limit of %d bytes", ErrBadBody, limit)
	}
	if src.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the end of the zlib stream", ErrBadBody, src.Len())
	}
	return out.Bytes(), nil
}

// zlibWriters keeps compressors (about 256 KiB each at the default level).
var zlibWriters sync.Pool

// CompressBody deflates b as RocketMQ's clients do (zlib, level 5) and appends it to dst.
func CompressBody(dst, b []byte) []byte {
	buf := bytes.NewBuffer(dst)
	var zw *zlib.Writer
	if v := zlibWriters.Get(); v != nil {
		zw = v.(*zlib.Writer)
		zw.Reset(buf)
	} else {
		zw, _ = zlib.NewWriterLevel(buf, 5) // a valid level: no error
	}
	zw.Write(b) // writes to a bytes.Buffer do not fail
	zw.Close()
	zlibWriters.Put(zw)
	return buf.Bytes()
}
