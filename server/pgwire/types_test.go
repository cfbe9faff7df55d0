package pgwire

import (
	"bytes"
	"math"
	"testing"

	"rsql/sql"
)

func TestPGFloatText(t *testing.T) {
	cases := map[float64]string{
		0: "0", 1: "1", -2.5: "-2.5", 0.1: "0.1", 1e14: "100000000000000", 1e15: "1e+15",
		123456789012345: "123456789012345", 0.0001: "0.0001", 0.00001: "1e-05",
		math.Inf(1): "Infinity", math.Inf(-1): "-Infinity", 1.0 / 3: "0.3333333333333333",
	}
	for f, want := range cases {
		if got := string(sql.AppendFloat8(nil, f)); got != want {
			t.Errorf("%v: got %q want %q", f, got, want)
		}
	}
	if got := string(sql.AppendFloat8(nil, math.NaN())); got != "NaN" {
		t.Errorf("NaN: %q", got)
	}
}

func TestPGTimestampAndIntervalText(t *testing.T) {
	if got := string(appendTimestampText(nil, pgTSValue.UnixMilli())); got != "2026-11-30 05:00:10.123" {
		t.Errorf("timestamp: %q", got)
	}
	if got := string(appendTimestampText(nil, -1)); got != "1969-12-31 23:59:59.999" {
		t.Errorf("timestamp -1: %q", got)
	}
	for ms, want := range map[int64]string{
		10000: "00:00:10", 90061001: "1 day 01:01:01.001", -1500: "-00:00:01.500", 2 * 86400000: "2 days 00:00:00",
	} {
		if got := string(appendIntervalText(nil, ms)); got != want {
			t.Errorf("interval %d: %q want %q", ms, got, want)
		}
	}
}

func TestPGNumericBinary(t *testing.T) {
	// Hand-encoded: ndigits, weight, sign, dscale, base-10000 digits.
	cases := []struct {
		u     int64
		scale uint8
		want  []uint16
	}{
		{0, 2, []uint16{0, 0, 0, 2}},
		{12345, 2, []uint16{2, 0, 0, 2, 123, 4500}},         // 123.45
		{-5, 2, []uint16{1, 0xFFFF, 0x4000, 2, 500}},        // -0.05
		{100000000, 0, []uint16{1, 2, 0, 0, 1}},             // 1 0000 0000
		{123456789, 4, []uint16{3, 1, 0, 4, 1, 2345, 6789}}, // 1|2345 . 6789
		{1, 18, []uint16{1, 0xFFFB, 0, 18, 100}},            // 1e-18: weight -5, digit 0100
	}
	for _, c := range cases {
		var want []byte
		for _, w := range c.want {
			want = append(want, byte(w>>8), byte(w))
		}
		got := appendNumericBinary(nil, c.u, c.scale)
		if !bytes.Equal(got, want) {
			t.Errorf("%d scale %d: got % x want % x", c.u, c.scale, got, want)
		}
		back, err := decodeNumericBinary(got)
		if err != nil || back.I != c.u || back.Scale != c.scale {
			t.Errorf("%d scale %d: decoded %+v %v", c.u, c.scale, back, err)
		}
	}
	if _, err := decodeNumericBinary([]byte{0, 1, 0, 0, 0xC0, 0, 0, 0, 0, 1}); err == nil {
		t.Error("NaN numeric accepted")
	}
	if _, err := decodeNumericBinary([]byte{0, 1, 0, 9, 0, 0, 0, 0, 0, 1}); err == nil {
		t.Error("1e36 accepted")
	}
}

func TestPGDecodeParams(t *testing.T) {
	cases := []struct {
		data   string
		oid    uint32
		format int16
		want   sql.Value
	}{
		{"42", oidInt8, 0, sql.BigInt(42)},
		{"-7", oidInt4, 0, sql.Int(-7)},
		{"t", oidBool, 0, sql.Bool(true)},
		{"2.5", oidFloat8, 0, sql.Double(2.5)},
		{"-12.340", oidNumeric, 0, sql.Decimal(-1234, 2)},
		{"2026-11-30 05:00:10.123+00", oidTimestampTZ, 0, sql.Timestamp(pgTSValue.UnixMilli())},
		{"2026-11-30 06:00:10.123+01:00", oidTimestampTZ, 0, sql.Timestamp(pgTSValue.UnixMilli())},
		{"2026-11-30T05:00:10Z", oidTimestamp, 0, sql.Timestamp(pgTSValue.UnixMilli() - 123)},
		{"hello", oidText, 0, sql.Varchar("hello")},
		{"hello", oidUnknown, 0, sql.Varchar("hello")},
		{`{"a":1}`, oidJSON, 0, sql.JSONValue(`{"a":1}`)},
		{"\x00\x00\x00\x00\x00\x00\x00\x2a", oidInt8, 1, sql.BigInt(42)},
		{"\xff\xff\xff\xfe", oidInt4, 1, sql.Int(-2)},
		{"\x00\x05", oidInt2, 1, sql.Int(5)},
		{"\x01", oidBool, 1, sql.Bool(true)},
		{"\x40\x04\x00\x00\x00\x00\x00\x00", oidFloat8, 1, sql.Double(2.5)},
		// 2026-11-30T05:00:10.123Z in µs since 2000-01-01
		{string(be64((pgTSValue.UnixMilli() - pgEpochMs) * 1000)), oidTimestamp, 1, sql.Timestamp(pgTSValue.UnixMilli())},
		{string(be64(-1)), oidTimestamp, 1, sql.Timestamp(pgEpochMs - 1)},
		{"\x01{}", oidJSONB, 1, sql.JSONValue("{}")},
	}
	for _, c := range cases {
		got, err := decodeParam([]byte(c.data), c.oid, c.format)
		if err != nil || got != c.want {
			t.Errorf("%q oid %d format %d: got %+v %v, want %+v", c.data, c.oid, c.format, got, err, c.want)
		}
	}
	bad := []struct {
		data   string
		oid    uint32
		format int16
	}{
		{"x", oidInt8, 0}, {"3000000000", oidInt4, 0}, {"maybe", oidBool, 0}, {"1.2.3", oidNumeric, 0},
		{"yesterday", oidTimestamp, 0}, {"\x00", oidInt8, 1}, {"\x00\x00", oidUnknown, 1}, {"abc", oidText, 2},
	}
	for _, c := range bad {
		if v, err := decodeParam([]byte(c.data), c.oid, c.format); err == nil {
			t.Errorf("%q oid %d format %d: accepted as %+v", c.data, c.oid, c.format, v)
		}
	}
	if v, err := decodeParam(nil, oidInt8, 1); err != nil || !v.IsNull() {
		t.Errorf("NULL: %+v %v", v, err)
	}
}

func be64(v int64) []byte {
	var b [8]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(uint64(v) >> (56 - 8*i))
	}
	return b[:]
}

func TestPGBinaryResults(t *testing.T) {
	cols := pgTypedCols
	row := pgTypedRows[0]
	formats := make([]int16, len(cols))
	for i := range formats {
		formats[i] = formatBinary
	}
	msg, err := appendDataRow(nil, row, cols, formats)
	if err != nil {
		t.Fatal(err)
	}
	// Walk the message: 'D', length, count, then (length, bytes) per column.
	if msg[0] != 'D' || int(msg[1])<<24|int(msg[2])<<16|int(msg[3])<<8|int(msg[4]) != len(msg)-1 {
		t.Fatalf("bad header % x", msg[:7])
	}
	p := 7
	var vals [][]byte
	for range cols {
		n := int(int32(uint32(msg[p])<<24 | uint32(msg[p+1])<<16 | uint32(msg[p+2])<<8 | uint32(msg[p+3])))
		p += 4
		vals = append(vals, msg[p:p+n])
		p += n
	}
	want := [][]byte{
		{1},
		{0xff, 0xff, 0xff, 0xd6},
		{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x40, 0x04, 0, 0, 0, 0, 0, 0},
		appendNumericBinary(nil, -12345, 2),
		[]byte("héllo, world"),
		be64((pgTSValue.UnixMilli() - pgEpochMs) * 1000),
		[]byte(`{"a":[1,2]}`),
	}
	for i := range want {
		if !bytes.Equal(vals[i], want[i]) {
			t.Errorf("%s: % x want % x", cols[i].Name, vals[i], want[i])
		}
	}
	// An INT column whose value does not fit int4 is an error, not a wrapped number.
	if _, err := appendDataRow(nil, sql.Row{sql.BigInt(1 << 40)}, sql.Schema{{Name: "x", Type: sql.TypeInt}}, []int16{1}); err == nil {
		t.Error("int4 overflow accepted")
	}
}

func TestPGScanText(t *testing.T) {
	cases := []struct {
		text         string
		params, stmt int
	}{
		{"", 0, 0},
		{" ; ;", 0, 0},
		{"select 1", 0, 1},
		{"select $1, $12 from t; select 2;", 12, 2},
		{"select '$3; x' -- $4 ;\n, \"a;$5\" /* $6 ; */", 0, 1},
		{"select 'it''s; $2', $1", 1, 1},
		{"select `a;b`", 0, 1},
	}
	for _, c := range cases {
		p, n := ScanText(c.text)
		if p != c.params || n != c.stmt {
			t.Errorf("%q: %d params %d statements, want %d %d", c.text, p, n, c.params, c.stmt)
		}
	}
}

func TestPGErrorPosition(t *testing.T) {
	text := "select x\nfrom é oops"
	cases := []struct {
		se   sql.Error
		want int
	}{
		{sql.Error{Pos: 17, Line: 2, Column: 8}, 17}, // 'o' of oops: 16 characters (17 bytes) before it
		{sql.Error{Pos: -1, Line: 2, Column: 8}, 17}, // by line and column: line 2 starts at character 10
		{sql.Error{Pos: -1}, 0},
		{sql.Error{Pos: 0, Line: 1, Column: 1}, 1},
	}
	for _, c := range cases {
		if got := ErrorPosition(&c.se, text); got != c.want {
			t.Errorf("%+v: %d want %d", c.se, got, c.want)
		}
	}
}

// NUMERIC values beyond 64 bits and NaN/Infinity have a binary form too.
func TestPGNumericBinaryText(t *testing.T) {
	cases := []struct {
		text string
		want []uint16
	}{
		{"123456789012345678901234.5", []uint16{7, 5, 0, 1, 1234, 5678, 9012, 3456, 7890, 1234, 5000}},
		{"-0.00000000000000000001", []uint16{1, 0xFFFB, 0x4000, 20, 1}},
		{"NaN", []uint16{0, 0, 0xC000, 0}},
		{"-Infinity", []uint16{0, 0, 0xF000, 0}},
	}
	for _, c := range cases {
		var want []byte
		for _, w := range c.want {
			want = append(want, byte(w>>8), byte(w))
		}
		if got := appendNumericText(nil, c.text); !bytes.Equal(got, want) {
			t.Errorf("%s: got % x want % x", c.text, got, want)
		}
	}
}
