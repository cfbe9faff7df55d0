package exec

import (
	"fmt"
	"slices"
	"testing"

	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// countingStore counts what a reader of the store does: Gets, Scans, and the entries the
// scans visit under each operator.
type countingStore struct {
	state.Store
	gets, scans int
	visited     map[string]int // operator -> entries
}

func (s *countingStore) Get(k []byte) ([]byte, bool, error) {
	s.gets++
	return s.Store.Get(k)
}

func (s *countingStore) Scan(prefix []byte, fn func(k, v []byte) error) error {
	s.scans++
	return s.Store.Scan(prefix, func(k, v []byte) error {
		_, op, _, _, _ := state.KeyParts(k)
		s.visited[string(op)]++
		return fn(k, v)
	})
}

// keyedView writes a view keyed by (k INT, s VARCHAR) with n keys (k = 0..n-1, s = "x",
// "y" or "z" by k, one key of NULL k) over splits, checkpointed as a stage does (rows and
// the splits' positions in one batch), into store.
func keyedView(tb testing.TB, store state.Store, n, splits int) {
	sch := sql.Schema{{Name: "k", Type: sql.TypeInt}, {Name: "s", Type: sql.TypeVarchar}, {Name: "n", Type: sql.TypeBigInt}, {Name: sql.ChangeColumn, Type: sql.TypeVarchar}}
	ps := &planner.Stage{ID: 2, Sink: planner.SinkSpec{Stream: "v", Connector: "view", Schema: sch, KeyColumns: []int{0, 1}, Changes: planner.Upsert}}
	out, err := newTableOut("job", ps, store, &counters{}, false)
	if err != nil {
		tb.Fatal(err)
	}
	for i := -1; i < n; i++ {
		k := sql.Int(int64(i))
		if i < 0 {
			k = sql.Null
		}
		row := sql.Row{k, sql.Varchar(string(rune('x' + (i+3)%3))), sql.BigInt(int64(i) * 10), sql.Null}
		split := fmt.Sprint((i + 1) % splits)
		if err := out.Process(&Batch{Split: split, Rows: []sql.Row{row}}); err != nil {
			tb.Fatal(err)
		}
	}
	b := &state.Batch{}
	if err := out.Control(&Control{Kind: Checkpoint, Epoch: 1, State: b}); err != nil {
		tb.Fatal(err)
	}
	for s := 0; s < splits; s++ {
		b.Put(SplitKey("job", 2, fmt.Sprint(s)), SplitPos{}.Encode())
	}
	if err := store.Write(b); err != nil {
		tb.Fatal(err)
	}
}

// LookupView returns, for keys present and absent (NULL among them), the rows ReadView
// has for them, and reads only those keys: one Get per key and split, and no entry of the
// view's rows through a scan.
func TestLookupViewReadsOnlyItsKeys(t *testing.T) {
	const n, splits = 500, 3
	mem := state.NewMemory()
	keyedView(t, mem, n, splits)
	str := func(r sql.Row) string { return fmt.Sprintf("%v|%v|%v", r[0], r[1], r[2]) }
	var all []sql.Row
	if err := ReadView(mem, "job", 4, func(r sql.Row) error { all = append(all, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(all) != n+1 {
		t.Fatalf("the view holds %d rows, want %d", len(all), n+1)
	}
	var keys []sql.Row
	for i := -3; i < n+3; i += 7 {
		for _, s := range []string{"x", "y", "z"} {
			keys = append(keys, sql.Row{sql.Int(int64(i)), sql.Varchar(s)})
		}
	}
	keys = append(keys, sql.Row{sql.Null, sql.Varchar("z")}, sql.Row{sql.Null, sql.Varchar("x")})
	var enc [][]byte
	var want []string
	for _, k := range keys {
		enc = append(enc, ViewKey(nil, k))
		for _, r := range all {
			if string(sql.AppendRow(nil, r[:2])) == string(sql.AppendRow(nil, k)) {
				want = append(want, str(r))
			}
		}
	}
	cs := &countingStore{Store: mem, visited: map[string]int{}}
	var got []string
	if err := LookupView(cs, "job", 2, enc, func(r sql.Row) error { got = append(got, str(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) < 50 || !slices.Equal(got, want) {
		t.Fatalf("LookupView gives %d rows %q\nReadView has %d for those keys %q", len(got), got, len(want), want)
	}
	if cs.gets != len(keys)*splits || cs.visited[ViewOperator(2)] != 0 || cs.visited["src2"] != splits {
		t.Fatalf("LookupView of %d keys over %d splits: %d gets, scanned %v", len(keys), splits, cs.gets, cs.visited)
	}
}

// BenchmarkViewPointLookup compares reading one key of a keyed view of 100 k keys (over 4
// splits, in RocksDB) by LookupView with finding it by ReadView's scan, as a pull query
// did before point lookups (docs/benchmarks.md).
func BenchmarkViewPointLookup(b *testing.B) {
	const n, splits = 100_000, 4
	store, err := state.OpenRocks(b.TempDir(), state.RocksOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	keyedView(b, store, n, splits)
	key := func(i int) sql.Row { return sql.Row{sql.Int(int64(i)), sql.Varchar(string(rune('x' + (i+3)%3)))} }
	b.Run("lookup", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			found := 0
			enc := [][]byte{ViewKey(nil, key(i*7919%n))}
			if err := LookupView(store, "job", 2, enc, func(sql.Row) error { found++; return nil }); err != nil || found != 1 {
				b.Fatalf("found %d rows: %v", found, err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			found := 0
			k := int64(i * 7919 % n)
			if err := ReadView(store, "job", 4, func(r sql.Row) error {
				if !r[0].IsNull() && r[0].I == k {
					found++
				}
				return nil
			}); err != nil || found != 1 {
				b.Fatalf("found %d rows: %v", found, err)
			}
		}
	})
}
