package broker

import (
	"net"
	"strconv"
	"testing"
	"time"

	"rsql/broker/remoting"
)

func call(t *testing.T, c net.Conn, req *remoting.Command) *remoting.Command {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	resp, err := remoting.RoundTrip(c, req, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestServeSendPullLongPoll drives the broker codes over a socket: a send to a new topic, a
// pull that returns the stored records, a long poll woken by a send, offsets and max offset.
func TestServeSendPullLongPoll(t *testing.T) {
	b := mustOpen(t, testConfig(t))
	defer b.Close()
	if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	_, addr := b.Addrs()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	props := string(EncodeProperties(map[string]string{"TAGS": "x", "UNIQ_KEY": "U1", "p": "v"}))
	send := func(opaque int32, body string) *remoting.Command {
		return call(t, c, &remoting.Command{Code: codeSendMessage, Opaque: opaque, Body: []byte(body),
			ExtFields: map[string]string{"topic": "net", "queueId": "1", "properties": props, "bornTimestamp": "5"}})
	}
	r := send(1, "hello")
	if r.Code != 0 || r.Ext("queueOffset") != "0" || r.Ext("queueId") != "1" {
		t.Fatalf("send reply %d %v", r.Code, r.ExtFields)
	}
	q, _ := b.queue("net", 1)
	phys, _, _, _ := q.get(0)
	if r.Ext("msgId") != MessageID(b.host(), phys) || len(r.Ext("msgId")) != 32 {
		t.Fatalf("msgId %s", r.Ext("msgId"))
	}
	pull := func(opaque int32, offset int64, suspend string) *remoting.Command {
		return call(t, c, &remoting.Command{Code: codePullMessage, Opaque: opaque, ExtFields: map[string]string{
			"consumerGroup": "g", "topic": "net", "queueId": "1", "queueOffset": strconv.FormatInt(offset, 10),
			"maxMsgNums": "32", "sysFlag": "2", "suspendTimeoutMillis": suspend}})
	}
	r = pull(2, 0, "0")
	msgs, err := DecodeRecords(r.Body)
	if r.Code != 0 || err != nil || len(msgs) != 1 || string(msgs[0].Body) != "hello" || msgs[0].Tags != "x" ||
		msgs[0].Properties["UNIQ_KEY"] != "U1" || msgs[0].BornTimestamp != 5 || r.Ext("nextBeginOffset") != "1" {
		t.Fatalf("pull: code %d %v %+v %v", r.Code, err, msgs, r.ExtFields)
	}
	// A long poll at the end is answered when the next message arrives.
	c2, _ := net.Dial("tcp", addr)
	defer c2.Close()
	go func() {
		time.Sleep(50 * time.Millisecond)
		f, _ := remoting.Encode(nil, &remoting.Command{Code: codeSendMessage, Opaque: 9, Body: []byte("world"),
			ExtFields: map[string]string{"topic": "net", "queueId": "1"}})
		c2.Write(f)
	}()
	r = pull(3, 1, "20000")
	msgs, _ = DecodeRecords(r.Body)
	if r.Code != 0 || len(msgs) != 1 || string(msgs[0].Body) != "world" || msgs[0].QueueOffset != 1 {
		t.Fatalf("long poll: code %d %+v", r.Code, msgs)
	}
	// Offsets.
	if r = call(t, c, &remoting.Command{Code: codeQueryConsumerOff, Opaque: 4, ExtFields: map[string]string{"consumerGroup": "g", "topic": "net", "queueId": "1"}}); r.Code != respQueryNotFound {
		t.Fatalf("query offset before commit: %d", r.Code)
	}
	call(t, c, &remoting.Command{Code: codeUpdateConsumerOff, Opaque: 5, ExtFields: map[string]string{"consumerGroup": "g", "topic": "net", "queueId": "1", "commitOffset": "2"}})
	if r = call(t, c, &remoting.Command{Code: codeQueryConsumerOff, Opaque: 6, ExtFields: map[string]string{"consumerGroup": "g", "topic": "net", "queueId": "1"}}); r.Code != 0 || r.Ext("offset") != "2" {
		t.Fatalf("query offset: %d %v", r.Code, r.ExtFields)
	}
	if r = call(t, c, &remoting.Command{Code: codeGetMaxOffset, Opaque: 7, ExtFields: map[string]string{"topic": "net", "queueId": "1"}}); r.Ext("offset") != "2" {
		t.Fatalf("max offset %v", r.ExtFields)
	}
	// Pull past the end: offset moved, with the max as the next offset.
	if r = pull(8, 9, "0"); r.Code != respPullOffsetMoved || r.Ext("nextBeginOffset") != "2" {
		t.Fatalf("pull past end: %d %v", r.Code, r.ExtFields)
	}
	// Close answers a pending long poll and returns.
	go func() {
		time.Sleep(50 * time.Millisecond)
		b.Close()
	}()
	f, _ := remoting.Encode(nil, &remoting.Command{Code: codePullMessage, Opaque: 10, ExtFields: map[string]string{
		"consumerGroup": "g", "topic": "net", "queueId": "1", "queueOffset": "2", "maxMsgNums": "32", "sysFlag": "2", "suspendTimeoutMillis": "20000"}})
	c.Write(f)
	done := make(chan struct{})
	go func() {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			if _, err := remoting.ReadFrame(c, 64<<20, nil); err != nil {
				break
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not end the connection")
	}
}
