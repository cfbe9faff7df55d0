package exec

import (
	"fmt"
	"slices"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// A view's stage writes each epoch's changes into the checkpoint batch, folded: the keyed
// view holds each key's last row, the multiset view its rows as often as their inserts
// outnumber their deletes (also when a delete comes an epoch before its insert), the
// every-row view each row once; ReadView reads what was committed.
func TestViewRowsInTheCheckpoint(t *testing.T) {
	schema := sql.Schema{{Name: "k", Type: sql.TypeVarchar}, {Name: "v", Type: sql.TypeBigInt}, {Name: sql.ChangeColumn, Type: sql.TypeVarchar}}
	ins := func(k string, v int64) sql.Row { return sql.Row{sql.Varchar(k), sql.BigInt(v), sql.Null} }
	del := func(k string, v int64) sql.Row { return sql.Row{sql.Varchar(k), sql.BigInt(v), sql.OpDelete} }
	type epoch [][]sql.Row // per split "0" and "1"
	cases := []struct {
		name    string
		changes planner.ChangeMode
		keys    []int
		epochs  []epoch
		want    []string
	}{
		{"keyed", planner.Upsert, []int{0}, []epoch{
			{{ins("a", 1), ins("b", 1), ins("a", 2)}, {ins("c", 1)}},
			{{del("b", 1), ins("a", 3)}, {ins("c", 2)}},
		}, []string{"a 3", "c 2"}},
		{"multiset", planner.Retract, nil, []epoch{
			{{ins("a", 1), ins("a", 1), ins("b", 1)}, {del("c", 1)}},
			{{del("a", 1), del("b", 1)}, {ins("c", 1), ins("d", 1)}},
		}, []string{"a 1", "d 1"}},
		{"every row", planner.AppendOnly, nil, []epoch{
			{{ins("a", 1)[:2], ins("a", 1)[:2]}, {ins("b", 1)[:2]}},
			{{ins("a", 2)[:2]}, nil},
		}, []string{"a 1", "a 1", "a 2", "b 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := state.NewMemory()
			sch := schema
			if c.changes == planner.AppendOnly {
				sch = schema[:2]
			}
			ps := &planner.Stage{ID: 1, Sink: planner.SinkSpec{Stream: "v", Connector: "view", Schema: sch, KeyColumns: c.keys, Changes: c.changes}}
			out, err := newTableOut("job", ps, store, &counters{}, false)
			if err != nil {
				t.Fatal(err)
			}
			for i, ep := range c.epochs {
				for s, rows := range ep {
					if err := out.Process(&Batch{Split: fmt.Sprint(s), Rows: rows}); err != nil {
						t.Fatal(err)
					}
				}
				b := &state.Batch{}
				if err := out.Control(&Control{Kind: Checkpoint, Epoch: int64(i + 1), State: b}); err != nil {
					t.Fatal(err)
				}
				if err := store.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			if err := ReadView(store, "job", 4, func(r sql.Row) error {
				got = append(got, fmt.Sprintf("%s %d", r[0].S, r[1].I))
				if len(r) != 2 {
					t.Errorf("row %v has %d columns, want 2", r, len(r))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Fatalf("view rows %q, want %q", got, c.want)
			}
		})
	}
}

// A stored view entry that does not decode is an error, never a crash or a hang.
func FuzzDecodeViewEntry(f *testing.F) {
	prefix := state.SplitPrefix(nil, "job", ViewOperator(1), "0")
	row := sql.AppendRow(nil, sql.Row{sql.Varchar("a"), sql.BigInt(7)})
	f.Add(prefix, append([]byte{viewRow}, row...))
	f.Add(append(append([]byte(nil), prefix...), row...), []byte{viewCount, 4})
	f.Add([]byte{}, []byte{viewCount, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		n := 0
		_ = decodeViewEntry(k, v, func(sql.Row) error { n++; return nil })
		if n > maxViewCount {
			t.Fatalf("%d rows from one entry", n)
		}
	})
}

// A view's stage asks for a checkpoint, once, when the changes it holds for the next one
// reach viewPendingMax distinct keys, and not for many changes of a few keys; the
// checkpoint lets it ask again.
func TestViewPendingAsksForCheckpoint(t *testing.T) {
	schema := sql.Schema{{Name: "k", Type: sql.TypeBigInt}, {Name: "v", Type: sql.TypeBigInt}, {Name: sql.ChangeColumn, Type: sql.TypeVarchar}}
	ps := &planner.Stage{ID: 1, Sink: planner.SinkSpec{Stream: "v", Connector: "view", Schema: schema, KeyColumns: []int{0}, Changes: planner.Upsert}}
	out, err := newTableOut("job", ps, state.NewMemory(), &counters{}, false)
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	out.full = func() { asked++ }
	feed := func(n, keys int) {
		t.Helper()
		rows := make([]sql.Row, 0, 512)
		for i := 0; i < n; i++ {
			rows = append(rows, sql.Row{sql.BigInt(int64(i % keys)), sql.BigInt(int64(i)), sql.Null})
			if len(rows) == cap(rows) || i == n-1 {
				if err := out.Process(&Batch{Split: fmt.Sprint(i % 2), Rows: rows}); err != nil {
					t.Fatal(err)
				}
				rows = rows[:0]
			}
		}
	}
	feed(3*viewPendingMax, 10)
	if asked != 0 {
		t.Fatalf("asked for %d checkpoints for the changes of 10 keys", asked)
	}
	feed(2*viewPendingMax, 2*viewPendingMax)
	if asked != 1 {
		t.Fatalf("asked for %d checkpoints holding changes of %d keys, want 1", asked, 2*viewPendingMax)
	}
	if err := out.Control(&Control{Kind: Checkpoint, Epoch: 1, State: &state.Batch{}}); err != nil {
		t.Fatal(err)
	}
	feed(viewPendingMax+10, viewPendingMax+10)
	if asked != 2 {
		t.Fatalf("after a checkpoint: asked %d times, want 2", asked)
	}
}
