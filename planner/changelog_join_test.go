package planner

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"rsql/sql"
)

// The change mode of each join: an exact regular join of two append-only streams is
// append-only when inner, retract when outer, over a retract input or with a table (its
// latest versions); the joins that take append-only input only refuse an updating one with
// 0A000; a regular join with a state TTL is inner only and refuses updating input.
func TestJoinChangeModes(t *testing.T) {
	const agg = `(SELECT user_id, SUM(amount) AS total FROM orders_mq GROUP BY user_id) t`
	cases := []struct {
		name, query string
		ttl         int64
		mode        ChangeMode
		refused     string // a fragment of the 0A000 error, when refused
		joinMode    string
	}{
		{name: "inner", query: `SELECT o.order_id, p.amount FROM orders_mq o JOIN payments_mq p ON o.order_id = p.order_id`,
			mode: AppendOnly, joinMode: "mode=regular"},
		{name: "left", query: `SELECT o.order_id, p.amount FROM orders_mq o LEFT JOIN payments_mq p ON o.order_id = p.order_id`,
			mode: Retract, joinMode: "mode=regular"},
		{name: "right", query: `SELECT o.order_id, p.amount FROM orders_mq o RIGHT JOIN payments_mq p ON o.order_id = p.order_id`,
			mode: Retract, joinMode: "mode=regular"},
		{name: "full", query: `SELECT o.order_id, p.amount FROM orders_mq o FULL JOIN payments_mq p ON o.order_id = p.order_id`,
			mode: Retract, joinMode: "mode=regular"},
		{name: "table", query: `SELECT o.order_id, u.tier FROM orders_mq o JOIN users u ON o.user_id = u.user_id`,
			mode: Retract, joinMode: "the latest version of each key of u"},
		{name: "table_left", query: `SELECT o.order_id, u.tier FROM orders_mq o LEFT JOIN users u ON o.user_id = u.user_id`,
			mode: Retract, joinMode: "the latest version of each key of u"},
		{name: "table_on_the_left", query: `SELECT o.order_id, u.tier FROM users u RIGHT JOIN orders_mq o ON u.user_id = o.user_id`,
			mode: Retract, joinMode: "the latest version of each key of u, o rows until they are deleted"},
		{name: "table_on_the_left_not_by_key", query: `SELECT o.order_id, u.tier FROM users u JOIN orders_mq o ON u.tier = o.user_id`,
			refused: "matches its primary key (user_id)"},
		{name: "over_aggregate", query: `SELECT t.user_id, t.total, p.amount FROM ` + agg + ` JOIN payments_mq p ON t.user_id = p.user_id`,
			mode: Retract, joinMode: "mode=regular"},
		{name: "over_two_aggregates", query: `SELECT t.user_id, t.total, s.total FROM ` + agg + ` FULL JOIN
  (SELECT user_id, COUNT(*) AS total FROM payments_mq GROUP BY user_id) s ON t.user_id = s.user_id`,
			mode: Retract, joinMode: "mode=regular"},
		{name: "proctime_table", query: `SELECT o.order_id, u.tier FROM orders_mq o JOIN users FOR SYSTEM_TIME AS OF PROCTIME() AS u ON o.user_id = u.user_id`,
			mode: AppendOnly, joinMode: "mode=current"},
		{name: "ttl", query: `SELECT o.order_id, p.amount FROM orders_mq o JOIN payments_mq p ON o.order_id = p.order_id`,
			ttl: 3_600_000, mode: AppendOnly, joinMode: "state-ttl="},
		{name: "ttl_left", query: `SELECT o.order_id, p.amount FROM orders_mq o LEFT JOIN payments_mq p ON o.order_id = p.order_id`,
			ttl: 3_600_000, refused: "with a state TTL is not supported"},
		{name: "ttl_over_aggregate", query: `SELECT t.user_id, p.amount FROM ` + agg + ` JOIN payments_mq p ON t.user_id = p.user_id`,
			ttl: 3_600_000, refused: "RESET state_ttl"},
		{name: "asof_group_key_over_aggregate", query: `SELECT t.user_id, u.tier FROM (SELECT user_id, ts, COUNT(*) AS c FROM orders_mq GROUP BY user_id, ts) t
  JOIN users FOR SYSTEM_TIME AS OF t.ts AS u ON t.user_id = u.user_id`, refused: "an inner join (current) over"},
		{name: "proctime_over_aggregate", query: `SELECT t.user_id, u.tier FROM ` + agg + ` JOIN users FOR SYSTEM_TIME AS OF PROCTIME() AS u ON t.user_id = u.user_id`,
			refused: "an inner join (current) over a relation whose rows change"},
		{name: "lookup_over_aggregate", query: `SELECT t.user_id, u.tier FROM ` + agg + ` JOIN dim_users FOR SYSTEM_TIME AS OF PROCTIME() AS u ON t.user_id = u.user_id`,
			refused: "an inner join (lookup) over a relation whose rows change"},
	}
	cat := goldenCatalog()
	// The keys of joins' rows: an aggregate's key joined with a table's latest versions is
	// the join's; two keyed sides give both keys; a stream side gives none.
	keyCases := []struct {
		name, query string
		key         string
	}{
		{"aggregate with a table", `SELECT t.user_id, t.total, u.tier FROM ` + agg + ` JOIN users u ON t.user_id = u.user_id`, "[0]"},
		{"aggregate LEFT JOIN a table", `SELECT u.tier, t.total, t.user_id FROM ` + agg + ` LEFT JOIN users u ON t.user_id = u.user_id`, "[2]"},
		{"two aggregates", `SELECT t.user_id, t.total, s.user_id, s.n FROM ` + agg + ` FULL JOIN
  (SELECT user_id, COUNT(*) AS n FROM payments_mq GROUP BY user_id) s ON t.user_id = s.user_id`, "[0 2]"},
		{"a stream with a table", `SELECT o.order_id, u.tier FROM orders_mq o JOIN users u ON o.user_id = u.user_id`, "[]"},
		{"aggregate with a stream", `SELECT t.user_id, p.amount FROM ` + agg + ` JOIN payments_mq p ON t.user_id = p.user_id`, "[]"},
	}
	for _, c := range keyCases {
		t.Run("key/"+c.name, func(t *testing.T) {
			q, err := bindSQL(t, cat, c.query)
			if err != nil {
				t.Fatal(err)
			}
			l, _, err := Plan(q, Options{Job: "j"})
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(l.(*Sink).Key); got != c.key {
				t.Fatalf("key %s, want %s:\n%s", got, c.key, logicalText(l))
			}
		})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := bindSQL(t, cat, c.query)
			if err != nil {
				t.Fatal(err)
			}
			l, _, err := Plan(q, Options{Job: "j", StateTTL: c.ttl})
			if c.refused != "" {
				var se *sql.Error
				if !errors.As(err, &se) || se.Code != sql.CodeNotSupported || !strings.Contains(se.Message, c.refused) {
					t.Fatalf("got %v, want a 0A000 error saying %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sink := l.(*Sink)
			if sink.Changes != c.mode {
				t.Fatalf("the query is %s, want %s:\n%s", sink.Changes, c.mode, logicalText(l))
			}
			if text := logicalText(l); !strings.Contains(text, c.joinMode) {
				t.Fatalf("want %q in the plan:\n%s", c.joinMode, text)
			}
		})
	}
}

// logicalText is the logical plan's text, every node.
func logicalText(l LogicalNode) string {
	var b strings.Builder
	var walk func(n LogicalNode, depth int)
	walk = func(n LogicalNode, depth int) {
		b.WriteString(strings.Repeat("  ", depth) + n.String() + "\n")
		for _, c := range n.Children() {
			walk(c, depth+1)
		}
	}
	walk(l, 0)
	return b.String()
}
