package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"rsql/broker/remoting"
)

// A broker cluster as RocketMQ runs one: `rsql namesrv` alone, and `rsql broker --namesrv`
// processes that register with it. docs/operations.md, "A broker cluster".

// clusterBroker is an `rsql broker --namesrv` process with its own data directory.
type clusterBroker struct {
	t          *testing.T
	name, addr string
	ns, dir    string
	p          *proc
}

func startClusterBroker(t *testing.T, ns, name string) *clusterBroker {
	t.Helper()
	b := &clusterBroker{t: t, name: name, addr: freePort(t), ns: ns, dir: t.TempDir()}
	b.start()
	return b
}

func (b *clusterBroker) start() {
	b.t.Helper()
	b.p = startProc(b.t, buildRsql(b.t), "broker", "--namesrv", b.ns, "--broker-name", b.name,
		"--broker-addr", b.addr, "--data-dir", b.dir, "--segment-size", "16MiB", "--flush", "sync",
		"--register-interval", "500ms")
	waitListening(b.t, b.p, b.addr)
}

// rsqlNamesrv is an `rsql namesrv` process.
type rsqlNamesrv struct {
	t         *testing.T
	addr, dir string
	p         *proc
}

// startNamesrv runs `rsql namesrv` on a free port.
func startNamesrv(t *testing.T) *rsqlNamesrv {
	t.Helper()
	n := &rsqlNamesrv{t: t, addr: freePort(t), dir: t.TempDir()}
	n.start()
	return n
}

func (n *rsqlNamesrv) start() {
	n.t.Helper()
	n.p = startProc(n.t, buildRsql(n.t), "namesrv", "--namesrv-addr", n.addr, "--data-dir", n.dir)
	waitListening(n.t, n.p, n.addr)
}

// nsRoute returns topic's queues at name server ns as "broker:queues" entries (sorted), and
// its ordered-topic configuration.
func nsRoute(t *testing.T, ns, topic string) ([]string, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", ns, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := remoting.RoundTrip(c, &remoting.Command{Code: 105, Language: "GO", Opaque: 1,
		ExtFields: map[string]string{"topic": topic}}, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != 0 {
		return nil, ""
	}
	var r struct {
		OrderTopicConf string `json:"orderTopicConf"`
		QueueDatas     []struct {
			BrokerName    string `json:"brokerName"`
			ReadQueueNums int    `json:"readQueueNums"`
		} `json:"queueDatas"`
	}
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, q := range r.QueueDatas {
		out = append(out, fmt.Sprintf("%s:%d", q.BrokerName, q.ReadQueueNums))
	}
	sort.Strings(out)
	return out, r.OrderTopicConf
}

// waitNsRoute waits until topic's route at ns is want.
func waitNsRoute(t *testing.T, ns, topic string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, _ := nsRoute(t, ns, topic)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("route of %s at %s: %v, want %v", topic, ns, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceWithClient sends the events to topic with rocketmq-client-go, 100 per batch,
// round-robin over the topic's queues (each queue gets its events in generation order).
func produceWithClient(t *testing.T, ns, topic string, evs []event) {
	t.Helper()
	p := newProducer(t, &rsqlBroker{NS: ns})
	body := strings.Split(strings.TrimSuffix(eventLines(evs), "\n"), "\n")
	ctx := context.Background()
	for i := 0; i < len(body); i += 100 {
		var msgs []*primitive.Message
		for j := i; j < min(i+100, len(body)); j++ {
			msgs = append(msgs, primitive.NewMessage(topic, []byte(body[j])).WithKeys([]string{evs[j].UserID}))
		}
		var err error
		for try := 0; try < 50; try++ {
			var res *primitive.SendResult
			res, err = p.SendSync(ctx, msgs...)
			if err == nil && res.Status == primitive.SendOK {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("send batch at %d: %v", i, err)
		}
	}
}

// consumeWithClient reads topic from its first offset with a rocketmq-client-go push
// consumer until want lines have arrived and nothing more comes for 3 s, and renders each
// result row as consumedResult does.
func consumeWithClient(t *testing.T, ns, topic string, want int) []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	last := time.Now()
	c := newPushConsumer(t, &rsqlBroker{NS: ns}, uniq("check"))
	err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			var r struct {
				UserID      string      `json:"user_id"`
				WindowStart time.Time   `json:"window_start"`
				WindowEnd   time.Time   `json:"window_end"`
				N           json.Number `json:"n"`
				Total       float64     `json:"total"`
			}
			if err := json.Unmarshal(m.Body, &r); err != nil {
				got = append(got, "not a row: "+string(m.Body))
				continue
			}
			n, _ := r.N.Int64()
			got = append(got, resultLine(r.UserID, r.WindowStart.UnixMilli(), r.WindowEnd.UnixMilli(), n, r.Total))
		}
		last = time.Now()
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	deadline := time.Now().Add(60 * time.Second)
	for {
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		n, quiet := len(got), time.Since(last)
		mu.Unlock()
		if n >= want && quiet > 3*time.Second || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), got...)
}

// TestJobOverTwoBrokers: one name server and two brokers registered with it; `rsql server
// --namesrv` creates its topics through the name server, spread over both brokers; the
// official Go client produces the input and consumes the output; one broker is killed with
// SIGKILL and started again while the job runs, then the name server. The result is exactly
// the batch result.
func TestJobOverTwoBrokers(t *testing.T) {
	evs := genEvents(53)[:30000]
	want, lastEnd := batchResult(evs)
	nsrv := startNamesrv(t)
	ns := nsrv.addr
	a := startClusterBroker(t, ns, "broker-a")
	b := startClusterBroker(t, ns, "broker-b")
	s := newExternalJobsServer(t, ns)
	ddl := strings.SplitAfter(jobsDDL, ";")
	s.sql(ddl[0])
	// The stream's topic: 4 queues spread over the two brokers, its layout recorded.
	waitNsRoute(t, ns, "orders", "broker-a:2", "broker-b:2")
	if _, conf := nsRoute(t, ns, "orders"); conf != "broker-a:2;broker-b:2" {
		t.Errorf("orders' ordered-topic configuration %q", conf)
	}
	// rsql produce creates a missing topic through the name server the same way, and rsql
	// consume reads it back from both brokers.
	if _, errOut, err := runRsql(t, numberedRecords(0, 100), "produce", "fresh", "--namesrv", ns); err != nil {
		t.Fatalf("rsql produce to a new topic: %v\n%s", err, errOut)
	}
	waitNsRoute(t, ns, "fresh", "broker-a:2", "broker-b:2")
	if out, errOut, err := runRsql(t, "", "consume", "fresh", "--from-beginning", "--idle-exit", "2s", "--namesrv", ns); err != nil || len(lines(out)) != 100 {
		t.Fatalf("rsql consume fresh: %d records, %v\n%s", len(lines(out)), err, errOut)
	}
	produceWithClient(t, ns, "orders", evs)
	s.sql(ddl[1])
	waitNsRoute(t, ns, "result", "broker-a:2", "broker-b:2")

	time.Sleep(time.Second)
	t.Logf("kill -9 broker-b")
	killed := time.Now()
	b.p.Kill()
	waitNsRoute(t, ns, "orders", "broker-a:2") // its queues leave the routes
	t.Logf("broker-b's queues left the route %v after the kill", time.Since(killed).Round(time.Millisecond))
	if st := jobStates(t, "--server", s.pg)["job-1"]; st != "RUNNING" && st != "RETRYING" {
		t.Fatalf("job state %s with broker-b down\n%s", st, s.p.Stderr.String())
	}
	time.Sleep(2 * time.Second)
	restarted := time.Now()
	b.start()
	waitNsRoute(t, ns, "orders", "broker-a:2", "broker-b:2")
	t.Logf("broker-b's queues back in the route %v after its start", time.Since(restarted).Round(time.Millisecond))
	// The name server killed and restarted: the brokers register again, the layout is kept.
	nsrv.p.Kill()
	restarted = time.Now()
	nsrv.start()
	waitNsRoute(t, ns, "orders", "broker-a:2", "broker-b:2")
	t.Logf("routes complete %v after the name server's start (register interval 500ms)", time.Since(restarted).Round(time.Millisecond))
	if _, conf := nsRoute(t, ns, "orders"); conf != "broker-a:2;broker-b:2" {
		t.Errorf("orders' ordered-topic configuration after the name server's restart: %q", conf)
	}

	waitWindowsClosed(t, s, lastEnd)
	got := consumeWithClient(t, ns, "result", len(want))
	compareMultisets(t, "result topic read with rocketmq-client-go", want, got)
	// rsql consume finds both brokers through the name server too.
	compareMultisets(t, "result topic read with rsql consume", want, consumedResult(t, ns))
	if strings.Contains(s.p.Stderr.String(), "job job-1 failed") {
		t.Errorf("the job failed on the way")
	}
	t.Logf("the job paused and started again %d times", strings.Count(s.p.Stderr.String(), "job job-1 started again"))
	if t.Failed() {
		t.Logf("server stderr:\n%s\nbroker-a stderr:\n%s\nbroker-b stderr:\n%s", s.p.Stderr.String(), a.p.Stderr.String(), b.p.Stderr.String())
	}
}
