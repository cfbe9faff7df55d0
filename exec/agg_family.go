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
	for _, fam := range n.Families {
		if len(fam) < 2 || len(fam) > sql.MaxFamilyMembers {
			continue
		}
		for m, j := range fam {
			f.of[j] = famRole{fam: len(f.fams), member: m}
		}
		f.fams = append(f.fams, fam)
	}
	return f
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
// column).
func (a *aggOp) addFamily(accs []accum, fam []int) {
	var v sql.Value
	var marks uint8
	for m, j := range fam {
		if x := a.args[a.argAt[j]]; x.K != sql.KindNull {
			v, marks = x, marks|1<<m
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
