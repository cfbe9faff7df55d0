package broker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"rsql/broker/remoting"
)

// Request codes (docs/broker.md: the supported-codes table and "Protocol notes").
const (
	codeSendMessage        = 10
	codePullMessage        = 11
	codeQueryMessage       = 12
	codeQueryConsumerOff   = 14
	codeUpdateConsumerOff  = 15
	codeUpdateCreateTopic  = 17
	codeGetAllTopicConfig  = 21
	codeGetBrokerConfig    = 26
	codeGetRuntimeInfo     = 28
	codeSearchOffsetByTS   = 29
	codeGetMaxOffset       = 30
	codeGetMinOffset       = 31
	codeGetEarliestTime    = 32
	codeViewMessageByID    = 33
	codeHeartbeat          = 34
	codeUnregisterClient   = 35
	codeSendMsgBack        = 36
	codeEndTransaction     = 37
	codeGetConsumerList    = 38
	codeCheckTransaction   = 39
	codeNotifyIDsChanged   = 40
	codeLockBatch          = 41
	codeUnlockBatch        = 42
	codeCheckClientConfig  = 46
	codeGetRoute           = 105
	codeGetClusterInfo     = 106
	codeUpdateSubGroup     = 200
	codeGetAllSubGroups    = 201
	codeGetTopicStats      = 202
	codeGetConsumerConns   = 203
	codeGetProducerConns   = 204
	codeGetAllTopics       = 206
	codeDeleteSubGroup     = 207
	codeGetConsumeStats    = 208
	codeGetTopicsByCluster = 224
	codeTopicConsumeByWho  = 300
	codeGetSystemTopics    = 304
	codeGetSubGroupConfig  = 352
	codeDeleteTopicBroker  = 215
	codeDeleteTopicNamesrv = 216
	codeSendMessageV2      = 310
	codeSendBatch          = 320
	codeSendReply          = 324
)

// Response codes.
const (
	respSuccess                   = 0
	respSystemError               = 1
	respNotSupported              = 3
	respMessageIllegal            = 13
	respNoPermission              = 16
	respTopicNotExist             = 17
	respPullNotFound              = 19
	respPullRetry                 = 20
	respPullOffsetMoved           = 21
	respQueryNotFound             = 22
	respSubscriptionParseFailed   = 23
	respSubscriptionGroupNotExist = 26
	respConsumerNotOnline         = 206
	respInvalidParameter          = 29
)

const (
	tbw102     = "TBW102"
	traceTopic = "RMQ_SYS_TRACE_TOPIC"
)

func (s *netServer) handle(c *conn, req *remoting.Command) (resp *remoting.Command) {
	defer func() {
		if r := recover(); r != nil {
			s.b.cfg.Logger.Error("request handler panicked", "code", req.Code, "panic", fmt.Sprint(r))
			resp = req.Reply(respSystemError, fmt.Sprintf("internal error handling code %d", req.Code))
		}
	}()
	if s.b.cfg.Role == RoleSlave {
		switch req.Code {
		case codeUpdateCreateTopic, codeDeleteTopicBroker, codeSendMsgBack, codeUpdateSubGroup, codeDeleteSubGroup:
			return req.Reply(respServiceUnavailable, "this broker is a slave: ask its master")
		}
	}
	switch req.Code {
	case codeReplFetch:
		return s.replFetch(c, req)
	case codeGetAllConsumerOffs:
		return s.allConsumerOffsets(req)
	case codeGetRoute:
		return s.route(req)
	case codeGetClusterInfo:
		return s.clusterInfo(req)
	case codeSendMessage, codeSendMessageV2, codeSendBatch, codeSendReply:
		resp, end := s.send(c, req)
		if end > 0 {
			return s.finishSend(req, resp, end)
		}
		return resp
	case codeHeartbeat:
		return s.heartbeat(c, req)
	case codeUnregisterClient:
		s.unregister(req)
		return req.Reply(respSuccess, "")
	case codeGetConsumerList:
		return s.consumerList(req)
	case codeQueryConsumerOff, codeUpdateConsumerOff:
		return s.offset(req)
	case codePullMessage:
		return s.pull(c, req)
	case codeGetMaxOffset, codeGetMinOffset, codeSearchOffsetByTS:
		return s.queueOffset(req)
	case codeSendMsgBack:
		return s.sendBack(req)
	case codeLockBatch:
		return s.lockBatch(req)
	case codeUnlockBatch:
		return s.unlockBatch(req)
	case codeEndTransaction:
		return s.endTransaction(req)
	case codeCheckClientConfig:
		return s.checkClientConfig(req)
	case codeQueryMessage:
		return s.queryMessage(req)
	case codeViewMessageByID:
		return s.viewMessage(req)
	case codeUpdateCreateTopic:
		return s.createTopic(req)
	case codeDeleteTopicBroker:
		if err := s.b.DeleteTopic(req.Ext("topic")); err != nil {
			return req.Reply(respSystemError, err.Error())
		}
		return req.Reply(respSuccess, "")
	case codeDeleteTopicNamesrv:
		return req.Reply(respSuccess, "")
	case codeGetAllTopics, codeGetTopicsByCluster:
		return s.topicList(req, false)
	case codeGetSystemTopics:
		return s.topicList(req, true)
	case codeGetAllSubGroups:
		r := req.Reply(respSuccess, "")
		r.Body = s.b.subs.encode()
		return r
	case codeUpdateSubGroup:
		return s.updateSubscriptionGroup(req)
	case codeGetSubGroupConfig:
		return s.subscriptionGroup(req)
	case codeDeleteSubGroup:
		return s.deleteSubscriptionGroup(req)
	case codeGetConsumeStats:
		return s.consumeStats(req)
	case codeGetTopicStats:
		return s.topicStats(req)
	case codeGetRuntimeInfo:
		return s.runtimeInfo(req)
	case codeGetBrokerConfig:
		return s.brokerConfig(req)
	case codeGetAllTopicConfig:
		return s.allTopicConfig(req)
	case codeGetConsumerConns:
		return s.consumerConnections(req)
	case codeGetProducerConns:
		return s.producerConnections(req)
	case codeTopicConsumeByWho:
		return s.topicConsumers(req)
	case codeGetEarliestTime:
		return s.earliestStoreTime(req)
	}
	return req.Reply(respNotSupported, fmt.Sprintf("request code %d is not supported", req.Code))
}

func (s *netServer) route(req *remoting.Command) *remoting.Command {
	name := req.Ext("topic")
	var qd remoting.QueueData
	if _, ok := s.b.Topic(name); !ok && (strings.HasPrefix(name, "%RETRY%") || name == traceTopic) && ValidTopic(name) &&
		s.b.cfg.Role == RoleMaster {
		// Consumers ask for their retry topic's route before their first heartbeat (which
		// would create it); create it now so the first rebalance already covers it. The
		// client's message-trace dispatcher never falls back to TBW102: its topic is
		// created (with one queue, as RocketMQ's traceTopicEnable does) when first asked for.
		s.b.ensureTopic(name, 1, PermRead|PermWrite)
	}
	if ti, ok := s.b.Topic(name); ok {
		qd = remoting.QueueData{BrokerName: s.b.cfg.BrokerName, ReadQueueNums: ti.Queues, WriteQueueNums: ti.Queues, Perm: ti.Perm}
		if s.standIn() {
			qd.Perm &^= PermWrite // a slave standing in for its master serves reads only
		}
	} else if name == tbw102 && !s.b.cfg.DisableAutoCreate {
		n := s.b.cfg.DefaultQueues
		qd = remoting.QueueData{BrokerName: s.b.cfg.BrokerName, ReadQueueNums: n, WriteQueueNums: n, Perm: 7}
	} else {
		return req.Reply(respTopicNotExist, fmt.Sprintf("no topic route info in name server for the topic: %s", name))
	}
	body := plainJSON(map[string]any{
		"queueDatas": []remoting.QueueData{qd},
		"brokerDatas": []remoting.BrokerData{{Cluster: s.b.cfg.ClusterName, BrokerName: s.b.cfg.BrokerName,
			BrokerAddrs: s.brokerAddrs()}},
	})
	r := req.Reply(respSuccess, "")
	r.Body = body
	return r
}

// sendFields maps long header names to the one-letter names of V2 and batch sends.
var sendFields = map[string]string{"topic": "b", "queueId": "e", "sysFlag": "f", "bornTimestamp": "g",
	"flag": "h", "properties": "i", "reconsumeTimes": "j", "maxReconsumeTimes": "l", "defaultTopicQueueNums": "d"}

// send appends a send request's messages. It returns the reply and, in sync-flush mode,
// the log end the reply must wait for (0: reply at once).
func (s *netServer) send(c *conn, req *remoting.Command) (resp *remoting.Command, end int64) {
	defer func() {
		if r := recover(); r != nil {
			s.b.cfg.Logger.Error("send handler panicked", "code", req.Code, "panic", fmt.Sprint(r))
			resp, end = req.Reply(respSystemError, "internal error handling a send"), 0
		}
	}()
	resp, end = s.sendAppend(c, req)
	if s.b.cfg.FlushMode != FlushSync && s.b.cfg.Replication != ReplicationSync || resp.Code != respSuccess {
		end = 0
	}
	return resp, end
}

func (s *netServer) sendAppend(c *conn, req *remoting.Command) (*remoting.Command, int64) {
	if s.b.cfg.Role == RoleSlave {
		return req.Reply(respServiceUnavailable, "this broker is a slave: send to its master"), 0
	}
	short := req.Code == codeSendMessageV2 || req.Code == codeSendBatch
	get := func(k string) string {
		if short {
			return req.Ext(sendFields[k])
		}
		return req.Ext(k)
	}
	for _, k := range []string{"queueId", "sysFlag", "bornTimestamp", "flag", "reconsumeTimes", "maxReconsumeTimes"} {
		if v := get(k); v != "" {
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return req.Reply(respInvalidParameter, fmt.Sprintf("header field %q=%q is not an integer", k, v)), 0
			}
		}
	}
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(get(k), 10, 64) // validated above; missing reads as 0
		return n
	}
	name := get("topic")
	if !ValidTopic(name) {
		return req.Reply(respInvalidParameter, fmt.Sprintf("invalid topic name %q", name)), 0
	}
	queue := int(num("queueId"))
	t, err := s.ensureSendTopic(name)
	if err != nil {
		return req.Reply(respTopicNotExist, err.Error()), 0
	}
	if queue < 0 {
		queue = 0
	}
	if queue >= t.Queues {
		return req.Reply(respInvalidParameter, fmt.Sprintf("queue %d is out of range: topic %s has %d queues", queue, name, t.Queues)), 0
	}
	if t.Perm&PermWrite == 0 {
		return req.Reply(respNoPermission, fmt.Sprintf("topic %s is not writable", name)), 0
	}
	base := inMsg{topic: name, queue: queue, sysFlag: int32(num("sysFlag")), bornTS: num("bornTimestamp"),
		flag: int32(num("flag")), reconsume: int32(num("reconsumeTimes")), bornHost: c.remote}
	var ins []inMsg
	if req.Code == codeSendBatch {
		ins, err = decodeBatch(req.Body, base)
		if err != nil {
			return req.Reply(respMessageIllegal, err.Error()), 0
		}
		for i := range ins {
			if isPrepared(ins[i].props) {
				return req.Reply(respMessageIllegal, fmt.Sprintf("batch item %d is a transactional message: send those one at a time", i)), 0
			}
		}
	} else {
		m := base
		m.body = req.Body
		m.props = []byte(get("properties"))
		m.tagsCode = TagsCode(propValue(m.props, PropTags))
		if isPrepared(m.props) {
			return s.sendHalf(req, m)
		}
		ins = []inMsg{m}
		// A retry message past its maximum goes to the dead-letter queue.
		if g, ok := strings.CutPrefix(name, "%RETRY%"); ok {
			maxRe := int64(16)
			if v := get("maxReconsumeTimes"); v != "" {
				maxRe = num("maxReconsumeTimes")
			}
			if int64(m.reconsume) > maxRe {
				dlq := "%DLQ%" + g
				if _, err := s.b.ensureTopic(dlq, 1, PermRead|PermWrite); err != nil {
					return req.Reply(respSystemError, err.Error()), 0
				}
				ins[0].topic, ins[0].queue = dlq, 0
				ins[0].props = stripProps(ins[0].props, PropDelay)
			}
		}
	}
	if len(ins) == 0 {
		return req.Reply(respMessageIllegal, "empty batch"), 0
	}
	res, end, err := s.b.appendMsgs(ins)
	if err != nil {
		code := int16(respSystemError)
		switch {
		case errors.Is(err, ErrMessageTooLarge) || errors.Is(err, ErrInvalidTopic):
			code = respMessageIllegal
		case errors.Is(err, ErrNoSpace):
			// As RocketMQ answers a send when its disk is full: nothing is stored, the
			// broker serves reads, and a send after space returns succeeds.
			code = respServiceUnavailable
		}
		return req.Reply(code, err.Error()), 0
	}
	host := s.b.host()
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = MessageID(host, r.phys)
	}
	r := req.Reply(respSuccess, "")
	r.ExtFields = map[string]string{
		"msgId":       strings.Join(ids, ","),
		"queueId":     strconv.Itoa(ins[0].queue),
		"queueOffset": strconv.FormatInt(res[0].queueOffset, 10),
		"MSG_REGION":  "DefaultRegion",
		"TRACE_ON":    "true",
	}
	return r, end
}

func (s *netServer) ensureSendTopic(name string) (TopicInfo, error) {
	if ti, ok := s.b.Topic(name); ok {
		return ti, nil
	}
	if s.b.cfg.DisableAutoCreate && !strings.HasPrefix(name, "%RETRY%") && !strings.HasPrefix(name, "%DLQ%") {
		return TopicInfo{}, fmt.Errorf("topic %s does not exist and auto-creation is disabled", name)
	}
	n := s.b.cfg.DefaultQueues
	if strings.HasPrefix(name, "%RETRY%") || strings.HasPrefix(name, "%DLQ%") {
		n = 1
	}
	t, err := s.b.ensureTopic(name, n, PermRead|PermWrite)
	if err != nil {
		return TopicInfo{}, err
	}
	return t.info, nil
}

func stripProps(props []byte, keys ...string) []byte {
	p := DecodeProperties(props)
	for _, k := range keys {
		delete(p, k)
	}
	return EncodeProperties(p)
}

// decodeBatch splits a batch body (§4.2) into messages sharing base's header fields.
func decodeBatch(b []byte, base inMsg) ([]inMsg, error) {
	var out []inMsg
	at := 0
	be := binary.BigEndian
	for len(b) > 0 {
		if len(b) < 20 {
			return nil, fmt.Errorf("batch item at byte %d: truncated header", at)
		}
		total := int(be.Uint32(b))
		bodyLen := int(be.Uint32(b[16:]))
		if total < 22 || total > len(b) || bodyLen < 0 || bodyLen > total-22 {
			return nil, fmt.Errorf("batch item at byte %d: size %d / body length %d do not fit in %d bytes", at, total, bodyLen, len(b))
		}
		m := base
		m.flag = int32(be.Uint32(b[12:]))
		m.body = b[20 : 20+bodyLen]
		p := 20 + bodyLen
		pl := int(be.Uint16(b[p:]))
		p += 2
		if p+pl != total {
			return nil, fmt.Errorf("batch item at byte %d: properties end at %d, size says %d", at, p+pl, total)
		}
		m.props = b[p : p+pl]
		m.tagsCode = TagsCode(propValue(m.props, PropTags))
		out = append(out, m)
		b = b[total:]
		at += total
	}
	return out, nil
}

func (s *netServer) offset(req *remoting.Command) *remoting.Command {
	group, name := req.Ext("consumerGroup"), req.Ext("topic")
	qid, err := req.ExtInt("queueId")
	if err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	if req.Code == codeUpdateConsumerOff {
		off, err := req.ExtInt("commitOffset")
		if err != nil {
			return req.Reply(respInvalidParameter, err.Error())
		}
		if err := s.b.CommitOffset(group, name, int(qid), off); err != nil {
			return req.Reply(respSystemError, err.Error())
		}
		return req.Reply(respSuccess, "")
	}
	off, ok := s.b.QueryOffset(group, name, int(qid))
	if !ok {
		return req.Reply(respQueryNotFound, "no offset stored for this consumer group and queue")
	}
	r := req.Reply(respSuccess, "")
	r.ExtFields = map[string]string{"offset": strconv.FormatInt(off, 10)}
	return r
}

func (s *netServer) queueOffset(req *remoting.Command) *remoting.Command {
	name := req.Ext("topic")
	qid, err := req.ExtIntOr("queueId", 0)
	if err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	var off int64
	switch req.Code {
	case codeGetMaxOffset:
		off, err = s.b.MaxOffset(name, int(qid))
	case codeGetMinOffset:
		off, err = s.b.MinOffset(name, int(qid))
	default:
		var ts int64
		if ts, err = req.ExtIntOr("timestamp", 0); err != nil {
			return req.Reply(respInvalidParameter, err.Error())
		}
		off, err = s.b.OffsetByTimestamp(name, int(qid), ts)
	}
	code := int16(respSuccess)
	remark := ""
	if err != nil {
		code, remark, off = respTopicNotExist, err.Error(), 0
	}
	r := req.Reply(code, remark)
	r.ExtFields = map[string]string{"offset": strconv.FormatInt(off, 10)}
	return r
}

// pullCommit stores the offset a pull carries (sysFlag bit 1). The connection's reader
// calls it before the pull is handled.
func (s *netServer) pullCommit(req *remoting.Command) {
	sysFlag, err := req.ExtIntOr("sysFlag", 0)
	if err != nil || sysFlag&1 == 0 { // a malformed sysFlag: the pull itself is refused
		return
	}
	qid, err1 := req.ExtInt("queueId")
	co, err2 := req.ExtInt("commitOffset")
	if err1 != nil || err2 != nil || co <= 0 {
		return
	}
	if _, err := s.b.queue(req.Ext("topic"), int(qid)); err != nil {
		return
	}
	if err := s.b.CommitOffset(req.Ext("consumerGroup"), req.Ext("topic"), int(qid), co); err != nil {
		s.b.cfg.Logger.Error("storing a pull's commit offset failed", "err", err)
	}
}

// checkClientConfig answers CHECK_CLIENT_CONFIG (46), which Java consumers send before
// they start: 23 when the subscription's expression does not compile.
func (s *netServer) checkClientConfig(req *remoting.Command) *remoting.Command {
	var body struct {
		Group            string `json:"group"`
		SubscriptionData struct {
			Topic          string `json:"topic"`
			SubString      string `json:"subString"`
			ExpressionType string `json:"expressionType"`
		} `json:"subscriptionData"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return req.Reply(respInvalidParameter, "client config body is not valid JSON: "+err.Error())
	}
	sd := body.SubscriptionData
	if f := newSubFilter(sd.ExpressionType, sd.SubString); f != nil && f.err != nil {
		return req.Reply(respSubscriptionParseFailed, fmt.Sprintf("the %s subscription %q of group %s on %s does not compile: %v",
			f.typ, f.expr, body.Group, sd.Topic, f.err))
	}
	return req.Reply(respSuccess, "")
}

// pullFilter is the filter of a pull: the subscription it carries (sysFlag bit 4) or
// else the one its group's heartbeats registered. The push consumer sends its expression
// with the type TAG even when it subscribed with SQL92; the heartbeat's type wins then.
func (s *netServer) pullFilter(group, topicName string, sysFlag int, req *remoting.Command) *subFilter {
	hb := s.subscription(group, topicName)
	if sysFlag&4 == 0 {
		return hb
	}
	typ, expr := req.Ext("expressionType"), req.Ext("subscription")
	if hb != nil && hb.typ == ExprSQL92 && hb.expr == expr && !strings.EqualFold(typ, ExprSQL92) {
		return hb
	}
	return s.filters.get(typ, expr)
}

func (s *netServer) pull(c *conn, req *remoting.Command) *remoting.Command {
	group, name := req.Ext("consumerGroup"), req.Ext("topic")
	qid, err1 := req.ExtInt("queueId")
	offset, err2 := req.ExtInt("queueOffset")
	if err := errors.Join(err1, err2); err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	maxN, err1 := req.ExtIntOr("maxMsgNums", 0)
	sysFlag, err2 := req.ExtIntOr("sysFlag", 0)
	suspend, err3 := req.ExtIntOr("suspendTimeoutMillis", 0)
	if err := errors.Join(err1, err2, err3); err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	maxN = min(max(maxN, 1), 1024)
	q, err := s.b.queue(name, int(qid))
	if err != nil {
		return req.Reply(respTopicNotExist, err.Error())
	}
	if sg, ok := s.b.subs.get(group); ok && !sg.ConsumeEnable {
		return req.Reply(respNoPermission, "subscription group no permission, "+group)
	}
	filter := s.pullFilter(group, name, int(sysFlag), req)
	if filter != nil && filter.err != nil {
		return req.Reply(respSubscriptionParseFailed, fmt.Sprintf("the %s subscription %q of group %s on %s does not compile: %v",
			filter.typ, filter.expr, group, name, filter.err))
	}
	var deadline <-chan time.Time
	for {
		ch := q.waitCh()
		buf, n, next, st := s.b.readRaw(q, offset, int(maxN), 4<<20, filter, nil)
		if st == pullFound {
			s.b.served.Add(int64(n))
			s.b.stats.group(group).served.Add(int64(n))
		}
		if st == pullNoNew && sysFlag&2 != 0 && suspend > 0 {
			if deadline == nil {
				wait := min(time.Duration(suspend)*time.Millisecond, s.b.cfg.MaxPullWait)
				t := time.NewTimer(wait)
				defer t.Stop()
				deadline = t.C
			}
			select {
			case <-ch:
				continue
			case <-deadline:
			case <-c.done:
				return nil
			case <-s.done:
			}
		}
		code := map[pullStatus]int16{pullFound: respSuccess, pullNoNew: respPullNotFound,
			pullNoMatch: respPullRetry, pullOffsetMoved: respPullOffsetMoved}[st]
		r := req.Reply(code, "")
		r.ExtFields = map[string]string{
			"nextBeginOffset":      strconv.FormatInt(next, 10),
			"minOffset":            strconv.FormatInt(q.min.Load(), 10),
			"maxOffset":            strconv.FormatInt(q.max.Load(), 10),
			"suggestWhichBrokerId": "0",
		}
		r.Body = buf
		return r
	}
}

func (s *netServer) sendBack(req *remoting.Command) *remoting.Command {
	group := req.Ext("group")
	phys, err := req.ExtInt("offset")
	if err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	rec, err := s.b.cl.readRecord(phys)
	if err != nil {
		return req.Reply(respSystemError, fmt.Sprintf("no message at commit-log offset %d: %v", phys, err))
	}
	maxRe, err1 := req.ExtIntOr("maxReconsumeTimes", 16)
	level, err2 := req.ExtIntOr("delayLevel", 0)
	if err := errors.Join(err1, err2); err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	p := DecodeProperties(rec.props)
	delete(p, PropDelay)
	delete(p, PropRealTopic)
	delete(p, PropRealQueue)
	if p[PropRetryTopic] == "" {
		p[PropRetryTopic] = rec.topic
	}
	if p[PropOriginMsgID] == "" {
		id := req.Ext("originMsgId")
		if id == "" {
			id = MessageID(rec.storeHost, rec.physOffset)
		}
		p[PropOriginMsgID] = id
	}
	target := "%RETRY%" + group
	if int64(rec.reconsume) >= maxRe || level < 0 {
		target = "%DLQ%" + group
	} else {
		if level == 0 {
			level = 3 + int64(rec.reconsume)
		}
		p[PropDelay] = strconv.FormatInt(min(level, int64(len(s.b.cfg.DelayLevels))), 10)
	}
	if _, err := s.b.ensureTopic(target, 1, PermRead|PermWrite); err != nil {
		return req.Reply(respSystemError, err.Error())
	}
	m := inMsg{topic: target, queue: 0, flag: rec.flag, sysFlag: rec.sysFlag, bornTS: rec.bornTS,
		bornHost: rec.bornHost, reconsume: rec.reconsume + 1, body: rec.body, props: EncodeProperties(p),
		tagsCode: TagsCode(p[PropTags])}
	if _, err := s.b.put([]inMsg{m}); err != nil {
		return req.Reply(respSystemError, err.Error())
	}
	return req.Reply(respSuccess, "")
}

func (s *netServer) createTopic(req *remoting.Command) *remoting.Command {
	name := req.Ext("topic")
	if !ValidTopic(name) || name == tbw102 || name == scheduleTopic {
		return req.Reply(respInvalidParameter, fmt.Sprintf("invalid topic name %q", name))
	}
	r, err1 := req.ExtIntOr("readQueueNums", 0)
	w, err2 := req.ExtIntOr("writeQueueNums", 0)
	if err := errors.Join(err1, err2); err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	n := int(max(r, w, 1))
	if n > 1024 {
		return req.Reply(respInvalidParameter, fmt.Sprintf("%d queues is above the limit of 1024", n))
	}
	perm := PermRead | PermWrite
	if v, err := req.ExtInt("perm"); err == nil && v > 0 {
		perm = int(v) & 7
	}
	if _, err := s.b.ensureTopic(name, n, perm); err != nil {
		return req.Reply(respSystemError, err.Error())
	}
	return req.Reply(respSuccess, "")
}

// queryMessage answers QUERY_MESSAGE (12): the stored records of a topic whose KEYS or
// UNIQ_KEY hold key, stored in [beginTimestamp, endTimestamp], oldest first, at most
// maxNum (64; 32 with _UNIQUE_KEY_QUERY=true) — or 22 when there are none.
func (s *netServer) queryMessage(req *remoting.Command) *remoting.Command {
	name, key := req.Ext("topic"), req.Ext("key")
	maxN, err1 := req.ExtInt("maxNum")
	begin, err2 := req.ExtInt("beginTimestamp")
	end, err3 := req.ExtInt("endTimestamp")
	if err := errors.Join(err1, err2, err3); err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	if req.Ext("_UNIQUE_KEY_QUERY") == "true" {
		maxN = 32
	}
	maxN = min(max(maxN, 1), 64)
	recs, err := s.b.queryRecords(name, key, int(maxN), begin, end)
	if err != nil {
		return req.Reply(respSystemError, err.Error())
	}
	r := req.Reply(respSuccess, "")
	if len(recs) == 0 {
		r = req.Reply(respQueryNotFound, "can not find message, maybe time range not correct")
	}
	r.ExtFields = map[string]string{"indexLastUpdateTimestamp": "0", "indexLastUpdatePhyoffset": "0"}
	if s.b.idx != nil {
		r.ExtFields["indexLastUpdateTimestamp"] = strconv.FormatInt(s.b.idx.lastTS.Load(), 10)
		r.ExtFields["indexLastUpdatePhyoffset"] = strconv.FormatInt(s.b.idx.lastPhys.Load(), 10)
	}
	for _, rec := range recs {
		raw, err := s.b.cl.read(nil, rec.physOffset, rec.size)
		if err == nil {
			r.Body = append(r.Body, raw...)
		}
	}
	return r
}

// viewMessage answers VIEW_MESSAGE_BY_ID (33): the stored record at commit-log offset
// "offset" (from an offsetMsgId), or 1 when there is none.
func (s *netServer) viewMessage(req *remoting.Command) *remoting.Command {
	phys, err := req.ExtInt("offset")
	if err != nil {
		return req.Reply(respInvalidParameter, err.Error())
	}
	rec, err := s.b.cl.readRecord(phys)
	if err != nil || rec.physOffset != phys {
		return req.Reply(respSystemError, fmt.Sprintf("can not find message by the offset %d", phys))
	}
	raw, err := s.b.cl.read(nil, phys, rec.size)
	if err != nil {
		return req.Reply(respSystemError, err.Error())
	}
	r := req.Reply(respSuccess, "")
	r.Body = raw
	return r
}
