package sql

import (
	"strings"
	"testing"
)

// FuzzParse checks that Parse and Bind never panic, that every error is an *Error with a
// SQLSTATE code and a position inside the text, and that bound expressions compile and
// evaluate without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"SELECT user_id, COUNT(*) FROM orders GROUP BY user_id",
		"SELECT * FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) WHERE amount > 5 EMIT CHANGES LIMIT 3",
		"CREATE STREAM s (a INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (topic = 't', queues = 4)",
		"INSERT INTO orders VALUES (1, 'a', 2.5, '2026-01-01'); SHOW STREAMS; DROP VIEW IF EXISTS v",
		"SELECT CAST(amount AS DECIMAL(10,2)), payload->>'$.a', DATE_FORMAT(ts, '%Y') FROM orders WHERE user_id LIKE 'u%'",
		"SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE), SUM(qty) FROM orders GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) HAVING SUM(qty) > 1",
		"EXPLAIN CREATE MATERIALIZED VIEW v AS SELECT user_id, COUNT(*) FROM HOP(orders, ts, INTERVAL '1' SECOND, INTERVAL '2' SECOND) GROUP BY user_id, window_start, window_end",
		"SET offset_reset = 'earliest'; PAUSE JOB 1; DESCRIBE orders",
		"SELECT 'unterminated",
		"SELECT a FROM t WHERE /* comment",
		"SELECT CASE WHEN qty IN (1, NULL) THEN -qty ELSE ABS(qty) END FROM orders",
		"SELECT o.order_id, t.tag, u.x FROM orders AS o CROSS JOIN LATERAL string_to_table(o.user_id, ',') AS t(tag) LEFT JOIN UNNEST(o.payload->'a', '{1,2}') u(x, y) ON TRUE, LATERAL generate_series(1, o.qty) g",
		"SELECT key, rank, rows AS range FROM orders groups WHERE groups.key BETWEEN 1 AND 2 ORDER BY rank DESC NULLS LAST, key NULLS FIRST OFFSET 2 ROWS FETCH NEXT 3 ROWS ONLY",
		"SELECT user_id FROM user_counts ORDER BY n * 2, user_id LIMIT ALL OFFSET 1",
		"SELECT a AS order, x div 2, MOD(qty, 3) FROM (SELECT COUNT(*), COUNT(qty) FROM orders) t ORDER BY count FETCH FIRST ROW ONLY",
	} {
		f.Add(s)
	}
	cat := newTestCatalog()
	f.Fuzz(func(t *testing.T, text string) {
		sts, err := Parse(text)
		if err != nil {
			checkErr(t, text, err)
			return
		}
		for _, st := range sts {
			st := st
			src, pos := st.Source()
			if pos < 0 || pos+len(src) > len(text) || text[pos:pos+len(src)] != src {
				t.Fatalf("statement text %q at %d is not a slice of the input", src, pos)
			}
			var sel *Select
			switch s := st.(type) {
			case *Select:
				sel = s
			case *CreateStream:
				sel = s.As
			case *CreateView:
				sel = s.As
			case *Insert:
				sel = s.Query
				if s.Values != nil {
					if _, err := s.Rows(cat["orders"].Schema); err != nil {
						if _, ok := err.(*Error); !ok {
							t.Fatalf("Rows error is %T: %v", err, err)
						}
					}
				}
			case *Explain:
				sel = s.Query
			}
			if sel == nil {
				continue
			}
			q, err := Bind(sel, cat)
			if err != nil {
				checkErr(t, text, err)
				continue
			}
			for _, e := range append(append([]Expr{q.Where, q.Having}, q.Select...), q.GroupBy...) {
				if e == nil {
					continue
				}
				fn, err := Compile(e)
				if err != nil {
					t.Fatalf("bound expression %s does not compile: %v", e, err)
				}
				if q.Aggregated && (e == q.Having || containsExpr(q.Select, e)) {
					continue // over the aggregate row
				}
				row := append(append(Row{}, evalRow...), Timestamp(0), Timestamp(10000)) // + window columns
				fn(row)
			}
			if !q.Aggregated {
				checkShared(t, q)
			}
		}
	})
}

// checkShared compiles a query's WHERE and select list together (CompileShared, as the
// planner does a filter and its projection) and checks that every expression calling no
// volatile function gives the value it gives compiled alone.
func checkShared(t *testing.T, q *Query) {
	t.Helper()
	var es []Expr
	if q.Where != nil {
		es = append(es, q.Where)
	}
	es = append(es, q.Select...)
	fs, memo, err := CompileShared(es)
	if err != nil {
		t.Fatalf("bound expressions do not compile together: %v", err)
	}
	row := append(append(Row{}, evalRow...), Timestamp(0), Timestamp(10000))
	if memo != nil {
		memo.Begin(1)
		memo.Row(0)
	}
	for i, f := range fs {
		got := f(row)
		if CallsVolatile(es[i]) {
			continue
		}
		if want := MustCompile(es[i])(row); show(got) != show(want) || got.IsError() != want.IsError() {
			t.Fatalf("%s: %s compiled with the others, %s alone", es[i], show(got), show(want))
		}
	}
}

func containsExpr(es []Expr, e Expr) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}

func checkErr(t *testing.T, text string, err error) {
	t.Helper()
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("error is %T, not *sql.Error: %v", err, err)
	}
	if e.Code == "" || len(e.Code) != 5 {
		t.Fatalf("error without a SQLSTATE code: %v", e)
	}
	if e.Code == CodeInternal {
		t.Fatalf("internal error: %v", e)
	}
	if e.Line > 0 {
		if e.Pos < 0 || e.Pos > len(text) {
			t.Fatalf("error position %d outside the text (%d bytes): %v", e.Pos, len(text), e)
		}
		if lines := strings.Count(text, "\n") + 1; e.Line > lines {
			t.Fatalf("error line %d beyond the text's %d lines: %v", e.Line, lines, e)
		}
	}
	if e.Code == CodeSyntax && e.Line == 0 {
		t.Fatalf("syntax error without a position: %v", e)
	}
}
