package broker

import (
	"strconv"
	"time"
)

// Delayed delivery: a message with DELAY=n (1 <= n <= len(DelayLevels)) is parked in queue
// n-1 of SCHEDULE_TOPIC_XXXX with REAL_TOPIC and REAL_QID properties; its index entry's tag
// field holds its store time. The scheduler moves due messages to their real queue and
// commits its position as the offsets of group %SCHEDULE%, so delivery survives restarts
// (at least once: a crash between the move and the commit delivers a message twice).

// redirectDelay rewrites m to the schedule topic when it asks for a delay.
func (b *Broker) redirectDelay(m *inMsg) {
	if m.topic == scheduleTopic || m.topic == halfTopic || len(m.props) == 0 {
		return
	}
	d := propValue(m.props, PropDelay)
	if d == "" {
		return
	}
	level, err := strconv.Atoi(d)
	if err != nil || level <= 0 {
		return
	}
	level = min(level, len(b.cfg.DelayLevels))
	p := DecodeProperties(m.props)
	p[PropRealTopic] = m.topic
	p[PropRealQueue] = strconv.Itoa(m.queue)
	p[PropDelay] = strconv.Itoa(level)
	m.props = EncodeProperties(p)
	m.topic = scheduleTopic
	m.queue = level - 1
}

func (b *Broker) scheduler() {
	defer b.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-t.C:
		}
		for level := range b.cfg.DelayLevels {
			b.deliverDue(level)
		}
	}
}

func (b *Broker) deliverDue(level int) {
	q, err := b.queue(scheduleTopic, level)
	if err != nil {
		return
	}
	off, _ := b.QueryOffset(scheduleGroup, scheduleTopic, level)
	off = max(off, q.min.Load())
	delay := b.cfg.DelayLevels[level].Milliseconds()
	for off < q.max.Load() {
		phys, _, storeTS, ok := q.get(off)
		if !ok || storeTS+delay > time.Now().UnixMilli() {
			break
		}
		r, err := b.cl.readRecord(phys)
		if err != nil {
			b.cfg.Logger.Error("delayed message unreadable; skipped", "offset", off, "err", err)
			off++
			continue
		}
		p := DecodeProperties(r.props)
		real := p[PropRealTopic]
		qid, err := realQueue(p)
		if err != nil {
			b.cfg.Logger.Error("delayed message target queue malformed; skipped", "topic", real, "offset", off, "err", err)
			off++
			continue
		}
		delete(p, PropRealTopic)
		delete(p, PropRealQueue)
		delete(p, PropDelay)
		if _, err := b.ensureTopic(real, qid+1, PermRead|PermWrite); err != nil {
			b.cfg.Logger.Error("delayed message target invalid; skipped", "topic", real, "err", err)
			off++
			continue
		}
		m := inMsg{topic: real, queue: qid, flag: r.flag, sysFlag: r.sysFlag, bornTS: r.bornTS,
			bornHost: r.bornHost, reconsume: r.reconsume, body: r.body, props: EncodeProperties(p),
			tagsCode: TagsCode(p[PropTags])}
		if _, err := b.put([]inMsg{m}); err != nil {
			return
		}
		off++
		b.CommitOffset(scheduleGroup, scheduleTopic, level, off)
	}
}
