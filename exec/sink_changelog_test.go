package exec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"rsql/connectors"
	"rsql/sql"
	"rsql/state"
)

var changelogSink = sql.Schema{
	{Name: "user_id", Type: sql.TypeVarchar},
	{Name: "n", Type: sql.TypeBigInt},
	{Name: sql.ChangeColumn, Type: sql.TypeVarchar},
}

func changeRow(user string, n int64, del bool) sql.Row {
	op := sql.Null
	if del {
		op = sql.OpDelete
	}
	return sql.Row{sql.Varchar(user), sql.BigInt(n), op}
}

func openChangelogSink(t *testing.T, ds *dedupSink, store state.Store) *sinkOp {
	t.Helper()
	f, err := connectors.NewFormat("json", changelogSink)
	if err != nil {
		t.Fatal(err)
	}
	s := &sinkOp{ctx: context.Background(), sink: ds, format: f, keyCols: []int{0}, fold: true, cnt: &counters{}, what: "out"}
	s.eo = &outbox{job: "j", stage: 1, store: store, ds: ds}
	if err := s.eo.recover(context.Background(), s, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkpointAndCommit stores the epoch's outbox and, when publish, writes it out.
func checkpointAndCommit(t *testing.T, s *sinkOp, store state.Store, epoch int64, publish bool) {
	t.Helper()
	c := &Control{Kind: Checkpoint, Epoch: epoch, State: &state.Batch{}}
	if err := s.Control(c); err != nil {
		t.Fatal(err)
	}
	if err := store.Write(c.State); err != nil {
		t.Fatal(err)
	}
	if publish {
		if err := s.committed(epoch); err != nil {
			t.Fatal(err)
		}
	}
}

// The exactly-once sink of an updating query writes one change per key and epoch: the
// key's last (a row, or a delete), in the order keys first changed; a key that changes
// again in the next epoch is written again; a crash in the middle of publishing an epoch
// leaves, after recovery, each folded change in the sink once.
func TestSinkFoldsChangesPerEpoch(t *testing.T) {
	store := state.NewMemory()
	ds := &dedupSink{}
	s := openChangelogSink(t, ds, store)
	// Epoch 1, over several batches: u1 counts to 1000 (the upsert of each count), u2 is
	// inserted and then deleted, u3 deleted then inserted again, u4 once.
	var b []*Batch
	for n := int64(1); n <= 1000; n++ {
		rows := []sql.Row{changeRow("u1", n, false)}
		switch n {
		case 1:
			rows = append(rows, changeRow("u2", 1, false), changeRow("u3", 5, true))
		case 500:
			rows = append(rows, changeRow("u2", 1, true), changeRow("u3", 6, false), changeRow("u4", 7, false))
		}
		b = append(b, &Batch{Split: "0", Rows: rows})
	}
	for _, x := range b {
		if err := s.Process(x); err != nil {
			t.Fatal(err)
		}
	}
	if len(ds.msgs) != 0 {
		t.Fatal("changes written before their checkpoint committed")
	}
	want := []string{`u1 {"user_id":"u1","n":1000}`, `u2 {"user_id":"u2","n":1,"__op":"delete"}`,
		`u3 {"user_id":"u3","n":6}`, `u4 {"user_id":"u4","n":7}`}
	// What the outbox holds back is the folded changes, not the thousand.
	held := 0
	for _, w := range want {
		held += len(w) - 1
	}
	if s.eo.pendingBytes != held {
		t.Fatalf("the outbox counts %d bytes held back, want %d", s.eo.pendingBytes, held)
	}
	checkpointAndCommit(t, s, store, 1, true)
	if got := keyedBodies(ds); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("epoch 1 wrote\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if want := "j/1.0/0 j/1.0/1 j/1.0/2 j/1.0/3"; strings.Join(ds.ids, " ") != want {
		t.Fatalf("ids %v, want %s", ds.ids, want)
	}

	// Epoch 2: u4 changes twice, u1 is deleted; the checkpoint commits, and the process
	// crashes after writing only the first change.
	for _, rows := range [][]sql.Row{{changeRow("u4", 8, false), changeRow("u1", 1000, true)}, {changeRow("u4", 9, false)}} {
		if err := s.Process(&Batch{Split: "0", Rows: rows}); err != nil {
			t.Fatal(err)
		}
	}
	checkpointAndCommit(t, s, store, 2, false)
	staged := s.eo.staged[0].msgs
	if len(staged) != 2 {
		t.Fatalf("epoch 2 holds %d changes, want 2 (u4, u1)", len(staged))
	}
	setIDs(staged[:1], "j", 2, "0", false)
	if err := ds.Write(context.Background(), staged[:1]); err != nil {
		t.Fatal(err)
	}
	s2 := openChangelogSink(t, ds, store)
	want = append(want, `u4 {"user_id":"u4","n":9}`, `u1 {"user_id":"u1","n":1000,"__op":"delete"}`)
	if got := keyedBodies(ds); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after recovery the sink holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The next epoch folds afresh, and recovery's entries are deleted.
	if err := s2.Process(&Batch{Split: "0", Rows: []sql.Row{changeRow("u1", 1, false)}}); err != nil {
		t.Fatal(err)
	}
	checkpointAndCommit(t, s2, store, 3, true)
	if got := keyedBodies(ds); got[len(got)-1] != `u1 {"user_id":"u1","n":1}` || len(got) != len(want)+1 {
		t.Fatalf("epoch 3: %v", got)
	}
	checkpointAndCommit(t, s2, store, 4, true)
	if n := countKeys(store, state.OperatorPrefix(nil, "j", "out1")); n != 0 {
		t.Fatalf("%d outbox entries left", n)
	}
}

// An append-only sink is not folded: rows of one key all reach the sink.
func TestAppendOnlySinkDoesNotFold(t *testing.T) {
	store := state.NewMemory()
	ds := &dedupSink{}
	s := openChangelogSink(t, ds, store)
	s.fold = false
	if err := s.Process(&Batch{Split: "0", Rows: []sql.Row{changeRow("u1", 1, false), changeRow("u1", 2, false)}}); err != nil {
		t.Fatal(err)
	}
	checkpointAndCommit(t, s, store, 1, true)
	if len(ds.msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(ds.msgs))
	}
}

// Without exactly-once output the changes are folded within each batch.
func TestSinkFoldsChangesPerBatch(t *testing.T) {
	ds := &dedupSink{}
	f, _ := connectors.NewFormat("csv", changelogSink)
	s := &sinkOp{ctx: context.Background(), sink: ds, format: f, keyCols: []int{0, 1}, fold: true, cnt: &counters{}, what: "out"}
	// A retraction: the old row's delete, then the new row; keys are (user_id, n), and
	// "a|b",1 and "a","b|1" must stay apart although their message keys are alike.
	rows := []sql.Row{changeRow("a|b", 1, true), changeRow("a|b", 1, false), changeRow("a", 0, false), changeRow("a", 0, true)}
	rows = append(rows, sql.Row{sql.Varchar("a"), sql.Null, sql.Null})
	if err := s.Process(&Batch{Rows: rows}); err != nil {
		t.Fatal(err)
	}
	got := keyedBodies(ds)
	want := []string{"a|b|1 a|b,1,", "a|0 a,0,delete", "a|NULL a,,"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func keyedBodies(ds *dedupSink) []string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make([]string, len(ds.msgs))
	for i, m := range ds.msgs {
		out[i] = string(m.Key) + " " + string(m.Body)
	}
	return out
}
