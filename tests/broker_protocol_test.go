package tests

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"

	"rsql/broker/remoting"
)

// rawCall sends one request on a fresh connection and reads the reply.
func rawCall(t *testing.T, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return rawCallOn(t, c, req)
}

func rawCallOn(t *testing.T, c net.Conn, req *remoting.Command) *remoting.Command {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := remoting.RoundTrip(c, req, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// expectClosed checks that the broker closes the connection after what was written.
func expectClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: connection not closed by the broker", what)
	}
}

// TestBrokerRejectsBadFrames: garbage, oversize frames, bad headers and half frames close
// that connection only; the broker keeps serving, and unknown codes are refused politely.
func TestBrokerRejectsBadFrames(t *testing.T) {
	b := startBroker(t)
	cases := map[string][]byte{
		"http request":    []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"17 MiB frame":    binary.BigEndian.AppendUint32(nil, 17<<20),
		"bad json header": append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 9), 5), "{{{{{"...),
		"bad serializer":  append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 6), 7<<24|2), "{}"...),
		"tiny length":     binary.BigEndian.AppendUint32(nil, 2),
	}
	for name, data := range cases {
		for _, addr := range []string{b.NS, b.Addr} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.Write(data)
			expectClosed(t, c, name)
			c.Close()
		}
	}
	// Disconnect in the middle of a frame.
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := remoting.Encode(nil, &remoting.Command{Code: 105, Opaque: 1, ExtFields: map[string]string{"topic": "TBW102"}})
		c.Write(f[:len(f)/2])
		c.Close()
	}
	// Still alive: a route request works and its body is compact JSON with broker id 0.
	resp := rawCall(t, b.NS, &remoting.Command{Code: 105, Language: "GO", Version: 317, Opaque: 42, ExtFields: map[string]string{"topic": "TBW102"}})
	if resp.Code != 0 || resp.Opaque != 42 || bytes.ContainsAny(resp.Body, " \n") || !strings.Contains(string(resp.Body), `"brokerAddrs":{"0":"`+b.Addr+`"}`) {
		t.Fatalf("route reply %d %q", resp.Code, resp.Body)
	}
	resp = rawCall(t, b.NS, &remoting.Command{Code: 105, Opaque: 43, ExtFields: map[string]string{"topic": "nope"}})
	if resp.Code != 17 {
		t.Fatalf("unknown topic route: code %d", resp.Code)
	}
	resp = rawCall(t, b.Addr, &remoting.Command{Code: 9999, Opaque: 44, SerializeType: remoting.SerializeRocketMQ})
	if resp.Code != 3 || resp.SerializeType != remoting.SerializeRocketMQ {
		t.Fatalf("unknown code: reply code %d type %d", resp.Code, resp.SerializeType)
	}
}

// TestBrokerQueueLocks: LOCK_BATCH_MQ grants a queue to one client at a time until it is
// unlocked or its holder disconnects.
func TestBrokerQueueLocks(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "locked", 4)
	lock := func(c net.Conn, code int16, client string, queues ...int) []int {
		var mqs []map[string]any
		for _, q := range queues {
			mqs = append(mqs, map[string]any{"topic": "locked", "brokerName": "broker-a", "queueId": q})
		}
		body, _ := json.Marshal(map[string]any{"consumerGroup": "g", "clientId": client, "mqSet": mqs})
		resp := rawCallOn(t, c, &remoting.Command{Code: code, Opaque: int32(time.Now().UnixNano() & 0x7fffffff), Body: body})
		if resp.Code != 0 {
			t.Fatalf("lock code %d", resp.Code)
		}
		if code == 42 {
			return nil
		}
		var r struct {
			LockOKMQSet []struct {
				QueueID int `json:"queueId"`
			} `json:"lockOKMQSet"`
		}
		if err := json.Unmarshal(resp.Body, &r); err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, m := range r.LockOKMQSet {
			got = append(got, m.QueueID)
		}
		return got
	}
	ca, _ := net.Dial("tcp", b.Addr)
	cb, _ := net.Dial("tcp", b.Addr)
	defer cb.Close()
	if got := lock(ca, 41, "A", 0, 1); len(got) != 2 {
		t.Fatalf("A locked %v", got)
	}
	if got := lock(cb, 41, "B", 1, 2); len(got) != 1 || got[0] != 2 {
		t.Fatalf("B locked %v, want [2]", got)
	}
	if got := lock(ca, 41, "A", 0, 1, 2); len(got) != 2 {
		t.Fatalf("A re-lock got %v, want [0 1]", got)
	}
	lock(ca, 42, "A", 1)
	if got := lock(cb, 41, "B", 1); len(got) != 1 {
		t.Fatalf("B could not take an unlocked queue: %v", got)
	}
	ca.Close()
	_ = b
}

// TestBrokerAdminTopics: the admin client creates, lists and deletes topics.
func TestBrokerAdminTopics(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "adm", 3)
	if n := len(queuesOf(t, b, "adm")); n != 3 {
		t.Fatalf("created topic has %d queues, want 3", n)
	}
	a, err := admin.NewAdmin(admin.WithResolver(b.resolver()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	list, err := a.FetchAllTopicList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range list.TopicList {
		found = found || n == "adm"
	}
	if !found {
		t.Fatalf("topic list %v lacks adm", list.TopicList)
	}
	err = a.DeleteTopic(context.Background(), admin.WithTopicDelete("adm"), admin.WithBrokerAddrDelete(b.Addr),
		admin.WithNameSrvAddr([]string{b.NS}))
	if err != nil {
		t.Fatal(err)
	}
	if resp := rawCall(t, b.NS, &remoting.Command{Code: 105, Opaque: 1, ExtFields: map[string]string{"topic": "adm"}}); resp.Code != 17 {
		t.Fatalf("route of a deleted topic: code %d", resp.Code)
	}
	// Invalid names are refused.
	resp := rawCall(t, b.Addr, &remoting.Command{Code: 17, Opaque: 2, ExtFields: map[string]string{"topic": "bad name!", "readQueueNums": "1"}})
	if resp.Code != 29 {
		t.Fatalf("invalid topic name: code %d", resp.Code)
	}
}
