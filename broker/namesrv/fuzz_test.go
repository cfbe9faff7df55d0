package namesrv

import (
	"encoding/json"
	"testing"

	"rsql/broker/remoting"
)

// FuzzRequest hands arbitrary request frames (registrations with arbitrary bodies among
// them) to the handler: every one gets a reply, and none panics.
func FuzzRequest(f *testing.F) {
	body, _ := json.Marshal(map[string]any{"topicConfigSerializeWrapper": map[string]any{
		"topicConfigTable": map[string]any{"t": map[string]any{"topicName": "t", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}}})
	for _, c := range []*remoting.Command{
		{Code: codeRegisterBroker, Language: "GO", ExtFields: map[string]string{"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "c", "brokerId": "0"}, Body: body},
		{Code: codeGetRoute, Language: "GO", ExtFields: map[string]string{"topic": "t"}},
		{Code: codePutKVConfig, Language: "GO", ExtFields: map[string]string{"namespace": OrderTopicConfig, "key": "t", "value": "b:4"}},
		{Code: codeGetClusterInfo, Language: "GO", SerializeType: remoting.SerializeRocketMQ},
	} {
		p, err := remoting.Encode(nil, c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p[4:])
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		req, err := remoting.Decode(p)
		if err != nil {
			return
		}
		s := New(Config{})
		if resp := s.handle(nil, req); resp == nil || !resp.IsResponse() {
			t.Fatalf("no reply to code %d", req.Code)
		}
		// A route after whatever happened is still a reply.
		if resp := s.handle(nil, &remoting.Command{Code: codeGetRoute, ExtFields: map[string]string{"topic": "t"}}); resp == nil {
			t.Fatal("no route reply")
		}
	})
}
