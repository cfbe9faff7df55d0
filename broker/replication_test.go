package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

func serve(t *testing.T, b *Broker) string {
	t.Helper()
	if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	_, addr := b.Addrs()
	return addr
}

func slaveConfig(t *testing.T, master string) Config {
	cfg := testConfig(t)
	cfg.Role, cfg.MasterAddr = RoleSlave, master
	return cfg
}

func waitCaughtUp(t *testing.T, master, slave *Broker) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for slave.Replication().LogEnd != master.cl.committed.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("slave log ends at %d, master at %d", slave.Replication().LogEnd, master.cl.committed.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicationCopiesLogAndQueues: a slave's commit log becomes byte-identical to its
// master's across segments, its queues serve the same messages, topics and offsets are
// copied, it refuses writes, and it keeps up with appends made while it runs.
func TestReplicationCopiesLogAndQueues(t *testing.T) {
	m := mustOpen(t, testConfig(t))
	defer m.Close()
	addr := serve(t, m)
	m.CreateTopic("r", 3)
	m.CreateTopic("one", 1)
	for q := 0; q < 3; q++ {
		appendN(t, m, "r", q, 0, 300) // several 64 KiB segments
	}
	s := mustOpen(t, slaveConfig(t, addr))
	defer s.Close()
	serve(t, s)
	appendN(t, m, "r", 0, 300, 50) // while the slave catches up
	m.CommitOffset("g", "r", 1, 42)
	waitCaughtUp(t, m, s)
	if len(s.cl.segs) < 3 {
		t.Fatalf("the slave has %d segments", len(s.cl.segs))
	}
	for off := m.cl.minOffset(); off < m.cl.committed.Load(); off += s.cl.segSize {
		n := min(s.cl.segSize-off%s.cl.segSize, m.cl.committed.Load()-off)
		a, err1 := m.cl.read(nil, off, int(n))
		b, err2 := s.cl.read(nil, off, int(n))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Fatalf("logs differ in the segment at %d: %v %v", off, err1, err2)
		}
	}
	readAll(t, s, "r", 0, 350)
	readAll(t, s, "r", 1, 300)
	readAll(t, s, "r", 2, 300)
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, ok := s.QueryOffset("g", "r", 1)
		ti, _ := s.Topic("one")
		if ok && o == 42 && ti.Queues == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsets/topics not copied: offset %d %v, topic %+v", o, ok, ti)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.Append("r", 0, []Message{{Body: []byte("x")}}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append on a slave: %v", err)
	}
	if st := m.Replication(); len(st.Slaves) != 1 || st.SlaveAcked != m.cl.committed.Load() {
		t.Fatalf("master's view: %+v", st)
	}
}

// TestSyncReplication: with sync replication, an append returns only when a slave has it
// (and says so when no slave is connected: the message is still stored).
func TestSyncReplication(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replication, cfg.ReplicationTimeout = ReplicationSync, 2*time.Second
	m := mustOpen(t, cfg)
	defer m.Close()
	addr := serve(t, m)
	m.CreateTopic("s", 1)
	if _, err := m.Append("s", 0, []Message{{Body: []byte("alone")}}); !errors.Is(err, ErrSlaveNotAvailable) {
		t.Fatalf("append without a slave: %v", err)
	}
	s := mustOpen(t, slaveConfig(t, addr))
	defer s.Close()
	serve(t, s)
	waitCaughtUp(t, m, s)
	for i := 0; i < 50; i++ {
		if _, err := m.Append("s", 0, []Message{{Body: []byte{byte(i)}}}); err != nil {
			t.Fatal(err)
		}
		if got, want := s.cl.committed.Load(), m.cl.committed.Load(); got < want {
			t.Fatalf("append %d returned with the slave at %d of %d", i, got, want)
		}
	}
	if n, _ := s.MaxOffset("s", 0); n < 51 {
		t.Fatalf("slave queue has %d messages", n)
	}
}

// TestReplicationRefusesDivergedSlave: a slave whose log is not a prefix of the master's is
// refused and copies nothing.
func TestReplicationRefusesDivergedSlave(t *testing.T) {
	m := mustOpen(t, testConfig(t))
	defer m.Close()
	addr := serve(t, m)
	m.CreateTopic("d", 1)
	appendN(t, m, "d", 0, 0, 20)
	// A store with other messages, then opened as this master's slave.
	scfg := slaveConfig(t, addr)
	own := scfg
	own.Role, own.MasterAddr = RoleMaster, ""
	o := mustOpen(t, own)
	o.CreateTopic("d", 1)
	o.Append("d", 0, []Message{{Body: []byte("mine")}})
	end := o.cl.committed.Load()
	o.Close()
	s := mustOpen(t, scfg)
	defer s.Close()
	time.Sleep(2500 * time.Millisecond)
	if st := s.Replication(); st.MasterLive || st.LogEnd != end {
		t.Fatalf("a diverged slave replicated: %+v (own end %d)", st, end)
	}
}

// TestReplicationStartsAtMastersMinimum: an empty slave of a master whose oldest segments
// are gone starts at the master's first retained byte.
func TestReplicationStartsAtMastersMinimum(t *testing.T) {
	cfg := testConfig(t)
	cfg.RetentionBytes = 3 * cfg.SegmentSize
	m := mustOpen(t, cfg)
	defer m.Close()
	addr := serve(t, m)
	m.CreateTopic("x", 1)
	appendN(t, m, "x", 0, 0, 1500)
	if err := m.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if m.cl.minOffset() == 0 {
		t.Fatal("retention removed nothing")
	}
	s := mustOpen(t, slaveConfig(t, addr))
	defer s.Close()
	waitCaughtUp(t, m, s)
	if s.cl.minOffset() != m.cl.minOffset() {
		t.Fatalf("slave starts at %d, master at %d", s.cl.minOffset(), m.cl.minOffset())
	}
	mmin, _ := m.MinOffset("x", 0)
	smax, _ := s.MaxOffset("x", 0)
	msgs, _, err := s.Pull(t.Context(), "x", 0, mmin, 10, 0)
	if err != nil || len(msgs) == 0 || msgs[0].QueueOffset != mmin || smax != 1500 {
		t.Fatalf("slave pull at %d: %v %d, max %d", mmin, err, len(msgs), smax)
	}
}

func FuzzParseReplicated(f *testing.F) {
	m := inMsg{topic: "t", body: []byte("body"), props: EncodeProperties(map[string]string{"TAGS": "a"})}
	rec := make([]byte, m.size())
	encodeRecord(rec, &m, 0, 0, 5, netipZero)
	two := append(append([]byte(nil), rec...), make([]byte, m.size())...)
	encodeRecord(two[len(rec):], &m, 1, int64(len(rec)), 6, netipZero)
	blank := make([]byte, 64)
	binary.BigEndian.PutUint32(blank, 64)
	binary.BigEndian.PutUint32(blank[4:], magicBlank)
	f.Add(int64(0), rec)
	f.Add(int64(0), two)
	f.Add(int64(1<<16-64), blank)
	f.Add(int64(0), rec[:40])
	f.Fuzz(func(t *testing.T, pos int64, data []byte) {
		recs, err := parseReplicated(pos, data, 1<<16)
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a RecordError", err)
			}
			return
		}
		at := pos
		for _, r := range recs {
			if r.off != at || r.r.physOffset != at {
				t.Fatalf("record at %d claims %d/%d", at, r.off, r.r.physOffset)
			}
			at += int64(r.r.size)
		}
		if at > pos+int64(len(data)) {
			t.Fatalf("records end at %d, beyond the %d bytes", at, len(data))
		}
	})
}
