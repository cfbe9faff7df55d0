package server

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"rsql/state"
)

// Every unit has exactly one owner among the members, the division is even, and it does
// not depend on the order units and members are listed in.
func TestAssignUnits(t *testing.T) {
	units := []string{"3", "10", "0", "2", "1", "4", "5", "6", "7", "8", "9", "11"}
	for n := 1; n <= 5; n++ {
		var members []string
		for i := 0; i < n; i++ {
			members = append(members, fmt.Sprintf("m%d", i))
		}
		for _, job := range []string{"job-1", "job-2", "job-33"} {
			owner := map[string]string{}
			for _, m := range members {
				got := assignUnits(job, units, members, m)
				rev := assignUnits(job, reversed(units), reversed(members), m)
				if !slices.Equal(got, rev) {
					t.Fatalf("%s with %d members: %s gets %v, or %v with the lists reversed", job, n, m, got, rev)
				}
				if len(got) < len(units)/n || len(got) > (len(units)+n-1)/n {
					t.Errorf("%s with %d members: %s gets %d of %d units", job, n, m, len(got), len(units))
				}
				for _, u := range got {
					if o, dup := owner[u]; dup {
						t.Fatalf("%s: unit %s owned by %s and %s", job, u, o, m)
					}
					owner[u] = m
				}
			}
			if len(owner) != len(units) {
				t.Fatalf("%s with %d members: %d of %d units owned", job, n, len(owner), len(units))
			}
		}
	}
	if got := assignUnits("j", []string{"0"}, nil, "m"); got != nil {
		t.Fatalf("no members: %v", got)
	}
	if got := assignUnits("j", []string{"0", "1"}, []string{"a", "b"}, "c"); got != nil {
		t.Fatalf("not a member: %v", got)
	}
}

// Instance keys go to the instance's split and come back unchanged; split keys stay.
func TestInstanceKeys(t *testing.T) {
	c := &cluster{self: state.Member{Name: "rsql-a"}}
	outbox := append(state.SplitPrefix(nil, "job-1", "out", "0"), 0, 0, 0, 0, 0, 0, 0, 7)
	for _, k := range [][]byte{
		outbox,
		state.SplitPrefix(nil, "job-1", "wm", "0"),
		state.SplitPrefix(nil, "job-1", state.JobOperator, "epoch"),
	} {
		ik := c.instanceKey("job-1", k)
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
	agg := state.SplitPrefix(nil, "job-1", "s0.agg1", "2")
	if got := c.instanceKey("job-1", agg); !bytes.Equal(got, agg) {
		t.Fatalf("split key rewritten: %x", got)
	}
	if _, ok := nativeKey("job-1", agg); ok {
		t.Fatal("a split key taken for an instance key")
	}
	if got := c.instanceKey("job-1", []byte{0xff}); !bytes.Equal(got, []byte{0xff}) {
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
	if _, err := a.AddStreamAndJob(&StreamDef{Name: "result", Options: map[string]string{}}, JobDef{Statement: "CREATE STREAM result AS ...", State: "RUNNING", Sink: "result", Sources: []string{"orders"}}); err != nil {
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
	if j, ok := b.Job("job-1"); !ok || j.State != "RUNNING" || j.Sink != "result" {
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
	f.Add(c.instanceKey("job-1", state.SplitPrefix(nil, "job-1", "out", "0")))
	f.Add(c.instanceKey("job-1", state.SplitPrefix(nil, "job-1", "job", "epoch")))
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
