package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"rsql/connectors"
)

// ConsumeCmd prints a topic's records as JSON lines, or with --format table as an aligned
// table (columns: the records' fields in first-seen order) when it stops.
//
// It pulls each queue itself (connectors.RocketMQSource) from the offsets it chose: with
// --group, the group's committed offsets; otherwise the oldest retained record
// (--from-beginning) or the end. With --group it commits, synchronously and just before it
// exits, the offset after the last record it printed of each queue: exactly the printed
// records count as consumed, whatever was read ahead is not (docs/cli.md).
type ConsumeCmd struct {
	Topic         string        `arg:"" help:"Topic to read."`
	FromBeginning bool          `name:"from-beginning" help:"Start at the oldest retained record instead of new ones (when the group has no committed offset)."`
	Max           int           `name:"max" help:"Stop after this many records (0: no limit)."`
	IdleExit      time.Duration `name:"idle-exit" help:"Stop when nothing arrives for this long (0: never)."`
	Group         string        `name:"group" help:"Start at this consumer group's committed offsets and commit the printed records' offsets to it at the end (default: commit nothing)."`
	Format        string        `name:"format" enum:"json,table" default:"json" help:"Output: json (JSON lines as they arrive) or table (an aligned table when it stops)."`
	Key           string        `name:"key" help:"Print the messages carrying this key (KEYS or client message id), found through the broker's key index, and exit." xor:"lookup"`
	MsgID         string        `name:"msg-id" help:"Print the message with this id (the send result's offset or client message id) and exit." xor:"lookup"`
	BrokerClientFlags
}

// consumed is one queue's batch handed from its reader to the printer.
type consumed struct {
	split int
	msgs  []connectors.Message
	err   error
}

func (c *ConsumeCmd) Run() error {
	var tbl *recordTable
	if c.Format == "table" {
		tbl = &recordTable{}
	}
	ns, err := nameServer(&c.BrokerClientFlags)
	if err != nil {
		return err
	}
	if c.Key != "" || c.MsgID != "" {
		return c.lookup(ns, tbl)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	n, err := consumeTopic(ctx, ns, c, func(body []byte) {
		for len(body) > 0 && (body[len(body)-1] == '\n' || body[len(body)-1] == '\r') {
			body = body[:len(body)-1]
		}
		if tbl != nil {
			tbl.add(body)
			return
		}
		out.Write(body)
		out.WriteByte('\n')
	}, func() { out.Flush() })
	if tbl != nil {
		tbl.print(out)
	}
	out.Flush()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "consumed %d records from %s\n", n, c.Topic)
	return nil
}

// noTopicMessage says, once, that the name server knows no topic of that name.
func noTopicMessage(verb, topic, ns string) string {
	return fmt.Sprintf("cannot %s %s: name server %s has no route for it: the topic does not exist (rsql produce or CREATE STREAM creates one), or every broker holding it is down", verb, topic, ns)
}

// consumeTopic reads c.Topic at name server ns and hands each record's body to emit (flush
// after each batch) until c.Max records, c.IdleExit without records or ctx's end; then, with
// c.Group, it commits what was emitted. It returns the number of records emitted.
func consumeTopic(ctx context.Context, ns string, c *ConsumeCmd, emit func([]byte), flush func()) (int, error) {
	creds, _ := c.Credentials() // checked by nameServer
	cfg := connectors.RocketMQConfig{NameServer: ns, Group: "rsql-consume", Credentials: creds}
	src, err := connectors.OpenRocketMQSource(ctx, cfg, c.Topic, 0)
	if errors.Is(err, connectors.ErrNoTopicRoute) {
		return 0, &exitError{noTopicMessage("consume", c.Topic, ns)}
	}
	if err != nil {
		return 0, &exitError{fmt.Sprintf("cannot consume %s: %v", c.Topic, err)}
	}
	defer src.Close()
	splits, err := src.Splits(ctx)
	if err != nil {
		return 0, &exitError{fmt.Sprintf("cannot consume %s: %v", c.Topic, err)}
	}
	offs, err := connectors.OpenGroupOffsets(ctx, cfg, c.Group, c.Topic)
	if err != nil {
		return 0, &exitError{fmt.Sprintf("cannot consume %s: %v", c.Topic, err)}
	}
	if offs.Queues() != len(splits) {
		return 0, &exitError{fmt.Sprintf("cannot consume %s: the route changed while starting (%d queues, then %d): try again", c.Topic, len(splits), offs.Queues())}
	}
	// next[i] is the offset after the last record of queue i that was emitted; start[i]
	// where reading began.
	start := make([]int64, len(splits))
	for i := range splits {
		from, ok := int64(0), false
		if c.Group != "" {
			if from, ok, err = offs.Committed(ctx, i); err != nil {
				return 0, &exitError{err.Error()}
			}
		}
		if !ok && !c.FromBeginning {
			if from, err = offs.End(ctx, i); err != nil {
				return 0, &exitError{err.Error()}
			}
		}
		start[i] = from
	}
	next := append([]int64(nil), start...)

	rctx, cancel := context.WithCancel(ctx)
	ch := make(chan consumed, 2*len(splits))
	var wg sync.WaitGroup
	for i, sp := range splits {
		r, err := src.Open(rctx, sp, start[i])
		if err != nil {
			cancel()
			wg.Wait()
			return 0, &exitError{fmt.Sprintf("cannot consume %s: %v", c.Topic, err)}
		}
		wg.Add(1)
		go func(i int, r connectors.SplitReader) {
			defer wg.Done()
			defer r.Close()
			for rctx.Err() == nil {
				msgs, err := r.Read(rctx, nil, 256)
				if rctx.Err() != nil {
					return
				}
				if len(msgs) == 0 && err == nil {
					continue
				}
				select {
				case ch <- consumed{split: i, msgs: msgs, err: err}:
				case <-rctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}(i, r)
	}

	count := 0
	var idle <-chan time.Time
	var idleT *time.Timer
	if c.IdleExit > 0 {
		idleT = time.NewTimer(c.IdleExit)
		defer idleT.Stop()
		idle = idleT.C
	}
	var readErr error
loop:
	for c.Max <= 0 || count < c.Max {
		select {
		case b := <-ch:
			if b.err != nil {
				readErr = &exitError{fmt.Sprintf("consuming %s: %v", c.Topic, b.err)}
				break loop
			}
			for _, m := range b.msgs {
				if c.Max > 0 && count >= c.Max {
					break
				}
				emit(m.Body)
				next[b.split] = m.Offset + 1
				count++
			}
			flush()
			if idleT != nil {
				idleT.Reset(c.IdleExit)
			}
		case <-idle:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	cancel()
	wg.Wait()
	if c.Group != "" {
		// Exactly the emitted records: what readers fetched beyond them stays for the next
		// reader of the group. A commit cut short by a signal would lose nothing either
		// (those records are read again), so it runs to its end.
		for i := range splits {
			if next[i] == start[i] {
				continue
			}
			if err := offs.Commit(context.Background(), i, next[i]); err != nil {
				return count, &exitError{fmt.Sprintf("printed %d records but could not commit their offsets for group %s: %v", count, c.Group, err)}
			}
		}
	}
	return count, readErr
}

// lookup prints the messages found by --key or --msg-id; finding none is exit status 1.
func (c *ConsumeCmd) lookup(ns string, tbl *recordTable) error {
	limit := 64
	if c.Max > 0 {
		limit = min(c.Max, 64)
	}
	creds, _ := c.Credentials() // checked by nameServer
	msgs, err := lookupMessages(ns, creds, c.Topic, c.Key, c.MsgID, limit)
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
