package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"rsql/sql"
	"rsql/state"
)

// Group state encoding (the value under a group's state key):
//
//	sql row of the key values, varint window start, varint window end,
//	then per aggregate: varint n, varint integer sum, 8-byte float sum (IEEE bits,
//	little-endian), sql value (min/max), uvarint distinct count, each distinct value as
//	uvarint length + its sql.AppendValue bytes.
//
// The key repeats what the state key holds so a split can be restored from values alone.
//
// The distinct values of a DISTINCT aggregate are not in the group's value (its distinct
// count is 0; values written by earlier versions with the values inline still decode):
// they are chunks under keys of their own, the group's state key followed by uvarint na
// (the number of aggregates, which no aggregate index reaches) and a 4-byte big-endian
// chunk number (groupChunkKey). A chunk holds the values added to the group's sets between
// two checkpoints, per set with any: uvarint aggregate index, uvarint length, then the
// set's chunk (sql.DistinctSet.FreshChunk: per value uvarint length and AppendValue
// bytes). A checkpoint thus writes one key per changed group, with only what is new. It
// rewrites all of the group's sets as chunk 0 and deletes the other chunks once the group
// has maxDistinctChunks chunks, or compactDistinctChunks and two to three times the
// values it had when last written whole (so a growing group's values are rewritten a
// bounded number of times on average, and one that barely grows is not rewritten every
// few checkpoints). A hash of the group's key lowers both thresholds by up to chunkJitter
// and picks the growth factor: the groups that change at every checkpoint, and grow alike,
// would otherwise all reach a threshold at the same checkpoint and rewrite themselves in
// one batch (Nexmark q16's ten thousand channels each change at every checkpoint). A group of at most tinyDistinctGroup
// values is always written whole: a chunk's key costs more than its values.
//
// Earlier versions stored each set's chunks under the group's key followed by uvarint
// aggregate index and 4-byte chunk number (distinctKey): they are read back, and the next
// save of the group rewrites its sets as chunk 0 and deletes them. A group's chunk keys
// sort right after its state key (they extend it), so a scan of a split meets a group
// before its chunks.

// The groups of a pane (a hop aggregation computed by panes, agg.go) are keyed pane first:
//
//	state.SplitPrefix, paneKeyMark, the pane's start (8 bytes, big-endian with the sign
//	bit flipped, as in state.AppendWindow; its end is start + the pane width), the sql row
//	of the key values
//
// so that one DropPrefix of panePrefix deletes a closed pane's groups and their distinct
// chunks, instead of a deletion per group. A pane group's value is its accumulators alone
// (its key holds the rest), each as a byte of flags saying which of N, I, F and V are not
// zero (paneN...) and those: varint N, varint I, F's 8 bytes (IEEE, little-endian), the sql
// value V (appendPaneAccs); a COUNT(*) takes 2–4 bytes. Other groups' keys follow state.Key
// (the key values' row, then the window), whose row starts with its length, a byte below
// paneKeyMark (panes are used only for fewer than paneKeyMark key columns), so the two
// layouts never share a prefix. Loading reads values and does not care which layout a key
// has.
const paneKeyMark = 0x80

// panePrefix appends the key prefix of every group of the pane starting at start of a
// split.
func panePrefix(dst []byte, job, op, split string, start int64) []byte {
	dst = state.SplitPrefix(dst, job, op, split)
	dst = append(dst, paneKeyMark)
	return binary.BigEndian.AppendUint64(dst, uint64(start)^(1<<63))
}

// The flags of an accumulator in a pane group's value.
const (
	paneN = 1 << iota
	paneI
	paneF
	paneV
)

// appendPaneAccs appends the value of a pane group (see paneKeyMark).
func appendPaneAccs(dst []byte, accs []accum) []byte {
	for i := range accs {
		a := &accs[i]
		var f byte
		if a.N != 0 {
			f |= paneN
		}
		if a.I != 0 {
			f |= paneI
		}
		if a.F != 0 || math.Signbit(a.F) {
			f |= paneF
		}
		if a.V.K != sql.KindNull || a.V.S != "" {
			f |= paneV
		}
		dst = append(dst, f)
		if f&paneN != 0 {
			dst = binary.AppendVarint(dst, a.N)
		}
		if f&paneI != 0 {
			dst = binary.AppendVarint(dst, a.I)
		}
		if f&paneF != 0 {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(a.F))
		}
		if f&paneV != 0 {
			dst = sql.AppendValue(dst, a.V)
		}
	}
	return dst
}

// decodePaneAccs decodes the value of a pane group of na aggregates.
func decodePaneAccs(b []byte, na int) ([]accum, error) {
	accs := make([]accum, na)
	p := 0
	for i := range accs {
		a := &accs[i]
		if p >= len(b) {
			return nil, fmt.Errorf("%w: pane group value of %d aggregates, want %d", errBadState, i, na)
		}
		f := b[p]
		if f&^(paneN|paneI|paneF|paneV) != 0 {
			return nil, fmt.Errorf("%w: unknown accumulator flags %#x at byte %d", errBadState, f, p)
		}
		p++
		for _, x := range []struct {
			flag byte
			dst  *int64
		}{{paneN, &a.N}, {paneI, &a.I}} {
			if f&x.flag == 0 {
				continue
			}
			v, n := binary.Varint(b[p:])
			if n <= 0 {
				return nil, fmt.Errorf("%w: bad varint at byte %d", errBadState, p)
			}
			*x.dst, p = v, p+n
		}
		if f&paneF != 0 {
			if len(b)-p < 8 {
				return nil, fmt.Errorf("%w: short float at byte %d", errBadState, p)
			}
			a.F, p = math.Float64frombits(binary.LittleEndian.Uint64(b[p:])), p+8
		}
		if f&paneV != 0 {
			v, n, err := sql.DecodeValue(b[p:])
			if err != nil {
				return nil, fmt.Errorf("%w: value at byte %d: %v", errBadState, p, err)
			}
			a.V, p = v, p+n
		}
	}
	if p != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes", errBadState, len(b)-p)
	}
	return accs, nil
}

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
	return appendAccs(dst, accs)
}

// appendAccs appends the aggregates' part of a group state value.
func appendAccs(dst []byte, accs []accum) []byte {
	for i := range accs {
		a := &accs[i]
		dst = binary.AppendVarint(dst, a.N)
		dst = binary.AppendVarint(dst, a.I)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(a.F))
		dst = sql.AppendValue(dst, a.V)
		dst = append(dst, 0) // distinct values: under keys of their own (distinctKey)
	}
	return dst
}

// maxDistinctChunks is how many chunks a group's distinct values may have before a
// checkpoint rewrites them as one (less the group's jitter): a group that changes at every
// checkpoint is written whole once every that many checkpoints instead of every time.
const maxDistinctChunks = 64

// compactDistinctChunks is how many chunks a group's distinct values need (less the
// group's jitter) before a checkpoint rewrites them as one because they have doubled since
// they were last written whole.
const compactDistinctChunks = 24

// chunkJitter bounds how much a group's hash lowers its thresholds.
const chunkJitter = 16

// tinyDistinctGroup is the number of distinct values up to which a group's are one chunk.
const tinyDistinctGroup = 8

// distinctKey appends to dst the state key of chunk c of the distinct values of aggregate
// j of the group whose state key is groupKey (the layout of earlier versions).
func distinctKey(dst, groupKey []byte, j, c int) []byte {
	dst = append(dst, groupKey...)
	dst = binary.AppendUvarint(dst, uint64(j))
	return binary.BigEndian.AppendUint32(dst, uint32(c))
}

// groupChunkKey appends to dst the state key of chunk c of the distinct values of the
// group of na aggregates whose state key is groupKey.
func groupChunkKey(dst, groupKey []byte, na, c int) []byte { return distinctKey(dst, groupKey, na, c) }

// parseDistinctKey splits the part of a distinct chunk's key after its group's state key
// into the aggregate index (na: a chunk of the group's sets together) and the chunk number.
func parseDistinctKey(rest []byte, na int) (j, c int, err error) {
	u, n := binary.Uvarint(rest)
	if n <= 0 || u > uint64(na) || len(rest)-n != 4 {
		return 0, 0, fmt.Errorf("%w: bad distinct chunk key (%d bytes after the group's key)", errBadState, len(rest))
	}
	return int(u), int(binary.BigEndian.Uint32(rest[n:])), nil
}

// addDistinctChunk adds the values of a stored distinct chunk to the sets of accs, the
// accumulators of the group whose state key the chunk's key extends by rest; the values of
// a family's member go to the family's set (fams, agg_family.go).
func addDistinctChunk(accs []accum, rest, value []byte, fams *distinctFamilies) error {
	na := len(accs)
	j, c, err := parseDistinctKey(rest, na)
	if err != nil {
		return err
	}
	if j < na { // one set's chunk (earlier versions)
		set, m := fams.setOf(accs, j)
		set.Chunks = max(set.Chunks, int32(c)+1)
		if err := addChunkTo(set, m, value); err != nil {
			return fmt.Errorf("%w: distinct chunk %d: %v", errBadState, c, err)
		}
		return nil
	}
	for p := 0; p < len(value); {
		j, k := binary.Uvarint(value[p:])
		if k <= 0 || j >= uint64(na) {
			return fmt.Errorf("%w: distinct chunk %d: bad aggregate index at byte %d", errBadState, c, p)
		}
		p += k
		n, k := binary.Uvarint(value[p:])
		if k <= 0 || n > uint64(len(value)-p-k) {
			return fmt.Errorf("%w: distinct chunk %d: bad length at byte %d", errBadState, c, p)
		}
		p += k
		set, m := fams.setOf(accs, int(j))
		set.GroupChunks = max(set.GroupChunks, int32(c)+1)
		if err := addChunkTo(set, m, value[p:p+int(n)]); err != nil {
			return fmt.Errorf("%w: distinct chunk %d, aggregate %d: %v", errBadState, c, j, err)
		}
		p += int(n)
	}
	return nil
}

// addChunkTo adds a stored chunk's values to set, or to member m's values of a family set.
func addChunkTo(set *sql.DistinctSet, m int, chunk []byte) error {
	if m >= 0 {
		return set.AddMemberChunk(chunk, m, false)
	}
	return set.AddChunk(chunk)
}

func distinctSetOf(a *accum) *sql.DistinctSet {
	if a.Set == nil {
		a.Set = &sql.DistinctSet{}
	}
	return a.Set
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
	if start, p, err = stateVarint(b, p, "window start"); err != nil {
		return nil, 0, 0, nil, err
	}
	if end, p, err = stateVarint(b, p, "window end"); err != nil {
		return nil, 0, 0, nil, err
	}
	if accs, p, err = decodeAccs(b, p, na); err != nil {
		return nil, 0, 0, nil, err
	}
	if p != len(b) {
		return nil, 0, 0, nil, fmt.Errorf("%w: %d trailing bytes", errBadState, len(b)-p)
	}
	return keys, start, end, accs, nil
}

// decodePaneGroup decodes the group of a pane of width paneW: rest is its state key after
// the split's prefix (paneKeyMark, the pane's start, the key values' row), value its
// accumulators.
func decodePaneGroup(rest, value []byte, paneW int64, nk, na int) (keys sql.Row, start, end int64, accs []accum, err error) {
	if len(rest) < 9 || rest[0] != paneKeyMark {
		return nil, 0, 0, nil, fmt.Errorf("%w: not a pane group's key", errBadState)
	}
	start = int64(binary.BigEndian.Uint64(rest[1:]) ^ (1 << 63))
	keys, n, err := sql.DecodeRow(rest[9:], nil)
	if err != nil {
		return nil, 0, 0, nil, fmt.Errorf("%w: pane group key: %v", errBadState, err)
	}
	if n != len(rest)-9 || len(keys) != nk {
		return nil, 0, 0, nil, fmt.Errorf("%w: pane group key of %d values and %d more bytes, want %d values", errBadState, len(keys), len(rest)-9-n, nk)
	}
	if accs, err = decodePaneAccs(value, na); err != nil {
		return nil, 0, 0, nil, err
	}
	return keys, start, start + paneW, accs, nil
}

// stateVarint reads the varint what at b[p:] and returns it and where it ends.
func stateVarint(b []byte, p int, what string) (int64, int, error) {
	v, n := binary.Varint(b[p:])
	if n <= 0 {
		return 0, p, fmt.Errorf("%w: bad %s at byte %d", errBadState, what, p)
	}
	return v, p + n, nil
}

// decodeAccs decodes na aggregates' states from b at p (appendAccs) and returns where they
// end.
func decodeAccs(b []byte, p, na int) (accs []accum, end int, err error) {
	accs = make([]accum, na)
	for i := 0; i < na && err == nil; i++ {
		a := &accs[i]
		if a.N, p, err = stateVarint(b, p, "count"); err != nil {
			break
		}
		if a.I, p, err = stateVarint(b, p, "sum"); err != nil {
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
			// Written by an earlier version: the values are fresh, so the next checkpoint
			// writes them under their own keys.
			a.Set = &sql.DistinctSet{}
		}
		for j := uint64(0); j < cnt; j++ {
			l, n := binary.Uvarint(b[p:])
			if n <= 0 || l > uint64(len(b)-p-n) {
				err = fmt.Errorf("%w: bad distinct value at byte %d", errBadState, p)
				break
			}
			p += n
			v, vn, verr := sql.DecodeValue(b[p : p+int(l)])
			if verr != nil || vn != int(l) {
				err = fmt.Errorf("%w: bad distinct value at byte %d", errBadState, p)
				break
			}
			a.Set.Add(v)
			p += int(l)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	return accs, p, nil
}
