package udf

import (
	"bytes"
	"encoding/json"
	"strings"

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
			return func(in sql.Row, emit func([]sql.Value)) *sql.Error {
				v := ev(in)
				if v.IsError() {
					return v.AsError()
				}
				if v.IsNull() {
					return nil
				}
				return rowsFromJSON(spec.Name, v.S, spec.Table, cols, emit)
			}, nil
		}}, nil
}

// rowsFromJSON emits the rows of text, a JSON array of rows of table.
func rowsFromJSON(fn, text string, table sql.Schema, cols []sql.Value, emit func([]sql.Value)) *sql.Error {
	var rows []json.RawMessage
	if err := json.Unmarshal([]byte(text), &rows); err != nil {
		if strings.TrimSpace(text) == "null" {
			return nil
		}
		return callError(fn, sql.CodeExternalRoutine, "returned %s: a table function returns a JSON array of rows", short(text)).AsError()
	}
	if len(rows) > sql.MaxTableRows {
		return callError(fn, sql.CodeProgramLimit, "returned %d rows, more than %d", len(rows), sql.MaxTableRows).AsError()
	}
	for i, raw := range rows {
		raw = bytes.TrimSpace(raw)
		var arr []json.RawMessage
		var obj map[string]json.RawMessage
		switch {
		case len(raw) > 0 && raw[0] == '[':
			if err := json.Unmarshal(raw, &arr); err != nil || len(arr) != len(table) {
				return callError(fn, sql.CodeExternalRoutine, "row %d has %d values, the table %d columns", i, len(arr), len(table)).AsError()
			}
			for c := range table {
				cols[c] = jsonColumn(arr[c], table[c].Type)
			}
		case len(raw) > 0 && raw[0] == '{' && (len(table) > 1 || table[0].Type.Kind != sql.KindJSON):
			if err := json.Unmarshal(raw, &obj); err != nil {
				return callError(fn, sql.CodeExternalRoutine, "row %d is not JSON", i).AsError()
			}
			for c := range table {
				v, ok := obj[table[c].Name]
				if !ok {
					cols[c] = sql.Null
					continue
				}
				cols[c] = jsonColumn(v, table[c].Type)
			}
		case len(table) == 1:
			cols[0] = jsonColumn(raw, table[0].Type)
		default:
			return callError(fn, sql.CodeExternalRoutine, "row %d is %s: a row of %d columns is an array or an object", i, short(string(raw)), len(table)).AsError()
		}
		for c, v := range cols {
			if v.IsError() {
				e := v.AsError()
				return callError(fn, sql.CodeExternalRoutine, "row %d, column %s: %s", i, table[c].Name, e.Message).AsError()
			}
		}
		emit(cols)
	}
	return nil
}

// jsonColumn converts one JSON value to t: null is NULL, a JSON column keeps the text,
// a string converts from its text, a number or boolean from its JSON text.
func jsonColumn(raw json.RawMessage, t sql.Type) sql.Value {
	raw = bytes.TrimSpace(raw)
	s := string(raw)
	switch {
	case s == "null":
		return sql.Null
	case t.Kind == sql.KindJSON:
		return sql.JSONValue(s)
	case len(raw) > 0 && (raw[0] == '{' || raw[0] == '['):
		return sql.ErrorValue(sql.CodeExternalRoutine, "an object or array is not a "+t.String())
	case len(raw) > 0 && raw[0] == '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			return sql.ErrorValue(sql.CodeExternalRoutine, "not JSON")
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
