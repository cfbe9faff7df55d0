package exec

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// lastRows is an Emitter that keeps the last row emitted per first column, rendered.
type lastRows map[string]string

func (l lastRows) Emit(b *Batch) error {
	for _, r := range b.Rows {
		parts := ""
		for i, v := range r {
			if i > 0 {
				parts += ","
			}
			parts += v.String()
		}
		l[r[0].String()] = parts
	}
	return nil
}

// COUNT(DISTINCT) state is incremental: a checkpoint writes only the values added since
// the previous one (a chunk under a key of its own), a restore reads them back, and a fired
// window deletes every chunk.
func TestDistinctStateIncremental(t *testing.T) {
	forEachStore(t, func(t *testing.T, store state.Store) {
		var cnt counters
		w := planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000}
		aggs := []planner.AggSpec{
			builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
			builtinAgg("COUNT(DISTINCT)", col(3), sql.TypeBigInt, sql.TypeBigInt),
			builtinAgg("COUNT(DISTINCT)", col(1), sql.TypeVarchar, sql.TypeBigInt),
		}
		node := &planner.AggregateNode{Window: w, Keys: []planner.Evaluator{col(0)}, Aggs: aggs, Emit: planner.EmitOnClose}
		row := func(u string, s string, ts, n int64) sql.Row {
			return sql.Row{sql.Varchar(u), sql.Varchar(s), sql.Timestamp(ts), sql.BigInt(n)}
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		// puts counts a checkpoint's group values and the distinct values in its chunks.
		puts := func(b *state.Batch) (groups, values int) {
			must(b.Each(func(kind state.OpKind, k, v []byte) error {
				if kind != state.OpPut {
					return nil
				}
				if _, _, _, _, err := decodeGroupState(v, 1, 3); err == nil {
					groups++
					return nil
				}
				accs := make([]accum, 3)
				if err := addDistinctChunk(accs, k[len(k)-5:], v, nil); err != nil {
					return err
				}
				for _, a := range accs {
					values += a.Set.Len()
				}
				return nil
			}))
			return
		}
		out := lastRows{}
		a := newOpChain(out, newAggOp(node, "j", "agg", store, nil, &cnt))
		must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
		var rows []sql.Row
		for i := int64(0); i < 300; i++ {
			rows = append(rows, row("u", fmt.Sprint("s", i%7), 10+i, i%100))
		}
		must(a.Process(&Batch{Split: "s", Rows: rows}))
		c1 := &Control{Kind: Checkpoint, Epoch: 1, State: &state.Batch{}}
		must(a.Control(c1))
		if g, v := puts(c1.State); g != 1 || v != 100+7 {
			t.Fatalf("first checkpoint put %d groups and %d distinct values, want 1 and 107", g, v)
		}
		must(store.Write(c1.State))
		// Values already saved are not written again, only the new one of each set.
		must(a.Process(&Batch{Split: "s", Rows: []sql.Row{row("u", "s3", 500, 5), row("u", "new", 501, 999)}}))
		c2 := &Control{Kind: Checkpoint, Epoch: 2, State: &state.Batch{}}
		must(a.Control(c2))
		if g, v := puts(c2.State); g != 1 || v != 1+1 {
			t.Fatalf("second checkpoint put %d groups and %d distinct values, want 1 and 2", g, v)
		}
		must(store.Write(c2.State))
		// A fresh operator restores the sets from the store and goes on counting.
		b := newOpChain(out, newAggOp(node, "j", "agg", store, nil, &cnt))
		must(b.Control(&Control{Kind: NewSplit, Split: "s"}))
		must(b.Process(&Batch{Split: "s", Rows: []sql.Row{row("u", "s1", 600, 1), row("u", "newer", 601, 1000)}}))
		must(b.Watermark("s", MaxWatermark))
		if got, want := out["u"], "u,1970-01-01T00:00:00.000Z,1970-01-01T00:00:01.000Z,304,102,9"; got != want {
			t.Fatalf("restored window emitted %q, want %q", got, want)
		}
		// Firing deletes the group and every distinct value at the next checkpoint.
		c3 := &Control{Kind: Checkpoint, Epoch: 3, State: &state.Batch{}}
		must(b.Control(c3))
		must(store.Write(c3.State))
		n := 0
		must(store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error { n++; return nil }))
		if n != 0 {
			t.Fatalf("%d keys left after the window fired", n)
		}
	})
}

// A distinct chunk whose group is missing from the store fails the restore with a state
// error instead of being dropped.
func TestDistinctValueWithoutGroup(t *testing.T) {
	key := state.Key(nil, "j", "agg", "s", sql.AppendRow(nil, []sql.Value{sql.Varchar("u")}), 0, 1000)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	node := &planner.AggregateNode{Window: planner.WindowSpec{Kind: planner.WindowTumble, Time: 2, Size: 1000},
		Keys: []planner.Evaluator{col(0)}, Aggs: []planner.AggSpec{builtinAgg("COUNT(DISTINCT)", col(3), sql.TypeBigInt, sql.TypeBigInt)}}
	// A set's own chunk (earlier versions), then a chunk of the group's sets.
	for _, kv := range [][2][]byte{{distinctKey(nil, key, 0, 0), {2, 3, 6}}, {groupChunkKey(nil, key, 1, 0), {0, 3, 2, 3, 6}}} {
		store := state.NewMemory()
		must(store.Put(kv[0], kv[1]))
		var cnt counters
		a := newAggOp(node, "j", "agg", store, nil, &cnt)
		err := a.Control(&Control{Kind: NewSplit, Split: "s"}, &discard{})
		var se *StateError
		if !errors.As(err, &se) || !errors.Is(err, errBadState) {
			t.Fatalf("restore: %v, want a StateError wrapping errBadState", err)
		}
	}
}

// A set that changes at every checkpoint is rewritten as one chunk after maxDistinctChunks
// checkpoints (less the group's jitter), and restores whole from the chunks the store
// holds at any point.
func TestDistinctChunksCompact(t *testing.T) {
	store := state.NewMemory()
	var cnt counters
	node := countDistinctNode()
	must := fatalOn(t)
	chunks := func() int {
		n := 0
		must(store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error { n++; return nil }))
		return n - 1 // the group's own key
	}
	a := newOpChain(&discard{}, newAggOp(node, "j", "agg", store, nil, &cnt))
	must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
	// More values than a set always written whole holds.
	const initial = 64
	var first []sql.Row
	for i := int64(0); i < initial; i++ {
		first = append(first, sql.Row{sql.Varchar("u"), sql.Null, sql.Null, sql.BigInt(-1 - i)})
	}
	must(a.Process(&Batch{Split: "s", Rows: first}))
	most := 0
	for i := int64(0); i < 3*maxDistinctChunks; i++ {
		must(a.Process(&Batch{Split: "s", Rows: []sql.Row{{sql.Varchar("u"), sql.Null, sql.Null, sql.BigInt(i)}, {sql.Varchar("u"), sql.Null, sql.Null, sql.BigInt(0)}}}))
		c := &Control{Kind: Checkpoint, Epoch: i + 1, State: &state.Batch{}}
		must(a.Control(c))
		must(store.Write(c.State))
		n := chunks()
		if n < 1 || n > maxDistinctChunks {
			t.Fatalf("after checkpoint %d: %d chunks", i+1, n)
		}
		most = max(most, n)
		if i%7 == 3 {
			out := lastRows{}
			b := newOpChain(out, newAggOp(node, "j", "agg", store, nil, &cnt))
			must(b.Control(&Control{Kind: NewSplit, Split: "s"}))
			must(b.Watermark("s", MaxWatermark))
			if got, want := out["u"], fmt.Sprintf("u,%d", initial+i+1); got != want {
				t.Fatalf("restored after checkpoint %d: %q, want %q", i+1, got, want)
			}
		}
	}
	if most <= maxDistinctChunks-chunkJitter || most > maxDistinctChunks {
		t.Fatalf("at most %d chunks, want the set written in chunks up to %d to %d", most, maxDistinctChunks-chunkJitter+1, maxDistinctChunks)
	}
}

func FuzzParseDistinctKey(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 3}, 2)
	f.Add([]byte{1, 0, 0, 1, 0}, 2)
	f.Add([]byte{9}, 1)
	f.Fuzz(func(t *testing.T, rest []byte, na int) {
		if na <= 0 || na > 64 {
			return
		}
		j, c, err := parseDistinctKey(rest, na)
		if err != nil {
			if !errors.Is(err, errBadState) {
				t.Fatalf("error %v does not wrap errBadState", err)
			}
			return
		}
		if j < 0 || j > na || c < 0 {
			t.Fatalf("parsed index %d of %d, chunk %d", j, na, c)
		}
	})
}

func FuzzDistinctChunk(f *testing.F) {
	var d sql.DistinctSet
	d.Add(sql.BigInt(7))
	d.Add(sql.Varchar("x"))
	f.Add(d.FreshChunk())
	f.Add([]byte{2, 3, 6})
	f.Add([]byte{5, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var set sql.DistinctSet
		if err := set.AddChunk(b); err != nil {
			if !errors.Is(err, sql.ErrCorrupt) {
				t.Fatalf("error %v does not wrap sql.ErrCorrupt", err)
			}
			return
		}
		// What decoded re-encodes into a chunk that decodes to the same set.
		var again sql.DistinctSet
		if err := again.AddChunk(set.AppendChunk(nil)); err != nil || again.Len() != set.Len() {
			t.Fatalf("re-encoded chunk: %v, %d values, want %d", err, again.Len(), set.Len())
		}
	})
}

// pagedRows keeps each row where it was put across page boundaries, truncation and reset.
func TestPagedRows(t *testing.T) {
	for _, width := range []int{0, 1, 3} {
		r := newPagedRows[int64](width)
		n := 3*pageRows + 5
		for i := 0; i < n; i++ {
			row := r.add()
			for k := range row {
				row[k] = int64(i*10 + k)
			}
		}
		check := func(upto int) {
			t.Helper()
			if r.n != upto {
				t.Fatalf("width %d: %d rows, want %d", width, r.n, upto)
			}
			for i := 0; i < upto; i++ {
				row := r.at(i)
				if len(row) != width {
					t.Fatalf("width %d: row %d has %d values", width, i, len(row))
				}
				for k, v := range row {
					if v != int64(i*10+k) {
						t.Fatalf("width %d: row %d value %d is %d", width, i, k, v)
					}
				}
			}
		}
		check(n)
		r.truncate(pageRows + 1)
		check(pageRows + 1)
		if width > 0 && len(r.pages) != 2 {
			t.Fatalf("width %d: %d pages after truncating to one row past the first page", width, len(r.pages))
		}
		row := r.add()
		for k := range row {
			row[k] = int64((pageRows+1)*10 + k)
		}
		check(pageRows + 2)
		r.reset()
		check(0)
		if row := r.add(); len(row) != width || width > 0 && row[0] != 0 {
			t.Fatalf("width %d: row after reset %v", width, row)
		}
	}
}

// A set that grows fast is rewritten as one chunk only when it has at least doubled since it
// was last written whole (not every compactDistinctChunks checkpoints), and restores whole
// from the chunks the store holds at any point.
func TestDistinctChunksGrowing(t *testing.T) {
	store := state.NewMemory()
	var cnt counters
	node := countDistinctNode()
	must := fatalOn(t)
	chunks := func() int {
		n := 0
		must(store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error { n++; return nil }))
		return n - 1 // the group's own key
	}
	a := newOpChain(&discard{}, newAggOp(node, "j", "agg", store, nil, &cnt))
	must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
	const per = 8 // new values per checkpoint
	next := int64(0)
	add := func(n int) {
		var rows []sql.Row
		for ; n > 0; n-- {
			rows = append(rows, sql.Row{sql.Varchar("u"), sql.Null, sql.Null, sql.BigInt(next)}, sql.Row{sql.Varchar("u"), sql.Null, sql.Null, sql.BigInt(0)})
			next++
		}
		must(a.Process(&Batch{Split: "s", Rows: rows}))
	}
	add(64)
	most, rewrites, prev, whole := 0, 0, 0, int64(0)
	for i := int64(0); i < 100; i++ {
		add(per)
		c := &Control{Kind: Checkpoint, Epoch: i + 1, State: &state.Batch{}}
		must(a.Control(c))
		must(store.Write(c.State))
		n := chunks()
		if n < 1 || n > maxDistinctChunks {
			t.Fatalf("after checkpoint %d: %d chunks", i+1, n)
		}
		if n < prev {
			if next < 2*whole && prev < maxDistinctChunks-chunkJitter {
				t.Fatalf("checkpoint %d rewrote the set at %d values, %d chunks: last written whole at %d", i+1, next, prev, whole)
			}
			rewrites++
		}
		if n == 1 {
			whole = next
		}
		most, prev = max(most, n), n
		if i%7 == 3 {
			out := lastRows{}
			b := newOpChain(out, newAggOp(node, "j", "agg", store, nil, &cnt))
			must(b.Control(&Control{Kind: NewSplit, Split: "s"}))
			must(b.Watermark("s", MaxWatermark))
			if got, want := out["u"], fmt.Sprintf("u,%d", next); got != want {
				t.Fatalf("restored after checkpoint %d: %q, want %q", i+1, got, want)
			}
		}
	}
	// 72 values written first, 872 at the end: rewritten two or three times as it doubles.
	if rewrites < 2 || rewrites > 3 || most < compactDistinctChunks-chunkJitter {
		t.Fatalf("%d rewrites, at most %d chunks; want 2 or 3 rewrites, at least %d chunks between them", rewrites, most, compactDistinctChunks-chunkJitter)
	}
}

// A group stored by earlier versions, each set in chunks of its own, restores, and its next
// save writes its sets together as one chunk and deletes the old chunks.
func TestDistinctSetChunksOfEarlierVersions(t *testing.T) {
	store := state.NewMemory()
	var cnt counters
	node := &planner.AggregateNode{Keys: []planner.Evaluator{col(0)}, Emit: planner.EmitOnClose,
		Aggs: []planner.AggSpec{builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
			builtinAgg("COUNT(DISTINCT)", col(3), sql.TypeBigInt, sql.TypeBigInt),
			builtinAgg("COUNT(DISTINCT)", col(1), sql.TypeVarchar, sql.TypeBigInt)}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	keys := []sql.Value{sql.Varchar("u")}
	gk := state.Key(nil, "j", "agg", "s", sql.AppendRow(nil, keys), 0, 0)
	accs := make([]accum, 3)
	accs[0].N = 5
	must(store.Put(gk, appendGroupState(nil, keys, 0, 0, accs)))
	// Set 1 in two chunks, set 2 in one.
	var d1a, d1b, d2 sql.DistinctSet
	d1a.Add(sql.BigInt(1))
	d1a.Add(sql.BigInt(2))
	d1b.Add(sql.BigInt(3))
	d2.Add(sql.Varchar("x"))
	must(store.Put(distinctKey(nil, gk, 1, 0), d1a.FreshChunk()))
	must(store.Put(distinctKey(nil, gk, 1, 1), d1b.FreshChunk()))
	must(store.Put(distinctKey(nil, gk, 2, 0), d2.FreshChunk()))
	out := lastRows{}
	a := newOpChain(out, newAggOp(node, "j", "agg", store, nil, &cnt))
	must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
	must(a.Process(&Batch{Split: "s", Rows: []sql.Row{{sql.Varchar("u"), sql.Varchar("y"), sql.Null, sql.BigInt(2)}}}))
	c := &Control{Kind: Checkpoint, Epoch: 1, State: &state.Batch{}}
	must(a.Control(c))
	must(store.Write(c.State))
	var stored []string
	must(store.Scan(state.SplitPrefix(nil, "j", "agg", "s"), func(k, v []byte) error {
		if len(k) > len(gk) {
			j, ch, err := parseDistinctKey(k[len(gk):], 3)
			if err != nil {
				return err
			}
			stored = append(stored, fmt.Sprintf("%d/%d", j, ch))
		}
		return nil
	}))
	if fmt.Sprint(stored) != "[3/0]" {
		t.Fatalf("distinct chunks stored after the save: %v, want the group's chunk 0 alone (3/0)", stored)
	}
	b := newOpChain(out, newAggOp(node, "j", "agg", store, nil, &cnt))
	must(b.Control(&Control{Kind: NewSplit, Split: "s"}))
	must(b.Watermark("s", MaxWatermark))
	if got, want := out["u"], "u,6,3,2"; got != want {
		t.Fatalf("restored after the rewrite: %q, want %q", got, want)
	}
}

// Groups that change at every checkpoint and grow alike do not rewrite their chunks at the
// same checkpoint: the jitter spreads the rewrites.
func TestDistinctChunkRewritesSpread(t *testing.T) {
	store := state.NewMemory()
	var cnt counters
	node := countDistinctNode()
	must := fatalOn(t)
	a := newOpChain(&discard{}, newAggOp(node, "j", "agg", store, nil, &cnt))
	must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
	const groups = 64
	next := int64(0)
	add := func(per int) {
		var rows []sql.Row
		for g := range groups {
			for range per {
				rows = append(rows, sql.Row{sql.Varchar(fmt.Sprint("g", g)), sql.Null, sql.Null, sql.BigInt(next)})
				next++
			}
		}
		must(a.Process(&Batch{Split: "s", Rows: rows}))
	}
	add(20)
	most, total := 0, 0
	for cp := int64(1); cp <= 150; cp++ {
		add(1)
		c := &Control{Kind: Checkpoint, Epoch: cp, State: &state.Batch{}}
		must(a.Control(c))
		rewrites := 0
		must(c.State.Each(func(kind state.OpKind, k, v []byte) error {
			if kind == state.OpPut && k[len(k)-5] == 1 && k[len(k)-1] == 0 && k[len(k)-2] == 0 {
				rewrites++ // chunk 0 of a group
			}
			return nil
		}))
		must(store.Write(c.State))
		if cp > 1 {
			most, total = max(most, rewrites), total+rewrites
		}
	}
	if total < groups || most > groups/2 {
		t.Fatalf("%d rewrites in all, at most %d at one checkpoint, of %d groups: want them rewritten, spread", total, most, groups)
	}
}

// A chunk of a group's sets either decodes or fails with a state error; what decodes
// re-encodes to the same sets.
func FuzzGroupChunk(f *testing.F) {
	var d sql.DistinctSet
	d.Add(sql.BigInt(7))
	d.Add(sql.Varchar("x"))
	ch := d.FreshChunk()
	f.Add(append([]byte{1, byte(len(ch))}, ch...))
	f.Add([]byte{0, 3, 2, 3, 6})
	f.Add([]byte{2, 1})
	family := &distinctFamilies{fams: [][]int{{0, 1}}, of: []famRole{{0, 0}, {0, 1}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fams := range []*distinctFamilies{nil, family} {
			accs := make([]accum, 2)
			key := groupChunkKey(nil, nil, 2, 0)
			if err := addDistinctChunk(accs, key, b, fams); err != nil {
				if !errors.Is(err, errBadState) {
					t.Fatalf("error %v does not wrap errBadState", err)
				}
				return
			}
			for j := range accs {
				set := accs[j].Set
				if set == nil {
					continue
				}
				if fams != nil {
					if j != 0 || set.Members() != 2 {
						t.Fatalf("set %d of %d members in a family's accumulators", j, set.Members())
					}
					for m := range 2 {
						var again sql.DistinctSet
						if err := again.AddChunk(set.AppendMemberChunk(nil, m)); err != nil || again.Len() != set.MemberLen(m) {
							t.Fatalf("member %d re-encoded: %v, %d values, want %d", m, err, again.Len(), set.MemberLen(m))
						}
					}
					continue
				}
				var again sql.DistinctSet
				if err := again.AddChunk(set.AppendChunk(nil)); err != nil || again.Len() != set.Len() {
					t.Fatalf("set %d re-encoded: %v, %d values, want %d", j, err, again.Len(), set.Len())
				}
			}
		}
	})
}

// countDistinctNode is a window-less aggregation by column 0 of COUNT(DISTINCT column 3),
// emitting at the end.
func countDistinctNode() *planner.AggregateNode {
	return &planner.AggregateNode{Keys: []planner.Evaluator{col(0)}, Emit: planner.EmitOnClose,
		Aggs: []planner.AggSpec{builtinAgg("COUNT(DISTINCT)", col(3), sql.TypeBigInt, sql.TypeBigInt)}}
}

// fatalOn returns a function that fails t on a non-nil error.
func fatalOn(t *testing.T) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The COUNT(DISTINCT) calls of a family (agg_family.go) keep their values in one set and
// answer as each would alone: an aggregation without a window and one with a tumbling
// window, whose groups checkpoint (and without a window leave the cache of 4 groups and are
// read back),
// and restore from their stored state with families and without them in turn (the stored
// form is each call's own), give each user's counts as a Go map computes them.
func TestDistinctFamiliesMatchOwnSets(t *testing.T) {
	// Rows: user, its amount, ts, n (NULL in a few).
	even := func(r sql.Row) sql.Value {
		if r[3].K != sql.KindNull && r[3].I%2 == 0 {
			return r[3]
		}
		return sql.Null
	}
	big := func(r sql.Row) sql.Value {
		if r[1].F() >= 0.7 {
			return r[3]
		}
		return sql.Null
	}
	aggs := []planner.AggSpec{
		builtinAgg("COUNT(DISTINCT)", col(3), sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("COUNT(*)", nil, sql.TypeNull, sql.TypeBigInt),
		builtinAgg("COUNT(DISTINCT)", even, sql.TypeBigInt, sql.TypeBigInt),
		builtinAgg("COUNT(DISTINCT)", col(0), sql.TypeVarchar, sql.TypeBigInt),
		builtinAgg("COUNT(DISTINCT)", big, sql.TypeBigInt, sql.TypeBigInt),
	}
	filters := []func(sql.Row) sql.Value{col(3), even, big} // the family's members, in order
	for _, window := range []planner.WindowSpec{{}, {Kind: planner.WindowTumble, Time: 2, Size: 1_000_000}} {
		t.Run(fmt.Sprint(window.Kind), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, store state.Store) {
				must := fatalOn(t)
				var cnt counters
				node := func(fams bool) *planner.AggregateNode {
					n := &planner.AggregateNode{Window: window, Keys: []planner.Evaluator{col(0)}, KeyTypes: []sql.Type{sql.TypeVarchar}, Aggs: aggs, Emit: planner.EmitOnClose}
					if fams {
						n.Families = [][]int{{0, 2, 4}}
					}
					return n
				}
				rng := rand.New(rand.NewSource(3))
				want := map[string][]map[int64]bool{} // user → member → values
				var epoch int64
				var a *opChain
				var op *aggOp
				for round := range 8 {
					fams := round%2 == 0
					op = newAggOp(node(fams), "j", "agg", store, nil, &cnt)
					if (op.fams != nil) != fams {
						t.Fatalf("round %d: families %v, want %v", round, op.fams != nil, fams)
					}
					if window.Kind == planner.WindowNone {
						op.cacheMax = 4 // (a bounded cache is for aggregations without a window)
					}
					a = newOpChain(&discard{}, op)
					must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
					for range 3 {
						var rows []sql.Row
						for range 500 {
							u := fmt.Sprintf("u%d", rng.Intn(10))
							var n sql.Value = sql.Null
							if rng.Intn(20) > 0 {
								n = sql.BigInt(rng.Int63n(int64(300 * (round + 1)))) // the sets grow past the packed slice
							}
							r := sql.Row{sql.Varchar(u), sql.Double(rng.Float64()), sql.Timestamp(1000), n}
							rows = append(rows, r)
							if want[u] == nil {
								want[u] = []map[int64]bool{{}, {}, {}}
							}
							for m, f := range filters {
								if v := f(r); v.K != sql.KindNull {
									want[u][m][v.I] = true
								}
							}
						}
						must(a.Process(&Batch{Split: "s", Rows: rows}))
						epoch++
						c := &Control{Kind: Checkpoint, Epoch: epoch, State: &state.Batch{}}
						must(a.Control(c))
						must(store.Write(c.State))
					}
				}
				out := lastRows{}
				op = newAggOp(node(true), "j", "agg", store, nil, &cnt)
				a = newOpChain(out, op)
				must(a.Control(&Control{Kind: NewSplit, Split: "s"}))
				must(a.Watermark("s", MaxWatermark))
				for u, sets := range want {
					got := strings.Split(out[u], ",")
					res := got[len(got)-5:]
					exp := []string{fmt.Sprint(len(sets[0])), "", fmt.Sprint(len(sets[1])), "1", fmt.Sprint(len(sets[2]))}
					for j, e := range exp {
						if e != "" && res[j] != e {
							t.Errorf("%s: aggregate %d is %s, want %s (row %s)", u, j, res[j], e, out[u])
						}
					}
				}
				if len(out) != len(want) {
					t.Errorf("%d rows, want %d", len(out), len(want))
				}
			})
		})
	}
}
