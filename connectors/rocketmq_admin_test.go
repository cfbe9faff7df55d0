package connectors

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rsql/broker"
	"rsql/broker/remoting"
)

// Apache RocketMQ's name server writes maps with number keys unquoted (fastjson); the
// decoders read that and standard JSON alike, and leave strings alone.
func TestDecodeRouteAndClusterInfo(t *testing.T) {
	route := `{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-b","cluster":"DefaultCluster","enableActingMaster":false},` +
		`{"brokerAddrs":{"0":"10.0.0.3:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},` +
		`"queueDatas":[{"brokerName":"broker-b","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2},{"brokerName":"broker-a","perm":6,"readQueueNums":3,"writeQueueNums":3}]}`
	r, err := decodeRoute([]byte(route))
	if err != nil {
		t.Fatal(err)
	}
	if r.BrokerDatas[0].BrokerAddrs["0"] != "10.0.0.1:10911" || r.BrokerDatas[0].BrokerAddrs["1"] != "10.0.0.2:10911" ||
		r.BrokerDatas[1].BrokerAddrs["0"] != "10.0.0.3:10911" || r.QueueDatas[1].ReadQueueNums != 3 {
		t.Errorf("decoded route %+v", r)
	}
	ci, err := decodeClusterInfo([]byte(` { "brokerAddrTable" : { "broker-a" : { "brokerAddrs" : { 0 : "h:1" , 2:"h:2"}, "brokerName":"broker-a","cluster":"c1"}},` +
		`"clusterAddrTable":{"c1":["broker-a"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ci.BrokerAddrTable["broker-a"].BrokerAddrs["0"] != "h:1" || !reflect.DeepEqual(ci.ClusterAddrTable["c1"], []string{"broker-a"}) {
		t.Errorf("decoded cluster info %+v", ci)
	}
	for in, want := range map[string]string{
		`{0:"a",12:{-3:"b"}}`:           `{"0":"a","12":{"-3":"b"}}`,
		`{"k":"{0:1}","l":[1,2,{3:4}]}`: `{"k":"{0:1}","l":[1,2,{"3":4}]}`,
		`{"esc":"a\"{0:1}","n":1}`:      `{"esc":"a\"{0:1}","n":1}`,
		`[0, 1]`:                        `[0, 1]`,
	} {
		if got := string(quoteNumberKeys([]byte(in))); got != want {
			t.Errorf("quoteNumberKeys(%s) = %s, want %s", in, got, want)
		}
	}
	if _, err := decodeRoute([]byte(`{"brokerDatas":[`)); err == nil {
		t.Error("a cut route decoded")
	}
}

// The bundled broker answers GET_BROKER_CLUSTER_INFO, so topics are created on the masters
// the name server names; several clusters without a choice are an error that says so.
func TestMasterBrokers(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: filepath.Join(t.TempDir(), "b"), ClusterName: "c9", BrokerName: "bk"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ns, addr := b.Addrs()
	got, err := masterBrokers(context.Background(), remoting.Credentials{}, ns, "")
	if err != nil || !reflect.DeepEqual(got, []brokerRef{{name: "bk", addr: addr}}) {
		t.Fatalf("masters = %v, %v; want [%s]", got, err, addr)
	}
	if got, err := masterBrokers(context.Background(), remoting.Credentials{}, ns, "other"); err == nil {
		t.Fatalf("masters of an unknown cluster: %v", got)
	}
	// A missing topic is created through them, not through a configured address.
	sink, err := OpenRocketMQSink(context.Background(), RocketMQConfig{NameServer: ns, CreateTopics: true}, "made", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if ti, ok := b.Topic("made"); !ok || ti.Queues != 3 {
		t.Fatalf("topic made: %+v %v", ti, ok)
	}
	if _, err := OpenRocketMQSink(context.Background(), RocketMQConfig{NameServer: ns}, "not-made", 3); err == nil || !strings.Contains(err.Error(), "create it first") {
		t.Fatalf("without CreateTopics: %v", err)
	}
}

func FuzzDecodeRoute(f *testing.F) {
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{0:"a:1"},"brokerName":"b"}],"queueDatas":[{"brokerName":"b","readQueueNums":4}]}`))
	f.Add([]byte(`{"brokerAddrTable":{"b":{"brokerAddrs":{0:"h:1"}}},"clusterAddrTable":{"c":["b"]}}`))
	f.Add([]byte(`{0:-1e5,"x\\"":{1 :2}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		q := quoteNumberKeys(b)
		// Quoting only adds quotes around bare number keys: valid JSON stays valid.
		if json.Valid(b) && !json.Valid(q) {
			t.Fatalf("quoteNumberKeys broke valid JSON %q into %q", b, q)
		}
		decodeRoute(b)
		decodeClusterInfo(b)
	})
}
