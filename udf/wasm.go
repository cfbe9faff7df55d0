package udf

import (
	"context"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"rsql/sql"
)

// WebAssembly functions run in wazero, a WebAssembly runtime written in Go. The module is
// compiled once per Runtime (keyed by its bytes); each compiled evaluator (so each stage
// of a job) instantiates it on its first call. Nothing is imported into the module — no
// WASI, so no files, sockets, clock or environment — and a module that imports anything
// is refused. Its linear memory is capped (memory_limit), and a call that runs past the
// time limit is stopped when the module, rewritten to return to Go now and then, next
// does (wasmguard.go); the instance is then made again for the next row.
//
// The calling convention (docs/sql.md, "Functions"):
//   - BOOLEAN and INT are i32, BIGINT and TIMESTAMP (epoch milliseconds) are i64, DOUBLE
//     and DECIMAL are f64 (DECIMAL converted);
//   - a VARCHAR or JSON argument is two i32, pointer and length of its UTF-8 bytes: the
//     host calls the module's export alloc(len i32) -> i32 for each one just before the
//     call and writes the bytes there (the module exports its memory as "memory");
//   - a VARCHAR or JSON result is one i64, pointer << 32 | length, read right after the
//     call returns;
//   - a NULL argument makes the result NULL without a call; a trap fails the row (38000).

// wasmModule is a compiled module in the runtime of its memory limit.
type wasmModule struct {
	compiled wazero.CompiledModule
	rt       wazero.Runtime
}

// wasmFunc is a checked export of a module.
type wasmFunc struct {
	spec   Spec
	lim    limits
	mod    *wasmModule
	params []api.ValueType // per SQL parameter: its first wasm value type
	result api.ValueType
}

// wasmRuntime returns the wazero runtime for modules with the given memory limit.
func (r *Runtime) wasmRuntime(pages uint32) wazero.Runtime {
	// One runtime per limit: the limit is a runtime setting in wazero. r.mu is held.
	if r.wasmByLimit == nil {
		r.wasmByLimit = map[uint32]wazero.Runtime{}
	}
	rt := r.wasmByLimit[pages]
	if rt == nil {
		// No WithCloseOnContextDone: it costs a goroutine per call; the module's own checks
		// (wasmguard.go) stop long calls instead.
		rt = wazero.NewRuntimeWithConfig(context.Background(),
			wazero.NewRuntimeConfig().WithMemoryLimitPages(pages))
		if err := instantiateYield(rt); err != nil {
			panic("udf: the yield host module: " + err.Error()) // only fails on a bug
		}
		r.wasmByLimit[pages] = rt
	}
	return rt
}

// wasmType is the wasm value type a SQL type is passed as (0 for the pointer pair of a
// string) and whether the type can be passed at all.
func wasmType(t sql.Type) (api.ValueType, bool) {
	switch t.Kind {
	case sql.KindBool, sql.KindInt:
		return api.ValueTypeI32, true
	case sql.KindBigInt, sql.KindTimestamp:
		return api.ValueTypeI64, true
	case sql.KindDouble, sql.KindDecimal:
		return api.ValueTypeF64, true
	case sql.KindVarchar, sql.KindJSON:
		return 0, true
	}
	return 0, false
}

func wasmTypeName(t api.ValueType) string { return api.ValueTypeName(t) }

// wasmFunc compiles (once per module) and checks function spec.
func (r *Runtime) wasmFunc(spec Spec) (*wasmFunc, error) {
	lim, err := spec.limits()
	if err != nil {
		return nil, err
	}
	if len(spec.Module) == 0 {
		return nil, sql.Errorf(sql.CodeInvalidValue, "function %s: no wasm module", spec.Name)
	}
	pages := uint32(max(1, lim.memory>>16))
	key := contentKey("wasm", strconv.Itoa(int(pages)), string(spec.Module))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, sql.Errorf(sql.CodeInternal, "the function runtime is closed")
	}
	mod := r.mods[key]
	if mod == nil {
		rt := r.wasmRuntime(pages)
		// The module as given is compiled first, for its own errors (and the sandbox's),
		// then instrumented and compiled again: that is what runs.
		orig, err := rt.CompileModule(context.Background(), spec.Module)
		if err != nil {
			return nil, sql.Errorf(sql.CodeInvalidValue, "function %s: the module does not compile: %v", spec.Name, err)
		}
		imports, memories := orig.ImportedFunctions(), orig.ImportedMemories()
		orig.Close(context.Background())
		if len(imports) > 0 {
			m, n, _ := imports[0].Import()
			return nil, sql.Errorf(sql.CodeInvalidValue, "function %s: the module imports %s.%s: rsql gives modules no imports (no WASI: no files, sockets, clock or environment)", spec.Name, m, n)
		}
		if len(memories) > 0 {
			return nil, sql.Errorf(sql.CodeInvalidValue, "function %s: the module imports a memory: it must define its own", spec.Name)
		}
		guarded, err := instrument(spec.Module)
		if err != nil {
			return nil, sql.Errorf(sql.CodeInvalidValue, "function %s: %v", spec.Name, err)
		}
		c, err := rt.CompileModule(context.Background(), guarded)
		if err != nil {
			return nil, sql.Errorf(sql.CodeInternal, "function %s: the module does not compile once its time-limit checks are added: %v", spec.Name, err)
		}
		mod = &wasmModule{compiled: c, rt: rt}
		r.mods[key] = mod
	}
	f := &wasmFunc{spec: spec, lim: lim, mod: mod}
	exp, ok := mod.compiled.ExportedFunctions()[lim.export]
	if !ok {
		return nil, sql.Errorf(sql.CodeInvalidValue, "function %s: the module exports no function %q (WITH (export = 'name') names another)", spec.Name, lim.export)
	}
	var want []api.ValueType
	strs := false
	for _, p := range spec.Params {
		t, ok := wasmType(p.Type)
		if !ok {
			return nil, sql.Errorf(sql.CodeTypeMismatch, "function %s: a wasm function cannot take %s (parameter %s)", spec.Name, p.Type, p.Name)
		}
		f.params = append(f.params, t)
		if t == 0 {
			strs = true
			want = append(want, api.ValueTypeI32, api.ValueTypeI32)
		} else {
			want = append(want, t)
		}
	}
	rt, ok := wasmType(spec.Returns)
	if !ok {
		return nil, sql.Errorf(sql.CodeTypeMismatch, "function %s: a wasm function cannot return %s", spec.Name, spec.Returns)
	}
	f.result = rt
	if rt == 0 {
		rt = api.ValueTypeI64
		strs = true
	}
	if !sameTypes(exp.ParamTypes(), want) || !sameTypes(exp.ResultTypes(), []api.ValueType{rt}) {
		return nil, sql.Errorf(sql.CodeTypeMismatch, "function %s: the export %q is (%s) -> (%s), the declaration needs (%s) -> (%s)",
			spec.Name, lim.export, typeList(exp.ParamTypes()), typeList(exp.ResultTypes()), typeList(want), typeList([]api.ValueType{rt}))
	}
	if strs {
		al, ok := mod.compiled.ExportedFunctions()["alloc"]
		if !ok || !sameTypes(al.ParamTypes(), []api.ValueType{api.ValueTypeI32}) || !sameTypes(al.ResultTypes(), []api.ValueType{api.ValueTypeI32}) {
			return nil, sql.Errorf(sql.CodeInvalidValue, "function %s: a wasm function that takes or returns VARCHAR needs the export alloc(i32) -> i32", spec.Name)
		}
		if _, ok := mod.compiled.ExportedMemories()["memory"]; !ok {
			return nil, sql.Errorf(sql.CodeInvalidValue, "function %s: a wasm function that takes or returns VARCHAR needs its memory exported as \"memory\"", spec.Name)
		}
	}
	return f, nil
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func typeList(ts []api.ValueType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = wasmTypeName(t)
	}
	return strings.Join(s, ", ")
}

// wasmInstance is one instance of the module.
type wasmInstance struct {
	mod   api.Module
	fn    api.Function
	alloc api.Function
	mem   api.Memory
}

// wasmCall is the state of one compiled call: the instance it made on its first row.
type wasmCall struct {
	f     *wasmFunc
	mu    sync.Mutex
	inst  *wasmInstance
	w     *watch
	stop  *atomic.Bool    // set by the watchdog: the running call is to stop
	ctx   context.Context // of every call: carries stop to yield (wasmguard.go)
	stack []uint64
	one   [1]uint64 // alloc's stack
}

func (f *wasmFunc) build(_ *sql.Call, args []sql.Evaluator) (sql.Evaluator, error) {
	stop := &atomic.Bool{} // the watch must not hold c, or c would never be collected
	c := &wasmCall{f: f, stop: stop, ctx: context.WithValue(context.Background(), stopKey{}, stop)}
	c.w = newWatch(f.lim.timeout, 0, func(int32) { stop.Store(true) })
	register(c.w)
	runtime.AddCleanup(c, unregister, c.w)
	n := 1
	for _, t := range f.params {
		if t == 0 {
			n += 2
		} else {
			n++
		}
	}
	c.stack = make([]uint64, n)
	return func(r sql.Row) sql.Value {
		var buf [8]sql.Value
		vals := buf[:0]
		for _, a := range args {
			v := a(r)
			if v.K == sql.KindNull {
				return v // NULL in, NULL out (and an error value passes on)
			}
			vals = append(vals, v)
		}
		return c.call(vals)
	}, nil
}

func (c *wasmCall) instance() (*wasmInstance, error) {
	if c.inst != nil {
		return c.inst, nil
	}
	m, err := c.f.mod.rt.InstantiateModule(context.Background(), c.f.mod.compiled, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return nil, err
	}
	in := &wasmInstance{mod: m, fn: m.ExportedFunction(c.f.lim.export), alloc: m.ExportedFunction("alloc"), mem: m.Memory()}
	c.inst = in
	runtime.AddCleanup(c, func(m api.Module) { m.Close(context.Background()) }, m)
	return in, nil
}

func (c *wasmCall) call(vals []sql.Value) sql.Value {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := c.f.spec.Name
	in, err := c.instance()
	if err != nil {
		return callError(name, sql.CodeExternalRoutine, "instantiating the module: %v", err)
	}
	st := c.stack[:0]
	c.w.begin()
	for i, v := range vals {
		switch c.f.params[i] {
		case api.ValueTypeI32:
			st = append(st, api.EncodeI32(int32(v.I)))
		case api.ValueTypeI64:
			st = append(st, uint64(v.I))
		case api.ValueTypeF64:
			f := v.F()
			if v.K != sql.KindDouble {
				f = v.AsFloat()
			}
			st = append(st, api.EncodeF64(f))
		default:
			ptr, ok := c.writeString(in, v.S)
			if !ok {
				return c.failed(in, "alloc failed or returned memory outside the module's")
			}
			st = append(st, uint64(ptr), uint64(len(v.S)))
		}
	}
	if len(st) == 0 {
		st = c.stack[:1]
	}
	err = in.fn.CallWithStack(c.ctx, st)
	if reason := c.w.end(); reason != reasonNone {
		c.drop()
		return interrupted(name, reason, c.f.lim)
	}
	if err != nil {
		c.drop()
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return callError(name, sql.CodeExternalRoutine, "wasm trap: %s", msg)
	}
	r := st[0]
	switch c.f.result {
	case api.ValueTypeI32:
		i := int64(api.DecodeI32(r))
		if c.f.spec.Returns.Kind == sql.KindBool {
			return sql.Bool(i != 0)
		}
		return sql.Int(i)
	case api.ValueTypeI64:
		if c.f.spec.Returns.Kind == sql.KindTimestamp {
			return sql.Timestamp(int64(r))
		}
		return sql.BigInt(int64(r))
	case api.ValueTypeF64:
		f := api.DecodeF64(r)
		if c.f.spec.Returns.Kind == sql.KindDecimal {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return callError(name, sql.CodeNumericOutOfRange, "returned %v, which is not a NUMERIC", f)
			}
			d, _ := sql.NumericFromString(strconv.FormatFloat(f, 'f', -1, 64)) // a finite float's 'f' text always parses
			out, err := sql.CastValue(d, c.f.spec.Returns)
			if err != nil {
				return callError(name, sql.CodeNumericOutOfRange, "returned %v: %v", f, err)
			}
			return out
		}
		return sql.Double(f)
	}
	ptr, n := uint32(r>>32), uint32(r)
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		return callError(name, sql.CodeExternalRoutine, "returned a string at %d (%d bytes) outside its memory", ptr, n)
	}
	if !utf8.Valid(b) {
		return callError(name, sql.CodeExternalRoutine, "returned a string that is not UTF-8")
	}
	if c.f.spec.Returns.Kind == sql.KindJSON {
		v, err := sql.CastValue(sql.Varchar(string(b)), sql.TypeJSON)
		if err != nil {
			return callError(name, sql.CodeExternalRoutine, "returned text that is not JSON")
		}
		return v
	}
	return sql.Varchar(string(b))
}

// writeString copies s into memory the module's alloc gives.
func (c *wasmCall) writeString(in *wasmInstance, s string) (uint32, bool) {
	st := c.one[:]
	st[0] = api.EncodeI32(int32(len(s)))
	if err := in.alloc.CallWithStack(c.ctx, st); err != nil {
		return 0, false
	}
	ptr := api.DecodeU32(st[0])
	return ptr, in.mem.WriteString(ptr, s)
}

func (c *wasmCall) failed(in *wasmInstance, msg string) sql.Value {
	c.w.end()
	c.drop()
	return callError(c.f.spec.Name, sql.CodeExternalRoutine, "%s", msg)
}

// drop forgets the instance after a trap or an interrupt: its state may be anything.
func (c *wasmCall) drop() {
	if c.inst != nil {
		c.inst.mod.Close(context.Background())
		c.inst = nil
	}
	c.stop.Store(false) // end() has returned: no interrupt of the last call is pending
}
