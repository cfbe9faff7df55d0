package udf

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/tetratelabs/wazero"

	"rsql/sql"
)

// Languages of user functions.
const (
	LangSQL  = "sql"
	LangJS   = "javascript"
	LangWasm = "wasm"
)

// Defaults and bounds of the per-call limits (WITH (timeout = ..., memory_limit = ...)).
const (
	DefaultTimeout = 100 * time.Millisecond
	// DefaultJSMemory is how much the process may allocate during one JavaScript call.
	DefaultJSMemory = 256 << 20
	// DefaultWasmMemory caps a wasm instance's linear memory.
	DefaultWasmMemory = 16 << 20
	// MaxModuleSize is the largest wasm module CREATE FUNCTION copies into the catalog.
	MaxModuleSize = 16 << 20
)

// Spec is a user-defined function as the catalog keeps it.
type Spec struct {
	Name      string
	Aggregate bool
	Params    sql.Schema
	Returns   sql.Type
	// Table, set for a table function (RETURNS TABLE (...)), is the columns of its rows.
	Table    sql.Schema
	Language string // LangSQL, LangJS or LangWasm
	// Body is the SQL expression or the JavaScript source; for wasm, the module's path as
	// written (Module holds its bytes).
	Body    string
	Module  []byte
	Options map[string]string // timeout, memory_limit, export
}

// limits are a function's parsed options.
type limits struct {
	timeout time.Duration
	memory  uint64
	export  string
}

// knownOptions are the WITH options of CREATE FUNCTION per language.
var knownOptions = map[string][]string{
	LangSQL:  nil,
	LangJS:   {"timeout", "memory_limit"},
	LangWasm: {"timeout", "memory_limit", "export"},
}

// Limits validates the function's options and returns them parsed. Errors are 22023.
func (s Spec) limits() (limits, error) {
	l := limits{timeout: DefaultTimeout, memory: DefaultJSMemory, export: s.Name}
	if s.Language == LangWasm {
		l.memory = DefaultWasmMemory
	}
	known := knownOptions[s.Language]
	for k, v := range s.Options {
		ok := false
		for _, n := range known {
			ok = ok || n == k
		}
		if !ok {
			if len(known) == 0 {
				return l, sql.Errorf(sql.CodeInvalidValue, "option %q: %s functions take no WITH options", k, s.Language)
			}
			return l, sql.Errorf(sql.CodeInvalidValue, "unknown option %q for a %s function (known: %s)", k, s.Language, strings.Join(known, ", "))
		}
		switch k {
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Millisecond || d > time.Hour {
				return l, sql.Errorf(sql.CodeInvalidValue, "timeout = %q: want a duration from 1ms to 1h, such as '100ms'", v)
			}
			l.timeout = d
		case "memory_limit":
			n, err := parseSize(v)
			if err != nil || n < 1<<16 || n > 4<<30 {
				return l, sql.Errorf(sql.CodeInvalidValue, "memory_limit = %q: want a size from 64KB to 4GB, such as '16MB'", v)
			}
			l.memory = n
		case "export":
			if v == "" {
				return l, sql.Errorf(sql.CodeInvalidValue, "export = '': name the module's exported function")
			}
			l.export = v
		}
	}
	return l, nil
}

// parseSize reads 123, 64KB, 16MB, 1GB (powers of 1024).
func parseSize(v string) (uint64, error) {
	u := strings.ToUpper(strings.TrimSpace(v))
	mul := uint64(1)
	for _, s := range []struct {
		suffix string
		m      uint64
	}{{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(u, s.suffix) {
			u, mul = strings.TrimSpace(strings.TrimSuffix(u, s.suffix)), s.m
			break
		}
	}
	n, err := strconv.ParseUint(u, 10, 64)
	if err != nil {
		return 0, err
	}
	return n * mul, nil
}

// Runtime compiles user functions once and builds their sql definitions: a JavaScript
// function's program and a wasm module are compiled when first needed and kept, keyed by
// their content, for every statement and stage that calls them; what runs per stage (a
// VM, a module instance) is made by each compiled evaluator. Safe for concurrent use.
type Runtime struct {
	mu          sync.Mutex
	wasmByLimit map[uint32]wazero.Runtime
	js          map[[32]byte]*goja.Program
	mods        map[[32]byte]*wasmModule
	closed      bool
}

// NewRuntime returns an empty Runtime.
func NewRuntime() *Runtime {
	return &Runtime{js: map[[32]byte]*goja.Program{}, mods: map[[32]byte]*wasmModule{}}
}

// Close releases the compiled wasm modules; evaluators built before stop working.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var err error
	for _, rt := range r.wasmByLimit {
		if e := rt.Close(context.Background()); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func contentKey(parts ...string) [32]byte {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
}

// Check validates spec as CREATE FUNCTION / CREATE AGGREGATE must before storing it: the
// name, the options, the types, and the body (a SQL body binds against cat, a script
// compiles and an aggregate's script has its four functions, a module compiles, exports
// the function with the declared signature, and imports nothing). An error positioned in
// the body has a body-relative position (sql.CreateFunction.BodyError places it).
func (r *Runtime) Check(spec Spec, cat sql.Catalog) error {
	if err := sql.CheckFunctionName(spec.Name); err != nil {
		return err
	}
	if _, err := spec.limits(); err != nil {
		return err
	}
	for _, p := range spec.Params {
		if p.Type.Kind == sql.KindInterval || p.Type.Kind == sql.KindNull {
			return sql.Errorf(sql.CodeTypeMismatch, "parameter %s cannot be %s", p.Name, p.Type)
		}
	}
	if spec.Table != nil {
		_, err := r.TableFunc(spec)
		return err
	}
	switch {
	case spec.Aggregate && spec.Language != LangJS:
		return sql.Errorf(sql.CodeNotSupported, "aggregates are written in JavaScript: CREATE AGGREGATE ... LANGUAGE javascript")
	case spec.Aggregate:
		_, err := r.Agg(spec)
		return err
	}
	switch spec.Language {
	case LangSQL:
		_, err := bindSQLBody(spec, cat)
		return err
	case LangJS:
		_, err := r.jsFunc(spec)
		return err
	case LangWasm:
		_, err := r.wasmFunc(spec)
		return err
	}
	return sql.Errorf(sql.CodeNotSupported, "language %s is not supported", spec.Language)
}

// Func returns the definition of scalar function spec for a statement that binds against
// cat (a SQL function's body is bound there, so it sees the functions it calls).
func (r *Runtime) Func(spec Spec, cat sql.Catalog) (*sql.FuncDef, error) {
	types := make([]sql.Type, len(spec.Params))
	for i, p := range spec.Params {
		types[i] = p.Type
	}
	d := &sql.FuncDef{Name: spec.Name, Sig: signature(spec), Group: "user", Doc: "LANGUAGE " + spec.Language, Hidden: true,
		Check: func(args []sql.Expr) (sql.Type, []sql.Expr, error) {
			args, err := sql.CoerceArgs(spec.Name, args, types)
			return spec.Returns, args, err
		}}
	switch spec.Language {
	case LangSQL:
		d.Inline = func(args []sql.Expr) (sql.Expr, error) { return inlineSQL(spec, cat, args) }
		d.Build = func(*sql.Call, []sql.Evaluator) (sql.Evaluator, error) {
			return nil, sql.Errorf(sql.CodeInternal, "SQL function %s was not inlined", spec.Name)
		}
	case LangJS:
		f, err := r.jsFunc(spec)
		if err != nil {
			return nil, err
		}
		d.Volatile, d.Build = true, f.build
	case LangWasm:
		f, err := r.wasmFunc(spec)
		if err != nil {
			return nil, err
		}
		d.Volatile, d.Build = true, f.build
	default:
		return nil, sql.Errorf(sql.CodeNotSupported, "language %s is not supported", spec.Language)
	}
	return d, nil
}

// signature renders name(p TYPE, ...) RETURNS TYPE.
func signature(spec Spec) string {
	ps := make([]string, len(spec.Params))
	for i, p := range spec.Params {
		ps[i] = p.Name + " " + p.Type.String()
	}
	if spec.Table != nil {
		cs := make([]string, len(spec.Table))
		for i, c := range spec.Table {
			cs[i] = c.Name + " " + c.Type.String()
		}
		return spec.Name + "(" + strings.Join(ps, ", ") + ") RETURNS TABLE (" + strings.Join(cs, ", ") + ")"
	}
	return spec.Name + "(" + strings.Join(ps, ", ") + ") RETURNS " + spec.Returns.String()
}

// Signature renders the function as SHOW FUNCTIONS lists it: name(p TYPE, ...) RETURNS TYPE.
func (s Spec) Signature() string { return signature(s) }

// ---- errors of calls ----

// callError is the error value of a call of fn that failed.
func callError(fn string, code, format string, args ...any) sql.Value {
	return sql.ErrorValue(code, "function "+fn+": "+fmt.Sprintf(format, args...))
}

func interrupted(fn string, reason int32, l limits) sql.Value {
	if reason == reasonMemory {
		return callError(fn, sql.CodeOutOfMemory, "the call used more than its memory limit (%s; WITH (memory_limit = ...) sets it)", sizeText(l.memory))
	}
	return callError(fn, sql.CodeQueryCanceled, "the call ran longer than its time limit (%s; WITH (timeout = ...) sets it)", l.timeout)
}

func sizeText(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatUint(n>>30, 10) + "GB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatUint(n>>20, 10) + "MB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatUint(n>>10, 10) + "KB"
	}
	return strconv.FormatUint(n, 10) + "B"
}
