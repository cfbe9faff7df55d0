package connectors

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"rsql/broker/remoting"
)

// A topic's layout is its queues, (broker name, queue id), in split order: by broker name,
// then queue id. Splits, the queue a key hashes to and the queue a shuffle row goes to are
// positions in it, so it must not change while a broker is down — but a name server drops a
// dead broker's queues from the route. RocketMQ keeps a fixed layout for ordered topics: the
// name server's KV configuration, namespace ORDER_TOPIC_CONFIG, maps the topic to
// "broker-a:4;broker-b:4" (what `mqadmin updateTopic -o true` writes), and Java name servers
// with orderMessageEnable (rsql's always) put it in the route as orderTopicConf. rsql writes
// that configuration for every topic it creates through a name server, and reads a topic's
// layout from it when it is there (docs/operations.md, "A broker cluster"); otherwise the
// layout is the route's queues. A queue of the layout whose broker has no route now is
// unavailable (ErrUnavailable) until the broker is back, never another queue.

const (
	reqPutKVConfig   = 100
	reqGetKVConfig   = 101
	orderTopicConfNS = "ORDER_TOPIC_CONFIG"
)

// queueRef is one queue of a layout.
type queueRef struct {
	broker string
	id     int
}

// sortLayout orders queues by broker name, then queue id.
func sortLayout(qs []queueRef) {
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].broker != qs[j].broker {
			return qs[i].broker < qs[j].broker
		}
		return qs[i].id < qs[j].id
	})
}

// parseOrderConf reads "broker-a:4;broker-b:4" into a sorted layout.
func parseOrderConf(conf string) ([]queueRef, error) {
	var out []queueRef
	seen := map[string]bool{}
	for _, part := range strings.Split(conf, ";") {
		if part == "" {
			continue
		}
		name, n, ok := strings.Cut(part, ":")
		q, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || q < 1 || q > 1024 || seen[name] {
			return nil, fmt.Errorf("ordered-topic configuration %q: %q is not broker:queues", conf, part)
		}
		seen[name] = true
		for i := 0; i < q; i++ {
			out = append(out, queueRef{broker: name, id: i})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ordered-topic configuration %q names no queue", conf)
	}
	sortLayout(out)
	return out, nil
}

// orderConf renders a layout as an ordered-topic configuration.
func orderConf(qs []queueRef) string {
	counts := map[string]int{}
	var names []string
	for _, q := range qs {
		if counts[q.broker] == 0 {
			names = append(names, q.broker)
		}
		counts[q.broker]++
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ":" + strconv.Itoa(counts[n])
	}
	return strings.Join(parts, ";")
}

// getKVConfig reads one KV configuration value of name server ns; found is false when it has
// none (or keeps no KV configuration, as the bundled broker).
func getKVConfig(ctx context.Context, creds remoting.Credentials, ns, namespace, key string) (value string, found bool, err error) {
	resp, err := rmqCall(ctx, creds, ns, reqGetKVConfig, map[string]string{"namespace": namespace, "key": key})
	if err != nil {
		return "", false, Unavailable(fmt.Errorf("KV configuration %s/%s from name server %s: %w", namespace, key, ns, err))
	}
	if resp.Code != respSuccess {
		return "", false, nil
	}
	return resp.Ext("value"), true, nil
}

// putKVConfig writes one KV configuration value at name server ns; a name server without a
// KV configuration (code 3, the bundled broker: one broker, a layout that cannot shrink) is
// not an error.
func putKVConfig(ctx context.Context, creds remoting.Credentials, ns, namespace, key, value string) error {
	resp, err := rmqCall(ctx, creds, ns, reqPutKVConfig, map[string]string{"namespace": namespace, "key": key, "value": value})
	if err != nil {
		return Unavailable(fmt.Errorf("KV configuration %s/%s at name server %s: %w", namespace, key, ns, err))
	}
	if resp.Code != respSuccess && resp.Code != respNotSupported {
		return fmt.Errorf("KV configuration %s/%s at name server %s: code %d: %s", namespace, key, ns, resp.Code, resp.Remark)
	}
	return nil
}

// topicLayout returns topic's layout at name server ns and its route (nil when the topic
// has no route now: all its brokers down, or it does not exist — then the layout comes
// from the ordered-topic configuration alone, or is empty).
func topicLayout(ctx context.Context, creds remoting.Credentials, ns, topic string) ([]queueRef, *topicRoute, error) {
	route, routeErr := fetchRoute(ctx, creds, ns, topic)
	conf := ""
	if route != nil {
		conf = route.OrderTopicConf
	}
	if conf == "" {
		v, found, err := getKVConfig(ctx, creds, ns, orderTopicConfNS, topic)
		if err != nil {
			return nil, nil, err
		}
		if found {
			conf = v
		}
	}
	if conf != "" {
		qs, err := parseOrderConf(conf)
		if err != nil {
			return nil, nil, fmt.Errorf("topic %s at name server %s: %w", topic, ns, err)
		}
		return qs, route, nil
	}
	if routeErr != nil {
		return nil, nil, routeErr
	}
	var qs []queueRef
	for _, qd := range route.QueueDatas {
		for i := 0; i < qd.ReadQueueNums; i++ {
			qs = append(qs, queueRef{broker: qd.BrokerName, id: i})
		}
	}
	sortLayout(qs)
	return qs, route, nil
}

// masterAddrs maps a route's broker names to their master addresses.
func (r *topicRoute) masterAddrs() map[string]string {
	out := map[string]string{}
	if r == nil {
		return out
	}
	for _, b := range r.BrokerDatas {
		if a := b.BrokerAddrs["0"]; a != "" {
			out[b.BrokerName] = a
		}
	}
	return out
}

// routeHolds reports whether route serves every queue of qs.
func routeHolds(route *topicRoute, qs []queueRef) bool {
	if route == nil {
		return false
	}
	addrs := route.masterAddrs()
	have := map[string]int{}
	for _, qd := range route.QueueDatas {
		have[qd.BrokerName] = qd.ReadQueueNums
	}
	for _, q := range qs {
		if addrs[q.broker] == "" || q.id >= have[q.broker] {
			return false
		}
	}
	return true
}

// spreadQueues divides n queues over the brokers (sorted by name): as evenly as they go,
// the first ones taking one more; with fewer queues than brokers, the first n brokers
// take one each.
func spreadQueues(brokers []brokerRef, n int) map[string]int {
	out := map[string]int{}
	for i, b := range brokers {
		c := n / len(brokers)
		if i < n%len(brokers) {
			c++
		}
		if c > 0 {
			out[b.name] = c
		}
	}
	return out
}

// EnsureRocketMQTopic returns how many queues topic has at cfg's name server, creating it
// first (with cfg.CreateTopics) as ensureRocketMQTopic does when it has none: what `rsql
// produce` does before its first send, so a topic it creates is spread over the cluster's
// brokers with a fixed layout, as the engine's are.
func EnsureRocketMQTopic(ctx context.Context, cfg RocketMQConfig, topic string, queues int) (int, error) {
	qs, err := ensureRocketMQTopic(ctx, cfg.withDefaults(), topic, queues)
	return len(qs), err
}

// ensureRocketMQTopic returns the topic's layout, creating the topic (cfg.CreateTopics) when
// it has none: its queues spread over the master brokers of the cluster, and its layout
// recorded as the topic's ordered-topic configuration.
func ensureRocketMQTopic(ctx context.Context, cfg RocketMQConfig, topic string, queues int) ([]queueRef, error) {
	qs, _, err := topicLayout(ctx, cfg.Credentials, cfg.NameServer, topic)
	if err == nil && len(qs) > 0 {
		return qs, nil
	}
	if !cfg.CreateTopics {
		if err == nil {
			err = fmt.Errorf("no queues")
		}
		return nil, Unavailable(fmt.Errorf("topic %s has no route at name server %s (create it first): %w", topic, cfg.NameServer, err))
	}
	masters, err := masterBrokers(ctx, cfg.Credentials, cfg.NameServer, cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("topic %s does not exist and cannot be created: %w", topic, err)
	}
	if queues <= 0 {
		queues = 4
	}
	counts := spreadQueues(masters, queues)
	var layout []queueRef
	for _, m := range masters {
		n := counts[m.name]
		if n == 0 {
			continue
		}
		if err := createTopicOn(ctx, cfg.Credentials, m.addr, topic, n); err != nil {
			// A refusal fails the job; an unreachable broker is retried (the engine retries
			// network errors).
			return nil, fmt.Errorf("topic %s: create %d queues on broker %s (%s): %w", topic, n, m.name, m.addr, err)
		}
		for i := 0; i < n; i++ {
			layout = append(layout, queueRef{broker: m.name, id: i})
		}
	}
	sortLayout(layout)
	if err := putKVConfig(ctx, cfg.Credentials, cfg.NameServer, orderTopicConfNS, topic, orderConf(layout)); err != nil {
		return nil, fmt.Errorf("topic %s: record its layout: %w", topic, err)
	}
	// The name server learns the route from the brokers; ask until it has all of it.
	for i := 0; ; i++ {
		route, _ := fetchRoute(ctx, cfg.Credentials, cfg.NameServer, topic)
		if routeHolds(route, layout) {
			return layout, nil
		}
		if i == 100 {
			return nil, Unavailable(fmt.Errorf("topic %s was created (%s) but its route at name server %s is not complete after 10 s", topic, orderConf(layout), cfg.NameServer))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %s: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
