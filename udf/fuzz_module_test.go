package udf

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"

	"rsql/sql"
)

// FuzzInstrument feeds arbitrary bytes to the module rewriter: it never panics, and a
// module wazero compiles (with no imports and no start function, as rsql requires) still
// compiles once rewritten.
func FuzzInstrument(f *testing.F) {
	f.Add(refsModule)
	f.Add(riskModule(f))
	f.Add([]byte{0, 'a', 's', 'm', 1, 0, 0, 0})
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if err := instantiateYield(rt); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, mod []byte) {
		guarded, err := instrument(mod)
		if err != nil {
			return
		}
		orig, err := rt.CompileModule(ctx, mod)
		if err != nil {
			return
		}
		orig.Close(ctx)
		c, err := rt.CompileModule(ctx, guarded)
		if err != nil {
			t.Fatalf("the module compiles, the rewritten one does not: %v", err)
		}
		c.Close(ctx)
	})
}

// FuzzRowsFromJSON feeds arbitrary text to the reader of a wasm table function's result:
// it never panics, and every row it emits has one value per column, NULL or of the
// column's kind.
func FuzzRowsFromJSON(f *testing.F) {
	f.Add(`[["a", 1, {"x": [1]}], {"n": "2", "k": "b"}, [null, null, null]]`)
	f.Add(`["a", "b\"c"]`)
	f.Add(`null`)
	f.Add(`[[1,2],[3]`)
	table := sql.Schema{{Name: "k", Type: sql.TypeVarchar}, {Name: "n", Type: sql.TypeInt}, {Name: "j", Type: sql.TypeJSON}}
	cols := make([]sql.Value, len(table))
	f.Fuzz(func(t *testing.T, text string) {
		_ = rowsFromJSON("f", text, table, cols, func(row []sql.Value) {
			if len(row) != len(table) {
				t.Fatalf("a row of %d values", len(row))
			}
			for c, v := range row {
				if !v.IsNull() && v.K != table[c].Type.Kind {
					t.Fatalf("column %s: %v", table[c].Name, v)
				}
			}
		})
	})
}
