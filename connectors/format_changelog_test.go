package connectors

import (
	"errors"
	"strings"
	"testing"

	"rsql/sql"
)

// changelogSchema is an updating query's row: its columns, then the change column.
var changelogSchema = sql.Schema{
	{Name: "user_id", Type: sql.TypeVarchar},
	{Name: "n", Type: sql.TypeBigInt},
	{Name: sql.ChangeColumn, Type: sql.TypeVarchar},
}

// An insert is the row alone (as a GROUP BY's output always was), a delete carries
// "__op":"delete", the convention a TABLE reads back.
func TestChangelogJSON(t *testing.T) {
	f := mustFormat(t, "json", changelogSchema)
	ins, err := f.Encode(nil, sql.Row{sql.Varchar("u1"), sql.BigInt(3), sql.Null})
	if err != nil || string(ins) != `{"user_id":"u1","n":3}` {
		t.Fatalf("insert: %s %v", ins, err)
	}
	del, err := f.Encode(nil, sql.Row{sql.Varchar("u1"), sql.BigInt(3), sql.OpDelete})
	if err != nil || string(del) != `{"user_id":"u1","n":3,"__op":"delete"}` {
		t.Fatalf("delete: %s %v", del, err)
	}
	row, err := f.Decode(del, nil)
	if err != nil || !sql.IsDelete(row[2]) || row[0].S != "u1" {
		t.Fatalf("decode of delete: %v %v", row, err)
	}
	row, err = f.Decode(ins, nil)
	if err != nil || row[2].K != sql.KindNull || row[1].I != 3 {
		t.Fatalf("decode of insert: %v %v", row, err)
	}
	// A schema whose change column is not last is not a changelog: every column is written.
	plain := mustFormat(t, "json", sql.Schema{changelogSchema[2], changelogSchema[0]})
	if got, _ := plain.Encode(nil, sql.Row{sql.Null, sql.Varchar("u")}); string(got) != `{"__op":null,"user_id":"u"}` {
		t.Fatalf("change column not last: %s", got)
	}
}

func TestChangelogCSV(t *testing.T) {
	f := mustFormat(t, "csv", changelogSchema)
	ins, _ := f.Encode(nil, sql.Row{sql.Varchar("u1"), sql.BigInt(3), sql.Null})
	del, _ := f.Encode(nil, sql.Row{sql.Varchar("u1"), sql.BigInt(3), sql.OpDelete})
	if string(ins) != `u1,3,` || string(del) != `u1,3,delete` {
		t.Fatalf("csv: %s / %s", ins, del)
	}
	row, err := f.Decode(del, nil)
	if err != nil || !sql.IsDelete(row[2]) {
		t.Fatalf("decode: %v %v", row, err)
	}
}

func TestDebeziumJSON(t *testing.T) {
	f := mustFormat(t, "DEBEZIUM-JSON", changelogSchema)
	ins, err := f.Encode(nil, sql.Row{sql.Varchar("u1"), sql.BigInt(3), sql.Null})
	if err != nil || string(ins) != `{"before":null,"after":{"user_id":"u1","n":3},"op":"c"}` {
		t.Fatalf("insert: %s %v", ins, err)
	}
	del, err := f.Encode(nil, sql.Row{sql.Varchar("u1"), sql.BigInt(3), sql.OpDelete})
	if err != nil || string(del) != `{"before":{"user_id":"u1","n":3},"after":null,"op":"d"}` {
		t.Fatalf("delete: %s %v", del, err)
	}
	for _, c := range []struct {
		in   string
		want sql.Row
	}{
		{string(ins), sql.Row{sql.Varchar("u1"), sql.BigInt(3), sql.Null}},
		{string(del), sql.Row{sql.Varchar("u1"), sql.BigInt(3), sql.OpDelete}},
		{`{"before":{"user_id":"u1","n":2},"after":{"user_id":"u1","n":4},"op":"u","source":{"db":"x"},"ts_ms":1}`,
			sql.Row{sql.Varchar("u1"), sql.BigInt(4), sql.Null}},
		{`{"op":"r","after":{"user_id":"u2"}}`, sql.Row{sql.Varchar("u2"), sql.Null, sql.Null}},
		// Debezium's envelope with its schema.
		{`{"schema":{"type":"struct"},"payload":{"before":{"user_id":"u3","n":1},"after":null,"op":"d"}}`,
			sql.Row{sql.Varchar("u3"), sql.BigInt(1), sql.OpDelete}},
	} {
		got, err := f.Decode([]byte(c.in), nil)
		if err != nil || !sameRow(got, c.want) {
			t.Errorf("decode %s: got %v %v, want %v", c.in, got, err, c.want)
		}
	}
	for in, reason := range map[string]string{
		`{"before":null,"after":null,"op":"c"}`: `missing or null`,
		`{"after":{"user_id":"u"}}`:             `missing`,
		`{"after":{"user_id":"u"},"op":"x"}`:    `not a change`,
		`{"after":{"user_id":1},"op":"c"}`:      `in "after"`,
		`{"after":{"user_id":"u"},"op":"c"} x`:  `unexpected data`,
		`[1]`:                                   `not a JSON object`,
		`{"after":{"user_id":"u"},"op":7}`:      `expected a string`,
	} {
		_, err := f.Decode([]byte(in), nil)
		var de *DecodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), reason) {
			t.Errorf("decode %s: got %v, want a DecodeError saying %q", in, err, reason)
		}
	}
	// An append-only stream: every record is a "c"; a delete cannot be read.
	s := mustFormat(t, "debezium-json", changelogSchema[:2])
	got, _ := s.Encode(nil, sql.Row{sql.Varchar("u"), sql.BigInt(1)})
	if string(got) != `{"before":null,"after":{"user_id":"u","n":1},"op":"c"}` {
		t.Fatalf("append-only: %s", got)
	}
	if _, err := s.Decode(del, nil); err == nil || !strings.Contains(err.Error(), "TABLE") {
		t.Fatalf("delete into a stream: %v", err)
	}
}

func FuzzDecodeDebeziumJSON(f *testing.F) {
	for _, s := range []string{
		`{"before":null,"after":{"b":true,"i":-7,"big":9223372036854775807,"d":2.5,"dec":12.345,"s":"héllo","ts":1700000000123,"j":{"a":[1,2]}},"op":"c"}`,
		`{"before":{"s":"x\u00e9","ts":"2026-11-30T05:00:10.5+01:00"},"after":null,"op":"d","source":{"x":[1]}}`,
		`{"schema":null,"payload":{"after":{"dec":"-0.005"},"op":"u"}}`,
		`{"payload":{"payload":{"op":"c","after":{}}}}`,
		`{"op":"r","after":{"i":01}}`, `{}`, `[]`, `{"op":"\u0064","before":{}}`,
	} {
		f.Add([]byte(s))
	}
	format := mustFormat(f, "debezium-json", append(append(sql.Schema{}, allTypes...), changelogSchema[2]))
	f.Fuzz(func(t *testing.T, data []byte) {
		row, err := format.Decode(data, nil)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error is not a *DecodeError: %v", err)
			}
			return
		}
		roundTrip(t, format, row, data)
	})
}
