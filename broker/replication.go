package broker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"rsql/broker/remoting"
)

// Master–slave replication (docs/broker.md, "Replication"). A slave copies its master's
// commit log byte for byte, at the same offsets, and rebuilds its consume queues, index and
// transaction state from it, as recovery does. It pulls, in the spirit of RocketMQ's
// HAService but over ordinary remoting frames on the master's broker listener:
//
//	REPL_FETCH (2100, rsql's own code) ext offset (the slave's log end: it has every byte
//	below, which acknowledges them), segmentSize, addr (the slave's broker address), on a
//	new connection check ("<length>:<crc32>" of the log bytes before offset in its
//	segment), maxBytes
//	reply: the log bytes from offset up to whole records, the segment's end or maxBytes;
//	ext masterEnd, minOffset. A fetch at the log end waits up to a second for more.
//	21 PULL_OFFSET_MOVED with minOffset when the master no longer has offset (a new, empty
//	slave starts there); 1 when the stores diverge (different segment size, the slave is
//	ahead, or the check does not match), so a slave never extends a log that is not a
//	prefix of its master's.
//
// Every few seconds the slave also copies the master's topics (21), consumer offsets (43)
// and subscription groups (201). A slave refuses writes (sends: 14).

const (
	codeReplFetch          = 2100
	codeGetAllConsumerOffs = 43
	respServiceUnavailable = 14
	respSlaveNotAvailable  = 11
	respFlushSlaveTimeout  = 12

	replMaxBytes   = 8 << 20
	replCheckBytes = 4096
	// A slave (on the master) or the master (on a slave) is live while it has been heard
	// from this recently.
	replLiveness = 3 * time.Second
)

// replMaster is a master's view of its slaves, one per replication connection. mu guards
// slaves; changed is closed and replaced whenever an acknowledgement advances.
type replMaster struct {
	mu      sync.Mutex
	slaves  map[*conn]*slaveState
	changed chan struct{}
}

type slaveState struct {
	addr  string // the slave's broker address (its connection's until it tells)
	acked int64
	last  time.Time
}

func newReplMaster() *replMaster {
	return &replMaster{slaves: map[*conn]*slaveState{}, changed: make(chan struct{})}
}

// ack records that the slave on c (at addr, if it says) has the log below off.
func (r *replMaster) ack(c *conn, addr string, off int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.slaves[c]
	if s == nil {
		s = &slaveState{addr: c.remote.String()}
		r.slaves[c] = s
	}
	if addr != "" {
		s.addr = addr
	}
	s.last = time.Now()
	if off > s.acked {
		s.acked = off
		close(r.changed)
		r.changed = make(chan struct{})
	}
	for oc, os := range r.slaves {
		if oc.closed.Load() && time.Since(os.last) > replLiveness {
			delete(r.slaves, oc)
		}
	}
}

// live returns the live slaves' addresses (sorted, without repeats) and the highest offset
// one of them has.
func (r *replMaster) live() (addrs []string, acked int64, ch <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, s := range r.slaves {
		if time.Since(s.last) < replLiveness {
			if !seen[s.addr] {
				seen[s.addr] = true
				addrs = append(addrs, s.addr)
			}
			acked = max(acked, s.acked)
		}
	}
	sort.Strings(addrs)
	return addrs, acked, r.changed
}

// waitReplicated waits until a slave has the log up to end (sync replication).
func (b *Broker) waitReplicated(end int64) error {
	deadline := time.NewTimer(b.cfg.ReplicationTimeout)
	defer deadline.Stop()
	for {
		addrs, acked, ch := b.replM.live()
		if len(addrs) == 0 {
			return ErrSlaveNotAvailable
		}
		if acked >= end {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return ErrSlaveTimeout
		case <-b.done:
			return ErrClosed
		}
	}
}

// logWaitCh returns a channel closed the next time the log grows.
func (b *Broker) logWaitCh() <-chan struct{} {
	b.lwmu.Lock()
	defer b.lwmu.Unlock()
	if b.lwait == nil {
		b.lwait = make(chan struct{})
		b.lwaiting.Store(true)
	}
	return b.lwait
}

func (b *Broker) logGrew() {
	if b.lwaiting.Load() {
		b.lwmu.Lock()
		if b.lwait != nil {
			close(b.lwait)
			b.lwait = nil
			b.lwaiting.Store(false)
		}
		b.lwmu.Unlock()
	}
}

// tailCheck renders the check of the log bytes before end in end's segment.
func (b *Broker) tailCheck(end int64) string {
	rel := end % b.cl.segSize
	if rel == 0 && end > 0 {
		rel = b.cl.segSize
	}
	n := min(rel, replCheckBytes)
	if n == 0 {
		return "0:0"
	}
	data, err := b.cl.read(nil, end-n, int(n))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", n, crc32.ChecksumIEEE(data))
}

// replFetch answers a slave's REPL_FETCH on the master.
func (s *netServer) replFetch(c *conn, req *remoting.Command) *remoting.Command {
	b := s.b
	if b.cfg.Role == RoleSlave {
		return req.Reply(respServiceUnavailable, "this broker is a slave: replicate from its master")
	}
	off, err1 := req.ExtInt("offset")
	seg, err2 := req.ExtInt("segmentSize")
	if err := errors.Join(err1, err2); err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	if seg != b.cfg.SegmentSize {
		return req.Reply(respSystemError, fmt.Sprintf("stores diverge: the slave's segment size is %d, the master's %d", seg, b.cfg.SegmentSize))
	}
	end, minOff := b.cl.committed.Load(), b.cl.minOffset()
	if off > end {
		return req.Reply(respSystemError, fmt.Sprintf("stores diverge: the slave's log ends at %d, after the master's end %d", off, end))
	}
	if chk := req.Ext("check"); chk != "" && off > minOff {
		if mine := b.tailCheck(off); mine != chk {
			return req.Reply(respSystemError, fmt.Sprintf("stores diverge: the bytes before %d differ (slave %s, master %s)", off, chk, mine))
		}
	}
	b.replM.ack(c, req.Ext("addr"), off)
	reply := func(code int16, body []byte) *remoting.Command {
		r := req.Reply(code, "")
		r.ExtFields = map[string]string{"masterEnd": strconv.FormatInt(b.cl.committed.Load(), 10),
			"minOffset": strconv.FormatInt(b.cl.minOffset(), 10)}
		r.Body = body
		return r
	}
	if off < minOff {
		return reply(respPullOffsetMoved, nil)
	}
	if off == end {
		ch := b.logWaitCh()
		if end = b.cl.committed.Load(); end == off {
			t := time.NewTimer(time.Second)
			defer t.Stop()
			select {
			case <-ch:
			case <-t.C:
			case <-c.done:
				return nil
			case <-s.done:
			}
			end = b.cl.committed.Load()
		}
		if end == off {
			return reply(respSuccess, nil)
		}
	}
	maxBytes, err := req.ExtIntOr("maxBytes", 0)
	if err != nil {
		r := reply(respInvalidParameter, nil)
		r.Remark = err.Error()
		return r
	}
	if maxBytes <= 0 || maxBytes > replMaxBytes {
		maxBytes = replMaxBytes
	}
	segEnd := off - off%b.cl.segSize + b.cl.segSize
	n := min(end, segEnd) - off
	data, err := b.cl.read(nil, off, int(min(n, maxBytes+int64(b.cfg.MaxMessageSize)+recordFixedSize)))
	if err != nil {
		return req.Reply(respSystemError, err.Error())
	}
	return reply(respSuccess, data[:wholeRecords(data, off, b.cl.segSize, int(maxBytes))])
}

// wholeRecords is how much of data (log bytes from off) to send: whole records, at least
// one, up to about limit bytes; a blank marker takes the rest of its segment.
func wholeRecords(data []byte, off, segSize int64, limit int) int {
	at := 0
	for at+8 <= len(data) {
		size := int(binary.BigEndian.Uint32(data[at:]))
		if binary.BigEndian.Uint32(data[at+4:]) == magicBlank {
			return len(data) // the marker and the segment's unused rest
		}
		if size <= 0 || at+size > len(data) || (at > 0 && at+size > limit) {
			break
		}
		at += size
	}
	return at
}

// replSlave is a slave's replication state.
type replSlave struct {
	lastOK    atomic.Int64 // unix ns of the last answer from the master
	advertise atomic.Value // string: this broker's address, told to the master
	masterEnd atomic.Int64
}

func (r *replSlave) masterLive() bool {
	return time.Since(time.Unix(0, r.lastOK.Load())) < replLiveness
}

// replicate runs on a slave: it fetches the master's log until the broker closes. The
// caller has done b.wg.Add(1).
func (b *Broker) replicate() {
	defer b.wg.Done()
	for {
		err := b.replicateOnce()
		if b.closed.Load() {
			return
		}
		b.cfg.Logger.Warn("replication from the master interrupted; retrying", "master", b.cfg.MasterAddr, "err", err)
		select {
		case <-b.done:
			return
		case <-time.After(time.Second):
		}
	}
}

// replicateOnce fetches over one connection until an error.
func (b *Broker) replicateOnce() error {
	nc, err := net.DialTimeout("tcp", b.cfg.MasterAddr, 3*time.Second)
	if err != nil {
		return err
	}
	go func() {
		<-b.done
		nc.Close()
	}()
	defer nc.Close()
	first := true
	var opaque int32
	for !b.closed.Load() {
		pos := b.cl.wpos // the replicator is the only writer of a slave's log
		ext := map[string]string{"offset": strconv.FormatInt(pos, 10), "segmentSize": strconv.FormatInt(b.cfg.SegmentSize, 10),
			"maxBytes": strconv.Itoa(replMaxBytes)}
		if a, _ := b.repl.advertise.Load().(string); a != "" {
			ext["addr"] = a
		}
		if first && pos > b.cl.minOffset() {
			ext["check"] = b.tailCheck(pos)
		}
		opaque++
		nc.SetDeadline(time.Now().Add(15 * time.Second))
		resp, err := remoting.RoundTrip(nc, b.signed(&remoting.Command{Code: codeReplFetch, Language: "GO", Version: 479,
			Opaque: opaque, ExtFields: ext}), b.cfg.MaxFrameSize)
		if err != nil {
			return err
		}
		first = false
		if me, err := resp.ExtInt("masterEnd"); err == nil {
			b.repl.masterEnd.Store(me)
		}
		switch resp.Code {
		case respSuccess:
		case respPullOffsetMoved:
			minOff, err := resp.ExtInt("minOffset")
			if err != nil {
				return err
			}
			b.wmu.Lock()
			err = b.cl.resetEmpty(minOff)
			b.wmu.Unlock()
			if err != nil {
				return fmt.Errorf("the master's log starts at %d, after this slave's end %d: start the slave from an empty directory (%v)", minOff, pos, err)
			}
			continue
		default:
			b.cfg.Logger.Error("the master refuses to replicate to this slave", "code", resp.Code, "reason", resp.Remark)
			return fmt.Errorf("master: code %d %s", resp.Code, resp.Remark)
		}
		b.repl.lastOK.Store(time.Now().UnixNano())
		if len(resp.Body) > 0 {
			if err := b.applyReplicated(pos, resp.Body); err != nil {
				return err
			}
		}
	}
	return ErrClosed
}

// replicatedRecord is one record of a chunk copied from a master.
type replicatedRecord struct {
	r   recordView
	off int64
}

// parseReplicated validates log bytes copied from a master (starting at commit-log offset
// pos): whole records, each saying it is where it is, optionally ended by a blank marker
// that fills the rest of its segment, nothing across a segment.
func parseReplicated(pos int64, data []byte, segSize int64) ([]replicatedRecord, error) {
	if pos < 0 || pos%segSize+int64(len(data)) > segSize {
		return nil, &RecordError{Offset: pos, Reason: fmt.Sprintf("%d replicated bytes do not fit in the segment", len(data))}
	}
	var recs []replicatedRecord
	for at := 0; at < len(data); {
		off := pos + int64(at)
		if at+8 <= len(data) && binary.BigEndian.Uint32(data[at+4:]) == magicBlank {
			if n := int64(binary.BigEndian.Uint32(data[at:])); n != segSize-off%segSize || at+int(n) != len(data) {
				return nil, &RecordError{Offset: off, Reason: "replicated blank marker does not end its segment"}
			}
			break
		}
		r, err := parseRecord(data[at:], off)
		if err != nil {
			return nil, err
		}
		if r.physOffset != off {
			return nil, &RecordError{Offset: off, Reason: fmt.Sprintf("replicated record says it is at %d", r.physOffset)}
		}
		recs = append(recs, replicatedRecord{r, off})
		at += r.size
	}
	return recs, nil
}

// applyReplicated validates log bytes from the master, writes them at pos and indexes
// their records.
func (b *Broker) applyReplicated(pos int64, data []byte) error {
	recs, err := parseReplicated(pos, data, b.cl.segSize)
	if err != nil {
		return err
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if err := b.cl.appendRaw(pos, data); err != nil {
		return err
	}
	next := map[*consumeQueue]int64{}
	for i := range recs {
		r := &recs[i].r
		q, err := b.dispatch(r, recs[i].off, int(r.queue)+1)
		if err != nil {
			return err
		}
		next[q] = max(next[q], r.queueOffset+1)
		b.indexAppended(r.topic, r.props, recs[i].off, recs[i].off+int64(r.size), r.storeTS)
	}
	if b.idx != nil && b.idx.live.Load() {
		b.idx.advance(pos+int64(len(data)), b.idx.lastTS.Load()) // past a blank segment end too
	}
	b.cl.committed.Store(pos + int64(len(data)))
	for q, m := range next {
		if m > q.max.Load() {
			q.publish(m)
		}
	}
	b.stats.put.Add(int64(len(recs)))
	b.logGrew()
	return nil
}

// syncMetadata runs on a slave: every two seconds it copies the master's topics, consumer
// offsets and subscription groups. The caller has done b.wg.Add(1).
func (b *Broker) syncMetadata() {
	defer b.wg.Done()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-t.C:
		}
		if err := b.syncMetadataOnce(); err != nil && b.repl.masterLive() {
			b.cfg.Logger.Warn("copying the master's topics and offsets failed", "err", err)
		}
	}
}

func (b *Broker) syncMetadataOnce() error {
	nc, err := net.DialTimeout("tcp", b.cfg.MasterAddr, 2*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	call := func(code int16) ([]byte, error) {
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		r, err := remoting.RoundTrip(nc, b.signed(&remoting.Command{Code: code, Language: "GO", Version: 479, Opaque: int32(code)}), b.cfg.MaxFrameSize)
		if err != nil {
			return nil, err
		}
		if r.Code != respSuccess {
			return nil, fmt.Errorf("code %d: %d %s", code, r.Code, r.Remark)
		}
		return r.Body, nil
	}
	body, err := call(codeGetAllTopicConfig)
	if err != nil {
		return err
	}
	var topics struct {
		TopicConfigTable map[string]struct {
			ReadQueueNums  int `json:"readQueueNums"`
			WriteQueueNums int `json:"writeQueueNums"`
			Perm           int `json:"perm"`
		} `json:"topicConfigTable"`
	}
	if err := json.Unmarshal(body, &topics); err != nil {
		return fmt.Errorf("topic table: %w", err)
	}
	for name, tc := range topics.TopicConfigTable {
		if n := max(tc.ReadQueueNums, tc.WriteQueueNums); ValidTopic(name) && n >= 1 && n <= 1024 {
			if _, err := b.ensureTopic(name, n, tc.Perm); err != nil {
				return err
			}
		}
	}
	if body, err = call(codeGetAllConsumerOffs); err != nil {
		return err
	}
	var offs struct {
		OffsetTable map[string]map[string]int64 `json:"offsetTable"`
	}
	if err := json.Unmarshal(body, &offs); err != nil {
		return fmt.Errorf("offset table: %w", err)
	}
	for key, queues := range offs.OffsetTable {
		topicName, group, ok := cutLast(key, '@')
		if !ok {
			continue
		}
		for qs, off := range queues {
			q, err := strconv.Atoi(qs)
			if err != nil {
				continue
			}
			if cur, ok := b.QueryOffset(group, topicName, q); !ok || cur != off {
				if err := b.CommitOffset(group, topicName, q, off); err != nil {
					return err
				}
			}
		}
	}
	if body, err = call(codeGetAllSubGroups); err != nil {
		return err
	}
	var sg subGroupsFile
	if err := json.Unmarshal(body, &sg); err != nil {
		return fmt.Errorf("subscription groups: %w", err)
	}
	for _, g := range sg.SubscriptionGroupTable {
		if cur, ok := b.subs.get(g.GroupName); !ok || !sameGroup(cur, g) {
			if err := b.subs.put(g); err != nil {
				return err
			}
		}
	}
	return nil
}

func sameGroup(a, b SubscriptionGroup) bool {
	x := plainJSON(a)
	y := plainJSON(b)
	return string(x) == string(y)
}

func cutLast(s string, sep byte) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// allConsumerOffsets answers GET_ALL_CONSUMER_OFFSET (43) as RocketMQ's ConsumerOffsetManager
// encodes it: {"offsetTable":{"topic@group":{"0":12,...}}}.
func (s *netServer) allConsumerOffsets(req *remoting.Command) *remoting.Command {
	tbl := map[string]map[string]int64{}
	for group, offs := range s.b.offsets.groups() {
		for k, v := range offs {
			t, q, ok := splitOffsetKey(k)
			if !ok {
				continue
			}
			key := t + "@" + group
			if tbl[key] == nil {
				tbl[key] = map[string]int64{}
			}
			tbl[key][strconv.Itoa(q)] = v
		}
	}
	r := req.Reply(respSuccess, "")
	r.Body = plainJSON(map[string]any{"offsetTable": tbl})
	return r
}

// ReplicationStatus describes a broker's replication.
type ReplicationStatus struct {
	Role Role
	// On a master: the live slaves and the highest offset one of them has.
	Slaves     []string
	SlaveAcked int64
	// On a slave: whether the master answers, and its log end at the last answer.
	MasterLive bool
	MasterEnd  int64
	// LogEnd is this broker's commit-log end.
	LogEnd int64
}

// Replication reports the broker's replication state.
func (b *Broker) Replication() ReplicationStatus {
	st := ReplicationStatus{Role: b.cfg.Role, LogEnd: b.cl.committed.Load()}
	if b.cfg.Role == RoleSlave {
		st.MasterLive, st.MasterEnd = b.repl.masterLive(), b.repl.masterEnd.Load()
	} else {
		st.Slaves, st.SlaveAcked, _ = b.replM.live()
	}
	return st
}
