package main

import (
	"context"
	"io"
	"math"
	"testing"

	"rsql/server"
	"rsql/sql"
)

// chanRows hands out the rows sent on its channel, one by one, as a push query's arrive.
type chanRows struct{ ch chan sql.Row }

func (r *chanRows) Next(ctx context.Context) (sql.Row, error) {
	select {
	case row, ok := <-r.ch:
		if !ok {
			return nil, io.EOF
		}
		return row, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *chanRows) Close() error { return nil }

var valuesSchema = sql.Schema{
	{Name: "d", Type: sql.Type{Kind: sql.KindDouble}},
	{Name: "ts", Type: sql.Type{Kind: sql.KindTimestamp}},
	{Name: "ok", Type: sql.Type{Kind: sql.KindBool}},
	{Name: "n", Type: sql.Type{Kind: sql.KindBigInt}},
}

// Values print as psql prints them: DOUBLE in PostgreSQL's shortest exact digits (not in
// exponent form below 1e15), TIMESTAMP as PostgreSQL's text, BOOLEAN as t or f.
func TestTableValuesAsPsql(t *testing.T) {
	ch := make(chan sql.Row, 2)
	ch <- sql.Row{sql.Double(536870913.25), sql.Timestamp(1796119204000), sql.Bool(true), sql.Value{K: sql.KindBigInt, I: 7}}
	ch <- sql.Row{sql.Double(1e-7), sql.Timestamp(1796119204500), sql.Bool(false), sql.Value{K: sql.KindBigInt, I: 12345}}
	close(ch)
	p, out, _ := testPrinter(false)
	if err := p.resultMode(context.Background(), &server.Result{Columns: valuesSchema, Rows: &chanRows{ch}}, streamNever); err != nil {
		t.Fatal(err)
	}
	want := ` d            | ts                    | ok | n    
--------------+-----------------------+----+-------
 536870913.25 | 2026-12-01 10:00:04   | t  |     7
        1e-07 | 2026-12-01 10:00:04.5 | f  | 12345
(2 rows)
`
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

// A table whose rows print as they arrive keeps its columns aligned: a value wider than its
// column widens it and prints the header again above its row.
func TestStreamedTableStaysAligned(t *testing.T) {
	ch := make(chan sql.Row)
	p, out, _ := testPrinter(false)
	done := make(chan error, 1)
	go func() {
		done <- p.resultMode(context.Background(), &server.Result{Columns: valuesSchema, Rows: &chanRows{ch}}, streamNow)
	}()
	ch <- sql.Row{sql.Double(1.5), sql.Timestamp(1796119204000), sql.Bool(true), sql.Value{K: sql.KindBigInt, I: 7}}
	ch <- sql.Row{sql.Double(536870913.25), sql.Timestamp(1796119204250), sql.Bool(false), sql.Value{K: sql.KindBigInt, I: 12345}}
	ch <- sql.Row{sql.Double(2), sql.Timestamp(1796119205000), sql.Bool(false), sql.Value{K: sql.KindBigInt, I: 8}}
	close(ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := ` d | ts                      | ok | n
---+-------------------------+----+---
 d   | ts                      | ok | n
-----+-------------------------+----+---
 1.5 | 2026-12-01 10:00:04     | t  | 7
 d            | ts                      | ok | n    
--------------+-------------------------+----+-------
 536870913.25 | 2026-12-01 10:00:04.25  | f  | 12345
            2 | 2026-12-01 10:00:05     | f  |     8
(3 rows)
`
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

// Over the wire the same values print the same: a server's DOUBLE, TIMESTAMP and NUMERIC
// (every digit kept) as PostgreSQL's text.
func TestRemoteValuesAsPsql(t *testing.T) {
	eng := testEngine(t)
	addr, _ := servePG(t, eng, "127.0.0.1:0")
	p, out, _ := testPrinter(false)
	rc := &remoteConn{addr: addr}
	defer rc.close()
	q := "SELECT CAST(536870913.25 AS DOUBLE) AS d, TIMESTAMP '2026-12-01 10:00:04' AS ts, CAST('12345678901234567890.125' AS DECIMAL(30, 3)) AS n"
	if err := rc.runTo(context.Background(), p, q, true); err != nil {
		t.Fatal(err)
	}
	want := ` d            | ts                  | n                       
--------------+---------------------+--------------------------
 536870913.25 | 2026-12-01 10:00:04 | 12345678901234567890.125
(1 row)
`
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

// JSON lines print every value, one a stream's JSON format cannot hold too (Infinity, a
// year past 9999, BC) as PostgreSQL's text in a string; other rows as the format writes them.
func TestJSONLinesPrintEveryValue(t *testing.T) {
	ch := make(chan sql.Row, 2)
	ch <- sql.Row{sql.Double(1.5), sql.Timestamp(1796119204000), sql.Bool(true), sql.Value{K: sql.KindBigInt, I: 7}}
	ch <- sql.Row{sql.Double(math.Inf(1)), sql.Timestamp(253402387200000), sql.Null, sql.Value{K: sql.KindBigInt, I: 8}}
	close(ch)
	p, out, _ := testPrinter(true)
	if err := p.resultMode(context.Background(), &server.Result{Columns: valuesSchema, Rows: &chanRows{ch}}, streamNever); err != nil {
		t.Fatal(err)
	}
	want := `{"d":1.5,"ts":"2026-12-01T10:00:04.000Z","ok":true,"n":7}
{"d":"Infinity","ts":"10000-01-02 00:00:00","ok":null,"n":8}
`
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}
