package broker

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rsql/broker/remoting"
)

// Admin and statistics requests of RocketMQ's tools (mqadmin, the dashboard), answered as
// RocketMQ's AdminBrokerProcessor and name server do (docs/broker.md lists them). Bodies
// keyed by message queue use fastjson's form, an object as the key
// ({{"brokerName":"b","queueId":0,"topic":"t"}:{...}}), since that is what the Java tools
// parse.

// QueueStat is one queue of a consumer group's progress (GET_CONSUME_STATS).
type QueueStat struct {
	Topic string
	Queue int
	// BrokerOffset is the queue's end; ConsumerOffset the group's committed offset (0 when
	// none); their difference is the group's lag on the queue.
	BrokerOffset, ConsumerOffset int64
	// LastTimestamp is the store time of the last consumed message (0: none).
	LastTimestamp int64
}

// ConsumeStats reports a group's progress on a topic, or (topic "") on every topic it
// has committed offsets for, retry topic included.
func (b *Broker) ConsumeStats(group, topicName string) []QueueStat {
	var topics []string
	if topicName != "" {
		topics = []string{topicName}
	} else {
		seen := map[string]bool{}
		for _, o := range b.GroupOffsets(group) {
			if !seen[o.Topic] {
				seen[o.Topic] = true
				topics = append(topics, o.Topic)
			}
		}
	}
	var out []QueueStat
	for _, tn := range topics {
		t := b.topic(tn)
		if t == nil {
			continue
		}
		for i, q := range t.queues {
			st := QueueStat{Topic: tn, Queue: i, BrokerOffset: q.max.Load()}
			if o, ok := b.QueryOffset(group, tn, i); ok && o > 0 {
				st.ConsumerOffset = o
				st.LastTimestamp, _ = b.queueStoreTime(q, o-1)
			}
			out = append(out, st)
		}
	}
	return out
}

// queueStoreTime is the store time of the message at a queue offset.
func (b *Broker) queueStoreTime(q *consumeQueue, off int64) (int64, bool) {
	phys, _, _, ok := q.get(off)
	if !ok {
		return 0, false
	}
	h, err := b.cl.read(nil, phys, 64)
	if err != nil || binary.BigEndian.Uint32(h[4:]) != magicMessage {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(h[56:])), true
}

// mqKey renders a message queue as fastjson writes a map key (fields sorted).
func mqKey(brokerName, topicName string, queue int) string {
	b := plainJSON(brokerName)
	t := plainJSON(topicName)
	return fmt.Sprintf(`{"brokerName":%s,"queueId":%d,"topic":%s}`, b, queue, t)
}

// javaDouble renders a double as Java does for a JSON number (always with a fraction).
func javaDouble(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func (s *netServer) consumeStats(req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	stats := s.b.ConsumeStats(group, req.Ext("topic"))
	var sb strings.Builder
	sb.WriteString(`{"consumeTps":` + javaDouble(s.b.stats.groupTPS(group)) + `,"offsetTable":{`)
	for i, st := range stats {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `%s:{"brokerOffset":%d,"consumerOffset":%d,"lastTimestamp":%d,"pullOffset":%d}`,
			mqKey(s.b.cfg.BrokerName, st.Topic, st.Queue), st.BrokerOffset, st.ConsumerOffset, st.LastTimestamp, st.ConsumerOffset)
	}
	sb.WriteString("}}")
	r := req.Reply(respSuccess, "")
	r.Body = []byte(sb.String())
	return r
}

func (s *netServer) topicStats(req *remoting.Command) *remoting.Command {
	name := req.Ext("topic")
	t := s.b.topic(name)
	if t == nil {
		return req.Reply(respTopicNotExist, fmt.Sprintf("topic[%s] not exist", name))
	}
	var sb strings.Builder
	sb.WriteString(`{"offsetTable":{`)
	for i, q := range t.queues {
		if i > 0 {
			sb.WriteByte(',')
		}
		minO, maxO := q.min.Load(), q.max.Load()
		var last int64
		if maxO > 0 {
			last, _ = s.b.queueStoreTime(q, maxO-1)
		}
		fmt.Fprintf(&sb, `%s:{"lastUpdateTimestamp":%d,"maxOffset":%d,"minOffset":%d}`,
			mqKey(s.b.cfg.BrokerName, name, i), last, maxO, minO)
	}
	sb.WriteString("}}")
	r := req.Reply(respSuccess, "")
	r.Body = []byte(sb.String())
	return r
}

// clusterInfo answers GET_BROKER_CLUSTER_INFO in Apache RocketMQ's ClusterInfo shape: this
// broker name with its addresses (the master as id 0, a live slave as 1; see brokerAddrs).
// Admin tools read it to find where to create topics.
func (s *netServer) clusterInfo(req *remoting.Command) *remoting.Command {
	body := plainJSON(map[string]any{
		"brokerAddrTable": map[string]any{s.b.cfg.BrokerName: remoting.BrokerData{Cluster: s.b.cfg.ClusterName,
			BrokerName: s.b.cfg.BrokerName, BrokerAddrs: s.brokerAddrs()}},
		"clusterAddrTable": map[string][]string{s.b.cfg.ClusterName: {s.b.cfg.BrokerName}},
	})
	r := req.Reply(respSuccess, "")
	r.Body = body
	return r
}

// runtimeInfo is GET_BROKER_RUNTIME_INFO's table: the keys RocketMQ's tools show.
func (s *netServer) runtimeInfo(req *remoting.Command) *remoting.Command {
	b := s.b
	st := b.stats
	st.mu.Lock()
	putToday, putYesterday, getToday, getYesterday := st.putToday, st.putYesterday, st.getToday, st.getYesterday
	st.mu.Unlock()
	up := time.Since(st.boot)
	t := map[string]string{
		"brokerVersionDesc":           "V5_3_3",
		"brokerVersion":               "479",
		"bootTimestamp":               strconv.FormatInt(st.boot.UnixMilli(), 10),
		"runtime":                     fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", int(up.Hours())/24, int(up.Hours())%24, int(up.Minutes())%60, int(up.Seconds())%60),
		"msgPutTotalTodayNow":         strconv.FormatInt(st.put.Load(), 10),
		"msgPutTotalTodayMorning":     strconv.FormatInt(putToday, 10),
		"msgPutTotalYesterdayMorning": strconv.FormatInt(putYesterday, 10),
		"msgGetTotalTodayNow":         strconv.FormatInt(b.served.Load(), 10),
		"msgGetTotalTodayMorning":     strconv.FormatInt(getToday, 10),
		"msgGetTotalYesterdayMorning": strconv.FormatInt(getYesterday, 10),
		"putTps":                      st.tps(func(x statSample) int64 { return x.put }),
		"getTransferedTps":            st.tps(func(x statSample) int64 { return x.get }),
		"commitLogMinOffset":          strconv.FormatInt(b.cl.minOffset(), 10),
		"commitLogMaxOffset":          strconv.FormatInt(b.cl.committed.Load(), 10),
		"commitLogDiskRatio":          "0.0",
		"brokerRole":                  s.roleName(),
		"openTransactions":            strconv.Itoa(b.OpenTransactions()),
		"sendThreadPoolQueueSize":     "0",
		"pullThreadPoolQueueSize":     "0",
		"dispatchBehindBytes":         "0",
	}
	rs := b.Replication()
	if rs.Role == RoleSlave {
		t["masterLive"] = strconv.FormatBool(rs.MasterLive)
		t["masterLogEnd"] = strconv.FormatInt(rs.MasterEnd, 10)
	} else {
		t["liveSlaves"] = strings.Join(rs.Slaves, ",")
		t["slaveAckOffset"] = strconv.FormatInt(rs.SlaveAcked, 10)
	}
	if b.idx != nil {
		t["dispatchBehindBytes"] = strconv.FormatInt(max(0, b.cl.committed.Load()-b.idx.indexed.Load()), 10)
	}
	// Direct, not through storeFS: a report of the device's size, which changes no file and
	// whose failure only leaves these two fields out.
	var fs syscall.Statfs_t
	if err := syscall.Statfs(b.cfg.Dir, &fs); err == nil && fs.Blocks > 0 {
		total := float64(fs.Blocks) * float64(fs.Bsize)
		free := float64(fs.Bavail) * float64(fs.Bsize)
		t["commitLogDirCapacity"] = fmt.Sprintf("Total : %.1f GiB, Free : %.1f GiB.", total/(1<<30), free/(1<<30))
		t["commitLogDiskRatio"] = strconv.FormatFloat(1-free/total, 'f', 4, 64)
	}
	if ts, ok := b.earliestStoreTime(); ok {
		t["earliestMessageTimeStamp"] = strconv.FormatInt(ts, 10)
	}
	body := plainJSON(map[string]any{"table": t})
	r := req.Reply(respSuccess, "")
	r.Body = body
	return r
}

// earliestStoreTime is the store time of the oldest retained record.
func (b *Broker) earliestStoreTime() (int64, bool) {
	h, err := b.cl.read(nil, b.cl.minOffset(), 64)
	if err != nil || binary.BigEndian.Uint32(h[4:]) != magicMessage {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(h[56:])), true
}

func (s *netServer) brokerConfig(req *remoting.Command) *remoting.Command {
	c := s.b.cfg
	props := map[string]string{
		"brokerName": c.BrokerName, "brokerClusterName": c.ClusterName, "brokerId": strconv.Itoa(s.brokerID()),
		"brokerRole": s.roleName(), "storePathRootDir": c.Dir, "mappedFileSizeCommitLog": strconv.FormatInt(c.SegmentSize, 10),
		"flushDiskType":               map[FlushMode]string{FlushAsync: "ASYNC_FLUSH", FlushSync: "SYNC_FLUSH"}[c.FlushMode],
		"flushIntervalCommitLog":      strconv.FormatInt(c.FlushInterval.Milliseconds(), 10),
		"fileReservedTime":            strconv.FormatInt(int64(c.RetentionAge.Hours()), 10),
		"maxMessageSize":              strconv.Itoa(c.MaxMessageSize),
		"defaultTopicQueueNums":       strconv.Itoa(c.DefaultQueues),
		"autoCreateTopicEnable":       strconv.FormatBool(!c.DisableAutoCreate),
		"autoCreateSubscriptionGroup": "true",
		"messageIndexEnable":          strconv.FormatBool(!c.DisableIndex),
		"enablePropertyFilter":        "true",
		"transactionTimeOut":          strconv.FormatInt(c.TransactionTimeout.Milliseconds(), 10),
		"transactionCheckInterval":    strconv.FormatInt(c.TransactionCheckInterval.Milliseconds(), 10),
		"transactionCheckMax":         strconv.Itoa(c.TransactionCheckMax),
		"channelNotActiveInterval":    strconv.FormatInt(c.ClientExpiry.Milliseconds(), 10),
		"messageDelayLevel":           delayLevelsText(c.DelayLevels),
		"listenPort":                  portOf(s.brokerAddr),
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		sb.WriteString(k + "=" + props[k] + "\n")
	}
	r := req.Reply(respSuccess, "")
	v := plainJSON(dataVersion{Timestamp: s.b.stats.boot.UnixMilli()})
	r.ExtFields = map[string]string{"version": string(v)}
	r.Body = []byte(sb.String())
	return r
}

func delayLevelsText(levels []time.Duration) string {
	var parts []string
	for _, d := range levels {
		switch {
		case d%time.Hour == 0:
			parts = append(parts, fmt.Sprintf("%dh", d/time.Hour))
		case d%time.Minute == 0:
			parts = append(parts, fmt.Sprintf("%dm", d/time.Minute))
		default:
			parts = append(parts, fmt.Sprintf("%ds", d/time.Second))
		}
	}
	return strings.Join(parts, " ")
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

func (s *netServer) allTopicConfig(req *remoting.Command) *remoting.Command {
	tbl := map[string]any{}
	for _, t := range s.b.Topics() {
		tbl[t.Name] = map[string]any{"topicName": t.Name, "readQueueNums": t.Queues, "writeQueueNums": t.Queues,
			"perm": t.Perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false}
	}
	body := plainJSON(map[string]any{"topicConfigTable": tbl, "dataVersion": dataVersion{Timestamp: time.Now().UnixMilli()}})
	r := req.Reply(respSuccess, "")
	r.Body = body
	return r
}

// connection is one client of a group, as GET_*_CONNECTION_LIST answer it.
type connection struct {
	ClientID   string `json:"clientId"`
	ClientAddr string `json:"clientAddr"`
	Language   string `json:"language"`
	Version    int16  `json:"version"`
}

func connections(m map[string]*clientInfo) []connection {
	out := []connection{}
	for id, ci := range m {
		out = append(out, connection{ClientID: id, ClientAddr: ci.conn.remote.String(), Language: ci.language, Version: ci.version})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out
}

func (s *netServer) consumerConnections(req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	s.cmu.Lock()
	g := s.groups[group]
	if g == nil || len(g.clients) == 0 {
		s.cmu.Unlock()
		return req.Reply(respConsumerNotOnline, fmt.Sprintf("the consumer group[%s] not online", group))
	}
	subs := map[string]json.RawMessage{}
	for t, raw := range g.subData {
		subs[t] = raw
	}
	body := plainJSON(map[string]any{"connectionSet": connections(g.clients), "subscriptionTable": subs,
		"consumeType": g.consumeType, "messageModel": g.messageModel, "consumeFromWhere": g.consumeFromWhere})
	s.cmu.Unlock()
	r := req.Reply(respSuccess, "")
	r.Body = body
	return r
}

func (s *netServer) producerConnections(req *remoting.Command) *remoting.Command {
	group := req.Ext("producerGroup")
	s.cmu.Lock()
	g := s.producers[group]
	if len(g) == 0 {
		s.cmu.Unlock()
		return req.Reply(respSystemError, fmt.Sprintf("the producer group[%s] not exist", group))
	}
	body := plainJSON(map[string]any{"connectionSet": connections(g)})
	s.cmu.Unlock()
	r := req.Reply(respSuccess, "")
	r.Body = body
	return r
}

// topicConsumers answers QUERY_TOPIC_CONSUME_BY_WHO: the groups subscribed to a topic
// now, and those with committed offsets on it.
func (s *netServer) topicConsumers(req *remoting.Command) *remoting.Command {
	name := req.Ext("topic")
	set := map[string]bool{}
	s.cmu.Lock()
	for gn, g := range s.groups {
		if _, ok := g.subs[name]; ok {
			set[gn] = true
		}
	}
	s.cmu.Unlock()
	for _, gn := range s.b.ConsumerGroups() {
		for _, o := range s.b.GroupOffsets(gn) {
			if o.Topic == name {
				set[gn] = true
				break
			}
		}
	}
	groups := []string{}
	for g := range set {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	body := plainJSON(map[string]any{"groupList": groups})
	r := req.Reply(respSuccess, "")
	r.Body = body
	return r
}

func (s *netServer) topicList(req *remoting.Command, system bool) *remoting.Command {
	names := []string{}
	for _, t := range s.b.Topics() {
		if !system || IsSystemTopic(t.Name) {
			names = append(names, t.Name)
		}
	}
	body := plainJSON(map[string]any{"topicList": names, "brokerAddr": s.brokerAddr})
	r := req.Reply(respSuccess, "")
	r.Body = body
	return r
}

func (s *netServer) updateSubscriptionGroup(req *remoting.Command) *remoting.Command {
	g := DefaultSubscriptionGroup("")
	if err := json.Unmarshal(req.Body, &g); err != nil {
		return req.Reply(respInvalidParameter, "subscription group body is not valid JSON: "+err.Error())
	}
	if !ValidTopic(g.GroupName) {
		return req.Reply(respInvalidParameter, fmt.Sprintf("invalid group name %q", g.GroupName))
	}
	if err := s.b.subs.put(g); err != nil {
		return req.Reply(respSystemError, err.Error())
	}
	return req.Reply(respSuccess, "")
}

func (s *netServer) subscriptionGroup(req *remoting.Command) *remoting.Command {
	g, ok := s.b.subs.get(req.Ext("group"))
	if !ok {
		return req.Reply(respSubscriptionGroupNotExist, fmt.Sprintf("the subscription group %s does not exist", req.Ext("group")))
	}
	r := req.Reply(respSuccess, "")
	r.Body = plainJSON(g)
	return r
}

func (s *netServer) deleteSubscriptionGroup(req *remoting.Command) *remoting.Command {
	if err := s.b.subs.delete(req.Ext("groupName")); err != nil {
		return req.Reply(respSystemError, err.Error())
	}
	return req.Reply(respSuccess, "")
}

func (s *netServer) earliestStoreTime(req *remoting.Command) *remoting.Command {
	qid, err := req.ExtIntOr("queueId", 0)
	if err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	q, err := s.b.queue(req.Ext("topic"), int(qid))
	if err != nil {
		return req.Reply(respTopicNotExist, err.Error())
	}
	ts, _ := s.b.queueStoreTime(q, q.min.Load())
	r := req.Reply(respSuccess, "")
	r.ExtFields = map[string]string{"timestamp": strconv.FormatInt(ts, 10)}
	return r
}
