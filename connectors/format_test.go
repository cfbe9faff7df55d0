package connectors

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"rsql/sql"
)

// allTypes is a schema with every storable type.
var allTypes = sql.Schema{
	{Name: "b", Type: sql.TypeBool},
	{Name: "i", Type: sql.TypeInt},
	{Name: "big", Type: sql.TypeBigInt},
	{Name: "d", Type: sql.TypeDouble},
	{Name: "dec", Type: sql.Type{Kind: sql.KindDecimal, Precision: 10, Scale: 2}},
	{Name: "s", Type: sql.TypeVarchar},
	{Name: "ts", Type: sql.TypeTimestamp},
	{Name: "j", Type: sql.TypeJSON},
}

func mustFormat(t testing.TB, name string, schema sql.Schema) Format {
	t.Helper()
	f, err := NewFormat(name, schema)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func tsOf(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

func sameValue(a, b sql.Value) bool {
	if a.K != b.K {
		return false
	}
	switch a.K {
	case sql.KindDouble:
		return a.F() == b.F() && math.Signbit(a.F()) == math.Signbit(b.F()) || math.IsNaN(a.F()) && math.IsNaN(b.F())
	case sql.KindVarchar, sql.KindJSON:
		return a.S == b.S
	case sql.KindDecimal:
		return a.I == b.I && a.Scale == b.Scale
	case sql.KindNull:
		return true
	}
	return a.I == b.I
}

func sameRow(a, b sql.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestNewFormat(t *testing.T) {
	if _, err := NewFormat("avro", allTypes); err == nil || !strings.Contains(err.Error(), "avro") {
		t.Fatalf("unknown format: got %v", err)
	}
	if _, err := NewFormat("json", sql.Schema{{Name: "x", Type: sql.TypeInterval}}); err == nil {
		t.Fatal("INTERVAL column accepted")
	}
	for _, n := range []string{"json", "JSON", "csv", "Csv"} {
		if _, err := NewFormat(n, allTypes); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	f := mustFormat(t, "json", allTypes)
	cases := []struct {
		in   string
		want sql.Row
	}{
		{`{"b":true,"i":-7,"big":9223372036854775807,"d":2.5,"dec":12.345,"s":"héllo","ts":1700000000123,"j":{"a":[1,2]}}`,
			sql.Row{sql.Bool(true), sql.Int(-7), sql.BigInt(math.MaxInt64), sql.Double(2.5), sql.Decimal(1235, 2), sql.Varchar("héllo"), sql.Timestamp(1700000000123), sql.JSONValue(`{"a":[1,2]}`)}},
		// keys case-insensitive, any order, extra fields ignored, missing ones NULL
		{` { "S" : "x" , "extra": {"deep": [1, {"k": "v"}]}, "TS": "2026-11-30T05:00:10.5Z", "B": false } `,
			sql.Row{sql.Bool(false), sql.Null, sql.Null, sql.Null, sql.Null, sql.Varchar("x"), sql.Timestamp(tsOf("2026-11-30T05:00:10.5Z")), sql.Null}},
		{`{}`, sql.Row{sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null}},
		{`{"i":null,"s":null,"j":null}`, sql.Row{sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null}},
		// escapes, surrogate pairs, json scalars kept as raw text
		{`{"s":"a\"b\\c\/\n\u00e9\ud83d\ude00","j":"str","d":1e3,"dec":"-0.005"}`,
			sql.Row{sql.Null, sql.Null, sql.Null, sql.Double(1000), sql.Decimal(-1, 2), sql.Varchar("a\"b\\c/\né😀"), sql.Null, sql.JSONValue(`"str"`)}},
		// time zones and other accepted timestamp texts
		{`{"ts":"2026-11-30T06:00:10.000+01:00","i":2147483647,"big":-9223372036854775808,"dec":99999999.99}`,
			sql.Row{sql.Null, sql.Int(math.MaxInt32), sql.BigInt(math.MinInt64), sql.Null, sql.Decimal(9999999999, 2), sql.Null, sql.Timestamp(tsOf("2026-11-30T05:00:10Z")), sql.Null}},
		{`{"ts":"2026-11-30 05:00:10","dec":1.5e1}`,
			sql.Row{sql.Null, sql.Null, sql.Null, sql.Null, sql.Decimal(1500, 2), sql.Null, sql.Timestamp(tsOf("2026-11-30T05:00:10Z")), sql.Null}},
		{`{"ts":"2026-11-30"}`,
			sql.Row{sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Timestamp(tsOf("2026-11-30T00:00:00Z")), sql.Null}},
		{`{"ts":-1}`,
			sql.Row{sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Timestamp(-1), sql.Null}},
		// duplicate keys: the last wins
		{`{"i":1,"i":2}`, sql.Row{sql.Null, sql.Int(2), sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null}},
	}
	var row sql.Row
	for _, c := range cases {
		var err error
		row, err = f.Decode([]byte(c.in), row)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if !sameRow(row, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.in, row, c.want)
		}
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	f := mustFormat(t, "json", allTypes)
	cases := []struct {
		in, field, reason string
	}{
		{`{"i":"7"}`, "i", "expected INT, got a string"},
		{`{"i":2147483648}`, "i", "out of range for INT"},
		{`{"i":1.5}`, "i", "non-integer"},
		{`{"big":9223372036854775808}`, "big", "out of range for BIGINT"},
		{`{"b":1}`, "b", "expected BOOLEAN, got a number"},
		{`{"s":5}`, "s", "expected VARCHAR, got a number"},
		{`{"s":{"x":1}}`, "s", "expected VARCHAR, got an object"},
		{`{"d":"1.5"}`, "d", "expected DOUBLE, got a string"},
		{`{"d":1e999}`, "d", "out of range for DOUBLE"},
		{`{"dec":123456789.5}`, "dec", "out of range for DECIMAL(10,2)"},
		{`{"dec":"abc"}`, "dec", "invalid DECIMAL"},
		{`{"dec":true}`, "dec", "expected DECIMAL(10,2), got a boolean"},
		{`{"ts":"yesterday"}`, "ts", "invalid timestamp"},
		{`{"ts":"2026-02-30T00:00:00Z"}`, "ts", "invalid timestamp"},
		{`{"ts":true}`, "ts", "expected TIMESTAMP"},
		{`{"ts":1.5}`, "ts", "epoch milliseconds"},
		{`{"j":[1,2}`, "j", "invalid nested JSON"},
		{`{"s":"a\qb"}`, "s", "invalid escape"},
		{`{"b":tru}`, "b", "invalid literal"},
		{`{"i":-}`, "i", "invalid"},
		{`{"i":01}`, "", "expected ',' or '}'"},
		{`[1,2]`, "", "not a JSON object"},
		{``, "", "empty record"},
		{`{"i":1`, "", "unexpected end"},
		{`{"i":1}x`, "", "unexpected data after"},
		{`{"i" 1}`, "", "expected ':'"},
		{`{i:1}`, "", "expected a field name"},
		{`{"x":[1,}`, "", "field \"x\""},
		{"{\"s\":\"a\nb\"}", "s", "control character"},
		{`{"s":"abc`, "s", "unterminated string"},
	}
	for _, c := range cases {
		_, err := f.Decode([]byte(c.in), nil)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: got %v, want a *DecodeError", c.in, err)
			continue
		}
		if de.Field != c.field || !strings.Contains(de.Reason, c.reason) {
			t.Errorf("%s: got field %q reason %q, want field %q reason containing %q", c.in, de.Field, de.Reason, c.field, c.reason)
		}
	}
}

func TestDecodeReusesRow(t *testing.T) {
	f := mustFormat(t, "json", allTypes)
	row := make(sql.Row, 0, 16)
	out, err := f.Decode([]byte(`{"i":1}`), row)
	if err != nil {
		t.Fatal(err)
	}
	if &out[:1][0] != &row[:1][0] {
		t.Fatal("Decode did not reuse the row's storage")
	}
	if len(out) != len(allTypes) {
		t.Fatalf("len %d", len(out))
	}
}

func TestEncodeJSON(t *testing.T) {
	f := mustFormat(t, "json", allTypes)
	row := sql.Row{sql.Bool(true), sql.Int(-3), sql.BigInt(1 << 40), sql.Double(0.1), sql.Decimal(-5, 2), sql.Varchar("q\"\\\n\x01<é"), sql.Timestamp(tsOf("2026-11-30T05:00:10Z")), sql.JSONValue(`{"a": 1}`)}
	got, err := f.Encode([]byte("prefix:"), row)
	if err != nil {
		t.Fatal(err)
	}
	want := `prefix:{"b":true,"i":-3,"big":1099511627776,"d":0.1,"dec":-0.05,"s":"q\"\\\n\u0001<é","ts":"2026-11-30T05:00:10.000Z","j":{"a": 1}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	nulls := make(sql.Row, len(allTypes))
	got, _ = f.Encode(nil, nulls)
	if string(got) != `{"b":null,"i":null,"big":null,"d":null,"dec":null,"s":null,"ts":null,"j":null}` {
		t.Fatalf("nulls: %s", got)
	}
	for _, d := range []float64{1e21, 1e-7, 123456789, -0.5, 5e-324} {
		got, _ = f.Encode(nil, sql.Row{sql.Null, sql.Null, sql.Null, sql.Double(d), sql.Null, sql.Null, sql.Null, sql.Null})
		back, err := f.Decode(got, nil)
		if err != nil || back[3].F() != d {
			t.Fatalf("double %v: encoded %s, decoded %v, %v", d, got, back, err)
		}
	}
	if _, err := f.Encode(nil, sql.Row{sql.Null, sql.Null, sql.Null, sql.Double(math.NaN()), sql.Null, sql.Null, sql.Null, sql.Null}); err == nil {
		t.Fatal("NaN encoded as JSON")
	}
	if _, err := f.Encode(nil, sql.Row{sql.Null}); err == nil {
		t.Fatal("short row encoded")
	}
	if _, err := f.Encode(nil, sql.Row{sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.JSONValue("{")}); err == nil {
		t.Fatal("invalid JSON value encoded")
	}
}

func TestAppendTimestampMatchesFormatTimestamp(t *testing.T) {
	for _, ms := range []int64{0, -1, 1, 999, -999, -1000, 1700000000123, minTimestampMs, maxTimestampMs, 951782400000 /* 2000-02-29 */, -2208988800001} {
		if got, want := string(appendTimestamp(nil, ms)), sql.FormatTimestamp(ms); got != want {
			t.Errorf("%d: got %s want %s", ms, got, want)
		}
		back, ok := parseTimestampText(appendTimestamp(nil, ms))
		if !ok || back != ms {
			t.Errorf("%d: parsed back as %d %v", ms, back, ok)
		}
	}
	// A sweep of days checks the calendar arithmetic against package time.
	for ms := int64(-62135596800000); ms < maxTimestampMs; ms += 86400000*37 + 3600*1000 + 17 {
		if got, want := string(appendTimestamp(nil, ms)), sql.FormatTimestamp(ms); got != want {
			t.Fatalf("%d: got %s want %s", ms, got, want)
		}
	}
}

func TestParseDecimal(t *testing.T) {
	d := func(p, s uint8) sql.Type { return sql.Type{Kind: sql.KindDecimal, Precision: p, Scale: s} }
	cases := []struct {
		in   string
		t    sql.Type
		want int64
		bad  bool
	}{
		{"0", d(5, 2), 0, false},
		{"1.005", d(5, 2), 101, false},
		{"-1.005", d(5, 2), -101, false},
		{"1.004", d(5, 2), 100, false},
		{"999.99", d(5, 2), 99999, false},
		{"999.995", d(5, 2), 0, true},
		{"1000", d(5, 2), 0, true},
		{"0.0001", d(5, 2), 0, false},
		{"12e-1", d(5, 2), 120, false},
		{".5", d(5, 2), 50, false},
		{"5.", d(5, 2), 500, false},
		{"00012.30", d(5, 2), 1230, false},
		{"92233720368547758.07", d(0, 2), math.MaxInt64, false},
		{"92233720368547758.08", d(0, 2), 0, true},
		{"1e30", d(0, 0), 0, true},
		{"1..2", d(5, 2), 0, true},
		{"-", d(5, 2), 0, true},
		{"1e", d(5, 2), 0, true},
		{"1x", d(5, 2), 0, true},
		{"0.000000000000000000000000000000000000000000000000001", d(0, 2), 0, false},
		{"123456789012345678901234567890123456789012345e-30", d(0, 2), 12345678901234568, false},
	}
	for _, c := range cases {
		got, reason := parseDecimalText([]byte(c.in), c.t)
		if c.bad != (reason != "") || got != c.want {
			t.Errorf("%s as %s: got %d %q, want %d bad=%v", c.in, c.t, got, reason, c.want, c.bad)
		}
	}
}

func TestCSV(t *testing.T) {
	f := mustFormat(t, "csv", allTypes)
	cases := []struct {
		in   string
		want sql.Row
	}{
		{`true,-7,12,2.5,1.10,hello,2026-11-30T05:00:10Z,"{""a"":1}"`,
			sql.Row{sql.Bool(true), sql.Int(-7), sql.BigInt(12), sql.Double(2.5), sql.Decimal(110, 2), sql.Varchar("hello"), sql.Timestamp(tsOf("2026-11-30T05:00:10Z")), sql.JSONValue(`{"a":1}`)}},
		{",,,,,,,", sql.Row{sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Null}},
		{`f, 5 ,,,,"",1700000000000,[1]` + "\r\n",
			sql.Row{sql.Bool(false), sql.Int(5), sql.Null, sql.Null, sql.Null, sql.Varchar(""), sql.Timestamp(1700000000000), sql.JSONValue("[1]")}},
		{`,,,,,"a,""b""` + "\nc\",,",
			sql.Row{sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Varchar("a,\"b\"\nc"), sql.Null, sql.Null}},
		{`,,,,, spaced ,,`,
			sql.Row{sql.Null, sql.Null, sql.Null, sql.Null, sql.Null, sql.Varchar(" spaced "), sql.Null, sql.Null}},
	}
	for _, c := range cases {
		row, err := f.Decode([]byte(c.in), nil)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if !sameRow(row, c.want) {
			t.Errorf("%q:\n got %v\nwant %v", c.in, row, c.want)
		}
	}
	bad := []struct{ in, field, reason string }{
		{`x,,,,,,,`, "b", "invalid BOOLEAN"},
		{`,3000000000,,,,,,`, "i", "out of range for INT"},
		{`,,,abc,,,,`, "d", "invalid DOUBLE"},
		{`,,,,1.2.3,,,`, "dec", "invalid DECIMAL"},
		{`,,,,,,soon,`, "ts", "invalid timestamp"},
		{`,,,,,,,{x`, "j", "invalid JSON"},
		{`,"",,,,,,`, "i", "empty value"},
		{`,,,,,"abc,,`, "s", "unterminated"},
		{`,,,,,"a"b,,`, "s", "after a closing quote"},
		{`,,,,,a"b,,`, "s", "quote inside an unquoted field"},
		{`,,,`, "", "expected 8 fields, got 4"},
		{`,,,,,,,,`, "", "more than 8 fields"},
	}
	for _, c := range bad {
		_, err := f.Decode([]byte(c.in), nil)
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != c.field || !strings.Contains(de.Reason, c.reason) {
			t.Errorf("%q: got %v, want field %q reason containing %q", c.in, err, c.field, c.reason)
		}
	}
	row := sql.Row{sql.Bool(false), sql.Int(1), sql.Null, sql.Double(1e-9), sql.Decimal(12345, 2), sql.Varchar(`say "hi", ok`), sql.Timestamp(0), sql.JSONValue(`{"k":[1,2]}`)}
	got, err := f.Encode(nil, row)
	if err != nil {
		t.Fatal(err)
	}
	if want := `false,1,,1e-9,123.45,"say ""hi"", ok",1970-01-01T00:00:00.000Z,"{""k"":[1,2]}"`; string(got) != want {
		t.Fatalf("encode: got %s want %s", got, want)
	}
	back, err := f.Decode(got, nil)
	if err != nil || !sameRow(back, row) {
		t.Fatalf("round trip: %v %v", back, err)
	}
	got, _ = f.Encode(nil, sql.Row{sql.Null, sql.Null, sql.Null, sql.Double(math.Inf(-1)), sql.Null, sql.Varchar(""), sql.Null, sql.Null})
	if string(got) != `,,,-Inf,,"",,` {
		t.Fatalf("encode: %s", got)
	}
}

// roundTrip checks that a decoded row encodes and decodes back to itself.
func roundTrip(t *testing.T, f Format, row sql.Row, input []byte) {
	enc, err := f.Encode(nil, row)
	if err != nil {
		if strings.Contains(err.Error(), "no JSON number") {
			return
		}
		t.Fatalf("encode of decoded %q: %v", input, err)
	}
	back, err := f.Decode(enc, nil)
	if err != nil {
		t.Fatalf("decode of %q (from %q): %v", enc, input, err)
	}
	if !sameRow(row, back) {
		t.Fatalf("round trip of %q via %q:\n got %v\nwant %v", input, enc, back, row)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"b":true,"i":-7,"big":9223372036854775807,"d":2.5,"dec":12.345,"s":"héllo","ts":1700000000123,"j":{"a":[1,2]}}`,
		`{"S":"x\u00e9\ud83d\ude00","extra":{"deep":[1,{"k":"v"}]},"TS":"2026-11-30T05:00:10.5+01:00"}`,
		`{"dec":"-0.005","d":1e-7,"j":"str","ts":"2026-11-30"}`,
		`{}`, `[]`, `{"i":01}`, `{"s":"\xff"}`,
	} {
		f.Add([]byte(s))
	}
	format := mustFormat(f, "json", allTypes)
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

func FuzzDecodeCSV(f *testing.F) {
	for _, s := range []string{
		`true,-7,12,2.5,1.10,hello,2026-11-30T05:00:10Z,"{""a"":1}"`,
		`,,,,,,,`,
		`f, 5 ,,NaN,,"",1700000000000,[1]`,
		`,,,,,"a,""b""` + "\nc\",,",
		`1,2,3,4,5,6,7,8`,
	} {
		f.Add([]byte(s))
	}
	format := mustFormat(f, "csv", allTypes)
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

var benchSchema = sql.Schema{
	{Name: "order_id", Type: sql.TypeBigInt},
	{Name: "user_id", Type: sql.TypeVarchar},
	{Name: "amount", Type: sql.TypeDouble},
	{Name: "ts", Type: sql.TypeTimestamp},
	{Name: "status", Type: sql.TypeVarchar},
	{Name: "qty", Type: sql.TypeInt},
}

func benchRecords() [][]byte {
	var out [][]byte
	f := mustFormat(&testing.B{}, "json", benchSchema)
	for i := 0; i < 1024; i++ {
		row := sql.Row{sql.BigInt(int64(1e9 + i)), sql.Varchar("u" + string(rune('a'+i%26)) + "1234"), sql.Double(float64(i%1000) + 0.25),
			sql.Timestamp(1764478800000 + int64(i)*37), sql.Varchar("paid"), sql.Int(int64(i % 7))}
		b, _ := f.Encode(nil, row)
		if i%2 == 0 { // half the records carry the time as epoch milliseconds

			b = []byte(strings.Replace(string(b), `"ts":"`+sql.FormatTimestamp(1764478800000+int64(i)*37)+`"`, `"ts":1764478800000`, 1))
		}
		out = append(out, b)
	}
	return out
}

func BenchmarkDecodeJSON(b *testing.B) {
	f := mustFormat(b, "json", benchSchema)
	recs := benchRecords()
	var bytes int64
	for _, r := range recs {
		bytes += int64(len(r))
	}
	row := make(sql.Row, len(benchSchema))
	b.ReportAllocs()
	b.SetBytes(bytes / int64(len(recs)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		row, err = f.Decode(recs[i%len(recs)], row)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkEncodeJSON(b *testing.B) {
	f := mustFormat(b, "json", benchSchema)
	row := sql.Row{sql.BigInt(1e9), sql.Varchar("u1234"), sql.Double(12.25), sql.Timestamp(1764478800000), sql.Varchar("paid"), sql.Int(3)}
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf, _ = f.Encode(buf[:0], row)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkDecodeCSV(b *testing.B) {
	f := mustFormat(b, "csv", benchSchema)
	rec := []byte(`1000000007,ub1234,7.25,2026-11-30T05:00:00.259Z,paid,0`)
	row := make(sql.Row, len(benchSchema))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var err error
		row, err = f.Decode(rec, row)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// specialByte8 finds a special byte at any position of the word, and only then.
func TestSpecialByte8(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	for pos := 0; pos < 8; pos++ {
		for _, fill := range []byte{'a', ' ', '~', '!', '#', '[', ']'} {
			for c := 0; c < 256; c++ {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(c)
				if got := specialByte8(binary.LittleEndian.Uint64(b[:])); got != special(byte(c)) {
					t.Fatalf("byte %#x at %d among %q: special = %v", c, pos, fill, got)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200000; n++ {
		var b [8]byte
		want := false
		for i := range b {
			b[i] = byte(r.IntN(256))
			want = want || special(b[i])
		}
		if got := specialByte8(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("%q: special = %v", b, got)
		}
	}
}
