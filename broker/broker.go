package broker

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"rsql/internal/durable"
)

// Errors returned by the in-process API; match them with errors.Is.
var (
	ErrClosed           = errors.New("broker: closed")
	ErrTopicNotExist    = errors.New("broker: topic does not exist")
	ErrInvalidTopic     = errors.New("broker: invalid topic name (want [%|a-zA-Z0-9_-], at most 127 characters)")
	ErrInvalidQueue     = errors.New("broker: queue id out of range")
	ErrMessageTooLarge  = errors.New("broker: message too large")
	ErrOffsetOutOfRange = errors.New("broker: offset beyond the end of the queue")
	ErrLocked           = errors.New("broker: store directory is used by another process")
	// ErrNotFound: a lookup (key index, view by offset) found nothing.
	ErrNotFound = errors.New("broker: no such message")
	// EndTransaction: no prepared message there, or not the one described.
	ErrTxnNotFound = errors.New("broker: no prepared transactional message at that commit-log offset")
	ErrTxnMismatch = errors.New("broker: end of transaction does not match its prepared message")
	// SetTransactionChecker: the producer group has an in-process checker already.
	ErrTxnChecker = errors.New("broker: the producer group already has an in-process transaction checker")
	// Replication: a slave refuses writes; with sync replication an append is stored but
	// not (yet) on a slave.
	ErrReadOnly          = errors.New("broker: this broker is a slave and takes no writes")
	ErrSlaveNotAvailable = errors.New("broker: stored, but no slave is connected to replicate it (sync replication)")
	ErrSlaveTimeout      = errors.New("broker: stored, but no slave confirmed it in time (sync replication)")
	// ErrACLFile: the access-control file cannot be read or parsed (the error says where).
	ErrACLFile = errors.New("broker: ACL file")
)

const (
	scheduleTopic = "SCHEDULE_TOPIC_XXXX"
	scheduleGroup = "%SCHEDULE%"
	// PermRead and PermWrite are topic permission bits.
	PermRead  = 4
	PermWrite = 2
)

// TopicInfo describes a topic.
type TopicInfo struct {
	Name   string `json:"name"`
	Queues int    `json:"queues"`
	Perm   int    `json:"perm"`
}

type topic struct {
	info   TopicInfo
	queues []*consumeQueue
}

// Broker is the store plus, after Serve, the network front end. All methods are safe for
// concurrent use.
type Broker struct {
	// served counts messages handed out by pulls (in-process and over the protocol).
	served atomic.Int64

	cfg      Config
	cl       *commitLog
	lockFile io.Closer

	// wmu is the single writer: it serialises reserve/encode/index/publish.
	wmu sync.Mutex

	tmu    sync.RWMutex
	topics map[string]*topic

	offsets *offsetStore

	storeHost atomic.Value // netip.AddrPort

	ckmu      sync.Mutex // serialises checkpoints
	indexFrom int64      // commit-log offset the flushed index covered at the last checkpoint

	fmu       sync.Mutex
	fcond     *sync.Cond
	fkick     chan struct{}
	ferr      error
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
	wg        sync.WaitGroup

	txn   *txnStore
	stats *brokerStats
	subs  *subGroups
	replM *replMaster // a master's slaves
	repl  replSlave   // a slave's link to its master

	lwmu     sync.Mutex
	lwait    chan struct{} // closed when the log grows; nil when nobody waits
	lwaiting atomic.Bool   // lwait != nil, read without lwmu by appends
	idx      *indexService // nil when Config.DisableIndex

	net *netServer
	// topicsChanged is poked (never blocking) when the topic table changes, so that a
	// broker registered with name servers registers again at once (register.go).
	topicsChanged chan struct{}
}

// Open opens (creating if needed) the store in cfg.Dir and recovers it.
func Open(cfg Config) (*Broker, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.fs.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b := &Broker{cfg: cfg, topics: map[string]*topic{}, topicsChanged: make(chan struct{}, 1), txn: newTxnStore(), stats: newBrokerStats(), replM: newReplMaster(),
		fkick: make(chan struct{}, 1), done: make(chan struct{})}
	b.fcond = sync.NewCond(&b.fmu)
	b.storeHost.Store(netip.MustParseAddrPort("127.0.0.1:10911"))
	lf, err := lockDir(cfg.fs, cfg.Dir)
	if err != nil {
		return nil, err
	}
	b.lockFile = lf
	committed, err := b.load()
	if err != nil {
		b.closeFiles()
		return nil, err
	}
	if _, err := b.ensureTopic(scheduleTopic, len(cfg.DelayLevels), PermRead|PermWrite); err != nil {
		b.closeFiles()
		return nil, err
	}
	if err := b.loadTransactions(committed); err != nil {
		b.closeFiles()
		return nil, err
	}
	if !cfg.DisableIndex {
		if err := b.openIndex(); err != nil {
			b.closeFiles()
			return nil, err
		}
		b.wg.Add(1)
		go b.indexer()
	}
	b.wg.Add(4)
	go b.every(time.Second, "statistics", func() error { b.stats.sample(time.Now(), b.served.Load()); return nil })
	if b.cfg.ReleaseInterval > 0 {
		b.wg.Add(1)
		go b.every(b.cfg.ReleaseInterval, "releasing mapped pages", b.releaseMapped)
	}
	go b.flusher()
	go b.every(b.cfg.CheckpointInterval, "checkpoint", b.checkpoint)
	go b.every(b.cfg.RetentionCheckInterval, "retention", b.EnforceRetention)
	if cfg.Role == RoleSlave {
		// A slave writes only what it copies: no delayed delivery, no transaction checks.
		b.wg.Add(2)
		go b.replicate()
		go b.syncMetadata()
	} else {
		b.wg.Add(1)
		go b.scheduler()
	}
	return b, nil
}

func (b *Broker) path(name string) string { return filepath.Join(b.cfg.Dir, name) }

// load opens the files and recovers the log. It returns the half-message offsets named
// by the committed transactional messages it replayed.
func (b *Broker) load() (map[int64]bool, error) {
	var infos []TopicInfo
	if err := readJSON(b.cfg.fs, b.path("topics.json"), &infos); err != nil {
		return nil, err
	}
	offs, err := openOffsets(b.cfg.fs, b.cfg.Dir)
	if err != nil {
		return nil, err
	}
	b.offsets = offs
	if b.subs, err = openSubGroups(b.cfg.fs, b.path("subscriptionGroups.json")); err != nil {
		return nil, err
	}
	cl, err := openCommitLog(b.cfg.fs, b.path("commitlog"), b.cfg.SegmentSize)
	if err != nil {
		return nil, err
	}
	b.cl = cl
	for _, ti := range infos {
		if _, err := b.openTopic(ti); err != nil {
			return nil, err
		}
	}
	var ck checkpointData
	if err := readJSON(b.cfg.fs, b.path("checkpoint"), &ck); err != nil {
		return nil, err
	}
	b.indexFrom = ck.Index
	// Replay records from the checkpoint: rebuild consume-queue entries the queues lack.
	var rerr error
	committed := map[int64]bool{}
	end, err := cl.recover(ck.Offset, func(r *recordView, off int64) {
		if rerr != nil {
			return
		}
		if r.sysFlag&sysFlagTxnMask == sysFlagTxnCommit && r.prepared > 0 {
			committed[r.prepared] = true
		}
		var q *consumeQueue
		if q, rerr = b.dispatch(r, off, max(int(r.queue)+1, b.cfg.DefaultQueues)); rerr == nil && r.queueOffset+1 > q.max.Load() {
			q.max.Store(r.queueOffset + 1)
		}
	})
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	cl.wpos = end
	cl.committed.Store(end)
	cl.flushed.Store(end)
	minPhys := cl.minOffset()
	// Drop index entries that point past the log end (an index flushed before its log).
	for _, t := range b.topics {
		for _, q := range t.queues {
			for {
				m := q.max.Load()
				if m <= q.min.Load() {
					break
				}
				phys, size, _, ok := q.get(m - 1)
				if ok && phys+int64(size) <= end {
					break
				}
				q.truncate(m - 1)
			}
			q.dropBelow(minPhys)
		}
	}
	if err := b.saveTopics(); err != nil {
		if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
			return nil, err
		}
		// On a full disk the broker still opens, to serve reads: topics.json is rewritten
		// at the next change, and recovery derives what it lacks from the log meanwhile.
		b.cfg.Logger.Warn("no space to rewrite topics.json; serving reads, sends fail until space returns", "err", err)
	}
	return committed, nil
}

// dispatch writes the consume-queue entry of a record found in the log (by recovery, or
// by a slave replicating its master), creating or widening its topic to at least queues
// queues. It returns the queue; publishing the new end is the caller's. Callers are the
// single writer (recovery before anything runs, or the slave's replicator).
func (b *Broker) dispatch(r *recordView, off int64, queues int) (*consumeQueue, error) {
	t := b.topic(r.topic)
	if t == nil || int(r.queue) >= len(t.queues) {
		var err error
		if t, err = b.ensureTopic(r.topic, queues, PermRead|PermWrite); err != nil {
			return nil, err
		}
	}
	q := t.queues[r.queue]
	tags := TagsCode(propValue(r.props, PropTags))
	if r.topic == scheduleTopic {
		tags = r.storeTS
	}
	return q, q.put(r.queueOffset, off, int32(r.size), tags)
}

// openTopic creates or widens a topic's queues and registers it (no persistence).
func (b *Broker) openTopic(ti TopicInfo) (*topic, error) {
	t := b.topics[ti.Name]
	if t == nil {
		t = &topic{info: ti}
	}
	for i := len(t.queues); i < ti.Queues; i++ {
		q, err := openConsumeQueue(b.cfg.fs, b.path("consumequeue"), ti.Name, i, b.cfg.QueueFileEntries)
		if err != nil {
			return nil, err
		}
		t.queues = append(t.queues, q)
	}
	t.info.Queues = len(t.queues)
	if ti.Perm != 0 {
		t.info.Perm = ti.Perm
	}
	b.topics[ti.Name] = t
	return t, nil
}

func (b *Broker) saveTopics() error {
	infos := make([]TopicInfo, 0, len(b.topics))
	for _, t := range b.topics {
		infos = append(infos, t.info)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	select {
	case b.topicsChanged <- struct{}{}:
	default:
	}
	return writeJSON(b.cfg.fs, b.path("topics.json"), infos)
}

// CreateTopic creates a topic with the given number of queues, or widens an existing one
// (queues are never removed). It is durable when it returns.
func (b *Broker) CreateTopic(name string, queues int) error {
	if !ValidTopic(name) {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	if queues < 1 || queues > 1024 {
		return fmt.Errorf("%w: %d queues (want 1..1024)", ErrInvalidQueue, queues)
	}
	_, err := b.ensureTopic(name, queues, PermRead|PermWrite)
	return err
}

func (b *Broker) ensureTopic(name string, queues, perm int) (*topic, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	b.tmu.RLock()
	t := b.topics[name]
	b.tmu.RUnlock()
	if t != nil && len(t.queues) >= queues {
		return t, nil
	}
	b.tmu.Lock()
	defer b.tmu.Unlock()
	if t = b.topics[name]; t != nil && len(t.queues) >= queues {
		return t, nil
	}
	t, err := b.openTopic(TopicInfo{Name: name, Queues: queues, Perm: perm})
	if err != nil {
		return nil, err
	}
	return t, b.saveTopics()
}

// DeleteTopic forgets a topic; its records stay in the commit log until retention.
func (b *Broker) DeleteTopic(name string) error {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	t := b.topics[name]
	if t == nil {
		return nil
	}
	delete(b.topics, name)
	for _, q := range t.queues {
		q.close()
	}
	b.cfg.fs.RemoveAll(filepath.Join(b.path("consumequeue"), name))
	return b.saveTopics()
}

// IsSystemTopic reports whether a topic is the broker's own: the delay schedule, retry and
// dead-letter topics, the transaction topics, and TBW102.
func IsSystemTopic(name string) bool {
	return name == scheduleTopic || name == tbw102 || name == halfTopic || name == opTopic || name == checkMaxTopic ||
		strings.HasPrefix(name, "%RETRY%") || strings.HasPrefix(name, "%DLQ%")
}

// Topics lists the topics, system topics included (see IsSystemTopic), sorted by name.
func (b *Broker) Topics() []TopicInfo {
	b.tmu.RLock()
	defer b.tmu.RUnlock()
	out := make([]TopicInfo, 0, len(b.topics))
	for _, t := range b.topics {
		out = append(out, t.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic returns one topic's description.
func (b *Broker) Topic(name string) (TopicInfo, bool) {
	t := b.topic(name)
	if t == nil {
		return TopicInfo{}, false
	}
	return t.info, true
}

func (b *Broker) topic(name string) *topic {
	b.tmu.RLock()
	defer b.tmu.RUnlock()
	return b.topics[name]
}

func (b *Broker) queue(topicName string, id int) (*consumeQueue, error) {
	t := b.topic(topicName)
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrTopicNotExist, topicName)
	}
	if id < 0 || id >= len(t.queues) {
		return nil, fmt.Errorf("%w: %s queue %d of %d", ErrInvalidQueue, topicName, id, len(t.queues))
	}
	return t.queues[id], nil
}

func (b *Broker) host() netip.AddrPort { return b.storeHost.Load().(netip.AddrPort) }

// putResult is where one appended message landed.
type putResult struct {
	queueOffset int64
	phys        int64
	size        int
}

// put appends messages through the single writer and, in sync modes, waits for the fsync
// and for a slave.
func (b *Broker) put(ms []inMsg) ([]putResult, error) {
	res, end, err := b.appendMsgs(ms)
	if err != nil {
		return nil, err
	}
	return res, b.waitDurable(end)
}

// waitDurable waits for what the configuration promises before an acknowledgement: the
// fsync (FlushSync) and a slave's copy (ReplicationSync).
func (b *Broker) waitDurable(end int64) error {
	if b.cfg.FlushMode == FlushSync {
		if err := b.waitFlushed(end); err != nil {
			return err
		}
	}
	if b.cfg.Replication == ReplicationSync {
		return b.waitReplicated(end)
	}
	return nil
}

// appendMsgs appends messages through the single writer without waiting for a flush and
// returns where they landed and the log end after them.
func (b *Broker) appendMsgs(ms []inMsg) ([]putResult, int64, error) {
	if b.closed.Load() {
		return nil, 0, ErrClosed
	}
	if b.cfg.Role == RoleSlave {
		return nil, 0, ErrReadOnly
	}
	for i := range ms {
		if n := ms[i].size(); n-recordFixedSize > b.cfg.MaxMessageSize {
			return nil, 0, fmt.Errorf("%w: %d bytes (limit %d)", ErrMessageTooLarge, n, b.cfg.MaxMessageSize)
		}
		if len(ms[i].props) > 32767 {
			return nil, 0, fmt.Errorf("%w: properties of %d bytes (limit 32767)", ErrMessageTooLarge, len(ms[i].props))
		}
		if len(ms[i].topic) > 127 {
			return nil, 0, fmt.Errorf("%w: %q", ErrInvalidTopic, ms[i].topic)
		}
	}
	for i := range ms {
		b.redirectDelay(&ms[i])
	}
	qs := make([]*consumeQueue, len(ms))
	for i := range ms {
		q, err := b.queue(ms[i].topic, ms[i].queue)
		if err != nil {
			return nil, 0, err
		}
		qs[i] = q
	}
	res := make([]putResult, len(ms))
	host := b.host()
	b.wmu.Lock()
	start := b.cl.wpos
	now := time.Now().UnixMilli()
	next := map[*consumeQueue]int64{}
	for i := range ms {
		m := &ms[i]
		q := qs[i]
		qo, ok := next[q]
		if !ok {
			qo = q.max.Load()
		}
		n := m.size()
		dst, pos, err := b.cl.reserve(n)
		if err != nil {
			b.cl.rollback(start)
			b.wmu.Unlock()
			return nil, 0, err
		}
		ts := m.storeTS
		if ts == 0 {
			ts = now
		}
		encodeRecord(dst, m, qo, pos, ts, host)
		b.indexAppended(m.topic, m.props, pos, pos+int64(n), ts)
		tags := m.tagsCode
		if m.topic == scheduleTopic {
			tags = ts
		}
		if err := q.put(qo, pos, int32(n), tags); err != nil {
			b.cl.rollback(start)
			b.wmu.Unlock()
			return nil, 0, err
		}
		next[q] = qo + 1
		res[i] = putResult{queueOffset: qo, phys: pos, size: n}
	}
	end := b.cl.wpos
	b.cl.committed.Store(end)
	stored := 0
	for i := range ms {
		if t := ms[i].topic; t != scheduleTopic && t != halfTopic && t != opTopic {
			stored++
		}
	}
	b.stats.put.Add(int64(stored))
	for q, m := range next {
		q.publish(m)
	}
	b.wmu.Unlock()
	b.logGrew()
	return res, end, nil
}

func (b *Broker) waitFlushed(end int64) error {
	select {
	case b.fkick <- struct{}{}:
	default:
	}
	b.fmu.Lock()
	defer b.fmu.Unlock()
	for b.cl.flushed.Load() < end {
		if b.ferr != nil {
			return b.ferr
		}
		if b.closed.Load() {
			return ErrClosed
		}
		b.fcond.Wait()
	}
	return nil
}

func (b *Broker) flusher() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			b.fmu.Lock()
			b.fcond.Broadcast()
			b.fmu.Unlock()
			return
		case <-t.C:
		case <-b.fkick:
		}
		err := b.cl.flush()
		b.fmu.Lock()
		if err != nil {
			b.ferr = err
			b.cfg.Logger.Error("commit-log flush failed", "err", err)
		}
		b.fcond.Broadcast()
		b.fmu.Unlock()
	}
}

// Append appends msgs to one queue of a topic and returns the queue offset of the first.
// Topic and Queue of the messages are ignored; Key and Tags become the KEYS and TAGS
// properties. Store timestamps are set by the broker. With FlushSync it returns after fsync.
func (b *Broker) Append(topicName string, queue int, msgs []Message) (int64, error) {
	if len(msgs) == 0 {
		q, err := b.queue(topicName, queue)
		if err != nil {
			return 0, err
		}
		return q.max.Load(), nil
	}
	ins := make([]inMsg, len(msgs))
	now := time.Now().UnixMilli()
	for i := range msgs {
		ins[i] = fromMessage(topicName, queue, &msgs[i], now)
	}
	res, err := b.put(ins)
	if err != nil {
		return 0, err
	}
	return res[0].queueOffset, nil
}

func fromMessage(topicName string, queue int, m *Message, now int64) inMsg {
	var props []byte
	if len(m.Properties) > 0 || m.Key != "" || m.Tags != "" {
		p := make(map[string]string, len(m.Properties)+2)
		for k, v := range m.Properties {
			p[k] = v
		}
		if m.Key != "" {
			p[PropKeys] = m.Key
		}
		if m.Tags != "" {
			p[PropTags] = m.Tags
		}
		props = EncodeProperties(p)
	}
	born := m.BornTimestamp
	if born == 0 {
		born = now
	}
	return inMsg{topic: topicName, queue: queue, flag: m.Flag, sysFlag: m.SysFlag &^ 0x30, bornTS: born,
		bornHost: m.BornHost, reconsume: m.ReconsumeTimes, body: m.Body, props: props, tagsCode: TagsCode(m.Tags)}
}

// MinOffset is the oldest retained offset of a queue.
func (b *Broker) MinOffset(topicName string, queue int) (int64, error) {
	q, err := b.queue(topicName, queue)
	if err != nil {
		return 0, err
	}
	return q.min.Load(), nil
}

// MaxOffset is the next offset to be written in a queue (0 when empty).
func (b *Broker) MaxOffset(topicName string, queue int) (int64, error) {
	q, err := b.queue(topicName, queue)
	if err != nil {
		return 0, err
	}
	return q.max.Load(), nil
}

// OffsetByTimestamp is the first offset stored at or after ts (epoch ms), or MaxOffset.
func (b *Broker) OffsetByTimestamp(topicName string, queue int, ts int64) (int64, error) {
	q, err := b.queue(topicName, queue)
	if err != nil {
		return 0, err
	}
	lo, hi := q.min.Load(), q.max.Load()
	for lo < hi {
		mid := lo + (hi-lo)/2
		phys, _, _, ok := q.get(mid)
		var st int64
		if ok {
			h, err := b.cl.read(nil, phys, 64)
			if err == nil {
				st = int64(binary.BigEndian.Uint64(h[56:]))
			}
		}
		if st < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// pullStatus says what a raw read found.
type pullStatus int

const (
	pullFound pullStatus = iota
	pullNoNew
	pullNoMatch
	pullOffsetMoved
)

// readRaw copies up to max records (and about maxBytes) from offset on, skipping records
// the filter does not let through (nil = all). It returns the bytes, the record count, the
// next offset to read and a status as in the protocol's pull table.
func (b *Broker) readRaw(q *consumeQueue, offset int64, maxN, maxBytes int, filter *subFilter, buf []byte) ([]byte, int, int64, pullStatus) {
	minO, maxO := q.min.Load(), q.max.Load()
	switch {
	case maxO == 0 && offset == 0:
		return buf, 0, 0, pullNoNew
	case maxO == 0:
		return buf, 0, 0, pullOffsetMoved
	case offset < minO:
		return buf, 0, minO, pullOffsetMoved
	case offset == maxO:
		return buf, 0, offset, pullNoNew
	case offset > maxO:
		return buf, 0, maxO, pullOffsetMoved
	}
	n := 0
	next := offset
	scanned := 0
	span := readSpan{cl: b.cl}
	defer span.done()
	for next < maxO && n < maxN && len(buf) < maxBytes && scanned < 4*maxN+64 {
		phys, size, tags, ok := q.get(next)
		if !ok {
			break
		}
		scanned++
		if !filter.matchCode(tags) {
			next++
			continue
		}
		start := len(buf)
		nb, err := b.cl.read(buf, phys, int(size))
		if err != nil {
			// The record was removed by retention under us; let the caller re-seek.
			if n == 0 {
				return buf, 0, q.min.Load(), pullOffsetMoved
			}
			break
		}
		span.add(phys, int64(size))
		if filter.needsRecord() && !filter.matchRecord(nb[start:]) {
			buf = nb[:start]
			next++
			continue
		}
		buf = nb
		n++
		next++
	}
	if n == 0 {
		return buf, 0, next, pullNoMatch
	}
	return buf, n, next, pullFound
}

// MessagesServed is the number of messages pulls have handed out since the broker opened;
// its rate is the consume rate.
func (b *Broker) MessagesServed() int64 { return b.served.Load() }

// pullScratch holds the buffers Pull reads stored records into: the messages it returns
// copy what they keep (record.go, message), so the buffer is reused by the next pull
// instead of being grown anew for every one (at 100,000 messages a second the growing
// buffers were a third of the bytes a process with a job allocated).
var pullScratch = sync.Pool{New: func() any { return new([]byte) }}

// maxPullScratch is the largest buffer kept for reuse: a pull of many large records does
// not pin its buffer.
const maxPullScratch = 1 << 20

func putPullScratch(p *[]byte, buf []byte) {
	if cap(buf) > maxPullScratch {
		return
	}
	*p = buf[:0]
	pullScratch.Put(p)
}

// Pull reads up to max messages of a queue from offset. When nothing is there and wait > 0
// it waits up to wait for new messages (or ctx). An offset below the queue minimum starts
// at the minimum (retention removed the rest); an offset beyond the end is
// ErrOffsetOutOfRange. next is the offset to pull from next time.
func (b *Broker) Pull(ctx context.Context, topicName string, queue int, offset int64, maxN int, wait time.Duration) ([]Message, int64, error) {
	q, err := b.queue(topicName, queue)
	if err != nil {
		return nil, offset, err
	}
	if maxN <= 0 {
		maxN = 32
	}
	var deadline <-chan time.Time
	for {
		if b.closed.Load() {
			return nil, offset, ErrClosed
		}
		if m := q.min.Load(); offset < m {
			offset = m
		}
		if offset > q.max.Load() {
			return nil, offset, fmt.Errorf("%w: %s queue %d offset %d > %d", ErrOffsetOutOfRange, topicName, queue, offset, q.max.Load())
		}
		ch := q.waitCh()
		scratch := pullScratch.Get().(*[]byte)
		buf, n, next, st := b.readRaw(q, offset, maxN, 8<<20, nil, (*scratch)[:0])
		if st == pullFound {
			b.served.Add(int64(n))
			msgs := make([]Message, 0, n)
			var err error
			for rest := buf; len(rest) > 0; {
				var r recordView
				if r, err = parseRecord(rest, 0); err != nil {
					break
				}
				msgs = append(msgs, r.message())
				rest = rest[r.size:]
			}
			putPullScratch(scratch, buf)
			if err != nil {
				return msgs, offset, err
			}
			return msgs, next, nil
		}
		putPullScratch(scratch, buf)
		if st == pullOffsetMoved {
			offset = next
			continue
		}
		if wait <= 0 {
			return nil, offset, nil
		}
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-ch:
		case <-deadline:
			return nil, offset, nil
		case <-ctx.Done():
			return nil, offset, ctx.Err()
		case <-b.done:
			return nil, offset, ErrClosed
		}
	}
}

// checkpointData is the checkpoint file: recovery replays the commit log from Offset and
// indexes it from Index.
type checkpointData struct {
	Offset int64 `json:"offset"`
	Index  int64 `json:"index"`
}

// openIndex opens the key index and sets where the indexer resumes.
func (b *Broker) openIndex() error {
	idx, rebuildFrom, err := openIndex(b.cfg.fs, b.path("index"), b.cfg.IndexSlots, b.cfg.IndexEntries, b.cfg.IndexSpan,
		func(msg string, args ...any) { b.cfg.Logger.Warn(msg, args...) })
	if err != nil {
		return err
	}
	from := b.indexFrom
	if rebuildFrom >= 0 {
		from = min(from, rebuildFrom)
	}
	if len(idx.files) == 0 {
		from = 0
	}
	idx.indexed.Store(max(from, b.cl.minOffset()))
	b.idx = idx
	return nil
}

// checkpoint flushes the queues, offsets and index, and records how far recovery may skip.
func (b *Broker) checkpoint() error {
	b.ckmu.Lock()
	defer b.ckmu.Unlock()
	if err := b.cl.flush(); err != nil {
		return err
	}
	target := b.cl.flushed.Load()
	var indexed int64
	if b.idx != nil {
		indexed = min(b.idx.indexed.Load(), target)
		if err := b.idx.flush(); err != nil {
			return err
		}
	}
	b.tmu.RLock()
	var qs []*consumeQueue
	for _, t := range b.topics {
		qs = append(qs, t.queues...)
	}
	b.tmu.RUnlock()
	for _, q := range qs {
		if err := q.flush(); err != nil {
			return err
		}
	}
	if err := b.offsets.compact(false); err != nil {
		return err
	}
	return writeJSON(b.cfg.fs, b.path("checkpoint"), checkpointData{Offset: target, Index: indexed})
}

// every runs fn each interval until the broker closes, logging its errors as what failed.
// The caller has done b.wg.Add(1).
func (b *Broker) every(interval time.Duration, what string, fn func() error) {
	defer b.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-t.C:
			if err := fn(); err != nil {
				b.cfg.Logger.Error(what+" failed", "err", err)
			}
		}
	}
}

// Flush makes everything appended so far durable (commit log, queues, offsets).
func (b *Broker) Flush() error { return b.checkpoint() }

// EnforceRetention deletes whole segments older than RetentionAge or beyond
// RetentionBytes, and moves queue minimums past them. It runs periodically by itself.
func (b *Broker) EnforceRetention() error {
	dropped := false
	for {
		ts, total, n := b.cl.retentionInfo()
		if n < 2 {
			break
		}
		old := b.cfg.RetentionAge > 0 && ts > 0 && ts < time.Now().Add(-b.cfg.RetentionAge).UnixMilli()
		big := b.cfg.RetentionBytes > 0 && total > b.cfg.RetentionBytes
		if !old && !big {
			break
		}
		// Move queue minimums first so no reader is sent to the segment being removed.
		minPhys := b.cl.minOffset() + b.cl.segSize
		b.tmu.RLock()
		for _, t := range b.topics {
			for _, q := range t.queues {
				q.dropBelow(minPhys)
			}
		}
		b.tmu.RUnlock()
		ok, err := b.cl.dropOldest()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		dropped = true
	}
	if dropped {
		if b.idx != nil {
			b.idx.dropBelow(b.cl.minOffset())
		}
		b.cfg.Logger.Info("retention removed segments", "min", b.cl.minOffset())
	}
	return nil
}

// Close stops the listeners, flushes everything and releases the directory. Later calls
// wait for the first to finish and return its result.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.close() })
	return b.closeErr
}

func (b *Broker) close() error {
	b.closed.Store(true)
	if b.net != nil {
		b.net.close()
	}
	close(b.done)
	b.wg.Wait()
	// Wait for an append in flight, then flush.
	b.wmu.Lock()
	err := b.checkpoint()
	b.wmu.Unlock()
	if e := b.offsets.close(); err == nil {
		err = e
	}
	b.closeFiles()
	return err
}

func (b *Broker) closeFiles() {
	b.tmu.Lock()
	for _, t := range b.topics {
		for _, q := range t.queues {
			q.close()
		}
	}
	b.tmu.Unlock()
	if b.cl != nil {
		b.cl.close()
	}
	if b.offsets != nil {
		b.offsets.close()
	}
	if b.idx != nil {
		b.idx.close()
	}
	if b.lockFile != nil {
		b.lockFile.Close()
	}
}

func readJSON(fs storeFS, path string, v any) error {
	data, err := fs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("broker: %s is corrupt: %w", path, err)
	}
	return nil
}

func writeJSON(fs storeFS, path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFile(fs, path, data)
}

// writeFile replaces path atomically and durably (durable.WriteFile).
func writeFile(fs storeFS, path string, data []byte) error {
	if err := durable.WriteFile(fs, path, data, 0o644); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return nil
}
