package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"rsql/broker"
	"rsql/broker/remoting"
)

// `rsql consume --key K` and `--msg-id ID` look messages up instead of consuming: they ask
// the topic's brokers with QUERY_MESSAGE (12, the key index) and VIEW_MESSAGE_BY_ID (33),
// which any RocketMQ broker answers (docs/broker.md, "Key index").

var lookupOpaque atomic.Int32

// remoteCall sends one request to addr, signed with creds when set, and returns the reply.
func remoteCall(addr string, creds remoting.Credentials, req *remoting.Command) (*remoting.Command, error) {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req.Language, req.Version, req.Opaque = "GO", 479, lookupOpaque.Add(1)
	creds.Sign(req)
	return remoting.RoundTrip(c, req, 64<<20)
}

// topicBrokers returns the master addresses serving a topic, from the name server.
func topicBrokers(ns string, creds remoting.Credentials, topic string) ([]string, error) {
	resp, err := remoteCall(ns, creds, &remoting.Command{Code: 105, ExtFields: map[string]string{"topic": topic}})
	if err != nil {
		return nil, fmt.Errorf("asking %s for the route of %s: %w", ns, topic, err)
	}
	if resp.Code == 17 {
		return nil, &exitError{fmt.Sprintf("topic %s does not exist", topic)}
	}
	if resp.Code != 0 {
		return nil, fmt.Errorf("route of %s: code %d %s", topic, resp.Code, resp.Remark)
	}
	var route struct {
		BrokerDatas []struct {
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if err := json.Unmarshal(resp.Body, &route); err != nil {
		return nil, fmt.Errorf("route of %s does not decode: %w", topic, err)
	}
	var addrs []string
	for _, bd := range route.BrokerDatas {
		if a := bd.BrokerAddrs["0"]; a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no master broker serves %s", topic)
	}
	return addrs, nil
}

// lookupMessages finds a topic's messages by key, or the one with a message id (an
// offsetMsgId, else a client message id), sorted by store time.
func lookupMessages(ns string, creds remoting.Credentials, topic, key, msgID string, limit int) ([]broker.Message, error) {
	addrs, err := topicBrokers(ns, creds, topic)
	if err != nil {
		return nil, err
	}
	if msgID != "" {
		if addr, off, ok := parseOffsetMsgID(msgID); ok {
			for _, a := range addrs {
				if a != addr {
					continue
				}
				resp, err := remoteCall(a, creds, &remoting.Command{Code: 33, ExtFields: map[string]string{"offset": strconv.FormatInt(off, 10)}})
				if err != nil {
					return nil, err
				}
				if resp.Code == 0 {
					msgs, err := broker.DecodeRecords(resp.Body)
					if err != nil {
						return nil, fmt.Errorf("message %s does not decode: %w", msgID, err)
					}
					if len(msgs) == 1 && msgs[0].Topic == topic {
						return msgs, nil
					}
				}
			}
		}
		key = msgID
	}
	var out []broker.Message
	for _, a := range addrs {
		ext := map[string]string{"topic": topic, "key": key, "maxNum": strconv.Itoa(limit),
			"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(math.MaxInt64, 10)}
		if msgID != "" {
			ext["_UNIQUE_KEY_QUERY"] = "true"
		}
		resp, err := remoteCall(a, creds, &remoting.Command{Code: 12, ExtFields: ext})
		if err != nil {
			return nil, fmt.Errorf("querying %s: %w", a, err)
		}
		if resp.Code == 22 {
			continue
		}
		if resp.Code != 0 {
			return nil, fmt.Errorf("querying %s: code %d %s", a, resp.Code, resp.Remark)
		}
		msgs, err := broker.DecodeRecords(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("query answer of %s does not decode: %w", a, err)
		}
		// A RocketMQ broker answers by key hash: keep the messages that carry the key.
		for _, m := range msgs {
			if m.Topic == topic && carries(m, key, msgID != "") {
				out = append(out, m)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoreTimestamp < out[j].StoreTimestamp })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func carries(m broker.Message, key string, unique bool) bool {
	if m.Properties[broker.PropUniqKey] == key {
		return true
	}
	if unique {
		return false
	}
	for _, k := range strings.Split(m.Key, " ") { // RocketMQ's key separator: one space
		if k == key && k != "" {
			return true
		}
	}
	return false
}

// parseOffsetMsgID decodes an offsetMsgId: IPv4 (32 hex digits) or IPv6 (56), port,
// commit-log offset.
func parseOffsetMsgID(id string) (string, int64, bool) {
	b, err := hex.DecodeString(id)
	if err != nil || (len(b) != 16 && len(b) != 28) {
		return "", 0, false
	}
	ipLen := len(b) - 12
	ip, _ := netip.AddrFromSlice(b[:ipLen])
	port := int(b[ipLen])<<24 | int(b[ipLen+1])<<16 | int(b[ipLen+2])<<8 | int(b[ipLen+3])
	var off int64
	for _, c := range b[ipLen+4:] {
		off = off<<8 | int64(c)
	}
	if port <= 0 || port > 65535 || off < 0 {
		return "", 0, false
	}
	return netip.AddrPortFrom(ip, uint16(port)).String(), off, true
}

// messageBody is a message's body: DecodeRecords has inflated a compressed one, or says
// why it could not.
func messageBody(m broker.Message) ([]byte, error) {
	return m.Body, m.BodyErr
}
