package sql

import (
	"math"
	"testing"
)

// newAgg builds the aggregator of a built-in call over one argument of type t.
func newAgg(t *testing.T, name string, arg Type, distinct bool) (Aggregator, AggCall) {
	t.Helper()
	d, ok := LookupAgg(name)
	if !ok {
		t.Fatalf("no aggregate %s", name)
	}
	c, err := BindAggCall(d, []Expr{&ColumnRef{Name: "x", T: arg}}, distinct, false)
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func TestSumOfBigIntsNeverWraps(t *testing.T) {
	sumF, _ := newAgg(t, "SUM", TypeBigInt, false)
	avgF, _ := newAgg(t, "AVG", TypeBigInt, false)
	var s, a AggState
	for i := 0; i < 4; i++ {
		for _, f := range []struct {
			agg Aggregator
			st  *AggState
		}{{sumF, &s}, {avgF, &a}} {
			if err := f.agg.Add(f.st, []Value{BigInt(math.MaxInt64)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// SUM of BIGINT is NUMERIC, as in PostgreSQL: exact past 2⁶³.
	if got := sumF.Result(&s); got.K != KindDecimal || NumericText(got) != "36893488147419103228" {
		t.Fatalf("SUM of 4 × MaxInt64 = %v, want 36893488147419103228", got)
	}
	if got := avgF.Result(&a); got.K != KindDouble || got.F() != float64(math.MaxInt64) {
		t.Fatalf("AVG of 4 × MaxInt64 = %v, want %v", got, float64(math.MaxInt64))
	}
	// Back in range: the sum is exact again.
	r := sumF.(Retracter)
	for i := 0; i < 3; i++ {
		if err := r.Retract(&s, []Value{BigInt(math.MaxInt64)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := sumF.Result(&s); NumericText(got) != "9223372036854775807" {
		t.Fatalf("SUM after retracting 3 = %v, want MaxInt64", got)
	}
	// Negative overflow, and merging two sums carries too.
	var n1, n2 AggState
	sumF.Add(&n1, []Value{BigInt(math.MinInt64)})
	sumF.Add(&n2, []Value{BigInt(-1)})
	sumF.Merge(&n1, &n2)
	if got := sumF.Result(&n1); NumericText(got) != "-9223372036854775809" {
		t.Fatalf("SUM(MinInt64, -1) = %v, want -9223372036854775809", got)
	}
	sumF.Add(&n1, []Value{BigInt(1)})
	if got := sumF.Result(&n1); NumericText(got) != "-9223372036854775808" {
		t.Fatalf("SUM(MinInt64, -1, 1) = %v", got)
	}
	// SUM of INT stays BIGINT (PostgreSQL's int4 sum) and raises 22003 past its range.
	intF, _ := newAgg(t, "SUM", TypeInt, false)
	var is AggState
	intF.Add(&is, []Value{Int(math.MaxInt32)})
	if got := intF.Result(&is); got.K != KindBigInt || got.I != math.MaxInt32 {
		t.Fatalf("SUM of an INT = %v, want BIGINT %d", got, math.MaxInt32)
	}
}

func TestRetractUndoesAdd(t *testing.T) {
	cases := []struct {
		name string
		arg  Type
		vals []Value
	}{
		{"COUNT", TypeBigInt, []Value{BigInt(1), Null, BigInt(3)}},
		{"SUM", TypeBigInt, []Value{BigInt(5), Null, BigInt(-7)}},
		{"SUM", TypeDouble, []Value{Double(0.5), Double(2)}},
		{"SUM", TypeNumeric, []Value{Decimal(15, 1), Decimal(25, 1)}},
		{"AVG", TypeBigInt, []Value{BigInt(2), BigInt(4), BigInt(9)}},
	}
	for _, c := range cases {
		f, _ := newAgg(t, c.name, c.arg, false)
		r, ok := f.(Retracter)
		if !ok {
			t.Fatalf("%s(%s) does not retract", c.name, c.arg)
		}
		var s AggState
		f.Add(&s, c.vals[:1])
		want := f.Result(&s)
		for _, v := range c.vals[1:] {
			f.Add(&s, []Value{v})
		}
		for _, v := range c.vals[1:] {
			if err := r.Retract(&s, []Value{v}); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.Result(&s); Compare(got, want) != 0 || got.K != want.K {
			t.Errorf("%s(%s): after add and retract %v, want %v", c.name, c.arg, got, want)
		}
		r.Retract(&s, c.vals[:1])
		if got := f.Result(&s); c.name != "COUNT" && !got.IsNull() {
			t.Errorf("%s(%s) of nothing = %v, want NULL", c.name, c.arg, got)
		}
	}
	var s AggState
	f := countStar{}
	f.Add(&s, nil)
	f.Retract(&s, nil)
	if got := f.Result(&s); got.I != 0 {
		t.Errorf("COUNT(*) after add and retract = %v", got)
	}
	for _, name := range []string{"MIN", "MAX"} {
		g, _ := newAgg(t, name, TypeBigInt, false)
		if _, ok := g.(ValueSetAggregator); !ok {
			t.Errorf("%s is not a value-set aggregator", name)
		}
	}
	if g, _ := newAgg(t, "COUNT", TypeBigInt, true); g.(ValueSetAggregator) == nil {
		t.Error("COUNT(DISTINCT) is not a value-set aggregator")
	}
}

// Forget takes a value out of a COUNT(DISTINCT)'s set, and of a MIN only when it is not
// the minimum (which needs the values left).
func TestForgetValue(t *testing.T) {
	cd, _ := newAgg(t, "COUNT", TypeVarchar, true)
	var s AggState
	for _, v := range []string{"a", "b"} {
		cd.Add(&s, []Value{Varchar(v)})
	}
	if !cd.(ValueSetAggregator).Forget(&s, Varchar("a")) || cd.Result(&s).I != 1 {
		t.Fatalf("COUNT(DISTINCT) after forgetting a: %v", cd.Result(&s))
	}
	if cd.(ValueSetAggregator).Forget(&s, Varchar("zz")) {
		t.Fatal("forgot a value never added")
	}
	mn, _ := newAgg(t, "MIN", TypeBigInt, false)
	var m AggState
	mn.Add(&m, []Value{BigInt(3)})
	mn.Add(&m, []Value{BigInt(5)})
	f := mn.(ValueSetAggregator)
	if !f.Forget(&m, BigInt(5)) || mn.Result(&m).I != 3 {
		t.Fatalf("MIN after forgetting 5: %v", mn.Result(&m))
	}
	if f.Forget(&m, BigInt(3)) {
		t.Fatal("MIN forgot its minimum without the values left")
	}
}
