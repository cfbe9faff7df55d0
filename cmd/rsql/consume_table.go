package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
)

// recordTable collects consumed records for `rsql consume --format table`: a JSON object's
// fields become columns in the order first seen; any other body goes to a "value" column.
type recordTable struct {
	cols  []string
	index map[string]int
	rows  []map[string]string
	// text: the column holds a value that is not a JSON number (numbers right-align, as
	// psql's do, in a column of numbers and nulls only).
	text map[string]bool
}

func (t *recordTable) col(name string) {
	if t.index == nil {
		t.index = map[string]int{}
	}
	if _, ok := t.index[name]; !ok {
		t.index[name] = len(t.cols)
		t.cols = append(t.cols, name)
	}
}

func (t *recordTable) add(body []byte) {
	row, ok := objectFields(body)
	if t.text == nil {
		t.text = map[string]bool{}
	}
	if !ok {
		t.col("value")
		t.text["value"] = true
		t.rows = append(t.rows, map[string]string{"value": string(body)})
		return
	}
	for _, f := range row {
		t.col(f.name)
	}
	m := make(map[string]string, len(row))
	for _, f := range row {
		m[f.name] = f.text
		if !f.number && f.text != "" {
			t.text[f.name] = true
		}
	}
	t.rows = append(t.rows, m)
}

// field is one field of a record: its name, its text and whether it is a JSON number.
type field struct {
	name, text string
	number     bool
}

// objectFields reads a JSON object's fields in order: strings unquoted, null empty, other
// values as their JSON text.
func objectFields(body []byte) ([]field, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		val := string(raw)
		var s string
		number := false
		switch {
		case val == "null":
			val = ""
		case json.Unmarshal(raw, &s) == nil:
			val = s
		default:
			c := val[0]
			number = c == '-' || c >= '0' && c <= '9'
		}
		out = append(out, field{name: key, text: val, number: number})
	}
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	return out, true
}

func (t *recordTable) print(w *bufio.Writer) {
	if len(t.cols) == 0 {
		fmt.Fprintln(w, "(0 rows)")
		return
	}
	texts := make([][]string, len(t.rows))
	for i, r := range t.rows {
		texts[i] = make([]string, len(t.cols))
		for j, c := range t.cols {
			texts[i][j] = r[c]
		}
	}
	tw := newTextTable(w, t.cols, texts, func(i int) bool { return !t.text[t.cols[i]] })
	tw.header()
	for _, r := range texts {
		tw.line(r, tw.right)
	}
	if len(t.rows) == 1 {
		fmt.Fprintln(w, "(1 row)")
	} else {
		fmt.Fprintf(w, "(%d rows)\n", len(t.rows))
	}
}
