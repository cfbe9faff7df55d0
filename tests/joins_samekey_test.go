package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Joins on one key through a real server and broker, compared with PostgreSQL. A join's
// output stays split by its key (docs/architecture.md, "The exchange rule"): an
// aggregation grouped by the join key runs in the join's stage, and a join of a join on
// the same key takes the first join's output without an exchange. Both must answer as
// PostgreSQL does over the same rows: inner, left and right joins, grouped and chained.
func TestSameKeyJoinsMatchPostgres(t *testing.T) {
	ctx := context.Background()
	conn := startPostgresConn(t)
	all := genEvents(81)[:4_000]
	payments := joinPayments(83, all)
	refunds := joinPayments(85, all)
	// Every seventh order is missing, so that some payments find no order (the right
	// join's unmatched rows).
	var orders []event
	for _, o := range all {
		if o.OrderID%7 != 0 {
			orders = append(orders, o)
		}
	}
	loadTable(t, conn, "orders", orders)
	loadTable(t, conn, "payments", payments)
	loadTable(t, conn, "refunds", refunds)

	s := newJobsServer(t)
	s.sql(`CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'orders', queues = 4);
CREATE STREAM payments (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'payments', queues = 3);
CREATE STREAM refunds (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'refunds', queues = 2);`)

	const (
		paid = `SELECT o.order_id, SUM(p.amount) AS paid, COUNT(*) AS n
  FROM orders o JOIN payments p ON p.order_id = o.order_id GROUP BY o.order_id`
		chained = `SELECT o.order_id, SUM(r.amount) AS refunded, COUNT(*) AS n
  FROM orders o JOIN payments p ON p.order_id = o.order_id JOIN refunds r ON r.order_id = o.order_id
  GROUP BY o.order_id`
		leftPaid = `SELECT o.order_id, SUM(p.amount) AS paid, COUNT(p.amount) AS n
  FROM orders o LEFT JOIN payments p ON p.order_id = o.order_id GROUP BY o.order_id`
		leftChain = `SELECT o.order_id, p.amount AS paid, r.amount AS refunded
  FROM orders o LEFT JOIN payments p ON p.order_id = o.order_id LEFT JOIN refunds r ON r.order_id = o.order_id`
		rightChain = `SELECT p.order_id, o.amount AS ordered, r.amount AS refunded
  FROM orders o RIGHT JOIN payments p ON p.order_id = o.order_id JOIN refunds r ON r.order_id = p.order_id`
	)

	// The plans: the aggregations in their join's stage, the chains' joins in one stage.
	rc, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	for _, c := range []struct {
		q           string
		joins, aggs int
	}{{paid, 1, 1}, {chained, 2, 1}, {leftPaid, 1, 1}, {leftChain, 2, 0}, {rightChain, 2, 0}} {
		plan := orderedRows(t, rc, "EXPLAIN "+c.q)
		joins, aggs := joinStageOps(plan)
		if joins != c.joins || aggs != c.aggs {
			t.Fatalf("EXPLAIN %s: the stage of the first join runs %d joins and %d aggregations, want %d and %d:\n%s",
				c.q, joins, aggs, c.joins, c.aggs, strings.Join(plan, "\n"))
		}
	}

	s.sql(`CREATE MATERIALIZED VIEW paid AS ` + paid + `;
CREATE MATERIALIZED VIEW chained AS ` + chained + `;
CREATE MATERIALIZED VIEW left_paid AS ` + leftPaid)
	show := func(v []any) string { return fmt.Sprintf("%v %s %s", v[0], amountText(v[1]), amountText(v[2])) }
	left := startPushFold(t, s, leftChain, show)
	right := startPushFold(t, s, rightChain, show)

	// Each stream in two rounds, so that rows of either side arrive before and after
	// their matches.
	half := func(evs []event) int { return len(evs) / 2 }
	produceTo(t, s.ns, "payments", payments[:half(payments)])
	produceTo(t, s.ns, "orders", orders[:half(orders)])
	produceTo(t, s.ns, "refunds", refunds[:half(refunds)])
	time.Sleep(time.Second)
	produceTo(t, s.ns, "orders", orders[half(orders):])
	produceTo(t, s.ns, "refunds", refunds[half(refunds):])
	produceTo(t, s.ns, "payments", payments[half(payments):])

	for _, v := range []struct{ name, q, cols string }{
		{"paid", paid, "order_id, paid, n"},
		{"chained", chained, "order_id, refunded, n"},
		{"left_paid", leftPaid, "order_id, paid, n"},
	} {
		_, rows := pgRows(t, conn, v.q)
		var want []string
		for _, r := range rows {
			cols := strings.Split(v.cols, ", ")
			want = append(want, fmt.Sprintf("%v %s %v", r[cols[0]], amountText(r[cols[1]]), r[cols[2]]))
		}
		if len(want) < 1000 {
			t.Fatalf("%s: only %d groups in PostgreSQL: the case tests little", v.name, len(want))
		}
		pullUntil(t, s, "SELECT "+v.cols+" FROM "+v.name, want)
	}

	for _, c := range []struct {
		name, q string
		fold    *pushFold
	}{{"orders LEFT JOIN payments LEFT JOIN refunds", leftChain, left}, {"orders RIGHT JOIN payments JOIN refunds", rightChain, right}} {
		_, rows := pgRows(t, conn, c.q)
		var want []string
		nulls := 0
		for _, r := range rows {
			vals := make([]any, 0, 3)
			for _, col := range []string{"order_id", "paid", "ordered", "refunded"} {
				if v, ok := r[col]; ok {
					vals = append(vals, v)
				}
			}
			want = append(want, show(vals))
			if strings.Contains(want[len(want)-1], "NULL") {
				nulls++
			}
		}
		if nulls < 100 {
			t.Fatalf("%s: only %d rows with an unmatched side: the case tests little", c.name, nulls)
		}
		c.fold.waitFor(t, c.name, want)
	}
}

// joinStageOps counts the joins and the aggregations of the physical plan's stage that
// runs its first join.
func joinStageOps(plan []string) (joins, aggs int) {
	var stage []string
	for _, l := range plan {
		if strings.HasPrefix(strings.TrimSpace(l), "Stage ") {
			if joins > 0 {
				break
			}
			stage = stage[:0]
			continue
		}
		stage = append(stage, l)
		if strings.Contains(l, "#") && strings.Contains(l, " Join ") {
			joins++
		}
	}
	for _, l := range stage {
		if strings.Contains(l, "#") && strings.Contains(l, " Aggregate ") {
			aggs++
		}
	}
	return joins, aggs
}
