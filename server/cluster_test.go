package server

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"rsql/exec"
	"rsql/state"
)

// A unit's keys are committed under the unit's name and come back unchanged; every other
// key of the job goes to the instance's split and comes back unchanged.
func TestSharedKeys(t *testing.T) {
	c := &clusterNode{self: state.Member{Name: "rsql-a"}}
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
	c := &clusterNode{self: state.Member{Name: "n"}}
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

// A unit of a stage feeding a shuffle topic starts only alongside a unit of the stage it
// feeds, when one is assigned here; units are handed over downstream first.
func TestHoldUpstream(t *testing.T) {
	u := func(stage int, split string) exec.Unit { return exec.Unit{Stage: stage, Split: split} }
	c := &clusterNode{}
	now := time.Now()
	for _, tc := range []struct {
		name               string
		take, desired, run []exec.Unit
		want               []exec.Unit
	}{
		{"both start together", []exec.Unit{u(0, "0"), u(1, "0")}, []exec.Unit{u(0, "0"), u(1, "0")}, nil, []exec.Unit{u(0, "0"), u(1, "0")}},
		{"downstream not here yet", []exec.Unit{u(0, "0")}, []exec.Unit{u(0, "0"), u(1, "1")}, nil, nil},
		{"downstream already runs", []exec.Unit{u(0, "0")}, []exec.Unit{u(0, "0"), u(1, "1")}, []exec.Unit{u(1, "1")}, []exec.Unit{u(0, "0")}},
		{"no downstream assigned here", []exec.Unit{u(0, "0")}, []exec.Unit{u(0, "0")}, nil, []exec.Unit{u(0, "0")}},
		{"the last stage never waits", []exec.Unit{u(1, "2")}, []exec.Unit{u(0, "0"), u(1, "2")}, nil, []exec.Unit{u(1, "2")}},
	} {
		cj := &clusterJob{feeds: map[int][]int{0: {1}}, wantSince: map[exec.Unit]wanted{}}
		local := map[exec.Unit]bool{}
		for _, r := range tc.run {
			local[r] = true
		}
		got := c.holdUpstream(cj, tc.take, tc.desired, local, map[string]string{"0/0": "rsql-b"}, now)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: starts %v, want %v", tc.name, got, tc.want)
		}
		for _, x := range tc.take {
			if _, waits := cj.wantSince[x]; waits == slices.Contains(tc.want, x) {
				t.Errorf("%s: unit %v waiting = %v", tc.name, x, waits)
			}
		}
	}
	us := []exec.Unit{u(0, "1"), u(1, "10"), u(0, "0"), u(2, "0"), u(1, "2")}
	sortDownstreamFirst(us)
	if want := []exec.Unit{u(2, "0"), u(1, "2"), u(1, "10"), u(0, "0"), u(0, "1")}; !slices.Equal(us, want) {
		t.Errorf("hand-over order %v, want %v", us, want)
	}
}
