package server

import (
	"context"
	"strconv"
	"sync"

	"rsql/connectors"
	"rsql/planner"
)

// dlqWriters shares dead-letter outputs: one writer per target (connector and topic or
// path) for the whole engine, however many jobs and push queries read the streams that
// send bad records there. The copy of the record read at (stream, split, offset) gets the id
// "<stream>/<split>/<offset>" (Message.ID, stored with the message on a topic, so it names
// the stream), and an id already written is skipped: each bad record is in the dead-letter
// output once. The ids written are kept in memory; a topic's are read back when its writer
// opens, so a job started again after a crash does not copy a record twice either (a file
// cannot store ids: there the guarantee holds within one process). docs/sql.md, "Bad and
// late records", states it for users. mu guards m and every writer's refs.
type dlqWriters struct {
	mu sync.Mutex
	m  map[string]*dlqWriter
}

// dlqWriter is one shared dead-letter output. wmu guards sink and seen.
type dlqWriter struct {
	key  string
	refs int // guarded by dlqWriters.mu

	wmu  sync.Mutex
	sink connectors.Sink
	seen map[string]struct{}
}

// open returns a handle on the shared writer of spec's target for the bad records of
// stream, opening it with openSink on first use.
func (d *dlqWriters) open(spec planner.SinkSpec, stream string, openSink func(planner.SinkSpec) (connectors.Sink, error)) (connectors.Sink, error) {
	key := spec.Connector + "\x00" + spec.Options.Topic + "\x00" + spec.Options.Path
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.m[key]; w != nil {
		w.refs++
		return &dlqHandle{d: d, w: w, stream: stream}, nil
	}
	inner := spec
	inner.DLQOf = ""
	sink, err := openSink(inner)
	if err != nil {
		return nil, err
	}
	w := &dlqWriter{key: key, refs: 1, sink: sink, seen: map[string]struct{}{}}
	if err := readIDs(sink, func(id string) { w.seen[id] = struct{}{} }); err != nil {
		sink.Close()
		return nil, err
	}
	if d.m == nil {
		d.m = map[string]*dlqWriter{}
	}
	d.m[key] = w
	return &dlqHandle{d: d, w: w, stream: stream}, nil
}

// readIDs calls fn with the id of every message a topic sink already holds.
func readIDs(sink connectors.Sink, fn func(string)) error {
	t, ok := sink.(interface {
		Queues() int
		IDsSince(ctx context.Context, pos []byte, prefix string, fn func(id string)) error
	})
	if !ok {
		return nil
	}
	return t.IDsSince(context.Background(), connectors.OriginPosition(t.Queues()), "", fn)
}

// dlqHandle is one job's (one stream's) use of a shared dead-letter writer.
type dlqHandle struct {
	d      *dlqWriters
	w      *dlqWriter
	stream string
	closed bool
}

// Write writes the messages no one has written yet, with their ids.
func (h *dlqHandle) Write(ctx context.Context, msgs []connectors.Message) error {
	w := h.w
	w.wmu.Lock()
	defer w.wmu.Unlock()
	out := make([]connectors.Message, 0, len(msgs))
	var added []string
	for _, m := range msgs {
		if m.Split != "" {
			m.ID = h.stream + "/" + m.Split + "/" + strconv.FormatInt(m.Offset, 10)
			if _, dup := w.seen[m.ID]; dup {
				continue
			}
			w.seen[m.ID] = struct{}{}
			added = append(added, m.ID)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil
	}
	if err := w.sink.Write(ctx, out); err != nil {
		for _, id := range added {
			delete(w.seen, id)
		}
		return err
	}
	return nil
}

func (h *dlqHandle) Flush(ctx context.Context) error {
	h.w.wmu.Lock()
	defer h.w.wmu.Unlock()
	return h.w.sink.Flush(ctx)
}

// Close releases the handle; the last one closes the shared writer.
func (h *dlqHandle) Close() error {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	h.w.refs--
	if h.w.refs > 0 {
		h.w.wmu.Lock()
		defer h.w.wmu.Unlock()
		return h.w.sink.Flush(context.Background())
	}
	delete(h.d.m, h.w.key)
	h.w.wmu.Lock()
	defer h.w.wmu.Unlock()
	return h.w.sink.Close()
}
