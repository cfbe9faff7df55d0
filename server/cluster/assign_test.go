package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"rsql/exec"
)

// Every unit has exactly one owner among the live members, each stage's units are divided
// evenly (so with at least as many units as members every member gets some of every
// stage), the division does not depend on the order units and members are listed in, a
// member leaving moves its own units and few others, and a job run whole has one owner.
func TestAssign(t *testing.T) {
	var units []exec.Unit
	for s, n := range []int{4, 4, 6} {
		for i := 0; i < n; i++ {
			units = append(units, exec.Unit{Stage: s, Split: strconv.Itoa(i)})
		}
	}
	for n := 1; n <= 5; n++ {
		var members []string
		for i := 0; i < n; i++ {
			members = append(members, fmt.Sprintf("m%d", i))
		}
		for _, job := range []string{"job-1", "job-2", "job-33"} {
			got := Assign(job, units, members, false)
			rev := Assign(job, reversedUnits(units), reversed(members), false)
			if !maps.Equal(got, rev) {
				t.Fatalf("%s with %d members: %v, or %v with the lists reversed", job, n, got, rev)
			}
			if len(got) != len(units) {
				t.Fatalf("%s with %d members: %d of %d units owned", job, n, len(got), len(units))
			}
			perStage := map[int]map[string]int{}
			for u, m := range got {
				if !slices.Contains(members, m) {
					t.Fatalf("unit %v owned by %q, not a member", u, m)
				}
				if perStage[u.Stage] == nil {
					perStage[u.Stage] = map[string]int{}
				}
				perStage[u.Stage][m]++
			}
			for s, counts := range perStage {
				total := 0
				for _, c := range counts {
					total += c
				}
				for _, m := range members {
					if c := counts[m]; c < total/n || c > (total+n-1)/n {
						t.Errorf("%s with %d members: %s gets %d of stage %d's %d units", job, n, m, c, s, total)
					}
				}
			}
			if n < 2 {
				continue
			}
			// The last member leaves: its units go to the others, and the others keep
			// most of theirs.
			after := Assign(job, units, members[:n-1], false)
			moved := 0
			for u, m := range got {
				if m != members[n-1] && after[u] != m {
					moved++
				}
			}
			if moved > len(units)/3 {
				t.Errorf("%s: %d -> %d members moves %d units of the members that stay", job, n, n-1, moved)
			}
			whole := Assign(job, units, members, true)
			owner := whole[units[0]]
			for u, m := range whole {
				if m != owner {
					t.Fatalf("%s run whole: unit %v on %s, unit %v on %s", job, units[0], owner, u, m)
				}
			}
		}
	}
	if got := Assign("j", units, nil, false); len(got) != 0 {
		t.Fatalf("no members: %v", got)
	}
}

func reversedUnits(s []exec.Unit) []exec.Unit {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
