package broker

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"rsql/broker/remoting"
)

// consumerGroup is the live membership of one group, learned from heartbeats. Guarded by
// netServer.cmu.
type consumerGroup struct {
	clients map[string]*clientInfo // clientID -> client
	subs    map[string]*subFilter  // topic -> filter (nil = all)
	// From the last heartbeat, for GET_CONSUMER_CONNECTION_LIST.
	consumeType, messageModel, consumeFromWhere string
	subData                                     map[string]json.RawMessage // topic -> subscription as sent
}

type clientInfo struct {
	conn     *conn
	last     time.Time
	language string
	version  int16
}

type heartbeatData struct {
	ClientID        string `json:"clientID"`
	ProducerDataSet []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	ConsumerDataSet []struct {
		GroupName           string            `json:"groupName"`
		ConsumeType         string            `json:"consumeType"`
		MessageModel        string            `json:"messageModel"`
		ConsumeFromWhere    string            `json:"consumeFromWhere"`
		SubscriptionDataSet []json.RawMessage `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

type subscriptionData struct {
	Topic          string `json:"topic"`
	SubString      string `json:"subString"`
	ExpressionType string `json:"expressionType"`
}

func (s *netServer) heartbeat(c *conn, req *remoting.Command) *remoting.Command {
	var hb heartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return req.Reply(respInvalidParameter, "heartbeat body is not valid JSON: "+err.Error())
	}
	var changed []string
	now := time.Now()
	s.cmu.Lock()
	for _, pd := range hb.ProducerDataSet {
		if pd.GroupName == "" {
			continue
		}
		g := s.producers[pd.GroupName]
		if g == nil {
			g = map[string]*clientInfo{}
			s.producers[pd.GroupName] = g
		}
		g[hb.ClientID] = &clientInfo{conn: c, last: now, language: req.Language, version: req.Version}
	}
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		g := s.groups[cd.GroupName]
		if g == nil {
			g = &consumerGroup{clients: map[string]*clientInfo{}}
			s.groups[cd.GroupName] = g
		}
		ci := g.clients[hb.ClientID]
		if ci == nil || ci.conn != c {
			changed = append(changed, cd.GroupName)
		}
		g.clients[hb.ClientID] = &clientInfo{conn: c, last: now, language: req.Language, version: req.Version}
		g.consumeType, g.messageModel, g.consumeFromWhere = cd.ConsumeType, cd.MessageModel, cd.ConsumeFromWhere
		prev := g.subs
		g.subs = map[string]*subFilter{}
		g.subData = map[string]json.RawMessage{}
		for _, raw := range cd.SubscriptionDataSet {
			var sd subscriptionData
			if err := json.Unmarshal(raw, &sd); err != nil || sd.Topic == "" {
				continue
			}
			g.subData[sd.Topic] = raw
			f := newSubFilter(sd.ExpressionType, sd.SubString)
			if old := prev[sd.Topic]; f != nil && f.err != nil && (old == nil || old.expr != f.expr) {
				s.b.cfg.Logger.Warn("consumer subscribed with an expression that does not compile; its pulls are refused",
					"group", cd.GroupName, "topic", sd.Topic, "err", f.err)
			}
			g.subs[sd.Topic] = f
		}
	}
	s.cmu.Unlock()
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		if err := s.b.subs.ensure(cd.GroupName); err != nil {
			s.b.cfg.Logger.Error("storing a new subscription group failed", "group", cd.GroupName, "err", err)
		}
		if ValidTopic("%RETRY%" + cd.GroupName) {
			s.b.ensureTopic("%RETRY%"+cd.GroupName, 1, PermRead|PermWrite)
		}
	}
	for _, g := range changed {
		s.notifyGroup(g)
	}
	return req.Reply(respSuccess, "")
}

// subscription returns a group's filter for a topic from its heartbeats (nil: all).
func (s *netServer) subscription(group, topicName string) *subFilter {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if g := s.groups[group]; g != nil {
		return g.subs[topicName]
	}
	return nil
}

// producerConn returns a live connection of a producer group (the most recent heartbeat),
// or nil.
func (s *netServer) producerConn(group string) *conn {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	var best *clientInfo
	for _, ci := range s.producers[group] {
		if !ci.conn.closed.Load() && (best == nil || ci.last.After(best.last)) {
			best = ci
		}
	}
	if best == nil {
		return nil
	}
	return best.conn
}

func (s *netServer) notifyGroup(group string) {
	s.cmu.Lock()
	var conns []*conn
	if g := s.groups[group]; g != nil {
		for _, ci := range g.clients {
			conns = append(conns, ci.conn)
		}
	}
	s.cmu.Unlock()
	for _, c := range conns {
		go s.notify(c, codeNotifyIDsChanged, map[string]string{"consumerGroup": group})
	}
}

func (s *netServer) consumerList(req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	ids := []string{}
	s.cmu.Lock()
	if g := s.groups[group]; g != nil {
		for id := range g.clients {
			ids = append(ids, id)
		}
	}
	s.cmu.Unlock()
	sort.Strings(ids)
	r := req.Reply(respSuccess, "")
	r.Body = plainJSON(map[string]any{"consumerIdList": ids})
	return r
}

func (s *netServer) unregister(req *remoting.Command) {
	id, group := req.Ext("clientID"), req.Ext("consumerGroup")
	if group == "" {
		return
	}
	s.cmu.Lock()
	g := s.groups[group]
	found := false
	if g != nil {
		if _, found = g.clients[id]; found {
			delete(g.clients, id)
		}
	}
	s.cmu.Unlock()
	if found {
		s.releaseLocks(id)
		s.notifyGroup(group)
	}
}

// dropConn removes every client that used c and notifies their groups.
func (s *netServer) dropConn(c *conn) {
	s.removeClients(func(ci *clientInfo) bool { return ci.conn == c })
}

// removeClients removes the consumers and producers match selects, releases their queue
// locks and notifies their groups. It returns the connections they used that no remaining
// client uses.
func (s *netServer) removeClients(match func(*clientInfo) bool) []*conn {
	var changed []string
	var gone []string
	conns := map[*conn]bool{}
	s.cmu.Lock()
	for name, g := range s.groups {
		n := len(g.clients)
		for id, ci := range g.clients {
			if match(ci) {
				delete(g.clients, id)
				gone = append(gone, id)
				conns[ci.conn] = true
			}
		}
		if len(g.clients) != n {
			changed = append(changed, name)
		}
		if len(g.clients) == 0 {
			delete(s.groups, name)
		}
	}
	for name, g := range s.producers {
		for id, ci := range g {
			if match(ci) {
				delete(g, id)
				conns[ci.conn] = true
			}
		}
		if len(g) == 0 {
			delete(s.producers, name)
		}
	}
	// Keep connections another client still uses.
	for _, g := range s.groups {
		for _, ci := range g.clients {
			delete(conns, ci.conn)
		}
	}
	for _, g := range s.producers {
		for _, ci := range g {
			delete(conns, ci.conn)
		}
	}
	s.cmu.Unlock()
	for _, id := range gone {
		s.releaseLocks(id)
	}
	for _, g := range changed {
		s.notifyGroup(g)
	}
	out := make([]*conn, 0, len(conns))
	for c := range conns {
		out = append(out, c)
	}
	return out
}

// expireClients is the client housekeeping (RocketMQ's ClientHousekeepingService): a
// client whose last heartbeat is older than Config.ClientExpiry leaves its groups (they
// are notified and rebalance), its queue locks are released, and its connection is
// closed. The caller has done s.wg.Add(1).
func (s *netServer) expireClients() {
	defer s.wg.Done()
	t := time.NewTicker(min(10*time.Second, s.b.cfg.ClientExpiry/2))
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			cut := time.Now().Add(-s.b.cfg.ClientExpiry)
			for _, c := range s.removeClients(func(ci *clientInfo) bool { return ci.last.Before(cut) }) {
				s.b.cfg.Logger.Info("closing the connection of a client without a heartbeat",
					"remote", c.remote.String(), "expiry", s.b.cfg.ClientExpiry)
				c.close()
			}
		}
	}
}

// Orderly-consumer queue locks (§5.10): granted when free, held by the same client, or
// expired (Config.LockExpiry, 60 s by default). The Go client never unlocks a queue that a
// rebalance takes away from it, so such a queue moves only once the lock expires.

type mqLock struct {
	client string
	last   time.Time
}

type mqRef struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

type lockBody struct {
	ConsumerGroup string  `json:"consumerGroup"`
	ClientID      string  `json:"clientId"`
	MQSet         []mqRef `json:"mqSet"`
}

func (m mqRef) key() string {
	return m.Topic + "@" + m.BrokerName + "@" + strconv.Itoa(m.QueueID)
}

func (s *netServer) lockBatch(req *remoting.Command) *remoting.Command {
	var lb lockBody
	if err := json.Unmarshal(req.Body, &lb); err != nil {
		return req.Reply(respInvalidParameter, "lock body is not valid JSON: "+err.Error())
	}
	ok := []mqRef{}
	now := time.Now()
	s.lmu.Lock()
	g := s.locks[lb.ConsumerGroup]
	if g == nil {
		g = map[string]*mqLock{}
		s.locks[lb.ConsumerGroup] = g
	}
	for _, mq := range lb.MQSet {
		k := mq.key()
		l := g[k]
		if l == nil || l.client == lb.ClientID || now.Sub(l.last) > s.b.cfg.LockExpiry {
			g[k] = &mqLock{client: lb.ClientID, last: now}
			ok = append(ok, mq)
		}
	}
	s.lmu.Unlock()
	r := req.Reply(respSuccess, "")
	r.Body = plainJSON(map[string]any{"lockOKMQSet": ok})
	return r
}

func (s *netServer) unlockBatch(req *remoting.Command) *remoting.Command {
	var lb lockBody
	if err := json.Unmarshal(req.Body, &lb); err != nil {
		return req.Reply(respInvalidParameter, "unlock body is not valid JSON: "+err.Error())
	}
	s.lmu.Lock()
	if g := s.locks[lb.ConsumerGroup]; g != nil {
		for _, mq := range lb.MQSet {
			if l := g[mq.key()]; l != nil && l.client == lb.ClientID {
				delete(g, mq.key())
			}
		}
	}
	s.lmu.Unlock()
	return req.Reply(respSuccess, "")
}

// releaseLocks frees every queue lock held by a client that went away.
func (s *netServer) releaseLocks(client string) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	for _, g := range s.locks {
		for k, l := range g {
			if l.client == client {
				delete(g, k)
			}
		}
	}
}
