package tests

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"rsql/broker"
	"rsql/broker/remoting"
)

// queryByKey sends QUERY_MESSAGE and returns the reply code and the decoded messages.
func queryByKey(t *testing.T, b *rsqlBroker, topic, key string, unique bool) (int16, []broker.Message) {
	t.Helper()
	ext := map[string]string{"topic": topic, "key": key, "maxNum": "64", "beginTimestamp": "0",
		"endTimestamp": strconv.FormatInt(math.MaxInt64, 10)}
	if unique {
		ext["_UNIQUE_KEY_QUERY"] = "true"
	}
	r := rawCall(t, b.Addr, &remoting.Command{Code: 12, Opaque: 1, ExtFields: ext})
	msgs, err := broker.DecodeRecords(r.Body)
	if err != nil {
		t.Fatalf("QUERY_MESSAGE body: %v", err)
	}
	if r.Code == 0 && (r.ExtFields["indexLastUpdateTimestamp"] == "" || r.ExtFields["indexLastUpdatePhyoffset"] == "") {
		t.Fatalf("QUERY_MESSAGE reply lacks the index fields: %v", r.ExtFields)
	}
	return r.Code, msgs
}

// bodiesOf returns the messages' bodies, decompressed where the client compressed them.
func bodiesOf(msgs []broker.Message) []string {
	var out []string
	for _, m := range msgs {
		body := m.Body
		if m.SysFlag&broker.SysFlagCompressed != 0 {
			r, err := zlib.NewReader(bytes.NewReader(body))
			if err != nil {
				panic(err)
			}
			body, _ = io.ReadAll(r)
		}
		out = append(out, string(body))
	}
	return out
}

// TestBrokerQueryByKeyAndID: messages sent with keys by the official producer are found by
// each key (QUERY_MESSAGE), by their client id (QUERY_MESSAGE with _UNIQUE_KEY_QUERY) and
// by their offsetMsgId (VIEW_MESSAGE_BY_ID); `rsql consume --key` and `--msg-id` print
// them; and all of it still works after a kill -9 and restart.
func TestBrokerQueryByKeyAndID(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "keyed", 4)
	p := newProducer(t, b)
	type sent struct{ body, uniq, offsetID string }
	var all []sent
	for i := 0; i < 60; i++ {
		body := fmt.Sprintf(`{"order":%d}`, i)
		if i == 59 {
			body = `{"big":"` + strings.Repeat("x", 8000) + `"}` // compressed by the client
		}
		m := primitive.NewMessage("keyed", []byte(body))
		m.WithKeys([]string{fmt.Sprintf("order-%d", i), fmt.Sprintf("user-%d", i%7)})
		r, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sent{body, r.MsgID, r.OffsetMsgID})
	}
	user3 := func() []string {
		var w []string
		for i, s := range all {
			if i%7 == 3 {
				w = append(w, s.body)
			}
		}
		sort.Strings(w)
		return w
	}()
	check := func(stage string) {
		t.Helper()
		var code int16
		var msgs []broker.Message
		// The index follows the log asynchronously.
		waitFor(10*time.Second, func() bool { code, msgs = queryByKey(t, b, "keyed", "user-3", false); return len(msgs) == len(user3) })
		got := bodiesOf(msgs)
		sort.Strings(got)
		if code != 0 || fmt.Sprint(got) != fmt.Sprint(user3) {
			t.Fatalf("%s: user-3 gives code %d and %d messages, want %d", stage, code, len(got), len(user3))
		}
		// order-59's body was compressed by the client; the decoder inflates it.
		if code, msgs = queryByKey(t, b, "keyed", "order-59", false); code != 0 || len(msgs) != 1 || bodiesOf(msgs)[0] != all[59].body {
			t.Fatalf("%s: order-59: code %d, %d messages", stage, code, len(msgs))
		}
		if code, _ = queryByKey(t, b, "keyed", "order-999", false); code != 22 {
			t.Fatalf("%s: unknown key: code %d, want 22", stage, code)
		}
		if code, msgs = queryByKey(t, b, "keyed", all[10].uniq, true); code != 0 || len(msgs) != 1 || string(msgs[0].Body) != all[10].body {
			t.Fatalf("%s: by client id: code %d, %v", stage, code, bodiesOf(msgs))
		}
		// The offsetMsgId is the store address (16 hex digits) and the commit-log offset.
		phys, err := strconv.ParseInt(all[20].offsetID[16:], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		r := rawCall(t, b.Addr, &remoting.Command{Code: 33, Opaque: 2, ExtFields: map[string]string{"offset": strconv.FormatInt(phys, 10)}})
		if msgs, err := broker.DecodeRecords(r.Body); r.Code != 0 || err != nil || len(msgs) != 1 || string(msgs[0].Body) != all[20].body {
			t.Fatalf("%s: VIEW_MESSAGE_BY_ID: code %d, %v", stage, r.Code, err)
		}
		if r := rawCall(t, b.Addr, &remoting.Command{Code: 33, Opaque: 3, ExtFields: map[string]string{"offset": strconv.FormatInt(phys+1, 10)}}); r.Code != 1 {
			t.Fatalf("%s: VIEW_MESSAGE_BY_ID at a wrong offset: code %d", stage, r.Code)
		}
		// The command line.
		out, errOut, err := runRsql(t, "", "consume", "keyed", "--key", "user-3", "--namesrv-addr", b.NS)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(lines)
		if err != nil || fmt.Sprint(lines) != fmt.Sprint(user3) {
			t.Fatalf("%s: consume --key user-3: %v %q\n%s", stage, err, errOut, out)
		}
		for _, id := range []string{all[59].offsetID, all[59].uniq} {
			out, errOut, err = runRsql(t, "", "consume", "keyed", "--msg-id", id, "--namesrv-addr", b.NS)
			if err != nil || strings.TrimSpace(out) != all[59].body {
				t.Fatalf("%s: consume --msg-id %s: %v %q, printed %d bytes", stage, id, err, errOut, len(out))
			}
		}
		_, errOut, err = runRsql(t, "", "consume", "keyed", "--key", "nope", "--namesrv-addr", b.NS)
		if err == nil || !strings.Contains(errOut, "no message with key nope in keyed") {
			t.Fatalf("%s: consume --key nope: %v %q", stage, err, errOut)
		}
	}
	check("running")
	b.killAndRestart()
	check("after kill -9")
}
