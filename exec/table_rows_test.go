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

// truncVersionsNode keeps the latest versions of a table (id BIGINT PRIMARY KEY, v BIGINT)
// read from its source's changes, whose rows may hold truncations.
func truncVersionsNode() *planner.TopNNode {
	return &planner.TopNNode{Partition: []planner.Evaluator{col(0)}, N: 1, RowNumber: -1, WindowEnd: -1, Time: -1,
		Mode: planner.TableVersions, Latest: true, Changes: planner.Retract, AtSource: true,
		Schema: sql.Schema{{Name: "id", Type: sql.TypeBigInt}, {Name: "v", Type: sql.TypeBigInt}, {Name: sql.ChangeColumn, Type: sql.TypeVarchar}}}
}

// truncChanges is a table's changelog as a postgres-cdc source reads it: inserts, updates
// (the old row's delete, then the new row), deletes of the old row, and now and then a
// truncation (a row of NULLs whose change column is "truncate"). It also returns the
// table's rows after them, as "id,v" text.
func truncChanges(seed int64, n, keys int) ([]sql.Row, []string) {
	r := rand.New(rand.NewSource(seed))
	table := map[int64]int64{}
	var rows []sql.Row
	del := func(id int64) sql.Row { return sql.Row{sql.BigInt(id), sql.BigInt(table[id]), sql.OpDelete} }
	for len(rows) < n {
		id := int64(r.Intn(keys))
		_, has := table[id]
		switch k := r.Intn(100); {
		case k < 2:
			rows = append(rows, sql.Row{sql.Null, sql.Null, sql.OpTruncate})
			clear(table)
		case has && k < 40:
			rows = append(rows, del(id))
			table[id] = int64(r.Intn(1000))
			rows = append(rows, sql.Row{sql.BigInt(id), sql.BigInt(table[id]), sql.Null})
		case has && k < 55:
			rows = append(rows, del(id))
			delete(table, id)
		case !has:
			table[id] = int64(r.Intn(1000))
			rows = append(rows, sql.Row{sql.BigInt(id), sql.BigInt(table[id]), sql.Null})
		}
	}
	var want []string
	for id, v := range table {
		want = append(want, fmt.Sprintf("%d,%d", id, v))
	}
	sort.Strings(want)
	return rows, want
}

// foldLog applies logged changes ("...,NULL" inserts, "...,delete" deletes, the change
// column last) to a multiset of rows, which it returns; a delete of a row not held is an
// error.
func foldLog(t *testing.T, log []string) map[string]int {
	t.Helper()
	held := map[string]int{}
	for _, l := range log {
		i := strings.LastIndexByte(l, ',')
		row, op := l[:i], l[i+1:]
		if op != "delete" {
			held[row]++
			continue
		}
		if held[row] == 0 {
			t.Fatalf("a delete of %s, which is not held", row)
		}
		if held[row]--; held[row] == 0 {
			delete(held, row)
		}
	}
	return held
}

// heldAfter is foldLog's multiset as sorted rows.
func heldAfter(t *testing.T, log []string) []string {
	t.Helper()
	var out []string
	for row, n := range foldLog(t, log) {
		for ; n > 0; n-- {
			out = append(out, row)
		}
	}
	sort.Strings(out)
	return out
}

// A table's rows kept above the source of its changes read a truncation of the table as
// the deletion of every row it holds — those only in the store, those of the last save
// and those since — and the changes they emit leave exactly the table's rows: without a
// store, with the in-memory store, and with RocksDB through a restart from the store; the
// runs emit the same changes in the same order.
func TestTableRowsTruncate(t *testing.T) {
	rows, want := truncChanges(7, 6000, 150)
	truncs := 0
	for _, r := range rows {
		if sql.IsTruncate(r[2]) {
			truncs++
		}
	}
	if truncs < 10 || len(want) < 20 {
		t.Fatalf("%d truncations, %d rows at the end: the changes do not test much", truncs, len(want))
	}
	ref := &rowLog{}
	runCached(t, newTableRowsOp(truncVersionsNode(), "j", "tv", nil), state.NewMemory(), rows, 0, ref, nil)
	if got := heldAfter(t, ref.rows); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the changes leave %d rows, the table has %d:\n%s", len(got), len(want), diff(got, want))
	}
	mem := state.NewMemory()
	got := &rowLog{}
	runCached(t, newTableRowsOp(truncVersionsNode(), "j", "tv", mem), mem, rows, 0, got, nil)
	if strings.Join(got.rows, " ") != strings.Join(ref.rows, " ") {
		t.Fatalf("with the in-memory store:\n%s", diff(got.rows, ref.rows))
	}

	store, err := state.OpenRocks(t.TempDir(), state.RocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	got = &rowLog{}
	op := newTableRowsOp(truncVersionsNode(), "j", "tv", store)
	most := 0
	runCached(t, op, store, rows[:3000], 0, got, func() {
		sp := op.splits["s"]
		most = max(most, len(sp.cur.rows)+len(sp.prev.rows))
	})
	if most > 60 {
		t.Fatalf("%d keys' changes in memory, want those of two checkpoint intervals (40 rows) at most", most)
	}
	runCached(t, newTableRowsOp(truncVersionsNode(), "j", "tv", store), store, rows, 3000, got, nil)
	if strings.Join(got.rows, " ") != strings.Join(ref.rows, " ") {
		t.Fatalf("with RocksDB and a restart:\n%s", diff(got.rows, ref.rows))
	}
}
