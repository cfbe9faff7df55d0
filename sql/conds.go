package sql

// Conds holds the conditions of the expressions CompileConds compiles together that are
// searched CASEs of one WHEN (CASE WHEN p THEN x [ELSE y] END), each distinct condition
// computed once per row: an aggregation's arguments test the same few conditions many
// times over (Nexmark q16: three price ranges in nine arguments), and an operator that
// knows an argument's shape (CaseShape) may read its condition's value instead of computing
// the argument (exec: the families of COUNT(DISTINCT) calls).
//
// Unlike a Memo's, the values are computed eagerly: the operator calls Eval with each row
// before it evaluates the expressions over it. That computes nothing more than the
// expressions would, and fails nothing they would not, because a CASE computes its first
// WHEN for every row — provided the operator evaluates every one of the expressions for
// every row it calls Eval with (an aggregation's arguments). A Conds is used by one
// goroutine (the stage's).
type Conds struct {
	fs   []Evaluator
	vals []Value
}

// Eval computes every condition over r; the expressions compiled with c then read them.
func (c *Conds) Eval(r Row) {
	for i, f := range c.fs {
		c.vals[i] = f(r)
	}
}

// Len is the number of distinct conditions.
func (c *Conds) Len() int { return len(c.fs) }

// Value is condition k's value over the row last given to Eval.
func (c *Conds) Value(k int) Value { return c.vals[k] }

// Err is the error of the first condition that failed over the row last given to Eval, or
// nil.
func (c *Conds) Err() *Error { return RowError(c.vals) }

// CaseShape is what CompileConds found an expression to be. Cond is the index (in Conds)
// of its condition when it is CASE WHEN <Cond> THEN ... END, -1 otherwise; Column is the
// input column the expression is (Cond -1) or its THEN is (Cond >= 0, the column's values
// the CASE's unconverted), -1 when that is not a column; NullElse: it has no ELSE (or ELSE
// NULL).
type CaseShape struct {
	Cond     int
	Column   int
	NullElse bool
}

// CondTrue reports whether a condition's value selects its THEN, and CondFailed whether it
// failed (an error value, which the CASE is).
func CondTrue(v Value) bool   { return v.K == KindBool && v.I != 0 }
func CondFailed(v Value) bool { return v.K == KindNull && v.S != "" }

// CompileConds compiles expressions evaluated one after the other over each row, as
// Compile does each, except that the conditions of those that are searched CASEs of one
// WHEN (after constant folding; the condition calling no volatile function) are computed
// once per row by the returned Conds (nil when there is none), which the caller must Eval
// before evaluating any of the expressions over a row (see Conds). shapes[i] describes
// es[i].
func CompileConds(es []Expr) (evs []Evaluator, conds *Conds, shapes []CaseShape, err error) {
	folded := make([]Expr, len(es))
	failed := make([]Value, len(es))
	shapes = make([]CaseShape, len(es))
	index := map[string]int{}
	var condExprs []Expr
	for i, e := range es {
		if e == nil {
			return nil, nil, nil, Errorf(CodeInternal, "compile: nil expression")
		}
		f, fail, err := foldConstants(e)
		if err != nil {
			return nil, nil, nil, err
		}
		folded[i], failed[i] = f, fail
		shapes[i] = CaseShape{Cond: -1, Column: columnOf(f)}
		c, ok := f.(*Case)
		if fail.S != "" || !ok || c.Operand != nil || len(c.Whens) != 1 || CallsVolatile(c.Whens[0]) {
			continue
		}
		key := memoKey(c.Whens[0])
		k, seen := index[key]
		if !seen {
			k = len(condExprs)
			index[key] = k
			condExprs = append(condExprs, c.Whens[0])
		}
		l, lit := c.Else.(*Literal)
		shapes[i] = CaseShape{Cond: k, Column: -1, NullElse: c.Else == nil || lit && l.V.K == KindNull}
		if t := c.Thens[0].Type(); t.Kind == c.T.Kind && t.Scale == c.T.Scale {
			// The THEN's values are the CASE's, not converted.
			shapes[i].Column = columnOf(c.Thens[0])
		}
	}
	if len(condExprs) > 0 {
		conds = &Conds{fs: make([]Evaluator, len(condExprs)), vals: make([]Value, len(condExprs))}
		for k, e := range condExprs {
			if conds.fs[k], err = compileExpr(e); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	evs = make([]Evaluator, len(es))
	for i, e := range folded {
		switch {
		case failed[i].S != "":
			v := failed[i]
			evs[i] = func(Row) Value { return v }
		case shapes[i].Cond >= 0:
			evs[i], err = compileCondCase(e.(*Case), &conds.vals[shapes[i].Cond])
		default:
			evs[i], err = compileExpr(e)
		}
		if err != nil {
			return nil, nil, nil, err
		}
	}
	return evs, conds, shapes, nil
}

// compileCondCase compiles CASE WHEN p THEN x [ELSE y] END whose condition's value over
// the current row is *cond, as compileCase does.
func compileCondCase(n *Case, cond *Value) (Evaluator, error) {
	then, err := compileExpr(n.Thens[0])
	if err != nil {
		return nil, err
	}
	then = coerceTo(then, n.Thens[0].Type(), n.T)
	els, err := compileElse(n)
	if err != nil {
		return nil, err
	}
	return func(r Row) Value {
		c := *cond
		if c.K == KindBool && c.I != 0 {
			return then(r)
		}
		if c.K == KindNull && c.S != "" {
			return c
		}
		return els(r)
	}, nil
}

// columnOf returns the input column e is, or -1.
func columnOf(e Expr) int {
	if c, ok := e.(*ColumnRef); ok {
		return c.Index
	}
	return -1
}
