package tests

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestPostgresToKafkaToPostgres is the pipeline of docs/clients.md end to end: an
// application's table in PostgreSQL read by change data capture, aggregated by user into
// a Kafka topic (a changelog keyed by the user), that topic read back as a Kafka TABLE and
// written into a PostgreSQL table. After random inserts, updates and deletes the sink table
// equals PostgreSQL's own aggregation over the source table.
func TestPostgresToKafkaToPostgres(t *testing.T) {
	ctx := context.Background()
	pg, conn, sinkPG, sinkConn := cdcDatabases(t, `CREATE TABLE per_user (user_id text PRIMARY KEY, n bigint, qty bigint)`)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "per_user"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	kafka := kc.ListenAddrs()[0]

	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	var next int64
	for i := 0; i < 100; i++ {
		cdcChange(ctx, t, conn, r, &next)
	}
	s := newJobsServer(t)
	s.sql(fmt.Sprintf(`
CREATE TABLE orders (%[2]s) WITH (connector = 'postgres-cdc', url = '%[1]s', table = 'public.orders',
  slot = 'rsql_pipeline', publication = 'rsql_pipeline', create_slot = true);
CREATE TABLE per_user_kafka (user_id VARCHAR PRIMARY KEY, n BIGINT, qty BIGINT) WITH (connector = 'kafka',
  brokers = '%[3]s', topic = 'per_user', delivery = 'transactional', idle_timeout = '1s');
CREATE TABLE per_user_sink (user_id VARCHAR PRIMARY KEY, n BIGINT, qty BIGINT) WITH (connector = 'postgres',
  url = '%[4]s', table = 'per_user');
`, pg.URL, cdcColumns, kafka, sinkPG.URL))
	// PostgreSQL to Kafka: the aggregation's changelog, keyed by user_id.
	s.sql(`INSERT INTO per_user_kafka SELECT user_id, COUNT(*), SUM(qty) FROM orders WHERE user_id IS NOT NULL GROUP BY user_id`)
	// Kafka to PostgreSQL: the topic read as a table, its latest versions upserted.
	s.sql(`INSERT INTO per_user_sink SELECT user_id, n, qty FROM per_user_kafka`)
	for i := 0; i < 400; i++ {
		cdcChange(ctx, t, conn, r, &next)
	}
	const want = `SELECT user_id, COUNT(*), SUM(qty) FROM public.orders WHERE user_id IS NOT NULL GROUP BY user_id`
	deadline := time.Now().Add(120 * time.Second)
	for {
		got, w := cdcRows(t, sinkConn, `SELECT user_id, n, qty FROM per_user`), cdcRows(t, conn, want)
		if strings.Join(got, "\n") == strings.Join(w, "\n") && len(w) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("per_user differs from PostgreSQL's aggregation:\n%s\nserver stderr:\n%s", cdcDiffText(got, w), s.p.Stderr.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
}
