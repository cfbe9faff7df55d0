package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
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
)

// ProduceCmd appends records to a topic through the RocketMQ protocol: --format json
// (default; one object per line) or csv (one record per line, no header).
type ProduceCmd struct {
	Topic string `arg:"" help:"Topic to append to (created on first send if the broker allows)."`
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

// recordReader yields one record (body and key) at a time.
type recordReader struct {
	sc     *bufio.Scanner
	format string
	key    string
	col    int
	line   int
}

func (r *recordReader) next() (body []byte, key string, err error) {
	for r.sc.Scan() {
		r.line++
		line := r.sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		body = append([]byte(nil), line...)
		if r.key == "" {
			return body, "", nil
		}
		if r.format == "csv" {
			rec, err := csv.NewReader(strings.NewReader(string(line))).Read()
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
	if err := r.sc.Err(); err != nil {
		return nil, "", fmt.Errorf("line %d: %v", r.line+1, err)
	}
	return nil, "", io.EOF
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
	rr := &recordReader{sc: bufio.NewScanner(in), format: format, key: c.Key}
	rr.sc.Buffer(make([]byte, 64<<10), 4<<20)
	if format == "csv" && c.Key != "" {
		if rr.col, err = strconv.Atoi(c.Key); err != nil || rr.col < 1 {
			return &exitError{fmt.Sprintf("--key %q: for CSV give a 1-based column number", c.Key)}
		}
	}
	sel := &keyQueueSelector{}
	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		producer.WithGroupName("rsql-produce"), producer.WithRetry(2), producer.WithQueueSelector(sel),
		producer.WithSendMsgTimeout(10*time.Second))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return &exitError{fmt.Sprintf("cannot start the producer: %v", err)}
	}
	defer p.Shutdown()

	start := time.Now()
	var records, bytes int64
	var limiter <-chan time.Time
	if c.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / c.Rate))
		defer t.Stop()
		limiter = t.C
	}
	ctx := context.Background()
	// Records go in batches of up to 256 records or 1 MiB. With a key, a batch is split by
	// queue and each part sent to its queue in order, so one key's records keep their order.
	sel.forced.Store(-1)
	type rec struct {
		msg *primitive.Message
		key string
	}
	var pending []rec
	pendingBytes := 0
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
		defer func() { pending, pendingBytes = pending[:0], 0 }()
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
	for {
		body, key, err := rr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return &exitError{fmt.Sprintf("reading records: %v", err)}
		}
		if limiter != nil {
			<-limiter
		}
		msg := primitive.NewMessage(c.Topic, body)
		if key != "" {
			msg.WithKeys([]string{key})
			msg.WithShardingKey(key)
		}
		records++
		bytes += int64(len(body))
		pending = append(pending, rec{msg, key})
		pendingBytes += len(body)
		if len(pending) >= 256 || pendingBytes >= 1<<20 || limiter != nil {
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
		records, bytes, c.Topic, secs, float64(records)/max(secs, 1e-9))
	return nil
}
