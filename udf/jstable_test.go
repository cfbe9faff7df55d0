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
		case 'late':    return [['a', 1], ['b', 2], ['c', 'x']];
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
		"type": sql.CodeExternalRoutine, "late": sql.CodeExternalRoutine, "scalar": sql.CodeExternalRoutine, "throw": sql.CodeExternalRoutine} {
		rows, err := call(sql.Row{sql.Varchar(mode), sql.Int(1)})
		if err == nil || err.Code != code || !strings.Contains(err.Message, "rows_of") {
			t.Errorf("%s: %v, want %s", mode, err, code)
		}
		if len(rows) != 0 {
			t.Errorf("%s: %d rows emitted before the error", mode, len(rows))
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

// The wasm table function of testdata/risk.wat (split on commas, returning a JSON array)
// against strings.Split; a trap or a loop past the time limit fails only its call.
func TestWasmTableFunctionAgainstGo(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	spec := Spec{Name: "csv_split", Language: LangWasm, Body: "risk.wasm", Module: riskModule(t), Options: map[string]string{"export": "split"},
		Params: sql.Schema{{Name: "s", Type: sql.TypeVarchar}}, Table: sql.Schema{{Name: "part", Type: sql.TypeVarchar}}}
	call := tableCall(t, r, spec)
	words := []string{"", "a", "bc", "d e", "ü", "x-y"}
	for i := 0; i < 500; i++ {
		var ws []string
		for k := 0; k <= i%6; k++ {
			ws = append(ws, words[(i*5+k*7)%len(words)])
		}
		s := strings.Join(ws, ",")
		rows, err := call(sql.Row{sql.Varchar(s)})
		if err != nil {
			t.Fatalf("split(%q): %v", s, err)
		}
		want := strings.Split(s, ",")
		if len(rows) != len(want) {
			t.Fatalf("split(%q): %d rows, want %d", s, len(rows), len(want))
		}
		for k := range want {
			if rows[k][0].K != sql.KindVarchar || rows[k][0].S != want[k] {
				t.Fatalf("split(%q) row %d = %v, want %q", s, k, rows[k][0], want[k])
			}
		}
	}
	if rows, err := call(sql.Row{sql.Null}); err != nil || len(rows) != 0 {
		t.Errorf("split(NULL): %v %v", rows, err)
	}
	// rowsFromJSON: the shapes, and what fails.
	table := sql.Schema{{Name: "k", Type: sql.TypeVarchar}, {Name: "n", Type: sql.TypeInt}, {Name: "j", Type: sql.TypeJSON}}
	var got []string
	cols := make([]sql.Value, 3)
	emit := func(c []sql.Value) {
		var parts []string
		for _, v := range c {
			parts = append(parts, v.String())
		}
		got = append(got, strings.Join(parts, "|"))
	}
	if err := rowsFromJSON("f", `[["a", 1, {"x": [1]}], {"n": "2", "k": "b"}, [null, null, null]]`, table, cols, emit); err != nil {
		t.Fatal(err)
	}
	if want := `a|1|{"x": [1]}` + "\n" + "b|2|NULL\nNULL|NULL|NULL"; strings.Join(got, "\n") != want {
		t.Errorf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
	for _, bad := range []string{`{"a": 1}`, `[["a", 1]]`, `[["a", 1.5, null]]`, `[["a", [1], null]]`, `[7]`, `nope`, `[["a", 1, null], ["b", "x", null]]`} {
		n := 0
		if err := rowsFromJSON("f", bad, table, cols, func([]sql.Value) { n++ }); err == nil || err.Code != sql.CodeExternalRoutine || n != 0 {
			t.Errorf("%s: %v after %d rows, want 38000 before any", bad, err, n)
		}
	}
}
