package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// ConsumeCmd prints a topic's records as JSON lines, or with --format table as an aligned
// table (columns: the records' fields in first-seen order) when it stops.
type ConsumeCmd struct {
	Topic         string        `arg:"" help:"Topic to read."`
	FromBeginning bool          `name:"from-beginning" help:"Start at the oldest retained record instead of new ones (when the group has no committed offset)."`
	Max           int           `name:"max" help:"Stop after this many records (0: no limit)."`
	IdleExit      time.Duration `name:"idle-exit" help:"Stop when nothing arrives for this long (0: never); before the first record, the client's start-up (queue assignment, about 5 s) does not count."`
	Group         string        `name:"group" help:"Commit offsets as this consumer group (default: a new group per run)."`
	Key           string        `name:"key" help:"Print the messages carrying this key (KEYS or client message id), found through the broker's key index, and exit." xor:"lookup"`
	MsgID         string        `name:"msg-id" help:"Print the message with this id (the send result's offset or client message id) and exit." xor:"lookup"`
}

func (c *ConsumeCmd) Run(cm *Common, cli *CLI) error {
	var tbl *recordTable
	switch cli.Format {
	case "", "json":
	case "table":
		tbl = &recordTable{}
	default:
		return &exitError{fmt.Sprintf("--format %s: consume prints json (JSON lines) or table", cli.Format)}
	}
	ns, err := nameServer(cm)
	if err != nil {
		return err
	}
	if c.Key != "" || c.MsgID != "" {
		return c.lookup(ns, tbl)
	}
	group := c.Group
	if group == "" {
		group = fmt.Sprintf("rsql-consume-%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	from := consumer.ConsumeFromLastOffset
	if c.FromBeginning {
		from = consumer.ConsumeFromFirstOffset
	}
	// With --max and --group, hand records over one at a time so exactly the printed ones are
	// committed; otherwise in batches.
	batch := 256
	if c.Max > 0 && c.Group != "" {
		batch = 1
	}
	pc, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		consumer.WithGroupName(group), consumer.WithConsumeFromWhere(from), consumer.WithConsumerOrder(true),
		consumer.WithInstance(fmt.Sprintf("consume-%d", os.Getpid())), consumer.WithPullBatchSize(256),
		consumer.WithConsumeMessageBatchMaxSize(batch))
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	var mu sync.Mutex
	count := 0
	activity := make(chan struct{}, 1)
	stop := make(chan struct{})
	var stopOnce sync.Once
	err = pc.Subscribe(c.Topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if c.Max > 0 && count >= c.Max {
			return consumer.SuspendCurrentQueueAMoment, nil
		}
		for i, m := range msgs {
			if c.Max > 0 && count >= c.Max {
				if i == 0 {
					// Leave it uncommitted for the next reader of this group.
					return consumer.SuspendCurrentQueueAMoment, nil
				}
				break
			}
			b := m.Body
			for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
				b = b[:len(b)-1]
			}
			if tbl != nil {
				tbl.add(b)
			} else {
				out.Write(b)
				out.WriteByte('\n')
			}
			count++
		}
		out.Flush()
		select {
		case activity <- struct{}{}:
		default:
		}
		if c.Max > 0 && count >= c.Max {
			stopOnce.Do(func() { close(stop) })
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return err
	}
	if err := pc.Start(); err != nil {
		return &exitError{fmt.Sprintf("cannot consume %s: %v (does the topic exist?)", c.Topic, err)}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var idle <-chan time.Time
	var idleT *time.Timer
	if c.IdleExit > 0 {
		idleT = time.NewTimer(c.IdleExit + 5*time.Second)
		idle = idleT.C
	}
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-sig:
			break loop
		case <-activity:
			if idleT != nil {
				idleT.Reset(c.IdleExit)
			}
		case <-idle:
			break loop
		}
	}
	pc.Shutdown()
	mu.Lock()
	if tbl != nil {
		tbl.print(out)
	}
	out.Flush()
	n := count
	mu.Unlock()
	fmt.Fprintf(os.Stderr, "consumed %d records from %s\n", n, c.Topic)
	return nil
}

// lookup prints the messages found by --key or --msg-id; finding none is exit status 1.
func (c *ConsumeCmd) lookup(ns string, tbl *recordTable) error {
	limit := 64
	if c.Max > 0 {
		limit = min(c.Max, 64)
	}
	msgs, err := lookupMessages(ns, c.Topic, c.Key, c.MsgID, limit)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		what := "key " + c.Key
		if c.MsgID != "" {
			what = "id " + c.MsgID
		}
		return &exitError{fmt.Sprintf("no message with %s in %s", what, c.Topic)}
	}
	out := bufio.NewWriter(os.Stdout)
	for _, m := range msgs {
		b, err := messageBody(m)
		if err != nil {
			return fmt.Errorf("message at offset %d of queue %d: %w", m.QueueOffset, m.Queue, err)
		}
		for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
			b = b[:len(b)-1]
		}
		if tbl != nil {
			tbl.add(b)
		} else {
			out.Write(b)
			out.WriteByte('\n')
		}
	}
	if tbl != nil {
		tbl.print(out)
	}
	return out.Flush()
}
