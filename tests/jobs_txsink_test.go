package tests

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"rsql/broker/remoting"
)

// Transactional output (delivery = 'transactional', docs/guarantees.md "Transactional
// output") end to end: the windowed job of jobs_e2e_test.go writes its result topic with
// RocketMQ transactional messages, and the server is killed with SIGKILL while an epoch's
// rows are prepared and not committed. Messages once visible in a topic stay there, so a
// consumer reading the whole topic at the end sees every row that was ever visible: the
// consumed result being exactly the batch result means no row of an epoch that did not
// commit was ever visible, and no committed row is missing or doubled.

// txDDL is jobsDDL with the result topic written transactionally, in epochs of a fixed
// second: the kills must land while an epoch's rows are prepared and not yet committed,
// which adaptive checkpoints (a few milliseconds apart when commits are cheap) make a
// window too short to observe.
var txDDL = strings.Replace(jobsDDL, "CREATE STREAM result WITH (queues = 4)",
	"CREATE STREAM result WITH (queues = 4, delivery = 'transactional', checkpoint_interval = '1s')", 1)

// topicEnd returns the sum over a topic's queues of their end offset (GET_TOPIC_STATS_INFO
// to the broker at addr), 0 for a topic that does not exist.
func topicEnd(addr, topic string) (int64, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r, err := remoting.RoundTrip(c, &remoting.Command{Code: 202, Opaque: 1, ExtFields: map[string]string{"topic": topic}}, 64<<20)
	if err != nil {
		return 0, err
	}
	if r.Code == 17 {
		return 0, nil
	}
	if r.Code != 0 {
		return 0, fmt.Errorf("topic stats of %s: code %d %s", topic, r.Code, r.Remark)
	}
	var n int64
	for _, f := range strings.Split(string(r.Body), `"maxOffset":`)[1:] {
		var v int64
		if _, err := fmt.Sscan(strings.TrimRight(strings.SplitN(f, ",", 2)[0], "}"), &v); err != nil {
			return 0, fmt.Errorf("topic stats of %s: %v in %s", topic, err, r.Body)
		}
		n += v
	}
	return n, nil
}

// openPrepared returns the prepared messages ever stored (the half topic's end) minus the
// rows committed to the result topic.
func openPrepared(t *testing.T, brokerAddr string) (int64, error) {
	half, err := topicEnd(brokerAddr, "RMQ_SYS_TRANS_HALF_TOPIC")
	if err != nil {
		return 0, err
	}
	out, err := topicEnd(brokerAddr, "result")
	return half - out, err
}

// runTxKill9 runs the job over s, whose broker listens at brokerAddr, producing the input
// in three chunks and killing the server after each once rows of the running epoch are
// prepared and not committed (more prepared than committed than when the run started).
func runTxKill9(t *testing.T, s *jobsServer, brokerAddr string, seed int64) {
	evs := genEvents(seed)
	want, lastEnd := batchResult(evs)
	s.sql(txDDL)
	third := len(evs) / 3
	chunks := [][]event{evs[:third], evs[third : 2*third], evs[2*third:]}
	for i, c := range chunks {
		before, err := openPrepared(t, brokerAddr)
		if err != nil {
			t.Fatal(err)
		}
		produceEvents(t, s.ns, c)
		deadline := time.Now().Add(60 * time.Second)
		for {
			n, err := openPrepared(t, brokerAddr)
			if err == nil && n > before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("chunk %d: no prepared row waiting for its commit within 60 s (%d, %v; %d at the start)\nserver stderr:\n%s",
					i+1, n, err, before, s.p.Stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("kill -9 #%d after producing chunk %d, with an epoch's rows prepared", i+1, i+1)
		s.p.Kill()
		s.start()
	}
	waitWindowsClosed(t, s, lastEnd)
	got := consumedResult(t, s.ns)
	compareMultisets(t, "result topic after 3 kills mid-epoch", want, got)
	// Every result row went through the half topic, and the kills left prepared rows that
	// were never committed (the outbox would leave the half topic empty).
	half, err := topicEnd(brokerAddr, "RMQ_SYS_TRANS_HALF_TOPIC")
	if err != nil {
		t.Fatal(err)
	}
	if half <= int64(len(got)) {
		t.Errorf("%d prepared messages for %d result rows: the kills left no uncommitted epoch behind", half, len(got))
	}
	if t.Failed() {
		t.Logf("server stderr:\n%s", s.p.Stderr.String())
	}
}

// TestTransactionalSinkSurvivesKill9: the server with its bundled broker, which the kill
// takes down too; on restart the job commits the epochs its checkpoints recorded and the
// broker rolls back the dead run's other prepared messages before the job reads anything.
func TestTransactionalSinkSurvivesKill9(t *testing.T) {
	s := newJobsServer(t)
	runTxKill9(t, s, s.br, 59)
}

// TestTransactionalSinkOverProtocolSurvivesKill9: the server on another `rsql broker`
// (--namesrv), which stays up across the kills: prepared messages of the dead run stay
// open until the broker checks them back with the restarted server, which rolls them back.
func TestTransactionalSinkOverProtocolSurvivesKill9(t *testing.T) {
	b := startBroker(t, "--transaction-timeout", "1s", "--transaction-check-interval", "1s")
	s := &jobsServer{t: t, dir: t.TempDir(), pg: freePort(t), ns: b.NS, http: freePort(t), external: b.NS}
	s.start()
	runTxKill9(t, s, b.Addr, 61)
}
