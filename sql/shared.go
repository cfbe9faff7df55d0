package sql

import (
	"strconv"
	"strings"
)

// Memo holds, for the rows of one batch, the values of the subexpressions that the
// expressions compiled together by CompileShared have in common, so that each is computed
// at most once per row: a filter and the projection over it that both call
// REGEXP_EXTRACT(url, ...) (Nexmark q21) run the expression once.
//
// A value is computed when an expression first needs it for the row, not before: a CASE
// branch or an AND that is not reached computes nothing, as without the memo, so a failing
// subexpression fails exactly the rows it failed before.
//
// The operator that evaluates the expressions tells the memo which batch and row it is at:
// Begin for a new batch, Row before evaluating row i, and Move when a filter keeps row from
// as row to (the projection after it then reads the values at the new index). A Memo is
// used by one goroutine (the stage's).
type Memo struct {
	n     int // shared subexpressions (slots)
	at    int // the current row's first slot: row*n
	gen   uint32
	vals  []Value
	stamp []uint32 // stamp[j] == gen: vals[j] was computed in this batch
}

// Begin starts a batch of rows: the values of the previous batch are forgotten.
func (m *Memo) Begin(rows int) {
	m.gen++
	if m.gen == 0 { // wrapped: no stamp may look current
		clear(m.stamp)
		m.gen = 1
	}
	if need := rows * m.n; need > len(m.vals) {
		m.vals = make([]Value, need)
		m.stamp = make([]uint32, need)
	}
	m.at = 0
}

// Row makes row i of the batch the one the expressions are evaluated for.
func (m *Memo) Row(i int) { m.at = i * m.n }

// Move makes the values computed for row from those of row to (to <= from).
func (m *Memo) Move(from, to int) {
	if from == to {
		return
	}
	f, t := from*m.n, to*m.n
	copy(m.vals[t:t+m.n], m.vals[f:f+m.n])
	copy(m.stamp[t:t+m.n], m.stamp[f:f+m.n])
}

// memoRef is a shared subexpression in the trees CompileShared compiles: every occurrence
// of it is one memoRef of the same slot. Its child is the subexpression, so walks that look
// for columns or volatile calls still see them; nothing transforms it after it is made.
type memoRef struct{ slot *memoSlot }

type memoSlot struct {
	i     int
	memo  *Memo
	inner Expr      // the subexpression, its own shared parts memoRefs
	f     Evaluator // inner, compiled on the first use
}

func (r *memoRef) Type() Type       { return r.slot.inner.Type() }
func (r *memoRef) Children() []Expr { return []Expr{r.slot.inner} }
func (r *memoRef) String() string   { return r.slot.inner.String() }

// WithChildren keeps the slot: a memoRef is made after every rewrite of its tree.
func (r *memoRef) WithChildren([]Expr) Expr { return r }

func compileMemoRef(r *memoRef) (Evaluator, error) {
	s := r.slot
	if s.f == nil {
		f, err := compileExpr(s.inner)
		if err != nil {
			return nil, err
		}
		s.f = f
	}
	f, m, i := s.f, s.memo, s.i
	return func(row Row) Value {
		j := m.at + i
		if m.stamp[j] == m.gen {
			return m.vals[j]
		}
		v := f(row)
		m.vals[j], m.stamp[j] = v, m.gen
		return v
	}, nil
}

// CompileShared compiles expressions evaluated over the same rows one after the other (a
// filter's predicate, then its projection's list) as Compile does each, computing the
// subexpressions they have in common once per row through the returned Memo. The memo is
// nil when nothing is shared worth it; then the evaluators are Compile's.
//
// A subexpression is shared when it occurs more than once (in one expression or across
// them), calls no volatile function, and does work a memo lookup is worth: it calls a
// named function, casts or matches a LIKE pattern (arithmetic and comparisons of columns
// are cheaper to repeat than to look up).
func CompileShared(es []Expr) ([]Evaluator, *Memo, error) {
	folded := make([]Expr, len(es))
	failed := make([]Value, len(es))
	counts := map[string]int{}
	for i, e := range es {
		if e == nil {
			return nil, nil, Errorf(CodeInternal, "compile: nil expression")
		}
		f, fail, err := foldConstants(e)
		if err != nil {
			return nil, nil, err
		}
		folded[i], failed[i] = f, fail
		if fail.S != "" {
			continue
		}
		Walk(f, func(x Expr) bool {
			if worthSharing(x) {
				counts[memoKey(x)]++
			}
			return true
		})
	}
	m := &Memo{}
	slots := map[string]*memoSlot{}
	var share func(Expr) Expr
	share = func(x Expr) Expr {
		var key string
		if worthSharing(x) {
			key = memoKey(x)
			if s := slots[key]; s != nil {
				return &memoRef{slot: s}
			}
		}
		if ch := x.Children(); len(ch) > 0 {
			nc := make([]Expr, len(ch))
			for i, c := range ch {
				nc[i] = share(c)
			}
			x = x.WithChildren(nc)
		}
		if key != "" && counts[key] > 1 {
			s := &memoSlot{i: m.n, memo: m, inner: x}
			m.n++
			slots[key] = s
			return &memoRef{slot: s}
		}
		return x
	}
	out := make([]Evaluator, len(es))
	for i, e := range folded {
		if v := failed[i]; v.S != "" {
			out[i] = func(Row) Value { return v }
			continue
		}
		f, err := compileExpr(share(e))
		if err != nil {
			return nil, nil, err
		}
		out[i] = f
	}
	if m.n == 0 {
		return out, nil, nil
	}
	m.Begin(0)
	return out, m, nil
}

// worthSharing reports whether x may be computed once for all its occurrences in a row
// (see CompileShared).
func worthSharing(x Expr) bool {
	switch x.(type) {
	case *Literal, *ColumnRef, *memoRef:
		return false
	}
	if IsConstant(x) {
		return false
	}
	costly, volatile := false, false
	Walk(x, func(y Expr) bool {
		switch n := y.(type) {
		case *Call:
			if volatileCall(n) {
				volatile = true
			} else if !infixOps[n.Func] && n.Func != "NEG" && n.Func != "NOT" {
				costly = true
			}
		case *Cast, *Like:
			costly = true
		}
		return !volatile
	})
	return costly && !volatile
}

// memoKey identifies an expression: its text, and the type of each node and the index of
// each column (two columns of one name from the two sides of a join differ).
func memoKey(x Expr) string {
	var b strings.Builder
	b.WriteString(x.String())
	Walk(x, func(y Expr) bool {
		b.WriteByte('|')
		b.WriteString(y.Type().String())
		if c, ok := y.(*ColumnRef); ok {
			b.WriteByte('#')
			b.WriteString(strconv.Itoa(c.Index))
		}
		return true
	})
	return b.String()
}
