package tests

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestJobCompressedBodies: the official client compresses bodies from 4 KiB on (zlib, the
// compressed flag in the system flags). Records of 3 KiB, 5 KiB, 100 KiB and 4 MiB go
// through a job that measures and passes them on, read in process (the bundled broker) and
// over the protocol (a standalone broker through its name server); the job's output, read
// back with the official client, carries every payload whole and no record is bad.
func TestJobCompressedBodies(t *testing.T) {
	t.Run("bundled broker", func(t *testing.T) {
		runCompressedJob(t, newJobsServer(t))
	})
	t.Run("name server", func(t *testing.T) {
		b := startBroker(t)
		runCompressedJob(t, newExternalJobsServer(t, b.NS))
	})
}

func runCompressedJob(t *testing.T, s *jobsServer) {
	s.sql(`CREATE STREAM big (id BIGINT, payload VARCHAR) WITH (topic = 'big', queues = 1);
CREATE STREAM big_out WITH (queues = 1) AS SELECT id, LENGTH(payload) AS n, MD5(payload) AS digest, payload FROM big;`)
	resolver := primitive.NewPassthroughResolver([]string{s.ns})
	p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithInstanceName(uniq("p")),
		producer.WithGroupName(uniq("pg")), producer.WithRetry(2), producer.WithSendMsgTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	r := rand.New(rand.NewSource(7))
	sizes := []int{3 << 10, 5 << 10, 100 << 10, 4 << 20}
	want := map[int64]string{}
	for i, n := range sizes {
		var sb strings.Builder
		for sb.Len() < n {
			sb.WriteByte('a' + byte(r.Intn(16)))
		}
		id := int64(i + 1)
		want[id] = sb.String()
		body, _ := json.Marshal(map[string]any{"id": id, "payload": want[id]})
		res, err := p.SendSync(context.Background(), primitive.NewMessage("big", body))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d bytes: %v %v", len(body), res, err)
		}
	}

	pc, err := rocketmq.NewPullConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(uniq("g")),
		consumer.WithInstance(uniq("pull")))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe("big_out", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	got := map[int64]bool{}
	deadline := time.Now().Add(90 * time.Second)
	var off int64
	for len(got) < len(sizes) {
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s the job wrote %d of %d rows\nSHOW JOBS: %s\nserver stderr:\n%s", len(got), len(sizes), s.sql("SHOW JOBS"), s.p.Stderr.String())
		}
		mqs, err := pc.GetTopicRouteInfo("big_out")
		if err != nil || len(mqs) != 1 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := pc.PullFrom(ctx, mqs[0], off, 8)
		cancel()
		if err != nil || res.Status != primitive.PullFound {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		off = res.NextBeginOffset
		for _, m := range res.GetMessageExts() {
			var row struct {
				ID      int64  `json:"id"`
				N       int64  `json:"n"`
				Digest  string `json:"digest"`
				Payload string `json:"payload"`
			}
			if err := json.Unmarshal(m.Body, &row); err != nil {
				t.Fatalf("output row of %d bytes is not JSON: %v", len(m.Body), err)
			}
			p, ok := want[row.ID]
			sum := md5.Sum([]byte(p))
			if !ok || got[row.ID] || row.N != int64(len(p)) || row.Digest != hex.EncodeToString(sum[:]) || row.Payload != p {
				t.Fatalf("row %d: known %v, repeated %v, n %d (want %d), digest %s, payload equal %v", row.ID, ok, got[row.ID], row.N, len(p), row.Digest, row.Payload == p)
			}
			got[row.ID] = true
		}
	}
	jobs := s.sql("SHOW JOBS")
	if !strings.Contains(jobs, `"bad":0`) {
		t.Errorf("the job counted bad records: %s", jobs)
	}
}
