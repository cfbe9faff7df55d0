package udf

import (
	"math/rand/v2"
	"strings"
	"testing"

	"rsql/sql"
)

// compileCall builds the evaluator of a call of spec over columns 0..n-1 of a row.
func compileCall(t *testing.T, r *Runtime, spec Spec) sql.Evaluator {
	t.Helper()
	d, err := r.Func(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := make([]sql.Expr, len(spec.Params))
	for i, p := range spec.Params {
		args[i] = &sql.ColumnRef{Index: i, Name: p.Name, T: p.Type}
	}
	rt, args, err := d.Check(args)
	if err != nil {
		t.Fatal(err)
	}
	f, err := sql.Compile(&sql.Call{Func: d.Name, Args: args, T: rt, Def: d})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func jsSpec(name, body string, ret sql.Type, params ...sql.Column) Spec {
	return Spec{Name: name, Params: params, Returns: ret, Language: LangJS, Body: body}
}

func TestJSScalarAgainstGo(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	f := compileCall(t, r, jsSpec("risk", "if (amount > 1000 && country !== 'DE') return 3; return amount > 100 ? 2 : 1;", sql.TypeInt,
		sql.Column{Name: "amount", Type: sql.TypeDouble}, sql.Column{Name: "country", Type: sql.TypeVarchar}))
	risk := func(amount float64, country string) int64 {
		switch {
		case amount > 1000 && country != "DE":
			return 3
		case amount > 100:
			return 2
		}
		return 1
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	countries := []string{"DE", "FR", "US", "CN"}
	for i := 0; i < 2000; i++ {
		a, c := rnd.Float64()*3000, countries[rnd.IntN(4)]
		got := f(sql.Row{sql.Double(a), sql.Varchar(c)})
		if got.K != sql.KindInt || got.I != risk(a, c) {
			t.Fatalf("risk(%v, %s) = %v, want %d", a, c, got, risk(a, c))
		}
	}
}

func TestJSTypes(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	cases := []struct {
		body string
		ret  sql.Type
		arg  sql.Value
		pt   sql.Type
		want string
	}{
		{"return x.getTime() + 1000", sql.TypeTimestamp, sql.Timestamp(5000), sql.TypeTimestamp, "1970-01-01 00:00:06"},
		{"return new Date(x.getTime() + 1000)", sql.TypeTimestamp, sql.Timestamp(5000), sql.TypeTimestamp, "1970-01-01 00:00:06"},
		{"return x.a.b + 1", sql.TypeBigInt, sql.JSONValue(`{"a":{"b":41}}`), sql.TypeJSON, "42"},
		{"return {n: x, l: [1, 'two']}", sql.TypeJSON, sql.Int(7), sql.TypeInt, `{"n":7,"l":[1,"two"]}`},
		{"return x === null ? 'null' : 'not'", sql.TypeVarchar, sql.Null, sql.TypeInt, "null"},
		{"return x / 4", sql.Type{Kind: sql.KindDecimal, Precision: 10, Scale: 2}, sql.Int(5), sql.TypeInt, "1.25"},
		{"return !x", sql.TypeBool, sql.Bool(false), sql.TypeBool, "t"},
		{"return x * 2", sql.TypeVarchar, sql.Double(1.5), sql.TypeDouble, "3"},
		{"return undefined", sql.TypeInt, sql.Int(1), sql.TypeInt, "NULL"},
	}
	for _, c := range cases {
		f := compileCall(t, r, jsSpec("f", c.body, c.ret, sql.Column{Name: "x", Type: c.pt}))
		got := f(sql.Row{c.arg})
		if got.IsError() || sql.Text(got) != c.want && !(c.want == "NULL" && got.IsNull()) {
			t.Errorf("%s (%v) = %v (%s), want %s", c.body, c.arg, sql.Text(got), got.AsError(), c.want)
		}
	}
}

// A function that throws, loops or allocates without bound fails its call (the row) with
// the reason; the next call of the same evaluator works.
func TestJSFailuresFailTheCall(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	cases := []struct{ body, code, msg string }{
		{"if (x > 0) throw new Error('boom ' + x); return x", "38000", "boom 1"},
		{"if (x > 0) { while (true) {} } return x", "57014", "time limit (20ms"},
		{"if (x > 0) { let a = []; while (true) a.push('y'.repeat(1000) + a.length) } return x", "", ""},
		{"if (x > 0) { let s = 'ab'; while (true) s = s + s } return x", "", ""},
		{"if (x > 0) return 'x'.repeat(1e10); return x", "38000", "RangeError"},
		{"if (x > 0) { const a = []; a.length = 4e9; return a.join(',').length } return x", "38000", "RangeError"},
		{"if (x > 0) return Array.from({length: 1e9}).length; return x", "38000", "RangeError"},
		{"if (x > 0) return 'abc'; return x", "38000", "not of type INT"},
		{"if (x > 0) return 2 ** 40; return x", "22003", "out of range for INT"},
		{"const f = (n) => f(n + 1); if (x > 0) return f(0); return x", "38000", "RangeError"},
	}
	for _, c := range cases {
		spec := jsSpec("f", c.body, sql.TypeInt, sql.Column{Name: "x", Type: sql.TypeInt})
		spec.Options = map[string]string{"timeout": "1s", "memory_limit": "64MB"}
		if c.code == "" || c.code == "57014" {
			spec.Options["timeout"] = "20ms"
		}
		f := compileCall(t, r, spec)
		got := f(sql.Row{sql.Int(1)})
		e := got.AsError()
		if e == nil {
			t.Errorf("%s: %v, want an error", c.body, got)
			continue
		}
		if c.code == "" && e.Code != "57014" && e.Code != "53200" || c.code != "" && (e.Code != c.code || !strings.Contains(e.Message, c.msg)) {
			t.Errorf("%s: %s %s, want %s %s", c.body, e.Code, e.Message, c.code, c.msg)
		}
		if again := f(sql.Row{sql.Int(0)}); again.IsError() || again.I != 0 {
			t.Errorf("%s: the next call gives %v %v", c.body, again, again.AsError())
		}
	}
}

// Nothing but the arguments and ECMAScript's built-ins is visible: no module loader,
// process, file system, network, timers or environment.
func TestJSSandbox(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	f := compileCall(t, r, jsSpec("probe", `
		const names = ["require", "process", "module", "exports", "fetch", "XMLHttpRequest", "WebSocket", "Deno", "Bun",
			"console", "setTimeout", "setInterval", "os", "fs", "net", "child_process", "__dirname", "globalThis.env",
			"ArrayBuffer", "SharedArrayBuffer", "Uint8Array", "WeakRef", "importScripts", "load", "read", "readFile", "print"];
		const seen = names.filter(n => { try { return eval("typeof " + n) !== "undefined"; } catch (e) { return false; } });
		let imp = "no import";
		try { eval("import('fs')"); imp = "import works"; } catch (e) {}
		return seen.join(",") + "|" + imp + "|" + Object.keys(globalThis).join(",");`, sql.TypeVarchar))
	got := sql.Text(f(sql.Row{}))
	if got != "|no import|" {
		t.Errorf("visible to a function: %q", got)
	}
}

func TestJSSyntaxErrorPositionedInBody(t *testing.T) {
	r := NewRuntime()
	defer r.Close()
	body := "let a = 1;\nreturn a +* 2;"
	err := r.Check(jsSpec("bad", body, sql.TypeInt), nil)
	e, ok := err.(*sql.Error)
	if !ok || e.Code != "42601" || e.Pos != strings.Index(body, "*") || e.Line != 2 {
		t.Fatalf("got %#v", err)
	}
}
