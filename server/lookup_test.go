package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"rsql/internal/pgtest"
	"rsql/sql"
)

// TestLookupTableStatements: a postgres table is declared with CREATE TABLE and a primary
// key, its options are checked when it is declared, and it is joined or written: reading it
// as a stream and joining it as of an event time are refused with 0A000.
func TestLookupTableStatements(t *testing.T) {
	e, err := Open(Config{DataDir: t.TempDir(), StateBackend: "memory", Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	sess := NewSession()
	for _, s := range []string{
		`CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
		  WITH (connector = 'file', path = 'orders.jsonl')`,
		`CREATE TABLE dim_users (user_id VARCHAR PRIMARY KEY, tier VARCHAR)
		  WITH (connector = 'postgres', url = 'postgres://rsql@127.0.0.1:1/shop', table = 'crm.users', cache_ttl = '30s', cache_rows = 10)`,
	} {
		if _, err := e.Execute(ctx, sess, s, nil); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	res, err := e.Execute(ctx, sess, `EXPLAIN SELECT o.order_id, u.tier FROM orders o LEFT JOIN dim_users FOR SYSTEM_TIME AS OF PROCTIME() AS u ON o.user_id = u.user_id`, nil)
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for {
		r, err := res[0].Rows.Next(ctx)
		if err != nil || r == nil {
			break
		}
		plan.WriteString(sql.Text(r[0]) + "\n")
	}
	res[0].Rows.Close()
	if !strings.Contains(plan.String(), "Join left mode=lookup keys=[o.user_id = u.user_id] table=crm.users cache_ttl=30s cache_rows=10") {
		t.Errorf("EXPLAIN:\n%s", plan.String())
	}
	res, err = e.Execute(ctx, sess, `SHOW STREAMS`, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for {
		r, err := res[0].Rows.Next(ctx)
		if err != nil || r == nil {
			break
		}
		if sql.Text(r[0]) == "dim_users" {
			found = sql.Text(r[1]) == "postgres" && sql.Text(r[2]) == "crm.users"
		}
	}
	if !found {
		t.Error("SHOW STREAMS does not show dim_users as connector postgres, target crm.users")
	}
	for _, c := range []struct{ stmt, code, want string }{
		{`CREATE STREAM s (user_id VARCHAR) WITH (connector = 'postgres', url = 'postgres://h/db')`, sql.CodeNotSupported, "is not a stream. Declare it with CREATE TABLE s"},
		{`CREATE TABLE t (user_id VARCHAR PRIMARY KEY) WITH (connector = 'postgres')`, sql.CodeInvalidValue, "needs a url option"},
		{`CREATE TABLE t (user_id VARCHAR PRIMARY KEY) WITH (connector = 'postgres', url = 'postgres://h/db', cache_ttl = 'soon')`, sql.CodeInvalidValue, `cache_ttl = "soon"`},
		{`CREATE TABLE t (user_id VARCHAR PRIMARY KEY) WITH (connector = 'postgres', url = 'postgres://h/db', cache_rows = -5)`, sql.CodeInvalidValue, `cache_rows = "-5"`},
		{`CREATE TABLE t (user_id VARCHAR PRIMARY KEY) WITH (connector = 'postgres', url = 'postgres://h/db', table = 'a.b.c')`, sql.CodeInvalidValue, `table = "a.b.c"`},
		{`CREATE TABLE t (user_id VARCHAR PRIMARY KEY, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'postgres', url = 'postgres://h/db')`, sql.CodeNotSupported, "has no event time"},
		{`SELECT * FROM dim_users`, sql.CodeNotSupported, "is not a stream"},
		// Written, it is checked in its database first: here, one that cannot be reached.
		{`INSERT INTO dim_users SELECT user_id, user_id FROM orders`, "08001", "cannot reach PostgreSQL to check crm.users"},
		{`SELECT o.order_id FROM orders o JOIN dim_users FOR SYSTEM_TIME AS OF o.ts AS u ON o.user_id = u.user_id`, sql.CodeNotSupported, "FOR SYSTEM_TIME AS OF ts asks for the version valid at an event time"},
		{`SELECT o.order_id FROM orders o JOIN dim_users u ON o.order_id = u.order_id`, sql.CodeUnknownColumn, "order_id"},
		{`SELECT o.order_id FROM orders o JOIN dim_users u ON o.user_id = u.tier`, sql.CodeNotSupported, "matches its primary key (user_id)"},
	} {
		_, err := e.Execute(ctx, sess, c.stmt, nil)
		var se *sql.Error
		if !errors.As(err, &se) || se.Code != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n  error %v, want %s containing %q", c.stmt, err, c.code, c.want)
		}
	}
}

func TestLogStatementRedactsConnectionPasswords(t *testing.T) {
	for in, want := range map[string]string{
		`CREATE TABLE d (k INT PRIMARY KEY) WITH (connector = 'postgres', url = 'postgres://shop:s3cr@t@db:5432/x')`:           `CREATE TABLE d (k INT PRIMARY KEY) WITH (connector = 'postgres', url = 'postgres://shop:***@db:5432/x')`,
		`CREATE TABLE d (k INT PRIMARY KEY) WITH (connector = 'postgres', url = 'host=db user=shop password=s3cret dbname=x')`: `CREATE TABLE d (k INT PRIMARY KEY) WITH (connector = 'postgres', url = 'host=db user=shop password=*** dbname=x')`,
		`CREATE TABLE d (k INT PRIMARY KEY) WITH (connector = 'postgres', url = 'postgres://shop@db/x')`:                       `CREATE TABLE d (k INT PRIMARY KEY) WITH (connector = 'postgres', url = 'postgres://shop@db/x')`,
	} {
		if got := logStatement(in); got != want {
			t.Errorf("logStatement(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

// TestPostgresSinkStatements: INSERT INTO a postgres table checks the database table when
// the job would start, and refuses with the SQLSTATE of what is wrong; nothing is started
// then. A table that fits starts a job.
func TestPostgresSinkStatements(t *testing.T) {
	c, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range []string{
		`CREATE TABLE totals (user_id text PRIMARY KEY, n bigint, total float8)`,
		`CREATE TABLE by_n (user_id text, n bigint PRIMARY KEY, total float8)`,
		`CREATE TABLE narrow (user_id text PRIMARY KEY, n int, total float8)`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	te := newTestEngine(t, true)
	e, sess := te.e, te.sess
	decl := func(name, table string) string {
		return fmt.Sprintf(`CREATE TABLE %s (user_id VARCHAR PRIMARY KEY, n BIGINT, total DOUBLE) WITH (connector = 'postgres', url = '%s', table = '%s')`, name, c.URL, table)
	}
	for _, s := range []string{
		`CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE) WITH (topic = 'orders')`,
		decl("t_ok", "totals"), decl("t_missing", "nosuch"), decl("t_key", "by_n"), decl("t_narrow", "narrow"),
		`CREATE TABLE t_bykey (n BIGINT PRIMARY KEY, user_id VARCHAR, total DOUBLE) WITH (connector = 'postgres', url = '` + c.URL + `', table = 'by_n')`,
	} {
		if _, err := e.Execute(ctx, sess, s, nil); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	agg := ` SELECT user_id, COUNT(*), SUM(amount) FROM orders GROUP BY user_id`
	for _, tc := range []struct{ stmt, code, want string }{
		{`INSERT INTO t_missing` + agg, "42P01", "PostgreSQL has no table nosuch"},
		{`INSERT INTO t_key` + agg, "42P10", "the primary key of PostgreSQL table by_n is (n) but table t_key declares PRIMARY KEY (user_id)"},
		{`INSERT INTO t_narrow` + agg, "42804", "column n is BIGINT but is integer"},
		{`INSERT INTO t_bykey SELECT COUNT(*), user_id, SUM(amount) FROM orders GROUP BY user_id`, sql.CodeNotSupported, "keyed by (n)"},
	} {
		_, err := e.Execute(ctx, sess, tc.stmt, nil)
		var se *sql.Error
		if !errors.As(err, &se) || se.Code != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n  error %v, want %s containing %q", tc.stmt, err, tc.code, tc.want)
		}
	}
	if _, err := e.Execute(ctx, sess, `INSERT INTO t_ok`+agg, nil); err != nil {
		t.Fatalf("INSERT INTO t_ok: %v", err)
	}
	// The table a job writes is still looked up by a join.
	res, err := e.Execute(ctx, sess, `EXPLAIN SELECT o.order_id, t.n FROM orders o JOIN t_ok t ON o.user_id = t.user_id`, nil)
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for {
		r, err := res[0].Rows.Next(ctx)
		if err != nil || r == nil {
			break
		}
		plan.WriteString(sql.Text(r[0]) + "\n")
	}
	res[0].Rows.Close()
	if !strings.Contains(plan.String(), "mode=lookup") || !strings.Contains(plan.String(), "table=totals") {
		t.Errorf("EXPLAIN of a lookup join with t_ok:\n%s", plan.String())
	}
	// INSERT ... VALUES inserts at once; a key the table holds is PostgreSQL's 23505.
	if _, err := e.Execute(ctx, sess, `INSERT INTO t_ok VALUES ('v1', 2, 2.5), ('v2', NULL, -1)`, nil); err != nil {
		t.Fatalf("INSERT INTO t_ok VALUES: %v", err)
	}
	var got string
	if err := conn.QueryRow(ctx, `SELECT string_agg(user_id || '|' || coalesce(n::text, 'NULL') || '|' || total, ',' ORDER BY user_id) FROM totals`).Scan(&got); err != nil || got != "v1|2|2.5,v2|NULL|-1" {
		t.Errorf("totals after INSERT VALUES: %q, %v", got, err)
	}
	_, err = e.Execute(ctx, sess, `INSERT INTO t_ok VALUES ('v1', 3, 0)`, nil)
	var se *sql.Error
	if !errors.As(err, &se) || se.Code != "23505" || !strings.Contains(se.Message, "totals_pkey") {
		t.Errorf("INSERT of a key the table holds: %v, want 23505", err)
	}
}
