package udf

import (
	"strconv"
	"strings"
	"testing"

	"rsql/sql"
)

// tableCall compiles a call of table function spec over a row of its parameters.
func tableCall(t *testing.T, r *Runtime, spec Spec) func(sql.Row) ([][]sql.Value, *sql.Error) {
	t.Helper()
	d, err := r.TableFunc(spec)
	if err != nil {
		t.Fatal(err)
	}
	args := make([]sql.Expr, len(spec.Params))
	evals := make([]sql.Evaluator, len(spec.Params))
	for i, p := range spec.Params {
		args[i] = &sql.ColumnRef{Index: i, Name: p.Name, T: p.Type}
		evals[i] = func(r sql.Row) sql.Value { return r[i] }
	}
	if _, _, err := d.Check(args); err != nil {
		t.Fatal(err)
	}
	f, err := d.Build(evals)
	if err != nil {
		t.Fatal(err)
	}
	return func(in sql.Row) ([][]sql.Value, *sql.Error) {
		var out [][]sql.Value
		err := f(in, func(cols []sql.Value) { out = append(out, append([]sql.Value(nil), cols...)) })
		return out, err
	}
}

// The shapes a JavaScript table function may return, and what fails the row: each
// failure leaves the next call working.
func TestJSTableFunctionRowsAndFailures(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	spec := Spec{Name: "rows_of", Language: LangJS, Params: sql.Schema{{Name: "mode", Type: sql.TypeVarchar}, {Name: "n", Type: sql.TypeInt}},
		Table:   sql.Schema{{Name: "k", Type: sql.TypeVarchar}, {Name: "v", Type: sql.TypeBigInt}},
		Options: map[string]string{"timeout": "30ms"},
		Body: `
		switch (mode) {
		case 'arrays':  return Array.from({length: n}, (_, i) => ['k' + i, i * i]);
		case 'objects': return Array.from({length: n}, (_, i) => ({v: i, k: String.fromCharCode(97 + i)}));
		case 'none':    return null;
		case 'loop':    for (;;) {}
		case 'getter':  return [{get k() { for (;;) {} }, v: 1}];
		case 'short':   return [['a']];
		case 'type':    return [['a', 'b']];
		case 'scalar':  return 7;
		case 'throw':   throw new TypeError('no ' + n);
		}`}
	call := tableCall(t, r, spec)
	for n := 0; n < 20; n++ {
		rows, err := call(sql.Row{sql.Varchar("arrays"), sql.Int(int64(n))})
		if err != nil || len(rows) != n {
			t.Fatalf("arrays %d: %d rows, %v", n, len(rows), err)
		}
		for i, row := range rows {
			if row[0].S != "k"+strconv.Itoa(i) || row[1].K != sql.KindBigInt || row[1].I != int64(i*i) {
				t.Fatalf("arrays %d row %d: %v", n, i, row)
			}
		}
	}
	rows, err := call(sql.Row{sql.Varchar("objects"), sql.Int(3)})
	if err != nil || len(rows) != 3 || rows[2][0].S != "c" || rows[2][1].I != 2 {
		t.Fatalf("objects: %v %v", rows, err)
	}
	if rows, err := call(sql.Row{sql.Varchar("none"), sql.Int(0)}); err != nil || len(rows) != 0 {
		t.Fatalf("null: %v %v", rows, err)
	}
	for mode, code := range map[string]string{"loop": sql.CodeQueryCanceled, "getter": sql.CodeQueryCanceled, "short": sql.CodeExternalRoutine,
		"type": sql.CodeExternalRoutine, "scalar": sql.CodeExternalRoutine, "throw": sql.CodeExternalRoutine} {
		_, err := call(sql.Row{sql.Varchar(mode), sql.Int(1)})
		if err == nil || err.Code != code || !strings.Contains(err.Message, "rows_of") {
			t.Errorf("%s: %v, want %s", mode, err, code)
		}
		if rows, err := call(sql.Row{sql.Varchar("arrays"), sql.Int(2)}); err != nil || len(rows) != 2 {
			t.Fatalf("after %s: %v %v", mode, rows, err)
		}
	}
	// Only JavaScript; at least one column.
	for _, bad := range []Spec{
		{Name: "t_sql", Language: LangSQL, Body: "1", Table: sql.Schema{{Name: "x", Type: sql.TypeInt}}},
		{Name: "t_none", Language: LangJS, Body: "return []", Table: sql.Schema{}},
	} {
		if _, err := r.TableFunc(bad); err == nil {
			t.Errorf("%s: no error", bad.Name)
		}
	}
}
