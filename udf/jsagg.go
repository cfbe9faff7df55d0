package udf

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/dop251/goja"

	"rsql/sql"
)

// JavaScript aggregates (CREATE AGGREGATE ... LANGUAGE javascript AS $$ { create() {...},
// add(state, args...) {...}, merge(a, b) {...}, result(state) {...} } $$). A group's state
// is a JavaScript value while the job runs (sql.AggState.Obj); at each checkpoint it is
// written as JSON into AggState.V, which the executor stores like any aggregate's state,
// and read back from there after a restart (lazily, on the group's next row). So the
// state must survive JSON.stringify / JSON.parse: numbers, strings, booleans, null,
// arrays and plain objects.

// Agg returns the definition of aggregate spec.
func (r *Runtime) Agg(spec Spec) (*sql.AggDef, error) {
	if !spec.Aggregate || spec.Language != LangJS {
		return nil, sql.Errorf(sql.CodeNotSupported, "aggregates are written in JavaScript")
	}
	f, err := r.jsFunc(spec)
	if err != nil {
		return nil, err
	}
	types := make([]sql.Type, len(spec.Params))
	for i, p := range spec.Params {
		types[i] = p.Type
	}
	return &sql.AggDef{Name: spec.Name, Sig: signature(spec), Arg: paramNames(spec), Doc: spec.Returns.String(), User: true,
		CanRetract: f.canRetract, // seen in jsFunc's scratch VM (docs/sql.md, "JavaScript aggregates")
		Check: func(args []sql.Expr, distinct bool) (sql.Type, []sql.Expr, error) {
			if distinct {
				return spec.Returns, nil, sql.Errorf(sql.CodeNotSupported, "%s(DISTINCT ...) is not supported; only COUNT(DISTINCT x) is", spec.Name)
			}
			args, err := sql.CoerceArgs(spec.Name, args, types)
			return spec.Returns, args, err
		},
		New: func(sql.AggCall) (sql.Aggregator, error) { return &jsAgg{f: f}, nil },
	}, nil
}

// jsAgg runs one aggregate call in its own VM (made on first use).
type jsAgg struct {
	f    *jsFunc
	in   *jsVM
	args []goja.Value
}

// aggFailed is a group state that a failed merge left: its result is the error.
type aggFailed struct{ v sql.Value }

func (a *jsAgg) vm() (*jsVM, *sql.Error) {
	if a.in == nil {
		in, err := a.f.newVM()
		if err != nil {
			if se, ok := err.(*sql.Error); ok {
				return nil, se
			}
			return nil, sql.Errorf(sql.CodeExternalRoutine, "%v", err)
		}
		a.in = in
		runtime.AddCleanup(a, unregister, in.w)
	}
	return a.in, nil
}

// state returns s's script value: the working one, the stored one parsed, or create()'s.
func (a *jsAgg) state(in *jsVM, s *sql.AggState) (goja.Value, sql.Value, bool) {
	switch o := s.Obj.(type) {
	case goja.Value:
		return o, sql.Null, true
	case aggFailed:
		return nil, o.v, false
	}
	if s.V.K == sql.KindJSON {
		v, failed, ok := in.call(in.parse, in.vm.ToValue(s.V.S))
		if !ok {
			return nil, failed, false
		}
		s.Obj = v
		return v, sql.Null, true
	}
	v, failed, ok := in.call(in.create)
	if !ok {
		return nil, failed, false
	}
	s.Obj = v
	return v, sql.Null, true
}

// Add calls add(state, args...) unless an argument is NULL (like the built-in
// aggregates, a row with a NULL argument is skipped).
func (a *jsAgg) Add(s *sql.AggState, args []sql.Value) *sql.Error {
	return a.step(s, args, func(in *jsVM) goja.Callable { return in.add }, 1)
}

// Retract calls retract(state, args...) (an updating input's delete, docs/sql.md
// "Changelogs"); a row with a NULL argument was skipped by Add and is skipped here too.
// The planner lets a JavaScript aggregate read an updating input only when its body
// defines retract (AggDef.CanRetract).
func (a *jsAgg) Retract(s *sql.AggState, args []sql.Value) *sql.Error {
	return a.step(s, args, func(in *jsVM) goja.Callable { return in.retract }, -1)
}

// step calls fn(state, args...) of s's VM (add or retract), unless an argument is NULL,
// and moves the row count by dn.
func (a *jsAgg) step(s *sql.AggState, args []sql.Value, fn func(*jsVM) goja.Callable, dn int64) *sql.Error {
	for _, v := range args {
		if v.K == sql.KindNull {
			return nil
		}
	}
	in, err := a.vm()
	if err != nil {
		return err
	}
	f := fn(in)
	if f == nil {
		return sql.Errorf(sql.CodeExternalRoutine, "aggregate %s has no retract function", a.f.spec.Name)
	}
	st, failed, ok := a.state(in, s)
	if !ok {
		return failed.AsError()
	}
	a.args = append(a.args[:0], st)
	for _, v := range args {
		a.args = append(a.args, in.toJS(v))
	}
	res, failed, ok := in.call(f, a.args...)
	clear(a.args)
	if !ok {
		return failed.AsError()
	}
	s.Obj = res
	s.N += dn
	return nil
}

// Merge calls merge(a, b) (session windows a row bridges).
func (a *jsAgg) Merge(dst, src *sql.AggState) {
	dst.N += src.N
	in, err := a.vm()
	if err != nil {
		dst.Obj = aggFailed{sql.ErrorValue(err.Code, err.Message)}
		return
	}
	x, failed, ok := a.state(in, dst)
	if ok {
		var y goja.Value
		if y, failed, ok = a.state(in, src); ok {
			var res goja.Value
			if res, failed, ok = in.call(in.merge, x, y); ok {
				dst.Obj = res
				return
			}
		}
	}
	dst.Obj = aggFailed{failed}
}

// Result calls result(state) and converts its value to the declared type.
func (a *jsAgg) Result(s *sql.AggState) sql.Value {
	in, err := a.vm()
	if err != nil {
		return sql.ErrorValue(err.Code, err.Message)
	}
	st, failed, ok := a.state(in, s)
	if !ok {
		return failed
	}
	res, failed, ok := in.call(in.result, st)
	if !ok {
		return failed
	}
	return in.fromJS(res, a.f.spec.Returns)
}

// Encode writes the working state as JSON into V.
func (a *jsAgg) Encode(s *sql.AggState) error {
	switch o := s.Obj.(type) {
	case goja.Value:
		in, err := a.vm()
		if err != nil {
			return err
		}
		j, failed, ok := in.call(in.stringify, o)
		if !ok {
			return fmt.Errorf("aggregate %s: its state cannot be written as JSON: %s", a.f.spec.Name, failed.AsError().Message)
		}
		text := "null"
		if !goja.IsUndefined(j) {
			text = j.String()
		}
		s.V = sql.JSONValue(text)
	case aggFailed:
		s.V = sql.Null // a failed merge is not stored: the group restarts from create()
	}
	return nil
}

// Decode checks the stored state; it is parsed on the group's next use.
func (a *jsAgg) Decode(s *sql.AggState) error {
	s.Obj = nil
	switch s.V.K {
	case sql.KindNull:
		return nil
	case sql.KindJSON:
		if !jsonValid(s.V.S) {
			return fmt.Errorf("aggregate %s: stored state is not JSON: %.40q", a.f.spec.Name, s.V.S)
		}
		return nil
	}
	return fmt.Errorf("aggregate %s: stored state is a %s, not JSON", a.f.spec.Name, s.V.K)
}

func jsonValid(s string) bool {
	_, err := sql.CastValue(sql.Varchar(strings.TrimSpace(s)), sql.TypeJSON)
	return err == nil
}
