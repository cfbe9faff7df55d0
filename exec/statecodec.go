package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"rsql/sql"
)

// Group state encoding (the value under a group's state key):
//
//	sql row of the key values, varint window start, varint window end,
//	then per aggregate: varint n, varint integer sum, 8-byte float sum (IEEE bits,
//	little-endian), sql value (min/max), uvarint distinct count, each distinct value as
//	uvarint length + its sql.AppendValue bytes.
//
// The key repeats what the state key holds so a split can be restored from values alone.

// errBadState is wrapped by group-state decoding errors.
var errBadState = errors.New("corrupt group state")

// StateError says which operator's state for which split could not be restored.
type StateError struct {
	Op, Split string
	Err       error
}

func (e *StateError) Error() string {
	return fmt.Sprintf("operator %s, split %s: restoring state: %v", e.Op, e.Split, e.Err)
}

func (e *StateError) Unwrap() error { return e.Err }

func appendGroupState(dst []byte, keys []sql.Value, start, end int64, accs []accum) []byte {
	dst = sql.AppendRow(dst, keys)
	dst = binary.AppendVarint(dst, start)
	dst = binary.AppendVarint(dst, end)
	for i := range accs {
		a := &accs[i]
		dst = binary.AppendVarint(dst, a.N)
		dst = binary.AppendVarint(dst, a.I)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(a.F))
		dst = sql.AppendValue(dst, a.V)
		dst = binary.AppendUvarint(dst, uint64(len(a.Set)))
		for k := range a.Set {
			dst = binary.AppendUvarint(dst, uint64(len(k)))
			dst = append(dst, k...)
		}
	}
	return dst
}

// decodeGroupState decodes a group state value of nk keys and na aggregates.
func decodeGroupState(b []byte, nk, na int) (keys sql.Row, start, end int64, accs []accum, err error) {
	keys, p, err := sql.DecodeRow(b, nil)
	if err != nil {
		return nil, 0, 0, nil, fmt.Errorf("%w: keys: %v", errBadState, err)
	}
	if len(keys) != nk {
		return nil, 0, 0, nil, fmt.Errorf("%w: %d key values, want %d", errBadState, len(keys), nk)
	}
	varint := func(what string) int64 {
		if err != nil {
			return 0
		}
		v, n := binary.Varint(b[p:])
		if n <= 0 {
			err = fmt.Errorf("%w: bad %s at byte %d", errBadState, what, p)
			return 0
		}
		p += n
		return v
	}
	start, end = varint("window start"), varint("window end")
	accs = make([]accum, na)
	for i := 0; i < na && err == nil; i++ {
		a := &accs[i]
		a.N, a.I = varint("count"), varint("sum")
		if err != nil {
			break
		}
		if len(b)-p < 8 {
			err = fmt.Errorf("%w: short float sum at byte %d", errBadState, p)
			break
		}
		a.F = math.Float64frombits(binary.LittleEndian.Uint64(b[p:]))
		p += 8
		v, n, verr := sql.DecodeValue(b[p:])
		if verr != nil {
			err = fmt.Errorf("%w: min/max at byte %d: %v", errBadState, p, verr)
			break
		}
		a.V = v
		p += n
		cnt, n := binary.Uvarint(b[p:])
		if n <= 0 || cnt > uint64(len(b)-p) {
			err = fmt.Errorf("%w: bad distinct count at byte %d", errBadState, p)
			break
		}
		p += n
		if cnt > 0 {
			a.Set = make(map[string]struct{}, cnt)
		}
		for j := uint64(0); j < cnt; j++ {
			l, n := binary.Uvarint(b[p:])
			if n <= 0 || l > uint64(len(b)-p-n) {
				err = fmt.Errorf("%w: bad distinct value at byte %d", errBadState, p)
				break
			}
			p += n
			a.Set[string(b[p:p+int(l)])] = struct{}{}
			p += int(l)
		}
	}
	if err == nil && p != len(b) {
		err = fmt.Errorf("%w: %d trailing bytes", errBadState, len(b)-p)
	}
	if err != nil {
		return nil, 0, 0, nil, err
	}
	return keys, start, end, accs, nil
}
