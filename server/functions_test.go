package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"rsql/internal/wat"
	"rsql/sql"
)

// Generated orders go through a SQL function, a JavaScript function and a JavaScript
// aggregate in one job; the output is compared with the same computations in Go. Rows
// whose JavaScript call throws go to the dead-letter file, and the job finishes.
func TestUserFunctionsInAJob(t *testing.T) {
	te := newTestEngine(t, false)
	rnd := rand.New(rand.NewPCG(7, 8))
	type order struct {
		id      int
		user    string
		amount  float64
		country string
	}
	var orders []order
	var lines []string
	countries := []string{"DE", "FR", "US"}
	for i := 0; i < 400; i++ {
		o := order{i, "u" + strconv.Itoa(rnd.IntN(5)), math.Round(rnd.Float64()*200000) / 100, countries[rnd.IntN(3)]}
		if i%50 == 7 {
			o.amount = -1 // risk() throws on these
		}
		orders = append(orders, o)
		lines = append(lines, fmt.Sprintf(`{"id": %d, "user": "%s", "amount": %v, "country": "%s", "ts": %d}`, o.id, o.user, o.amount, o.country, 1000*i))
	}
	writeLines(t, te.path("orders.jsonl"), lines...)
	te.mustExec("CREATE STREAM orders (id BIGINT, user VARCHAR, amount DOUBLE, country VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (path = '" + te.path("orders.jsonl") + "', dlq_path = '" + te.path("dlq.jsonl") + "')")
	te.mustExec(`CREATE FUNCTION eur(usd DOUBLE) RETURNS DOUBLE AS 'usd * 0.908'`)
	te.mustExec(`CREATE FUNCTION risk(amount DOUBLE, country VARCHAR) RETURNS INT LANGUAGE javascript AS $$
		if (amount < 0) throw new Error("negative amount " + amount);
		if (amount > 1000 && country !== 'DE') return 3;
		return 1;
	$$`)
	te.mustExec(`CREATE AGGREGATE weighted_avg(v DOUBLE, w DOUBLE) RETURNS DOUBLE LANGUAGE javascript AS $$ {
		create() { return {s: 0, w: 0}; },
		add(st, v, w) { st.s += v * w; st.w += w; return st; },
		merge(a, b) { return {s: a.s + b.s, w: a.w + b.w}; },
		result(st) { return st.w === 0 ? null : st.s / st.w; }
	} $$`)
	te.mustExec("CREATE STREAM per_user WITH (path = '" + te.path("out.jsonl") + "') AS " +
		"SELECT user, COUNT(*) AS n, SUM(risk(amount, country)) AS risk, weighted_avg(eur(amount), risk(amount, country)) AS wavg " +
		"FROM orders GROUP BY user, TUMBLE(ts, INTERVAL '1' HOUR)")
	te.waitJobs()
	if st := te.jobStates()["job-1"]; st != "FINISHED" {
		t.Fatalf("job state %s", st)
	}
	type agg struct {
		n, risk int64
		s, w    float64
	}
	want := map[string]*agg{}
	bad := 0
	for _, o := range orders {
		if o.amount < 0 {
			bad++
			continue
		}
		r := int64(1)
		if o.amount > 1000 && o.country != "DE" {
			r = 3
		}
		a := want[o.user]
		if a == nil {
			a = &agg{}
			want[o.user] = a
		}
		a.n++
		a.risk += r
		a.s += o.amount * 0.908 * float64(r)
		a.w += float64(r)
	}
	got := readLines(t, te.path("out.jsonl"))
	if len(got) != len(want) {
		t.Fatalf("%d output rows, want %d: %v", len(got), len(want), got)
	}
	for _, line := range got {
		var row struct {
			User string
			N    int64
			Risk int64
			Wavg float64
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		w := want[row.User]
		if w == nil || row.N != w.n || row.Risk != w.risk || math.Abs(row.Wavg-w.s/w.w) > 1e-6 {
			t.Errorf("%s, want %+v (wavg %v)", line, w, w.s/w.w)
		}
	}
	dlq := readLines(t, te.path("dlq.jsonl"))
	if len(dlq) != bad || !strings.Contains(dlq[0], `"38000"`) || !strings.Contains(dlq[0], "negative amount -1") {
		t.Fatalf("%d dead letters, want %d: %v", len(dlq), bad, dlq)
	}
}

// Calls with arguments of the wrong types fail to bind with 42883 at the call; a SQL
// body of the wrong type fails CREATE with 42804 in the body; names of built-ins are
// refused.
func TestUserFunctionTypeErrors(t *testing.T) {
	te := newTestEngine(t, false)
	ordersFile(t, te)
	te.mustExec(`CREATE FUNCTION eur(usd DOUBLE) RETURNS DOUBLE AS 'usd * 0.908'`)
	te.mustExec(`CREATE FUNCTION shout(s VARCHAR) RETURNS VARCHAR LANGUAGE javascript AS 'return s.toUpperCase() + "!"'`)
	expectSQLErrors(t, te, []sqlErrorCase{
		{"SELECT id, eur(user) FROM orders", "42883", "eur(user)"},
		{"SELECT shout(id, 2) FROM orders", "42883", "shout(id, 2)"},
		{"SELECT nope(id) FROM orders", "42883", "nope(id)"},
		{"CREATE FUNCTION f(x INT) RETURNS INT AS 'x || ''a'''", "42804", "x || ''a''"},
		{"CREATE FUNCTION g(x INT) RETURNS INT AS 'x + missing'", "42703", "missing"},
		{"CREATE FUNCTION h(x INT) RETURNS INT LANGUAGE javascript AS $$\n  return x +* 1 $$", "42601", "* 1"},
		{"CREATE FUNCTION upper(x VARCHAR) RETURNS VARCHAR AS 'x'", "42723", ""},
		{"CREATE FUNCTION eur(x DOUBLE) RETURNS DOUBLE AS 'x'", "42723", ""},
		{"CREATE AGGREGATE a(x INT) RETURNS INT AS 'x'", "0A000", ""},
		{"CREATE FUNCTION t(x INT) RETURNS INT LANGUAGE javascript AS 'return x' WITH (timeout = 'soon')", "22023", ""},
	})
	// A call with convertible arguments works (INT to DOUBLE, a string literal).
	_, rows := te.mustExec("SELECT eur(amount), eur('100'), shout(user) FROM orders LIMIT 1")
	if r := rows[0][0]; r[0] != "4.54" || r[1] != "90.8" || r[2] != "U1!" {
		t.Errorf("row %v", r)
	}
}

// Functions are in the catalog: SHOW FUNCTIONS and DESCRIBE FUNCTION list them, they
// survive a restart, and DROP / OR REPLACE are refused while a running job calls one.
func TestUserFunctionsCatalog(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (id BIGINT, amount DOUBLE)")
	te.mustExec(`CREATE FUNCTION eur(usd DOUBLE) RETURNS DOUBLE AS 'usd * 0.908'`)
	te.mustExec(`CREATE FUNCTION twice(x DOUBLE) RETURNS DOUBLE AS 'eur(x) * 2'`)
	te.mustExec(`CREATE FUNCTION js_id(x BIGINT) RETURNS BIGINT LANGUAGE javascript AS 'return x' WITH (timeout = '50ms')`)
	te.mustExec("CREATE STREAM out AS SELECT js_id(id) AS id, twice(amount) AS v FROM ev")
	te.wantCode("DROP FUNCTION eur", "55006", "job-1")
	te.wantCode("CREATE OR REPLACE FUNCTION js_id(x BIGINT) RETURNS BIGINT LANGUAGE javascript AS 'return x + 1'", "55006", "job-1")
	te.wantCode("DROP AGGREGATE twice", "42809")
	te.wantCode("DROP FUNCTION nope", "42883")
	te.mustExec("DROP FUNCTION IF EXISTS nope")
	_, rows := te.mustExec("SHOW FUNCTIONS")
	var user []string
	sawBuiltin := false
	for _, r := range rows[0] {
		if r[2] != "built-in" {
			user = append(user, strings.Join(r, " | "))
		}
		sawBuiltin = sawBuiltin || r[0] == "upper" || r[0] == "count"
	}
	sort.Strings(user)
	want := []string{"eur | scalar | sql | eur(usd DOUBLE) RETURNS DOUBLE", "js_id | scalar | javascript | js_id(x BIGINT) RETURNS BIGINT",
		"twice | scalar | sql | twice(x DOUBLE) RETURNS DOUBLE"}
	if !sawBuiltin || strings.Join(user, "\n") != strings.Join(want, "\n") {
		t.Errorf("SHOW FUNCTIONS user rows:\n%s", strings.Join(user, "\n"))
	}
	_, rows = te.mustExec("DESCRIBE FUNCTION js_id")
	desc := map[string]string{}
	for _, r := range rows[0] {
		desc[r[0]] = r[1]
	}
	if desc["body"] != "return x" || desc["option timeout"] != "50ms" || desc["used by"] != "job-1" {
		t.Errorf("DESCRIBE FUNCTION: %v", desc)
	}
	te.mustExec("TERMINATE JOB job-1")
	te.e.Close()
	te.open()
	_, rows = te.mustExec("SELECT twice(10), js_id(5)")
	if r := rows[0][0]; r[0] != "18.16" || r[1] != "5" {
		t.Errorf("after a restart: %v", r)
	}
	te.mustExec("DROP FUNCTION eur")
	te.wantCode("SELECT twice(1)", "42883", "in SQL function twice")
}

// A SQL function that calls itself is refused, through another one too.
func TestSQLFunctionRecursion(t *testing.T) {
	te := newTestEngine(t, false)
	te.mustExec("CREATE FUNCTION f(x INT) RETURNS INT AS 'x + 1'")
	te.wantCode("CREATE OR REPLACE FUNCTION f(x INT) RETURNS INT AS 'f(x) + 1'", "0A000", "cannot call itself")
	te.mustExec("CREATE FUNCTION g(x INT) RETURNS INT AS 'f(x) * 2'")
	te.mustExec("CREATE OR REPLACE FUNCTION f(x INT) RETURNS INT AS 'x - 1'")
	_, rows := te.mustExec("SELECT g(5)")
	if rows[0][0][0] != "8" {
		t.Errorf("g(5) = %v", rows[0][0])
	}
	// f -> g -> f
	te.wantCode("CREATE OR REPLACE FUNCTION f(x INT) RETURNS INT AS 'g(x) + 1'", "0A000", "cannot call itself")
	te.mustExec("DROP FUNCTION f")
	te.wantCode("CREATE FUNCTION f(x INT) RETURNS INT AS 'g(x) + 1'", "42883", "in SQL function g: function f does not exist")
}

// A wasm function's module is read from the file root and copied into the catalog: after
// the file is gone and the engine restarted, the function runs the same bytes. Paths
// outside the root are refused.
func TestWasmFunctionModuleInCatalog(t *testing.T) {
	te := newTestEngine(t, false)
	text, err := os.ReadFile("../udf/testdata/risk.wat")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(te.path("risk.wasm"), wat.MustAssemble(string(text)), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "risk.wasm")
	if err := os.WriteFile(outside, wat.MustAssemble(string(text)), 0o644); err != nil {
		t.Fatal(err)
	}
	te.wantCode("CREATE FUNCTION risk(amount DOUBLE, country VARCHAR) RETURNS INT LANGUAGE wasm AS '"+outside+"'", "22023", "outside the allowed file roots")
	te.wantCode("CREATE FUNCTION risk(amount DOUBLE, country VARCHAR) RETURNS INT LANGUAGE wasm AS '../x.wasm'", "22023")
	te.mustExec("CREATE FUNCTION risk(amount DOUBLE, country VARCHAR) RETURNS INT LANGUAGE wasm AS 'risk.wasm'")
	te.mustExec("CREATE FUNCTION loud(s VARCHAR) RETURNS VARCHAR LANGUAGE wasm AS 'risk.wasm' WITH (export = 'shout')")
	te.wantCode("CREATE FUNCTION bad(s VARCHAR) RETURNS INT LANGUAGE wasm AS 'risk.wasm' WITH (export = 'shout')", "42804", "(i32, i32) -> (i64)")
	os.Remove(te.path("risk.wasm"))
	te.e.Close()
	te.open()
	_, rows := te.mustExec("SELECT risk(2000, 'FR'), risk(2000, 'DE'), loud('abc-é')")
	if r := rows[0][0]; r[0] != "3" || r[1] != "1" || r[2] != "ABC-é" {
		t.Errorf("row %v", r)
	}
	_, rows = te.mustExec("DESCRIBE FUNCTION risk")
	found := false
	for _, r := range rows[0] {
		found = found || r[0] == "module" && strings.HasPrefix(r[1], "risk.wasm (")
	}
	if !found {
		t.Errorf("DESCRIBE FUNCTION risk: %v", rows[0])
	}
}

// sqlErrorCase is a statement that must fail with SQLSTATE code, its position at the first
// occurrence of at in text (when at is not empty).
type sqlErrorCase struct{ text, code, at string }

// expectSQLErrors runs each case on te and checks its error's code and position.
func expectSQLErrors(t *testing.T, te *testEngine, cases []sqlErrorCase) {
	t.Helper()
	for _, c := range cases {
		_, _, err := te.exec(c.text)
		var se *sql.Error
		if !errors.As(err, &se) || se.Code != c.code {
			t.Errorf("%s: got %v, want %s", c.text, err, c.code)
			continue
		}
		if c.at != "" {
			if want := strings.Index(c.text, c.at); se.Pos != want || se.Line == 0 {
				t.Errorf("%s: error at %d (line %d), want at %d (%q): %s", c.text, se.Pos, se.Line, want, c.at, se.Message)
			}
		}
	}
}

// A JavaScript aggregate over an updating input (an aggregate of an aggregate) needs a
// retract function: with one it takes the inner group's old value back; without one the
// query is refused with 0A000 rather than counting every intermediate value.
func TestJavaScriptAggregateRetracts(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (u VARCHAR, x BIGINT) WITH (queues = 1)")
	te.mustExec(`CREATE AGGREGATE jsum(v BIGINT) RETURNS BIGINT LANGUAGE javascript AS $$ {
		create() { return 0; },
		add(st, v) { return st + v; },
		retract(st, v) { return st - v; },
		merge(a, b) { return a + b; },
		result(st) { return st; }
	} $$`)
	te.mustExec(`CREATE AGGREGATE jsum_add_only(v BIGINT) RETURNS BIGINT LANGUAGE javascript AS $$ {
		create() { return 0; },
		add(st, v) { return st + v; },
		merge(a, b) { return a + b; },
		result(st) { return st; }
	} $$`)
	te.wantCode("CREATE MATERIALIZED VIEW bad AS SELECT jsum_add_only(n) AS s FROM (SELECT u, COUNT(*) AS n FROM ev GROUP BY u) x", "0A000", "retract")
	te.mustExec("CREATE MATERIALIZED VIEW v AS SELECT jsum(n) AS s, COUNT(*) AS users FROM (SELECT u, COUNT(*) AS n FROM ev GROUP BY u) x")
	te.mustExec("INSERT INTO ev VALUES ('a', 1), ('a', 2), ('b', 3), ('a', 4)")
	waitFor(t, "the view's sum", func() bool {
		_, rows, err := te.exec("SELECT s, users FROM v")
		return err == nil && len(rows) == 1 && len(rows[0]) == 1 && rows[0][0][0] == "4" && rows[0][0][1] == "2"
	})
}
