package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func halfMsg(topicName, body string) inMsg {
	return inMsg{topic: topicName, queue: 0, body: []byte(body), bornTS: 1,
		props: EncodeProperties(map[string]string{PropTransactionPrepared: "true", PropProducerGroup: "pg", PropUniqKey: body})}
}

func bodies(t *testing.T, b *Broker, topicName string) []string {
	t.Helper()
	msgs, _, err := b.Pull(context.Background(), topicName, 0, 0, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return out
}

// TestTransactionRecovery: after a crash, open transactions are open again, closed ones
// stay closed, and one whose commit reached the log without its op record is closed by
// recovery (so a late commit cannot deliver it twice).
func TestTransactionRecovery(t *testing.T) {
	cfg := testConfig(t)
	b := mustOpen(t, cfg)
	b.CreateTopic("tx", 1)
	var halves []putResult
	for _, body := range []string{"c0", "c1", "open2", "r3"} {
		res, _, err := b.appendHalf(halfMsg("tx", body))
		if err != nil {
			t.Fatal(err)
		}
		halves = append(halves, res)
	}
	if got := bodies(t, b, "tx"); len(got) != 0 {
		t.Fatalf("prepared messages visible before commit: %v", got)
	}
	end := func(i int, commit bool) error {
		_, err := b.EndTransaction(EndTransaction{ProducerGroup: "pg", HalfQueueOffset: halves[i].queueOffset,
			HalfPhysOffset: halves[i].phys, Commit: commit})
		return err
	}
	if err := end(0, true); err != nil {
		t.Fatal(err)
	}
	if err := end(3, false); err != nil {
		t.Fatal(err)
	}
	// c1: the commit record is in the log, its op record was lost.
	r, err := b.cl.readRecord(halves[1].phys)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.committedMessage(&r)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.appendMsgs([]inMsg{m}); err != nil {
		t.Fatal(err)
	}
	// Mistaken ends are refused.
	if _, err := b.EndTransaction(EndTransaction{ProducerGroup: "other", HalfQueueOffset: halves[2].queueOffset,
		HalfPhysOffset: halves[2].phys, Commit: true}); !errors.Is(err, ErrTxnMismatch) {
		t.Fatalf("wrong producer group: %v", err)
	}
	if _, err := b.EndTransaction(EndTransaction{ProducerGroup: "pg", HalfPhysOffset: 12345, Commit: true}); !errors.Is(err, ErrTxnNotFound) {
		t.Fatalf("unknown offset: %v", err)
	}
	b.Close()
	os.Remove(filepath.Join(cfg.Dir, "checkpoint")) // replay everything, as after a crash

	b = mustOpen(t, cfg)
	defer b.Close()
	if n := b.OpenTransactions(); n != 1 {
		t.Fatalf("%d open transactions after recovery, want 1 (open2)", n)
	}
	for i := range halves {
		if err := end(i, true); err != nil {
			t.Fatalf("late commit of %d: %v", i, err)
		}
	}
	got := bodies(t, b, "tx")
	if len(got) != 3 || got[0] != "c0" || got[1] != "c1" || got[2] != "open2" {
		t.Fatalf("committed messages %v, want [c0 c1 open2]", got)
	}
	msgs, _, _ := b.Pull(context.Background(), "tx", 0, 0, 10, 0)
	for _, m := range msgs {
		if m.SysFlag&sysFlagTxnMask != sysFlagTxnCommit || m.Properties[PropRealTopic] != "" || m.Properties[PropUniqKey] != string(m.Body) {
			t.Fatalf("committed message %q: sysFlag %x properties %v", m.Body, m.SysFlag, m.Properties)
		}
	}
}
