package broker

// Inspection for operators (the web console): reads that change nothing, not even the
// consume counter.

// TopicGroupOffsets returns, for every consumer group with a committed offset in a queue of
// topicName, the committed next offset per queue.
func (b *Broker) TopicGroupOffsets(topicName string) map[string]map[int]int64 {
	out := map[string]map[int]int64{}
	for g, offs := range b.offsets.groups() {
		for k, o := range offs {
			t, q, ok := splitOffsetKey(k)
			if !ok || t != topicName {
				continue
			}
			if out[g] == nil {
				out[g] = map[int]int64{}
			}
			out[g][q] = o
		}
	}
	return out
}

// Peek reads up to maxN messages of a queue from offset on without counting them as
// consumed (MessagesServed) and without waiting. An offset below the queue's minimum starts
// at the minimum; at or beyond the end it returns nothing.
func (b *Broker) Peek(topicName string, queue int, offset int64, maxN int) ([]Message, error) {
	q, err := b.queue(topicName, queue)
	if err != nil {
		return nil, err
	}
	if maxN <= 0 {
		return nil, nil
	}
	var msgs []Message
	for len(msgs) < maxN {
		if m := q.min.Load(); offset < m {
			offset = m
		}
		if offset >= q.max.Load() {
			return msgs, nil
		}
		buf, n, next, st := b.readRaw(q, offset, maxN-len(msgs), 8<<20, nil, nil)
		switch st {
		case pullFound:
		case pullOffsetMoved:
			if next <= offset {
				return msgs, nil
			}
			offset = next
			continue
		default:
			return msgs, nil
		}
		for i := 0; i < n && len(buf) > 0; i++ {
			r, err := parseRecord(buf, 0)
			if err != nil {
				return msgs, err
			}
			msgs = append(msgs, r.message())
			buf = buf[r.size:]
		}
		offset = next
	}
	return msgs, nil
}
