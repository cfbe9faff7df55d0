package cluster

import (
	"hash/fnv"
	"slices"
	"sort"
	"strconv"

	"rsql/exec"
)

// Assign divides units among members (both in any order): each stage's units evenly (a
// member gets ⌊n/m⌋ or ⌈n/m⌉ of a stage's n units), each unit to the member that ranks it
// highest by a hash of (job, unit, member) among those with room left, so that a member
// joining or leaving moves few units. whole gives every unit to one member (the highest
// ranked for the job). The result is the same on every member for the same lists.
func Assign(job string, units []exec.Unit, members []string, whole bool) map[exec.Unit]string {
	out := make(map[exec.Unit]string, len(units))
	if len(members) == 0 {
		return out
	}
	ms := slices.Clone(members)
	sort.Strings(ms)
	rank := func(key string) []string {
		r := slices.Clone(ms)
		score := make(map[string]uint64, len(r))
		for _, m := range r {
			h := fnv.New64a()
			h.Write([]byte(job))
			h.Write([]byte{0})
			h.Write([]byte(key))
			h.Write([]byte{0})
			h.Write([]byte(m))
			score[m] = h.Sum64()
		}
		sort.SliceStable(r, func(i, j int) bool { return score[r[i]] > score[r[j]] })
		return r
	}
	if whole {
		owner := rank("*")[0]
		for _, u := range units {
			out[u] = owner
		}
		return out
	}
	byStage := map[int][]exec.Unit{}
	var stages []int
	for _, u := range units {
		if byStage[u.Stage] == nil {
			stages = append(stages, u.Stage)
		}
		byStage[u.Stage] = append(byStage[u.Stage], u)
	}
	sort.Ints(stages)
	for _, s := range stages {
		us := byStage[s]
		sort.Slice(us, func(i, j int) bool { return SplitLess(us[i].Split, us[j].Split) })
		base, extra := len(us)/len(ms), len(us)%len(ms)
		count := map[string]int{}
		for _, u := range us {
			for _, m := range rank(u.String()) {
				if count[m] < base || (count[m] == base && extra > 0) {
					if count[m] == base {
						extra--
					}
					count[m]++
					out[u] = m
					break
				}
			}
		}
	}
	return out
}

// SplitLess orders split names numerically when they are numbers ("2" < "10").
func SplitLess(a, b string) bool {
	if len(a) != len(b) {
		if _, err := strconv.Atoi(a); err == nil {
			if _, err := strconv.Atoi(b); err == nil {
				return len(a) < len(b)
			}
		}
	}
	return a < b
}

// SortUnits orders units by stage, then split (SplitLess).
func SortUnits(us []exec.Unit) {
	sort.Slice(us, func(i, j int) bool {
		if us[i].Stage != us[j].Stage {
			return us[i].Stage < us[j].Stage
		}
		return SplitLess(us[i].Split, us[j].Split)
	})
}

// UnitNames returns the units' names, "<stage>/<split>".
func UnitNames(us []exec.Unit) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.String()
	}
	return out
}
