package state

import "encoding/binary"

// Operator state keys are
//
//	uvarint len(job) job  uvarint len(operator) operator  uvarint len(split) split  key  window
//
// so that (job), (job, operator) and (job, operator, split) are byte prefixes of every key
// under them and two different splits never share a prefix. key is the caller's encoding of
// the group key (it must be self-delimiting, e.g. sql.AppendRow); window is 16 bytes: start
// and end, big-endian with the sign bit flipped so keys sort by window start.

// SplitPrefix appends the prefix of every key of (job, operator, split) to dst.
func SplitPrefix(dst []byte, job, operator, split string) []byte {
	dst = OperatorPrefix(dst, job, operator)
	dst = binary.AppendUvarint(dst, uint64(len(split)))
	return append(dst, split...)
}

// OperatorPrefix appends the prefix of every key of (job, operator) to dst.
func OperatorPrefix(dst []byte, job, operator string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(job)))
	dst = append(dst, job...)
	dst = binary.AppendUvarint(dst, uint64(len(operator)))
	return append(dst, operator...)
}

// Key appends the full state key of one group of one window to dst.
func Key(dst []byte, job, operator, split string, key []byte, start, end int64) []byte {
	dst = SplitPrefix(dst, job, operator, split)
	dst = append(dst, key...)
	return AppendWindow(dst, start, end)
}

// AppendWindow appends the 16-byte order-preserving encoding of a window.
func AppendWindow(dst []byte, start, end int64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(start)^(1<<63))
	return binary.BigEndian.AppendUint64(dst, uint64(end)^(1<<63))
}
