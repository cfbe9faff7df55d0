package exec

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
)

// batchSeen is an Emitter that keeps the batches it gets.
type batchSeen []*Batch

func (s *batchSeen) Emit(b *Batch) error { *s = append(*s, b); return nil }

// A projection that only renames its input's columns (a SELECT list over an aggregation's
// columns in their order) is marked so (planner.ProjectNode.Identity) and passes a batch
// on as it is; one that reorders them is not. Through a job, its rows are the query's.
// A batch holding a failed value still goes the projection's way: the row goes to the bad
// rows, named by the projection.
func TestIdentityProjection(t *testing.T) {
	projection := func(plan *planner.Physical) *planner.ProjectNode {
		for _, st := range plan.Stages {
			for _, op := range st.Ops {
				if n, ok := op.Node.(*planner.ProjectNode); ok {
					return n
				}
			}
		}
		t.Fatal("no projection")
		return nil
	}
	if p := projection(planSQL(t, `SELECT COUNT(*) AS c, user_id FROM orders GROUP BY user_id`, planCatalog(), "id")); p.Identity {
		t.Errorf("columns reordered, identity: %v", p.Texts)
	}
	plan := planSQL(t, `SELECT user_id, COUNT(*) AS c, SUM(n) AS s FROM orders GROUP BY user_id`, planCatalog(), "id")
	p := projection(plan)
	if !p.Identity {
		t.Fatalf("not identity: %v", p.Texts)
	}
	evs := genEvents(47, 4000, 400, 0)
	counts, sums, some := map[string]int{}, map[string]int64{}, map[string]bool{}
	for _, e := range evs {
		counts[e.user]++
		if !e.nNull {
			sums[e.user] += e.n
			some[e.user] = true
		}
	}
	var want []string
	for u, c := range counts {
		s := "NULL"
		if some[u] {
			s = fmt.Sprint(sums[u])
		}
		want = append(want, fmt.Sprintf("%s,%d,%s", u, c, s))
	}
	_, got := lastRowsByKey(t, "id", plan, evs, 64, 1)
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}

	op := &projectOp{exprs: p.Exprs, identity: true}
	var seen batchSeen
	b := &Batch{Split: "0", Rows: []sql.Row{{sql.Varchar("u1"), sql.BigInt(2), sql.BigInt(5), sql.Null}}}
	if err := op.Process(0, b, &seen); err != nil || len(seen) != 1 || seen[0] != b {
		t.Fatalf("a batch without failed values: %v, %d batches, passed on: %v", err, len(seen), len(seen) == 1 && seen[0] == b)
	}
	failed := sql.ErrorValue(sql.CodeNumericOutOfRange, "bigint out of range")
	b = &Batch{Split: "0", Rows: []sql.Row{{sql.Varchar("u1"), sql.BigInt(2), failed, sql.Null}}}
	var rerr *RowError
	if err := op.Process(0, b, &seen); !errors.As(err, &rerr) || rerr.Operator != "project" || !strings.Contains(err.Error(), "bigint out of range") {
		t.Fatalf("a failed value: %v", err)
	}
}
