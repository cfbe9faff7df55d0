package udf

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
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
