package connectors

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"rsql/connectors/options"
)

// The kafka connector (docs/sql.md, "Kafka"): a topic of an Apache Kafka cluster (or any
// broker speaking its protocol), read and written with franz-go. Splits are the topic's
// partitions ("0".."n-1"), offsets are Kafka offsets kept in rsql's checkpoints (no consumer
// group commits), and reads see committed records only (read_committed), so a transactional
// writer's aborted records never reach a job.

// KafkaOptionKeys are the WITH options the kafka connector reads beyond the common ones.
var KafkaOptionKeys = options.KafkaOptionKeys

// KafkaConfig is how to reach a Kafka topic's cluster, from a stream's WITH options.
type KafkaConfig struct {
	Brokers []string
	// Group names the client (its client id); offsets are never committed to it.
	Group string
	// Latest: a partition read from offset 0 (nothing of it in the checkpoint) starts at
	// its end instead of its start (offset_reset = 'latest').
	Latest bool
	// TxTimeout is the transaction timeout of transactional writers (default 60s).
	TxTimeout time.Duration
	// Wait is how long one Read waits for records before returning none (default 200ms).
	Wait time.Duration
	// Partitions is the partition count a missing topic is created with (default 1).
	Partitions int
	SASLMech   string // "", "plain", "scram-sha-256", "scram-sha-512"
	SASLUser   string
	SASLPass   string
	TLS        bool
	TLSCAFile  string
}

// ParseKafkaConfig reads a stream's kafka options; errors are *OptionError naming the
// option (never showing a password).
func ParseKafkaConfig(o StreamOptions) (KafkaConfig, error) {
	raw := o.Raw
	c := KafkaConfig{Group: raw["group"], Partitions: o.Queues, TxTimeout: 60 * time.Second, Wait: 200 * time.Millisecond}
	if c.Group == "" {
		c.Group = "rsql"
	}
	for _, b := range strings.Split(raw["brokers"], ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	if len(c.Brokers) == 0 {
		return c, &OptionError{Reason: "the kafka connector needs a brokers option: WITH (connector = 'kafka', brokers = 'host:9092', topic = 'events')"}
	}
	switch v := strings.ToLower(strings.TrimSpace(raw["offset_reset"])); v {
	case "", "earliest":
	case "latest":
		c.Latest = true
	default:
		return c, &OptionError{Option: "offset_reset", Value: raw["offset_reset"], Reason: "want 'earliest' or 'latest'"}
	}
	if v, ok := raw["transaction_timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 15*time.Minute {
			return c, &OptionError{Option: "transaction_timeout", Value: v, Reason: "want a duration from '1s' to '15m'"}
		}
		c.TxTimeout = d
	}
	switch v := strings.ToLower(strings.TrimSpace(raw["sasl_mechanism"])); v {
	case "":
		if raw["sasl_username"] != "" || raw["sasl_password"] != "" {
			return c, &OptionError{Reason: "sasl_username and sasl_password need sasl_mechanism ('plain', 'scram-sha-256' or 'scram-sha-512')"}
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		c.SASLMech, c.SASLUser, c.SASLPass = v, raw["sasl_username"], raw["sasl_password"]
		if c.SASLUser == "" {
			return c, &OptionError{Reason: "sasl_mechanism needs sasl_username and sasl_password"}
		}
	default:
		return c, &OptionError{Option: "sasl_mechanism", Value: raw["sasl_mechanism"], Reason: "want 'plain', 'scram-sha-256' or 'scram-sha-512'"}
	}
	if v, ok := raw["tls"]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return c, &OptionError{Option: "tls", Value: v, Reason: "want 'true' or 'false'"}
		}
		c.TLS = b
	}
	c.TLSCAFile = raw["tls_ca_file"]
	if c.TLSCAFile != "" {
		c.TLS = true
	}
	return c, nil
}

// checkKafkaOptions checks a kafka stream's options when it is declared.
func checkKafkaOptions(raw map[string]string) error {
	o, err := options.Of(raw)
	if err != nil {
		return err
	}
	if _, err = ParseKafkaConfig(o); err != nil {
		return err
	}
	if t, ok := raw["topic"]; ok && !validKafkaTopic(t) {
		return &OptionError{Option: "topic", Value: t, Reason: "not a Kafka topic name: 1 to 249 letters, digits, '.', '_' or '-', and not '.' or '..'"}
	}
	return nil
}

// validKafkaTopic says whether Kafka takes t as a topic name.
func validKafkaTopic(t string) bool {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

var kafkaKind = Kind{
	Kind: func() options.Kind {
		k := options.Builtin("kafka")
		k.Check = checkKafkaOptions
		return k
	}(),
	OpenSource: func(ctx context.Context, _ Deps, s Spec) (Source, error) {
		c, err := ParseKafkaConfig(s.Options)
		if err != nil {
			return nil, err
		}
		return OpenKafkaSource(ctx, c, s.Options.TopicOf(s.Stream))
	},
	OpenSink: func(ctx context.Context, _ Deps, s Spec) (Sink, error) {
		c, err := ParseKafkaConfig(s.Options)
		if err != nil {
			return nil, err
		}
		return OpenKafkaSink(ctx, c, s.Options.TopicOf(s.Stream))
	},
}

// clientOpts are the franz-go options every client of c uses.
func (c KafkaConfig) clientOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID("rsql-" + c.Group)}
	switch c.SASLMech {
	case "plain":
		opts = append(opts, kgo.SASL(plain.Auth{User: c.SASLUser, Pass: c.SASLPass}.AsMechanism()))
	case "scram-sha-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPass}.AsSha256Mechanism()))
	case "scram-sha-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPass}.AsSha512Mechanism()))
	}
	if c.TLS {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.TLSCAFile != "" {
			pem, err := os.ReadFile(c.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("tls_ca_file: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("tls_ca_file %s: no PEM certificate in it", c.TLSCAFile)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	return opts, nil
}

func (c KafkaConfig) newClient(extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.clientOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", strings.Join(c.Brokers, ","), err)
	}
	return cl, nil
}

// kafkaError marks err ErrUnavailable unless Kafka answered with a code a retry would meet
// again (authorization, a bad request, a record too large).
func kafkaError(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) && !ke.Retriable {
		return err
	}
	if errors.Is(err, kgo.ErrClientClosed) {
		return err
	}
	return Unavailable(err)
}

// kafkaPartitions returns the partition count of topic, creating the topic with
// c.Partitions partitions (default 1) when it does not exist.
func kafkaPartitions(ctx context.Context, cl *kgo.Client, c KafkaConfig, topic string) (int, error) {
	for attempt := 0; ; attempt++ {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, Unavailable(fmt.Errorf("kafka topic %s: metadata from %s: %w", topic, strings.Join(c.Brokers, ","), err))
		}
		if len(resp.Topics) != 1 {
			return 0, Unavailable(fmt.Errorf("kafka topic %s: metadata names %d topics", topic, len(resp.Topics)))
		}
		t := resp.Topics[0]
		err = kerr.ErrorForCode(t.ErrorCode)
		if err == nil && len(t.Partitions) > 0 {
			return len(t.Partitions), nil
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, kafkaError(fmt.Errorf("kafka topic %s: %w", topic, err))
		}
		if attempt > 0 {
			if attempt > 20 {
				return 0, Unavailable(fmt.Errorf("kafka topic %s: created but has no partitions yet", topic))
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		n := c.Partitions
		if n <= 0 {
			n = 1
		}
		creq := kmsg.NewPtrCreateTopicsRequest()
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, int32(n), -1
		creq.Topics = append(creq.Topics, ct)
		creq.TimeoutMillis = 10000
		cresp, err := creq.RequestWith(ctx, cl)
		if err != nil {
			return 0, Unavailable(fmt.Errorf("kafka topic %s: create with %d partitions: %w", topic, n, err))
		}
		if len(cresp.Topics) == 1 {
			if err := kerr.ErrorForCode(cresp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return 0, kafkaError(fmt.Errorf("kafka topic %s: create with %d partitions: %w", topic, n, err))
			}
		}
	}
}

// KafkaSource reads a Kafka topic. Its splits are the partitions; each SplitReader has a
// client of its own that fetches its partition only. Safe for concurrent use.
type KafkaSource struct {
	cfg   KafkaConfig
	topic string
	admin *kgo.Client
	// Wait is how long one Read waits for records before returning none.
	Wait time.Duration
	// until, when set (Snapshot), is each partition's end: the source is bounded and a
	// split ends there.
	until []int64
}

// Snapshot makes the source bounded: each partition is read up to the end its committed
// records have now (its last stable offset), then its split ends (a pull query's view of
// a table's topic).
func (s *KafkaSource) Snapshot() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := kafkaPartitions(ctx, s.admin, s.cfg, s.topic)
	if err != nil {
		return err
	}
	until := make([]int64, n)
	for p := range until {
		if until[p], err = kafkaListOffset(ctx, s.admin, s.topic, int32(p), -1); err != nil {
			return err
		}
	}
	s.until = until
	return nil
}

// OpenKafkaSource opens topic on the cluster of c (creating it when missing).
func OpenKafkaSource(ctx context.Context, c KafkaConfig, topic string) (*KafkaSource, error) {
	cl, err := c.newClient()
	if err != nil {
		return nil, err
	}
	if _, err := kafkaPartitions(ctx, cl, c, topic); err != nil {
		cl.Close()
		return nil, err
	}
	return &KafkaSource{cfg: c, topic: topic, admin: cl, Wait: c.Wait}, nil
}

// Splits lists the partitions as "0".."n-1".
func (s *KafkaSource) Splits(ctx context.Context) ([]string, error) {
	n, err := kafkaPartitions(ctx, s.admin, s.cfg, s.topic)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out, nil
}

func (s *KafkaSource) Bounded() bool { return s.until != nil }

func (s *KafkaSource) Close() error {
	s.admin.Close()
	return nil
}

// Open reads partition split from offset (offset_reset = 'latest': offset 0 is the
// partition's end). An offset the partition no longer holds (retention) reads from its
// oldest record.
func (s *KafkaSource) Open(ctx context.Context, split string, offset int64) (SplitReader, error) {
	p, err := strconv.Atoi(split)
	if err != nil || p < 0 || p >= 1<<31-1 {
		return nil, fmt.Errorf("kafka topic %s has no partition %q", s.topic, split)
	}
	if offset < 0 {
		return nil, fmt.Errorf("kafka topic %s partition %d: offset %d is negative", s.topic, p, offset)
	}
	n, err := kafkaPartitions(ctx, s.admin, s.cfg, s.topic)
	if err != nil {
		return nil, err
	}
	if p >= n {
		return nil, fmt.Errorf("kafka topic %s has no partition %q (it has %d)", s.topic, split, n)
	}
	at := kgo.NewOffset().At(offset)
	if offset == 0 && s.cfg.Latest {
		at = kgo.NewOffset().AtEnd()
	}
	// primed: the partition holds nothing beyond offset (or the reader starts at its end).
	primed := true
	if !(offset == 0 && s.cfg.Latest) {
		end, err := kafkaListOffset(ctx, s.admin, s.topic, int32(p), -1)
		if err != nil {
			return nil, err
		}
		// franz-go would move an offset beyond the end back to the end: a checkpoint
		// ahead of the partition (a topic deleted and created again) is an error instead.
		if offset > end {
			start, _ := kafkaListOffset(ctx, s.admin, s.topic, int32(p), -2)
			return nil, fmt.Errorf("kafka topic %s partition %d: offset %d is out of range (the partition holds offsets %d to %d)", s.topic, p, offset, start, end)
		}
		primed = offset >= end
	}
	wait := s.Wait
	if wait <= 0 {
		wait = 200 * time.Millisecond
	}
	opts := []kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: {int32(p): at}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(max(wait, 100*time.Millisecond))}
	if s.until != nil {
		opts = append(opts, kgo.KeepControlRecords())
	}
	cl, err := s.cfg.newClient(opts...)
	if err != nil {
		return nil, err
	}
	r := &kafkaReader{s: s, cl: cl, part: int32(p), split: split, wait: wait, primed: primed, until: -1}
	if s.until != nil && p < len(s.until) {
		r.until = s.until[p]
	}
	r.hw.Store(-1)
	r.next.Store(offset)
	return r, nil
}

// kafkaListOffset asks for a partition's end (ts -1) or start (ts -2) offset.
func kafkaListOffset(ctx context.Context, cl *kgo.Client, topic string, p int32, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, Unavailable(fmt.Errorf("kafka topic %s partition %d: list offsets: %w", topic, p, err))
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if rp.Partition != p {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return 0, kafkaError(fmt.Errorf("kafka topic %s partition %d: list offsets: %w", topic, p, err))
			}
			return rp.Offset, nil
		}
	}
	return 0, fmt.Errorf("kafka topic %s has no partition %d", topic, p)
}

// kafkaReader reads one partition with a client of its own.
type kafkaReader struct {
	s     *KafkaSource
	cl    *kgo.Client
	part  int32
	split string
	wait  time.Duration
	held  []*kgo.Record
	// hw is the partition's high watermark (or last stable offset) in the latest fetch,
	// -1 before one; next the offset after the last record returned (for Lag).
	hw, next atomic.Int64
	closed   bool
	// primed is false while a partition that held records beyond the start offset when
	// the reader opened has not delivered any: its first Reads wait for them (up to
	// primeWait) rather than look idle while the client connects, which would let the
	// job's watermark pass the partition's records before they are read.
	primed    bool
	primeFrom time.Time
	// until is the partition's end for a bounded source (Snapshot), -1 for none. Its
	// client then keeps transaction markers, so that the offsets read reach the end even
	// when the last records before it are a marker (or aborted records and their marker).
	until int64
}

// primeWait bounds how long a reader's first Reads wait for a partition's first records.
const primeWait = 10 * time.Second

// Read appends up to max records. It returns none (and a nil error) when nothing arrived
// within the source's Wait.
func (r *kafkaReader) Read(ctx context.Context, buf []Message, max int) ([]Message, error) {
	if r.closed {
		return buf, fmt.Errorf("kafka topic %s partition %d: reader is closed", r.s.topic, r.part)
	}
	if max <= 0 {
		max = 32
	}
	for len(r.held) == 0 {
		if r.until >= 0 && r.next.Load() >= r.until {
			return buf, ErrEndOfSplit
		}
		pctx, cancel := context.WithTimeout(ctx, r.wait)
		fs := r.cl.PollRecords(pctx, max)
		cancel()
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ctx.Err() != nil {
			return buf, ctx.Err()
		}
		if ferr != nil {
			return buf, kafkaError(fmt.Errorf("kafka topic %s partition %d offset %d: fetch: %w", r.s.topic, r.part, r.next.Load(), ferr))
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Partition != r.part {
				return
			}
			if p.HighWatermark >= 0 {
				hw := p.HighWatermark
				if p.LastStableOffset >= 0 && p.LastStableOffset < hw {
					hw = p.LastStableOffset
				}
				r.hw.Store(hw)
			}
			r.held = append(r.held, p.Records...)
		})
		if len(r.held) > 0 || r.primed {
			break
		}
		if r.primeFrom.IsZero() {
			r.primeFrom = time.Now()
		} else if time.Since(r.primeFrom) > primeWait {
			r.primed = true // only aborted records or transaction markers, then
			break
		}
	}
	if len(r.held) > 0 {
		r.primed = true
	}
	n := min(max, len(r.held))
	for _, rec := range r.held[:n] {
		if rec.Attrs.IsControl() {
			continue // a transaction marker (kept only to reach a bounded source's end)
		}
		m := Message{Offset: rec.Offset, Key: rec.Key, Body: rec.Value, Timestamp: rec.Timestamp.UnixMilli(), Split: r.split}
		for _, h := range rec.Headers {
			if h.Key == kafkaIDHeader {
				m.ID = string(h.Value)
			}
		}
		buf = append(buf, m)
	}
	if n > 0 {
		r.next.Store(r.held[n-1].Offset + 1)
	}
	r.held = r.held[n:]
	if len(r.held) == 0 {
		r.held = nil
	}
	return buf, nil
}

// Lag is how many records the partition held beyond what was read, as of the latest fetch;
// -1 before the first.
func (r *kafkaReader) Lag() int64 {
	hw := r.hw.Load()
	if hw < 0 {
		return -1
	}
	return max(hw-r.next.Load(), 0)
}

func (r *kafkaReader) Close() error {
	if !r.closed {
		r.closed = true
		r.held = nil
		r.cl.Close()
	}
	return nil
}

// kafkaIDHeader is the record header that carries Message.ID.
const kafkaIDHeader = "rsql_id"

// KafkaSink writes a Kafka topic with an idempotent producer (at least once: a job started
// again from its checkpoint writes the records after it again). A keyed message goes to the
// partition Kafka's default partitioner picks for its key (murmur2, as Kafka's Java
// clients), so a key's records stay in order in one partition; Message.ID travels as header
// rsql_id. Safe for concurrent use.
type KafkaSink struct {
	cfg   KafkaConfig
	topic string
	cl    *kgo.Client

	mu  sync.Mutex
	err error // the first failed produce since the last Flush
}

// OpenKafkaSink opens topic for writing (creating it when missing).
func OpenKafkaSink(ctx context.Context, c KafkaConfig, topic string) (*KafkaSink, error) {
	cl, err := c.newClient(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordRetries(20), kgo.UnknownTopicRetries(20))
	if err != nil {
		return nil, err
	}
	if _, err := kafkaPartitions(ctx, cl, c, topic); err != nil {
		cl.Close()
		return nil, err
	}
	return &KafkaSink{cfg: c, topic: topic, cl: cl}, nil
}

func kafkaRecord(topic string, m Message) *kgo.Record {
	r := &kgo.Record{Topic: topic, Value: m.Body}
	if len(m.Body) == 0 && len(m.Key) > 0 {
		r.Value = nil // a tombstone: the key's delete in a changelog
	}
	if len(m.Key) > 0 {
		r.Key = m.Key
	}
	if m.ID != "" {
		r.Headers = []kgo.RecordHeader{{Key: kafkaIDHeader, Value: []byte(m.ID)}}
	}
	return r
}

// Write hands msgs to the producer; Flush waits until Kafka acknowledged them.
func (s *KafkaSink) Write(ctx context.Context, msgs []Message) error {
	for _, m := range msgs {
		s.cl.Produce(ctx, kafkaRecord(s.topic, m), s.done)
	}
	return nil
}

func (s *KafkaSink) done(_ *kgo.Record, err error) {
	if err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
}

// Flush waits until every record written is acknowledged, and reports the first that
// failed.
func (s *KafkaSink) Flush(ctx context.Context) error {
	if err := s.cl.Flush(ctx); err != nil {
		return Unavailable(fmt.Errorf("kafka topic %s: flush: %w", s.topic, err))
	}
	s.mu.Lock()
	err := s.err
	s.err = nil
	s.mu.Unlock()
	if err != nil {
		return kafkaError(fmt.Errorf("kafka topic %s: produce: %w", s.topic, err))
	}
	return nil
}

func (s *KafkaSink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Flush(ctx)
	s.cl.Close()
	return err
}
