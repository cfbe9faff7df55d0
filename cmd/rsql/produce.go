package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	rocketmq "github.com/apache/rocketmq-client-go/v2"

	"rsql/connectors"
)

// ProduceCmd appends records to a topic through the RocketMQ protocol: --format json
// (default; one object per line) or csv (one record per line, no header).
type ProduceCmd struct {
	Topic string `arg:"" help:"Topic to append to (created with 4 queues, spread over the brokers of the name server's cluster, if it does not exist)."`
	BrokerClientFlags
	File   string  `short:"f" name:"file" help:"Read the records from this file (default: standard input)." type:"existingfile"`
	Format string  `name:"format" enum:"json,csv" default:"json" help:"Input format: json (one JSON object per line) or csv (one record per line, no header)."`
	Key    string  `name:"key" help:"Field used as the message key: a JSON field name, or a 1-based CSV column. queue = hash(key) mod queues."`
	Rate   float64 `name:"rate" help:"Cap records per second (0: no cap)."`
}

// quietLogger drops the RocketMQ client's logs; rsql reports errors itself.
type quietLogger struct{}

func (quietLogger) Debug(string, map[string]interface{})   {}
func (quietLogger) Info(string, map[string]interface{})    {}
func (quietLogger) Warning(string, map[string]interface{}) {}
func (quietLogger) Error(string, map[string]interface{})   {}
func (quietLogger) Fatal(string, map[string]interface{})   {}
func (quietLogger) Level(string)                           {}
func (quietLogger) OutputPath(string) error                { return nil }

// nameServer resolves the name server to use and checks that something answers there.
func nameServer(cm *BrokerClientFlags) (string, error) {
	rlog.SetLogger(quietLogger{})
	if _, err := cm.Credentials(); err != nil {
		return "", err
	}
	addr, hint := cm.NamesrvAddr, "start one with `rsql server` (or `rsql broker`)"
	if cm.Namesrv != "" {
		addr, hint = strings.TrimPrefix(cm.Namesrv, "http://"), "check --namesrv"
	}
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return "", &exitError{fmt.Sprintf("name server address %q is not valid: %v", addr, err)}
	}
	c, err := net.DialTimeout("tcp", ta.String(), 2*time.Second)
	if err != nil {
		return "", &exitError{fmt.Sprintf("no broker answers at %s: %s", addr, hint)}
	}
	c.Close()
	return ta.String(), nil
}

// keyQueueSelector picks the queue of a send: the forced one when set (a batch of one
// key's queue), hash(sharding key) mod queues for a single keyed message, else round-robin.
// It remembers the queue count it saw.
type keyQueueSelector struct {
	forced atomic.Int64 // -1: none
	queues atomic.Int64
	n      atomic.Uint64
}

func (s *keyQueueSelector) Select(msg *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	s.queues.Store(int64(len(mqs)))
	if f := s.forced.Load(); f >= 0 && int(f) < len(mqs) {
		return mqs[f]
	}
	if k := msg.GetShardingKey(); k != "" {
		return mqs[keyQueue(k, len(mqs))]
	}
	return mqs[int(s.n.Add(1)%uint64(len(mqs)))]
}

// keyQueue is rsql produce's partitioning: FNV-1a of the key mod the queue count.
func keyQueue(key string, queues int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(queues))
}

// maxRecordBytes is the longest line (record) produce sends: the broker stores a message of
// at most 4 MiB with its topic, key and properties (broker.Config.MaxMessageSize, Apache
// RocketMQ's maxMessageSize), and 4 KiB is left for those. docs/cli.md states it.
const maxRecordBytes = 4<<20 - 4<<10

// errRecordTooLong is the error of a line over maxRecordBytes.
type errRecordTooLong struct {
	line int
	size int64
}

func (e *errRecordTooLong) Error() string {
	return fmt.Sprintf("line %d is %d bytes, over the limit of %d bytes for one record (a message holds at most 4 MiB with its topic, key and properties)", e.line, e.size, maxRecordBytes)
}

// recordReader yields one record (body and key) at a time: a line of its input, without
// the line end. Empty lines are skipped.
type recordReader struct {
	br     *bufio.Reader
	format string
	key    string
	col    int
	line   int
	buf    []byte
}

// readLine returns the next line (valid until the next call), or io.EOF. A line longer than
// maxRecordBytes is read to its end and reported as *errRecordTooLong.
func (r *recordReader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	var size int64   // bytes of the line, its line end included
	var last [2]byte // the line's last two bytes
	for {
		chunk, err := r.br.ReadSlice('\n')
		size += int64(len(chunk))
		for _, c := range chunk[max(0, len(chunk)-2):] {
			last[0], last[1] = last[1], c
		}
		if size <= maxRecordBytes+2 { // room for "\r\n"
			r.buf = append(r.buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if size == 0 && errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		r.line++
		n := size
		if last[1] == '\n' {
			n--
			if last[0] == '\r' && n > 0 {
				n--
			}
		}
		if n > maxRecordBytes {
			return nil, &errRecordTooLong{line: r.line, size: n}
		}
		return r.buf[:n], nil
	}
}

func (r *recordReader) next() (body []byte, key string, err error) {
	for {
		line, err := r.readLine()
		if err == io.EOF {
			return nil, "", io.EOF
		}
		if err != nil {
			var tl *errRecordTooLong
			if errors.As(err, &tl) {
				return nil, "", err
			}
			return nil, "", fmt.Errorf("line %d: %v", r.line+1, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		body = append([]byte(nil), line...)
		if r.key == "" {
			return body, "", nil
		}
		if r.format == "csv" {
			rec, err := csv.NewReader(bytes.NewReader(line)).Read()
			if err != nil {
				return nil, "", fmt.Errorf("line %d: %v", r.line, err)
			}
			if r.col > len(rec) {
				return nil, "", fmt.Errorf("line %d: no column %d for --key", r.line, r.col)
			}
			return body, rec[r.col-1], nil
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err != nil {
			return nil, "", fmt.Errorf("line %d: not a JSON object: %v", r.line, err)
		}
		raw, ok := obj[r.key]
		if !ok {
			return body, "", nil
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return body, s, nil
		}
		return body, string(raw), nil
	}
}

// pacer spaces sends so that on average at most rate records per second go out: a batch
// whose first record is the n-th (0-based) goes out no earlier than start + n/rate. Batches
// are as large as a fiftieth of a second's records (at least 1, at most the send batch),
// so a high rate is reached with few round trips and a low one record by record.
type pacer struct {
	rate  float64
	start time.Time
}

// batch is the number of records to send at once.
func (p *pacer) batch(max int) int {
	if p == nil {
		return max
	}
	return min(max, int(p.rate/50)+1)
}

// due is when, after start, a batch starting with record n (0-based) may go.
func (p *pacer) due(n int64) time.Duration {
	return time.Duration(float64(n) / p.rate * float64(time.Second))
}

// wait sleeps until a batch starting with record n may go.
func (p *pacer) wait(n int64) {
	if p == nil {
		return
	}
	if d := time.Until(p.start.Add(p.due(n))); d > 0 {
		time.Sleep(d)
	}
}

func (c *ProduceCmd) Run() error {
	format := c.Format
	file := c.File
	ns, err := nameServer(&c.BrokerClientFlags)
	if err != nil {
		return err
	}
	in := io.Reader(os.Stdin)
	var size int64 = -1
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
	}
	var bar *progressbar.ProgressBar
	if size >= 0 && term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.DefaultBytes(size, "producing "+c.Topic)
		in = io.TeeReader(in, bar)
	}
	rr := &recordReader{br: bufio.NewReaderSize(in, 256<<10), format: format, key: c.Key}
	if format == "csv" && c.Key != "" {
		if rr.col, err = strconv.Atoi(c.Key); err != nil || rr.col < 1 {
			return &exitError{fmt.Sprintf("--key %q: for CSV give a 1-based column number", c.Key)}
		}
	}
	// A missing topic is created through the name server, its queues spread over the
	// cluster's brokers (one broker for the bundled one), as the engine creates its topics.
	creds, err := c.Credentials()
	if err != nil {
		return err
	}
	// Creating one is said on stderr, with its queues: a mistyped name must not pass as a
	// topic that was there.
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	rcfg := connectors.RocketMQConfig{NameServer: ns, Credentials: creds}
	_, err = connectors.EnsureRocketMQTopic(cctx, rcfg, c.Topic, 4)
	if errors.Is(err, connectors.ErrNoTopicRoute) {
		rcfg.CreateTopics = true
		var queues int
		if queues, err = connectors.EnsureRocketMQTopic(cctx, rcfg, c.Topic, 4); err == nil {
			fmt.Fprintf(os.Stderr, "created topic %s with %d queues (it did not exist at name server %s)\n", c.Topic, queues, ns)
		}
	}
	cancel()
	if err != nil {
		return &exitError{fmt.Sprintf("topic %s: %v", c.Topic, err)}
	}
	sel := &keyQueueSelector{}
	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		producer.WithGroupName("rsql-produce"), producer.WithRetry(2), producer.WithQueueSelector(sel),
		producer.WithSendMsgTimeout(10*time.Second), producer.WithCredentials(primitive.Credentials{
			AccessKey: c.AccessKey, SecretKey: c.SecretKey}))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return &exitError{fmt.Sprintf("cannot start the producer: %v", err)}
	}
	defer p.Shutdown()

	start := time.Now()
	var records, sentBytes int64
	var pace *pacer
	if c.Rate > 0 {
		pace = &pacer{rate: c.Rate, start: start}
	}
	ctx := context.Background()
	// Records go in batches of up to 256 records or 1 MiB (fewer with --rate). With a key, a
	// batch is split by queue and each part sent to its queue in order, so one key's records
	// keep their order.
	sel.forced.Store(-1)
	type rec struct {
		msg *primitive.Message
		key string
	}
	var pending []rec
	pendingBytes := 0
	var sent int64 // records sent so far
	sendTo := func(q int, msgs []*primitive.Message) error {
		sel.forced.Store(int64(q))
		defer sel.forced.Store(-1)
		_, err := p.SendSync(ctx, msgs...)
		return err
	}
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		pace.wait(sent)
		defer func() { sent += int64(len(pending)); pending, pendingBytes = pending[:0], 0 }()
		if c.Key == "" {
			msgs := make([]*primitive.Message, len(pending))
			for i, r := range pending {
				msgs[i] = r.msg
			}
			_, err := p.SendSync(ctx, msgs...)
			return err
		}
		n := int(sel.queues.Load())
		if n == 0 {
			// Learn the queue count with the first record.
			if _, err := p.SendSync(ctx, pending[0].msg); err != nil {
				return err
			}
			pending = pending[1:]
			sent++
			if n = int(sel.queues.Load()); n == 0 {
				return fmt.Errorf("no queues for topic %s", c.Topic)
			}
		}
		buckets := make([][]*primitive.Message, n)
		var order []int
		for _, r := range pending {
			q := keyQueue(r.key, n)
			if len(buckets[q]) == 0 {
				order = append(order, q)
			}
			buckets[q] = append(buckets[q], r.msg)
		}
		for _, q := range order {
			if err := sendTo(q, buckets[q]); err != nil {
				return err
			}
		}
		return nil
	}
	batch := pace.batch(256)
	for {
		body, key, err := rr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			// Stop at the bad line, after sending every record before it: nothing is
			// dropped silently, and the message says where to go on from.
			if ferr := flush(); ferr != nil {
				return &exitError{fmt.Sprintf("sending to %s: %v", c.Topic, ferr)}
			}
			return &exitError{fmt.Sprintf("%v: stopped there; the %d records before it were sent to %s, nothing after", err, sent, c.Topic)}
		}
		msg := primitive.NewMessage(c.Topic, body)
		if key != "" {
			msg.WithKeys([]string{key})
			msg.WithShardingKey(key)
		}
		records++
		sentBytes += int64(len(body))
		pending = append(pending, rec{msg, key})
		pendingBytes += len(body)
		if len(pending) >= batch || pendingBytes >= 1<<20 {
			if err := flush(); err != nil {
				return &exitError{fmt.Sprintf("sending to %s: %v", c.Topic, err)}
			}
		}
	}
	if err := flush(); err != nil {
		return &exitError{fmt.Sprintf("sending to %s: %v", c.Topic, err)}
	}
	if bar != nil {
		bar.Finish()
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "produced %d records (%d bytes) to %s in %.2fs (%.0f records/s)\n",
		records, sentBytes, c.Topic, secs, float64(records)/max(secs, 1e-9))
	return nil
}
