package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rsql/internal/pgtest"
)

// PostgreSQL change data capture (docs/sql.md, "PostgreSQL change data capture"): a table
// of a private PostgreSQL 15 started with wal_level = logical, read by rsql as its snapshot
// and then its changes, aggregated and copied by jobs into PostgreSQL tables (the
// PostgreSQL sink), which must equal PostgreSQL's own queries over the source table.

// startPostgresLogical starts a private cluster that can serve logical replication.
func startPostgresLogical(t testing.TB) *pgCluster {
	t.Helper()
	c, err := pgtest.StartWith("wal_level=logical", "max_wal_senders=10", "max_replication_slots=10", "wal_sender_timeout=60s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// cdcSourceDDL is the source table in PostgreSQL: every type the connector reads.
const cdcSourceDDL = `CREATE TABLE public.orders (
  order_id bigint PRIMARY KEY, user_id text, amount numeric(10,2), qty int, small smallint,
  price float8, flag bool, ts timestamp, tstz timestamptz, d date, doc jsonb, note varchar(20));
ALTER TABLE public.orders REPLICA IDENTITY FULL;
CREATE TABLE public.users (user_id text PRIMARY KEY, tier text);
ALTER TABLE public.users REPLICA IDENTITY FULL;
INSERT INTO public.users SELECT 'u' || i, 'tier' || (i % 3) FROM generate_series(0, 14) i;`

// cdcSinkDDL are the sink tables, in a database of their own.
const cdcSinkDDL = `CREATE SCHEMA sink;
CREATE TABLE sink.by_user (user_id text PRIMARY KEY, n bigint, amount numeric, qty bigint, flags bigint);
CREATE TABLE sink.copy (order_id bigint PRIMARY KEY, user_id text, amount numeric(10,2), qty int, small int,
  price float8, flag bool, ts timestamp, tstz timestamptz, d timestamp, doc text, note text);
CREATE TABLE sink.by_tier (tier text PRIMARY KEY, n bigint, qty bigint);`

// cdcColumns are the rsql declaration of the source table's columns.
const cdcColumns = `order_id BIGINT PRIMARY KEY, user_id VARCHAR, amount DECIMAL(10,2), qty INT, small INT,
  price DOUBLE, flag BOOLEAN, ts TIMESTAMP, tstz TIMESTAMP, d TIMESTAMP, doc VARCHAR, note VARCHAR`

func cdcRSQL(url, sinkURL string) string {
	return fmt.Sprintf(`
CREATE TABLE orders (%[2]s) WITH (connector = 'postgres-cdc', url = '%[1]s', table = 'public.orders',
  slot = 'rsql_orders', publication = 'rsql_orders', create_slot = true);
CREATE TABLE orders_copy_src (%[2]s) WITH (connector = 'postgres-cdc', url = '%[1]s', table = 'public.orders',
  slot = 'rsql_orders_copy', publication = 'rsql_orders', create_slot = true);
CREATE TABLE by_user (user_id VARCHAR PRIMARY KEY, n BIGINT, amount DECIMAL, qty BIGINT, flags BIGINT)
  WITH (connector = 'postgres', url = '%[3]s', table = 'sink.by_user');
CREATE TABLE copy (%[2]s) WITH (connector = 'postgres', url = '%[3]s', table = 'sink.copy');
INSERT INTO by_user SELECT user_id, COUNT(*), SUM(amount), SUM(qty), COUNT(flag) FROM orders WHERE user_id IS NOT NULL GROUP BY user_id;
INSERT INTO copy SELECT * FROM orders_copy_src;
CREATE TABLE orders_join_src (%[2]s) WITH (connector = 'postgres-cdc', url = '%[1]s', table = 'public.orders',
  slot = 'rsql_orders_join', publication = 'rsql_orders', create_slot = true);
CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR) WITH (connector = 'postgres-cdc', url = '%[1]s',
  table = 'users', publication = 'rsql_users', create_slot = true);
CREATE TABLE by_tier (tier VARCHAR PRIMARY KEY, n BIGINT, qty BIGINT) WITH (connector = 'postgres', url = '%[3]s', table = 'sink.by_tier');
INSERT INTO by_tier SELECT u.tier, COUNT(*), SUM(o.qty) FROM orders_join_src o JOIN users u ON o.user_id = u.user_id
  WHERE u.tier IS NOT NULL GROUP BY u.tier;
`, url, cdcColumns, sinkURL)
}

// cdcCases are the sink tables and the PostgreSQL queries over the source table that
// compute what they must hold.
var cdcCases = []struct{ got, want string }{
	{`SELECT user_id, n, amount::float8, qty, flags FROM sink.by_user`,
		`SELECT user_id, count(*), sum(amount)::float8, sum(qty), count(flag) FROM public.orders WHERE user_id IS NOT NULL GROUP BY user_id`},
	{`SELECT order_id, user_id, amount::float8, qty, small, price, flag, ts, tstz, d, doc, note FROM sink.copy`,
		`SELECT order_id, user_id, amount::float8, qty, small, price, flag, ts, tstz, d::timestamp, doc::text, note FROM public.orders`},
	{`SELECT tier, n, qty FROM sink.by_tier`,
		`SELECT u.tier, count(*), sum(o.qty) FROM public.orders o JOIN public.users u ON o.user_id = u.user_id WHERE u.tier IS NOT NULL GROUP BY u.tier`},
}

// cdcChange applies one random change to the source table: an insert (with NULLs now and
// then), an update of values, an update of the primary key, or a delete.
func cdcChange(ctx context.Context, t *testing.T, conn *pgx.Conn, r *rand.Rand, next *int64) {
	t.Helper()
	val := func(p float64, v string) string {
		if r.Float64() < p {
			return "NULL"
		}
		return v
	}
	row := func(id int64) string {
		return fmt.Sprintf("(%d, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", id,
			val(0.1, fmt.Sprintf("'u%d'", r.Intn(20))),
			val(0.1, fmt.Sprintf("%d.%02d", r.Intn(1000), r.Intn(100))),
			val(0.1, fmt.Sprint(r.Intn(50)-10)),
			val(0.2, fmt.Sprint(r.Intn(30000))),
			val(0.1, fmt.Sprintf("%d.25", r.Intn(100000)-500)),
			val(0.2, []string{"true", "false"}[r.Intn(2)]),
			val(0.1, fmt.Sprintf("'2026-0%d-1%d 12:34:56.%03d'", 1+r.Intn(9), r.Intn(10), r.Intn(1000))),
			val(0.1, fmt.Sprintf("'2026-05-0%d 08:00:00.%03d+0%d'", 1+r.Intn(9), r.Intn(1000), r.Intn(9))),
			val(0.1, fmt.Sprintf("'20%02d-12-3%d'", r.Intn(40), r.Intn(2))),
			val(0.2, fmt.Sprintf(`'{"k": %d, "s": "x\"y"}'`, r.Intn(10))),
			val(0.3, fmt.Sprintf("'n%d'", r.Intn(5))))
	}
	var q string
	switch k := r.Intn(10); {
	case k < 4:
		*next++
		q = "INSERT INTO public.orders VALUES " + row(*next)
	case k < 6:
		q = fmt.Sprintf(`UPDATE public.orders SET amount = %s, qty = qty + 1, note = NULL, flag = NOT flag, user_id = 'u%d'
  WHERE order_id = (SELECT order_id FROM public.orders ORDER BY random() LIMIT 1)`, val(0.2, fmt.Sprintf("%d.5", r.Intn(500))), r.Intn(20))
	case k < 8:
		// A change of the primary key: the old key's deletion and the new key's insertion.
		*next++
		q = fmt.Sprintf(`UPDATE public.orders SET order_id = %d WHERE order_id = (SELECT order_id FROM public.orders ORDER BY random() LIMIT 1)`, *next)
	case k < 9:
		q = `DELETE FROM public.orders WHERE order_id = (SELECT order_id FROM public.orders ORDER BY random() LIMIT 1)`
	default:
		// A user changes tier, or leaves a tier for none (NULL).
		q = fmt.Sprintf(`UPDATE public.users SET tier = %s WHERE user_id = 'u%d'`, val(0.2, fmt.Sprintf("'tier%d'", r.Intn(4))), r.Intn(20))
	}
	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// cdcRows are the rows of q as sorted text.
func cdcRows(t *testing.T, conn *pgx.Conn, q string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT row(x.*)::text FROM ("+q+") x")
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// cdcWaitEqual waits until every sink table (in the sink database) equals its query over
// the source table.
func cdcWaitEqual(t *testing.T, src, sink *pgx.Conn, s *jobsServer) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for _, c := range cdcCases {
		for {
			got, want := cdcRows(t, sink, c.got), cdcRows(t, src, c.want)
			if strings.Join(got, "\n") == strings.Join(want, "\n") {
				if len(want) == 0 {
					t.Fatalf("%s: no rows to compare", c.want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s differs from %s:\n%s\nserver stderr:\n%s", c.got, c.want, cdcDiffText(got, want), s.p.Stderr.String())
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
}

// cdcDiffText lists the rows of got not in want and the reverse (as multisets), ten each.
func cdcDiffText(got, want []string) string {
	count := map[string]int{}
	for _, g := range got {
		count[g]++
	}
	for _, w := range want {
		count[w]--
	}
	var b strings.Builder
	n := 0
	for r, c := range count {
		if c != 0 && n < 20 {
			fmt.Fprintf(&b, "%+d %s\n", c, r)
			n++
		}
	}
	return b.String()
}

// cdcDatabases starts the source cluster (logical replication, cdcSourceDDL's tables) and
// the sinks' cluster (sinkDDL), and connects to both; the connections close with the test.
// The sinks write a database of their own: a database that shuts down waits for its
// logical replication clients to confirm what they were sent, which the jobs do once their
// checkpoints commit, and these wait for their sinks.
func cdcDatabases(t *testing.T, sinkDDL string) (pg *pgCluster, conn *pgx.Conn, sinkPG *pgCluster, sinkConn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	pg = startPostgresLogical(t)
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, cdcSourceDDL); err != nil {
		t.Fatal(err)
	}
	sinkPG = startPostgres(t)
	sinkConn, err = pgx.Connect(ctx, sinkPG.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sinkConn.Close(ctx) })
	if _, err := sinkConn.Exec(ctx, sinkDDL); err != nil {
		t.Fatal(err)
	}
	return pg, conn, sinkPG, sinkConn
}

// TestPostgresCDC: a snapshot of 300 rows and then 1500 random inserts, updates (of values
// and of the primary key, to and from NULLs) and deletes in transactions of 1 to 5
// changes, read by three jobs (an aggregation, a copy of every column, and an aggregation
// over a regular join with a second table whose rows change too) through postgres-cdc
// tables into PostgreSQL sink tables. Both tables are truncated once (on_truncate =
// 'delete', the default), each in a transaction that changes rows before and after the
// TRUNCATE. The rsql server is killed with SIGKILL three times mid-stream and PostgreSQL
// is restarted once and crashes once: the sink tables end equal to PostgreSQL's queries
// over the source table, so no change was lost or applied twice, and the slots confirm the
// last change (the checkpoint commit hook).
func TestPostgresCDC(t *testing.T) {
	ctx := context.Background()
	pg, conn, sinkPG, sinkConn := cdcDatabases(t, cdcSinkDDL)
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	var next int64
	for i := 0; i < 300; i++ {
		cdcChange(ctx, t, conn, r, &next)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO public.orders (order_id) VALUES (1000000)`); err != nil { // every value NULL
		t.Fatal(err)
	}
	s := newJobsServer(t)
	s.sql(cdcRSQL(pg.URL, sinkPG.URL))
	// The jobs create their slots as they start, after the statements returned.
	var start *string
	if !waitFor(30*time.Second, func() bool {
		err := conn.QueryRow(ctx, `SELECT min(confirmed_flush_lsn)::text FROM pg_replication_slots HAVING count(*) = 4`).Scan(&start)
		return err == nil && start != nil
	}) {
		t.Fatalf("the jobs did not create their 4 replication slots\n%s", s.p.Stderr.String())
	}
	const rounds, per = 10, 150
	for round := 0; round < rounds; round++ {
		for i := 0; i < per; {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n := 1 + r.Intn(5)
			for j := 0; j < n; j++ {
				cdcChange(ctx, t, tx.Conn(), r, &next)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			i += n
		}
		// A TRUNCATE among other changes of its transaction: the users' tiers start
		// afresh (round 2); the orders are emptied and refilled in part (round 4).
		truncate := map[int]string{
			2: `UPDATE public.users SET tier = 'tier9' WHERE user_id = 'u1'; TRUNCATE public.users;
INSERT INTO public.users SELECT 'u' || i, 'tier' || (i % 4) FROM generate_series(3, 19) i; UPDATE public.users SET tier = NULL WHERE user_id = 'u4'`,
			4: `INSERT INTO public.orders (order_id, user_id, qty) VALUES (2000000, 'u1', 5); TRUNCATE public.orders;
INSERT INTO public.orders (order_id, user_id, qty, amount) SELECT 2000000 + i, 'u' || (i % 7), i, i FROM generate_series(0, 40) i;
DELETE FROM public.orders WHERE order_id = 2000003`,
		}[round]
		if truncate != "" {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, truncate); err != nil {
				t.Fatalf("%s: %v", truncate, err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		switch round {
		case 1, 3, 7:
			time.Sleep(time.Duration(200+r.Intn(600)) * time.Millisecond)
			s.p.Kill()
			s.start()
		case 5, 8:
			// PostgreSQL restarts (5) or crashes and recovers (8: immediate shutdown, no
			// shutdown checkpoint, its slots as of their last save): the jobs wait for it
			// and go on from their checkpoints.
			if round == 5 {
				pg.StopServer()
			} else {
				pg.CrashServer()
			}
			conn.Close(ctx)
			time.Sleep(2 * time.Second)
			if err := pg.StartServer(); err != nil {
				t.Fatal(err)
			}
			c, err := pgx.Connect(ctx, pg.URL)
			if err != nil {
				t.Fatal(err)
			}
			conn = c
			t.Cleanup(func() { c.Close(ctx) })
		default:
			time.Sleep(300 * time.Millisecond)
		}
	}
	// Where the last change's commit record ends (or later: other sessions write too).
	var last string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	cdcWaitEqual(t, conn, sinkConn, s)
	if n := pgCount(t, conn, `SELECT 1 FROM public.orders`); n < 100 {
		t.Fatalf("%d rows left in the source: the test does not test much", n)
	}
	// Every slot confirms the last change once the checkpoints that cover it commit (the
	// checkpoint commit hook; standby status updates every few seconds), and not before:
	// the sink tables are written after those commits.
	for deadline := time.Now().Add(60 * time.Second); ; {
		var behind int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE confirmed_flush_lsn < $1::pg_lsn`, last).Scan(&behind); err != nil {
			t.Fatal(err)
		}
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			var slots string
			conn.QueryRow(ctx, `SELECT string_agg(slot_name || ' ' || confirmed_flush_lsn, ', ') FROM pg_replication_slots`).Scan(&slots)
			t.Fatalf("%d replication slots did not confirm the last change at %s (they started at %s): %s", behind, last, *start, slots)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// The job of by_tier ends for good: the slots rsql created for the two tables it reads
	// are dropped (they would hold the server's WAL back for ever), and its rows of the
	// sink database's progress table deleted; the other jobs keep theirs.
	job := ""
	for _, l := range lines(s.sql("SHOW JOBS")) {
		var r struct{ ID, Statement string }
		if json.Unmarshal([]byte(l), &r) == nil && strings.HasPrefix(r.Statement, "INSERT INTO by_tier ") {
			job = r.ID
		}
	}
	if job == "" {
		t.Fatalf("no job writes by_tier:\n%s", s.sql("SHOW JOBS"))
	}
	s.sql("TERMINATE JOB " + job)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		slots := strings.Join(cdcRows(t, conn, `SELECT slot_name FROM pg_replication_slots`), " ")
		progress := pgCount(t, sinkConn, `SELECT 1 FROM rsql_sink_progress WHERE job = '`+job+`'`)
		if slots == "(rsql_orders) (rsql_orders_copy)" && progress == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after TERMINATE JOB %s: slots %q (want (rsql_orders) (rsql_orders_copy)), %d progress rows\n%s", job, slots, progress, s.p.Stderr.String())
		}
	}
	if pgCount(t, sinkConn, `SELECT 1 FROM rsql_sink_progress`) == 0 {
		t.Fatal("the running jobs' progress rows are gone")
	}
}

// TestPostgresCDCDeclarationErrors: CREATE TABLE of a postgres-cdc table fails with the
// SQLSTATE and a message naming what is wrong and what to run.
func TestPostgresCDCDeclarationErrors(t *testing.T) {
	pg := startPostgresLogical(t)
	plain := startPostgres(t) // wal_level replica
	ctx := context.Background()
	for _, u := range []string{pg.URL, plain.URL} {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`CREATE TABLE t (id bigint PRIMARY KEY, v text)`,
			`ALTER TABLE t REPLICA IDENTITY FULL`,
			`CREATE TABLE nokey (id bigint, v text)`,
			`CREATE TABLE ident (id bigint PRIMARY KEY, v text)`,
			`CREATE TABLE odd (id bigint PRIMARY KEY, v bytea, i interval)`,
			`ALTER TABLE odd REPLICA IDENTITY FULL`,
			`CREATE PUBLICATION pub FOR TABLE t`,
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		conn.Close(ctx)
	}
	s := newJobsServer(t)
	rsql, err := pgx.Connect(ctx, "postgres://rsql@"+s.pg+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer rsql.Close(ctx)
	decl := func(url, cols, opts string) string {
		return fmt.Sprintf(`CREATE TABLE x (%s) WITH (connector = 'postgres-cdc', url = '%s', %s)`, cols, url, opts)
	}
	cases := []struct {
		sql, code, says string
	}{
		{decl(plain.URL, "id BIGINT PRIMARY KEY, v VARCHAR", "table = 't', publication = 'pub', slot = 's1'"), "55000", "wal_level = logical"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY, v VARCHAR", "table = 'missing', publication = 'pub', slot = 's1'"), "42P01", "public.missing"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY, v VARCHAR", "table = 'nokey', publication = 'pub', slot = 's1'"), "42P10", "no primary key"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY, v VARCHAR", "table = 'ident', publication = 'pub', slot = 's1'"), "55000", "REPLICA IDENTITY FULL"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY, v BIGINT", "table = 't', publication = 'pub', slot = 's1'"), "42804", "column v"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY, v VARCHAR, i INT", "table = 'odd', publication = 'pub', slot = 's1'"), "42804", "column i"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY", "table = 't', publication = 'pub', slot = 's1'"), "42703", "v"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY, v VARCHAR, w VARCHAR", "table = 't', publication = 'pub', slot = 's1'"), "42703", "no column w"},
		{decl(pg.URL, "id BIGINT, v VARCHAR PRIMARY KEY", "table = 't', publication = 'pub', slot = 's1'"), "42P10", "primary key"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY, v VARCHAR", "table = 't', publication = 'nopub', slot = 's1'"), "42704", "CREATE PUBLICATION nopub FOR TABLE"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY, v VARCHAR", "table = 't', publication = 'pub', slot = 's1'"), "42704", "pg_create_logical_replication_slot('s1', 'pgoutput')"},
		{decl(pg.URL, "id BIGINT PRIMARY KEY, v VARCHAR", "table = 't', on_truncate = 'ignore'"), "22023", "on_truncate"},
		{fmt.Sprintf(`CREATE STREAM x (id BIGINT, v VARCHAR) WITH (connector = 'postgres-cdc', url = '%s', table = 't')`, pg.URL), "0A000", "CREATE TABLE"},
	}
	for _, c := range cases {
		_, err := rsql.Exec(ctx, c.sql, pgx.QueryExecModeSimpleProtocol)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != c.code || !strings.Contains(pe.Message, c.says) {
			t.Errorf("%s: %v, want SQLSTATE %s saying %q", c.sql, err, c.code, c.says)
		}
	}
	// With create_slot the publication is created; the declaration then succeeds.
	if _, err := rsql.Exec(ctx, decl(pg.URL, "id BIGINT PRIMARY KEY, v VARCHAR", "table = 't', publication = 'newpub', slot = 's2', create_slot = true"), pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresCDCStopsOnTableChange: a column added to the source table, and a TRUNCATE of
// another declared with on_truncate = 'error', stop the jobs that read them with an error
// naming the change (SHOW JOBS).
func TestPostgresCDCStopsOnTableChange(t *testing.T) {
	pg := startPostgresLogical(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE a (id bigint PRIMARY KEY, v text); ALTER TABLE a REPLICA IDENTITY FULL;
CREATE TABLE b (id bigint PRIMARY KEY, v text); ALTER TABLE b REPLICA IDENTITY FULL;
INSERT INTO a VALUES (1, 'x'); INSERT INTO b VALUES (1, 'y');`); err != nil {
		t.Fatal(err)
	}
	s := newJobsServer(t)
	s.sql(fmt.Sprintf(`CREATE TABLE a (id BIGINT PRIMARY KEY, v VARCHAR) WITH (connector = 'postgres-cdc', url = '%[1]s', create_slot = true);
CREATE TABLE b (id BIGINT PRIMARY KEY, v VARCHAR) WITH (connector = 'postgres-cdc', url = '%[1]s', create_slot = true, on_truncate = 'error');
CREATE MATERIALIZED VIEW va AS SELECT v, COUNT(*) AS n FROM a GROUP BY v;
CREATE MATERIALIZED VIEW vb AS SELECT v, COUNT(*) AS n FROM b GROUP BY v;`, pg.URL))
	// The jobs have read their snapshots once their slots exist.
	for deadline := time.Now().Add(60 * time.Second); pgCount(t, conn, `SELECT 1 FROM pg_replication_slots WHERE active`) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the jobs did not start replication\n%s", s.p.Stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO a VALUES (2, 'x'); ALTER TABLE a ADD COLUMN extra int; INSERT INTO a VALUES (3, 'z', 1); TRUNCATE b;`); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"job-1": "column extra was added", "job-2": "on_truncate is 'error'"}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := map[string]string{}
		for _, l := range lines(s.sql("SHOW JOBS")) {
			var r struct{ ID, State, Error string }
			if json.Unmarshal([]byte(l), &r) == nil {
				got[r.ID] = r.State + ": " + r.Error
			}
		}
		done := true
		for id, says := range want {
			done = done && strings.HasPrefix(got[id], "FAILED") && strings.Contains(got[id], says)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs %v, want job-1 and job-2 FAILED saying %v\n%s", got, want, s.p.Stderr.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
}
