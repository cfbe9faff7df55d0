package broker

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rsql/broker/remoting"
)

// A file in the layout of RocketMQ's own plain_acl.yml (numbers left unquoted, a blank
// whiteRemoteAddress, comments, a dataVersion written by its admin tool).
const rocketmqACL = `globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
dataVersion:
  - counter: 1
    timestamp: 1700000000000
`

func TestParseACLRocketMQFile(t *testing.T) {
	r, err := parseACL([]byte(rocketmqACL))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.global) != 2 || len(r.accounts) != 2 {
		t.Fatalf("global %d accounts %d", len(r.global), len(r.accounts))
	}
	a := r.accounts["RocketMQ"]
	if a == nil || a.admin || a.white != nil || a.defTopic != permDeny || a.defGroup != permSub {
		t.Fatalf("account RocketMQ: %+v", a)
	}
	if a.topics["topicA"] != permDeny || a.topics["topicB"] != permPub|permSub || a.topics["topicC"] != permSub ||
		a.groups["groupA"] != permDeny || a.groups["groupB"] != permPub|permSub || a.groups["groupC"] != permSub {
		t.Fatalf("perms: topics %v groups %v", a.topics, a.groups)
	}
	b := r.accounts["rocketmq2"]
	if b == nil || !b.admin || b.white == nil || !b.white.match(netip.MustParseAddr("192.168.1.77")) ||
		b.white.match(netip.MustParseAddr("192.168.2.1")) || b.defTopic != permDeny {
		t.Fatalf("account rocketmq2: %+v", b)
	}
	// The secret key was read as the text "12345678", not as a number.
	req := &remoting.Command{Code: codeSendMessage, ExtFields: map[string]string{"topic": "topicB"}}
	remoting.Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}.Sign(req)
	if !a.verify(req) {
		t.Fatal("a request signed with secret 12345678 does not verify")
	}
}

func TestParseACLErrors(t *testing.T) {
	acct := "accounts:\n  - accessKey: alice-key\n    secretKey: alice-secret\n"
	for _, tc := range []struct{ file, want string }{
		{"", "is empty"},
		{"accounts:\n", "no accounts"},
		{"acounts:\n  - accessKey: x\n", `line 1: the file has unknown key "acounts"`},
		{acct + "    topicPerm:\n      - a=PUB\n", `line 4: an account has unknown key "topicPerm"`},
		{"accounts:\n  - accessKey: short\n    secretKey: alice-secret\n", `line 2: accessKey "short" must be at least 7`},
		{"accounts:\n  - accessKey: alice-key\n    secretKey: 123456\n", `secretKey of "alice-key" must be at least 7`},
		{acct + "    topicPerms:\n      - orders=PUBSUB\n", `line 5: topicPerms item "orders=PUBSUB": "PUBSUB" is not PUB, SUB`},
		{acct + "    groupPerms:\n      - g\n", `groupPerms item "g" is not name=PERMISSION`},
		{acct + "    defaultTopicPerm: ALL\n", `line 4: defaultTopicPerm "ALL" is not`},
		{acct + "    admin: maybe\n", "admin must be true or false"},
		{acct + "    whiteRemoteAddress: 10.0.0.300\n", `"10.0.0.300" is not an IPv4 or IPv6 address`},
		{acct + "  - accessKey: alice-key\n    secretKey: other-secret\n", `access key "alice-key" appears twice`},
		{acct + "    topicPerms: orders=PUB\n", "topicPerms must be a list"},
		{"accounts: [\n", "yaml:"},
	} {
		_, err := parseACL([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("file %q: error %v, want it to contain %q", tc.file, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "alice-secret") {
			t.Errorf("error %q shows the secret key", err)
		}
	}
}

func TestAddrPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{"*", []string{"1.2.3.4", "::1"}, nil},
		{"*.*.*.*", []string{"8.8.8.8"}, nil},
		{"192.168.0.1", []string{"192.168.0.1", "::ffff:192.168.0.1"}, []string{"192.168.0.2"}},
		{"192.168.0.1,192.168.0.9", []string{"192.168.0.9"}, []string{"192.168.0.2"}},
		{"192.168.0.{1,2}", []string{"192.168.0.1", "192.168.0.2"}, []string{"192.168.0.3"}},
		{"192.168.*.*", []string{"192.168.200.3"}, []string{"192.169.0.1", "::1"}},
		{"192.168.*.", []string{"192.168.7.3"}, []string{"10.168.7.3"}},
		{"192.168.1-10.*", []string{"192.168.1.0", "192.168.10.255"}, []string{"192.168.11.1", "192.168.0.1"}},
		{"10.10.103.*", []string{"10.10.103.250"}, []string{"10.10.104.1"}},
		{"::1", []string{"::1"}, []string{"127.0.0.1"}},
		{"1050::5:600:300c:*", []string{"1050::5:600:300c:1"}, []string{"1050::5:600:300d:1"}},
		{"1050:0:0:0:5:600:300c:1-ff", []string{"1050::5:600:300c:ff"}, []string{"1050::5:600:300c:100"}},
		{"1050::5:600:300c:{1,2}", []string{"1050::5:600:300c:2"}, []string{"1050::5:600:300c:3"}},
	} {
		p, err := parseAddrPattern(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		for _, a := range tc.yes {
			if !p.match(netip.MustParseAddr(a)) {
				t.Errorf("%s does not match %s", tc.pattern, a)
			}
		}
		for _, a := range tc.no {
			if p.match(netip.MustParseAddr(a)) {
				t.Errorf("%s matches %s", tc.pattern, a)
			}
		}
	}
	if p, err := parseAddrPattern("  "); p != nil || err != nil {
		t.Fatalf("blank: %v %v", p, err)
	}
	for _, bad := range []string{"192.168.300.*", "192.168.5-1.*", "1.2.3.4.*", "x.*", "192.168.0.1,nope", "{1,2}", "1:2:3:4:5:6:7:8:*", "1::2::*"} {
		if _, err := parseAddrPattern(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestSignatureContent pins the signed content: the extFields' values ordered by name
// (AccessKey among them, Signature left out), then the body — computed here by hand.
func TestSignatureContent(t *testing.T) {
	req := &remoting.Command{Code: codeSendMessage, Body: []byte("BODY"),
		ExtFields: map[string]string{"topic": "T", "queueId": "3", "bornTimestamp": "77"}}
	remoting.Credentials{AccessKey: "access-1", SecretKey: "secret-1"}.Sign(req)
	mac := hmac.New(sha1.New, []byte("secret-1"))
	mac.Write([]byte("access-1" + "77" + "3" + "T" + "BODY")) // AccessKey, bornTimestamp, queueId, topic
	if want := base64.StdEncoding.EncodeToString(mac.Sum(nil)); req.Ext("Signature") != want || req.Ext("AccessKey") != "access-1" {
		t.Fatalf("signature %q, want %q (ext %v)", req.Ext("Signature"), want, req.ExtFields)
	}
}

// goClientSign signs as rocketmq-client-go's ACL interceptor does: every extField and
// AccessKey, but not SecurityToken.
func goClientSign(req *remoting.Command, ak, sk, token string) {
	req.ExtFields[remoting.ExtAccessKey] = ak
	mac := hmac.New(sha1.New, []byte(sk))
	mac.Write(remoting.AppendContent(nil, req.ExtFields, nil))
	mac.Write(req.Body)
	req.ExtFields[remoting.ExtSignature] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if token != "" {
		req.ExtFields[remoting.ExtSecurityToken] = token
	}
}

const testACL = `accounts:
  - accessKey: producer-ak
    secretKey: producer-sk
    defaultTopicPerm: PUB
    defaultGroupPerm: DENY
    topicPerms: [closed=DENY, readonly=SUB]
  - accessKey: consumer-ak
    secretKey: consumer-sk
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    groupPerms: [other=DENY]
  - accessKey: admin-ak
    secretKey: admin-sk
    admin: true
  - accessKey: trusted-ak
    secretKey: trusted-sk
    whiteRemoteAddress: 10.1.*.*
`

func TestACLCheck(t *testing.T) {
	r, err := parseACL([]byte(testACL))
	if err != nil {
		t.Fatal(err)
	}
	a := &acl{}
	a.rules.Store(r)
	local := netip.MustParseAddr("127.0.0.1")
	creds := map[string]string{"producer-ak": "producer-sk", "consumer-ak": "consumer-sk", "admin-ak": "admin-sk", "trusted-ak": "trusted-sk"}
	req := func(ak string, code int16, body string, ext ...string) *remoting.Command {
		c := &remoting.Command{Code: code, ExtFields: map[string]string{}}
		if body != "" {
			c.Body = []byte(body)
		}
		for i := 0; i+1 < len(ext); i += 2 {
			c.ExtFields[ext[i]] = ext[i+1]
		}
		if ak != "" {
			remoting.Credentials{AccessKey: ak, SecretKey: creds[ak]}.Sign(c)
		}
		return c
	}
	hbConsumer := `{"clientID":"c1","consumerDataSet":[{"groupName":"g1","subscriptionDataSet":[{"topic":"orders"},{"topic":"%RETRY%g1"}]}]}`
	for _, tc := range []struct {
		name string
		req  *remoting.Command
		want string // "" allowed, else the refusal
	}{
		{"unsigned", req("", codeSendMessage, "x", "topic", "orders"), "No accessKey is configured"},
		{"unknown account", req("", codeSendMessage, "x", "topic", "orders", "AccessKey", "nobody-ak", "Signature", "x"), "No acl config for nobody-ak"},
		{"send", req("producer-ak", codeSendMessage, "x", "topic", "orders"), ""},
		{"send v2", req("producer-ak", codeSendMessageV2, "x", "b", "orders"), ""},
		{"send batch", req("producer-ak", codeSendBatch, "x", "b", "orders"), ""},
		{"send to a DENY topic", req("producer-ak", codeSendMessageV2, "x", "b", "closed"), "No permission for topic:closed"},
		{"send to a SUB topic", req("producer-ak", codeSendMessage, "x", "topic", "readonly"), "No permission for topic:readonly"},
		{"send, SUB only", req("consumer-ak", codeSendMessageV2, "x", "b", "orders"), "No default permission for topic:orders"},
		{"batch, SUB only", req("consumer-ak", codeSendBatch, "x", "b", "orders"), "No default permission for topic:orders"},
		{"pull", req("consumer-ak", codePullMessage, "", "topic", "orders", "consumerGroup", "g1"), ""},
		{"pull, DENY group", req("consumer-ak", codePullMessage, "", "topic", "orders", "consumerGroup", "other"), "No permission for group:other"},
		{"pull, no group right", req("producer-ak", codePullMessage, "", "topic", "readonly", "consumerGroup", "g1"), "No default permission for group:g1"},
		{"pull a retry topic", req("consumer-ak", codePullMessage, "", "topic", "%RETRY%other", "consumerGroup", "g1"), "No permission for group:other"},
		{"commit offset", req("consumer-ak", codeUpdateConsumerOff, "", "topic", "orders", "consumerGroup", "g1", "queueId", "0", "commitOffset", "5"), ""},
		{"query offset, PUB only", req("producer-ak", codeQueryConsumerOff, "", "topic", "orders", "consumerGroup", "g1"), "No default permission for topic:orders"},
		{"consumer heartbeat", req("consumer-ak", codeHeartbeat, hbConsumer), ""},
		{"consumer heartbeat, no group right", req("producer-ak", codeHeartbeat, hbConsumer), "No default permission for group:g1"},
		{"producer heartbeat", req("producer-ak", codeHeartbeat, `{"clientID":"p1","producerDataSet":[{"groupName":"pg"}]}`), ""},
		{"bad heartbeat", req("producer-ak", codeHeartbeat, `{"consumerDataSet":[`), "heartbeat body is not valid JSON"},
		{"send back", req("consumer-ak", codeSendMsgBack, "", "group", "g1", "originTopic", "orders"), "No default permission for topic:orders"},
		{"create topic", req("producer-ak", codeUpdateCreateTopic, "", "topic", "t"), "Need admin permission for request code=17, but accessKey=producer-ak is not"},
		{"create topic, admin", req("admin-ak", codeUpdateCreateTopic, "", "topic", "t"), ""},
		{"replicate, not admin", req("consumer-ak", codeReplFetch, "", "offset", "0"), "Need admin permission for request code=2100"},
		{"signature-only code", req("consumer-ak", codeGetMaxOffset, "", "topic", "closed", "queueId", "0"), ""},
		{"route on the broker listener", req("", codeGetRoute, "", "topic", "orders"), "No accessKey is configured"},
	} {
		if got := a.check(tc.req, local, false); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}

	// Tampering with a signed request breaks its signature.
	for _, tamper := range []func(c *remoting.Command){
		func(c *remoting.Command) { c.ExtFields["topic"] = "other" },
		func(c *remoting.Command) { c.Body = []byte("y") },
		func(c *remoting.Command) { c.ExtFields["queueId"] = "1" },
		func(c *remoting.Command) { c.ExtFields["AccessKey"] = "consumer-ak" },
	} {
		c := req("producer-ak", codeSendMessage, "x", "topic", "orders")
		tamper(c)
		if got := a.check(c, local, false); !strings.HasPrefix(got, "Check signature failed") {
			t.Errorf("tampered request: %q", got)
		}
	}
	// A wrong secret key.
	c := &remoting.Command{Code: codeSendMessage, ExtFields: map[string]string{"topic": "orders"}}
	remoting.Credentials{AccessKey: "producer-ak", SecretKey: "not-the-secret"}.Sign(c)
	if got := a.check(c, local, false); got != "Check signature failed for accessKey=producer-ak" {
		t.Errorf("wrong secret: %q", got)
	}
	// The Go client's form: SecurityToken sent but not signed; Java's: signed.
	c = req("", codeSendMessage, "x", "topic", "orders")
	goClientSign(c, "producer-ak", "producer-sk", "token-1")
	if got := a.check(c, local, false); got != "" {
		t.Errorf("Go client form with a security token: %q", got)
	}
	c = req("", codeSendMessage, "x", "topic", "orders")
	remoting.Credentials{AccessKey: "producer-ak", SecretKey: "producer-sk", SecurityToken: "token-1"}.Sign(c)
	if got := a.check(c, local, false); got != "" {
		t.Errorf("Java form with a security token: %q", got)
	}
	c.ExtFields[remoting.ExtSecurityToken] = "token-2"
	if got := a.check(c, local, false); got == "" {
		t.Error("a changed security token still verifies")
	}
	// _UNIQUE_KEY_QUERY, added after signing, is left out of the content.
	c = req("consumer-ak", codeQueryMessage, "", "topic", "orders", "key", "k")
	c.ExtFields[uniqueKeyQueryField] = "true"
	if got := a.check(c, local, false); got != "" {
		t.Errorf("query with _UNIQUE_KEY_QUERY added after signing: %q", got)
	}
	// Name-server requests on the name-server listener need nothing.
	if got := a.check(req("", codeGetRoute, "", "topic", "x"), local, true); got != "" {
		t.Errorf("route on the name-server listener: %q", got)
	}
	if got := a.check(req("", codeSendMessage, "x", "topic", "x"), local, true); got == "" {
		t.Error("a send on the name-server listener was not checked")
	}
	// A white-listed account's requests from its addresses need no signature.
	c = &remoting.Command{Code: codeSendMessage, ExtFields: map[string]string{"topic": "x", "AccessKey": "trusted-ak"}}
	if got := a.check(c, netip.MustParseAddr("10.1.2.3"), false); got != "" {
		t.Errorf("white-listed account: %q", got)
	}
	if got := a.check(c, local, false); !strings.HasPrefix(got, "Check signature failed") {
		t.Errorf("white-listed account from elsewhere: %q", got)
	}
}

// TestServeACL: a broker serving with an ACL file on loopback refuses an unsigned send with
// code 16 and RocketMQ's message, serves a signed one, answers routes on the name-server
// listener unsigned, drops refused one-way requests, and takes a changed file within the
// reload interval and a broken file not at all.
func TestServeACL(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "acl.yml")
	if err := os.WriteFile(file, []byte(testACL), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.ACLFile, cfg.ACLReloadInterval = file, 20*time.Millisecond
	b := mustOpen(t, cfg)
	defer b.Close()
	if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if st := b.ACL(); st.File != file || st.Accounts != 4 {
		t.Fatalf("ACL status %+v", st)
	}
	ns, addr := b.Addrs()
	dial := func(a string) net.Conn {
		c, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := dial(addr)
	send := func(opaque int32, creds remoting.Credentials) *remoting.Command {
		req := &remoting.Command{Code: codeSendMessage, Opaque: opaque, Body: []byte("hello"),
			ExtFields: map[string]string{"topic": "orders", "queueId": "0"}}
		creds.Sign(req)
		return call(t, c, req)
	}
	producer := remoting.Credentials{AccessKey: "producer-ak", SecretKey: "producer-sk"}
	if r := send(1, remoting.Credentials{}); r.Code != respNoPermission || r.Remark != aclReasonNoAccessKey {
		t.Fatalf("unsigned send: %d %q", r.Code, r.Remark)
	}
	if r := send(2, producer); r.Code != respSuccess {
		t.Fatalf("signed send: %d %q", r.Code, r.Remark)
	}
	// A refused one-way request gets no reply: the next reply on the connection is the
	// next request's.
	c.SetDeadline(time.Now().Add(10 * time.Second))
	ow, _ := remoting.Encode(nil, &remoting.Command{Code: codeUpdateConsumerOff, Opaque: 3, Flag: remoting.FlagOneway,
		ExtFields: map[string]string{"topic": "orders", "consumerGroup": "g", "queueId": "0", "commitOffset": "1"}})
	if _, err := c.Write(ow); err != nil {
		t.Fatal(err)
	}
	if r := send(4, remoting.Credentials{}); r.Opaque != 4 || r.Code != respNoPermission {
		t.Fatalf("after a refused one-way request: opaque %d code %d", r.Opaque, r.Code)
	}
	if _, ok := b.QueryOffset("g", "orders", 0); ok {
		t.Fatal("a refused one-way offset commit was applied")
	}
	route := &remoting.Command{Code: codeGetRoute, Opaque: 5, ExtFields: map[string]string{"topic": "orders"}}
	if r := call(t, dial(ns), route); r.Code != respSuccess {
		t.Fatalf("unsigned route on the name server: %d %q", r.Code, r.Remark)
	}
	if r := call(t, c, route); r.Code != respNoPermission {
		t.Fatalf("unsigned route on the broker listener: %d %q", r.Code, r.Remark)
	}
	if st := b.ACL(); st.Refused != 4 {
		t.Fatalf("refused %d, want 4", st.Refused)
	}

	// The producer account loses PUB: the next send is refused without a restart.
	changed := strings.Replace(testACL, "defaultTopicPerm: PUB", "defaultTopicPerm: SUB", 1)
	if err := os.WriteFile(file, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var r *remoting.Command
	for op := int32(10); time.Now().Before(deadline); op++ {
		if r = send(op, producer); r.Code == respNoPermission {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.Code != respNoPermission || r.Remark != "No default permission for topic:orders" {
		t.Fatalf("after the reload: %d %q", r.Code, r.Remark)
	}
	// A broken file is not taken: the rules in force stay, and ReloadACL says why.
	if err := os.WriteFile(file, []byte("accounts: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.ReloadACL(); !errors.Is(err, ErrACLFile) || !strings.Contains(err.Error(), file) {
		t.Fatalf("reload of a broken file: %v", err)
	}
	if r := send(100, producer); r.Code != respNoPermission || r.Remark != "No default permission for topic:orders" {
		t.Fatalf("after a broken file: %d %q", r.Code, r.Remark)
	}
	if r := send(101, remoting.Credentials{AccessKey: "consumer-ak", SecretKey: "consumer-sk"}); r.Code != respNoPermission {
		t.Fatalf("consumer account after a broken file: %d %q", r.Code, r.Remark)
	}
}

// TestServeACLBadFile: Serve refuses to start with a file that does not parse, naming it.
func TestServeACLBadFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "acl.yml")
	os.WriteFile(file, []byte("accounts:\n  - accessKey: abc\n"), 0o600)
	cfg := testConfig(t)
	cfg.ACLFile = file
	b := mustOpen(t, cfg)
	defer b.Close()
	err := b.Serve("127.0.0.1:0", "127.0.0.1:0")
	if !errors.Is(err, ErrACLFile) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("Serve with a bad file: %v", err)
	}
	cfg2 := testConfig(t)
	cfg2.ACLFile = filepath.Join(t.TempDir(), "missing.yml")
	b2 := mustOpen(t, cfg2)
	defer b2.Close()
	if err := b2.Serve("127.0.0.1:0", "127.0.0.1:0"); !errors.Is(err, ErrACLFile) {
		t.Fatalf("Serve with a missing file: %v", err)
	}
}

// FuzzACLFile: any bytes as the ACL file either fail with an error or give rules whose
// accounts all have keys of the minimum length; a check against them never panics.
func FuzzACLFile(f *testing.F) {
	f.Add([]byte(rocketmqACL))
	f.Add([]byte(testACL))
	f.Add([]byte("globalWhiteRemoteAddresses: ['1050::5:600:300c:{1,2}', 192.168.*.]\n"))
	f.Add([]byte("accounts:\n  - {accessKey: abcdefg, secretKey: abcdefg, groupPerms: [a=SUB|PUB], whiteRemoteAddress: '10.0.0.1,10.0.0.2'}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseACL(data)
		if err != nil {
			return
		}
		for ak, a := range r.accounts {
			if len(ak) < aclMinKeyLen || a.accessKey != ak {
				t.Fatalf("account %q accepted", ak)
			}
		}
		a := &acl{}
		a.rules.Store(r)
		req := &remoting.Command{Code: codePullMessage, ExtFields: map[string]string{"topic": "t", "consumerGroup": "g"}}
		remoting.Credentials{AccessKey: "abcdefg", SecretKey: "abcdefg"}.Sign(req)
		a.check(req, netip.MustParseAddr("10.0.0.1"), false)
		a.check(req, netip.MustParseAddr("1050::5:600:300c:1"), false)
	})
}

// FuzzACLRequest: any frame payload that decodes is checked without panicking; a request
// the ACL lets through names an account of the file (none of testACL's addresses is
// white-listed for 127.0.0.1).
func FuzzACLRequest(f *testing.F) {
	r, err := parseACL([]byte(testACL))
	if err != nil {
		f.Fatal(err)
	}
	a := &acl{}
	a.rules.Store(r)
	seed := func(c *remoting.Command, ak, sk string) {
		if ak != "" {
			remoting.Credentials{AccessKey: ak, SecretKey: sk}.Sign(c)
		}
		for _, st := range []byte{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
			c.SerializeType = st
			p, _ := remoting.Encode(nil, c)
			f.Add(p[4:])
		}
	}
	seed(&remoting.Command{Code: codeSendMessageV2, Body: []byte("x"), ExtFields: map[string]string{"b": "orders", "e": "0"}}, "producer-ak", "producer-sk")
	seed(&remoting.Command{Code: codePullMessage, ExtFields: map[string]string{"topic": "orders", "consumerGroup": "g"}}, "consumer-ak", "consumer-sk")
	seed(&remoting.Command{Code: codeHeartbeat, Body: []byte(`{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"%RETRY%g"}]}]}`)}, "consumer-ak", "consumer-sk")
	seed(&remoting.Command{Code: codeUpdateCreateTopic, ExtFields: map[string]string{"topic": "t"}}, "admin-ak", "admin-sk")
	seed(&remoting.Command{Code: codeSendMessage, ExtFields: map[string]string{"topic": "orders"}}, "", "")
	local := netip.MustParseAddr("127.0.0.1")
	f.Fuzz(func(t *testing.T, payload []byte) {
		req, err := remoting.Decode(payload)
		if err != nil {
			return
		}
		for _, onNamesrv := range []bool{false, true} {
			if a.check(req, local, onNamesrv) == "" && !(onNamesrv && namesrvCodes[req.Code]) &&
				r.accounts[req.ExtFields[remoting.ExtAccessKey]] == nil {
				t.Fatalf("request code %d without an account let through: %v", req.Code, req.ExtFields)
			}
		}
		aclNeeds(req, nil)
	})
}

// TestReplicationWithACL: a master with access control serves a slave that signs with an
// admin account (the log, topics and offsets arrive); a slave with a non-admin account
// gets nothing.
func TestReplicationWithACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "acl.yml")
	if err := os.WriteFile(file, []byte(testACL), 0o600); err != nil {
		t.Fatal(err)
	}
	mcfg := testConfig(t)
	mcfg.ACLFile = file
	m := mustOpen(t, mcfg)
	defer m.Close()
	addr := serve(t, m)
	m.CreateTopic("r", 1)
	appendN(t, m, "r", 0, 0, 20)
	m.CommitOffset("g", "r", 0, 7)

	bad := slaveConfig(t, addr)
	bad.Credentials = remoting.Credentials{AccessKey: "consumer-ak", SecretKey: "consumer-sk"}
	sb := mustOpen(t, bad)
	defer sb.Close()
	serve(t, sb)

	good := slaveConfig(t, addr)
	good.Credentials = remoting.Credentials{AccessKey: "admin-ak", SecretKey: "admin-sk"}
	s := mustOpen(t, good)
	defer s.Close()
	serve(t, s)
	waitCaughtUp(t, m, s)
	readAll(t, s, "r", 0, 20)
	deadline := time.Now().Add(10 * time.Second)
	for o, ok := s.QueryOffset("g", "r", 0); !ok || o != 7; o, ok = s.QueryOffset("g", "r", 0) {
		if time.Now().After(deadline) {
			t.Fatalf("offset not copied: %d %v", o, ok)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if end := sb.Replication().LogEnd; end != 0 {
		t.Fatalf("a slave with a non-admin account copied %d bytes", end)
	}
	if m.ACL().Refused == 0 {
		t.Fatal("the non-admin slave's requests were not refused")
	}
}
