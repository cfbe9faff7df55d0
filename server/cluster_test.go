package server

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"rsql/exec"
	"rsql/state"
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
			got := assign(job, units, members, false)
			rev := assign(job, reversedUnits(units), reversed(members), false)
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
			after := assign(job, units, members[:n-1], false)
			moved := 0
			for u, m := range got {
				if m != members[n-1] && after[u] != m {
					moved++
				}
			}
			if moved > len(units)/3 {
				t.Errorf("%s: %d -> %d members moves %d units of the members that stay", job, n, n-1, moved)
			}
			whole := assign(job, units, members, true)
			owner := whole[units[0]]
			for u, m := range whole {
				if m != owner {
					t.Fatalf("%s run whole: unit %v on %s, unit %v on %s", job, units[0], owner, u, m)
				}
			}
		}
	}
	if got := assign("j", units, nil, false); len(got) != 0 {
		t.Fatalf("no members: %v", got)
	}
}

func reversedUnits(s []exec.Unit) []exec.Unit {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// A unit's keys are committed under the unit's name and come back unchanged; every other
// key of the job goes to the instance's split and comes back unchanged.
func TestSharedKeys(t *testing.T) {
	c := &cluster{self: state.Member{Name: "rsql-a"}}
	outbox := append(state.SplitPrefix(nil, "job-1", "out", "0"), 0, 0, 0, 0, 0, 0, 0, 7)
	for _, k := range [][]byte{
		outbox,
		state.SplitPrefix(nil, "job-1", "wm", "0"),
		state.SplitPrefix(nil, "job-1", state.JobOperator, "epoch"),
	} {
		ik := c.sharedKey("job-1", k)
		_, op, sp, _, ok := state.KeyParts(ik)
		if !ok || string(sp) != "@rsql-a" || bytes.Equal(ik, k) {
			t.Fatalf("instance key of %x: %x (operator %q split %q)", k, ik, op, sp)
		}
		back, ok := nativeKey("job-1", ik)
		if !ok || !bytes.Equal(back, k) {
			t.Fatalf("native key of %x: %x, %v; want %x", ik, back, ok, k)
		}
		if got := state.BatchSplits("job-1", func() *state.Batch { b := &state.Batch{}; b.Put(ik, nil); return b }()); !slices.Equal(got, []string{"@rsql-a"}) {
			t.Fatalf("instance key %x belongs to splits %v", ik, got)
		}
	}
	for _, k := range [][]byte{
		append(state.SplitPrefix(nil, "job-1", "s1.agg1", "2"), "group"...),
		exec.SplitKey("job-1", 0, "2"),
		exec.ShuffleKey("job-1", 1, "3"),
		append(exec.UnitOutboxPrefix("job-1", 1, "3"), 0, 0, 0, 0, 0, 0, 0, 9),
		exec.SplitKey("job-1", 2, "1:0"),
	} {
		u, _ := exec.KeyUnit("job-1", k)
		sk := c.sharedKey("job-1", k)
		if got := state.BatchSplits("job-1", func() *state.Batch { b := &state.Batch{}; b.Put(sk, nil); return b }()); !slices.Equal(got, []string{u.String()}) {
			t.Fatalf("key %x of unit %v is committed under splits %v", k, u, got)
		}
		back, ok := unitNativeKey("job-1", sk)
		if !ok || !bytes.Equal(back, k) {
			t.Fatalf("unit key %x: %x, %v; want %x", sk, back, ok, k)
		}
		if _, ok := nativeKey("job-1", sk); ok {
			t.Fatal("a unit key taken for an instance key")
		}
	}
	if got := c.sharedKey("job-1", []byte{0xff}); !bytes.Equal(got, []byte{0xff}) {
		t.Fatal("a non-state key rewritten")
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// The shared catalog's form round-trips: what one instance snapshots another replaces its
// catalog with, and snapshots the same bytes.
func TestCatalogSnapshotReplace(t *testing.T) {
	a, _ := OpenCatalog("")
	if err := a.AddStream(StreamDef{Name: "Orders", Columns: []ColumnDef{{Name: "id", Kind: 3}}, Options: map[string]string{"topic": "orders"}, Statement: "CREATE STREAM orders ..."}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddStreamAndJob(&StreamDef{Name: "result", Options: map[string]string{}}, JobDef{Statement: "CREATE STREAM result AS ...", State: JobRunning, Sink: "result", Sources: []string{"orders"}}); err != nil {
		t.Fatal(err)
	}
	snap, err := a.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := OpenCatalog(filepath.Join(t.TempDir(), "catalog.json"))
	b.AddStream(StreamDef{Name: "gone", Options: map[string]string{}})
	if err := b.replace(snap); err != nil {
		t.Fatal(err)
	}
	again, _ := b.snapshot()
	if !bytes.Equal(snap, again) {
		t.Fatalf("snapshot after replace:\n%s\nwant\n%s", again, snap)
	}
	if _, ok := b.Stream("gone"); ok {
		t.Fatal("a stream not in the shared catalog survived replace")
	}
	if j, ok := b.Job("job-1"); !ok || j.State != JobRunning || j.Sink != "result" {
		t.Fatalf("job after replace: %+v, %v", j, ok)
	}
	// The replaced catalog was persisted.
	c, err := OpenCatalog(b.path)
	if err != nil {
		t.Fatal(err)
	}
	if persisted, _ := c.snapshot(); !bytes.Equal(persisted, snap) {
		t.Fatalf("persisted catalog:\n%s\nwant\n%s", persisted, snap)
	}
	if err := b.replace([]byte("{not json")); err == nil {
		t.Fatal("a corrupt shared catalog was accepted")
	}
}

// FuzzNativeKey: keys read back from the instance's split in Postgres never panic the
// decoder, and a decoded key is a well-formed state key of the job that maps back.
func FuzzNativeKey(f *testing.F) {
	c := &cluster{self: state.Member{Name: "n"}}
	f.Add(c.sharedKey("job-1", state.SplitPrefix(nil, "job-1", "out", "0")))
	f.Add(c.sharedKey("job-1", state.SplitPrefix(nil, "job-1", "job", "epoch")))
	f.Add(state.SplitPrefix(nil, "job-1", "i.", "@n"))
	f.Add([]byte{5, 'j', 'o', 'b', '-', '1', 0xff})
	f.Fuzz(func(t *testing.T, key []byte) {
		nk, ok := nativeKey("job-1", key)
		if !ok {
			return
		}
		j, _, _, _, ok := state.KeyParts(nk)
		if !ok || string(j) != "job-1" {
			t.Fatalf("nativeKey(%x) = %x: not a key of job-1", key, nk)
		}
	})
}
