package tests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"rsql/broker/remoting"
)

// Broker access control (docs/security.md, "Broker access control"), end to end: `rsql
// broker --acl-file` with RocketMQ's plain_acl.yml, the official Go client signing with
// primitive.Credentials (or not), and the engine and `rsql produce/consume` signing with
// their configured credentials.

const aclFileText = `accounts:
  - accessKey: admin-key-1
    secretKey: admin-secret-1
    admin: true
  - accessKey: app-key-01
    secretKey: app-secret-01
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - orders=PUB|SUB
      - closed=DENY
    groupPerms:
      - app-group=SUB
  - accessKey: reader-key
    secretKey: reader-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
`

var (
	adminCreds  = primitive.Credentials{AccessKey: "admin-key-1", SecretKey: "admin-secret-1"}
	appCreds    = primitive.Credentials{AccessKey: "app-key-01", SecretKey: "app-secret-01"}
	readerCreds = primitive.Credentials{AccessKey: "reader-key", SecretKey: "reader-secret"}
)

// startACLBroker runs `rsql broker --acl-file` with text as the file; it returns the broker
// and the file's path.
func startACLBroker(t *testing.T, text string) (*rsqlBroker, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return startBroker(t, "--acl-file", file), file
}

// createTopicAs creates a topic with UPDATE_AND_CREATE_TOPIC signed with creds (zero:
// unsigned) and returns the refusal as an error. (rocketmq-client-go's admin CreateTopic
// neither signs this request nor reads its answer.)
func createTopicAs(t *testing.T, b *rsqlBroker, creds primitive.Credentials, topic string, queues int) error {
	t.Helper()
	c, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	req := &remoting.Command{Code: 17, Language: "GO", Version: 479, Opaque: 1, ExtFields: map[string]string{
		"topic": topic, "readQueueNums": strconv.Itoa(queues), "writeQueueNums": strconv.Itoa(queues), "perm": "6"}}
	remoting.Credentials{AccessKey: creds.AccessKey, SecretKey: creds.SecretKey}.Sign(req)
	resp, err := remoting.RoundTrip(c, req, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != 0 {
		return fmt.Errorf("CODE: %d  DESC: %s", resp.Code, resp.Remark)
	}
	return nil
}

// sendAs sends one message to topic with a producer signing with creds (unsigned when
// zero) and returns the send's error.
func sendAs(t *testing.T, b *rsqlBroker, creds primitive.Credentials, topic, body string) error {
	t.Helper()
	p := newProducer(t, b, producer.WithCredentials(creds), producer.WithRetry(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
	p.Shutdown()
	return err
}

// wantRefused fails unless err is RocketMQ's NO_PERMISSION (16) with the given message.
func wantRefused(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "16") || !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: error %v, want code 16 with %q", what, err, msg)
	}
}

// TestBrokerACLRefusesUnsignedAndWrongSecret: an unsigned official client is refused
// with the no-permission code and RocketMQ's message, sending and pulling; so is one
// signing with a wrong secret key, or an unknown access key; topic creation needs an admin
// account.
func TestBrokerACLRefusesUnsignedAndWrongSecret(t *testing.T) {
	b, _ := startACLBroker(t, aclFileText)
	err := createTopicAs(t, b, appCreds, "orders", 2)
	wantRefused(t, "topic creation by a non-admin", err, "Need admin permission for request code=17, but accessKey=app-key-01 is not")
	wantRefused(t, "unsigned topic creation", createTopicAs(t, b, primitive.Credentials{}, "orders", 2), "No accessKey is configured")
	if err := createTopicAs(t, b, adminCreds, "orders", 2); err != nil {
		t.Fatal(err)
	}

	wantRefused(t, "unsigned send", sendAs(t, b, primitive.Credentials{}, "orders", "x"), "CODE: 16, DESC: No accessKey is configured")
	wantRefused(t, "wrong secret", sendAs(t, b, primitive.Credentials{AccessKey: "app-key-01", SecretKey: "not-the-secret"}, "orders", "x"),
		"Check signature failed for accessKey=app-key-01")
	wantRefused(t, "unknown account", sendAs(t, b, primitive.Credentials{AccessKey: "nobody-key", SecretKey: "whatever-secret"}, "orders", "x"),
		"No acl config for nobody-key")

	// The name server answers routes unsigned (as RocketMQ's does); the pull itself, at
	// the broker, is refused.
	mqs := queuesOf(t, b, "orders")
	pc := newPullConsumer(t, b, "app-group")
	if err := pc.Subscribe("orders", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = pc.PullFrom(ctx, mqs[0], 0, 32)
	wantRefused(t, "unsigned pull", err, "No accessKey is configured")
}

// TestBrokerACLSignedClients: signed producers and consumers are served within their
// permissions: the app account produces to and consumes orders as app-group; a DENY topic,
// a topic outside its grants, a group outside its grants and a send by an account with SUB
// only are refused.
func TestBrokerACLSignedClients(t *testing.T) {
	b, _ := startACLBroker(t, aclFileText)
	if err := createTopicAs(t, b, adminCreds, "orders", 2); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, b, producer.WithCredentials(appCreds))
	const n = 40
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := p.SendSync(ctx, primitive.NewMessage("orders", []byte(fmt.Sprintf("m%02d", i))))
		cancel()
		if err != nil {
			t.Fatalf("signed send %d: %v", i, err)
		}
	}
	wantRefused(t, "send to a DENY topic", sendAs(t, b, appCreds, "closed", "x"), "No permission for topic:closed")
	wantRefused(t, "send outside the grants", sendAs(t, b, appCreds, "other", "x"), "No default permission for topic:other")
	wantRefused(t, "send with SUB only", sendAs(t, b, readerCreds, "orders", "x"), "No default permission for topic:orders")

	// A signed push consumer of app-group receives everything (heartbeats, pulls, offset
	// commits and its retry topic all pass the checks).
	var mu sync.Mutex
	got := map[string]bool{}
	c := newPushConsumer(t, b, "app-group", consumer.WithCredentials(appCreds))
	err := c.Subscribe("orders", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)] = true
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	if !waitFor(60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == n }) {
		mu.Lock()
		t.Fatalf("signed consumer received %d of %d", len(got), n)
	}

	// The app account may not pull as another group; the reader account may (SUB on every
	// topic and group by default).
	mqs := queuesOf(t, b, "orders")
	pull := func(creds primitive.Credentials, group string) error {
		pc, err := rocketmq.NewPullConsumer(consumer.WithNsResolver(b.resolver()), consumer.WithGroupName(group),
			consumer.WithInstance(uniq("pull")), consumer.WithCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		if err := pc.Subscribe("orders", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
			t.Fatal(err)
		}
		if err := pc.Start(); err != nil {
			t.Fatal(err)
		}
		defer pc.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := pc.PullFrom(ctx, mqs[0], 0, 64)
		if err == nil && (res.Status != primitive.PullFound || len(res.GetMessageExts()) == 0) {
			t.Fatalf("pull as %s: status %v, %d messages", group, res.Status, len(res.GetMessageExts()))
		}
		return err
	}
	wantRefused(t, "pull as another group", pull(appCreds, "other-group"), "No default permission for group:other-group")
	if err := pull(readerCreds, "reader-group"); err != nil {
		t.Fatalf("reader pull: %v", err)
	}
}

// TestBrokerACLReload: a changed file takes effect without a restart; a broken one is
// refused (logged) and the rules in force stay; SIGHUP reloads at once.
func TestBrokerACLReload(t *testing.T) {
	b, file := startACLBroker(t, aclFileText)
	wantRefused(t, "reader send before the change", sendAs(t, b, readerCreds, "orders", "x"), "No default permission for topic:orders")
	granted := strings.Replace(aclFileText, "    defaultTopicPerm: SUB\n", "    defaultTopicPerm: PUB|SUB\n", 1)
	if err := os.WriteFile(file, []byte(granted), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if !waitFor(15*time.Second, func() bool { err = sendAs(t, b, readerCreds, "orders", "x"); return err == nil }) {
		t.Fatalf("reader send after granting PUB: %v\n%s", err, b.p.Stderr.String())
	}
	if !strings.Contains(b.p.Stderr.String(), "ACL file reloaded") {
		t.Fatalf("no reload logged:\n%s", b.p.Stderr.String())
	}

	// A broken file: logged once by the watcher, once more on SIGHUP; the grant stays.
	if err := os.WriteFile(file, []byte("accounts:\n  - accessKey: reader-key\n    secretKey: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notReloaded := func() int { return strings.Count(b.p.Stderr.String(), "ACL file not reloaded") }
	if !waitFor(15*time.Second, func() bool { return notReloaded() == 1 }) {
		t.Fatalf("broken file not reported:\n%s", b.p.Stderr.String())
	}
	if err := syscall.Kill(b.p.Cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !waitFor(15*time.Second, func() bool { return notReloaded() == 2 }) {
		t.Fatalf("SIGHUP did not reload:\n%s", b.p.Stderr.String())
	}
	if err := sendAs(t, b, readerCreds, "orders", "y"); err != nil {
		t.Fatalf("reader send with the broken file in place: %v", err)
	}

	// SIGHUP takes a fixed file at once (the watcher would too; either shows in the log).
	if err := os.WriteFile(file, []byte(aclFileText), 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(b.p.Cmd.Process.Pid, syscall.SIGHUP)
	if !waitFor(15*time.Second, func() bool {
		err = sendAs(t, b, readerCreds, "orders", "z")
		return err != nil
	}) {
		t.Fatal("the reader's grant survived the restored file")
	}
	wantRefused(t, "reader send after the restore", err, "No default permission for topic:orders")
	select {
	case <-b.p.done:
		t.Fatalf("the broker exited on SIGHUP: %v", b.p.err)
	default:
	}
}

// runRsqlEnv runs the rsql binary with extra environment variables.
func runRsqlEnv(t *testing.T, env []string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(buildRsql(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, strings.NewReader(stdin)
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// TestEngineJobOverACLBroker: `rsql server --namesrv` with credentials (environment)
// creates its topics and runs a job on a broker with access control; `rsql produce` and
// `rsql consume` sign with theirs; without credentials they are refused. No secret shows
// in any output.
func TestEngineJobOverACLBroker(t *testing.T) {
	acl := aclFileText + `  - accessKey: engine-key
    secretKey: engine-secret-1
    admin: true
  - accessKey: io-key-01
    secretKey: io-secret-01
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [acl_in=PUB, acl_out=SUB, acl_tx=SUB]
    groupPerms: [rsql-consume=SUB]
`
	b, _ := startACLBroker(t, acl)
	engineEnv := []string{"RSQL_ACCESS_KEY=engine-key", "RSQL_SECRET_KEY=engine-secret-1"}
	ioEnv := []string{"RSQL_ACCESS_KEY=io-key-01", "RSQL_SECRET_KEY=io-secret-01"}

	pg, httpAddr := freePort(t), freePort(t)
	cmd := exec.Command(buildRsql(t), "server", "--data-dir", t.TempDir(), "--pg-addr", pg, "--http-addr", httpAddr,
		"--namesrv", b.NS)
	cmd.Env = append(os.Environ(), engineEnv...)
	srv := &proc{Cmd: cmd, Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = srv.Stdout, srv.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { srv.err = cmd.Wait(); close(srv.done) }()
	t.Cleanup(srv.Kill)
	waitListening(t, srv, pg)

	ddl := `CREATE STREAM acl_in (id BIGINT, v VARCHAR) WITH (topic = 'acl_in', queues = 2);
CREATE STREAM acl_out WITH (topic = 'acl_out', queues = 2) AS SELECT id, UPPER(v) AS v FROM acl_in WHERE id % 2 = 0;
CREATE STREAM acl_tx WITH (topic = 'acl_tx', queues = 2, delivery = 'transactional') AS SELECT id, v FROM acl_in WHERE id % 2 = 1;`
	if out, errOut, err := runRsql(t, "", "--server", pg, "-c", ddl); err != nil {
		t.Fatalf("DDL: %v\n%s\n%s\nserver:\n%s", err, out, errOut, srv.Stderr.String())
	}

	var in strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&in, `{"id": %d, "v": "row%d"}`+"\n", i, i)
	}
	_, errOut, err := runRsqlEnv(t, nil, in.String(), "produce", "acl_in", "--namesrv", b.NS)
	if err == nil || !strings.Contains(errOut, "No accessKey is configured") {
		t.Fatalf("unsigned rsql produce: %v\n%s", err, errOut)
	}
	if _, errOut, err := runRsqlEnv(t, ioEnv, in.String(), "produce", "acl_in", "--namesrv", b.NS); err != nil {
		t.Fatalf("signed rsql produce: %v\n%s", err, errOut)
	}
	_, errOut, err = runRsqlEnv(t, nil, "", "consume", "acl_out", "--from-beginning", "--max", "10", "--namesrv", b.NS)
	if err == nil || !strings.Contains(errOut, "No accessKey is configured") {
		t.Fatalf("unsigned rsql consume: %v\n%s", err, errOut)
	}
	out, errOut, err := runRsqlEnv(t, ioEnv, "", "consume", "acl_out", "--from-beginning", "--max", "10", "--namesrv", b.NS)
	if err != nil {
		t.Fatalf("signed rsql consume: %v\n%s\nserver:\n%s", err, errOut, srv.Stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines = append(lines, strings.ReplaceAll(l, " ", ""))
	}
	sort.Strings(lines)
	var want []string
	for i := 0; i < 20; i += 2 {
		want = append(want, fmt.Sprintf(`{"id":%d,"v":"ROW%d"}`, i, i))
	}
	sort.Strings(want)
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("acl_out:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// The transactional output signs its own requests too (registration, commits).
	out, errOut, err = runRsqlEnv(t, ioEnv, "", "consume", "acl_tx", "--from-beginning", "--max", "10", "--idle-exit", "20s", "--namesrv", b.NS)
	if err != nil {
		t.Fatalf("signed rsql consume of the transactional output: %v\n%s\nserver:\n%s", err, errOut, srv.Stderr.String())
	}
	lines = nil
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines = append(lines, strings.ReplaceAll(l, " ", ""))
	}
	sort.Strings(lines)
	want = nil
	for i := 1; i < 20; i += 2 {
		want = append(want, fmt.Sprintf(`{"id":%d,"v":"row%d"}`, i, i))
	}
	sort.Strings(want)
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("acl_tx:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, secret := range []string{"engine-secret-1", "io-secret-01"} {
		if strings.Contains(srv.Stderr.String()+srv.Stdout.String()+errOut+b.p.Stderr.String(), secret) {
			t.Fatalf("the secret %q shows in an output", secret)
		}
	}
}

// TestServerACLFile: `rsql server --acl-file` protects its bundled broker: its banner says
// so, an unsigned RocketMQ client is refused and a signed one reads what the engine wrote
// through the in-process API (which no ACL checks).
func TestServerACLFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte(aclFileText), 0o600); err != nil {
		t.Fatal(err)
	}
	pg, ns, br := freePort(t), freePort(t), freePort(t)
	p := startProc(t, buildRsql(t), "server", "--data-dir", t.TempDir(), "--pg-addr", pg, "--namesrv-addr", ns,
		"--broker-addr", br, "--http-addr", freePort(t), "--acl-file", file)
	waitListening(t, p, pg)
	waitListening(t, p, br)
	// The banner is written once every listener is up; the ports may answer a moment
	// before it reaches the captured stderr.
	if !waitFor(10*time.Second, func() bool { return strings.Contains(p.Stderr.String(), "broker ACL      "+file+" (3 accounts;") }) {
		t.Fatalf("banner:\n%s", p.Stderr.String())
	}
	sql := `CREATE STREAM orders (id BIGINT, v VARCHAR) WITH (topic = 'orders', queues = 1);
INSERT INTO orders VALUES (1, 'a'), (2, 'b');`
	if out, errOut, err := runRsql(t, "", "--server", pg, "-c", sql); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	b := &rsqlBroker{p: p, NS: ns, Addr: br, t: t}
	wantRefused(t, "unsigned send to rsql server", sendAs(t, b, primitive.Credentials{}, "orders", "x"), "No accessKey is configured")
	pc, err := rocketmq.NewPullConsumer(consumer.WithNsResolver(b.resolver()), consumer.WithGroupName("app-group"),
		consumer.WithInstance(uniq("pull")), consumer.WithCredentials(appCreds))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe("orders", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	msgs := pullQueue(t, pc, queuesOf(t, b, "orders")[0])
	if len(msgs) != 2 || !strings.Contains(string(msgs[0].Body), `"a"`) || !strings.Contains(string(msgs[1].Body), `"b"`) {
		t.Fatalf("read %d messages", len(msgs))
	}
}
