package tests

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"rsql/broker/remoting"
)

// liveClient is a raw protocol client that heartbeats every 300 ms on its connection and
// records every frame the broker sends it.
type liveClient struct {
	c      net.Conn
	mu     sync.Mutex
	frames []*remoting.Command
	wmu    sync.Mutex
	stop   chan struct{}
}

func heartbeatBody(clientID, group string) []byte {
	b, _ := json.Marshal(map[string]any{"clientID": clientID, "consumerDataSet": []any{map[string]any{
		"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
		"subscriptionDataSet": []any{map[string]any{"topic": "hk", "subString": "*"}}}}})
	return b
}

func lockBody(clientID, group string, queue int) []byte {
	b, _ := json.Marshal(map[string]any{"consumerGroup": group, "clientId": clientID,
		"mqSet": []any{map[string]any{"topic": "hk", "brokerName": "broker-a", "queueId": queue}}})
	return b
}

func startLiveClient(t *testing.T, addr, id, group string) *liveClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	lc := &liveClient{c: c, stop: make(chan struct{})}
	go func() {
		for {
			p, err := remoting.ReadFrame(c, 1<<20, nil)
			if err != nil {
				return
			}
			cmd, err := remoting.Decode(p)
			if err != nil {
				return
			}
			lc.mu.Lock()
			lc.frames = append(lc.frames, cmd)
			lc.mu.Unlock()
		}
	}()
	go func() {
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for i := int32(1000); ; i++ {
			lc.send(&remoting.Command{Code: 34, Opaque: i, Body: heartbeatBody(id, group)})
			select {
			case <-lc.stop:
				return
			case <-t.C:
			}
		}
	}()
	t.Cleanup(func() { close(lc.stop); c.Close() })
	return lc
}

func (lc *liveClient) send(cmd *remoting.Command) {
	f, _ := remoting.Encode(nil, cmd)
	lc.wmu.Lock()
	lc.c.Write(f)
	lc.wmu.Unlock()
}

// find returns the first frame matching f.
func (lc *liveClient) find(f func(*remoting.Command) bool) *remoting.Command {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for _, c := range lc.frames {
		if f(c) {
			return c
		}
	}
	return nil
}

// closedByBroker waits until the broker closes c (EOF or reset) and fails on a timeout.
func closedByBroker(t *testing.T, c net.Conn, within time.Duration, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: connection still open after %v", what, within)
	}
}

// TestBrokerClientHousekeeping: with --client-expiry 2s, a consumer that stops
// heartbeating leaves its group (the others are notified to rebalance), its queue lock is
// released and its connection is closed; a connection that sends nothing is closed; a
// client that keeps heartbeating stays.
func TestBrokerClientHousekeeping(t *testing.T) {
	b := startBroker(t, "--client-expiry", "2s", "--lock-expiry", "10m")
	createTopic(t, b, "hk", 4)
	a := startLiveClient(t, b.Addr, "A", "g-hk")
	// B heartbeats once, locks queue 0, then falls silent. Its 2 s count from its last
	// request, so the clock starts before its first.
	started := time.Now()
	bc, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if r := rawCallOn(t, bc, &remoting.Command{Code: 34, Opaque: 1, Body: heartbeatBody("B", "g-hk")}); r.Code != 0 {
		t.Fatalf("heartbeat: %d", r.Code)
	}
	if r := rawCallOn(t, bc, &remoting.Command{Code: 41, Opaque: 2, Body: lockBody("B", "g-hk", 0)}); r.Code != 0 || !json.Valid(r.Body) || len(r.Body) < 30 {
		t.Fatalf("B's lock: %d %s", r.Code, r.Body)
	}
	if ids, err := consumerIDs(b.Addr, "g-hk"); err != nil || len(ids) != 2 {
		t.Fatalf("group members %v %v, want A and B", ids, err)
	}
	silent, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	notifiesBefore := 0
	a.mu.Lock()
	for _, f := range a.frames {
		if f.Code == 40 {
			notifiesBefore++
		}
	}
	a.mu.Unlock()

	closedByBroker(t, bc, 30*time.Second, "the client without heartbeats")
	closedByBroker(t, silent, 30*time.Second, "the silent connection")
	if time.Since(started) < 2*time.Second {
		t.Fatalf("closed after %v, before the 2 s expiry", time.Since(started))
	}
	if ids, err := consumerIDs(b.Addr, "g-hk"); err != nil || len(ids) != 1 || ids[0] != "A" {
		t.Fatalf("group members after the expiry: %v %v, want [A]", ids, err)
	}
	// A was told to rebalance, and can take B's queue (its lock would not expire for 10 min).
	if !waitFor(10*time.Second, func() bool {
		n := 0
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, f := range a.frames {
			if f.Code == 40 && f.ExtFields["consumerGroup"] == "g-hk" {
				n++
			}
		}
		return n > notifiesBefore
	}) {
		t.Fatal("the remaining consumer was not notified of the membership change")
	}
	a.send(&remoting.Command{Code: 41, Opaque: 77, Body: lockBody("A", "g-hk", 0)})
	var lock *remoting.Command
	waitFor(10*time.Second, func() bool {
		lock = a.find(func(c *remoting.Command) bool { return c.IsResponse() && c.Opaque == 77 })
		return lock != nil
	})
	var lr struct {
		LockOKMQSet []json.RawMessage `json:"lockOKMQSet"`
	}
	if lock == nil || json.Unmarshal(lock.Body, &lr) != nil || len(lr.LockOKMQSet) != 1 {
		t.Fatalf("A could not lock the queue B held: %v", lock)
	}
	// A, heartbeating all along, is still served.
	time.Sleep(2500 * time.Millisecond)
	if ids, _ := consumerIDs(b.Addr, "g-hk"); len(ids) != 1 || ids[0] != "A" {
		t.Fatalf("the heartbeating client was dropped: %v", ids)
	}
}
