package connectors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rsql/sql"
)

// sinkSchema is user_id VARCHAR (the key), n BIGINT, total DOUBLE and, for an updating
// query, the change column.
func sinkSchema(changes bool) sql.Schema {
	s := sql.Schema{{Name: "user_id", Type: sql.Type{Kind: sql.KindVarchar}}, {Name: "n", Type: sql.Type{Kind: sql.KindBigInt}},
		{Name: "total", Type: sql.Type{Kind: sql.KindDouble}}}
	if changes {
		s = append(s, sql.Column{Name: sql.ChangeColumn, Type: sql.Type{Kind: sql.KindVarchar}})
	}
	return s
}

func sinkSpec(url, table string, schema sql.Schema) Spec {
	raw := map[string]string{"connector": "postgres", "url": url, "table": table}
	return Spec{Stream: "t", Options: StreamOptions{Connector: "postgres", Raw: raw}, Schema: schema, Key: []int{0}}
}

// change is the message of an updating query's row (op "" or "delete").
func change(user string, n int64, total float64, op string) Message {
	r := sql.Row{sql.Varchar(user), sql.BigInt(n), sql.Double(total), sql.Null}
	if op != "" {
		r[3] = sql.Varchar(op)
	}
	b, _ := RowFormat{}.Encode(nil, r)
	return Message{Body: b}
}

func pgTableText(t *testing.T, url, query string) string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			parts = append(parts, strings.TrimSpace(strings.ReplaceAll(fmt.Sprint(v), "\n", " ")))
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// TestPostgresSinkChecks: the errors of a table that cannot take the rows, each with its
// SQLSTATE, before anything is written.
func TestPostgresSinkChecks(t *testing.T) {
	c, conn := startPG(t)
	pgExec(t, conn,
		`CREATE TABLE ok (user_id text PRIMARY KEY, n bigint, total float8)`,
		`CREATE TABLE nokey (user_id text, n bigint, total float8)`,
		`CREATE TABLE otherkey (user_id text, n bigint PRIMARY KEY, total float8)`,
		`CREATE TABLE narrow (user_id text PRIMARY KEY, n int, total float8)`,
		`CREATE TABLE textnum (user_id text PRIMARY KEY, n bigint, total numeric)`,
		`CREATE TABLE nototal (user_id text PRIMARY KEY, n bigint)`,
		`CREATE TABLE required (user_id text PRIMARY KEY, n bigint, total float8, note text NOT NULL)`,
		`CREATE ROLE reader LOGIN`, `GRANT SELECT ON ok TO reader`)
	ctx := context.Background()
	for _, tc := range []struct {
		table, url, code, msg string
	}{
		{"ok", c.URL, "", ""},
		{"textnum", c.URL, "", ""},
		{"missing", c.URL, "42P01", "has no table missing"},
		{"nosuch.t", c.URL, "42P01", "has no table nosuch.t"},
		{"nokey", c.URL, "42P10", "has no primary key"},
		{"otherkey", c.URL, "42P10", "primary key of PostgreSQL table otherkey is (n)"},
		{"narrow", c.URL, "42804", "column n is BIGINT but is integer"},
		{"nototal", c.URL, "42703", "has no column total"},
		{"required", c.URL, "23502", "column note of PostgreSQL table required is NOT NULL"},
		{"ok", strings.Replace(c.URL, "rsql@", "reader@", 1), "42501", "may not INSERT PostgreSQL table ok"},
	} {
		err := CheckPostgresSink(ctx, sinkSpec(tc.url, tc.table, sinkSchema(true)))
		if tc.code == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.table, err)
			}
			continue
		}
		var se *sql.Error
		if !errors.As(err, &se) || se.Code != tc.code || !strings.Contains(se.Message, tc.msg) {
			t.Errorf("%s: got %v, want %s %q", tc.table, err, tc.code, tc.msg)
		}
	}
	// The database down: 08001, not a check error.
	err := CheckPostgresSink(ctx, sinkSpec("postgres://rsql@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", "ok", sinkSchema(true)))
	var se *sql.Error
	if !errors.As(err, &se) || se.Code != "08001" {
		t.Errorf("database down: %v", err)
	}
}

// TestPostgresSinkEpochs: an epoch's upserts and deletes in one transaction with the
// progress record; an epoch given again is skipped; a row the table refuses goes to the
// reject function with PostgreSQL's message, the others are applied.
func TestPostgresSinkEpochs(t *testing.T) {
	c, conn := startPG(t)
	for _, mode := range []string{"split", "epoch"} {
		t.Run(mode, func(t *testing.T) { testSinkEpochs(t, c.URL, conn, mode) })
	}
}

func testSinkEpochs(t *testing.T, url string, conn *pgx.Conn, mode string) {
	pgExec(t, conn, `CREATE SCHEMA s_`+mode, `CREATE TABLE s_`+mode+`.totals (user_id text PRIMARY KEY, n bigint CHECK (n < 100), total float8)`)
	spec := sinkSpec(url, "s_"+mode+".totals", sinkSchema(true))
	spec.Options.Raw["transaction"] = mode
	p, err := OpenPostgresSink(spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.wholeEpochs != (mode == "epoch") {
		t.Fatalf("transaction = %q: whole epochs %v", mode, p.wholeEpochs)
	}
	defer p.Close()
	var rejected []string
	p.SetReject(func(rows []RejectedRow) error {
		for _, r := range rows {
			row, err := RowFormat{}.Decode(r.Body, nil)
			if err != nil {
				return err
			}
			rejected = append(rejected, r.Split+" "+sql.Text(row[0])+" "+r.Cause.Code+" "+r.Cause.Message)
		}
		return nil
	})
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.WriteEpoch(ctx, "j_"+mode, 2, 1, []EpochEntry{
		{Split: "0", Msgs: []Message{change("a", 1, 1.5, ""), change("b", 2, 2.5, "")}},
		{Split: "1", Msgs: []Message{change("c", 3, 3.5, "")}},
	}))
	must(p.WriteEpoch(ctx, "j_"+mode, 2, 2, []EpochEntry{
		{Split: "0", Msgs: []Message{change("a", 0, 0, "delete"), change("b", 5, 7.25, ""), change("x", 0, 0, "delete")}},
		{Split: "1", Msgs: []Message{change("d", 4, 4.5, ""), change("e", 100, 1, "")}},
	}))
	want := "b|5|7.25\nc|3|3.5\nd|4|4.5"
	if got := pgTableText(t, url, `SELECT * FROM s_`+mode+`.totals ORDER BY 1`); got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
	if len(rejected) != 1 || !strings.HasPrefix(rejected[0], "1 e 23514 ") || !strings.Contains(rejected[0], "totals_n_check") {
		t.Fatalf("rejected: %q", rejected)
	}
	// Epochs 1 and 2 again (a publication repeated after a crash), and split 1's epoch 2
	// with split 0's epoch 3: only the new entry is applied.
	must(p.WriteEpoch(ctx, "j_"+mode, 2, 1, []EpochEntry{{Split: "0", Msgs: []Message{change("a", 9, 9, "")}}}))
	must(p.WriteEpoch(ctx, "j_"+mode, 2, 2, []EpochEntry{{Split: "1", Msgs: []Message{change("c", 0, 0, "delete")}}}))
	must(p.WriteEpoch(ctx, "j_"+mode, 2, 3, []EpochEntry{{Split: "0", Msgs: []Message{change("b", 6, 8, "")}}}))
	want = "b|6|8\nc|3|3.5\nd|4|4.5"
	if got := pgTableText(t, url, `SELECT * FROM s_`+mode+`.totals ORDER BY 1`); got != want {
		t.Fatalf("after replays:\n%s\nwant:\n%s", got, want)
	}
	if got := pgTableText(t, url, `SELECT stage, split, epoch FROM rsql_sink_progress WHERE job = 'j_`+mode+`' ORDER BY 1, 2, 3`); got != "2|0|3\n2|1|2" {
		t.Fatalf("progress:\n%s", got)
	}
	if len(rejected) != 1 {
		t.Fatalf("a skipped epoch rejected rows: %q", rejected)
	}
}

// By default each split's entry of an epoch is applied in a transaction of its own, in
// parallel: while split 0's row is locked by another transaction, split 1's rows commit;
// split 0's follow once the lock goes. A transaction option other than split or epoch is
// refused.
func TestPostgresSinkSplitsInParallel(t *testing.T) {
	c, conn := startPG(t)
	pgExec(t, conn, `CREATE TABLE par (user_id text PRIMARY KEY, n bigint, total float8)`, `INSERT INTO par VALUES ('a', 0, 0)`)
	bad := sinkSpec(c.URL, "par", sinkSchema(true))
	bad.Options.Raw["transaction"] = "row"
	if _, err := OpenPostgresSink(bad); err == nil || !strings.Contains(err.Error(), "transaction") {
		t.Fatalf("transaction = 'row': %v", err)
	}
	p, err := OpenPostgresSink(sinkSpec(c.URL, "par", sinkSchema(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	lock, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx) // before the sink's pool closes, which waits for the write
	if _, err := lock.Exec(ctx, `SELECT * FROM par WHERE user_id = 'a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- p.WriteEpoch(ctx, "jp", 1, 1, []EpochEntry{
			{Split: "0", Msgs: []Message{change("a", 1, 1, "")}},
			{Split: "1", Msgs: []Message{change("b", 2, 2, "")}},
		})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for pgTableText(t, c.URL, `SELECT user_id FROM par WHERE user_id = 'b'`) != "b" {
		if time.Now().After(deadline) {
			t.Fatal("split 1's rows did not commit while split 0's row was locked")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := pgTableText(t, c.URL, `SELECT n FROM par WHERE user_id = 'a'`); got != "0" {
		t.Fatalf("split 0's row changed under the lock: %s", got)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := pgTableText(t, c.URL, `SELECT * FROM par ORDER BY 1`); got != "a|1|1\nb|2|2" {
		t.Fatalf("table:\n%s", got)
	}
}

// TestPostgresSinkAppend: an append-only query's rows go in with COPY (text format, with
// the characters COPY escapes and NULLs); a row the table refuses is rejected alone.
func TestPostgresSinkAppend(t *testing.T) {
	c, conn := startPG(t)
	pgExec(t, conn, `CREATE TABLE events (user_id text PRIMARY KEY, n bigint, total float8)`)
	p, err := OpenPostgresSink(sinkSpec(c.URL, "events", sinkSchema(false)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var rejected []string
	p.SetReject(func(rows []RejectedRow) error {
		for _, r := range rows {
			rejected = append(rejected, r.Split+" "+r.Cause.Code)
		}
		return nil
	})
	row := func(user string, n sql.Value, total float64) Message {
		b, _ := RowFormat{}.Encode(nil, sql.Row{sql.Varchar(user), n, sql.Double(total)})
		return Message{Body: b, Split: "3"}
	}
	ctx := context.Background()
	if err := p.Write(ctx, []Message{row("a\tb\\c\nd", sql.BigInt(1), 0.5), row("e", sql.Null, -1), row("nan", sql.BigInt(2), 0)}); err != nil {
		t.Fatal(err)
	}
	// A DOUBLE where BIGINT is declared is rounded as PostgreSQL's INSERT does (2.5: to even); one out of
	// BIGINT's range refuses its row (22003) without reaching the database.
	if err := p.WriteEpoch(ctx, "j", 1, 1, []EpochEntry{{Split: "3", Msgs: []Message{row("f", sql.BigInt(3), 1), row("e", sql.BigInt(4), 2),
		row("g", sql.Double(2.5), 0), row("h", sql.Double(1e30), 0)}}}); err != nil {
		t.Fatal(err)
	}
	want := "a\tb\\c d|1|0.5\ne|<nil>|-1\nf|3|1\ng|2|0\nnan|2|0"
	if got := pgTableText(t, c.URL, `SELECT * FROM events ORDER BY 1`); got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
	if len(rejected) != 2 || rejected[0] != "3 22003" || rejected[1] != "3 23505" {
		t.Fatalf("rejected: %q", rejected)
	}
}

// TestPostgresSinkDatabaseDown: an epoch written while the database is stopped waits for
// it and is applied once it is back; past the retry time the error is ErrUnavailable.
func TestPostgresSinkDatabaseDown(t *testing.T) {
	c, conn := startPG(t)
	pgExec(t, conn, `CREATE TABLE totals (user_id text PRIMARY KEY, n bigint, total float8)`)
	conn.Close(context.Background())
	p, err := OpenPostgresSink(sinkSpec(c.URL, "totals", sinkSchema(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetLogf(t.Logf)
	ctx := context.Background()
	if err := p.WriteEpoch(ctx, "j", 1, 1, []EpochEntry{{Split: "0", Msgs: []Message{change("a", 1, 1, "")}}}); err != nil {
		t.Fatal(err)
	}
	c.StopServer()
	release, err := c.HoldPort()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		werr = p.WriteEpoch(ctx, "j", 1, 2, []EpochEntry{{Split: "0", Msgs: []Message{change("a", 2, 2, ""), change("b", 1, 1, "")}}})
	}()
	time.Sleep(time.Second) // let it fail a few times (not an assertion)
	release()
	if err := c.StartServer(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if got := pgTableText(t, c.URL, `SELECT * FROM totals ORDER BY 1`); got != "a|2|2\nb|1|1" {
		t.Fatalf("table:\n%s", got)
	}
	c.StopServer()
	old := postgresRetryFor
	postgresRetryFor = 0
	defer func() { postgresRetryFor = old }()
	err = p.WriteEpoch(ctx, "j", 1, 3, []EpochEntry{{Split: "0", Msgs: []Message{change("a", 3, 3, "")}}})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("database gone: %v, want ErrUnavailable", err)
	}
}

// FuzzRowFormat: any bytes decode to a row or an error (never a crash); a decoded row
// encodes back to the same bytes.
func FuzzRowFormat(f *testing.F) {
	for _, r := range []sql.Row{
		{sql.Varchar("u1"), sql.BigInt(3), sql.Double(1.5), sql.Null},
		{sql.Varchar("a\tb"), sql.Null, sql.Double(-0.25), sql.Varchar("delete")},
	} {
		b, _ := RowFormat{}.Encode(nil, r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		row, err := RowFormat{}.Decode(body, nil)
		if err != nil {
			return
		}
		again, err := RowFormat{}.Encode(nil, row)
		if err != nil {
			return // an error value: not a row a sink gets
		}
		back, err := RowFormat{}.Decode(again, nil)
		if err != nil || len(back) != len(row) {
			t.Fatalf("%x: decoded %v, encoded again %x: %v", body, row, again, err)
		}
	})
}

// TestPostgresSinkTypes: every declared type reaches the columns that take it, through the
// upsert and through COPY: TIMESTAMP into timestamptz (as UTC), DECIMAL into numeric, JSON
// into jsonb, VARCHAR into a uuid key, BOOLEAN, DOUBLE's NaN and infinities, NULLs.
func TestPostgresSinkTypes(t *testing.T) {
	c, conn := startPG(t)
	pgExec(t, conn,
		`CREATE TABLE up (k uuid PRIMARY KEY, ts timestamptz, b boolean, d numeric(12,3), j jsonb, f float8, i int8)`,
		`CREATE TABLE ap (k uuid PRIMARY KEY, ts timestamp, b boolean, d numeric, j json, f float8, i numeric)`)
	schema := sql.Schema{{Name: "k", Type: sql.Type{Kind: sql.KindVarchar}}, {Name: "ts", Type: sql.Type{Kind: sql.KindTimestamp}},
		{Name: "b", Type: sql.Type{Kind: sql.KindBool}}, {Name: "d", Type: sql.Type{Kind: sql.KindDecimal}},
		{Name: "j", Type: sql.Type{Kind: sql.KindJSON}}, {Name: "f", Type: sql.Type{Kind: sql.KindDouble}},
		{Name: "i", Type: sql.Type{Kind: sql.KindInt}}}
	rows := []sql.Row{
		{sql.Varchar("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), sql.Timestamp(1767225600123), sql.Bool(true), sql.Decimal(12345, 3),
			sql.JSONValue(`{"a": [1, "x\ty"]}`), sql.Double(math.Inf(-1)), sql.Int(-7)},
		{sql.Varchar("b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12"), sql.Null, sql.Bool(false), sql.Null, sql.Null, sql.Double(math.NaN()), sql.Null},
	}
	want := "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11|2026-01-01 00:00:00.123|true|12.345|{\"a\": [1, \"x\\ty\"]}|-Infinity|-7\n" +
		"b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12|<nil>|false|<nil>|<nil>|NaN|<nil>"
	q := `SELECT k::text, to_char(ts, 'YYYY-MM-DD HH24:MI:SS.MS'), b, d::text, j::text, f::text, i::text FROM %s ORDER BY k`
	ctx := context.Background()
	for _, tc := range []struct {
		table   string
		changes bool
	}{{"up", true}, {"ap", false}} {
		sch := schema
		if tc.changes {
			sch = append(append(sql.Schema{}, schema...), sql.Column{Name: sql.ChangeColumn, Type: sql.Type{Kind: sql.KindVarchar}})
		}
		spec := sinkSpec(c.URL, tc.table, sch)
		if err := CheckPostgresSink(ctx, spec); err != nil {
			t.Fatalf("%s: %v", tc.table, err)
		}
		p, err := OpenPostgresSink(spec)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []Message
		for _, r := range rows {
			if tc.changes {
				r = append(append(sql.Row{}, r...), sql.Null)
			}
			b, err := RowFormat{}.Encode(nil, r)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, Message{Body: b})
		}
		if err := p.WriteEpoch(ctx, "j-"+tc.table, 1, 1, []EpochEntry{{Split: "0", Msgs: msgs}}); err != nil {
			t.Fatalf("%s: %v", tc.table, err)
		}
		p.Close()
		if got := pgTableText(t, c.URL, fmt.Sprintf(q, tc.table)); got != want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.table, got, want)
		}
	}
}
