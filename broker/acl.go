package broker

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rsql/broker/remoting"
)

// Broker access control: RocketMQ's plain ACL (docs/security.md, "Broker access control").
// With Config.ACLFile set, every request a client sends over the network is checked before
// it is handled, as RocketMQ's PlainPermissionManager checks it:
//
//  1. a remote address in globalWhiteRemoteAddresses is served without any check;
//  2. the request must name an account (extField AccessKey) of the file;
//  3. a remote address in that account's whiteRemoteAddress is served without more checks;
//  4. the Signature must be the account's signature of the request (remoting.Credentials);
//  5. an admin account may do everything; the others may not send admin codes, and need
//     the permission each request code asks for on its topics and groups (aclNeeds).
//
// A refused request is answered NO_PERMISSION (16) with RocketMQ's message and not handled;
// a refused one-way request is dropped. The name server's requests (routes, cluster and
// topic lists) are not checked when they arrive on the name-server listener, as RocketMQ's
// name server does not check them; on the broker listener they are. Requests made through
// the in-process API are never checked: they do not cross a socket.
//
// Concurrency: the rules are an immutable *aclRules swapped atomically by reloads (the
// watcher goroutine, or ReloadACL); checks run on the connections' goroutines and never
// lock.

// aclReasonNoAccessKey and its siblings are RocketMQ's refusal messages.
const aclReasonNoAccessKey = "No accessKey is configured"

// namesrvCodes are the name server's requests, unchecked on the name-server listener.
var namesrvCodes = map[int16]bool{codeGetRoute: true, codeGetClusterInfo: true, codeGetAllTopics: true,
	codeGetTopicsByCluster: true, codeGetSystemTopics: true, codeDeleteTopicNamesrv: true}

// adminCodes need an admin account: RocketMQ's (create or update a topic or a subscription
// group, delete them, update the broker's configuration) and replication's copy of the
// whole commit log.
var adminCodes = map[int16]bool{codeUpdateCreateTopic: true, codeUpdateBrokerConfig: true, codeDeleteTopicBroker: true,
	codeUpdateSubGroup: true, codeDeleteSubGroup: true, codeReplFetch: true}

// codeUpdateBrokerConfig is RocketMQ's UPDATE_BROKER_CONFIG; the broker does not serve it,
// but an ACL refuses it from non-admins before that.
const codeUpdateBrokerConfig = 25

// retryPrefix starts a consumer group's retry topic; the ACL checks it as the group.
const retryPrefix = "%RETRY%"

// uniqueKeyQueryField is left out of the signed content by RocketMQ's broker (its Java
// client adds it after signing).
const uniqueKeyQueryField = "_UNIQUE_KEY_QUERY"

// aclNeed is one permission a request needs: on a topic, or on a consumer group.
type aclNeed struct {
	group bool
	name  string
	perm  perm
}

func (n aclNeed) String() string {
	if n.group {
		return "group:" + n.name
	}
	return "topic:" + n.name
}

// acl is a broker's access control: the file it reads and the rules in force.
type acl struct {
	fs       storeFS
	path     string
	interval time.Duration
	log      *slog.Logger
	rules    atomic.Pointer[aclRules]

	mu   sync.Mutex // serialises reloads; guards sum and stat
	sum  [32]byte   // SHA-256 of the file the rules came from
	stat fileStamp  // the file when last read

	refused    atomic.Int64
	lastLog    atomic.Int64 // unix nanos of the last refusal logged
	suppressed atomic.Int64 // refusals not logged since
}

// fileStamp is what the watcher compares to notice a change without reading the file.
type fileStamp struct {
	mod  time.Time
	size int64
}

// openACL reads path; the error names what is wrong and where.
func openACL(fs storeFS, path string, interval time.Duration, log *slog.Logger) (*acl, error) {
	a := &acl{fs: fs, path: path, interval: interval, log: log}
	if _, err := a.reload(true); err != nil {
		return nil, err
	}
	return a, nil
}

// reload reads the file again (only when its size or time changed, unless force) and swaps
// the rules in when it parses. It reports whether new rules took effect.
func (a *acl) reload(force bool) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, err := a.fs.Stat(a.path)
	if err != nil {
		return false, fmt.Errorf("%w %s: %v", ErrACLFile, a.path, err)
	}
	stamp := fileStamp{st.ModTime(), st.Size()}
	if !force && stamp == a.stat {
		return false, nil
	}
	a.stat = stamp
	data, err := a.fs.ReadFile(a.path)
	if err != nil {
		return false, fmt.Errorf("%w %s: %v", ErrACLFile, a.path, err)
	}
	sum := sha256.Sum256(data)
	if a.rules.Load() != nil && sum == a.sum {
		return false, nil
	}
	r, err := parseACL(data)
	if err != nil {
		return false, fmt.Errorf("%w %s: %v", ErrACLFile, a.path, err)
	}
	a.sum = sum
	a.rules.Store(r)
	return true, nil
}

// watch reloads the file when it changes, every interval, until done closes. A file that
// does not parse is logged and the rules in force stay.
func (a *acl) watch(done <-chan struct{}) {
	if a.interval <= 0 {
		return
	}
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		a.reloadAndLog(false)
	}
}

// reloadAndLog reloads and logs the outcome.
func (a *acl) reloadAndLog(force bool) error {
	changed, err := a.reload(force)
	switch {
	case err != nil:
		a.log.Error("ACL file not reloaded; the previous rules stay in force", "err", err)
	case changed:
		a.log.Info("ACL file reloaded", "file", a.path, "accounts", len(a.rules.Load().accounts))
	}
	return err
}

// check returns "" when req may be handled, else why not (RocketMQ's message). remote is
// the peer's address; onNamesrv says the request came to the name-server listener.
func (a *acl) check(req *remoting.Command, remote netip.Addr, onNamesrv bool) string {
	if onNamesrv && namesrvCodes[req.Code] {
		return ""
	}
	r := a.rules.Load()
	for _, p := range r.global {
		if p.match(remote) {
			return ""
		}
	}
	ak := req.ExtFields[remoting.ExtAccessKey]
	if ak == "" {
		return aclReasonNoAccessKey
	}
	acct := r.accounts[ak]
	if acct == nil {
		return "No acl config for " + ak
	}
	if acct.white != nil && acct.white.match(remote) {
		return ""
	}
	if !acct.verify(req) {
		return "Check signature failed for accessKey=" + ak
	}
	if acct.admin {
		return ""
	}
	if adminCodes[req.Code] {
		return fmt.Sprintf("Need admin permission for request code=%d, but accessKey=%s is not", req.Code, ak)
	}
	var arr [4]aclNeed
	needs, err := aclNeeds(req, arr[:0])
	if err != nil {
		return err.Error()
	}
	for _, n := range needs {
		owned, explicit := acct.topics[n.name]
		def := acct.defTopic
		if n.group {
			owned, explicit = acct.groups[n.name]
			def = acct.defGroup
		}
		if !explicit {
			if !def.allows(n.perm) {
				return "No default permission for " + n.String()
			}
			continue
		}
		if !owned.allows(n.perm) {
			return "No permission for " + n.String()
		}
	}
	return ""
}

// verify checks req's Signature with the account's secret key. The content is every
// extField but Signature and _UNIQUE_KEY_QUERY (what RocketMQ's broker signs). The official
// Go client signs every extField but SecurityToken instead; that form is accepted too.
func (acct *aclAccount) verify(req *remoting.Command) bool {
	sig := req.ExtFields[remoting.ExtSignature]
	if sig == "" {
		return false
	}
	m := acct.macs.Get().(*aclMAC)
	defer acct.macs.Put(m)
	if m.matches(req, sig, func(k string) bool { return k == uniqueKeyQueryField }) {
		return true
	}
	_, token := req.ExtFields[remoting.ExtSecurityToken]
	_, unique := req.ExtFields[uniqueKeyQueryField]
	return (token || unique) && m.matches(req, sig, func(k string) bool { return k == remoting.ExtSecurityToken })
}

// matches computes the signature of req's content without the fields skip names and
// compares it with sig in constant time.
func (m *aclMAC) matches(req *remoting.Command, sig string, skip func(string) bool) bool {
	m.content = remoting.AppendContent(m.content[:0], req.ExtFields, skip)
	m.mac.Reset()
	m.mac.Write(m.content)
	m.mac.Write(req.Body)
	base64.StdEncoding.Encode(m.b64[:], m.mac.Sum(m.sum[:0]))
	return len(sig) == len(m.b64) && subtle.ConstantTimeCompare(m.b64[:], []byte(sig)) == 1
}

// aclNeeds appends what req needs, per request code, as RocketMQ's PlainAccessResource
// maps them (docs/security.md lists them). A topic named %RETRY%<group> is the group's.
func aclNeeds(req *remoting.Command, dst []aclNeed) ([]aclNeed, error) {
	ext := req.ExtFields
	topic := func(name string, p perm) {
		if g, ok := strings.CutPrefix(name, retryPrefix); ok {
			dst = append(dst, aclNeed{group: true, name: g, perm: permSub})
		} else if name != "" {
			dst = append(dst, aclNeed{name: name, perm: p})
		}
	}
	group := func(name string) {
		if name != "" {
			dst = append(dst, aclNeed{group: true, name: name, perm: permSub})
		}
	}
	switch req.Code {
	case codeSendMessage, codeSendReply:
		topic(ext["topic"], permPub)
	case codeSendMessageV2, codeSendBatch:
		topic(ext[sendFields["topic"]], permPub)
	case codeSendMsgBack:
		group(ext["group"])
		topic(ext["originTopic"], permPub)
	case codePullMessage, codeQueryConsumerOff, codeUpdateConsumerOff:
		topic(ext["topic"], permSub)
		group(ext["consumerGroup"])
	case codeQueryMessage:
		topic(ext["topic"], permSub)
	case codeUnregisterClient, codeGetConsumerList:
		group(ext["consumerGroup"])
	case codeHeartbeat:
		var hb struct {
			ConsumerDataSet []struct {
				GroupName           string `json:"groupName"`
				SubscriptionDataSet []struct {
					Topic string `json:"topic"`
				} `json:"subscriptionDataSet"`
			} `json:"consumerDataSet"`
		}
		if !bytes.Contains(req.Body, []byte("consumerDataSet")) {
			break // a producer's heartbeat names no resource
		}
		if err := json.Unmarshal(req.Body, &hb); err != nil {
			return nil, fmt.Errorf("heartbeat body is not valid JSON: %v", err)
		}
		for _, cd := range hb.ConsumerDataSet {
			group(cd.GroupName)
			for _, sd := range cd.SubscriptionDataSet {
				topic(sd.Topic, permSub)
			}
		}
	}
	return dst, nil
}

// refusal answers a refused request and logs it (at most once a second, with the count of
// those not logged since).
func (a *acl) refusal(req *remoting.Command, remote netip.Addr, reason string) *remoting.Command {
	a.refused.Add(1)
	now := time.Now().UnixNano()
	last := a.lastLog.Load()
	if now-last >= int64(time.Second) && a.lastLog.CompareAndSwap(last, now) {
		a.log.Warn("request refused by the ACL", "remote", remote.String(), "code", req.Code,
			"reason", reason, "refused_unlogged", a.suppressed.Swap(0))
	} else {
		a.suppressed.Add(1)
	}
	if req.Flag&remoting.FlagOneway != 0 {
		return nil
	}
	return req.Reply(respNoPermission, reason)
}

// signed signs a request this broker sends to another with Config.Credentials.
func (b *Broker) signed(cmd *remoting.Command) *remoting.Command {
	b.cfg.Credentials.Sign(cmd)
	return cmd
}

// ACLStatus describes a serving broker's access control.
type ACLStatus struct {
	File     string // "" when access control is off
	Accounts int    // accounts in force
	Refused  int64  // requests refused since Serve
}

// ACL returns the state of access control (off before Serve or without Config.ACLFile).
func (b *Broker) ACL() ACLStatus {
	if b.net == nil || b.net.acl == nil {
		return ACLStatus{}
	}
	a := b.net.acl
	return ACLStatus{File: a.path, Accounts: len(a.rules.Load().accounts), Refused: a.refused.Load()}
}

// ReloadACL reads Config.ACLFile again now (what SIGHUP does in `rsql broker` and `rsql
// server`). When it does not parse, the rules in force stay and the error says why.
func (b *Broker) ReloadACL() error {
	if b.net == nil || b.net.acl == nil {
		return fmt.Errorf("%w: access control is off (no ACL file)", ErrACLFile)
	}
	return b.net.acl.reloadAndLog(true)
}
