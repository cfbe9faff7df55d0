package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"rsql/internal/wat"
)

// Generated orders with comma-separated tags go through CROSS JOIN LATERAL
// string_to_table WITH ORDINALITY, CROSS JOIN UNNEST of a JSON array and LEFT JOIN LATERAL ... ON TRUE in
// jobs; each output is compared with the same split done in Go.
func TestBuiltinTableFunctionsInAJob(t *testing.T) {
	te := newTestEngine(t, false)
	rnd := rand.New(rand.NewPCG(3, 4))
	words := []string{"red", "green", "blue", "x y", "ü"}
	type order struct {
		id    int
		tags  string
		items []int
	}
	var orders []order
	var lines []string
	for i := 0; i < 300; i++ {
		o := order{id: i}
		var tags []string
		for k := rnd.IntN(4); k > 0; k-- {
			tags = append(tags, words[rnd.IntN(len(words))])
		}
		o.tags = strings.Join(tags, ",")
		for k := rnd.IntN(3); k > 0; k-- {
			o.items = append(o.items, rnd.IntN(100))
		}
		items, _ := json.Marshal(o.items)
		if o.items == nil {
			items = []byte("[]")
		}
		orders = append(orders, o)
		lines = append(lines, fmt.Sprintf(`{"id": %d, "tags": %q, "items": %s, "ts": %d}`, o.id, o.tags, items, 1000*i))
	}
	writeLines(t, te.path("orders.jsonl"), lines...)
	te.mustExec("CREATE STREAM orders (id BIGINT, tags VARCHAR, items JSON, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (path = '" + te.path("orders.jsonl") + "')")
	te.mustExec("CREATE STREAM tagged WITH (path = '" + te.path("tagged.jsonl") + "') AS " +
		"SELECT o.id, t.tag, t.pos FROM orders AS o CROSS JOIN LATERAL string_to_table(o.tags, ',') WITH ORDINALITY AS t(tag, pos) WHERE t.tag <> 'red'")
	te.mustExec("CREATE STREAM unnested WITH (path = '" + te.path("items.jsonl") + "') AS " +
		"SELECT id, CAST(item AS BIGINT) AS item, n FROM orders CROSS JOIN UNNEST(items) AS u(item) LEFT JOIN LATERAL generate_series(1, CAST(item AS INT) % 3) AS g(n) ON TRUE")
	te.waitJobs()
	for id, st := range te.jobStates() {
		if st != "FINISHED" {
			t.Fatalf("%s: %s", id, st)
		}
	}
	var wantTags, wantItems []string
	for _, o := range orders {
		if o.tags != "" {
			for i, tag := range strings.Split(o.tags, ",") {
				if tag != "red" {
					wantTags = append(wantTags, fmt.Sprintf("%d %s %d", o.id, tag, i+1))
				}
			}
		}
		for _, it := range o.items {
			if it%3 == 0 {
				wantItems = append(wantItems, fmt.Sprintf("%d %d <nil>", o.id, it))
			}
			for n := 1; n <= it%3; n++ {
				wantItems = append(wantItems, fmt.Sprintf("%d %d %d", o.id, it, n))
			}
		}
	}
	var gotTags, gotItems []string
	for _, l := range readLines(t, te.path("tagged.jsonl")) {
		var r struct {
			ID  int64
			Tag string
			Pos int64
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		gotTags = append(gotTags, fmt.Sprintf("%d %s %d", r.ID, r.Tag, r.Pos))
	}
	for _, l := range readLines(t, te.path("items.jsonl")) {
		var r struct {
			ID, Item int64
			N        *int64
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		n := "<nil>"
		if r.N != nil {
			n = strconv.FormatInt(*r.N, 10)
		}
		gotItems = append(gotItems, fmt.Sprintf("%d %d %s", r.ID, r.Item, n))
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"tags", gotTags, wantTags}, {"items", gotItems, wantItems}} {
		sort.Strings(c.got)
		sort.Strings(c.want)
		if strings.Join(c.got, "\n") != strings.Join(c.want, "\n") || len(c.want) < 100 {
			t.Errorf("%s: %d rows, want %d\ngot  %q\nwant %q", c.what, len(c.got), len(c.want), head(c.got), head(c.want))
		}
	}
}

func head(s []string) []string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// A JavaScript table function over generated orders: each order's "sku:qty;sku:qty" lines
// become rows, compared with the same parse in Go; rows whose call throws, returns a
// non-array or a row of the wrong shape go to the dead-letter file and the job finishes.
func TestJavaScriptTableFunctionInAJob(t *testing.T) {
	te := newTestEngine(t, false)
	rnd := rand.New(rand.NewPCG(5, 6))
	type line struct {
		sku string
		qty int
	}
	type order struct {
		id    int
		spec  string
		lines []line
		bad   bool
	}
	var orders []order
	var text []string
	for i := 0; i < 300; i++ {
		o := order{id: i}
		var parts []string
		for k := rnd.IntN(4); k > 0; k-- {
			l := line{"s" + strconv.Itoa(rnd.IntN(20)), rnd.IntN(9) + 1}
			o.lines = append(o.lines, l)
			parts = append(parts, fmt.Sprintf("%s:%d", l.sku, l.qty))
		}
		o.spec = strings.Join(parts, ";")
		switch i % 40 {
		case 11:
			o.spec, o.bad, o.lines = "boom", true, nil // the function throws
		case 23:
			o.spec, o.bad, o.lines = "notarray", true, nil // it returns a string
		}
		orders = append(orders, o)
		text = append(text, fmt.Sprintf(`{"id": %d, "spec": %q}`, o.id, o.spec))
	}
	writeLines(t, te.path("orders.jsonl"), text...)
	te.mustExec("CREATE STREAM orders (id BIGINT, spec VARCHAR) WITH (path = '" + te.path("orders.jsonl") + "', dlq_path = '" + te.path("dlq.jsonl") + "')")
	te.mustExec(`CREATE FUNCTION order_lines(spec VARCHAR, scale INT) RETURNS TABLE (sku VARCHAR, qty BIGINT) LANGUAGE javascript AS $$
		if (spec === 'boom') throw new Error("cannot read " + spec);
		if (spec === 'notarray') return spec;
		if (spec === '') return [];
		return spec.split(';').map(function (p) {
			var kv = p.split(':');
			return p.length % 2 ? [kv[0], Number(kv[1]) * scale] : {sku: kv[0], qty: Number(kv[1]) * scale};
		});
	$$`)
	te.mustExec("CREATE STREAM lines WITH (path = '" + te.path("lines.jsonl") + "') AS " +
		"SELECT o.id, l.sku, l.qty FROM orders o CROSS JOIN LATERAL order_lines(o.spec, 10) AS l")
	te.waitJobs()
	if st := te.jobStates()["job-1"]; st != "FINISHED" {
		t.Fatalf("job state %s", st)
	}
	var want, got []string
	bad := 0
	for _, o := range orders {
		if o.bad {
			bad++
		}
		for _, l := range o.lines {
			want = append(want, fmt.Sprintf("%d %s %d", o.id, l.sku, l.qty*10))
		}
	}
	for _, l := range readLines(t, te.path("lines.jsonl")) {
		var r struct {
			ID  int64
			Sku string
			Qty int64
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s %d", r.ID, r.Sku, r.Qty))
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(want) < 200 {
		t.Errorf("%d rows, want %d\ngot  %q\nwant %q", len(got), len(want), head(got), head(want))
	}
	dlq := readLines(t, te.path("dlq.jsonl"))
	if len(dlq) != bad || bad == 0 {
		t.Fatalf("%d dead letters, want %d: %v", len(dlq), bad, dlq)
	}
	joined := strings.Join(dlq, "\n")
	for _, w := range []string{`"38000"`, "cannot read boom", "a table function returns an array of rows", `"table function order_lines"`} {
		if !strings.Contains(joined, w) {
			t.Errorf("dead letters lack %q: %s", w, joined)
		}
	}
}

// Type errors of table functions name the SQLSTATE and the position; the catalog lists
// built-in and user table functions, DROP is refused while a job calls one.
func TestTableFunctionErrorsAndCatalog(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (id BIGINT, tags VARCHAR)")
	te.mustExec(`CREATE FUNCTION split_tags(tags VARCHAR) RETURNS TABLE (tag VARCHAR) LANGUAGE javascript AS 'return tags === null ? [] : tags.split(",")'`)
	expectSQLErrors(t, te, []sqlErrorCase{
		{"SELECT * FROM ev CROSS JOIN LATERAL split_tags(id) AS t(tag)", "42883", "split_tags(id)"},
		{"SELECT * FROM ev CROSS JOIN LATERAL split_tags(tags, 1) AS t(tag)", "42883", "split_tags(tags, 1)"},
		{"SELECT split_tags(tags) FROM ev", "42883", "split_tags(tags)"},
		{"SELECT * FROM ev CROSS JOIN LATERAL string_to_table(id, ',') AS t(tag)", "42883", "string_to_table("},
		{"SELECT * FROM ev CROSS JOIN LATERAL split_tags(tags) AS t(tag) WHERE tag + 1 > 2", "42804", "tag + 1"},
		{"CREATE FUNCTION unnest(x VARCHAR) RETURNS TABLE (y VARCHAR) LANGUAGE javascript AS 'return [x]'", "42723", ""},
		{"CREATE FUNCTION st(x VARCHAR) RETURNS TABLE (y VARCHAR) AS 'x'", "0A000", ""},
		{"CREATE AGGREGATE ag(x VARCHAR) RETURNS TABLE (y VARCHAR) LANGUAGE javascript AS 'x'", "42601", ""},
		{"CREATE FUNCTION dup(x VARCHAR) RETURNS TABLE (y VARCHAR, y INT) LANGUAGE javascript AS 'return []'", "42701", "y INT"},
	})
	_, rows := te.mustExec("SHOW FUNCTIONS")
	kinds := map[string]string{}
	for _, r := range rows[0] {
		kinds[r[0]] = r[1] + " | " + r[2] + " | " + r[3]
	}
	for name, want := range map[string]string{
		"split_tags":      "table | javascript | split_tags(tags VARCHAR) RETURNS TABLE (tag VARCHAR)",
		"string_to_table": "table | built-in | STRING_TO_TABLE(s, delimiter [, null_string])",
		"unnest":          "table | built-in | UNNEST(array [, array ...])",
	} {
		if kinds[name] != want {
			t.Errorf("SHOW FUNCTIONS %s: %q, want %q", name, kinds[name], want)
		}
	}
	_, rows = te.mustExec("DESCRIBE FUNCTION generate_series")
	if len(rows[0]) < 2 || rows[0][1][1] != "table" {
		t.Errorf("DESCRIBE FUNCTION generate_series: %v", rows[0])
	}
	te.mustExec("CREATE STREAM out AS SELECT id, t.tag FROM ev CROSS JOIN LATERAL split_tags(tags) AS t")
	te.wantCode("DROP FUNCTION split_tags", "55006", "job-1")
	te.wantCode("CREATE OR REPLACE FUNCTION split_tags(x INT) RETURNS INT LANGUAGE javascript AS 'return x'", "42809")
	te.mustExec("TERMINATE JOB job-1")
	te.e.Close()
	te.open()
	_, rows = te.mustExec("EXPLAIN SELECT t.tag FROM ev CROSS JOIN LATERAL split_tags(ev.tags) AS t")
	if got := fmt.Sprint(rows[0]); !strings.Contains(got, "TableFunc split_tags(tags) AS t(tag VARCHAR)") {
		t.Errorf("after a restart: %s", got)
	}
	te.mustExec("DROP FUNCTION split_tags")
}

// A wasm table function (udf/testdata/risk.wat's split, which returns a JSON array) in a
// job over generated rows, against strings.Split; the module is in the catalog.
func TestWasmTableFunctionInAJob(t *testing.T) {
	te := newTestEngine(t, false)
	text, err := os.ReadFile("../udf/testdata/risk.wat")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(te.path("risk.wasm"), wat.MustAssemble(string(text)), 0o644); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(9, 10))
	var lines, want []string
	for i := 0; i < 200; i++ {
		var parts []string
		for k := rnd.IntN(4); k >= 0; k-- {
			parts = append(parts, strings.Repeat(string(rune('a'+rnd.IntN(5))), rnd.IntN(3)))
		}
		s := strings.Join(parts, ",")
		lines = append(lines, fmt.Sprintf(`{"id": %d, "csv": %q}`, i, s))
		for k, p := range strings.Split(s, ",") {
			want = append(want, fmt.Sprintf("%d %d %q", i, k, p))
		}
	}
	writeLines(t, te.path("in.jsonl"), lines...)
	te.mustExec("CREATE STREAM rows_in (id BIGINT, csv VARCHAR) WITH (path = '" + te.path("in.jsonl") + "')")
	te.mustExec("CREATE FUNCTION csv_split(s VARCHAR) RETURNS TABLE (part VARCHAR) LANGUAGE wasm AS 'risk.wasm' WITH (export = 'split')")
	te.wantCode("CREATE FUNCTION csv_bad(s VARCHAR) RETURNS TABLE (part VARCHAR) LANGUAGE wasm AS 'risk.wasm' WITH (export = 'risk')", "42804", "(f64, i32, i32) -> (i32)")
	te.mustExec("CREATE STREAM parts WITH (path = '" + te.path("parts.jsonl") + "') AS " +
		"SELECT r.id, p.part FROM rows_in r CROSS JOIN LATERAL csv_split(r.csv) AS p")
	te.waitJobs()
	var got []string
	next := map[int64]int{}
	for _, l := range readLines(t, te.path("parts.jsonl")) {
		var r struct {
			ID   int64
			Part string
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %d %q", r.ID, next[r.ID], r.Part))
		next[r.ID]++
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%d rows, want %d\ngot  %q\nwant %q", len(got), len(want), head(got), head(want))
	}
}
