package broker

import (
	"net"
	"strings"
	"testing"

	"rsql/broker/remoting"
)

// A request whose numeric header field is not an integer gets INVALID_PARAMETER with the
// field's name in the remark, and changes nothing; the same request well formed succeeds.
func TestMalformedFieldRefused(t *testing.T) {
	b := mustOpen(t, testConfig(t))
	defer b.Close()
	if err := b.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	appendN(t, b, "t", 1, 0, 5)
	if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	_, addr := b.Addrs()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pull := map[string]string{"consumerGroup": "g", "topic": "t", "queueId": "1", "queueOffset": "0", "maxMsgNums": "10"}
	send := map[string]string{"topic": "t", "queueId": "1", "bornTimestamp": "5"}
	for i, tc := range []struct {
		code  int16
		ext   map[string]string
		field string
		bad   string
	}{
		{codeSendMessage, send, "queueId", "1x"},
		{codeSendMessage, send, "sysFlag", "f"},
		{codeSendMessage, send, "bornTimestamp", "yesterday"},
		{codePullMessage, pull, "maxMsgNums", "ten"},
		{codePullMessage, pull, "sysFlag", "0x1"},
		{codePullMessage, pull, "suspendTimeoutMillis", "1s"},
		{codeGetMaxOffset, map[string]string{"topic": "t", "queueId": "1"}, "queueId", "one"},
		{codeSearchOffsetByTS, map[string]string{"topic": "t", "queueId": "1", "timestamp": "0"}, "timestamp", "now"},
		{codeGetEarliestTime, map[string]string{"topic": "t", "queueId": "1"}, "queueId", "-"},
		{codeUpdateCreateTopic, map[string]string{"topic": "t2", "readQueueNums": "2", "writeQueueNums": "2"}, "writeQueueNums", "2.5"},
	} {
		ext := map[string]string{}
		for k, v := range tc.ext {
			ext[k] = v
		}
		ext[tc.field] = tc.bad
		r := call(t, c, &remoting.Command{Code: tc.code, Opaque: int32(2 * i), Body: []byte("x"), ExtFields: ext})
		if r.Code != respInvalidParameter || !strings.Contains(r.Remark, `"`+tc.field+`"`) {
			t.Errorf("code %d with %s=%q: response %d %q; want %d naming the field", tc.code, tc.field, tc.bad, r.Code, r.Remark, respInvalidParameter)
		}
		if r := call(t, c, &remoting.Command{Code: tc.code, Opaque: int32(2*i + 1), Body: []byte("x"), ExtFields: tc.ext}); r.Code != respSuccess {
			t.Errorf("code %d well formed: response %d %q", tc.code, r.Code, r.Remark)
		}
	}
	// The refused sends stored nothing: 5 appended + 3 well-formed sends.
	if end, err := b.MaxOffset("t", 1); err != nil || end != 8 {
		t.Fatalf("queue end %d, %v; want 8", end, err)
	}
	if _, ok := b.Topic("t2"); !ok {
		t.Fatal("the well-formed create did not create t2")
	}
}

// A stored half message whose target queue is malformed is an error of the commit and a
// malformed value in the in-process view, never queue 0.
func TestRealQueueMalformed(t *testing.T) {
	for _, v := range []string{"", "x", "-1", "1.0"} {
		if q, err := realQueue(map[string]string{PropRealQueue: v}); err == nil || !strings.Contains(err.Error(), PropRealQueue) {
			t.Errorf("%s=%q: queue %d, error %v; want an error naming the property", PropRealQueue, v, q, err)
		}
	}
	if q, err := realQueue(map[string]string{PropRealQueue: "3"}); err != nil || q != 3 {
		t.Fatalf("3: %d, %v", q, err)
	}
}
