package udf

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"

	"rsql/sql"
)

// A call tree without loops is stopped by the checks at function entries; the evaluator
// runs the next row on a new instance.
func TestWasmCallTreeIsStopped(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	spec := wasmSpec(riskModule(t), "fan", sql.TypeBigInt, sql.Column{Name: "x", Type: sql.TypeBigInt})
	spec.Options = map[string]string{"timeout": "20ms"}
	f := compileCall(t, r, spec)
	if got := f(sql.Row{sql.BigInt(10)}); got.IsError() || got.I != 1024 {
		t.Fatalf("fan(10) = %v %v", got, got.AsError())
	}
	got := f(sql.Row{sql.BigInt(60)}).AsError()
	if got == nil || got.Code != sql.CodeQueryCanceled {
		t.Fatalf("fan(60) = %v, want 57014", got)
	}
	if got := f(sql.Row{sql.BigInt(3)}); got.IsError() || got.I != 8 {
		t.Fatalf("fan(3) after the interrupt = %v %v", got, got.AsError())
	}
}

// The instrumented module computes what the module computes, checks its budget at every
// function entry and loop, and a call traps at its next yield once its stop flag is set.
func TestInstrumentedModule(t *testing.T) {
	mod := riskModule(t)
	guarded, err := instrument(mod)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if err := instantiateYield(rt); err != nil {
		t.Fatal(err)
	}
	m, err := rt.Instantiate(ctx, guarded)
	if err != nil {
		t.Fatal(err)
	}
	stop := &atomic.Bool{}
	cctx := context.WithValue(ctx, stopKey{}, stop)
	fan := m.ExportedFunction("fan")
	// fan(12) makes 8191 calls: it yields several times and goes on.
	if res, err := fan.Call(cctx, 12); err != nil || res[0] != 4096 {
		t.Fatalf("fan(12) = %v, %v", res, err)
	}
	stop.Store(true)
	if _, err := fan.Call(cctx, 12); err == nil || !strings.Contains(err.Error(), errStopped.Error()) {
		t.Fatalf("fan(12) with the stop flag set: %v, want it stopped", err)
	}
	// One check per function body and one per loop; the budget is the global after the
	// module's own, the yield function is function 0.
	wat := watCode(t)
	funcs, loops, globals := strings.Count(wat, "(func"), 0, strings.Count(wat, "(global")
	for _, l := range strings.Split(wat, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "loop" {
			loops++
		}
	}
	g := byte(globals)
	check := []byte{0x23, g, 0x45, 0x04, 0x40, 0x10, 0x00, 0x24, g, 0x0b, 0x23, g, 0x41, 0x01, 0x6b, 0x24, g}
	if got := bytes.Count(guarded, check); got != funcs+loops || loops == 0 {
		t.Errorf("%d checks, want %d (functions) + %d (loops)", got, funcs, loops)
	}
}

// A call that loops while the garbage collector stops the world is still stopped: the
// module returns to Go, where the runtime can preempt it, every few checks.
func TestWasmLoopLetsTheCollectorRun(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	spec := wasmSpec(riskModule(t), "spin", sql.TypeBigInt, sql.Column{Name: "x", Type: sql.TypeBigInt})
	spec.Options = map[string]string{"timeout": "50ms"}
	f := compileCall(t, r, spec)
	done := make(chan struct{})
	gcs := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				gcs <- n
				return
			default:
				runtime.GC()
				n++
			}
		}
	}()
	for i := 0; i < 3; i++ {
		if got := f(sql.Row{sql.BigInt(0)}).AsError(); got == nil || got.Code != sql.CodeQueryCanceled {
			t.Fatalf("spin: %v, want 57014", got)
		}
	}
	close(done)
	if n := <-gcs; n == 0 {
		t.Error("no collection ran during the calls")
	}
}

// watCode is testdata/risk.wat without its comments.
func watCode(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/risk.wat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, ";;"); i >= 0 {
			l = l[:i]
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// Modules the rewriter refuses, each with the reason.
func TestInstrumentRefuses(t *testing.T) {
	head := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	cases := map[string]struct {
		mod  []byte
		want string
	}{
		"not wasm": {[]byte("nope"), "not a WebAssembly module"},
		"start": {append(append([]byte{}, head...),
			1, 4, 1, 0x60, 0, 0, // type () -> ()
			3, 2, 1, 0, // func 0: type 0
			8, 1, 0, // start 0
			10, 4, 1, 2, 0, 0x0b), "start function"},
		"import": {append(append([]byte{}, head...),
			1, 4, 1, 0x60, 0, 0, // type () -> ()
			2, 7, 1, 1, 'm', 1, 'f', 0, 0), "imports"},
		"truncated": {append(append([]byte{}, head...), 10, 9, 1), "truncated"},
		"unknown op": {append(append([]byte{}, head...),
			1, 4, 1, 0x60, 0, 0, 3, 2, 1, 0, 10, 5, 1, 3, 0, 0xff, 0x0b), "0xff is not supported"},
	}
	for name, c := range cases {
		_, err := instrument(c.mod)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// refsModule has a table filled by an element segment, a call_indirect, a function
// reference in a global's initializer and in code, and a custom section: everything
// that names functions, whose indexes the rewriter moves.
var refsModule = []byte{0, 'a', 's', 'm', 1, 0, 0, 0,
	1, 5, 1, 0x60, 0, 1, 0x7f, // type 0: () -> i32
	3, 4, 3, 0, 0, 0, // three functions of type 0
	4, 4, 1, 0x70, 0, 1, // table: funcref, min 1
	6, 6, 1, 0x70, 0, 0xd2, 0, 0x0b, // global funcref = ref.func 0
	7, 11, 2, 2, 'f', '1', 0, 1, 2, 'f', '2', 0, 2, // export f1, f2
	9, 7, 1, 0, 0x41, 0, 0x0b, 1, 0, // elem: table[0] = function 0
	0, 2, 1, 'x', // a custom section
	10, 20, 3,
	4, 0, 0x41, 7, 0x0b, // f0: 7
	7, 0, 0x41, 0, 0x11, 0, 0, 0x0b, // f1: call_indirect table[0]
	5, 0, 0xd2, 1, 0xd1, 0x0b, // f2: ref.is_null(ref.func 1)
}

func TestInstrumentTablesAndReferences(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if err := instantiateYield(rt); err != nil {
		t.Fatal(err)
	}
	guarded, err := instrument(refsModule)
	if err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string][]byte{"original": refsModule, "instrumented": guarded} {
		m, err := rt.InstantiateWithConfig(ctx, mod, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for fn, want := range map[string]uint64{"f1": 7, "f2": 0} {
			if res, err := m.ExportedFunction(fn).Call(ctx); err != nil || res[0] != want {
				t.Errorf("%s: %s() = %v, %v; want %d", name, fn, res, err, want)
			}
		}
	}
}
