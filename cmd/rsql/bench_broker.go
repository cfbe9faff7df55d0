package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"rsql/broker"
)

// BenchBrokerCmd measures produce and consume throughput and latency through the RocketMQ
// protocol with rocketmq-client-go, against a broker started in this process (or --namesrv).
type BenchBrokerCmd struct {
	Messages   int    `name:"messages" default:"300000" help:"Messages per batched run (unbatched runs send a quarter)."`
	Producers  int    `name:"producers" default:"4" help:"Concurrent producers."`
	Batch      int    `name:"batch" default:"128" help:"Messages per send in batched runs."`
	Sizes      []int  `name:"sizes" default:"100,1024" help:"Message body sizes in bytes."`
	Queues     int    `name:"queues" default:"8" help:"Queues of each benchmark topic."`
	CPUProfile string `name:"cpuprofile" hidden:"" help:"Write a CPU profile of the whole run here."`
	Consumers  int    `name:"consumers" default:"2" help:"Push consumers in the consuming group."`
	Flush      string `name:"flush" enum:"async,sync" default:"async" help:"Flush mode of the in-process broker."`
	Namesrv    string `name:"namesrv" env:"RSQL_NAMESRV" help:"Measure this external RocketMQ name server's cluster instead of an in-process broker."`
	ACL        bool   `name:"acl" help:"Turn access control on in the in-process broker and sign every request (measures the cost of the checks)."`

	creds, adminCreds primitive.Credentials // with --acl
}

// benchACL is the ACL file of --acl: an admin account creates the topics, the clients use
// one with default permissions (so each request goes through the permission checks).
const benchACL = `accounts:
  - accessKey: bench-admin
    secretKey: bench-admin-secret
    admin: true
  - accessKey: bench-client
    secretKey: bench-client-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
`

type benchResult struct {
	name               string
	n                  int
	produceRate        float64
	p50, p99           time.Duration // per send call
	consumeRate        float64
	e2eP50, e2eP99     time.Duration
	produceSec, conSec float64
}

func (c *BenchBrokerCmd) Run() error {
	rlog.SetLogger(quietLogger{})
	if c.CPUProfile != "" {
		stop, err := startCPUProfile(c.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	ns, brokerAddr := c.Namesrv, ""
	if ns == "" {
		dir, err := os.MkdirTemp("", "rsql-bench-broker-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		mode, err := broker.ParseFlushMode(c.Flush)
		if err != nil {
			return err
		}
		cfg := broker.Config{Dir: filepath.Join(dir, "broker"), FlushMode: mode, SegmentSize: 256 << 20}
		if c.ACL {
			cfg.ACLFile = filepath.Join(dir, "acl.yml")
			if err := os.WriteFile(cfg.ACLFile, []byte(benchACL), 0o600); err != nil {
				return err
			}
			c.creds = primitive.Credentials{AccessKey: "bench-client", SecretKey: "bench-client-secret"}
			c.adminCreds = primitive.Credentials{AccessKey: "bench-admin", SecretKey: "bench-admin-secret"}
		}
		b, err := broker.Open(cfg)
		if err != nil {
			return err
		}
		defer b.Close()
		if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
			return err
		}
		ns, brokerAddr = b.Addrs()
		fmt.Fprintf(os.Stderr, "in-process broker at %s (flush %s, access control %v)\n", ns, c.Flush, c.ACL)
	} else if c.ACL {
		return &exitError{"--acl is for the in-process broker (not --namesrv)"}
	} else if _, err := nameServer(&BrokerClientFlags{Namesrv: c.Namesrv}); err != nil {
		return err
	}
	var results []benchResult
	for _, size := range c.Sizes {
		for _, batched := range []bool{true, false} {
			r, err := c.runOne(ns, brokerAddr, size, batched)
			if err != nil {
				return err
			}
			results = append(results, r)
			fmt.Fprintf(os.Stderr, "%s done\n", r.name)
		}
	}
	fmt.Printf("| run | messages | produce msg/s | send p50 | send p99 | consume msg/s | end-to-end p50 | end-to-end p99 |\n")
	fmt.Printf("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		fmt.Printf("| %s | %d | %.0f | %v | %v | %.0f | %s | %s |\n", r.name, r.n, r.produceRate,
			r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.consumeRate, ms(r.e2eP50), ms(r.e2eP99))
	}
	return nil
}

func (c *BenchBrokerCmd) runOne(ns, brokerAddr string, size int, batched bool) (benchResult, error) {
	batch, n := c.Batch, c.Messages
	name := fmt.Sprintf("%dB batch %d", size, batch)
	if !batched {
		batch, n = 1, c.Messages/4
		name = fmt.Sprintf("%dB unbatched", size)
	}
	topic := fmt.Sprintf("bench-%d-%d-%d", size, batch, time.Now().UnixNano()%1e9)
	res := benchResult{name: name, n: n}
	resolver := primitive.NewPassthroughResolver([]string{ns})
	if err := createBenchTopic(ns, brokerAddr, topic, c.Queues, c.adminCreds); err != nil {
		return res, err
	}
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	var sent atomic.Int64
	var lmu sync.Mutex
	var lats []time.Duration
	var wg sync.WaitGroup
	errc := make(chan error, c.Producers)
	var producers []rocketmq.Producer
	defer func() {
		for _, p := range producers {
			p.Shutdown()
		}
	}()
	start := time.Now()
	for w := 0; w < c.Producers; w++ {
		p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithGroupName("rsql-bench"),
			producer.WithInstanceName(fmt.Sprintf("bench-%d-%d", w, time.Now().UnixNano())), producer.WithRetry(2),
			producer.WithCredentials(c.creds))
		if err != nil {
			return res, err
		}
		if err := p.Start(); err != nil {
			return res, err
		}
		producers = append(producers, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := make([]*primitive.Message, batch)
			var local []time.Duration
			for {
				k := int(sent.Add(int64(batch)))
				if k-batch >= n {
					break
				}
				m := min(batch, n-(k-batch))
				for i := 0; i < m; i++ {
					msgs[i] = primitive.NewMessage(topic, body)
				}
				t0 := time.Now()
				if _, err := p.SendSync(context.Background(), msgs[:m]...); err != nil {
					errc <- err
					return
				}
				local = append(local, time.Since(t0))
			}
			lmu.Lock()
			lats = append(lats, local...)
			lmu.Unlock()
		}()
	}
	wg.Wait()
	res.produceSec = time.Since(start).Seconds()
	select {
	case err := <-errc:
		return res, fmt.Errorf("bench send: %w", err)
	default:
	}
	res.produceRate = float64(n) / res.produceSec
	res.p50, res.p99 = percentile(lats, 0.5), percentile(lats, 0.99)

	// Consume everything from the beginning.
	var got atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	var first atomic.Int64
	handler := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		first.CompareAndSwap(0, time.Now().UnixNano())
		if got.Add(int64(len(msgs))) >= int64(n) {
			once.Do(func() { close(done) })
		}
		return consumer.ConsumeSuccess, nil
	}
	var consumers []rocketmq.PushConsumer
	defer func() {
		for _, pc := range consumers {
			pc.Shutdown()
		}
	}()
	for i := 0; i < max(1, c.Consumers); i++ {
		pc, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName("bench-"+topic),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithPullBatchSize(1024),
			consumer.WithConsumeMessageBatchMaxSize(1024), consumer.WithPullThresholdForQueue(16384),
			consumer.WithPullThresholdSizeForQueue(256), consumer.WithConsumeConcurrentlyMaxSpan(65535),
			consumer.WithInstance(fmt.Sprintf("bench-c%d-%s", i, topic)), consumer.WithCredentials(c.creds))
		if err != nil {
			return res, err
		}
		if err := pc.Subscribe(topic, consumer.MessageSelector{}, handler); err != nil {
			return res, err
		}
		if err := pc.Start(); err != nil {
			return res, err
		}
		consumers = append(consumers, pc)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return res, fmt.Errorf("consumed %d of %d messages in 5 minutes", got.Load(), n)
	}
	res.conSec = time.Since(time.Unix(0, first.Load())).Seconds()
	res.consumeRate = float64(n) / res.conSec

	// End-to-end latency at a moderate rate: born time to delivery, one consumer running.
	var err error
	res.e2eP50, res.e2eP99, err = liveLatency(resolver, c.creds, topic+"-live", size, batched)
	return res, err
}

// createBenchTopic creates the topic with the admin client when the broker address is
// known (in-process broker); otherwise the first send auto-creates it.
func createBenchTopic(ns, brokerAddr, topic string, queues int, creds primitive.Credentials) error {
	if brokerAddr == "" {
		return nil
	}
	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns})), admin.WithCredentials(creds))
	if err != nil {
		return err
	}
	defer a.Close()
	return a.CreateTopic(context.Background(), admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(brokerAddr),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues))
}

// ms prints a latency measured from millisecond timestamps.
func ms(d time.Duration) string {
	if d < time.Millisecond {
		return "<1ms"
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*q))]
}

// liveLatency sends 2,000 messages at about 2,000 per second (in batches of 20 when
// batched) while a consumer runs, and measures born-to-delivery latency.
func liveLatency(resolver primitive.NsResolver, creds primitive.Credentials, topic string, size int, batched bool) (time.Duration, time.Duration, error) {
	const n = 2000
	var mu sync.Mutex
	var lats []time.Duration
	done := make(chan struct{})
	var once sync.Once
	pc, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName("bench-live-"+topic),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithInstance("bench-live-"+topic),
		consumer.WithCredentials(creds))
	if err != nil {
		return 0, 0, err
	}
	p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithGroupName("rsql-bench-live"),
		producer.WithInstanceName("bench-live-"+topic), producer.WithCredentials(creds))
	if err != nil {
		return 0, 0, err
	}
	if err := p.Start(); err != nil {
		return 0, 0, err
	}
	defer p.Shutdown()
	// Create the topic by a first send, then subscribe.
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("warm-up"))); err != nil {
		return 0, 0, err
	}
	err = pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now().UnixMilli()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if string(m.Body) == "warm-up" {
				continue
			}
			lats = append(lats, time.Duration(now-m.BornTimestamp)*time.Millisecond)
		}
		if len(lats) >= n {
			once.Do(func() { close(done) })
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return 0, 0, err
	}
	if err := pc.Start(); err != nil {
		return 0, 0, err
	}
	defer pc.Shutdown()
	time.Sleep(3 * time.Second) // let the consumer take its queues
	body := make([]byte, size)
	step := 1
	if batched {
		step = 20
	}
	tick := time.NewTicker(time.Duration(step) * time.Second / 2000)
	defer tick.Stop()
	for i := 0; i < n; i += step {
		<-tick.C
		msgs := make([]*primitive.Message, step)
		for j := range msgs {
			msgs[j] = primitive.NewMessage(topic, body)
		}
		if _, err := p.SendSync(context.Background(), msgs...); err != nil {
			return 0, 0, err
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		return 0, 0, fmt.Errorf("live latency run: consumer got %d of %d", len(lats), n)
	}
	mu.Lock()
	defer mu.Unlock()
	return percentile(lats, 0.5), percentile(lats, 0.99), nil
}
