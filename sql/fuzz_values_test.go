package sql

import (
	"encoding/json"
	"testing"
)

// FuzzJSONExtract feeds arbitrary documents and paths to the JSON field access used on
// record payloads: no panic, and on valid JSON the extracted text is itself valid JSON.
func FuzzJSONExtract(f *testing.F) {
	f.Add(`{"a": {"b": [10, "x"]}, "s": "q\"uote"}`, "$.a.b[1]")
	f.Add(`[1, {"k": [true, null]}]`, "$[1].k[0]")
	f.Add(`{"a b": {"c": 1}}`, `$."a b".c`)
	f.Add(`{"a": "unterminated`, "$.a")
	f.Add(`{{{{`, "$[0]")
	f.Fuzz(func(t *testing.T, doc, path string) {
		steps, err := parseJSONPath(path)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Code == "" {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		out, ok := jsonExtract(doc, steps)
		if ok && json.Valid([]byte(doc)) && !json.Valid([]byte(out)) {
			t.Fatalf("extracted %q from valid %q is not JSON", out, doc)
		}
		jsonUnquote(out)
	})
}

// FuzzCastValue casts arbitrary text to every type: no panic, errors are *Error, and a
// successful cast yields a value of the target kind.
func FuzzCastValue(f *testing.F) {
	for _, s := range []string{"42", "-1.5", "1e400", "true", "2026-11-30T05:00:00Z", "2026-11-30 05:00:00.123", `{"a":1}`, "99999999999999999999", ".", "-"} {
		f.Add(s)
	}
	types := []Type{TypeBool, TypeInt, TypeBigInt, TypeDouble, {Kind: KindDecimal, Precision: 10, Scale: 2},
		{Kind: KindDecimal, Precision: 18, Scale: 0}, TypeVarchar, TypeTimestamp, TypeJSON}
	f.Fuzz(func(t *testing.T, s string) {
		for _, typ := range types {
			for _, in := range []Value{Varchar(s), JSONValue(s)} {
				v, err := CastValue(in, typ)
				if err != nil {
					if _, ok := err.(*Error); !ok {
						t.Fatalf("error is %T", err)
					}
					continue
				}
				if v.K != typ.Kind {
					t.Fatalf("CAST(%q AS %s) gave kind %s", s, typ, v.K)
				}
			}
		}
	})
}
