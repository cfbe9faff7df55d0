package connectors

// The debezium-json format: each record is a Debezium change event,
// {"before": {...} | null, "after": {...} | null, "op": "c" | "r" | "u" | "d"}, optionally
// inside Debezium's {"schema": ..., "payload": {...}} envelope (docs/sql.md, "Changelogs").

import (
	"errors"
	"fmt"

	"rsql/sql"
)

type debeziumFormat struct {
	schema sql.Schema
	op     int         // the change column (changeColumn), or -1
	inner  *jsonFormat // the row's other columns, as "before" and "after" hold them
}

func newDebeziumFormat(schema sql.Schema) *debeziumFormat {
	f := &debeziumFormat{schema: schema, op: changeColumn(schema)}
	data := schema
	if f.op >= 0 {
		data = schema[:f.op]
	}
	f.inner = newJSONFormat(data)
	return f
}

// Encode writes an insert (the change column NULL, or no change column: an append-only
// query's rows) as {"before":null,"after":row,"op":"c"} and a delete (sql.IsDelete) as
// {"before":row,"after":null,"op":"d"}. An update is written as "c" with "before" null: a
// key's new row replaces the one before, as Debezium's upsert consumers read it; the row it
// replaces is not known where changes are folded by key (docs/sql.md, "Changelogs").
func (f *debeziumFormat) Encode(dst []byte, row sql.Row) ([]byte, error) {
	if len(row) != len(f.schema) {
		return dst, fmt.Errorf("debezium-json: row has %d values, schema has %d columns", len(row), len(f.schema))
	}
	data, del := row, false
	if f.op >= 0 {
		data, del = row[:f.op], sql.IsDelete(row[f.op])
	}
	var err error
	if del {
		dst = append(dst, `{"before":`...)
		if dst, err = f.inner.Encode(dst, data); err != nil {
			return dst, err
		}
		return append(dst, `,"after":null,"op":"d"}`...), nil
	}
	dst = append(dst, `{"before":null,"after":`...)
	if dst, err = f.inner.Encode(dst, data); err != nil {
		return dst, err
	}
	return append(dst, `,"op":"c"}`...), nil
}

// Decode reads a change event: "c", "r" and "u" give the "after" row (the change column,
// if any, NULL), "d" the "before" row with the change column "delete". A delete needs a
// change column (a TABLE): an append-only stream has no way to take a row back.
func (f *debeziumFormat) Decode(body []byte, row sql.Row) (sql.Row, error) {
	before, after, op, err := f.envelope(body, 0)
	if err != nil {
		return row, err
	}
	var change sql.Value
	raw, side := after, "after"
	switch op {
	case "c", "r", "u":
	case "d":
		if f.op < 0 {
			return row, &DecodeError{Field: "op", Reason: `a delete ("d") where no row can be taken back: read deletes into a TABLE (its hidden __op column)`}
		}
		raw, side, change = before, "before", sql.OpDelete
	case "":
		return row, &DecodeError{Field: "op", Reason: "missing: not a Debezium change event"}
	default:
		return row, &DecodeError{Field: "op", Reason: fmt.Sprintf("%q is not a change (c, r, u or d)", op)}
	}
	if raw == nil {
		return row, &DecodeError{Field: side, Reason: fmt.Sprintf("missing or null in an event of op %q", op)}
	}
	out, err := f.inner.Decode(raw, row)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			return out, &DecodeError{Field: de.Field, Reason: "in \"" + side + "\": " + de.Reason}
		}
		return out, err
	}
	if f.op >= 0 {
		out = append(out, change)
	}
	return out, nil
}

// envelope finds the "before", "after" (nil when absent or null) and "op" of the event
// object body, looking inside "payload" when the object has no "op" of its own.
func (f *debeziumFormat) envelope(body []byte, depth int) (before, after []byte, op string, err error) {
	var payload []byte
	p := skipWS(body, 0)
	if p >= len(body) || body[p] != '{' {
		return nil, nil, "", &DecodeError{Reason: "record is not a JSON object"}
	}
	p = skipWS(body, p+1)
	if p < len(body) && body[p] == '}' {
		p++
	} else {
		for {
			if p >= len(body) || body[p] != '"' {
				return nil, nil, "", malformed("expected a field name at byte %d", p+1)
			}
			k, next, kerr := f.inner.readString(body, p)
			if kerr != nil {
				return nil, nil, "", malformed("field name at byte %d: %s", p+1, kerr.Error())
			}
			key := string(k)
			p = skipWS(body, next)
			if p >= len(body) || body[p] != ':' {
				return nil, nil, "", malformed("expected ':' after field name %q at byte %d", key, p+1)
			}
			p = skipWS(body, p+1)
			start := p
			end, verr := skipJSONValue(body, p)
			if verr != nil {
				return nil, nil, "", malformed("field %q: %s", key, verr.Error())
			}
			v := body[start:end]
			if string(v) == "null" {
				v = nil
			}
			switch key {
			case "before":
				before = v
			case "after":
				after = v
			case "payload":
				payload = v
			case "op":
				if v != nil {
					if v[0] != '"' {
						return nil, nil, "", &DecodeError{Field: "op", Reason: "expected a string"}
					}
					s, _, serr := f.inner.readString(v, 0)
					if serr != nil {
						return nil, nil, "", &DecodeError{Field: "op", Reason: serr.Error()}
					}
					op = string(s)
					if op == "" {
						return nil, nil, "", &DecodeError{Field: "op", Reason: "empty"}
					}
				}
			}
			p = skipWS(body, end)
			if p < len(body) && body[p] == ',' {
				p = skipWS(body, p+1)
				continue
			}
			if p < len(body) && body[p] == '}' {
				p++
				break
			}
			return nil, nil, "", malformed("expected ',' or '}' at byte %d", p+1)
		}
	}
	if p = skipWS(body, p); p != len(body) {
		return nil, nil, "", malformed("unexpected data after the object at byte %d", p+1)
	}
	if op == "" && payload != nil && depth == 0 {
		return f.envelope(payload, 1)
	}
	return before, after, op, nil
}
