package udf

import (
	"strconv"

	"github.com/dop251/goja"

	"rsql/sql"
)

// User table functions (CREATE FUNCTION f(...) RETURNS TABLE (c TYPE, ...) LANGUAGE
// javascript; wasm: wasmtable.go): the body returns an array with one element per row — for one column the
// value itself (or a one-element array; an array is always a row, so a JSON column's
// array value is wrapped in one), else an array of the columns' values in order
// or an object keyed by column name; null or undefined gives no rows. The call and the
// reading of its result run under the function's time and memory limits; anything else
// fails the input row (38000), as a throw does.

// TableFunc returns the definition of table function spec (spec.Table set).
func (r *Runtime) TableFunc(spec Spec) (*sql.TableFuncDef, error) {
	if err := sql.CheckFunctionName(spec.Name); err != nil {
		return nil, err
	}
	if len(spec.Table) == 0 {
		return nil, sql.Errorf(sql.CodeSyntax, "table function %s needs at least one column", spec.Name)
	}
	for _, c := range spec.Table {
		if c.Type.Kind == sql.KindInterval || c.Type.Kind == sql.KindNull {
			return nil, sql.Errorf(sql.CodeTypeMismatch, "column %s cannot be %s", c.Name, c.Type)
		}
	}
	for _, p := range spec.Params {
		if p.Type.Kind == sql.KindInterval || p.Type.Kind == sql.KindNull {
			return nil, sql.Errorf(sql.CodeTypeMismatch, "parameter %s cannot be %s", p.Name, p.Type)
		}
	}
	if spec.Aggregate || spec.Language != LangJS && spec.Language != LangWasm {
		return nil, sql.Errorf(sql.CodeNotSupported, "table functions are written in JavaScript or WebAssembly: RETURNS TABLE (...) LANGUAGE javascript")
	}
	types := make([]sql.Type, len(spec.Params))
	for i, p := range spec.Params {
		types[i] = p.Type
	}
	if spec.Language == LangWasm {
		return r.wasmTableFunc(spec, types)
	}
	f, err := r.jsFunc(spec)
	if err != nil {
		return nil, err
	}
	return &sql.TableFuncDef{Name: spec.Name, Sig: signature(spec), Doc: "LANGUAGE " + spec.Language,
		Check: func(args []sql.Expr) (sql.Schema, []sql.Expr, error) {
			args, err := sql.CoerceArgs(spec.Name, args, types)
			return spec.Table, args, err
		},
		Build: f.buildTable}, nil
}

// buildTable compiles a call: like a scalar call, its VM is made on its first row.
func (f *jsFunc) buildTable(args []sql.Evaluator) (sql.TableEvaluator, error) {
	st := &jsScalar{f: f, args: make([]goja.Value, len(args))}
	vals := make([]sql.Value, len(args))
	cols := make([]sql.Value, len(f.spec.Table))
	return func(in sql.Row, emit func([]sql.Value)) *sql.Error {
		for i, a := range args {
			v := a(in)
			if v.IsError() {
				return v.AsError()
			}
			vals[i] = v
		}
		return st.rows(vals, cols, emit)
	}, nil
}

func (st *jsScalar) rows(vals, cols []sql.Value, emit func([]sql.Value)) *sql.Error {
	st.mu.Lock()
	defer st.mu.Unlock()
	in, failed := st.vm()
	if failed.IsError() {
		return failed.AsError()
	}
	for i, v := range vals {
		st.args[i] = in.toJS(v)
	}
	defer clear(st.args)
	table := st.f.spec.Table
	name := st.f.spec.Name
	st.rowsBuf = st.rowsBuf[:0]
	var rowErr sql.Value
	fail := func(v sql.Value) (goja.Value, error) { rowErr = v; return nil, nil }
	_, err := in.run(func() (goja.Value, error) {
		res, err := st.in.fn(goja.Undefined(), st.args...)
		if err != nil {
			return nil, err
		}
		if res == nil || goja.IsUndefined(res) || goja.IsNull(res) {
			return nil, nil
		}
		arr, ok := res.(*goja.Object)
		if !ok || arr.ClassName() != "Array" {
			return fail(callError(name, sql.CodeExternalRoutine, "returned %s: a table function returns an array of rows", shortJS(res)))
		}
		n := arr.Get("length").ToInteger()
		if n > sql.MaxTableRows {
			return fail(callError(name, sql.CodeProgramLimit, "returned %d rows, more than %d", n, sql.MaxTableRows))
		}
		for i := int64(0); i < n; i++ {
			el := arr.Get(strconv.FormatInt(i, 10))
			obj, isObj := el.(*goja.Object)
			switch {
			case isObj && obj.ClassName() == "Array":
				if k := obj.Get("length").ToInteger(); k != int64(len(table)) {
					return fail(callError(name, sql.CodeExternalRoutine, "row %d has %d values, the table %d columns", i, k, len(table)))
				}
				for c := range table {
					cols[c] = in.fromJS(obj.Get(strconv.Itoa(c)), table[c].Type)
				}
			case isObj && obj.ClassName() == "Object" && (len(table) > 1 || table[0].Type.Kind != sql.KindJSON):
				for c := range table {
					cols[c] = in.fromJS(obj.Get(table[c].Name), table[c].Type)
				}
			case len(table) == 1:
				cols[0] = in.fromJS(el, table[0].Type)
			default:
				return fail(callError(name, sql.CodeExternalRoutine, "row %d is %s: a row of %d columns is an array or an object", i, shortJS(el), len(table)))
			}
			for _, v := range cols {
				if v.IsError() {
					return fail(v)
				}
			}
			st.rowsBuf = append(st.rowsBuf, cols...)
		}
		return nil, nil
	})
	// The rows go out once all converted: an error comes before the first
	// (sql.TableEvaluator).
	defer func() { st.rowsBuf = st.rowsBuf[:0] }()
	if err != nil {
		if ie, ok := err.(*interruptError); ok {
			return interrupted(name, ie.reason, st.f.lim).AsError()
		}
		if _, ok := err.(*goja.InterruptedError); ok {
			return interrupted(name, reasonTimeout, st.f.lim).AsError()
		}
		return callError(name, sql.CodeExternalRoutine, "%s", jsErrText(err)).AsError()
	}
	if rowErr.IsError() {
		return rowErr.AsError()
	}
	for i := 0; i+len(table) <= len(st.rowsBuf); i += len(table) {
		emit(st.rowsBuf[i : i+len(table)])
	}
	return nil
}
