package exec

import (
	"fmt"

	"rsql/planner"
	"rsql/sql"
)

// distinctFamilies are the families of COUNT(DISTINCT) calls of an aggregation
// (planner.AggregateNode.Families) whose values one set holds, each value once with the
// marks of the members that counted it (sql.NewDistinctFamily): the set is the first
// member's accumulator's, the other members' sets stay nil, and each member's result is its
// count in that set. What is stored does not change: each member's values are written as
// its own section of the group's distinct chunks (statecodec.go), and read back into the
// family's set, so state written with and without families restores either way.
//
// Families are used where the accumulators are never merged (no panes, no sessions) and
// the input only inserts: a merge or a retraction works on one call's set.
type distinctFamilies struct {
	fams [][]int   // agg indexes, the member's position its mark
	of   []famRole // per aggregate; fam -1: not in a family
	// shapes[f]: family f's members' arguments as their column and conditions
	// (planner.AggregateNode.FamilyShapes), nil when they are computed one by one; for
	// those families, prepare computes the row's value (vals[f]) and marks (marks[f]) from
	// the column and the conditions, and skip marks their members, whose arguments the
	// operator does not compute (agg.go: Process).
	shapes [][]sql.CaseShape
	vals   []sql.Value
	marks  []uint8
	skip   []bool
}

type famRole struct{ fam, member int }

// newDistinctFamilies returns the families n's aggregation in mode keeps together, or nil.
func newDistinctFamilies(n *planner.AggregateNode, mode aggMode) *distinctFamilies {
	switch mode.(type) {
	case unwindowedMode, winMode, givenMode:
	default:
		return nil
	}
	if len(n.Families) == 0 || n.Retracting {
		return nil
	}
	f := &distinctFamilies{of: make([]famRole, len(n.Aggs))}
	for j := range f.of {
		f.of[j].fam = -1
	}
	for i, fam := range n.Families {
		if len(fam) < 2 || len(fam) > sql.MaxFamilyMembers {
			continue
		}
		for m, j := range fam {
			f.of[j] = famRole{fam: len(f.fams), member: m}
		}
		f.fams = append(f.fams, fam)
		var shapes []sql.CaseShape
		if i < len(n.FamilyShapes) && n.Conds != nil {
			shapes = n.FamilyShapes[i]
		}
		f.shapes = append(f.shapes, shapes)
		if shapes != nil {
			if f.skip == nil {
				f.skip = make([]bool, len(n.Aggs))
			}
			for _, j := range fam {
				f.skip[j] = true
			}
		}
	}
	f.vals, f.marks = make([]sql.Value, len(f.fams)), make([]uint8, len(f.fams))
	return f
}

// prepare computes, for the families whose members' arguments are a column and
// conditions (shapes), the value of row r and the members that count it, from the column
// and from the conditions conds holds for r (evaluated before). It reports whether a
// member's argument fails (its condition, or the column, is an error value).
func (f *distinctFamilies) prepare(r sql.Row, conds *sql.Conds) (failed bool) {
	for i, shapes := range f.shapes {
		if shapes == nil {
			continue
		}
		v := r[shapes[0].Column]
		var marks uint8
		for m, s := range shapes {
			if s.Cond < 0 {
				marks |= 1 << m
				continue
			}
			switch c := conds.Value(s.Cond); {
			case sql.CondTrue(c):
				marks |= 1 << m
			case sql.CondFailed(c):
				failed = true
			}
		}
		f.vals[i], f.marks[i] = v, marks
		failed = failed || v.K == sql.KindNull && v.S != ""
	}
	return failed
}

// in reports whether aggregate j is a member of a family.
func (f *distinctFamilies) in(j int) bool { return f != nil && f.of[j].fam >= 0 }

// leads returns the family aggregate j leads (its first member), or nil.
func (f *distinctFamilies) leads(j int) []int {
	if !f.in(j) || f.of[j].member != 0 {
		return nil
	}
	return f.fams[f.of[j].fam]
}

// addFamily folds the current row's arguments of family fam into accs: the value is the
// argument of each member whose argument is not NULL (every such argument is the same
// column), or what prepare computed.
func (a *aggOp) addFamily(accs []accum, fam []int) {
	var v sql.Value
	var marks uint8
	if i := a.fams.of[fam[0]].fam; a.fams.shapes[i] != nil {
		v, marks = a.fams.vals[i], a.fams.marks[i]
		if v.K == sql.KindNull {
			return
		}
	} else {
		for m, j := range fam {
			if x := a.args[a.argAt[j]]; x.K != sql.KindNull {
				v, marks = x, marks|1<<m
			}
		}
	}
	if marks == 0 {
		return
	}
	acc := &accs[fam[0]]
	if acc.Set == nil {
		acc.Set = sql.NewDistinctFamily(len(fam))
	}
	acc.Set.AddMarked(v, marks)
}

// result is the result of aggregate j, a family's member, over the group's accs.
func (f *distinctFamilies) result(j int, accs []accum) sql.Value {
	r := f.of[j]
	return sql.BigInt(int64(accs[f.fams[r.fam][0]].Set.MemberLen(r.member)))
}

// setOf returns the set that holds aggregate j's distinct values in accs, a family's set
// made when needed, and j's member in it (-1: the set is j's own).
func (f *distinctFamilies) setOf(accs []accum, j int) (*sql.DistinctSet, int) {
	if !f.in(j) {
		return distinctSetOf(&accs[j]), -1
	}
	r := f.of[j]
	fam := f.fams[r.fam]
	lead := &accs[fam[0]]
	if lead.Set == nil {
		lead.Set = sql.NewDistinctFamily(len(fam))
	}
	return lead.Set, r.member
}

// join moves the values of the members' own sets in accs (values an earlier version kept
// inline in the group's value, statecodec.go) into their families' sets, fresh as they were.
func (f *distinctFamilies) join(accs []accum) error {
	if f == nil {
		return nil
	}
	for _, fam := range f.fams {
		for m, j := range fam {
			own := accs[j].Set
			if own == nil || own.Members() > 0 {
				continue
			}
			accs[j].Set = nil
			set, _ := f.setOf(accs, fam[0])
			if err := set.AddMemberSet(own, m); err != nil {
				return fmt.Errorf("%w: distinct values of aggregate %d: %v", errBadState, j, err)
			}
		}
	}
	return nil
}

// sections returns the aggregate indexes whose distinct values set, aggregate j's
// accumulator's, holds: j alone, or the family j leads.
func (a *aggOp) sections(j int, set *sql.DistinctSet) []int {
	if set.Members() > 0 {
		return a.fams.leads(j)
	}
	return a.self[j : j+1]
}
