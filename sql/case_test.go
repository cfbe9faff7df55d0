package sql

import "testing"

// bindExpr binds "SELECT expr FROM orders" and returns the expression.
func bindExpr(t *testing.T, expr string) Expr {
	t.Helper()
	sts, err := Parse("SELECT " + expr + " FROM orders")
	if err != nil {
		t.Fatal(err)
	}
	q, err := Bind(sts[0].(*Select), newTestCatalog())
	if err != nil {
		t.Fatal(err)
	}
	return q.Select[0]
}

// A searched CASE whose WHENs compare one expression with literals of its type is compiled
// as the simple CASE of that expression (computed once per row), with the same answers —
// NULL and unmatched values taking the ELSE — and nothing else is.
func TestCaseOfOneOperand(t *testing.T) {
	const q21 = `CASE WHEN LOWER(user_id) = 'apple' THEN '0' WHEN 'google' = LOWER(user_id) THEN '1' ELSE user_id END`
	for _, c := range []struct {
		expr    string
		rewrite bool
	}{
		{q21, true},
		{`CASE WHEN qty = 1 THEN 'a' WHEN qty = 3 THEN 'b' END`, true},
		{`CASE WHEN qty = 1 THEN 'a' END`, false},                                     // one WHEN: nothing to share
		{`CASE WHEN qty = 1 THEN 'a' WHEN qty > 2 THEN 'b' END`, false},               // not all =
		{`CASE WHEN qty = 1 THEN 'a' WHEN qty + 0 = 3 THEN 'b' END`, false},           // not the same expression
		{`CASE WHEN amount = 1 THEN 'a' WHEN amount = 12.5 THEN 'b' END`, false},      // DOUBLE
		{`CASE WHEN RANDOM() = 1 THEN 'a' WHEN RANDOM() = 2 THEN 'b' END`, false},     // volatile
		{`CASE WHEN user_id = NULL THEN 'a' WHEN user_id = 'u7' THEN 'b' END`, false}, // a NULL literal
	} {
		n, ok := bindExpr(t, c.expr).(*Case)
		if !ok {
			t.Fatalf("%s: not a CASE", c.expr)
		}
		if _, _, got := sameOperandEquals(n.Whens); got != c.rewrite {
			t.Errorf("%s: rewritten %v, want %v", c.expr, got, c.rewrite)
		}
	}
	f := MustCompile(bindExpr(t, q21))
	for user, want := range map[string]string{"Apple": "0", "GOOGLE": "1", "u7": "u7", "": "NULL"} {
		row := append(Row(nil), evalRow...)
		if user == "" {
			row[1] = Null
		} else {
			row[1] = Varchar(user)
		}
		if got := f(row); Text(got) != want && !(want == "NULL" && got.IsNull()) {
			t.Errorf("user_id %q: %s, want %s", user, show(got), want)
		}
	}
	// Columns of one name in two places are not the same expression.
	a, b := &ColumnRef{Index: 0, Name: "v", T: TypeBigInt}, &ColumnRef{Index: 1, Name: "v", T: TypeBigInt}
	if SameExpr(a, b) || !SameExpr(a, &ColumnRef{Index: 0, Name: "v", T: TypeBigInt}) {
		t.Error("SameExpr tells columns apart by name, not by place")
	}
}
