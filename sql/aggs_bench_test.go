package sql

import "testing"

// The per-row cost of SUM over BIGINT (its overflow check).
func BenchmarkSumBigIntAdd(b *testing.B) {
	d, _ := LookupAgg("SUM")
	c, err := BindAggCall(d, []Expr{&ColumnRef{Name: "x", T: TypeBigInt}}, false, false)
	if err != nil {
		b.Fatal(err)
	}
	f, _ := d.New(c)
	var s AggState
	args := []Value{BigInt(0)}
	for i := 0; i < b.N; i++ {
		args[0].I = int64(i & 1023)
		f.Add(&s, args)
	}
	if s.N != int64(b.N) {
		b.Fatal(s.N)
	}
}
