package sql

import (
	"strings"
	"testing"
)

// countedUpper replaces every UPPER call of e with a call of the same function that counts
// how often it runs.
func countedUpper(t *testing.T, e Expr, calls *int) Expr {
	t.Helper()
	def := &FuncDef{Name: "UPPER", Build: func(_ *Call, args []Evaluator) (Evaluator, error) {
		a := args[0]
		return func(r Row) Value {
			*calls++
			v := a(r)
			if v.K == KindNull {
				return v
			}
			return Varchar(strings.ToUpper(v.S))
		}, nil
	}}
	out, err := Transform(e, func(x Expr) (Expr, error) {
		if c, ok := x.(*Call); ok && c.Func == "UPPER" {
			n := *c
			n.Def = def
			return &n, nil
		}
		return x, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mustShare is CompileShared(es), failing t when it fails or shares nothing.
func mustShare(t *testing.T, es []Expr) ([]Evaluator, *Memo) {
	t.Helper()
	fs, memo, err := CompileShared(es)
	if err != nil {
		t.Fatal(err)
	}
	if memo == nil {
		t.Fatal("nothing shared")
	}
	return fs, memo
}

// sharedRows are rows of orders with user_id and qty varied (NULL among them).
func sharedRows() []Row {
	var rows []Row
	for _, u := range []Value{Varchar("u7"), Varchar("ua"), Null, Varchar("")} {
		for _, q := range []Value{Int(0), Int(3), Int(-4), Int(50), Null} {
			r := append(Row(nil), evalRow...)
			r[1], r[5] = u, q
			rows = append(rows, r)
		}
	}
	return rows
}

// Expressions compiled together give the values each gives compiled alone, and compute a
// subexpression they share once per row, only when a row reaches it.
func TestCompileSharedComputesOnce(t *testing.T) {
	texts := []string{
		`UPPER(user_id) LIKE 'U%' OR qty > 2`,
		`CASE WHEN qty = 3 THEN UPPER(user_id) ELSE 'x' END`,
		`UPPER(user_id) || '!'`,
	}
	var sharedCalls, aloneCalls int
	shared := make([]Expr, len(texts))
	alone := make([]Evaluator, len(texts))
	for i, s := range texts {
		shared[i] = countedUpper(t, bindExpr(t, s), &sharedCalls)
		alone[i] = MustCompile(countedUpper(t, bindExpr(t, s), &aloneCalls))
	}
	fs, memo := mustShare(t, shared)
	rows := sharedRows()
	memo.Begin(len(rows))
	for i, r := range rows {
		memo.Row(i)
		for k, f := range fs {
			if got, want := f(r), alone[k](r); Text(got) != Text(want) || got.K != want.K {
				t.Errorf("row %d, %s: %s shared, %s alone", i, texts[k], show(got), show(want))
			}
		}
	}
	if sharedCalls != len(rows) || aloneCalls <= sharedCalls {
		t.Errorf("UPPER ran %d times over %d rows shared, %d alone", sharedCalls, len(rows), aloneCalls)
	}
	if memoValues(memo) != len(rows) {
		t.Errorf("the memo holds %d values for %d rows", memoValues(memo), len(rows))
	}

	// Only the second expression, whose UPPER runs for qty = 3 alone: a row that does not
	// reach it computes nothing.
	sharedCalls = 0
	memo.Begin(len(rows))
	reached := 0
	for i, r := range rows {
		memo.Row(i)
		fs[1](r)
		if q := r[5]; q.K != KindNull && q.I == 3 {
			reached++
		}
	}
	if sharedCalls != reached {
		t.Errorf("UPPER ran %d times, for %d rows that reach it", sharedCalls, reached)
	}
	// A new batch forgets the last one's values.
	memo.Begin(1)
	memo.Row(0)
	sharedCalls = 0
	fs[2](rows[0])
	if sharedCalls != 1 {
		t.Errorf("a new batch ran UPPER %d times", sharedCalls)
	}
}

// A shared subexpression that fails fails the rows it failed alone, and only where a row
// reaches it: division by zero under a CASE branch that qty = 0 does not take.
func TestCompileSharedErrors(t *testing.T) {
	texts := []string{
		`qty = 0 OR ABS(100 / qty) > 10`,
		`CASE WHEN qty = 0 THEN -1 ELSE ABS(100 / qty) END`,
		`ABS(100 / qty) + 1`,
	}
	es := make([]Expr, len(texts))
	for i, s := range texts {
		es[i] = bindExpr(t, s)
	}
	fs, memo := mustShare(t, es)
	rows := sharedRows()
	memo.Begin(len(rows))
	failed := 0
	for i, r := range rows {
		memo.Row(i)
		for k, f := range fs {
			got, want := f(r), MustCompile(es[k])(r)
			if got.IsError() {
				failed++
			}
			if got.IsError() != want.IsError() || Text(got) != Text(want) {
				t.Errorf("row %d, %s: %s shared, %s alone", i, texts[k], show(got), show(want))
			}
		}
	}
	if failed == 0 {
		t.Error("no row failed: the test divides by zero nowhere")
	}
}

// What is not shared: expressions over columns of one name in two places, volatile calls,
// and work cheaper than a lookup (arithmetic over columns).
func TestCompileSharedLeaves(t *testing.T) {
	a := &Call{Func: "UPPER", Args: []Expr{&ColumnRef{Index: 1, Name: "v", T: TypeVarchar}}, T: TypeVarchar}
	b := &Call{Func: "UPPER", Args: []Expr{&ColumnRef{Index: 2, Name: "v", T: TypeVarchar}}, T: TypeVarchar}
	if _, memo, err := CompileShared([]Expr{a, b}); err != nil || memo != nil {
		t.Errorf("UPPER of two columns named v shared (%v)", err)
	}
	for _, texts := range [][]string{
		{`CAST(RANDOM() AS VARCHAR)`, `CAST(RANDOM() AS VARCHAR) || 'x'`},
		{`qty + 1 > 3`, `(qty + 1) * 2`},
	} {
		es := []Expr{bindExpr(t, texts[0]), bindExpr(t, texts[1])}
		if _, memo, err := CompileShared(es); err != nil || memo != nil {
			t.Errorf("%q shared (%v)", texts, err)
		}
	}
	// Nested: LENGTH(UPPER(x)) twice and UPPER(x) once more: both shared, UPPER within
	// LENGTH's memo entry.
	var calls int
	es := []Expr{
		countedUpper(t, bindExpr(t, `LENGTH(UPPER(user_id))`), &calls),
		countedUpper(t, bindExpr(t, `LENGTH(UPPER(user_id)) + 1`), &calls),
		countedUpper(t, bindExpr(t, `UPPER(user_id)`), &calls),
	}
	fs, memo := mustShare(t, es)
	memo.Begin(1)
	memo.Row(0)
	for _, f := range fs {
		f(evalRow)
	}
	if calls != 1 || memoValues(memo) != 2 {
		t.Errorf("UPPER ran %d times, the memo holds %d values", calls, memoValues(memo))
	}
}

// memoValues is how many values the memo holds for its current batch.
func memoValues(m *Memo) int {
	n := 0
	for _, s := range m.stamp {
		if s == m.gen {
			n++
		}
	}
	return n
}
