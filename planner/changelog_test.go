package planner

import (
	"errors"
	"strings"
	"testing"

	"rsql/sql"
)

// The operator × input-mode table: each operator over an append-only input and over an
// updating one (a GROUP BY without a window over a stream) is either planned with the
// change mode its sink receives, or refused with 0A000 — never planned as if its input
// only grew. The results themselves are compared with PostgreSQL in tests/.
func TestChangelogModes(t *testing.T) {
	const upd = `(SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM orders_mq GROUP BY user_id) u`
	const bnd = `(SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY user_id) u`
	cases := []struct {
		name, query string
		sink        string // a stream sink ("" the client)
		want        string // the sink's change mode, or the SQLSTATE of the refusal
	}{
		{"scan", `SELECT user_id, amount FROM orders_mq`, "", "append-only"},
		{"aggregate", `SELECT user_id, COUNT(*) AS n FROM orders_mq GROUP BY user_id`, "", "upsert"},
		{"aggregate to a stream", `SELECT user_id, COUNT(*) AS n FROM orders_mq GROUP BY user_id`, "totals_mq", "upsert"},
		{"global aggregate", `SELECT COUNT(*) AS n FROM orders_mq`, "totals_mq", "upsert"},
		{"windowed aggregate", `SELECT user_id, window_end, COUNT(*) AS n FROM TUMBLE(orders_mq, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end`, "", "append-only"},
		{"aggregate of a bounded input", `SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id`, "", "append-only"},
		{"aggregate over a bounded aggregate", `SELECT n, COUNT(*) FROM ` + bnd + ` GROUP BY n`, "", "append-only"},
		{"filter over updating", `SELECT user_id, n FROM ` + upd + ` WHERE n < 3`, "", "retract"},
		{"HAVING", `SELECT user_id, COUNT(*) AS n FROM orders_mq GROUP BY user_id HAVING MIN(amount) > 5`, "totals_mq", "retract"},
		{"projection keeping the key", `SELECT user_id, n * 2 AS twice FROM ` + upd, "totals_mq", "upsert"},
		{"projection dropping the key, to the client", `SELECT n FROM ` + upd, "", "retract"},
		{"projection dropping the key, to a stream", `SELECT n FROM ` + upd, "totals_mq", sql.CodeNotSupported},
		{"aggregate over updating", `SELECT n, COUNT(*) AS users FROM ` + upd + ` GROUP BY n`, "totals_mq", "upsert"},
		{"global aggregate over updating", `SELECT SUM(n) AS s, MIN(n) AS lo, COUNT(*) AS c FROM ` + upd, "", "upsert"},
		{"DISTINCT of one window bound", `SELECT DISTINCT window_start FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE) t`, "", "append-only"},
		{"DISTINCT over updating", `SELECT DISTINCT n FROM ` + upd, "", "upsert"},
		{"windowed aggregate over updating", `SELECT window_end, COUNT(*) FROM TUMBLE((SELECT user_id, MAX(ts) AS ts FROM orders_mq GROUP BY user_id), ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end`, "", "error"},
		{"Top-N over the stream", `SELECT user_id, amount, rn FROM (SELECT user_id, amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY amount DESC) AS rn FROM orders_mq) x WHERE rn <= 3`, "", "retract"},
		{"global Top-N over updating", `SELECT user_id, n, rn FROM (SELECT user_id, n, ROW_NUMBER() OVER (ORDER BY n DESC) AS rn FROM ` + upd + `) x WHERE rn <= 3`, "", "retract"},
		{"LIMIT of a push query over updating", `SELECT user_id, n FROM ` + upd + ` LIMIT 5`, "", "upsert"},
		{"LIMIT under an aggregate over updating", `SELECT COUNT(*) FROM (SELECT user_id, n FROM ` + upd + ` LIMIT 5) x`, "", sql.CodeNotSupported},
		{"UNION ALL over updating", `SELECT user_id, n FROM ` + upd + ` UNION ALL SELECT user_id, 1 FROM orders_mq`, "", "retract"},
		{"UNION ALL over updating, aggregated", `SELECT user_id, SUM(n) FROM (SELECT user_id, n FROM ` + upd + ` UNION ALL SELECT user_id, 1 FROM orders_mq) x GROUP BY user_id`, "totals_mq", "upsert"},
		{"regular join over updating", `SELECT u.user_id FROM ` + upd + ` JOIN orders_mq o ON u.user_id = o.user_id`, "", "retract"},
		{"window over a regular join", `SELECT window_end, COUNT(*) FROM TUMBLE((SELECT o.ts AS ts FROM orders_mq o JOIN payments_mq p ON o.user_id = p.user_id), ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end`, "", sql.CodeNotSupported},
		{"window over an interval join", `SELECT window_end, COUNT(*) FROM TUMBLE((SELECT o.ts AS ts FROM orders_mq o JOIN payments_mq p ON o.user_id = p.user_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '1' MINUTE), ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end`, "", "append-only"},
		{"regular join of streams", `SELECT o.order_id, p.amount FROM orders_mq o JOIN payments_mq p ON o.order_id = p.order_id`, "", "append-only"},
		{"LEFT regular join of streams", `SELECT o.order_id, p.amount FROM orders_mq o LEFT JOIN payments_mq p ON o.order_id = p.order_id`, "", "retract"},
		{"regular join with a table", `SELECT o.order_id, t.tier FROM orders_mq o JOIN users t ON o.user_id = t.user_id`, "", "retract"},
		{"processing-time table join over updating", `SELECT u.user_id, t.tier FROM ` + upd + ` JOIN users FOR SYSTEM_TIME AS OF PROCTIME() AS t ON u.user_id = t.user_id`, "", sql.CodeNotSupported},
		{"aggregate OVER rows of a stream", `SELECT user_id, AVG(amount) OVER (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS a FROM orders_mq`, "", "retract"},
		{"aggregate OVER rows over updating", `SELECT user_id, SUM(n) OVER (ORDER BY n, user_id ROWS 2 PRECEDING) AS s FROM ` + upd, "", "retract"},
		{"aggregate OVER rows over updating, to a stream by its key", `SELECT user_id, SUM(n) OVER (ORDER BY n, user_id ROWS 2 PRECEDING) AS s FROM ` + upd, "totals_mq", "retract"},
		{"aggregate OVER rows of a bounded input", `SELECT user_id, COUNT(*) OVER (PARTITION BY user_id ORDER BY ts ROWS 1 PRECEDING) AS c FROM orders`, "", "append-only"},
		{"aggregate OVER rows of a bounded aggregate", `SELECT user_id, MAX(n) OVER (ORDER BY n ROWS 1 PRECEDING) AS m FROM ` + bnd, "", "append-only"},
		{"aggregate OVER rows, aggregated", `SELECT c, COUNT(*) FROM (SELECT COUNT(*) OVER (PARTITION BY user_id ORDER BY ts ROWS 2 PRECEDING) AS c FROM orders_mq) x GROUP BY c`, "totals_mq", "upsert"},
		{"aggregate OVER rows to a stream, no key", `SELECT user_id, AVG(amount) OVER (PARTITION BY user_id ORDER BY ts ROWS 3 PRECEDING) AS a FROM orders_mq`, "totals_mq", sql.CodeNotSupported},
		{"window Top-N over aggregate OVER rows", `SELECT a, rn FROM (SELECT a, window_start, window_end, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY a DESC) AS rn FROM TUMBLE((SELECT ts, AVG(amount) OVER (PARTITION BY user_id ORDER BY ts ROWS 3 PRECEDING) AS a FROM orders_mq), ts, INTERVAL '1' MINUTE)) x WHERE rn <= 3`, "", sql.CodeNotSupported},
		{"aggregate OVER a fractional frame offset", `SELECT SUM(amount) OVER (ORDER BY ts ROWS 1.5 PRECEDING) FROM orders_mq`, "", sql.CodeTypeMismatch},
		{"aggregate OVER the default frame", `SELECT AVG(amount) OVER (PARTITION BY user_id ORDER BY ts) FROM orders_mq`, "", sql.CodeNotSupported},
		{"aggregate OVER a RANGE frame", `SELECT AVG(amount) OVER (ORDER BY ts RANGE BETWEEN 3 PRECEDING AND CURRENT ROW) FROM orders_mq`, "", sql.CodeNotSupported},
		{"aggregate OVER following rows", `SELECT AVG(amount) OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM orders_mq`, "", sql.CodeNotSupported},
		{"aggregate OVER rows with NULLS FIRST", `SELECT AVG(amount) OVER (ORDER BY ts NULLS FIRST ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM orders_mq`, "", sql.CodeNotSupported},
		{"aggregate OVER unbounded preceding", `SELECT SUM(amount) OVER (ORDER BY ts ROWS UNBOUNDED PRECEDING) FROM orders_mq`, "", sql.CodeNotSupported},
		{"aggregate OVER without ORDER BY", `SELECT SUM(amount) OVER (PARTITION BY user_id) FROM orders_mq`, "", sql.CodeNotSupported},
		{"aggregates OVER two windows", `SELECT SUM(amount) OVER (ORDER BY ts ROWS 1 PRECEDING), COUNT(*) OVER (ORDER BY ts ROWS 2 PRECEDING) FROM orders_mq`, "", sql.CodeNotSupported},
		{"aggregate OVER in an expression", `SELECT 1 + SUM(amount) OVER (ORDER BY ts ROWS 1 PRECEDING) FROM orders_mq`, "", sql.CodeNotSupported},
		{"aggregate OVER with GROUP BY", `SELECT user_id, SUM(COUNT(*)) OVER (ORDER BY user_id ROWS 1 PRECEDING) FROM orders_mq GROUP BY user_id`, "", sql.CodeNotSupported},
		{"aggregate OVER with ORDER BY", `SELECT ts, SUM(amount) OVER (ORDER BY ts ROWS 1 PRECEDING) AS s FROM orders ORDER BY ts`, "", sql.CodeNotSupported},
		{"table", `SELECT user_id, tier FROM users`, "", "retract"},
		{"filter over a table", `SELECT user_id, tier FROM users WHERE tier = 'gold'`, "", "retract"},
		{"table to a stream by its key", `SELECT user_id, tier FROM users`, "totals_mq", "retract"},
		{"aggregate over a table", `SELECT tier, COUNT(*) AS n FROM users GROUP BY tier`, "", "upsert"},
		{"window over a table", `SELECT window_end, COUNT(*) FROM TUMBLE(users, ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end`, "", sql.CodeNotSupported},
		{"table on the left of a regular join", `SELECT t.tier, o.amount FROM users t JOIN orders_mq o ON t.user_id = o.user_id`, "", "retract"},
		{"table on the left of an interval join", `SELECT t.tier, o.amount FROM users t JOIN orders_mq o ON t.user_id = o.user_id AND o.ts BETWEEN t.ts AND t.ts + INTERVAL '1' MINUTE`, "", sql.CodeNotSupported},
		{"deduplication keeping the first row", `SELECT user_id, amount FROM (SELECT user_id, amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn FROM orders_mq) x WHERE rn = 1`, "", "append-only"},
		{"deduplication keeping the last row", `SELECT user_id, amount FROM (SELECT user_id, amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn FROM orders_mq) x WHERE rn = 1`, "", "upsert"},
		{"deduplication keeping the last row, its key dropped", `SELECT amount FROM (SELECT user_id, amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn FROM orders_mq) x WHERE rn = 1`, "", "retract"},
		{"aggregate over deduplication keeping the last row", `SELECT amount, COUNT(*) FROM (SELECT user_id, amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn FROM orders_mq) x WHERE rn = 1 GROUP BY amount`, "", "upsert"},
		{"deduplication over updating", `SELECT user_id, tier FROM (SELECT user_id, tier, ROW_NUMBER() OVER (PARTITION BY tier ORDER BY ts) AS rn FROM users) x WHERE rn = 1`, "", "retract"},
		{"window Top-N over updating", `SELECT user_id, n, rn FROM (SELECT a.user_id, a.n, ROW_NUMBER() OVER (PARTITION BY a.window_start, a.window_end ORDER BY a.n DESC) AS rn
  FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n FROM TUMBLE(orders_mq, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end) a
  LEFT JOIN payments_mq p ON a.user_id = p.user_id) x WHERE rn <= 3`, "", "retract"},
		{"Top-N of a bounded input over updating", `SELECT order_id, rn FROM (SELECT o.order_id, ROW_NUMBER() OVER (ORDER BY o.amount DESC, o.order_id) AS rn FROM orders o LEFT JOIN payments p ON o.order_id = p.order_id) x WHERE rn <= 3`, "", "append-only"}, // folded: its final rows
		{"lookup join over updating", `SELECT u.user_id, t.tier FROM ` + upd + ` JOIN dim_users FOR SYSTEM_TIME AS OF PROCTIME() AS t ON u.user_id = t.user_id`, "", sql.CodeNotSupported},
	}
	cat := goldenCatalog()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := bindSQL(t, cat, c.query)
			if err == nil {
				var l LogicalNode
				l, _, err = Plan(q, Options{Sink: SinkSpec{Stream: c.sink}, StateTTL: 0})
				if err == nil {
					got := l.(*Sink).Changes.String()
					if got != c.want {
						t.Fatalf("sink changes %s, want %s\n%s", got, c.want, Explain(l, nil))
					}
					return
				}
			}
			var se *sql.Error
			switch {
			case c.want == "error":
				// Refused before the changelog pass (binding): any clear error will do.
			case !errors.As(err, &se):
				t.Fatalf("error %v, want SQLSTATE %s", err, c.want)
			case se.Code != c.want:
				t.Fatalf("SQLSTATE %s (%v), want %s", se.Code, err, c.want)
			}
		})
	}
}

// A join bounded by a column of the left row (B.t BETWEEN A.t AND A.expires, as Nexmark
// q4 and q9 write it) is an interval join whose left rows live until their own bound: an
// inner one is append-only. An outer one stays the exact regular join.
func TestJoinBoundedByAColumn(t *testing.T) {
	cat := goldenCatalog()
	for _, c := range []struct {
		query, mode string
	}{
		{`SELECT o.user_id, p.amount FROM orders_mq o JOIN payments_mq p ON o.user_id = p.user_id AND p.ts BETWEEN o.ts AND o.ts`, "mode=interval"},
		{`SELECT o.user_id, p.amount FROM (SELECT user_id, ts, ts + INTERVAL '1' HOUR AS ends FROM orders_mq) o JOIN payments_mq p ON o.user_id = p.user_id AND p.ts BETWEEN o.ts AND o.ends`, "<= o.ends"},
		{`SELECT o.user_id, p.amount FROM (SELECT user_id, ts, ts + INTERVAL '1' HOUR AS ends FROM orders_mq) o JOIN payments_mq p ON o.user_id = p.user_id AND p.ts >= o.ts AND p.ts <= o.ends`, "<= o.ends"},
		{`SELECT o.user_id, p.amount FROM (SELECT user_id, ts, ts + INTERVAL '1' HOUR AS ends FROM orders_mq) o LEFT JOIN payments_mq p ON o.user_id = p.user_id AND p.ts BETWEEN o.ts AND o.ends`, "mode=regular"},
	} {
		q, err := bindSQL(t, cat, c.query)
		if err != nil {
			t.Fatal(err)
		}
		l, _, err := Plan(q, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		text := Explain(l, nil)
		if !strings.Contains(text, c.mode) {
			t.Fatalf("%s: want %q in\n%s", c.query, c.mode, text)
		}
		if strings.Contains(c.mode, "until") && l.(*Sink).Changes != AppendOnly {
			t.Fatalf("%s: an inner join bounded by a column changes: %s", c.query, l.(*Sink).Changes)
		}
	}
}

// A key column maps to an earlier column of a projection only when it is the same
// expression over the same columns: two columns of one name from the two sides of a join
// (a.id, b.id) are not copies of each other.
func TestFirstOfEqualTellsColumnsApart(t *testing.T) {
	id := func(i int) sql.Expr { return &sql.ColumnRef{Index: i, Name: "id", T: sql.TypeBigInt} }
	p := &Project{Exprs: []sql.Expr{id(0), id(2), id(2)}, Names: []string{"id", "id", "id"}}
	if got := firstOfEqual(p, []int{1}); got[0] != 1 {
		t.Errorf("b.id mapped to column %d (a.id)", got[0])
	}
	if got := firstOfEqual(p, []int{2}); got[0] != 1 {
		t.Errorf("a copy of b.id mapped to column %d, want 1", got[0])
	}
}
