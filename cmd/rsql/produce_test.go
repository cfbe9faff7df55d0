package main

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// --rate paces batches, not single records: a high rate sends full batches spaced so the
// average is the rate (one round trip per record capped it at a few thousand per second); a
// low rate sends record by record.
func TestProducePacing(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		batch int
	}{{1, 1}, {10, 1}, {1000, 21}, {10000, 201}, {100000, 256}, {1e9, 256}} {
		p := &pacer{rate: c.rate}
		if got := p.batch(256); got != c.batch {
			t.Errorf("rate %v: batches of %d, want %d", c.rate, got, c.batch)
		}
		// The batch starting at record n goes n/rate seconds after the start: after N
		// records, N/rate seconds have passed, whatever the batch size.
		for _, n := range []int64{0, 1, 256, 100000} {
			if got, want := p.due(n), time.Duration(float64(n)/c.rate*1e9); got != want {
				t.Errorf("rate %v: record %d due at %v, want %v", c.rate, n, got, want)
			}
		}
	}
	var none *pacer
	if none.batch(256) != 256 {
		t.Error("without --rate batches are not full")
	}
}

// Lines are read whole up to the record limit; a longer one is named, with its size, and
// reading stops there.
func TestProduceRecordLimit(t *testing.T) {
	long := strings.Repeat("x", maxRecordBytes+1)
	edge := strings.Repeat("y", maxRecordBytes)
	in := "{\"a\":1}\r\n\n" + edge + "\n{\"a\":2}\n" + long + "\n{\"a\":3}\n"
	rr := &recordReader{br: bufio.NewReaderSize(strings.NewReader(in), 64<<10), format: "json"}
	var got []int
	for {
		body, _, err := rr.next()
		if err == io.EOF {
			t.Fatal("the over-long line was not reported")
		}
		var tl *errRecordTooLong
		if errors.As(err, &tl) {
			if tl.line != 5 || tl.size != maxRecordBytes+1 {
				t.Fatalf("reported line %d of %d bytes, want line 5 of %d", tl.line, tl.size, maxRecordBytes+1)
			}
			if !strings.Contains(err.Error(), "line 5") {
				t.Errorf("message %q does not name the line", err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, len(body))
	}
	if len(got) != 3 || got[0] != 7 || got[1] != maxRecordBytes || got[2] != 7 {
		t.Fatalf("records before the long line: sizes %v, want [7 %d 7]", got, maxRecordBytes)
	}
}

// The record reader never panics on any input, in either format, with or without a key;
// every record it returns is one non-empty line of the input without its line end.
func FuzzProduceRecords(f *testing.F) {
	f.Add([]byte("{\"id\":1,\"user\":\"u1\"}\n{\"id\":2,\"user\":\"u2\"}\n"))
	f.Add([]byte("a,1\r\n\n\"b,c\",2\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, c := range []struct{ format, key string }{{"json", ""}, {"json", "user"}, {"csv", "2"}} {
			rr := &recordReader{br: bufio.NewReaderSize(strings.NewReader(string(in)), 16), format: c.format, key: c.key}
			if c.format == "csv" {
				rr.col = 2
			}
			for i := 0; ; i++ {
				body, _, err := rr.next()
				if err != nil {
					break
				}
				if len(body) == 0 || strings.ContainsAny(string(body), "\n") {
					t.Fatalf("record %q", body)
				}
				if i > len(in) {
					t.Fatal("more records than bytes")
				}
			}
		}
	})
}
