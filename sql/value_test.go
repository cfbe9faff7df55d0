package sql

import (
	"math"
	"reflect"
	"testing"
	"unsafe"
)

// A Value stays within what the compiler keeps in registers: at most four fields and 32
// bytes (docs/architecture.md, "Values"). A fifth field compiles, runs and passes every
// other test, and costs every expression a copy through memory.
func TestValueFitsInRegisters(t *testing.T) {
	typ := reflect.TypeOf(Value{})
	if n, size := typ.NumField(), unsafe.Sizeof(Value{}); n > 4 || size > 32 {
		t.Fatalf("sql.Value has %d fields in %d bytes: at most 4 in 32 keep it in registers", n, size)
	}
}

// A DOUBLE's float64 is held as its bits: every float comes back as it went in, the
// zeros' signs and NaN included, and a DOUBLE is a DOUBLE whatever its bits.
func TestDoubleBits(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1.5, -2.25, math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.Inf(1), math.Inf(-1), math.NaN(), 1e-300} {
		v := Double(f)
		if v.K != KindDouble || math.Float64bits(v.F()) != math.Float64bits(f) {
			t.Errorf("Double(%v): kind %v, F %v (bits %x, want %x)", f, v.K, v.F(), math.Float64bits(v.F()), math.Float64bits(f))
		}
		if !math.IsNaN(f) && v.AsFloat() != f {
			t.Errorf("Double(%v).AsFloat() = %v", f, v.AsFloat())
		}
		// The stored encoding is the float's as before: 8 bytes of its bits after the kind.
		enc := AppendValue(nil, v)
		back, n, err := DecodeValue(enc)
		if err != nil || n != len(enc) || math.Float64bits(back.F()) != math.Float64bits(f) || back.K != KindDouble {
			t.Errorf("Double(%v) through its encoding: %v (%d of %d bytes, %v)", f, back, n, len(enc), err)
		}
	}
	// -0 and +0 are one key and one value to SQL, though their bits differ.
	if !Equal(Double(0), Double(math.Copysign(0, -1))) || HashValue(HashSeed, Double(0)) != HashValue(HashSeed, Double(math.Copysign(0, -1))) {
		t.Error("-0 and 0 differ in Equal or HashValue")
	}
	if string(AppendKey(nil, Double(0))) != string(AppendKey(nil, Double(math.Copysign(0, -1)))) {
		t.Error("-0 and 0 have different keys")
	}
}

// fiveFields is sql.Value as it was, with a float64 of its own: the layout that
// BenchmarkValueThroughClosure compares with (docs/benchmarks.md, "Values in registers").
type fiveFields struct {
	K     Kind
	Scale uint8
	I     int64
	F     float64
	S     string
}

//go:noinline
func hashFive(h uint64, v fiveFields) uint64 {
	return HashValue(h, Value{K: v.K, Scale: v.Scale, I: v.I, S: v.S})
}

//go:noinline
func hashFour(h uint64, v Value) uint64 { return HashValue(h, v) }

// BenchmarkValueThroughClosure: a row's two values each returned by a closure, as a
// compiled expression returns them, and folded into a hash; a value of four fields stays in
// registers, one of five is copied through memory.
func BenchmarkValueThroughClosure(b *testing.B) {
	const rows = 1024
	four, five := make([][]Value, rows), make([][]fiveFields, rows)
	for i := range rows {
		four[i] = []Value{BigInt(int64(i)), Varchar("channel-12")}
		five[i] = []fiveFields{{K: KindBigInt, I: int64(i)}, {K: KindVarchar, S: "channel-12"}}
	}
	b.Run("four-fields", func(b *testing.B) { benchThroughClosure(b, four, hashFour) })
	b.Run("five-fields", func(b *testing.B) { benchThroughClosure(b, five, hashFive) })
}

func benchThroughClosure[T any](b *testing.B, data [][]T, hash func(uint64, T) uint64) {
	keys := []func([]T) T{func(r []T) T { return r[0] }, func(r []T) T { return r[1] }}
	var h uint64
	for b.Loop() {
		for _, r := range data {
			for _, k := range keys {
				h = hash(h, k(r))
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(data)*len(keys)), "ns/value")
}
