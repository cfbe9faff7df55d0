package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A table on a Kafka topic is read as the other tables are: each record a version of its
// key, `__op: delete` or a null value (Kafka's tombstone) its end; a continuous query over
// it sees the latest versions. The
// expected result is the records folded here.
func TestKafkaTableLatestVersions(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "accts"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	latest := map[int]string{}
	var recs []*kgo.Record
	for i := 0; i < 200; i++ {
		id := (i * 7) % 23
		body := []byte(fmt.Sprintf(`{"id": %d, "tier": "t%d"}`, id, i%3))
		switch _, ok := latest[id]; {
		case ok && i%10 == 0:
			body = []byte(fmt.Sprintf(`{"id": %d, "__op": "delete"}`, id))
			delete(latest, id)
		case ok && i%10 == 5:
			body = nil // Kafka's tombstone: the key's end
			delete(latest, id)
		default:
			latest[id] = fmt.Sprintf("t%d", i%3)
		}
		recs = append(recs, &kgo.Record{Topic: "accts", Key: []byte(fmt.Sprint(id)), Value: body})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, tier := range latest {
		counts[tier]++
	}
	var want []string
	for tier, n := range counts {
		want = append(want, fmt.Sprintf("%s|%d", tier, n))
	}
	sort.Strings(want)

	te := newTestEngine(t, true)
	te.mustExec(fmt.Sprintf(`CREATE TABLE acct (id BIGINT PRIMARY KEY, tier VARCHAR) WITH (connector = 'kafka', brokers = '%s', topic = 'accts', idle_timeout = '1s')`, addr))
	te.mustExec(`CREATE MATERIALIZED VIEW per_tier WITH (checkpoint_interval = '50ms') AS SELECT tier, COUNT(*) AS n FROM acct GROUP BY tier`)
	var got string
	for i := 0; i < 1500; i++ {
		if got = sortedRows(te, `SELECT tier, n FROM per_tier`); got == strings.Join(want, " ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("per_tier %s, want %s", got, strings.Join(want, " "))
}
