package udf

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"rsql/sql"
)

// Benchmarks of one scalar function, risk(amount, country), written four ways and
// evaluated per event through the compiled expression, as a projection runs it: the
// built-in expression, a SQL function (inlined), JavaScript and wasm. One op is one event.
//
//	go test -run '^$' -bench Risk -benchmem ./udf/

const riskExpr = "CASE WHEN amount > 1000 AND country <> 'DE' THEN 3 ELSE 1 END"

// benchCatalog is a stream orders(amount DOUBLE, country VARCHAR) and the functions of specs.
type benchCatalog struct {
	r     *Runtime
	specs map[string]Spec
}

func (c *benchCatalog) Relation(name string) (*sql.Relation, bool) {
	if !strings.EqualFold(name, "orders") {
		return nil, false
	}
	return &sql.Relation{Name: "orders", EventTime: -1, Schema: sql.Schema{{Name: "amount", Type: sql.TypeDouble}, {Name: "country", Type: sql.TypeVarchar}}}, true
}

func (c *benchCatalog) Function(name string) (*sql.FuncDef, bool) {
	s, ok := c.specs[strings.ToLower(name)]
	if !ok {
		return nil, false
	}
	d, err := c.r.Func(s, c)
	if err != nil {
		panic(err)
	}
	return d, true
}

func (c *benchCatalog) Aggregate(string) (*sql.AggDef, bool) { return nil, false }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchRisk(b *testing.B, expr string) {
	r := NewRuntime()
	defer r.Close()
	params := sql.Schema{{Name: "amount", Type: sql.TypeDouble}, {Name: "country", Type: sql.TypeVarchar}}
	cat := &benchCatalog{r: r, specs: map[string]Spec{
		"risk_sql": {Name: "risk_sql", Params: params, Returns: sql.TypeInt, Language: LangSQL, Body: riskExpr},
		"risk_js": {Name: "risk_js", Params: params, Returns: sql.TypeInt, Language: LangJS,
			Body: "if (amount > 1000 && country !== 'DE') return 3; return 1;"},
		"risk_wasm": {Name: "risk_wasm", Params: params, Returns: sql.TypeInt, Language: LangWasm, Body: "risk.wasm",
			Module: riskModule(b), Options: map[string]string{"export": "risk"}},
	}}
	st, err := sql.Parse("SELECT " + expr + " FROM orders")
	if err != nil {
		b.Fatal(err)
	}
	q, err := sql.Bind(st[0].(*sql.Select), cat)
	if err != nil {
		b.Fatal(err)
	}
	f, err := sql.Compile(q.Select[0])
	if err != nil {
		b.Fatal(err)
	}
	countries := []sql.Value{sql.Varchar("DE"), sql.Varchar("FR"), sql.Varchar("US")}
	rows := make([]sql.Row, 1024)
	for i := range rows {
		rows[i] = sql.Row{sql.Double(float64(i * 7 % 2000)), countries[i%3]}
	}
	sum := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for i := 0; b.Loop(); i++ {
		v := f(rows[i&1023])
		if v.IsError() {
			b.Fatal(v.AsError())
		}
		sum += v.I
	}
	b.StopTimer()
	if cpu := cpuTime() - c0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
	}
	if sum == 0 {
		b.Fatal("no result")
	}
}

func BenchmarkRiskBuiltin(b *testing.B) { benchRisk(b, riskExpr) }
func BenchmarkRiskSQL(b *testing.B)     { benchRisk(b, "risk_sql(amount, country)") }
func BenchmarkRiskJS(b *testing.B)      { benchRisk(b, "risk_js(amount, country)") }
func BenchmarkRiskWasm(b *testing.B)    { benchRisk(b, "risk_wasm(amount, country)") }
