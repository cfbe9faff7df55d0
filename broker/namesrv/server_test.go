package namesrv_test

import (
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"rsql/broker"
	"rsql/broker/namesrv"
	"rsql/broker/remoting"
)

// call sends one request to addr on a fresh connection and returns the reply.
func call(t *testing.T, addr string, code int16, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return callOn(t, c, code, ext, body)
}

func callOn(t *testing.T, c net.Conn, code int16, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := remoting.RoundTrip(c, &remoting.Command{Code: code, Language: "GO", Opaque: 7, ExtFields: ext, Body: body}, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

type route struct {
	OrderTopicConf string `json:"orderTopicConf"`
	QueueDatas     []struct {
		BrokerName    string `json:"brokerName"`
		ReadQueueNums int    `json:"readQueueNums"`
	} `json:"queueDatas"`
	BrokerDatas []struct {
		Cluster     string            `json:"cluster"`
		BrokerName  string            `json:"brokerName"`
		BrokerAddrs map[string]string `json:"brokerAddrs"`
	} `json:"brokerDatas"`
}

// routeOf returns topic's route as "broker:queues@addr" entries, nil when it has none.
func routeOf(t *testing.T, ns, topic string) ([]string, route) {
	t.Helper()
	resp := call(t, ns, 105, map[string]string{"topic": topic}, nil)
	if resp.Code == 17 {
		return nil, route{}
	}
	if resp.Code != 0 {
		t.Fatalf("route of %s: code %d %s", topic, resp.Code, resp.Remark)
	}
	var r route
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, b := range r.BrokerDatas {
		addrs[b.BrokerName] = b.BrokerAddrs["0"]
	}
	var out []string
	for _, q := range r.QueueDatas {
		out = append(out, q.BrokerName+":"+strconv.Itoa(q.ReadQueueNums)+"@"+addrs[q.BrokerName])
	}
	return out, r
}

// waitRoute polls until topic's route is want (nil: no route).
func waitRoute(t *testing.T, ns, topic string, want []string) route {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, r := routeOf(t, ns, topic)
		if slices.Equal(got, want) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("route of %s: %v, want %v", topic, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startNamesrv(t *testing.T, cfg namesrv.Config) *namesrv.Server {
	t.Helper()
	s := namesrv.New(cfg)
	if err := s.Serve("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startBroker(t *testing.T, name, ns string) (*broker.Broker, string) {
	t.Helper()
	b, err := broker.Open(broker.Config{Dir: t.TempDir(), SegmentSize: 1 << 20, MaxMessageSize: 64 << 10, BrokerName: name,
		NameServers: []string{ns}, RegisterInterval: 100 * time.Millisecond, DisableIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Serve("", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	_, addr := b.Addrs()
	return b, addr
}

// Two brokers register with one name server: a topic's route lists the queues of both, the
// cluster lists both, heartbeats keep them past the expiry, and a broker that stops (or
// closes its connection) leaves the routes.
func TestBrokersRegister(t *testing.T) {
	ns := startNamesrv(t, namesrv.Config{BrokerExpiry: 500 * time.Millisecond}).Addr()
	a, aAddr := startBroker(t, "broker-a", ns)
	b, bAddr := startBroker(t, "broker-b", ns)
	if err := a.CreateTopic("orders", 2); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic("orders", 3); err != nil {
		t.Fatal(err)
	}
	r := waitRoute(t, ns, "orders", []string{"broker-a:2@" + aAddr, "broker-b:3@" + bAddr})
	if r.BrokerDatas[0].Cluster != "DefaultCluster" {
		t.Errorf("cluster %q", r.BrokerDatas[0].Cluster)
	}
	// Only a's topic: b's queues are not listed.
	if err := a.CreateTopic("only-a", 1); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "only-a", []string{"broker-a:1@" + aAddr})

	var ci struct {
		ClusterAddrTable map[string][]string `json:"clusterAddrTable"`
	}
	resp := call(t, ns, 106, nil, nil)
	if err := json.Unmarshal(resp.Body, &ci); err != nil {
		t.Fatal(err)
	}
	if got := ci.ClusterAddrTable["DefaultCluster"]; !slices.Equal(got, []string{"broker-a", "broker-b"}) {
		t.Errorf("cluster info: %v", ci.ClusterAddrTable)
	}
	var tl struct {
		TopicList []string `json:"topicList"`
	}
	json.Unmarshal(call(t, ns, 206, nil, nil).Body, &tl)
	if !slices.Contains(tl.TopicList, "orders") || !slices.Contains(tl.TopicList, "only-a") {
		t.Errorf("topic list %v", tl.TopicList)
	}

	// Heartbeats keep both registered well past the expiry.
	time.Sleep(1200 * time.Millisecond)
	if got, _ := routeOf(t, ns, "orders"); len(got) != 2 {
		t.Fatalf("after 2.4 expiries with heartbeats: %v", got)
	}
	// A stopped broker unregisters: its queues leave the route, the other's stay.
	b.Close()
	waitRoute(t, ns, "orders", []string{"broker-a:2@" + aAddr})
}

// A broker that registers once and then goes silent is forgotten after the expiry, though
// its connection stays open; one whose connection closes is forgotten at once.
func TestBrokerExpiry(t *testing.T) {
	ns := startNamesrv(t, namesrv.Config{BrokerExpiry: 300 * time.Millisecond}).Addr()
	reg := func(c net.Conn, name, addr, topic string) {
		body, _ := json.Marshal(map[string]any{"topicConfigSerializeWrapper": map[string]any{
			"topicConfigTable": map[string]any{topic: map[string]any{"topicName": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}}})
		resp := callOn(t, c, 103, map[string]string{"brokerName": name, "brokerAddr": addr, "clusterName": "c1", "brokerId": "0"}, body)
		if resp.Code != 0 {
			t.Fatalf("register: %d %s", resp.Code, resp.Remark)
		}
	}
	silent, err := net.Dial("tcp", ns)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	reg(silent, "broker-s", "127.0.0.1:1", "t-silent")
	closing, err := net.Dial("tcp", ns)
	if err != nil {
		t.Fatal(err)
	}
	reg(closing, "broker-c", "127.0.0.1:2", "t-closing")
	if got, _ := routeOf(t, ns, "t-silent"); len(got) != 1 {
		t.Fatalf("registered broker's route: %v", got)
	}
	closing.Close()
	waitRoute(t, ns, "t-closing", nil)
	waitRoute(t, ns, "t-silent", nil)
	// A registration whose body does not match its checksum is refused.
	if resp := callOn(t, silent, 103, map[string]string{"brokerName": "broker-s", "brokerAddr": "127.0.0.1:1", "clusterName": "c1",
		"brokerId": "0", "bodyCrc32": "12345"}, []byte(`{}`)); resp.Code == 0 {
		t.Errorf("a registration with a wrong bodyCrc32 was accepted")
	}
	// A registration without its required fields is refused.
	if resp := callOn(t, silent, 103, map[string]string{"brokerName": "x"}, nil); resp.Code == 0 {
		t.Errorf("a registration without address, cluster and id was accepted")
	}
}

// The KV configuration survives a restart (Dir), and a topic's ordered-topic configuration
// is its route's orderTopicConf.
func TestKVConfig(t *testing.T) {
	dir := t.TempDir()
	s := startNamesrv(t, namesrv.Config{Dir: dir})
	_, aAddr := startBroker(t, "broker-a", s.Addr())
	put := call(t, s.Addr(), 100, map[string]string{"namespace": namesrv.OrderTopicConfig, "key": "orders", "value": "broker-a:2;broker-b:2"}, nil)
	if put.Code != 0 {
		t.Fatalf("put: %d %s", put.Code, put.Remark)
	}
	s.Close()
	s2 := namesrv.New(namesrv.Config{Dir: dir})
	if err := s2.Serve(s.Addr()); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	get := call(t, s2.Addr(), 101, map[string]string{"namespace": namesrv.OrderTopicConfig, "key": "orders"}, nil)
	if get.Code != 0 || get.Ext("value") != "broker-a:2;broker-b:2" {
		t.Fatalf("get after restart: %d %q", get.Code, get.Ext("value"))
	}
	if miss := call(t, s2.Addr(), 101, map[string]string{"namespace": namesrv.OrderTopicConfig, "key": "nope"}, nil); miss.Code != 22 {
		t.Errorf("missing key: code %d", miss.Code)
	}
	// The broker registers with the restarted name server on its next heartbeat (its
	// connection to the old one closed), and the route carries the configuration.
	waitRoute(t, s2.Addr(), "TBW102", []string{"broker-a:4@" + aAddr})
	b, _ := startBroker(t, "broker-b", s2.Addr())
	if err := b.CreateTopic("orders", 2); err != nil {
		t.Fatal(err)
	}
	_, bAddr := b.Addrs()
	r := waitRoute(t, s2.Addr(), "orders", []string{"broker-b:2@" + bAddr})
	if r.OrderTopicConf != "broker-a:2;broker-b:2" {
		t.Errorf("orderTopicConf %q", r.OrderTopicConf)
	}
	if del := call(t, s2.Addr(), 102, map[string]string{"namespace": namesrv.OrderTopicConfig, "key": "orders"}, nil); del.Code != 0 {
		t.Fatalf("delete: %d", del.Code)
	}
	if _, r := routeOf(t, s2.Addr(), "orders"); r.OrderTopicConf != "" {
		t.Errorf("orderTopicConf after delete: %q", r.OrderTopicConf)
	}
}

// A broker whose name server restarted registers again on its next change at once (its kept
// connection fails, a new one is dialled for the same registration), not a register
// interval later.
func TestBrokerRegistersAfterNameServerRestart(t *testing.T) {
	s := startNamesrv(t, namesrv.Config{})
	addr := s.Addr()
	b, err := broker.Open(broker.Config{Dir: t.TempDir(), SegmentSize: 1 << 20, MaxMessageSize: 64 << 10,
		NameServers: []string{addr}, RegisterInterval: time.Hour, DisableIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Serve("", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	_, bAddr := b.Addrs()
	waitRoute(t, addr, "TBW102", []string{"broker-a:4@" + bAddr})
	s.Close()
	s2 := namesrv.New(namesrv.Config{})
	if err := s2.Serve(addr); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := b.CreateTopic("after", 2); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, addr, "after", []string{"broker-a:2@" + bAddr})
}

// A connection the name server closes for silence does not forget its brokers: they stay
// until the expiry.
func TestIdleConnectionKeepsBroker(t *testing.T) {
	ns := startNamesrv(t, namesrv.Config{IdleTimeout: 100 * time.Millisecond, BrokerExpiry: 2 * time.Second}).Addr()
	c, err := net.Dial("tcp", ns)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body, _ := json.Marshal(map[string]any{"topicConfigSerializeWrapper": map[string]any{
		"topicConfigTable": map[string]any{"quiet": map[string]any{"topicName": "quiet", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}}}})
	if r := callOn(t, c, 103, map[string]string{"brokerName": "b", "brokerAddr": "127.0.0.1:3", "clusterName": "c", "brokerId": "0"}, body); r.Code != 0 {
		t.Fatalf("register: %d %s", r.Code, r.Remark)
	}
	time.Sleep(500 * time.Millisecond) // the server has closed the silent connection
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the silent connection is still open")
	}
	if got, _ := routeOf(t, ns, "quiet"); len(got) != 1 {
		t.Fatalf("route after the idle close: %v", got)
	}
	waitRoute(t, ns, "quiet", nil)
}

// BenchmarkRoute: GET_ROUTEINFO_BY_TOPIC round trips on one connection, for a topic on two
// registered brokers.
func BenchmarkRoute(b *testing.B) {
	s := namesrv.New(namesrv.Config{})
	if err := s.Serve("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	body, _ := json.Marshal(map[string]any{"topicConfigSerializeWrapper": map[string]any{
		"topicConfigTable": map[string]any{"orders": map[string]any{"topicName": "orders", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}}})
	for i, name := range []string{"broker-a", "broker-b"} {
		req := &remoting.Command{Code: 103, Language: "GO", Opaque: int32(i), Body: body, ExtFields: map[string]string{
			"brokerName": name, "brokerAddr": "127.0.0.1:1" + strconv.Itoa(i), "clusterName": "c", "brokerId": "0"}}
		if _, err := remoting.RoundTrip(c, req, 16<<20); err != nil {
			b.Fatal(err)
		}
	}
	req := &remoting.Command{Code: 105, Language: "GO", ExtFields: map[string]string{"topic": "orders"}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Opaque = int32(i + 10)
		resp, err := remoting.RoundTrip(c, req, 16<<20)
		if err != nil || resp.Code != 0 {
			b.Fatal(err, resp)
		}
	}
}
