package tests

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Exact regular joins through a real server and broker, compared with PostgreSQL: orders
// joined with a TABLE of users whose tiers change (and some users deleted) while orders
// arrive, and a LEFT join of orders with their payments. A push query's changes (op insert
// or delete), folded, must end as PostgreSQL's join of all orders with the table's latest
// versions (and all payments); an aggregation over the table join (a materialized view)
// must end as PostgreSQL's GROUP BY.

// pushFold runs push query q on the server and folds its changes (its last column, op)
// into a multiset of rows rendered by show.
type pushFold struct {
	mu   sync.Mutex
	rows map[string]int
	neg  string // a delete of a row not in the multiset
	dels int    // deletes seen
	err  error
}

func startPushFold(t *testing.T, s *jobsServer, q string, show func(vals []any) string) *pushFold {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET offset_reset = 'earliest'", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	f := &pushFold{rows: map[string]int{}}
	rows, err := conn.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				f.mu.Lock()
				f.err = err
				f.mu.Unlock()
				return
			}
			op, _ := vals[len(vals)-1].(string)
			r := show(vals[:len(vals)-1])
			f.mu.Lock()
			switch op {
			case "delete":
				f.dels++
				if f.rows[r] == 0 && f.neg == "" {
					f.neg = r
				}
				f.rows[r]--
				if f.rows[r] == 0 {
					delete(f.rows, r)
				}
			case "insert":
				f.rows[r]++
			default:
				f.err = fmt.Errorf("a change of kind %q", op)
			}
			f.mu.Unlock()
		}
		if err := rows.Err(); err != nil && ctx.Err() == nil {
			f.mu.Lock()
			f.err = err
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		conn.Close(context.Background())
	})
	return f
}

// waitFor waits until the folded rows are want (a multiset), failing after a while with
// the difference.
func (f *pushFold) waitFor(t *testing.T, what string, want []string) {
	t.Helper()
	w := map[string]int{}
	for _, r := range want {
		w[r]++
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		f.mu.Lock()
		same := fmt.Sprint(f.rows) == fmt.Sprint(w)
		err, neg := f.err, f.neg
		var got []string
		if !same && time.Now().After(deadline) {
			for r, n := range f.rows {
				for i := 0; i < n; i++ {
					got = append(got, r)
				}
			}
		}
		f.mu.Unlock()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if neg != "" {
			t.Fatalf("%s: a delete of %s, which the query had not emitted", what, neg)
		}
		if same {
			f.mu.Lock()
			dels := f.dels
			f.mu.Unlock()
			if dels == 0 {
				t.Fatalf("%s: no change was a delete: the case tests little", what)
			}
			return
		}
		if got != nil {
			compareMultisets(t, what, want, got)
			t.Fatalf("%s: the folded changes differ from PostgreSQL's rows", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestExactRegularJoinsMatchPostgres(t *testing.T) {
	conn := startPostgresConn(t)
	orders := genEvents(71)[:4_000]
	users := joinUsers(73, orders)
	payments := joinPayments(75, orders)
	loadTable(t, conn, "orders", orders)
	loadTable(t, conn, "payments", payments)
	loadUsers(t, conn, users)

	s := newJobsServer(t)
	s.sql(`CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (topic = 'users', queues = 2);
CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'orders', queues = 4);
CREATE STREAM payments (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'payments', queues = 3);`)

	str := func(v any) string {
		if v == nil {
			return "NULL"
		}
		return fmt.Sprint(v)
	}
	tierJoin := startPushFold(t, s, `SELECT o.order_id, u.tier FROM orders o JOIN users u ON o.user_id = u.user_id`,
		func(v []any) string { return str(v[0]) + " " + str(v[1]) })
	leftJoin := startPushFold(t, s, `SELECT o.order_id, p.amount FROM orders o LEFT JOIN payments p ON o.order_id = p.order_id`,
		func(v []any) string { return str(v[0]) + " " + amountText(v[1]) })
	// A view of the join of a GROUP BY (a retract input) with the table: keyed by the
	// aggregate's key, each user's row changing with its total and its tier.
	s.sql(`CREATE MATERIALIZED VIEW user_tiers AS
  SELECT t.user_id, t.total, u.tier FROM (SELECT user_id, SUM(amount) AS total FROM orders GROUP BY user_id) t
  JOIN users u ON t.user_id = u.user_id`)
	// The aggregation over the table join, a view (its rows keyed by tier).
	_, aggErr := pgExecRsql(s, `CREATE MATERIALIZED VIEW tier_totals AS
  SELECT u.tier, SUM(o.amount) AS total, COUNT(*) AS n FROM orders o JOIN users u ON o.user_id = u.user_id GROUP BY u.tier`)

	// The table and the orders in two rounds each, so later versions of users change the
	// tiers of orders already joined (and deletes take them away).
	half, uhalf := len(orders)/2, len(users)/2
	if err := produceLines(s.ns, "users", "user_id", userLines(users[:uhalf])); err != nil {
		t.Fatal(err)
	}
	produceTo(t, s.ns, "orders", orders[:half])
	produceTo(t, s.ns, "payments", payments[:len(payments)/2])
	time.Sleep(time.Second)
	produceTo(t, s.ns, "orders", orders[half:])
	if err := produceLines(s.ns, "users", "user_id", userLines(users[uhalf:])); err != nil {
		t.Fatal(err)
	}
	produceTo(t, s.ns, "payments", payments[len(payments)/2:])

	latest := `(SELECT user_id, tier FROM (` + latestUsersPG + `) v WHERE op <> 'delete')`
	_, trows := pgRows(t, conn, `SELECT o.order_id, u.tier FROM orders o JOIN `+latest+` u ON o.user_id = u.user_id`)
	var want []string
	for _, r := range trows {
		want = append(want, str(r["order_id"])+" "+str(r["tier"]))
	}
	if len(want) < 1000 {
		t.Fatalf("only %d orders of live users: the case tests little", len(want))
	}
	tierJoin.waitFor(t, "orders joined with the users' latest tiers", want)

	_, lrows := pgRows(t, conn, `SELECT o.order_id, p.amount FROM orders o LEFT JOIN payments p ON o.order_id = p.order_id`)
	var lwant []string
	unmatched := 0
	for _, r := range lrows {
		lwant = append(lwant, str(r["order_id"])+" "+amountText(r["amount"]))
		if r["amount"] == nil {
			unmatched++
		}
	}
	if unmatched < 100 {
		t.Fatalf("only %d orders without payments: the case tests little", unmatched)
	}
	leftJoin.waitFor(t, "orders LEFT JOIN payments", lwant)

	t.Run("view of join rows", func(t *testing.T) {
		_, vrows := pgRows(t, conn, `SELECT t.user_id, t.total, u.tier FROM (SELECT user_id, SUM(amount) AS total FROM orders GROUP BY user_id) t
  JOIN `+latest+` u ON t.user_id = u.user_id`)
		var vwant []string
		for _, r := range vrows {
			vwant = append(vwant, fmt.Sprintf("%v %s %v", r["user_id"], amountText(r["total"]), r["tier"]))
		}
		if len(vwant) < 50 {
			t.Fatalf("only %d users: the case tests little", len(vwant))
		}
		pullUntil(t, s, "SELECT user_id, total, tier FROM user_tiers", vwant)
	})

	t.Run("aggregate", func(t *testing.T) {
		if aggErr != nil {
			var pe *pgconn.PgError
			if errors.As(aggErr, &pe) && pe.Code == "0A000" && strings.Contains(pe.Message, "aggregation over a relation whose rows change") {
				t.Skipf("an aggregation over the join's changes is not supported by this build: %v", aggErr)
			}
			t.Fatal(aggErr)
		}
		_, arows := pgRows(t, conn, `SELECT u.tier, SUM(o.amount) AS total, COUNT(*) AS n FROM orders o JOIN `+latest+` u ON o.user_id = u.user_id GROUP BY u.tier`)
		var awant []string
		for _, r := range arows {
			awant = append(awant, fmt.Sprintf("%v %s %v", r["tier"], amountText(r["total"]), r["n"]))
		}
		pullUntil(t, s, "SELECT tier, total, n FROM tier_totals", awant)
	})
}

// pullUntil runs pull query q (three columns, the second an amount) until its rows are
// want, failing after a while with both.
func pullUntil(t *testing.T, s *jobsServer, q string, want []string) {
	t.Helper()
	ctx := context.Background()
	sort.Strings(want)
	rs, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)
	var got []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		got = got[:0]
		rows, err := rs.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%v %s %v", vals[0], amountText(vals[1]), vals[2]))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		if strings.Join(got, "|") == strings.Join(want, "|") {
			return
		}
		if time.Now().After(deadline) {
			compareMultisets(t, q, want, got)
			t.Fatalf("%s: the view's rows differ from PostgreSQL's", q)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// amountText is an amount (or a sum of them) to the cent, or NULL.
func amountText(v any) string {
	var f float64
	switch x := v.(type) {
	case nil:
		return "NULL"
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int64:
		f = float64(x)
	default:
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%.2f", math.Round(f*100)/100)
}

// pgExecRsql runs a statement on the rsql server.
func pgExecRsql(s *jobsServer, stmt string) (pgconn.CommandTag, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer conn.Close(context.Background())
	return conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol)
}
