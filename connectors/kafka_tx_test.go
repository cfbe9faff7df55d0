package connectors

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestKafkaTxInterleaved: transactions written as a job writes them — each epoch's
// prepared while the previous one commits, over the same partitions — are all read back
// read_committed, every record once.
func TestKafkaTxInterleaved(t *testing.T) {
	cfg := startKafka(t, 4, "st")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sink, err := OpenKafkaSink(ctx, cfg, "st")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	w, _ := sink.Transactional(ctx, "g", nil)
	const run = "00000000000000aa"
	total := 0
	for tag := 1; tag <= 30; tag++ {
		var msgs []Message
		for i := 0; i < 50; i++ {
			msgs = append(msgs, Message{Key: []byte("k" + strconv.Itoa(i%13)), Body: []byte(fmt.Sprintf("%d-%d", tag, i))})
		}
		if err := w.Prepare(ctx, run+"/"+strconv.Itoa(tag), msgs); err != nil {
			t.Fatal(err)
		}
		total += 50
		if tag > 1 {
			if err := w.End(ctx, run+"/"+strconv.Itoa(tag-1), true); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.End(ctx, run+"/30", true)
	src, _ := OpenKafkaSource(ctx, cfg, "st")
	defer src.Close()
	n := 0
	for p := 0; p < 4; p++ {
		end, _ := kafkaListOffset(ctx, src.admin, "st", int32(p), -1)
		r, _ := src.Open(ctx, strconv.Itoa(p), 0)
		var got []Message
		for {
			k := len(got)
			if got, err = r.Read(ctx, got, 1000); err != nil {
				t.Fatal(err)
			}
			if len(got) == k {
				break // idle: everything committed was read
			}
		}
		if int64(len(got)) > end {
			t.Fatalf("partition %d: read %d records, more than its end offset %d", p, len(got), end)
		}
		n += len(got)
		r.Close()
	}
	if n != total {
		t.Fatalf("read %d of %d", n, total)
	}
}
