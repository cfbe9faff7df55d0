package nexmark

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"rsql/broker"
	"rsql/connectors"
	"rsql/planner"
)

// Through the broker (Config.ThroughBroker): before the job starts, every stream the query
// reads is written to a topic of a bundled broker (in a temporary directory), one queue per
// split, as the nexmark source's messages (format 'nexmark': the event numbers the decoder
// turns into rows); the job then reads the topics through the broker connector. The topics
// are read as bounded — a queue ends at the offset it had when the job started — so the job
// ends like the in-process one, with every window fired.

// topicName is the topic of a Nexmark stream.
func topicName(stream string) string { return "nexmark_" + stream }

// brokerStreams holds the broker and the queues' end offsets per stream.
type brokerStreams struct {
	b    *broker.Broker
	dir  string
	ends map[string][]int64 // stream -> end offset per queue
}

func (bs *brokerStreams) close() {
	bs.b.Close()
	os.RemoveAll(bs.dir)
}

// openBrokerStreams writes the streams the plan reads into topics of a new broker.
func openBrokerStreams(ctx context.Context, plan *planner.Physical, splits int) (*brokerStreams, error) {
	dir, err := os.MkdirTemp("", "rsql-nexmark-broker-")
	if err != nil {
		return nil, err
	}
	b, err := broker.Open(broker.Config{Dir: dir})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	bs := &brokerStreams{b: b, dir: dir, ends: map[string][]int64{}}
	for _, st := range plan.Stages {
		for _, in := range st.Inputs {
			if in.FromStage >= 0 || in.Connector != "nexmark" || bs.ends[in.Stream] != nil {
				continue
			}
			if err := bs.fill(ctx, in, splits); err != nil {
				bs.close()
				return nil, err
			}
		}
	}
	return bs, nil
}

// fill writes every event of one stream (all columns) to its topic.
func (bs *brokerStreams) fill(ctx context.Context, in planner.SourceSpec, splits int) error {
	topic := topicName(in.Stream)
	if err := bs.b.CreateTopic(topic, splits); err != nil {
		return err
	}
	src, err := connectors.OpenNexmarkSource(in.Options.Raw, in.Schema, nil)
	if err != nil {
		return err
	}
	defer src.Close()
	names, err := src.Splits(ctx)
	if err != nil {
		return err
	}
	if len(names) != splits {
		return fmt.Errorf("nexmark: stream %s has %d splits, want %d", in.Stream, len(names), splits)
	}
	ends := make([]int64, splits)
	for q, name := range names {
		r, err := src.Open(ctx, name, 0)
		if err != nil {
			return err
		}
		var msgs []connectors.Message
		batch := make([]broker.Message, 0, 1024)
		for {
			var rerr error
			msgs, rerr = r.Read(ctx, msgs[:0], 1024)
			batch = batch[:0]
			for i := range msgs {
				batch = append(batch, broker.Message{Body: msgs[i].Body})
			}
			if len(batch) > 0 {
				if _, err := bs.b.Append(topic, q, batch); err != nil {
					r.Close()
					return err
				}
			}
			if errors.Is(rerr, connectors.ErrEndOfSplit) {
				break
			}
			if rerr != nil {
				r.Close()
				return rerr
			}
		}
		r.Close()
		if ends[q], err = bs.b.MaxOffset(topic, q); err != nil {
			return err
		}
	}
	bs.ends[in.Stream] = ends
	return nil
}

// source is the job's source of a stream: its topic, read up to the end offsets.
func (bs *brokerStreams) source(spec planner.SourceSpec) (connectors.Source, error) {
	ends := bs.ends[spec.Stream]
	if ends == nil {
		return nil, fmt.Errorf("nexmark: stream %s was not written to the broker", spec.Stream)
	}
	s, err := connectors.OpenBrokerSource(bs.b, topicName(spec.Stream), len(ends))
	if err != nil {
		return nil, err
	}
	return &boundedTopic{BrokerSource: s, ends: ends}, nil
}

// boundedTopic reads a topic's queues up to fixed end offsets.
type boundedTopic struct {
	*connectors.BrokerSource
	ends []int64
}

func (t *boundedTopic) Bounded() bool { return true }

func (t *boundedTopic) Open(ctx context.Context, split string, offset int64) (connectors.SplitReader, error) {
	q, err := strconv.Atoi(split)
	if err != nil || q < 0 || q >= len(t.ends) {
		return nil, fmt.Errorf("nexmark: no queue %q", split)
	}
	r, err := t.BrokerSource.Open(ctx, split, offset)
	if err != nil {
		return nil, err
	}
	return &boundedReader{r: r, next: offset, end: t.ends[q]}, nil
}

type boundedReader struct {
	r         connectors.SplitReader
	next, end int64
}

func (r *boundedReader) Read(ctx context.Context, buf []connectors.Message, max int) ([]connectors.Message, error) {
	if r.next >= r.end {
		return buf, connectors.ErrEndOfSplit
	}
	n := len(buf)
	buf, err := r.r.Read(ctx, buf, int(min(int64(max), r.end-r.next)))
	if len(buf) > n {
		r.next = buf[len(buf)-1].Offset + 1
	}
	return buf, err
}

func (r *boundedReader) Close() error { return r.r.Close() }
