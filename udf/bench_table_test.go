package udf

import (
	"strings"
	"testing"

	"rsql/sql"
)

// Benchmarks of one table function, splitting a comma-separated VARCHAR of four tags into
// rows, written three ways and called per input row through its compiled evaluator, as
// the table function operator calls it: the built-in STRING_TO_TABLE, JavaScript and wasm
// (testdata/risk.wat's split, which returns a JSON array). One op is one input row (four
// output rows).
//
//	go test -run '^$' -bench Split -benchmem ./udf/

func benchSplit(b *testing.B, d *sql.TableFuncDef, extra ...sql.Value) {
	args := []sql.Expr{&sql.ColumnRef{Index: 0, Name: "tags", T: sql.TypeVarchar}}
	evals := []sql.Evaluator{func(r sql.Row) sql.Value { return r[0] }}
	for _, v := range extra {
		args = append(args, &sql.Literal{V: v, T: sql.TypeVarchar})
		evals = append(evals, func(sql.Row) sql.Value { return v })
	}
	if _, _, err := d.Check(args); err != nil {
		b.Fatal(err)
	}
	f, err := d.Build(evals)
	if err != nil {
		b.Fatal(err)
	}
	words := []string{"red", "green", "blue", "amber", "teal", "ivory"}
	rows := make([]sql.Row, 1024)
	for i := range rows {
		rows[i] = sql.Row{sql.Varchar(strings.Join([]string{words[i%6], words[(i+1)%6], words[(i+3)%6], words[(i+4)%6]}, ","))}
	}
	out := 0
	emit := func(cols []sql.Value) { out += len(cols[0].S) }
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for i := 0; b.Loop(); i++ {
		if err := f(rows[i&1023], emit); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if cpu := cpuTime() - c0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "rows/cpu-s")
	}
	if out == 0 {
		b.Fatal("no output")
	}
}

func BenchmarkSplitBuiltin(b *testing.B) {
	d, _ := sql.LookupTableFunc("string_to_table")
	benchSplit(b, d, sql.Varchar(","))
}

func BenchmarkSplitJS(b *testing.B) {
	r := NewRuntime()
	defer r.Close()
	d, err := r.TableFunc(Spec{Name: "split_js", Language: LangJS, Params: sql.Schema{{Name: "tags", Type: sql.TypeVarchar}},
		Table: sql.Schema{{Name: "tag", Type: sql.TypeVarchar}}, Body: "return tags.split(',');"})
	if err != nil {
		b.Fatal(err)
	}
	benchSplit(b, d)
}

func BenchmarkSplitWasm(b *testing.B) {
	r := NewRuntime()
	defer r.Close()
	d, err := r.TableFunc(Spec{Name: "split_wasm", Language: LangWasm, Body: "risk.wasm", Module: riskModule(b),
		Options: map[string]string{"export": "split"},
		Params:  sql.Schema{{Name: "tags", Type: sql.TypeVarchar}}, Table: sql.Schema{{Name: "tag", Type: sql.TypeVarchar}}})
	if err != nil {
		b.Fatal(err)
	}
	benchSplit(b, d)
}
