package udf

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"

	"rsql/sql"
)

// JavaScript functions run in goja, a JavaScript engine written in Go. The source is
// compiled once per Runtime; each compiled evaluator (so each stage of a job) makes its
// own VM on its first call. A VM holds the ECMAScript built-ins and nothing else — no
// require, console, timers, file, network or process access — and these are cut down
// further by the prelude below. Each call runs under the watchdog's time and memory
// limits; a call that throws, or is interrupted, fails only its row.

// maxBuiltin bounds what one call of a built-in may produce or walk (characters of a
// string, elements of an array): built-ins are Go code the time limit cannot interrupt.
const maxBuiltin = 1 << 24

// setupTimeout is the least time a new VM gets to run the prelude and the function's top
// level.
const setupTimeout = time.Second

// prelude hardens a fresh VM before the function's code runs in it.
const prelude = `(function (max) {
	"use strict";
	for (const n of ["ArrayBuffer", "SharedArrayBuffer", "DataView", "Int8Array", "Uint8Array",
			"Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float32Array",
			"Float64Array", "BigInt64Array", "BigUint64Array", "WeakRef", "FinalizationRegistry", "Atomics"]) {
		delete globalThis[n];
	}
	const tooBig = (what) => { throw new RangeError(what + " is larger than " + max + " (the limit of one built-in call in rsql)"); };
	const guard = (proto, name, check) => {
		const f = proto[name];
		if (typeof f !== "function") return;
		Object.defineProperty(proto, name, {value: function (...a) { check(this, a); return f.apply(this, a); },
			writable: true, configurable: true});
	};
	for (const name of Object.getOwnPropertyNames(Array.prototype)) {
		if (name === "constructor") continue;
		guard(Array.prototype, name, (self) => { if (self != null && self.length > max) tooBig("the array"); });
	}
	guard(Array.prototype, "join", (self, a) => {
		if (self.length > max) tooBig("the array");
		const sep = a[0] === undefined ? 1 : String(a[0]).length;
		let total = 0;
		for (let i = 0; i < self.length; i++) {
			const v = self[i];
			total += (v == null ? 0 : String(v).length) + sep;
			if (total > max) tooBig("the joined string");
		}
	});
	guard(Array, "from", (self, a) => { if (a[0] != null && a[0].length > max) tooBig("the array"); });
	for (const name of Object.getOwnPropertyNames(String.prototype)) {
		if (name === "constructor") continue;
		guard(String.prototype, name, (self) => { if (String(self).length > max) tooBig("the string"); });
	}
	guard(String.prototype, "repeat", (self, a) => { if (String(self).length * Number(a[0]) > max) tooBig("the repeated string"); });
	guard(String.prototype, "padStart", (self, a) => { if (Number(a[0]) > max) tooBig("the padded string"); });
	guard(String.prototype, "padEnd", (self, a) => { if (Number(a[0]) > max) tooBig("the padded string"); });
	const stringify = JSON.stringify;
	// A replacer makes the engine call back into JavaScript per value, where the time
	// limit applies.
	JSON.stringify = function (v, r, s) {
		const user = typeof r === "function" ? r : null;
		return stringify(v, function (k, x) { return user ? user.call(this, k, x) : x; }, s);
	};
	return [stringify, JSON.parse, (ms) => new Date(ms)];
})`

// jsFunc is a compiled JavaScript function or aggregate.
type jsFunc struct {
	spec Spec
	lim  limits
	prog *goja.Program // evaluates to the function, or to the aggregate's object
	// canRetract: the aggregate's object has a retract function (seen in the scratch VM)
	canRetract bool
}

// jsFunc compiles (once per content) scalar or aggregate function spec and checks it in a
// scratch VM.
func (r *Runtime) jsFunc(spec Spec) (*jsFunc, error) {
	lim, err := spec.limits()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(spec.Params))
	for i, p := range spec.Params {
		names[i] = p.Name
	}
	src := "(function(" + strings.Join(names, ", ") + ") {\n" + spec.Body + "\n})"
	if spec.Aggregate {
		src = "(\n" + spec.Body + "\n)"
	}
	key := contentKey("js", src)
	r.mu.Lock()
	prog := r.js[key]
	r.mu.Unlock()
	if prog == nil {
		ast, err := parser.ParseFile(nil, spec.Name, src, 0)
		if err != nil {
			return nil, jsSyntaxError(spec, err)
		}
		if prog, err = goja.CompileAST(ast, false); err != nil {
			return nil, sql.Errorf(sql.CodeSyntax, "function %s: %v", spec.Name, err)
		}
	}
	f := &jsFunc{spec: spec, lim: lim, prog: prog}
	vm, err := f.newVM()
	if err != nil {
		return nil, err
	}
	f.canRetract = vm.retract != nil
	vm.close()
	r.mu.Lock()
	r.js[key] = prog
	r.mu.Unlock()
	return f, nil
}

// jsSyntaxError positions a parse error of the script in the function's body.
func jsSyntaxError(spec Spec, err error) error {
	msg, line, col := err.Error(), 0, 0
	if l, ok := err.(parser.ErrorList); ok && len(l) > 0 {
		msg, line, col = l[0].Message, l[0].Position.Line, l[0].Position.Column
	}
	if line < 2 {
		return sql.Errorf(sql.CodeSyntax, "function %s: JavaScript syntax error: %s", spec.Name, msg)
	}
	return sql.BodyErrorAt(spec.Body, bodyOffset(spec.Body, line-2, col-1), sql.CodeSyntax, "function %s: JavaScript syntax error: %s", spec.Name, msg)
}

// bodyOffset is the byte offset of (0-based line, 0-based character column) in body.
func bodyOffset(body string, line, col int) int {
	off := 0
	for ; line > 0; line-- {
		i := strings.IndexByte(body[off:], '\n')
		if i < 0 {
			return len(body)
		}
		off += i + 1
	}
	for ; col > 0 && off < len(body); col-- {
		_, n := utf8.DecodeRuneInString(body[off:])
		off += n
	}
	return off
}

// jsVM is one VM running a function: its program's value and helpers, and the watch
// that limits its calls. It is used by one goroutine at a time (mu).
type jsVM struct {
	f         *jsFunc
	vm        *goja.Runtime
	fn        goja.Callable // scalar
	create    goja.Callable // aggregate
	add       goja.Callable
	merge     goja.Callable
	result    goja.Callable
	retract   goja.Callable // optional: retract(state, args...) takes one row back
	stringify goja.Callable
	parse     goja.Callable
	date      goja.Callable
	w         *watch
}

func (f *jsFunc) newVM() (in *jsVM, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = sql.Errorf(sql.CodeExternalRoutine, "function %s: %v", f.spec.Name, r)
		}
	}()
	vm := goja.New()
	vm.SetMaxCallStackSize(2000)
	in = &jsVM{f: f, vm: vm}
	// Setting up (the prelude, the function's top level) gets at least a second; calls get
	// the function's limit.
	in.w = newWatch(max(f.lim.timeout, setupTimeout), f.lim.memory, func(reason int32) { vm.Interrupt(reason) })
	defer in.w.timeout.Store(int64(f.lim.timeout))
	pre, err := vm.RunString(prelude)
	if err != nil {
		return nil, sql.Errorf(sql.CodeInternal, "JavaScript prelude: %v", err)
	}
	preFn, _ := goja.AssertFunction(pre)
	register(in.w)
	helpers, err := in.run(func() (goja.Value, error) { return preFn(goja.Undefined(), vm.ToValue(maxBuiltin)) })
	if err != nil {
		unregister(in.w)
		if ie, ok := err.(*interruptError); ok {
			return nil, ie
		}
		return nil, sql.Errorf(sql.CodeInternal, "JavaScript prelude: %v", err)
	}
	hs := helpers.ToObject(vm)
	in.stringify, _ = goja.AssertFunction(hs.Get("0"))
	in.parse, _ = goja.AssertFunction(hs.Get("1"))
	in.date, _ = goja.AssertFunction(hs.Get("2"))
	v, err := in.run(func() (goja.Value, error) { return vm.RunProgram(f.prog) })
	if err != nil {
		unregister(in.w)
		if ie, ok := err.(*interruptError); ok {
			return nil, ie
		}
		return nil, sql.Errorf(sql.CodeExternalRoutine, "function %s: %s", f.spec.Name, jsErrText(err))
	}
	if !f.spec.Aggregate {
		in.fn, _ = goja.AssertFunction(v)
		return in, nil
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		unregister(in.w)
		return nil, sql.Errorf(sql.CodeSyntax, "aggregate %s: the body must be an object with create, add, merge and result functions, not %s", f.spec.Name, v)
	}
	for _, m := range []struct {
		name string
		fn   *goja.Callable
	}{{"create", &in.create}, {"add", &in.add}, {"merge", &in.merge}, {"result", &in.result}} {
		c, ok := goja.AssertFunction(obj.Get(m.name))
		if !ok {
			unregister(in.w)
			return nil, sql.Errorf(sql.CodeSyntax, "aggregate %s: the body's object has no %s function (it needs create(), add(state, %s), merge(a, b) and result(state))",
				f.spec.Name, m.name, paramNames(f.spec))
		}
		*m.fn = c
	}
	in.retract, _ = goja.AssertFunction(obj.Get("retract"))
	return in, nil
}

func paramNames(s Spec) string {
	n := make([]string, len(s.Params))
	for i, p := range s.Params {
		n[i] = p.Name
	}
	return strings.Join(n, ", ")
}

func (in *jsVM) close() { unregister(in.w) }

// run calls f under the watch; a Go panic inside the engine is an error.
func (in *jsVM) run(f func() (goja.Value, error)) (v goja.Value, err error) {
	in.w.begin()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
		if reason := in.w.end(); reason != reasonNone {
			in.vm.ClearInterrupt()
			if err != nil {
				err = &interruptError{reason}
			}
		}
	}()
	return f()
}

type interruptError struct{ reason int32 }

func (e *interruptError) Error() string {
	if e.reason == reasonMemory {
		return "interrupted: the memory limit was exceeded while setting up the function"
	}
	return "interrupted: the time limit was exceeded while setting up the function"
}

// call runs fn with args and returns its value, or the error value of the row.
func (in *jsVM) call(fn goja.Callable, args ...goja.Value) (goja.Value, sql.Value, bool) {
	v, err := in.run(func() (goja.Value, error) { return fn(goja.Undefined(), args...) })
	if err != nil {
		if ie, ok := err.(*interruptError); ok {
			return nil, interrupted(in.f.spec.Name, ie.reason, in.f.lim), false
		}
		if _, ok := err.(*goja.InterruptedError); ok {
			return nil, interrupted(in.f.spec.Name, reasonTimeout, in.f.lim), false
		}
		return nil, callError(in.f.spec.Name, sql.CodeExternalRoutine, "%s", jsErrText(err)), false
	}
	return v, sql.Null, true
}

func jsErrText(err error) string {
	if _, ok := err.(*goja.StackOverflowError); ok {
		return "RangeError: maximum call stack size exceeded " + strings.TrimSpace(err.Error())
	}
	return strings.TrimSpace(err.Error())
}

// toJS converts an argument value.
func (in *jsVM) toJS(v sql.Value) goja.Value {
	switch v.K {
	case sql.KindNull:
		return goja.Null()
	case sql.KindBool:
		return in.vm.ToValue(v.I != 0)
	case sql.KindInt, sql.KindBigInt:
		return in.vm.ToValue(v.I)
	case sql.KindDouble:
		return in.vm.ToValue(v.F())
	case sql.KindDecimal:
		return in.vm.ToValue(v.AsFloat())
	case sql.KindTimestamp:
		d, err := in.date(goja.Undefined(), in.vm.ToValue(v.I))
		if err != nil {
			return goja.Null()
		}
		return d
	case sql.KindJSON:
		p, err := in.parse(goja.Undefined(), in.vm.ToValue(v.S))
		if err != nil {
			return goja.Null()
		}
		return p
	}
	return in.vm.ToValue(v.S)
}

// fromJS converts a returned value to type t; a value of the wrong kind is the row's
// error (38000), a number out of t's range 22003.
func (in *jsVM) fromJS(v goja.Value, t sql.Type) sql.Value {
	name := in.f.spec.Name
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return sql.Null
	}
	bad := func() sql.Value {
		return callError(name, sql.CodeExternalRoutine, "returned %s, which is not of type %s", shortJS(v), t)
	}
	x := v.Export()
	num := func() (float64, bool) {
		switch n := x.(type) {
		case int64:
			return float64(n), true
		case float64:
			return n, true
		}
		return 0, false
	}
	switch t.Kind {
	case sql.KindBool:
		if b, ok := x.(bool); ok {
			return sql.Bool(b)
		}
		return bad()
	case sql.KindInt, sql.KindBigInt:
		var i int64
		switch n := x.(type) {
		case int64:
			i = n
		case float64:
			if n != math.Trunc(n) || math.IsNaN(n) || math.IsInf(n, 0) {
				return callError(name, sql.CodeExternalRoutine, "returned %s, which is not an integer (%s)", shortJS(v), t)
			}
			if n >= 9223372036854775807 || n < -9223372036854775808 {
				return callError(name, sql.CodeNumericOutOfRange, "returned %s, out of range for %s", shortJS(v), t)
			}
			i = int64(n)
		default:
			return bad()
		}
		if t.Kind == sql.KindInt {
			if i != int64(int32(i)) {
				return callError(name, sql.CodeNumericOutOfRange, "returned %d, out of range for INT", i)
			}
			return sql.Int(i)
		}
		return sql.BigInt(i)
	case sql.KindDouble:
		if f, ok := num(); ok {
			return sql.Double(f)
		}
		return bad()
	case sql.KindDecimal:
		f, ok := num()
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return bad()
		}
		d, ok := sql.NumericFromString(strconv.FormatFloat(f, 'f', -1, 64))
		if !ok {
			return bad()
		}
		out, err := sql.CastValue(d, t)
		if err != nil {
			return callError(name, sql.CodeNumericOutOfRange, "returned %s: %v", shortJS(v), err)
		}
		return out
	case sql.KindVarchar:
		switch x.(type) {
		case string, int64, float64, bool:
			return sql.Varchar(v.String())
		}
		return bad()
	case sql.KindTimestamp:
		switch d := x.(type) {
		case time.Time:
			return sql.Timestamp(d.UnixMilli())
		case int64:
			return sql.Timestamp(d)
		case float64:
			if d == math.Trunc(d) && !math.IsInf(d, 0) {
				return sql.Timestamp(int64(d))
			}
		}
		return bad()
	case sql.KindJSON:
		s, err := in.stringify(goja.Undefined(), v)
		if err != nil || goja.IsUndefined(s) {
			return bad()
		}
		return sql.JSONValue(s.String())
	}
	return bad()
}

func shortJS(v goja.Value) string {
	s := v.String()
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// ---- scalar functions ----

// jsScalar is the state of one compiled call: its VM, made on the first row.
type jsScalar struct {
	f    *jsFunc
	mu   sync.Mutex
	in   *jsVM
	err  sql.Value // the VM could not be made
	args []goja.Value
	// rowsBuf holds a table function call's rows, len(Table) values each, until all
	// converted.
	rowsBuf []sql.Value
}

// build compiles a call: the evaluator makes its VM on its first row, so each stage that
// runs the call has its own.
func (f *jsFunc) build(_ *sql.Call, args []sql.Evaluator) (sql.Evaluator, error) {
	st := &jsScalar{f: f, args: make([]goja.Value, len(args))}
	return func(r sql.Row) sql.Value {
		var buf [8]sql.Value
		vals := buf[:0]
		for _, a := range args {
			v := a(r)
			if v.IsError() {
				return v
			}
			vals = append(vals, v)
		}
		return st.call(vals)
	}, nil
}

// vm returns the call's VM, made on its first use; st.mu must be held.
func (st *jsScalar) vm() (*jsVM, sql.Value) {
	if st.in == nil {
		if st.err.IsError() {
			return nil, st.err
		}
		in, err := st.f.newVM()
		if err != nil {
			e := sql.ErrorValue(sql.CodeExternalRoutine, err.Error())
			if _, interrupted := err.(*interruptError); !interrupted {
				st.err = e // it fails the same way every time
			}
			return nil, e
		}
		st.in = in
		runtime.AddCleanup(st, unregister, in.w)
	}
	return st.in, sql.Null
}

func (st *jsScalar) call(vals []sql.Value) sql.Value {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, failed := st.vm(); failed.IsError() {
		return failed
	}
	for i, v := range vals {
		st.args[i] = st.in.toJS(v)
	}
	res, failed, ok := st.in.call(st.in.fn, st.args...)
	clear(st.args)
	if !ok {
		return failed
	}
	return st.in.fromJS(res, st.f.spec.Returns)
}
