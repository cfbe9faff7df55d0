package exec

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

type joinedRows struct{ rows []string }

func (e *joinedRows) Emit(b *Batch) error {
	for _, r := range b.Rows {
		var f []string
		for _, v := range r {
			f = append(f, v.String())
		}
		e.rows = append(e.rows, strings.Join(f, ","))
	}
	return nil
}

// A regular inner join on column 0 of two-column rows, without event-time columns (rows
// take the watermark as their time), keeping rows for ttl.
func regularJoinNode(ttl int64) *planner.JoinNode {
	col0 := func(r sql.Row) sql.Value { return r[0] }
	return &planner.JoinNode{Kind: sql.JoinInner, Mode: planner.JoinRegular,
		LeftKeys: []planner.Evaluator{col0}, RightKeys: []planner.Evaluator{col0},
		LeftTime: -1, RightTime: -1, AsOf: -1, RightOp: -1, TTL: ttl, LeftWidth: 2, RightWidth: 2}
}

func joinCheckpoint(t *testing.T, j *joinOp, store state.Store) *state.Batch {
	t.Helper()
	b := &state.Batch{}
	if err := j.Control(&Control{Kind: Checkpoint, State: b}, nil); err != nil {
		t.Fatal(err)
	}
	if err := store.Write(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// laggingCommits checkpoints an operator as its stage does: a checkpoint's batch is
// written to the store (its commit) at some later moment, rows being processed meanwhile,
// and at the latest before the next checkpoint is taken (a stage waits for the commit of
// its last checkpoint before it takes the next, exec/commit.go).
type laggingCommits struct {
	store   state.Store
	rng     *rand.Rand
	pending *state.Batch
}

// checkpoint commits the pending checkpoint, then takes one of op, which stays pending.
func (l *laggingCommits) checkpoint(t *testing.T, op Operator) {
	t.Helper()
	l.commit(t)
	b := &state.Batch{}
	if err := op.Control(&Control{Kind: Checkpoint, State: b}, nil); err != nil {
		t.Fatal(err)
	}
	l.pending = b
}

// step commits the pending checkpoint now and then (after a row).
func (l *laggingCommits) step(t *testing.T) {
	if l.pending != nil && l.rng.Intn(4) == 0 {
		l.commit(t)
	}
}

// commit writes the pending checkpoint's batch to the store.
func (l *laggingCommits) commit(t *testing.T) {
	t.Helper()
	if l.pending == nil {
		return
	}
	if err := l.store.Write(l.pending); err != nil {
		t.Fatal(err)
	}
	l.pending = nil
}

func leftRows(key string, from, to int) *Batch {
	b := &Batch{Split: "s"}
	for i := from; i < to; i++ {
		b.Rows = append(b.Rows, sql.Row{sql.Varchar(key), sql.BigInt(int64(i))})
	}
	return b
}

// A key's rows are saved in chunks: a checkpoint after rows were appended writes only the
// new rows (a hot key costs each checkpoint its new rows, not all it holds), a removal
// rewrites the key, and a join restored from any of these states has exactly the rows it
// had.
func TestJoinStateChunks(t *testing.T) {
	store := state.NewMemory()
	j := newJoinOp(regularJoinNode(1500), "job", "op", store, nil, &counters{})
	out := &joinedRows{}
	if err := j.Watermark("s", 1000, out); err != nil {
		t.Fatal(err)
	}
	if err := j.Process(0, leftRows("hot", 0, 200), out); err != nil {
		t.Fatal(err)
	}
	first := joinCheckpoint(t, j, store)
	if err := j.Watermark("s", 2000, out); err != nil {
		t.Fatal(err)
	}
	if err := j.Process(0, leftRows("hot", 200, 201), out); err != nil {
		t.Fatal(err)
	}
	second := joinCheckpoint(t, j, store)
	if second.Len() != 1 || second.Size()*20 > first.Size() {
		t.Fatalf("one appended row: the checkpoint has %d operations, %d bytes (the first, of 200 rows: %d bytes)",
			second.Len(), second.Size(), first.Size())
	}

	// restored probes a join restored from the store with a right row of key "hot" and
	// returns the left rows' values it matched.
	restored := func() []string {
		t.Helper()
		r := newJoinOp(regularJoinNode(1500), "job", "op", store, nil, &counters{})
		if err := r.Control(&Control{Kind: NewSplit, Split: "s"}, nil); err != nil {
			t.Fatal(err)
		}
		o := &joinedRows{}
		if err := r.Process(1, &Batch{Split: "s", Rows: []sql.Row{{sql.Varchar("hot"), sql.BigInt(-1)}}}, o); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, row := range o.rows {
			got = append(got, strings.Split(row, ",")[1])
		}
		sort.Strings(got)
		return got
	}
	want := func(from, to int) []string {
		var w []string
		for i := from; i < to; i++ {
			w = append(w, fmt.Sprint(i))
		}
		sort.Strings(w)
		return w
	}
	if got := restored(); strings.Join(got, " ") != strings.Join(want(0, 201), " ") {
		t.Fatalf("restored from two chunks: %d rows %v", len(got), got)
	}

	// The 200 rows of time 1000 expire (TTL 1500 at watermark 3000), the row of 2000 stays:
	// the key is rewritten as one chunk and the second chunk deleted.
	if err := j.Watermark("s", 3000, out); err != nil {
		t.Fatal(err)
	}
	third := joinCheckpoint(t, j, store)
	puts, dels := 0, 0
	if err := third.Each(func(kind state.OpKind, _, _ []byte) error {
		if kind == state.OpPut {
			puts++
		} else {
			dels++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if puts != 1 || dels != 1 {
		t.Fatalf("rewrite after removals: %d puts, %d deletes, want 1 and 1", puts, dels)
	}
	if got := restored(); strings.Join(got, " ") != "200" {
		t.Fatalf("restored after the rewrite: %v, want [200]", got)
	}

	// Appends after a rewrite go to a new chunk again; the key's rows expire at last and
	// every chunk is deleted.
	if err := j.Process(0, leftRows("hot", 201, 203), out); err != nil {
		t.Fatal(err)
	}
	joinCheckpoint(t, j, store)
	if got := restored(); strings.Join(got, " ") != "200 201 202" {
		t.Fatalf("restored after appending to a rewritten key: %v", got)
	}
	if err := j.Watermark("s", 9000, out); err != nil {
		t.Fatal(err)
	}
	joinCheckpoint(t, j, store)
	if got := restored(); len(got) != 0 {
		t.Fatalf("restored after every row expired: %v", got)
	}
	n := 0
	if err := store.Scan(state.SplitPrefix(nil, "job", "op", "s"), func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d entries left in the store after every row expired", n)
	}
}

// Rows removed from a key's list (expired) are matched no more, whether or not the list
// has been compacted yet, and no longer count as state.
func TestJoinRemovedRowsNotMatched(t *testing.T) {
	j := newJoinOp(regularJoinNode(1500), "job", "op", nil, nil, &counters{})
	out := &joinedRows{}
	steps := []func() error{
		func() error { return j.Watermark("s", 1000, out) },
		func() error { return j.Process(0, leftRows("k", 0, 2), out) }, // time 1000
		func() error { return j.Watermark("s", 2000, out) },
		func() error { return j.Process(0, leftRows("k", 2, 7), out) }, // time 2000
		func() error { return j.Watermark("s", 3000, out) },            // the first two expire
	}
	for _, f := range steps {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	if n := j.StateRows(); n != 5 {
		t.Fatalf("state rows %d, want 5", n)
	}
	if err := j.Process(1, &Batch{Split: "s", Rows: []sql.Row{{sql.Varchar("k"), sql.BigInt(-1)}}}, out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range out.rows {
		got = append(got, strings.Split(row, ",")[1])
	}
	sort.Strings(got)
	if strings.Join(got, " ") != "2 3 4 5 6" {
		t.Fatalf("matched %v, want the five rows that have not expired", got)
	}
}
