package sql

import "testing"

// Expressions compiled by CompileConds give, over every row, exactly the values (errors
// included) each gives compiled alone, with their conditions computed by Conds.Eval: one
// condition per distinct text, none for a volatile condition or a CASE of two WHENs; the
// shapes say which are a column under a condition.
func TestCompileConds(t *testing.T) {
	cases := []struct {
		text  string
		shape CaseShape
	}{
		{`CASE WHEN qty > 2 THEN order_id END`, CaseShape{Cond: 0, Column: 0, NullElse: true}},
		{`CASE WHEN qty > 2 THEN 1 ELSE 0 END`, CaseShape{Cond: 0, Column: -1}},
		{`CASE WHEN 100 / qty > 10 THEN qty END`, CaseShape{Cond: 1, Column: 5, NullElse: true}},
		{`CASE WHEN qty > 2 AND vip THEN amount ELSE NULL END`, CaseShape{Cond: 2, Column: 2, NullElse: true}},
		// qty (INT) is converted to the CASE's BIGINT: not the column's values.
		{`CASE WHEN qty > 2 THEN qty ELSE order_id END`, CaseShape{Cond: 0, Column: -1}},
		{`order_id`, CaseShape{Cond: -1, Column: 0}},
		{`CASE WHEN RANDOM() > 2 THEN 1 END`, CaseShape{Cond: -1, Column: -1}},
		{`CASE WHEN qty > 2 THEN 'a' WHEN qty > 1 THEN 'b' END`, CaseShape{Cond: -1, Column: -1}},
		// Folded to qty.
		{`CASE WHEN 1 = 1 THEN qty END`, CaseShape{Cond: -1, Column: 5}},
		{`CASE WHEN 100 / qty > 10 THEN 'big' ELSE 'small' END`, CaseShape{Cond: 1, Column: -1}},
	}
	es := make([]Expr, len(cases))
	alone := make([]Evaluator, len(cases))
	for i, c := range cases {
		es[i] = bindExpr(t, c.text)
		alone[i] = MustCompile(bindExpr(t, c.text))
	}
	fs, conds, shapes, err := CompileConds(es)
	if err != nil {
		t.Fatal(err)
	}
	if conds == nil || conds.Len() != 3 {
		t.Fatalf("conditions: %v, want 3", conds)
	}
	for i, c := range cases {
		if shapes[i] != c.shape {
			t.Errorf("%s: shape %+v, want %+v", c.text, shapes[i], c.shape)
		}
	}
	failures := 0
	for i, r := range sharedRows() {
		conds.Eval(r)
		if e := conds.Err(); e != nil {
			failures++
		}
		for k, f := range fs {
			if got, want := f(r), alone[k](r); got != want {
				t.Errorf("row %d, %s: %s (%q) together, %s (%q) alone", i, cases[k].text, show(got), got.S, show(want), want.S)
			}
		}
	}
	if failures == 0 {
		t.Error("no condition failed: the rows need qty = 0")
	}
	if _, conds, _, err := CompileConds([]Expr{bindExpr(t, `qty + 1`)}); err != nil || conds != nil {
		t.Errorf("no CASE: conditions %v, %v", conds, err)
	}
}
