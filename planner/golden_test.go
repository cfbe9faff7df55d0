package planner

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rsql/sql"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/ with the current output")

// testCatalog holds the streams the golden queries read and write.
type testCatalog map[string]*sql.Relation

func (c testCatalog) Relation(name string) (*sql.Relation, bool) {
	r, ok := c[strings.ToLower(name)]
	return r, ok
}

func goldenCatalog() testCatalog {
	c := testCatalog{}
	add := func(r *sql.Relation) { c[strings.ToLower(r.Name)] = r }
	orders := func(name string, opts map[string]string) *sql.Relation {
		return &sql.Relation{
			Name: name,
			Schema: sql.Schema{
				{Name: "order_id", Type: sql.TypeBigInt},
				{Name: "user_id", Type: sql.TypeVarchar},
				{Name: "amount", Type: sql.TypeDouble},
				{Name: "ts", Type: sql.TypeTimestamp},
			},
			Options:        opts,
			EventTime:      3,
			WatermarkDelay: 5000,
		}
	}
	add(orders("orders", map[string]string{"connector": "file", "path": "orders.jsonl", "format": "json"}))
	add(orders("orders_mq", map[string]string{"topic": "orders", "queues": "8", "format": "json"}))
	add(orders("orders_keyed", map[string]string{"topic": "orders_keyed", "queues": "8", "partitioned_by": "user_id"}))
	add(orders("payments_mq", map[string]string{"topic": "payments", "queues": "4", "format": "json"}))
	add(orders("payments", map[string]string{"connector": "file", "path": "payments.jsonl", "format": "json"}))
	add(&sql.Relation{Name: "users", Schema: sql.Schema{
		{Name: "user_id", Type: sql.TypeVarchar},
		{Name: "tier", Type: sql.TypeVarchar},
		{Name: "ts", Type: sql.TypeTimestamp},
		{Name: sql.ChangeColumn, Type: sql.TypeVarchar},
	}, Options: map[string]string{"topic": "users", "queues": "2", "format": "json"},
		EventTime: 2, WatermarkDelay: 5000, IsTable: true, PrimaryKey: []int{0}})
	sink := func(name string, opts map[string]string) *sql.Relation {
		return &sql.Relation{Name: name, Options: opts, EventTime: -1}
	}
	add(sink("totals", map[string]string{"connector": "file", "path": "totals.jsonl", "format": "json"}))
	add(sink("totals_mq", map[string]string{"topic": "totals", "format": "json"}))
	add(sink("big_orders", map[string]string{"topic": "big_orders", "format": "json"}))
	add(sink("user_stats", map[string]string{"topic": "user_stats", "format": "json"}))
	add(&sql.Relation{Name: "dim_users", IsTable: true, PrimaryKey: []int{0}, EventTime: -1,
		Schema: sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "tier", Type: sql.TypeVarchar},
			{Name: "country", Type: sql.TypeVarchar}, {Name: "credit", Type: sql.TypeDouble}},
		Options: map[string]string{"connector": "postgres", "url": "postgres://rsql@127.0.0.1:5432/shop",
			"table": "crm.users", "cache_ttl": "30s", "cache_rows": "5000", "format": "json"}})
	return c
}

// directives reads the leading "-- key: value" comment lines of a golden query.
func directives(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "--") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "--")), ":")
		if ok && (k == "job" || k == "sink" || k == "state_ttl" || k == "layout") {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// TestGolden plans every testdata/*.sql query (parsed and bound against goldenCatalog) and
// compares EXPLAIN with testdata/<name>.golden. Run `go test ./planner -rewrite` to accept
// new output, then read the diff.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden queries: %v", err)
	}
	cat := goldenCatalog()
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sql")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			q, opts, got := querySQL(t, cat, string(b))
			if q != nil {
				got = explain(q, opts)
			}
			gf := strings.TrimSuffix(f, ".sql") + ".golden"
			if *rewrite {
				if err := os.WriteFile(gf, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(gf)
			if err != nil {
				t.Fatalf("%v (run go test ./planner -rewrite)", err)
			}
			if got != string(want) {
				t.Errorf("EXPLAIN of %s differs from %s:\n--- got\n%s--- want\n%s", f, gf, got, want)
			}
			// The reference evaluator (interp_test.go) knows single-relation queries;
			// composed ones are checked against PostgreSQL end to end
			// (tests/composition_test.go).
			if q != nil && isSimple(q) && !strings.HasPrefix(got, "error:") {
				checkSameRows(t, q, opts)
			}
		})
	}
}

// querySQL binds a golden query and reads its directives into Options; when the query does
// not bind, it returns the error as the text to compare.
func querySQL(t *testing.T, cat testCatalog, text string) (*sql.Query, Options, string) {
	t.Helper()
	d := directives(text)
	q, err := bindSQL(t, cat, text)
	if err != nil {
		return nil, Options{}, "error: " + err.Error() + "\n"
	}
	opts := Options{Job: d["job"]}
	if v := d["state_ttl"]; v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("state_ttl: %v", err)
		}
		opts.StateTTL = n
	}
	if v := d["layout"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("layout: %v", err)
		}
		opts.Layout = n
	}
	if s := d["sink"]; s != "" {
		r, ok := cat.Relation(s)
		if !ok {
			t.Fatalf("sink %q is not in the test catalog", s)
		}
		sink, err := StreamSink(r.Name, r.Options, nil)
		if err != nil {
			t.Fatalf("sink %q: %v", s, err)
		}
		sink.Connector = r.Connector()
		opts.Sink = sink
	}
	return q, opts, ""
}

// explain is what EXPLAIN prints for q, or the planning error.
func explain(q *sql.Query, opts Options) string {
	l, p, err := Plan(q, opts)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return Explain(l, p)
}

// isSimple reports whether the reference evaluator handles q: one relation, none of
// DISTINCT, ROW_NUMBER, ORDER BY, OFFSET.
func isSimple(q *sql.Query) bool {
	_, rel := q.From.(*sql.FromRelation)
	return rel && !q.Distinct && q.RowNumber == nil && len(q.OrderBy) == 0 && q.Offset == 0
}
