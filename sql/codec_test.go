package sql

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func codecSample() Row {
	return Row{
		Null, Bool(true), Bool(false), Int(-7), BigInt(math.MaxInt64), BigInt(math.MinInt64),
		Double(3.25), Double(math.Inf(-1)), Decimal(-12345, 2), Varchar(""), Varchar("héllo"),
		Timestamp(1796014800000), JSONValue(`{"a":1}`), Interval(10000),
	}
}

func TestCodecRoundTrip(t *testing.T) {
	row := codecSample()
	for _, v := range row {
		b := AppendValue(nil, v)
		got, n, err := DecodeValue(b)
		if err != nil || n != len(b) || got != v {
			t.Fatalf("value %v: got %v n=%d/%d err=%v", v, got, n, len(b), err)
		}
	}
	b := AppendRow([]byte("prefix"), row)
	got, n, err := DecodeRow(b[6:], nil)
	if err != nil || n != len(b)-6 {
		t.Fatalf("row: n=%d err=%v", n, err)
	}
	if len(got) != len(row) {
		t.Fatalf("row length %d, want %d", len(got), len(row))
	}
	for i := range row {
		if got[i] != row[i] {
			t.Fatalf("column %d: %v, want %v", i, got[i], row[i])
		}
	}
}

func TestCodecDeterministic(t *testing.T) {
	a := AppendRow(nil, Row{Varchar("u1"), BigInt(5)})
	b := AppendRow(nil, Row{Varchar("u1"), BigInt(5)})
	c := AppendRow(nil, Row{Varchar("u1"), Int(5)})
	if !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Fatalf("encodings: %x %x %x", a, b, c)
	}
}

func TestCodecErrors(t *testing.T) {
	good := AppendRow(nil, codecSample())
	for i := 0; i < len(good); i++ {
		if _, _, err := DecodeRow(good[:i], nil); err == nil {
			t.Fatalf("truncation at %d decoded without error", i)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncation at %d: error %v does not wrap ErrCorrupt", i, err)
		}
	}
	for _, b := range [][]byte{{200}, {byte(KindBool), 7}, {byte(KindDecimal), 99, 2}, {byte(KindVarchar), 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, _, err := DecodeValue(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%x: err %v", b, err)
		}
	}
}

func FuzzDecodeRow(f *testing.F) {
	f.Add(AppendRow(nil, codecSample()))
	f.Add(AppendRow(nil, Row{Varchar("k"), Timestamp(0)}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		row, n, err := DecodeRow(b, nil)
		sameColumns(t, b, row, n, err)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("used %d of %d bytes", n, len(b))
		}
		again := AppendRow(nil, row)
		row2, _, err := DecodeRow(again, nil)
		if err != nil {
			t.Fatalf("re-encoded row does not decode: %v", err)
		}
		if len(row2) != len(row) {
			t.Fatalf("length changed")
		}
		for i := range row {
			same := row2[i] == row[i] || (row[i].K == KindDouble && math.IsNaN(row[i].F()) && math.IsNaN(row2[i].F()))
			if !same {
				t.Fatalf("column %d changed: %v vs %v", i, row[i], row2[i])
			}
		}
	})
}

// sameColumns checks DecodeRowColumn against what DecodeRow made of b (row, n, err): the
// same failure, or for every column (and one past the last) the same value, width and
// length.
func sameColumns(t *testing.T, b []byte, row Row, n int, err error) {
	t.Helper()
	for col := -1; col <= len(row); col++ {
		v, width, m, cerr := DecodeRowColumn(b, col)
		if (cerr != nil) != (err != nil) {
			t.Fatalf("column %d: DecodeRowColumn error %v, DecodeRow error %v", col, cerr, err)
		}
		if err != nil {
			if !errors.Is(cerr, ErrCorrupt) {
				t.Fatalf("column %d: error %v does not wrap ErrCorrupt", col, cerr)
			}
			return
		}
		want := Null
		if col >= 0 && col < len(row) {
			want = row[col]
		}
		same := v == want || (v.K == KindDouble && math.IsNaN(v.F()) && math.IsNaN(want.F()))
		if !same || width != len(row) || m != n {
			t.Fatalf("column %d: %v, width %d, %d bytes; DecodeRow: %v, width %d, %d bytes", col, v, width, m, want, len(row), n)
		}
	}
}

func TestDecodeRowColumn(t *testing.T) {
	row := codecSample()
	b := AppendRow(nil, row)
	b = append(b, 7, 7) // what follows the row is not read
	sameColumns(t, b, row, len(b)-2, nil)
	for cut := range len(b) - 2 {
		r, n, err := DecodeRow(b[:cut], nil)
		sameColumns(t, b[:cut], r, n, err)
	}
}
