package planner

import (
	"strings"
	"testing"
)

// findJoin returns the first Join of a logical plan.
func findJoin(l LogicalNode) *Join {
	if j, ok := l.(*Join); ok {
		return j
	}
	for _, c := range l.Children() {
		if j := findJoin(c); j != nil {
			return j
		}
	}
	return nil
}

// A window join drops rows of one side only when the other side is a MAX or MIN of that
// side's own stream over the same window, grouped by columns the join equates, and the
// held side's unmatched rows are never emitted; every other window join keeps all rows.
func TestJoinDominance(t *testing.T) {
	const top = `(SELECT MAX(order_id) AS top, window_start, window_end
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) GROUP BY window_start, window_end) m`
	const on = ` ON o.window_start = m.window_start AND o.window_end = m.window_end AND o.order_id = m.top`
	const tumble = `TUMBLE(orders, ts, INTERVAL '10' SECOND) o`
	cases := []struct {
		name, query string
		want        *JoinDominance // nil: no dominance
		explain     string
	}{
		{"max", `SELECT o.user_id FROM ` + tumble + ` JOIN ` + top + on,
			&JoinDominance{Side: 0, Key: 2, Sign: 1}, "of o only the rows at the running MAX of o.order_id in their group"},
		{"filtered held side", `SELECT o.user_id FROM ` + tumble + ` JOIN ` + top + on + ` WHERE o.user_id <> 'x'`,
			&JoinDominance{Side: 0, Key: 2, Sign: 1}, ""},
		{"aggregate on the left, left join", `SELECT o.user_id FROM ` + top + ` LEFT JOIN ` + tumble + on,
			&JoinDominance{Side: 1, Key: 2, Sign: 1}, ""},
		{"aggregate on the left, right join", `SELECT o.user_id FROM ` + top + ` RIGHT JOIN ` + tumble + on, nil, ""},
		{"min per user", `SELECT o.user_id FROM ` + tumble + ` JOIN (SELECT user_id, MIN(order_id) AS low, window_start, window_end
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end) m
  ON o.user_id = m.user_id AND o.window_start = m.window_start AND o.window_end = m.window_end AND o.order_id = m.low`,
			&JoinDominance{Side: 0, Key: 3, Sign: -1}, "running MIN of o.order_id"},
		{"held side outer", `SELECT o.user_id FROM ` + tumble + ` LEFT JOIN ` + top + on, nil, ""},
		{"full join", `SELECT o.user_id FROM ` + tumble + ` FULL JOIN ` + top + on, nil, ""},
		{"another stream", `SELECT o.user_id FROM TUMBLE(payments, ts, INTERVAL '10' SECOND) o JOIN ` + top + on, nil, ""},
		{"another window", `SELECT o.user_id FROM TUMBLE(orders, ts, INTERVAL '20' SECOND) o JOIN ` + top + on, nil, ""},
		{"filtered aggregate input", `SELECT o.user_id FROM ` + tumble + ` JOIN (SELECT MAX(order_id) AS top, window_start, window_end
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) WHERE user_id <> 'x' GROUP BY window_start, window_end) m` + on, nil, ""},
		{"group not equated", `SELECT o.user_id FROM ` + tumble + ` JOIN (SELECT user_id, MAX(order_id) AS top, window_start, window_end
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end) m` + on, nil, ""},
		{"another column's maximum", `SELECT o.user_id FROM ` + tumble + ` JOIN ` + top + ` ON o.window_start = m.window_start AND o.window_end = m.window_end AND o.order_id + 0 = m.top`, nil, ""},
		{"a sum", `SELECT o.user_id FROM ` + tumble + ` JOIN (SELECT SUM(order_id) AS top, window_start, window_end
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) GROUP BY window_start, window_end) m` + on, nil, ""},
		{"a double's maximum", `SELECT o.user_id FROM ` + tumble + ` JOIN (SELECT MAX(amount) AS top, window_start, window_end
  FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) GROUP BY window_start, window_end) m
  ON o.window_start = m.window_start AND o.window_end = m.window_end AND o.amount = m.top`, nil, ""},
	}
	// Nexmark q5's shape: counts per user and window, joined with the largest of the same
	// counts per window, on the count at or above it.
	const hop = `HOP(orders, ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND)`
	counts := func(keys, where string) string {
		return `(SELECT ` + keys + `, COUNT(*) AS num, window_start, window_end FROM ` + hop + where + ` GROUP BY ` + keys + `, window_start, window_end)`
	}
	chained := func(agg, inner string) string {
		return `(SELECT ` + agg + `(num) AS top, window_start, window_end FROM ` + inner + ` x GROUP BY window_start, window_end) m`
	}
	const won = ` ON c.window_start = m.window_start AND c.window_end = m.window_end AND `
	q5 := func(agg, inner, cond string) string {
		return `SELECT c.user_id, c.num FROM ` + counts("user_id", "") + ` c JOIN ` + chained(agg, inner) + won + cond
	}
	same := counts("user_id", "")
	cases = append(cases, []struct {
		name, query string
		want        *JoinDominance
		explain     string
	}{
		{"chained max, at or above", q5("MAX", same, `c.num >= m.top`),
			&JoinDominance{Side: 0, Key: -1, HeldCol: 1, AggCol: 0, Sign: 1}, "of c only the rows at the running MAX of c.num in their group"},
		{"chained max, written the other way", q5("MAX", same, `m.top <= c.num`),
			&JoinDominance{Side: 0, Key: -1, HeldCol: 1, AggCol: 0, Sign: 1}, ""},
		{"chained max, among other conditions", q5("MAX", same, `c.user_id <> 'x' AND c.num >= m.top`),
			&JoinDominance{Side: 0, Key: -1, HeldCol: 1, AggCol: 0, Sign: 1}, ""},
		{"chained min, at or below", q5("MIN", same, `c.num <= m.top`),
			&JoinDominance{Side: 0, Key: -1, HeldCol: 1, AggCol: 0, Sign: -1}, "running MIN of c.num"},
		{"chained max, strictly above", q5("MAX", same, `c.num > m.top`), nil, ""},
		{"chained max, at or below", q5("MAX", same, `c.num <= m.top`), nil, ""},
		{"chained max of other counts", q5("MAX", counts("order_id", ""), `c.num >= m.top`), nil, ""},
		{"chained max of filtered counts", q5("MAX", counts("user_id", ` WHERE user_id <> 'x'`), `c.num >= m.top`), nil, ""},
		{"chained max of another window", q5("MAX", `(SELECT user_id, COUNT(*) AS num, window_start, window_end FROM HOP(orders, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end)`, `c.num >= m.top`), nil, ""},
		{"chained max, held counts filtered", `SELECT c.user_id, c.num FROM ` + counts("user_id", "") + ` c JOIN ` + chained("MAX", same) + won + `c.num >= m.top WHERE c.num > 1`,
			&JoinDominance{Side: 0, Key: -1, HeldCol: 1, AggCol: 0, Sign: 1}, ""},
		{"held counts of filtered rows", `SELECT c.user_id, c.num FROM ` + counts("user_id", ` WHERE user_id <> 'x'`) + ` c JOIN ` + chained("MAX", same) + won + `c.num >= m.top`, nil, ""},
	}...)
	cat := goldenCatalog()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, opts, errText := querySQL(t, cat, c.query)
			if q == nil {
				t.Fatalf("query does not plan: %s", errText)
			}
			l, p := mustPlan(t, q, opts)
			j := findJoin(l)
			if j == nil || j.Mode != JoinWindow {
				t.Fatalf("no window join in\n%s", Explain(l, nil))
			}
			got := dominanceOf(j)
			switch {
			case c.want == nil && got != nil:
				t.Fatalf("dominance %+v, want none", *got)
			case c.want != nil && (got == nil || *got != *c.want):
				t.Fatalf("dominance %+v, want %+v\n%s", got, *c.want, Explain(l, nil))
			}
			text := Explain(l, p)
			if c.want == nil && strings.Contains(text, "only the rows at the running") {
				t.Fatalf("EXPLAIN shows a dominance:\n%s", text)
			}
			if c.explain != "" && strings.Count(text, c.explain) != 2 { // logical and physical plans
				t.Fatalf("EXPLAIN lacks %q:\n%s", c.explain, text)
			}
			var jn *JoinNode
			for _, s := range p.Stages {
				for _, op := range s.Ops {
					if n, ok := op.Node.(*JoinNode); ok {
						jn = n
					}
				}
			}
			if jn == nil || (jn.Dominance == nil) != (c.want == nil) {
				t.Fatalf("the physical join's dominance is %v", jn)
			}
		})
	}
}
