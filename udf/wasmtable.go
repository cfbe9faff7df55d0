package udf

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"rsql/sql"
)

// WebAssembly table functions: the export follows the scalar calling convention with a
// text result (one i64, pointer << 32 | length), and that text is a JSON array with one
// element per row — for a table of one column the value itself (or a one-element array;
// an array is always a row, so a JSON column's array value is wrapped in one), else an array of the columns' values in order or an object keyed by column name. JSON
// null gives no rows. Values convert to the column types as text does (CAST); anything
// else fails the input row (38000).

// wasmTableFunc builds the definition of wasm table function spec.
func (r *Runtime) wasmTableFunc(spec Spec, types []sql.Type) (*sql.TableFuncDef, error) {
	inner := spec
	inner.Table, inner.Returns = nil, sql.TypeJSON
	f, err := r.wasmFunc(inner)
	if err != nil {
		return nil, err
	}
	return &sql.TableFuncDef{Name: spec.Name, Sig: signature(spec), Doc: "LANGUAGE " + spec.Language,
		Check: func(args []sql.Expr) (sql.Schema, []sql.Expr, error) {
			args, err := sql.CoerceArgs(spec.Name, args, types)
			return spec.Table, args, err
		},
		Build: func(args []sql.Evaluator) (sql.TableEvaluator, error) {
			ev, err := f.build(nil, args)
			if err != nil {
				return nil, err
			}
			cols := make([]sql.Value, len(spec.Table))
			var rows, items, out []sql.Value
			return func(in sql.Row, emit func([]sql.Value)) *sql.Error {
				v := ev(in)
				if v.IsError() {
					return v.AsError()
				}
				if v.IsNull() {
					return nil
				}
				return rowsFromJSON(spec.Name, v.S, spec.Table, cols, emit, &rows, &items, &out)
			}, nil
		}}, nil
}

// rowsFromJSON emits the rows of text, a JSON array of rows of table (the module's
// result, already checked to be JSON).
// scratch, when not nil, holds buffers reused from call to call.
func rowsFromJSON(fn, text string, table sql.Schema, cols []sql.Value, emit func([]sql.Value), scratch ...*[]sql.Value) *sql.Error {
	text = strings.TrimSpace(text)
	if text == "null" {
		return nil
	}
	var rows, items, out []sql.Value
	if len(scratch) == 3 {
		rows, items, out = (*scratch[0])[:0], (*scratch[1])[:0], (*scratch[2])[:0]
		defer func() { *scratch[0], *scratch[1], *scratch[2] = rows[:0], items[:0], out[:0] }()
	}
	rows, err := sql.JSONElements(text, rows)
	if err != nil {
		if err.Code == sql.CodeProgramLimit {
			return callError(fn, sql.CodeProgramLimit, "returned more than %d rows", sql.MaxTableRows).AsError()
		}
		return callError(fn, sql.CodeExternalRoutine, "returned %s: a table function returns a JSON array of rows", short(text)).AsError()
	}
	// The rows go out once all converted: an error comes before the first
	// (sql.TableEvaluator).
	for i, rv := range rows {
		raw := strings.TrimSpace(rv.S)
		switch {
		case raw == "":
			return callError(fn, sql.CodeExternalRoutine, "row %d is empty", i).AsError()
		case raw[0] == '[':
			items, err = sql.JSONElements(raw, items[:0])
			if err != nil || len(items) != len(table) {
				return callError(fn, sql.CodeExternalRoutine, "row %d has %d values, the table %d columns", i, len(items), len(table)).AsError()
			}
			for c := range table {
				cols[c] = jsonColumn(items[c].S, table[c].Type)
			}
		case raw[0] == '{' && (len(table) > 1 || table[0].Type.Kind != sql.KindJSON):
			var obj map[string]json.RawMessage
			if err := json.Unmarshal([]byte(raw), &obj); err != nil {
				return callError(fn, sql.CodeExternalRoutine, "row %d is not a JSON object", i).AsError()
			}
			for c := range table {
				v, ok := obj[table[c].Name]
				if !ok {
					cols[c] = sql.Null
					continue
				}
				cols[c] = jsonColumn(string(v), table[c].Type)
			}
		case len(table) == 1:
			cols[0] = jsonColumn(raw, table[0].Type)
		default:
			return callError(fn, sql.CodeExternalRoutine, "row %d is %s: a row of %d columns is an array or an object", i, short(raw), len(table)).AsError()
		}
		for c, v := range cols {
			if v.IsError() {
				e := v.AsError()
				return callError(fn, sql.CodeExternalRoutine, "row %d, column %s: %s", i, table[c].Name, e.Message).AsError()
			}
		}
		out = append(out, cols...)
	}
	for i := 0; i < len(out); i += len(table) {
		emit(out[i : i+len(table)])
	}
	return nil
}

// jsonColumn converts one JSON value to t: null is NULL, a JSON column keeps the text,
// a string converts from its text, a number or boolean from its JSON text.
func jsonColumn(raw string, t sql.Type) sql.Value {
	s := strings.TrimSpace(raw)
	switch {
	case s == "null":
		return sql.Null
	case t.Kind == sql.KindJSON:
		return sql.JSONValue(s)
	case s == "":
		return sql.ErrorValue(sql.CodeExternalRoutine, "an empty value")
	case s[0] == '{' || s[0] == '[':
		return sql.ErrorValue(sql.CodeExternalRoutine, "an object or array is not a "+t.String())
	case s[0] == '"':
		if len(s) >= 2 && s[len(s)-1] == '"' && !strings.ContainsAny(s[1:len(s)-1], "\\\"") && utf8.ValidString(s) {
			s = s[1 : len(s)-1]
		} else if err := json.Unmarshal([]byte(s), &s); err != nil {
			return sql.ErrorValue(sql.CodeExternalRoutine, "not a JSON string")
		}
	}
	v, err := sql.CastValue(sql.Varchar(s), t)
	if err != nil {
		return sql.ErrorValue(sql.CodeExternalRoutine, err.Error())
	}
	return v
}

func short(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
