package main

import (
	"bufio"
	"bytes"
	"testing"
)

func TestRecordTable(t *testing.T) {
	var tbl recordTable
	tbl.add([]byte(`{"user":"u1","n":3,"tags":["a"]}`))
	tbl.add([]byte(`{"n":null,"extra":true,"user":"ü2"}`))
	tbl.add([]byte(`not json`))
	tbl.add([]byte(`{"n":-10.5,"user":"u3","extra":7}`))
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	tbl.print(w)
	w.Flush()
	// Numbers right-align in a column of numbers and nulls (n), as psql's do.
	want := "" +
		" user | n     | tags  | extra | value   \n" +
		"------+-------+-------+-------+----------\n" +
		" u1   |     3 | [\"a\"] |       |         \n" +
		" ü2   |       |       | true  |         \n" +
		"      |       |       |       | not json\n" +
		" u3   | -10.5 |       | 7     |         \n" +
		"(4 rows)\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

// FuzzObjectFields: any record body is either an object's fields or "not an object", never
// a panic; an object's fields re-add without loss of their count.
func FuzzObjectFields(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":"x"}`, `{}`, `[1,2]`, `{"a":{"b":[null]}}`, `{"a":1`, `"s"`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fields, ok := objectFields(body)
		if !ok && fields != nil {
			t.Fatalf("not an object but fields %v", fields)
		}
		var tbl recordTable
		tbl.add(body)
		if len(tbl.rows) != 1 {
			t.Fatalf("%d rows for one record", len(tbl.rows))
		}
	})
}
