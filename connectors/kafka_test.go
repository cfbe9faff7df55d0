package connectors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"rsql/sql"
)

// startKafka starts an in-process fake Kafka cluster on loopback with topics of
// partitions partitions.
func startKafka(t *testing.T, partitions int32, topics ...string) KafkaConfig {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return KafkaConfig{Brokers: c.ListenAddrs(), Group: "test", TxTimeout: time.Minute, Wait: 200 * time.Millisecond, Partitions: int(partitions)}
}

// readN reads split from offset until n messages came, then checks that one more Read
// returns none and no error within its wait (the partition is idle).
func readN(t *testing.T, src Source, split string, offset int64, n, max int) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := src.Open(ctx, split, offset)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []Message
	for len(out) < n {
		k := len(out)
		if out, err = r.Read(ctx, out, max); err != nil {
			t.Fatalf("partition %s: %v", split, err)
		}
		if len(out)-k > max {
			t.Fatalf("partition %s: one read returned %d messages, more than %d", split, len(out)-k, max)
		}
		for _, m := range out[k:] {
			if m.Split != split {
				t.Fatalf("partition %s: message at offset %d says it is of split %q", split, m.Offset, m.Split)
			}
		}
	}
	if len(out) != n {
		t.Fatalf("partition %s: read %d messages, want %d", split, len(out), n)
	}
	more, err := r.Read(ctx, nil, max)
	if err != nil || len(more) != 0 {
		t.Fatalf("partition %s after its last record: %d messages, %v; want none and no error", split, len(more), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("partition %s: an idle read did not return within its wait", split)
	}
	return out
}

func TestKafkaConformance(t *testing.T) {
	const parts = 4
	cfg := startKafka(t, parts, "conf")
	ctx := context.Background()
	sink, err := OpenKafkaSink(ctx, cfg, "conf")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	src, err := OpenKafkaSource(ctx, cfg, "conf")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	splits, err := src.Splits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(splits, ",") != "0,1,2,3" {
		t.Fatalf("splits = %v, want the 4 partitions", splits)
	}
	if src.Bounded() {
		t.Fatal("a topic source must be unbounded")
	}

	// Keyed writes in two Write calls; a key's records stay in order in one partition.
	var batch []Message
	for i := 0; i < 300; i++ {
		key := "user-" + strconv.Itoa(i%37)
		batch = append(batch, Message{Key: []byte(key), Body: []byte(fmt.Sprintf(`{"user":%q,"seq":%d}`, key, i)), ID: "id-" + strconv.Itoa(i)})
		if i == 149 || i == 299 {
			if err := sink.Write(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ends := make([]int64, parts)
	total := int64(0)
	for p := range ends {
		if ends[p], err = kafkaListOffset(ctx, src.admin, "conf", int32(p), -1); err != nil {
			t.Fatal(err)
		}
		total += ends[p]
	}
	if total != 300 {
		t.Fatalf("the partitions hold %d records, want 300", total)
	}
	partOf := map[string]int{}
	lastSeq := map[string]int{}
	full := make([][]Message, parts)
	for p := 0; p < parts; p++ {
		got := readN(t, src, strconv.Itoa(p), 0, int(ends[p]), 16)
		full[p] = got
		for i, m := range got {
			if m.Offset != int64(i) {
				t.Fatalf("partition %d: message %d has offset %d", p, i, m.Offset)
			}
			if m.Timestamp <= 0 {
				t.Fatalf("partition %d offset %d: no timestamp", p, i)
			}
			key := string(m.Key)
			var seq int
			if _, err := fmt.Sscanf(string(m.Body), `{"user":"`+key+`","seq":%d}`, &seq); err != nil {
				t.Fatalf("partition %d offset %d: key %q body %s: %v", p, i, key, m.Body, err)
			}
			if m.ID != "id-"+strconv.Itoa(seq) {
				t.Fatalf("partition %d offset %d: id %q, want id-%d", p, i, m.ID, seq)
			}
			if q, ok := partOf[key]; ok && q != p {
				t.Fatalf("key %s in partitions %d and %d", key, q, p)
			}
			if prev, ok := lastSeq[key]; ok && prev >= seq {
				t.Fatalf("key %s: seq %d after %d", key, seq, prev)
			}
			partOf[key], lastSeq[key] = p, seq
		}
	}

	// Reading from an offset gives exactly the tail of the full read.
	from := int64(len(full[0]) / 3)
	tail := readN(t, src, "0", from, len(full[0])-int(from), 7)
	if !sameMessages(tail, full[0][from:]) {
		t.Fatalf("read from offset %d differs from the full read's tail", from)
	}

	// Lag is what the partition holds beyond what was read.
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r, err := src.Open(rctx, "1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var part []Message
	for len(part) == 0 {
		if part, err = r.Read(rctx, nil, 5); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := r.(interface{ Lag() int64 }).Lag(), int64(len(full[1])-len(part)); got != want {
		t.Fatalf("lag after reading %d of %d = %d, want %d", len(part), len(full[1]), got, want)
	}
	r.Close()

	// An idle partition's Read returns nothing, then picks up a record written later.
	r, err = src.Open(rctx, "2", int64(len(full[2])))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Read(rctx, nil, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("read of an idle partition: %d messages, %v; want none and no error", len(got), err)
	}
	late := &kgo.Record{Topic: "conf", Partition: 2, Value: []byte(`{"late":true}`)}
	pc, err := cfg.newClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.ProduceSync(ctx, late).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for len(got) == 0 && rctx.Err() == nil {
		if got, err = r.Read(rctx, got, 10); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1 || string(got[0].Body) != `{"late":true}` || got[0].Offset != int64(len(full[2])) {
		t.Fatalf("after the late write: got %+v", got)
	}

	// Errors name the topic and the partition.
	if _, err := src.Open(ctx, "9", 0); err == nil || !strings.Contains(err.Error(), "conf") || !strings.Contains(err.Error(), `"9"`) {
		t.Fatalf("opening partition 9: %v; want an error naming the topic and partition 9", err)
	}
	if _, err := src.Open(ctx, "x", 0); err == nil || !strings.Contains(err.Error(), "conf") {
		t.Fatalf("opening split x: %v; want an error naming the topic", err)
	}
	if _, err := src.Open(ctx, "3", ends[3]+100); err == nil || !strings.Contains(err.Error(), "partition 3") || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("opening beyond the end: %v; want an out-of-range error naming partition 3", err)
	}
}

// TestKafkaBadRecordsReachTheFormat: records that are no row (not JSON, a null value) are
// handed over like any other, so the job reports them (bad-record handling) instead of
// their going missing in the connector.
func TestKafkaBadRecordsReachTheFormat(t *testing.T) {
	cfg := startKafka(t, 1, "bad")
	ctx := context.Background()
	pc, err := cfg.newClient(kgo.DefaultProduceTopic("bad"))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	recs := []*kgo.Record{{Value: []byte(`{"a":1}`)}, {Value: []byte(`not json`)}, {Key: []byte("k"), Value: nil}, {Value: []byte(`{"a":2}`)}}
	if err := pc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src, err := OpenKafkaSource(ctx, cfg, "bad")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got := readN(t, src, "0", 0, 4, 10)
	f, err := NewFormat("json", sql.Schema{{Name: "a", Type: sql.Type{Kind: sql.KindBigInt}}})
	if err != nil {
		t.Fatal(err)
	}
	var bad []int64
	for _, m := range got {
		if _, err := f.Decode(m.Body, nil); err != nil {
			bad = append(bad, m.Offset)
		}
	}
	if fmt.Sprint(bad) != "[1 2]" || string(got[2].Key) != "k" {
		t.Fatalf("records that do not decode: offsets %v (want [1 2]); record 2 key %q", bad, got[2].Key)
	}
}

// TestKafkaOffsetReset: offset_reset = 'latest' starts a partition read from offset 0 at
// its end; the default reads it from its start.
func TestKafkaOffsetReset(t *testing.T) {
	cfg := startKafka(t, 1, "reset")
	ctx := context.Background()
	sink, err := OpenKafkaSink(ctx, cfg, "reset")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := sink.Write(ctx, []Message{{Body: []byte("old")}}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	src, err := OpenKafkaSource(ctx, cfg, "reset")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if got := readN(t, src, "0", 0, 1, 10); string(got[0].Body) != "old" {
		t.Fatalf("earliest: read %q", got[0].Body)
	}
	cfg.Latest = true
	lsrc, err := OpenKafkaSource(ctx, cfg, "reset")
	if err != nil {
		t.Fatal(err)
	}
	defer lsrc.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r, err := lsrc.Open(rctx, "0", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The first reads position the reader at the end; then a new record arrives.
	for i := 0; i < 3; i++ {
		if got, err := r.Read(rctx, nil, 10); err != nil || len(got) != 0 {
			t.Fatalf("latest: read %d messages, %v before anything new was written", len(got), err)
		}
	}
	if err := sink.Write(ctx, []Message{{Body: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got []Message
	for len(got) == 0 && rctx.Err() == nil {
		if got, err = r.Read(rctx, got, 10); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1 || string(got[0].Body) != "new" || got[0].Offset != 1 {
		t.Fatalf("latest: got %+v, want the new record at offset 1", got)
	}
}

// TestKafkaOptions: the kafka connector's options are checked when a stream is declared.
func TestKafkaOptions(t *testing.T) {
	ok := map[string]string{"connector": "kafka", "brokers": "h1:9092, h2:9092", "topic": "t", "offset_reset": "latest",
		"sasl_mechanism": "scram-sha-512", "sasl_username": "u", "sasl_password": "secret", "delivery": "transactional"}
	o, err := ParseStreamOptions(ok)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseKafkaConfig(o)
	if err != nil || len(c.Brokers) != 2 || c.Brokers[1] != "h2:9092" || !c.Latest || o.Delivery != DeliveryTransactional {
		t.Fatalf("parsed %+v, %v", c, err)
	}
	for _, tc := range []struct {
		opts map[string]string
		want string
	}{
		{map[string]string{"connector": "kafka", "topic": "t"}, "needs a brokers option"},
		{map[string]string{"connector": "kafka", "brokers": "h:1", "bootstrap": "x"}, `unknown option "bootstrap"`},
		{map[string]string{"connector": "kafka", "brokers": "h:1", "offset_reset": "newest"}, "offset_reset"},
		{map[string]string{"connector": "kafka", "brokers": "h:1", "sasl_mechanism": "gssapi"}, "sasl_mechanism"},
		{map[string]string{"connector": "kafka", "brokers": "h:1", "sasl_mechanism": "plain"}, "sasl_username"},
		{map[string]string{"connector": "kafka", "brokers": "h:1", "tls": "maybe"}, "tls"},
		{map[string]string{"connector": "kafka", "brokers": "h:1", "transaction_timeout": "2h"}, "transaction_timeout"},
		{map[string]string{"connector": "kafka", "brokers": "h:1", "format": "avro"}, "unknown format"},
		{map[string]string{"connector": "kafka", "brokers": "h:1", "topic": "a/b"}, "not a Kafka topic name"},
	} {
		_, err := ParseStreamOptions(tc.opts)
		var oe *OptionError
		if err == nil || !errors.As(err, &oe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("options %v: %v; want an option error about %s", tc.opts, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("options %v: the error shows the password: %v", tc.opts, err)
		}
	}
}

// TestKafkaTxWriter: a transaction's records are invisible to readers until it commits, an
// aborted one never shows, a writer started after a crash commits a recorded transaction
// (twice is harmless), and an epoch's transaction left open by a dead run is aborted when
// the next run writes that epoch.
func TestKafkaTxWriter(t *testing.T) {
	cfg := startKafka(t, 2, "tx")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink, err := OpenKafkaSink(ctx, cfg, "tx")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	w, err := sink.Transactional(ctx, "rsql-tx-job-1-0", nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := OpenKafkaSource(ctx, cfg, "tx")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	readers := map[string]SplitReader{}
	for _, p := range []string{"0", "1"} {
		r, err := src.Open(ctx, p, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		readers[p] = r
	}
	// visible reads both partitions until they are idle, returning the bodies read.
	visible := func() []string {
		var out []string
		for _, r := range readers {
			for {
				got, err := r.Read(ctx, nil, 100)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) == 0 {
					break
				}
				for _, m := range got {
					out = append(out, string(m.Body))
				}
			}
		}
		sortStrings(out)
		return out
	}
	msgs := func(prefix string, n int) []Message {
		var out []Message
		for i := 0; i < n; i++ {
			out = append(out, Message{Key: []byte(strconv.Itoa(i)), Body: []byte(prefix + strconv.Itoa(i))})
		}
		return out
	}
	const run = "00000000000000aa"
	if err := w.Prepare(ctx, run+"/1", msgs("a", 3)); err != nil {
		t.Fatal(err)
	}
	if err := w.Prepare(ctx, run+"/2", msgs("b", 2)); err != nil {
		t.Fatal(err)
	}
	if got := visible(); len(got) != 0 {
		t.Fatalf("prepared records visible before any commit: %v", got)
	}
	if w.Record(run+"/1") == nil || w.Record(run+"/9") != nil {
		t.Fatal("Record: want a record of a transaction with records only")
	}
	if err := w.End(ctx, run+"/1", true); err != nil {
		t.Fatal(err)
	}
	if err := w.End(ctx, run+"/2", false); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(visible(), ","); got != "a0,a1,a2" {
		t.Fatalf("after commit of 1 and abort of 2: %s", got)
	}

	// A crash after the checkpoint recorded transaction 3: the next writer commits it.
	if err := w.Prepare(ctx, run+"/3", msgs("c", 2)); err != nil {
		t.Fatal(err)
	}
	rec := w.Record(run + "/3")
	// ... and transactions 4 and 5 were being written, never recorded.
	if err := w.Prepare(ctx, run+"/4", msgs("d", 2)); err != nil {
		t.Fatal(err)
	}
	if err := w.Prepare(ctx, run+"/5", msgs("f", 2)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	sink2, err := OpenKafkaSink(ctx, cfg, "tx")
	if err != nil {
		t.Fatal(err)
	}
	defer sink2.Close()
	w2, err := sink2.Transactional(ctx, "rsql-tx-job-1-0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	for i := 0; i < 2; i++ {
		if err := w2.EndRecord(ctx, rec, true); err != nil {
			t.Fatalf("EndRecord #%d: %v", i+1, err)
		}
	}
	// The next run writes epoch 4 again: the dead run's transaction 4 is aborted, and its
	// transaction 5, which would hold back readers of its partitions until Kafka's
	// transaction timeout, as well.
	const run2 = "00000000000000bb"
	if err := w2.Prepare(ctx, run2+"/4", msgs("e", 2)); err != nil {
		t.Fatal(err)
	}
	if err := w2.End(ctx, run2+"/4", true); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(visible(), ","); got != "c0,c1,e0,e1" {
		t.Fatalf("after recovery: %s, want c0,c1,e0,e1", got)
	}
	if err := w2.EndRecord(ctx, []byte("Bxx"), true); !errors.Is(err, ErrBadTxRecord) {
		t.Fatalf("EndRecord of a record of another kind: %v", err)
	}

	// A snapshot (a pull query's read) ends each partition at its end as of the snapshot,
	// past the transaction markers and aborted records before it, with every committed
	// record.
	snap, err := OpenKafkaSource(ctx, cfg, "tx")
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if snap.Bounded() {
		t.Fatal("a source is bounded before Snapshot")
	}
	if err := snap.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if !snap.Bounded() {
		t.Fatal("a source is not bounded after Snapshot")
	}
	var all []string
	for _, p := range []string{"0", "1"} {
		r, err := snap.Open(ctx, p, 0)
		if err != nil {
			t.Fatal(err)
		}
		for {
			got, err := r.Read(ctx, nil, 100)
			for _, m := range got {
				all = append(all, string(m.Body))
			}
			if errors.Is(err, ErrEndOfSplit) {
				break
			}
			if err != nil {
				t.Fatalf("partition %s: %v", p, err)
			}
		}
		r.Close()
	}
	sortStrings(all)
	if got := strings.Join(all, ","); got != "a0,a1,a2,c0,c1,e0,e1" {
		t.Fatalf("snapshot: %s, want a0,a1,a2,c0,c1,e0,e1", got)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func FuzzDecodeKafkaTxRecord(f *testing.F) {
	f.Add(encodeKafkaTxRecord("rsql.t.rsql-tx-job-1-0.7", 12, 3))
	f.Add([]byte("K"))
	f.Add([]byte{'K', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, rec []byte) {
		id, pid, epoch, err := decodeKafkaTxRecord(rec)
		if err != nil {
			if !errors.Is(err, ErrBadTxRecord) {
				t.Fatalf("error %v does not wrap ErrBadTxRecord", err)
			}
			return
		}
		id2, pid2, epoch2, err := decodeKafkaTxRecord(encodeKafkaTxRecord(id, pid, epoch))
		if err != nil || id2 != id || pid2 != pid || epoch2 != epoch {
			t.Fatalf("%x: decoded %q %d %d, re-encoded and decoded %q %d %d, %v", rec, id, pid, epoch, id2, pid2, epoch2, err)
		}
	})
}

// TestKafkaSASL: a cluster that requires SASL is read and written with SCRAM and PLAIN
// credentials; a wrong password is an error that does not show it.
func TestKafkaSASL(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "sec"), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "rsql", "s3cret"), kfake.Superuser("PLAIN", "plainuser", "p1ain"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := KafkaConfig{Brokers: c.ListenAddrs(), Group: "test", TxTimeout: time.Minute, Wait: 200 * time.Millisecond}
	scramCfg, plainCfg := base, base
	scramCfg.SASLMech, scramCfg.SASLUser, scramCfg.SASLPass = "scram-sha-256", "rsql", "s3cret"
	plainCfg.SASLMech, plainCfg.SASLUser, plainCfg.SASLPass = "plain", "plainuser", "p1ain"
	sink, err := OpenKafkaSink(ctx, scramCfg, "sec")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := sink.Write(ctx, []Message{{Body: []byte(`{"a":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	src, err := OpenKafkaSource(ctx, plainCfg, "sec")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if got := readN(t, src, "0", 0, 1, 10); string(got[0].Body) != `{"a":1}` {
		t.Fatalf("read %q", got[0].Body)
	}
	bad := scramCfg
	bad.SASLPass = "wrong-password"
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
	defer bcancel()
	if s, err := OpenKafkaSource(bctx, bad, "sec"); err == nil {
		s.Close()
		t.Fatal("a wrong password opened the topic")
	} else if strings.Contains(err.Error(), "wrong-password") {
		t.Fatalf("the error shows the password: %v", err)
	} else {
		t.Logf("wrong password: %v", err)
	}
}
