package sql

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// MaxFamilyMembers is the most COUNT(DISTINCT) calls one family holds: a value's marks are a
// byte.
const MaxFamilyMembers = 8

// distinctFamily holds, for the COUNT(DISTINCT) calls of one group that count one argument
// under different filters (COUNT(DISTINCT x), COUNT(DISTINCT CASE WHEN p THEN x END), ...:
// the members), each value once with a byte of marks, bit m set when member m counted it,
// instead of a set per member that repeats the value (Nexmark q16's four sets per column
// held every value at least twice; docs/benchmarks.md, "q16: one set per column"). Member
// m's set is the values whose mark m is set.
//
// The integers of one kind are kept by size as a DistinctSet's are (intValues): in a map
// while few, then those in [0, 2^32) in a packed slice with a parallel slice of marks, and
// past bitmapAfter of them in a bitmap per member. Other values are kept by their AppendValue
// form. The values whose marks grew since ClearFresh are remembered with the marks they
// gained, so a checkpoint writes only what each member gained.
type distinctFamily struct {
	members int
	kind    Kind // kind of the integers (KindNull before the first)
	small   map[int64]uint8
	wide    bool // the integers in [0, 2^32) are in packed (with pmarks), or in bms
	packed  packedIDs
	pmarks  []uint8
	bms     []*roaring.Bitmap // per member, once big
	n       int               // values in packed
	strs    map[string]uint8
	counts  [MaxFamilyMembers]int32
	// freshInts and freshMarks: the integers whose marks grew since ClearFresh, and the
	// marks they gained; fresh: the other values' AppendValue forms, each after its uvarint
	// length and followed by the marks it gained.
	freshInts  []int64
	freshMarks []uint8
	fresh      []byte
}

// NewDistinctFamily returns an empty set of the distinct values of a family of members
// COUNT(DISTINCT) calls (1 to MaxFamilyMembers), read and written through the Member
// methods; Len counts a value once per member that counts it, HasFresh and ClearFresh
// cover every member. Add, Remove, AddSet, Range and the whole-set chunk methods are not
// for family sets.
func NewDistinctFamily(members int) *DistinctSet {
	if members < 1 || members > MaxFamilyMembers {
		panic(fmt.Sprintf("sql: a distinct family of %d members", members))
	}
	// One allocation: the family's fields next to the set's, read one after the other.
	both := &struct {
		d DistinctSet
		f distinctFamily
	}{}
	both.f.members = members
	both.d.fam = &both.f
	return &both.d
}

// Members is the number of members of a family set, 0 for a set of one call.
func (d *DistinctSet) Members() int {
	if d == nil || d.fam == nil {
		return 0
	}
	return d.fam.members
}

// AddMarked inserts v (NULL is ignored) into the sets of the members whose bits marks has.
func (d *DistinctSet) AddMarked(v Value, marks uint8) {
	f := d.fam
	marks &= 1<<f.members - 1
	if v.K == KindNull || marks == 0 {
		return
	}
	if gained := f.add(v, marks, true); gained != 0 {
		f.count(gained)
	}
}

// Touch reads the first words of the set's memory and returns a sum of them: a caller
// that touches many sets one after the other has their cache misses overlap, so the adds
// that follow find them in the cache.
func (d *DistinctSet) Touch() uint64 {
	f := d.fam
	if f == nil {
		return uint64(d.ints.n)
	}
	return uint64(f.members)
}

// TouchData is Touch for the values' memory, once Touch has read the set's own.
func (d *DistinctSet) TouchData() uint64 {
	f := d.fam
	if f == nil {
		return 0
	}
	var x uint64
	if len(f.packed) > 0 {
		x += uint64(f.packed[0])
	}
	if len(f.pmarks) > 0 {
		x += uint64(f.pmarks[0])
	}
	return x
}

// MemberLen is the number of distinct values member m counts.
func (d *DistinctSet) MemberLen(m int) int {
	if d == nil || d.fam == nil {
		return 0
	}
	return int(d.fam.counts[m])
}

func (f *distinctFamily) count(gained uint8) {
	for g := gained; g != 0; g &= g - 1 {
		f.counts[bits.TrailingZeros8(g)]++
	}
}

// add inserts v with marks and returns the marks it gained; fresh: remember them.
func (f *distinctFamily) add(v Value, marks uint8, fresh bool) uint8 {
	if !intKind(v.K) || f.kind != KindNull && f.kind != v.K {
		var buf [64]byte
		enc := AppendValue(buf[:0], v)
		old, ok := f.strs[string(enc)]
		gained := marks &^ old
		if gained == 0 {
			return 0
		}
		if !ok && f.strs == nil {
			f.strs = map[string]uint8{}
		}
		f.strs[string(enc)] = old | marks
		if fresh {
			f.fresh = binary.AppendUvarint(f.fresh, uint64(len(enc)))
			f.fresh = append(append(f.fresh, enc...), gained)
		}
		return gained
	}
	f.kind = v.K
	x := v.I
	var gained uint8
	switch {
	case f.wide && inBitmapRange(x) && f.bms != nil:
		for g := marks; g != 0; g &= g - 1 {
			m := bits.TrailingZeros8(g)
			if f.bms[m].CheckedAdd(uint32(x)) {
				gained |= 1 << m
			}
		}
	case f.wide && inBitmapRange(x):
		j, found := f.packed.insert(uint32(x))
		if found {
			gained = marks &^ f.pmarks[j]
			f.pmarks[j] |= marks
		} else {
			gained = marks
			f.pmarks = slices.Insert(f.pmarks, j, marks)
			f.n++
			if f.n > bitmapAfter {
				f.toBitmaps()
			}
		}
	default:
		old := f.small[x]
		gained = marks &^ old
		if gained == 0 {
			return 0
		}
		if f.small == nil {
			f.small = map[int64]uint8{}
		}
		f.small[x] = old | marks
		if !f.wide && len(f.small) > packedAfter {
			f.toPacked()
		}
	}
	if fresh && gained != 0 {
		f.freshInts = append(f.freshInts, x)
		f.freshMarks = append(f.freshMarks, gained)
	}
	return gained
}

// toPacked moves the integers in [0, 2^32) from the map to the packed slice.
func (f *distinctFamily) toPacked() {
	f.wide = true
	var rest map[int64]uint8 // a new map: a Go map does not shrink as values leave it
	for x, m := range f.small {
		if inBitmapRange(x) {
			j, _ := f.packed.insert(uint32(x))
			f.pmarks = slices.Insert(f.pmarks, j, m)
			f.n++
		} else {
			if rest == nil {
				rest = map[int64]uint8{}
			}
			rest[x] = m
		}
	}
	f.small = rest
}

// toBitmaps moves the packed integers to a bitmap per member.
func (f *distinctFamily) toBitmaps() {
	f.bms = make([]*roaring.Bitmap, f.members)
	for m := range f.bms {
		f.bms[m] = roaring.New()
	}
	i := 0
	f.packed.each(func(x uint32) {
		for g := f.pmarks[i]; g != 0; g &= g - 1 {
			f.bms[bits.TrailingZeros8(g)].Add(x)
		}
		i++
	})
	f.packed, f.pmarks = nil, nil
}

// AppendMemberChunk appends every value of member m's set to dst as one chunk (per value
// its AppendValue form after its uvarint length: DistinctSet.AddChunk reads it back).
func (d *DistinctSet) AppendMemberChunk(dst []byte, m int) []byte {
	f := d.fam
	bit := uint8(1) << m
	for x, marks := range f.small {
		if marks&bit != 0 {
			dst = appendIntChunkValue(dst, f.kind, x)
		}
	}
	p := f.packed
	for i, r := 0, p.ranges(); i < r; i++ {
		hi := uint32(p[1+i]) << 16
		start, end := p.span(i, r)
		for k, lo := range p[1+2*r+start : 1+2*r+end] {
			if f.pmarks[start+k]&bit != 0 {
				dst = appendIntChunkValue(dst, f.kind, int64(hi|uint32(lo)))
			}
		}
	}
	if f.bms != nil {
		var buf [256]uint32
		for it := f.bms[m].ManyIterator(); ; {
			n := it.NextMany(buf[:])
			if n == 0 {
				break
			}
			for _, x := range buf[:n] {
				dst = appendIntChunkValue(dst, f.kind, int64(x))
			}
		}
	}
	for s, marks := range f.strs {
		if marks&bit != 0 {
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		}
	}
	return dst
}

// AppendMemberFreshChunk appends the values member m gained since ClearFresh as a chunk.
func (d *DistinctSet) AppendMemberFreshChunk(dst []byte, m int) []byte {
	f := d.fam
	bit := uint8(1) << m
	for i, x := range f.freshInts {
		if f.freshMarks[i]&bit != 0 {
			dst = appendIntChunkValue(dst, f.kind, x)
		}
	}
	for p := 0; p < len(f.fresh); {
		n, k := binary.Uvarint(f.fresh[p:])
		enc := f.fresh[p+k : p+k+int(n)]
		p += k + int(n) + 1
		if f.fresh[p-1]&bit != 0 {
			dst = binary.AppendUvarint(dst, n)
			dst = append(dst, enc...)
		}
	}
	return dst
}

// AddMemberChunk inserts the values of a chunk (AppendMemberChunk, or a DistinctSet's
// chunk) into member m's set, remembered as fresh when fresh is set (values a restore must
// write again) and not otherwise. It fails on a malformed chunk.
func (d *DistinctSet) AddMemberChunk(b []byte, m int, fresh bool) error {
	f := d.fam
	if m < 0 || m >= f.members {
		return fmt.Errorf("%w: member %d of a distinct family of %d", ErrCorrupt, m, f.members)
	}
	return eachChunkValue(b, func(enc []byte) error {
		v, n, err := DecodeValue(enc)
		if err == nil && n != len(enc) {
			err = fmt.Errorf("%w: %d bytes after a distinct value", ErrCorrupt, len(enc)-n)
		}
		if err != nil {
			return err
		}
		if v.K != KindNull {
			if gained := f.add(v, 1<<m, fresh); gained != 0 {
				f.count(gained)
			}
		}
		return nil
	})
}

// AddMemberSet inserts every value of src, a set of one call, into member m's set; those
// fresh in src are fresh in d (a restore's sets of earlier versions join their family).
func (d *DistinctSet) AddMemberSet(src *DistinctSet, m int) error {
	if src == nil {
		return nil
	}
	if err := d.AddMemberChunk(src.FreshChunk(), m, true); err != nil {
		return err
	}
	return d.AddMemberChunk(src.AppendChunk(nil), m, false)
}
