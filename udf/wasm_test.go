package udf

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"rsql/internal/wat"
	"rsql/sql"
)

// riskModule is testdata/risk.wat assembled: the example of docs/sql.md.
func riskModule(t testing.TB) []byte {
	t.Helper()
	text, err := os.ReadFile("testdata/risk.wat")
	if err != nil {
		t.Fatal(err)
	}
	b, err := wat.Assemble(string(text))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wasmSpec(mod []byte, name string, ret sql.Type, params ...sql.Column) Spec {
	return Spec{Name: name, Params: params, Returns: ret, Language: LangWasm, Body: "risk.wasm", Module: mod, Options: map[string]string{}}
}

func TestWasmScalarAgainstGo(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	mod := riskModule(t)
	f := compileCall(t, r, wasmSpec(mod, "risk", sql.TypeInt, sql.Column{Name: "amount", Type: sql.TypeDouble}, sql.Column{Name: "country", Type: sql.TypeVarchar}))
	shout := compileCall(t, r, wasmSpec(mod, "shout", sql.TypeVarchar, sql.Column{Name: "s", Type: sql.TypeVarchar}))
	rnd := rand.New(rand.NewPCG(5, 6))
	countries := []string{"DE", "FR", "D", "DEU", "", "de"}
	for i := 0; i < 3000; i++ {
		a, c := rnd.Float64()*3000, countries[rnd.IntN(len(countries))]
		want := int64(1)
		if a > 1000 && c != "DE" {
			want = 3
		}
		if got := f(sql.Row{sql.Double(a), sql.Varchar(c)}); got.K != sql.KindInt || got.I != want {
			t.Fatalf("risk(%v, %q) = %v (%v), want %d", a, c, got, got.AsError(), want)
		}
		s := strings.Repeat(c+"xé", rnd.IntN(200))
		if got := shout(sql.Row{sql.Varchar(s)}); got.S != strings.ToUpper(strings.ReplaceAll(s, "é", "\x00")) && got.S != asciiUpper(s) {
			t.Fatalf("shout(%q) = %q", s, got.S)
		}
	}
	if got := f(sql.Row{sql.Null, sql.Varchar("DE")}); !got.IsNull() || got.IsError() {
		t.Errorf("risk(NULL, 'DE') = %v", got)
	}
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// A trap, a loop and a memory hog fail their call; the next call of the same evaluator
// works on a new instance.
func TestWasmFailuresFailTheCall(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	mod := riskModule(t)
	for name, want := range map[string]string{"boom": "38000 unreachable", "spin": "57014 time limit", "hog": "38000 unreachable"} {
		spec := wasmSpec(mod, name, sql.TypeBigInt, sql.Column{Name: "x", Type: sql.TypeBigInt})
		// Only the loop is meant to meet the time limit: the trap and the hog get one a loaded
		// machine cannot reach before their own failure.
		timeout := "10s"
		if name == "spin" {
			timeout = "30ms"
		}
		spec.Options = map[string]string{"timeout": timeout, "memory_limit": "1MB"}
		f := compileCall(t, r, spec)
		got := f(sql.Row{sql.BigInt(0)}).AsError()
		code, msg, _ := strings.Cut(want, " ")
		if got == nil || got.Code != code || !strings.Contains(got.Message, msg) {
			t.Errorf("%s: %v, want %s", name, got, want)
		}
		if again := f(sql.Row{sql.BigInt(7)}); again.IsError() || again.I != 7 {
			t.Errorf("%s: the next call gives %v %v", name, again, again.AsError())
		}
	}
}

// Modules that import anything (WASI's files, clock, environment) are refused; so are
// declarations that do not match the export.
func TestWasmSandboxAndChecks(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	mod := riskModule(t)
	imports := []byte{0, 'a', 's', 'm', 1, 0, 0, 0,
		1, 5, 1, 0x60, 0, 1, 0x7f, // type () -> i32
		2, 31, 1, 22, 'w', 'a', 's', 'i', '_', 's', 'n', 'a', 'p', 's', 'h', 'o', 't', '_', 'p', 'r', 'e', 'v', 'i', 'e', 'w', '1',
		4, 'a', 'r', 'g', 's', 0, 0, // import wasi_snapshot_preview1.args (func type 0)
		7, 8, 1, 4, 'r', 'i', 's', 'k', 0, 0,
	}
	cases := []struct {
		spec Spec
		msg  string
	}{
		{wasmSpec(imports, "risk", sql.TypeInt), "imports wasi_snapshot_preview1.args"},
		{wasmSpec(mod, "risk", sql.TypeInt, sql.Column{Name: "a", Type: sql.TypeDouble}), "is (f64, i32, i32) -> (i32)"},
		{wasmSpec(mod, "nope", sql.TypeInt), "exports no function \"nope\""},
		{wasmSpec([]byte("not wasm"), "risk", sql.TypeInt), "does not compile"},
		{wasmSpec(mod, "risk", sql.TypeInterval), "cannot return"},
	}
	for _, c := range cases {
		err := r.Check(c.spec, nil)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %s", c.spec.Name, err, c.msg)
		}
	}
	// WITH (export = ...) picks another export.
	s := wasmSpec(mod, "high_risk", sql.TypeInt, sql.Column{Name: "a", Type: sql.TypeDouble}, sql.Column{Name: "c", Type: sql.TypeVarchar})
	s.Options = map[string]string{"export": "risk"}
	if err := r.Check(s, nil); err != nil {
		t.Fatal(err)
	}
}
