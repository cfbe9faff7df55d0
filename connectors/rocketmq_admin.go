package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"rsql/broker/remoting"
)

// The RocketMQ requests rsql sends itself, synchronously, where rocketmq-client-go has no
// call for them or sends them one-way (docs/broker.md, "Protocol notes"): the route and the
// cluster of a name server, and a consumer group's offsets on a broker.
const (
	reqQueryConsumerOffset  = 14
	reqUpdateConsumerOffset = 15
	reqUpdateCreateTopic    = 17
	reqGetMaxOffset         = 30
	reqGetRoute             = 105
	reqGetClusterInfo       = 106

	respSuccess       = 0
	respNotSupported  = 3
	respQueryNotFound = 22
)

// adminMaxFrame bounds a reply's size.
const adminMaxFrame = 16 << 20

var adminOpaque atomic.Int32

// rmqCall sends one request to addr, signed with creds (when set), and returns its
// response: a new connection per call, bounded by ctx (and 10 s at most).
func rmqCall(ctx context.Context, creds remoting.Credentials, addr string, code int16, ext map[string]string) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	req := &remoting.Command{Code: code, Language: "GO", Version: 479, Opaque: adminOpaque.Add(1), ExtFields: ext}
	creds.Sign(req)
	return remoting.RoundTrip(c, req, adminMaxFrame)
}

// createTopicOn creates (or widens) topic with queues read and write queues on the broker
// at addr, as rocketmq-client-go's admin CreateTopic does, but signed with creds and
// failing on a refusal (that client neither signs this request nor reads its answer).
func createTopicOn(ctx context.Context, creds remoting.Credentials, addr, topic string, queues int) error {
	n := strconv.Itoa(queues)
	resp, err := rmqCall(ctx, creds, addr, reqUpdateCreateTopic, map[string]string{"topic": topic,
		"defaultTopic": "TBW102", "readQueueNums": n, "writeQueueNums": n, "perm": "6",
		"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
	if err != nil {
		return err
	}
	if resp.Code != respSuccess {
		return fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
	}
	return nil
}

// topicRoute is what a name server answers for a topic: its brokers' addresses by broker
// name and broker id ("0" is the master), and its queues per broker.
type topicRoute struct {
	// OrderTopicConf is the topic's fixed layout when it is an ordered topic
	// (rocketmq_layout.go).
	OrderTopicConf string       `json:"orderTopicConf"`
	BrokerDatas    []brokerData `json:"brokerDatas"`
	QueueDatas     []struct {
		BrokerName     string `json:"brokerName"`
		ReadQueueNums  int    `json:"readQueueNums"`
		WriteQueueNums int    `json:"writeQueueNums"`
	} `json:"queueDatas"`
}

type brokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}

// clusterInfo is what a name server answers for GET_BROKER_CLUSTER_INFO.
type clusterInfo struct {
	BrokerAddrTable  map[string]brokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
}

// decodeRoute reads a route body. Apache RocketMQ writes it with fastjson, whose maps with
// number keys come out unquoted ({0:"host:port"}), so those keys are quoted first.
func decodeRoute(body []byte) (*topicRoute, error) {
	var r topicRoute
	if err := json.Unmarshal(quoteNumberKeys(body), &r); err != nil {
		return nil, fmt.Errorf("bad topic route: %w", err)
	}
	return &r, nil
}

// decodeClusterInfo reads a cluster-info body (fastjson, as decodeRoute).
func decodeClusterInfo(body []byte) (*clusterInfo, error) {
	var ci clusterInfo
	if err := json.Unmarshal(quoteNumberKeys(body), &ci); err != nil {
		return nil, fmt.Errorf("bad cluster info: %w", err)
	}
	return &ci, nil
}

// quoteNumberKeys quotes the object keys of b that are bare numbers ({0:"a"} becomes
// {"0":"a"}), leaving strings and everything else as they are. Input that is not JSON stays
// not JSON (the decoder then says so).
func quoteNumberKeys(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	inString, escaped := false, false
	var prev byte // the last byte outside strings and white space
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
				prev = '"'
			}
			continue
		}
		if c == '"' {
			inString = true
			out = append(out, c)
			continue
		}
		if (c == '-' || c >= '0' && c <= '9') && (prev == '{' || prev == ',') {
			j := i + 1
			for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
				j++
			}
			k := j
			for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
				k++
			}
			if k < len(b) && b[k] == ':' {
				out = append(out, '"')
				out = append(out, b[i:j]...)
				out = append(out, '"')
				i = j - 1
				prev = '"'
				continue
			}
		}
		out = append(out, c)
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			prev = c
		}
	}
	return out
}

// fetchRoute asks the name server ns for topic's route. An unreachable name server and a
// topic without a route (its brokers down, or not created yet) are ErrUnavailable.
func fetchRoute(ctx context.Context, creds remoting.Credentials, ns, topic string) (*topicRoute, error) {
	resp, err := rmqCall(ctx, creds, ns, reqGetRoute, map[string]string{"topic": topic})
	if err != nil {
		return nil, Unavailable(fmt.Errorf("topic %s: route from name server %s: %w", topic, ns, err))
	}
	if resp.Code != respSuccess {
		return nil, Unavailable(noRouteError{fmt.Errorf("topic %s: name server %s has no route (code %d: %s)", topic, ns, resp.Code, resp.Remark)})
	}
	return decodeRoute(resp.Body)
}

// ErrNoTopicRoute says the name server has no route for a topic: it does not exist, or
// every broker holding it is down (the name server cannot tell which).
var ErrNoTopicRoute = errors.New("the name server has no route for the topic")

type noRouteError struct{ err error }

func (e noRouteError) Error() string   { return e.err.Error() }
func (e noRouteError) Unwrap() []error { return []error{ErrNoTopicRoute, e.err} }

// brokerRef is a master broker: its name and address.
type brokerRef struct{ name, addr string }

// masterBrokers asks the name server ns for its cluster and returns every master broker
// (broker id 0) of cluster, sorted by broker name: where RocketMQ's admin tool (`mqadmin
// updateTopic -c CLUSTER`) creates a topic. cluster "" is the only cluster the name server
// knows.
func masterBrokers(ctx context.Context, creds remoting.Credentials, ns, cluster string) ([]brokerRef, error) {
	resp, err := rmqCall(ctx, creds, ns, reqGetClusterInfo, nil)
	if err != nil {
		return nil, Unavailable(fmt.Errorf("cluster info from name server %s: %w", ns, err))
	}
	if resp.Code != respSuccess {
		return nil, fmt.Errorf("name server %s gives no cluster info (code %d: %s)", ns, resp.Code, resp.Remark)
	}
	ci, err := decodeClusterInfo(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("name server %s: %w", ns, err)
	}
	if cluster == "" {
		if len(ci.ClusterAddrTable) > 1 {
			var cs []string
			for c := range ci.ClusterAddrTable {
				cs = append(cs, c)
			}
			sort.Strings(cs)
			return nil, fmt.Errorf("name server %s serves the clusters %v: create the topic on one first (mqadmin updateTopic -c CLUSTER -t TOPIC)", ns, cs)
		}
		for c := range ci.ClusterAddrTable {
			cluster = c
		}
	}
	names := append([]string(nil), ci.ClusterAddrTable[cluster]...)
	sort.Strings(names)
	var out []brokerRef
	for _, n := range names {
		if a := ci.BrokerAddrTable[n].BrokerAddrs["0"]; a != "" {
			out = append(out, brokerRef{name: n, addr: a})
		}
	}
	if len(out) == 0 {
		return nil, Unavailable(fmt.Errorf("name server %s knows no master broker (no broker has registered)", ns))
	}
	return out, nil
}

// GroupOffsets reads and commits the offsets of a consumer group on the queues of one
// topic, synchronously (a commit has reached the broker when Commit returns). Queues are
// numbered as the splits of RocketMQSource.
type GroupOffsets struct {
	group, topic string
	creds        remoting.Credentials
	queues       []groupQueue // by split number
}

type groupQueue struct {
	addr string // the queue's master broker
	id   int    // queue id on that broker
}

// OpenGroupOffsets looks up topic's route at cfg's name server.
func OpenGroupOffsets(ctx context.Context, cfg RocketMQConfig, group, topic string) (*GroupOffsets, error) {
	cfg = cfg.withDefaults()
	qs, r, err := topicLayout(ctx, cfg.Credentials, cfg.NameServer, topic)
	if err != nil {
		return nil, err
	}
	addrs := r.masterAddrs()
	g := &GroupOffsets{group: group, topic: topic, creds: cfg.Credentials}
	for _, q := range qs {
		a := addrs[q.broker]
		if a == "" {
			return nil, Unavailable(fmt.Errorf("topic %s: broker %s, which holds %d of its queues, has no route now", topic, q.broker, len(qs)))
		}
		g.queues = append(g.queues, groupQueue{addr: a, id: q.id})
	}
	return g, nil
}

// Queues is the number of queues (splits).
func (g *GroupOffsets) Queues() int { return len(g.queues) }

func (g *GroupOffsets) queue(split int) (groupQueue, error) {
	if split < 0 || split >= len(g.queues) {
		return groupQueue{}, fmt.Errorf("topic %s has no queue %d (it has %d)", g.topic, split, len(g.queues))
	}
	return g.queues[split], nil
}

// Committed returns the group's committed offset of a queue; ok is false when it has none.
func (g *GroupOffsets) Committed(ctx context.Context, split int) (off int64, ok bool, err error) {
	q, err := g.queue(split)
	if err != nil {
		return 0, false, err
	}
	resp, err := rmqCall(ctx, g.creds, q.addr, reqQueryConsumerOffset, map[string]string{
		"consumerGroup": g.group, "topic": g.topic, "queueId": strconv.Itoa(q.id)})
	if err != nil {
		return 0, false, fmt.Errorf("group %s, topic %s queue %d: query offset at %s: %w", g.group, g.topic, split, q.addr, err)
	}
	switch resp.Code {
	case respSuccess:
		off, err := resp.ExtInt("offset")
		if err != nil {
			return 0, false, fmt.Errorf("group %s, topic %s queue %d: %w", g.group, g.topic, split, err)
		}
		return off, off >= 0, nil
	case respQueryNotFound:
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("group %s, topic %s queue %d: query offset at %s: code %d: %s", g.group, g.topic, split, q.addr, resp.Code, resp.Remark)
}

// End returns the offset after a queue's last message.
func (g *GroupOffsets) End(ctx context.Context, split int) (int64, error) {
	q, err := g.queue(split)
	if err != nil {
		return 0, err
	}
	resp, err := rmqCall(ctx, g.creds, q.addr, reqGetMaxOffset, map[string]string{"topic": g.topic, "queueId": strconv.Itoa(q.id)})
	if err != nil {
		return 0, fmt.Errorf("topic %s queue %d: end offset at %s: %w", g.topic, split, q.addr, err)
	}
	if resp.Code != respSuccess {
		return 0, fmt.Errorf("topic %s queue %d: end offset at %s: code %d: %s", g.topic, split, q.addr, resp.Code, resp.Remark)
	}
	return resp.ExtInt("offset")
}

// Commit stores off as the group's offset of a queue (the next message it reads) and
// returns once the broker answered.
func (g *GroupOffsets) Commit(ctx context.Context, split int, off int64) error {
	q, err := g.queue(split)
	if err != nil {
		return err
	}
	resp, err := rmqCall(ctx, g.creds, q.addr, reqUpdateConsumerOffset, map[string]string{
		"consumerGroup": g.group, "topic": g.topic, "queueId": strconv.Itoa(q.id), "commitOffset": strconv.FormatInt(off, 10)})
	if err != nil {
		return fmt.Errorf("group %s, topic %s queue %d: commit offset %d at %s: %w", g.group, g.topic, split, off, q.addr, err)
	}
	if resp.Code != respSuccess {
		return fmt.Errorf("group %s, topic %s queue %d: commit offset %d at %s: code %d: %s", g.group, g.topic, split, off, q.addr, resp.Code, resp.Remark)
	}
	return nil
}
