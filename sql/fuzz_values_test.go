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
	for _, s := range []string{"42", "-1.5", "1e400", "true", "2026-11-30T05:00:00Z", "2026-11-30 05:00:00.123", `{"a":1}`, "99999999999999999999", ".", "-",
		"NaN", "-Infinity", " 3.5 ", "1e3", "0.000000000000000000001", "123456789012345678901234567890.123456789", "+.5", "5.", "1e-16383", "1e131073",
		"10000-01-01 00:00:00", "0005-02-29 00:00:00 BC", "294277-01-01 00:00:00", "0000-01-01 BC"} {
		f.Add(s)
	}
	types := []Type{TypeBool, TypeInt, TypeBigInt, TypeDouble, {Kind: KindDecimal, Precision: 10, Scale: 2},
		{Kind: KindDecimal, Precision: 18, Scale: 0}, TypeNumeric, {Kind: KindDecimal, Precision: 40, Scale: 20}, TypeVarchar, TypeTimestamp, TypeJSON}
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
				if typ.Kind == KindDecimal {
					checkNumericRoundTrip(t, v)
				}
			}
		}
	})
}

// checkNumericRoundTrip checks that a NUMERIC value is canonical (small when it fits),
// that its text parses back to an equal value, and that the codec and the key encoding
// round-trip it.
func checkNumericRoundTrip(t *testing.T, v Value) {
	t.Helper()
	if v.S != "" && !numericSpecial(v) {
		if _, _, ok := parseSmallDecimalText(v.S); ok {
			t.Fatalf("%q is held as text but fits 64 bits", v.S)
		}
	}
	text := Text(v)
	back, ok := NumericFromString(text)
	if !ok || NumericCompare(back, v) != 0 || Text(back) != text {
		t.Fatalf("NUMERIC %q does not read back (%v %q)", text, ok, Text(back))
	}
	enc := AppendValue(nil, v)
	dec, n, err := DecodeValue(enc)
	if err != nil || n != len(enc) || !Equal(dec, v) || Text(dec) != text {
		t.Fatalf("NUMERIC %q: codec round trip gave %q (%v)", text, Text(dec), err)
	}
	if string(AppendKey(nil, v)) != string(AppendKey(nil, back)) || HashValue(HashSeed, v) != HashValue(HashSeed, back) {
		t.Fatalf("NUMERIC %q: key or hash differs after a round trip", text)
	}
}

// parseSmallDecimalText reports whether s would fit the small representation.
func parseSmallDecimalText(s string) (int64, uint8, bool) {
	v, ok := NumericFromString(s)
	return v.I, v.Scale, ok && v.S == ""
}

// FuzzNumeric feeds arbitrary text to NUMERIC input and arbitrary bytes to the DECIMAL
// codec: no panic; a parsed value round-trips through text, codec and key; arithmetic on it
// yields a NUMERIC or an error value, never a panic.
func FuzzNumeric(f *testing.F) {
	for _, s := range []string{"0", "-0.00", "1.5", "99999999999999999999.5", "1e-20", "NaN", "Infinity", "12345678901234567890123456789012345678901234567890"} {
		f.Add(s, AppendValue(nil, mustNumeric(s)))
	}
	f.Fuzz(func(t *testing.T, s string, enc []byte) {
		if v, ok := NumericFromString(s); ok {
			checkNumericRoundTrip(t, v)
			for _, op := range []func(a, b Value) Value{NumericAdd, NumericSub, NumericMul, NumericDiv, NumericMod} {
				r := op(v, Decimal(15, 1))
				if r.K != KindDecimal && !r.IsError() {
					t.Fatalf("arithmetic on %q gave %s", s, r.K)
				}
			}
			NumericRound(v, -2, false)
			NumericRound(v, 3, true)
		}
		if v, _, err := DecodeValue(append([]byte{byte(KindDecimal)}, enc...)); err == nil && v.K == KindDecimal {
			checkNumericRoundTrip(t, v)
		}
	})
}

func mustNumeric(s string) Value {
	v, ok := NumericFromString(s)
	if !ok {
		panic(s)
	}
	return v
}

// FuzzTimestampText: every timestamp in PostgreSQL's range prints as PostgreSQL's text
// (AppendTimestampText: wide years, BC) and that text reads back to the same instant.
func FuzzTimestampText(f *testing.F) {
	for _, ms := range []int64{0, -1, 1796119204250, minTimestampMs, maxTimestampMs, -62135596800000 - 1, 253402300800000} {
		f.Add(ms)
	}
	f.Fuzz(func(t *testing.T, ms int64) {
		if ms < minTimestampMs || ms > maxTimestampMs {
			ms = minTimestampMs + int64(uint64(ms)%uint64(maxTimestampMs-minTimestampMs+1))
		}
		text := string(AppendTimestampText(nil, ms))
		back, ok := ParseTimestamp(text)
		if !ok || back != ms {
			t.Fatalf("%d prints as %q, which reads back as %d (%v)", ms, text, back, ok)
		}
	})
}
