package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rsql/broker"
	"rsql/sql"
)

// A pull query fixing a keyed view's key by = or IN reads those keys from the store
// (EXPLAIN says so) and answers what the scan answers: keys present and absent, NULL
// constants and NULL keys, constants of other types (BIGINT, NUMERIC, text), a composite
// key, other conditions AND-ed. A constant that does not convert exactly, or a condition
// that is not on the column itself, leaves the query to the scan.
func TestPointLookupEqualsScan(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (k INT, s VARCHAR, v INT) WITH (queues = 3)")
	te.mustExec("SET offset_reset = 'earliest'")
	var vals []string
	for i := 0; i < 300; i++ {
		vals = append(vals, fmt.Sprintf("(%d, '%c', %d)", i, 'x'+i%3, i))
	}
	vals = append(vals, "(NULL, 'x', 1)", "(NULL, NULL, 2)", "(7, NULL, 3)")
	te.mustExec("INSERT INTO ev VALUES " + strings.Join(vals, ", "))
	te.mustExec("CREATE MATERIALIZED VIEW per_k AS SELECT k, COUNT(*) AS n, SUM(v) AS total FROM ev GROUP BY k")
	te.mustExec("CREATE MATERIALIZED VIEW per_ks AS SELECT s, k, COUNT(*) AS n FROM ev GROUP BY s, k")
	te.mustExec("CREATE MATERIALIZED VIEW per_s AS SELECT s, MAX(k) AS top FROM ev GROUP BY s")
	// A view of a table read by a continuous query holds the table's latest versions, keyed
	// by its primary key: its pull queries look keys up too.
	te.mustExec("CREATE TABLE tiers (id BIGINT PRIMARY KEY, tier VARCHAR) WITH (queues = 2)")
	te.mustExec("INSERT INTO tiers VALUES (1, 'a'), (2, 'b'), (3, 'c'), (1, 'd'), (40, 'e'), (41, 'f'), (2, 'g')")
	te.mustExec("CREATE MATERIALIZED VIEW tier_of AS SELECT id, tier FROM tiers WHERE id > 1")
	waitFor(t, "the views' rows", func() bool {
		_, a, err1 := te.exec("SELECT COUNT(*) FROM per_k")
		_, b, err2 := te.exec("SELECT COUNT(*) FROM per_ks")
		_, c, err3 := te.exec("SELECT COUNT(*) FROM per_s")
		return err1 == nil && err2 == nil && err3 == nil && a[0][0][0] == "301" && b[0][0][0] == "303" && c[0][0][0] == "4"
	})
	waitFor(t, "the table view's rows", func() bool {
		_, a, err := te.exec("SELECT COUNT(*) FROM tier_of")
		return err == nil && a[0][0][0] == "4"
	})
	rows := func(q string) []string {
		_, r, err := te.exec(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var out []string
		for _, row := range r[0] {
			out = append(out, strings.Join(row, ","))
		}
		slices.Sort(out)
		return out
	}
	cases := []struct {
		view, cond, scan string // scan: the same condition on an expression, which scans
		lookup           bool
	}{
		{"per_k", "k = 5", "k + 0 = 5", true},
		{"per_k", "5 = k", "k + 0 = 5", true},
		{"per_k", "k = 7", "k + 0 = 7", true},
		{"per_k", "k = 1000", "k + 0 = 1000", true},
		{"per_k", "k = -1", "k + 0 = -1", true},
		{"per_k", "k = NULL", "k + 0 = NULL", true},
		{"per_k", "k = CAST(5 AS BIGINT)", "k + 0 = 5", true},
		{"per_k", "k = 5.0", "k + 0 = 5", true},
		{"per_k", "k = '6'", "k + 0 = 6", true},
		{"per_k", "k = 2 + 3", "k + 0 = 5", true},
		{"per_k", "k = 5.5", "k + 0 = 5.5", false},
		{"per_k", "k = 3000000000", "k + 0 = 3000000000", false},
		{"per_k", "k IN (1, 2, 3, 299, 300, NULL, 2)", "k + 0 IN (1, 2, 3, 299, 300, NULL, 2)", true},
		{"per_k", "k IN (1, 2) AND total > 1", "k + 0 IN (1, 2) AND total > 1", true},
		{"per_k", "k = 1 AND k = 2", "k + 0 = 1 AND k + 0 = 2", true},
		{"per_k", "k = 1 OR k = 2", "k + 0 = 1 OR k + 0 = 2", false},
		{"per_k", "k NOT IN (1, 2)", "k + 0 NOT IN (1, 2)", false},
		{"per_k", "k IS NULL", "k + 0 IS NULL", false},
		{"per_ks", "k = 7 AND s = 'y'", "k + 0 = 7 AND s || '' = 'y'", true},
		{"per_ks", "s = 'z' AND k IN (2, 5, 8, 9) AND n >= 1", "s || '' = 'z' AND k + 0 IN (2, 5, 8, 9) AND n >= 1", true},
		{"per_ks", "k = 7", "k + 0 = 7", false}, // half the key: a scan
		{"per_ks", "s = NULL AND k = 7", "s || '' = NULL AND k + 0 = 7", true},
		{"per_s", "s = 'x'", "s || '' = 'x'", true},
		{"tier_of", "id IN (1, 2, 40, 41, 5)", "id + 0 IN (1, 2, 40, 41, 5)", true},
		{"tier_of", "id = 3 AND tier = 'c'", "id + 0 = 3 AND tier = 'c'", true},
		{"tier_of", "id = 2", "id + 0 = 2", true},
		{"per_s", "s IN ('y', 'w', 'z')", "s || '' IN ('y', 'w', 'z')", true},
		{"per_s", "s = 'x '", "s || '' = 'x '", true},
	}
	for _, c := range cases {
		q := "SELECT * FROM " + c.view + " WHERE " + c.cond
		got, want := rows(q), rows("SELECT * FROM "+c.view+" WHERE "+c.scan)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, the scan gives %q", q, got, want)
		}
		plan := strings.Join(rows("EXPLAIN "+q), "\n")
		if used := strings.Contains(plan, "Lookup view "+c.view+" by key"); used != c.lookup {
			t.Errorf("EXPLAIN %s: looks up by key %v, want %v:\n%s", q, used, c.lookup, plan)
		}
	}
	// EXPLAIN's first line, as docs/sql.md shows it.
	if got := rows("EXPLAIN SELECT * FROM per_ks WHERE s = 'c' AND k IN (1, 2) AND n > 10"); len(got) == 0 ||
		!slices.Contains(got, "Lookup view per_ks by key: (s = 'c') AND k IN (1, 2)") {
		t.Errorf("EXPLAIN of a point lookup: %q", got)
	}
	// Every key, one by one, as the scan has it.
	all := rows("SELECT * FROM per_k")
	var got []string
	for i := -1; i <= 300; i++ {
		got = append(got, rows(fmt.Sprintf("SELECT * FROM per_k WHERE k = %d", i))...)
	}
	got = append(got, rows("SELECT * FROM per_k WHERE k IS NULL")...)
	slices.Sort(got)
	if !slices.Equal(got, all) {
		t.Errorf("the keys looked up one by one give %d rows, the scan %d", len(got), len(all))
	}
}

// BenchmarkPullPointLookup runs a pull query for one key of a view of 100 k keys (a topic of
// 4 queues, RocksDB state) as a client does, by key and by a condition that scans
// (docs/benchmarks.md, "Point lookups").
func BenchmarkPullPointLookup(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	br, err := broker.Open(broker.Config{Dir: filepath.Join(dir, "broker")})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	e, err := Open(Config{DataDir: dir, StateBackend: "rocksdb", Log: io.Discard, Broker: br})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	sess := NewSession()
	run := func(q string) [][]string {
		res, err := e.Execute(context.Background(), sess, q, nil)
		if err != nil {
			b.Fatalf("%.100s: %v", q, err)
		}
		var out [][]string
		for _, r := range res {
			if r.Rows == nil {
				continue
			}
			for {
				row, err := r.Rows.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				var ss []string
				for _, v := range row {
					ss = append(ss, v.String())
				}
				out = append(out, ss)
			}
			r.Rows.Close()
		}
		return out
	}
	run("CREATE STREAM ev (k INT, v INT) WITH (queues = 4)")
	run("SET offset_reset = 'earliest'")
	for i := 0; i < n; i += 10_000 {
		vals := make([]string, 0, 10_000)
		for j := i; j < i+10_000; j++ {
			vals = append(vals, fmt.Sprintf("(%d, %d)", j, j%7))
		}
		run("INSERT INTO ev VALUES " + strings.Join(vals, ", "))
	}
	run("CREATE MATERIALIZED VIEW per_k AS SELECT k, COUNT(*) AS n, SUM(v) AS total FROM ev GROUP BY k")
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if r := run("SELECT COUNT(*) FROM per_k"); r[0][0] == fmt.Sprint(n) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the view never held every key")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, c := range []struct{ name, cond string }{{"lookup", "k = %d"}, {"scan", "k + 0 = %d"}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				k := i * 7919 % n
				if r := run(fmt.Sprintf("SELECT * FROM per_k WHERE "+c.cond, k)); len(r) != 1 || r[0][0] != fmt.Sprint(k) {
					b.Fatalf("key %d: %v", k, r)
				}
			}
		})
	}
}

// keyValue converts a constant to a key column's value only when the comparison in
// PostgreSQL would find exactly that value.
func TestPointKeyValue(t *testing.T) {
	dec := func(i int64, scale uint8) sql.Value { return sql.Value{K: sql.KindDecimal, I: i, Scale: scale} }
	cases := []struct {
		v    sql.Value
		kind sql.Kind
		want sql.Value
		ok   bool
	}{
		{sql.Int(5), sql.KindInt, sql.Int(5), true},
		{sql.BigInt(5), sql.KindInt, sql.Int(5), true},
		{sql.BigInt(-1 << 31), sql.KindInt, sql.Int(-1 << 31), true},
		{sql.BigInt(1 << 31), sql.KindInt, sql.Null, false},
		{sql.BigInt(-1<<31 - 1), sql.KindInt, sql.Null, false},
		{sql.Int(5), sql.KindBigInt, sql.BigInt(5), true},
		{sql.BigInt(1 << 40), sql.KindBigInt, sql.BigInt(1 << 40), true},
		{dec(1700, 2), sql.KindInt, sql.Int(17), true},
		{dec(-170, 1), sql.KindBigInt, sql.BigInt(-17), true},
		{dec(175, 1), sql.KindInt, sql.Null, false},
		{sql.Value{K: sql.KindDecimal, S: "123456789012345678901234567890"}, sql.KindBigInt, sql.Null, false},
		{sql.Double(5), sql.KindInt, sql.Null, false},
		{sql.Varchar("5"), sql.KindInt, sql.Null, false},
		{sql.Varchar("a "), sql.KindVarchar, sql.Varchar("a "), true},
		{sql.Int(5), sql.KindVarchar, sql.Null, false},
		{dec(5, 0), sql.KindDecimal, sql.Null, false},
		{sql.Double(1), sql.KindDouble, sql.Null, false},
	}
	for _, c := range cases {
		got, ok := keyValue(c.v, c.kind)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("keyValue(%#v, %v) = %#v, %v; want %#v, %v", c.v, c.kind, got, ok, c.want, c.ok)
		}
	}
}
