package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Jobs over Kafka topics (docs/sql.md, "Kafka"), end to end: a fake Kafka cluster runs in
// the test process on loopback (franz-go's kfake), `rsql server` reads and writes it, and the
// test produces the input and consumes the output with franz-go, read_committed. The
// expected result is the batch result of jobs_e2e_test.go.

// startKafkaCluster starts a one-broker Kafka on 127.0.0.1 with topics orders and result of
// 4 partitions each, and returns its address.
func startKafkaCluster(t testing.TB) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "orders", "result"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// kafkaDDL is jobsDDL over Kafka: orders read from Kafka, result written to Kafka with
// sink options sinkOpts (or to the broker topic result when sinkOpts is "broker").
func kafkaDDL(addr, sinkOpts string) string {
	ddl := strings.Replace(jobsDDL, "WITH (topic = 'orders', queues = 4, idle_timeout = '1s')",
		fmt.Sprintf("WITH (connector = 'kafka', brokers = '%s', topic = 'orders', idle_timeout = '1s')", addr), 1)
	if sinkOpts != "broker" {
		ddl = strings.Replace(ddl, "CREATE STREAM result WITH (queues = 4)",
			fmt.Sprintf("CREATE STREAM result WITH (connector = 'kafka', brokers = '%s', topic = 'result'%s)", addr, sinkOpts), 1)
	}
	return ddl
}

func kafkaClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceKafka writes evs to orders, keyed by user, in order.
func produceKafka(t testing.TB, addr string, evs []event) {
	t.Helper()
	cl := kafkaClient(t, addr, kgo.DefaultProduceTopic("orders"))
	vals := lines(eventLines(evs))
	recs := make([]*kgo.Record, len(evs))
	for i, e := range evs {
		recs[i] = &kgo.Record{Key: []byte(e.UserID), Value: []byte(vals[i])}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// In sends of 100 records (2 s of event time), each acknowledged before the next: one
	// send of everything would reach a partition's later records before another's earlier
	// ones (franz-go batches per partition), and the job's watermark, which skips idle
	// partitions, would pass records not yet delivered.
	for len(recs) > 0 {
		n := min(100, len(recs))
		if err := cl.ProduceSync(ctx, recs[:n]...).FirstErr(); err != nil {
			t.Fatalf("produce to kafka: %v", err)
		}
		recs = recs[n:]
	}
}

// closeKafkaWindows writes records at lastEnd to every partition of orders (closeWindows),
// which has partitions.
func closeKafkaWindows(t testing.TB, addr string, lastEnd int64, partitions int) {
	t.Helper()
	cl := kafkaClient(t, addr, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := 0; i < 64; i++ {
		e := event{OrderID: int64(-1 - i), UserID: fmt.Sprintf("~close-%d", i), TsMs: lastEnd, Category: "none"}
		recs = append(recs, &kgo.Record{Partition: int32(i % partitions), Key: []byte(e.UserID), Value: []byte(lines(eventLines([]event{e}))[0])})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce to kafka: %v", err)
	}
}

// kafkaResult reads the whole result topic read_committed (until nothing came for 3 s) and
// renders its rows as consumedResult does.
func kafkaResult(t *testing.T, addr string) []string {
	t.Helper()
	cl := kafkaClient(t, addr, kgo.ConsumeTopics("result"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			got = append(got, resultRow(t, string(r.Value)))
		})
		if n == 0 {
			return got
		}
	}
}

// resultRow renders a row of the result stream as resultLine does.
func resultRow(t *testing.T, l string) string {
	var r struct {
		UserID      string      `json:"user_id"`
		WindowStart time.Time   `json:"window_start"`
		WindowEnd   time.Time   `json:"window_end"`
		N           json.Number `json:"n"`
		Total       float64     `json:"total"`
	}
	if err := json.Unmarshal([]byte(l), &r); err != nil {
		t.Fatalf("result message is not a row: %v: %s", err, l)
	}
	n, err := r.N.Int64()
	if err != nil {
		t.Fatalf("n is not an integer: %s", l)
	}
	return resultLine(r.UserID, r.WindowStart.UnixMilli(), r.WindowEnd.UnixMilli(), n, r.Total)
}

// ongoingTxns counts the transactions open in the cluster.
func ongoingTxns(cl *kgo.Client) (int, error) {
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Ongoing"}
	n := 0
	for _, sh := range cl.RequestSharded(context.Background(), req) {
		if sh.Err != nil {
			return 0, sh.Err
		}
		n += len(sh.Resp.(*kmsg.ListTransactionsResponse).TransactionStates)
	}
	return n, nil
}

// TestKafkaJobMatchesBatch: the tumbling job of jobs_e2e_test.go from a Kafka topic to a
// Kafka topic written in Kafka transactions: the result read_committed is exactly the batch
// result.
func TestKafkaJobMatchesBatch(t *testing.T) {
	addr := startKafkaCluster(t)
	evs := genEvents(71)
	want, lastEnd := batchResult(evs)
	s := newJobsServer(t)
	s.sql(kafkaDDL(addr, ", delivery = 'transactional'"))
	produceKafka(t, addr, evs)
	closeKafkaWindows(t, addr, lastEnd, 4)
	waitWatermark(t, s, lastEnd)
	compareMultisets(t, "kafka result topic", want, kafkaResult(t, addr))
	if t.Failed() {
		n, err := ongoingTxns(kafkaClient(t, addr))
		t.Logf("%d transactions open (%v); server stderr:\n%s", n, err, s.p.Stderr.String())
		time.Sleep(10 * time.Second)
		got := kafkaResult(t, addr)
		t.Logf("read again 10 s later: %d rows", len(got))
	}
	if err := s.p.Stop(); err != nil {
		t.Errorf("server stop: %v\n%s", err, s.p.Stderr.String())
	}
}

// TestKafkaTransactionalJobSurvivesKill9: the same job, the server killed with SIGKILL
// three times while a Kafka transaction of its output is open, restarted on the same data
// directory each time; Kafka stays up. The restarted job commits the transaction its last
// checkpoint recorded and aborts the others of the dead run, so the result read_committed
// is exactly the batch result: nothing lost, nothing doubled.
func TestKafkaTransactionalJobSurvivesKill9(t *testing.T) {
	addr := startKafkaCluster(t)
	// On-time events only: what this test checks is the output's transactions across
	// kills, not which late records a restarted job drops.
	evs := onTimeEvents(genEvents(73))
	want, lastEnd := batchResult(evs)
	s := newJobsServer(t)
	s.sql(kafkaDDL(addr, ", delivery = 'transactional', transaction_timeout = '30s', checkpoint_interval = '1s'"))
	admin := kafkaClient(t, addr)
	third := len(evs) / 3
	chunks := [][]event{evs[:third], evs[third : 2*third], evs[2*third:]}
	for i, c := range chunks {
		produceKafka(t, addr, c)
		deadline := time.Now().Add(60 * time.Second)
		for {
			n, err := ongoingTxns(admin)
			if err == nil && n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("chunk %d: no open transaction of the job's output within 60 s (%v)\nserver stderr:\n%s", i+1, err, s.p.Stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("kill -9 #%d after producing chunk %d, with a transaction open", i+1, i+1)
		s.p.Kill()
		s.start()
	}
	closeKafkaWindows(t, addr, lastEnd, 4)
	waitWatermark(t, s, lastEnd)
	compareMultisets(t, "kafka result topic after 3 kills mid-transaction", want, kafkaResult(t, addr))
	if t.Failed() {
		t.Logf("server stderr:\n%s", s.p.Stderr.String())
	}
}

// TestKafkaToBrokerTopic: Kafka in, a topic of the bundled broker out (exactly once through
// the outbox): the consumed result is the batch result.
func TestKafkaToBrokerTopic(t *testing.T) {
	addr := startKafkaCluster(t)
	evs := genEvents(79)
	want, lastEnd := batchResult(evs)
	s := newJobsServer(t)
	s.sql(kafkaDDL(addr, "broker"))
	produceKafka(t, addr, evs)
	closeKafkaWindows(t, addr, lastEnd, 4)
	waitWatermark(t, s, lastEnd)
	compareMultisets(t, "broker result topic", want, consumedResult(t, s.ns))
}

// TestKafkaStreamOptionsChecked: a kafka stream with an unknown option or a bad value is
// refused when it is declared, naming the option.
func TestKafkaStreamOptionsChecked(t *testing.T) {
	s := newJobsServer(t)
	for _, tc := range []struct{ with, want string }{
		{"connector = 'kafka', brokers = '127.0.0.1:1', bootstrap_servers = 'x'", `unknown option "bootstrap_servers"`},
		{"connector = 'kafka', topic = 't'", "needs a brokers option"},
		{"connector = 'kafka', brokers = '127.0.0.1:1', offset_reset = 'newest'", "offset_reset"},
		{"connector = 'kafka', brokers = '127.0.0.1:1', topic = 'a/b'", "not a Kafka topic name"},
	} {
		out, errOut, err := runRsql(t, "", "--server", s.pg, "-c", "CREATE STREAM k (a BIGINT) WITH ("+tc.with+")")
		if err == nil || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("WITH (%s): %v\n%s%s\nwant an error about %s", tc.with, err, out, errOut, tc.want)
		}
	}
	// A Kafka topic name with a dot, which broker topics do not take, is accepted.
	s.sql("CREATE STREAM k (a BIGINT) WITH (connector = 'kafka', brokers = '127.0.0.1:1', topic = 'orders.v1')")
}

// TestKafkaChangelogSink: an updating query written to Kafka is a changelog keyed by its
// GROUP BY key: each record's Kafka key is the user, and the last record of each key holds
// the user's final count (what a compacted topic keeps).
func TestKafkaChangelogSink(t *testing.T) {
	addr := startKafkaCluster(t)
	s := newJobsServer(t)
	s.sql(fmt.Sprintf(`CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT) WITH (connector = 'kafka', brokers = '%s', topic = 'orders');
CREATE STREAM counts WITH (connector = 'kafka', brokers = '%s', topic = 'counts', queues = 2) AS
  SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id;`, addr, addr))
	var evs []event
	want := map[string]int64{}
	for i := 0; i < 2000; i++ {
		u := fmt.Sprintf("u%d", i%7*i%13)
		evs = append(evs, event{OrderID: int64(i), UserID: u, Amount: 1, TsMs: baseMs + int64(i), Category: "a"})
		want[u]++
	}
	produceKafka(t, addr, evs)
	cl := kafkaClient(t, addr, kgo.ConsumeTopics("counts"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	last := map[string]int64{}
	pollKafkaUntil(t, s, cl, func() bool { return fmt.Sprint(last) == fmt.Sprint(want) }, func() string {
		return fmt.Sprintf("last count per key %v, want %v", last, want)
	}, func(r *kgo.Record) {
		var row struct {
			UserID string `json:"user_id"`
			N      int64  `json:"n"`
		}
		if err := json.Unmarshal(r.Value, &row); err != nil {
			t.Fatalf("counts record %s: %v", r.Value, err)
		}
		if string(r.Key) != row.UserID {
			t.Fatalf("counts record %s has key %q, want the user", r.Value, r.Key)
		}
		last[row.UserID] = row.N
	})
}

// pollKafkaUntil reads cl's records into each until done, failing with what (and the
// server's log) after 90 s.
func pollKafkaUntil(t *testing.T, s *jobsServer, cl *kgo.Client, done func() bool, what func() string, each func(*kgo.Record)) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s\nserver stderr:\n%s", what(), s.p.Stderr.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(each)
	}
}

// TestKafkaChangelogTombstones: a key that leaves an updating query's result (HAVING whose
// keys leave) ends in the Kafka topic with a tombstone, the key and no value (what a
// compacted topic drops), and a rsql TABLE over that topic reads the result back.
func TestKafkaChangelogTombstones(t *testing.T) {
	addr := startKafkaCluster(t)
	s := newJobsServer(t)
	s.sql(fmt.Sprintf(`CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT) WITH (connector = 'kafka', brokers = '%s', topic = 'orders');
CREATE STREAM small WITH (connector = 'kafka', brokers = '%s', topic = 'small', queues = 2) AS
  SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id HAVING COUNT(*) < 3;
CREATE TABLE small_back (user_id VARCHAR PRIMARY KEY, n BIGINT) WITH (connector = 'kafka', brokers = '%s', topic = 'small');`, addr, addr, addr))
	var evs []event
	counts := map[string]int64{}
	for i := 0; i < 600; i++ {
		u := fmt.Sprintf("u%d", i*7%211)
		if i%3 == 0 {
			u = fmt.Sprintf("u%d", i%40)
		}
		evs = append(evs, event{OrderID: int64(i), UserID: u, Amount: 1, TsMs: baseMs + int64(i), Category: "a"})
		counts[u]++
	}
	want := map[string]int64{}
	for u, n := range counts {
		if n < 3 {
			want[u] = n
		}
	}
	if len(want) < 20 || len(want) > len(counts)-20 {
		t.Fatalf("%d of %d users in the result: the test covers little", len(want), len(counts))
	}
	produceKafka(t, addr, evs)
	cl := kafkaClient(t, addr, kgo.ConsumeTopics("small"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]int64{}
	tombstones := 0
	pollKafkaUntil(t, s, cl, func() bool { return fmt.Sprint(got) == fmt.Sprint(want) }, func() string {
		return fmt.Sprintf("folded topic %v, want %v", got, want)
	}, func(r *kgo.Record) {
		if r.Value == nil {
			tombstones++
			delete(got, string(r.Key))
			return
		}
		var row map[string]any
		if err := json.Unmarshal(r.Value, &row); err != nil {
			t.Fatalf("small record %s: %v", r.Value, err)
		}
		if _, ok := row["__op"]; ok {
			t.Fatalf("record %s: a delete is a tombstone, not a record saying so", r.Value)
		}
		n, _ := row["n"].(float64)
		got[string(r.Key)] = int64(n)
	})
	if tombstones == 0 {
		t.Fatal("no tombstone: no key left the result")
	}
	back := s.sql("SELECT user_id, n FROM small_back")
	for u, n := range want {
		if !strings.Contains(back, fmt.Sprintf(`{"user_id":%q,"n":%d}`, u, n)) {
			t.Fatalf("the table over the topic lacks %s=%d:\n%s", u, n, back)
		}
	}
	if lines := strings.Count(strings.TrimSpace(back), "\n") + 1; lines != len(want) {
		t.Fatalf("the table over the topic has %d rows, want %d:\n%s", lines, len(want), back)
	}
}

// TestKafkaPartitionsOverThreeInstances: a topic of 8 partitions read by a job on three
// `rsql server --postgres` instances sharing a private PostgreSQL and a broker (for the
// exchange and the result): the partitions, the job's units, are divided over the three,
// and the result is exactly the batch result.
func TestKafkaPartitionsOverThreeInstances(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	addr := kc.ListenAddrs()[0]
	pgc := startPostgres(t)
	br := startBroker(t)
	// On-time events only: whether a late one is dropped depends on how far the other
	// partitions' readers, on other instances, have moved the watermark when it arrives.
	evs := onTimeEvents(genEvents(83))
	want, lastEnd := batchResult(evs)

	srv, all := externalInstances(t, 3, br.NS, pgc.URL)
	srv[0].start()
	if out, errOut, err := runRsql(t, "", "--server", srv[0].pg, "-c", kafkaDDL(addr, "broker")); err != nil {
		t.Fatalf("DDL: %v\n%s\n%s", err, out, errOut)
	}
	third := len(evs) / 3
	produceKafka(t, addr, evs[:third])
	srv[1].start()
	srv[2].start()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgc.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The source stage's 8 partitions and the aggregation's 4 shuffle queues.
	waitUnitsSpreadN(t, conn, all, 12)
	produceKafka(t, addr, evs[third:])
	closeKafkaWindows(t, addr, lastEnd, 8)
	waitClusterWatermark(t, srv[0].pg, lastEnd)
	time.Sleep(2500 * time.Millisecond)
	compareMultisets(t, "result topic of 8 Kafka partitions over three instances", want, consumedResult(t, br.NS))
}
