package broker

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"rsql/broker/remoting"
)

// The files the broker replaces whole (topics.json, subscriptionGroups.json, offsets.json)
// under a short write and under ENOSPC: the caller gets the error, and what was acknowledged
// before it is there after a reopen with the real file system.

var writeFaults = []struct {
	name string
	err  error
}{
	{"short", io.ErrShortWrite},
	{"nospace", syscall.ENOSPC},
}

func TestFaultTopicsWrite(t *testing.T) {
	for _, wf := range writeFaults {
		t.Run(wf.name, func(t *testing.T) {
			fs := &faultFS{}
			cfg := testConfig(t)
			cfg.fs = fs
			b := mustOpen(t, cfg)
			if err := b.CreateTopic("a", 2); err != nil {
				t.Fatal(err)
			}
			appendN(t, b, "a", 1, 0, 20)
			fs.arm("write", "topics.json", 1, wf.err)
			if err := b.CreateTopic("b", 2); !errors.Is(err, wf.err) {
				t.Fatalf("CreateTopic with a failing write: %v, want %v", err, wf.err)
			}
			if fs.Fired() != 1 {
				t.Fatalf("the fault fired %d times", fs.Fired())
			}
			b = reopenReal(t, b, cfg)
			defer b.Close()
			msgs, err := b.Peek("a", 1, 0, 100)
			if err != nil || len(msgs) != 20 {
				t.Fatalf("after reopen: %d messages of 20, %v", len(msgs), err)
			}
			for i := range 20 {
				if string(msgs[i].Body) != string(body(1, i)) {
					t.Fatalf("message %d: %q", i, msgs[i].Body)
				}
			}
		})
	}
}

func TestFaultSubGroupsWrite(t *testing.T) {
	for _, wf := range writeFaults {
		t.Run(wf.name, func(t *testing.T) {
			fs := &faultFS{}
			cfg := testConfig(t)
			cfg.fs = fs
			b := mustOpen(t, cfg)
			if err := b.Serve("127.0.0.1:0", "127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			_, addr := b.Addrs()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			put := func(opaque int32, group string) *remoting.Command {
				return call(t, c, &remoting.Command{Code: codeUpdateSubGroup, Opaque: opaque,
					Body: []byte(`{"groupName":"` + group + `","consumeBroadcastEnable":false}`)})
			}
			if r := put(1, "g1"); r.Code != respSuccess {
				t.Fatalf("creating g1: %d %s", r.Code, r.Remark)
			}
			fs.arm("write", "subscriptionGroups.json", 1, wf.err)
			r := put(2, "g2")
			if r.Code != respSystemError || !strings.Contains(r.Remark, wf.err.Error()) {
				t.Fatalf("creating g2 with a failing write: %d %q, want a system error naming %q", r.Code, r.Remark, wf.err)
			}
			if fs.Fired() != 1 {
				t.Fatalf("the fault fired %d times", fs.Fired())
			}
			c.Close()
			b = reopenReal(t, b, cfg)
			defer b.Close()
			var found bool
			for _, g := range b.SubscriptionGroups() {
				if g.GroupName == "g1" {
					found = true
					if g.ConsumeBroadcastEnable {
						t.Fatalf("g1 after reopen: %+v", g)
					}
				}
			}
			if !found {
				t.Fatalf("g1 lost after reopen: %+v", b.SubscriptionGroups())
			}
		})
	}
}

// A failed write of the offsets snapshot fails the checkpoint (Flush); the commits
// acknowledged before and after it are there after a reopen that finds no newer snapshot.
func TestFaultOffsetSnapshotWrite(t *testing.T) {
	for _, wf := range writeFaults {
		t.Run(wf.name, func(t *testing.T) {
			fs := &faultFS{}
			cfg := testConfig(t)
			cfg.fs = fs
			b := mustOpen(t, cfg)
			if err := b.CreateTopic("t", 3); err != nil {
				t.Fatal(err)
			}
			appendN(t, b, "t", 0, 0, 10)
			for q := range 2 {
				if err := b.CommitOffset("g", "t", q, int64(3+q)); err != nil {
					t.Fatal(err)
				}
			}
			fs.arm("write", offsetsSnapshot, 1, wf.err)
			if err := b.Flush(); !errors.Is(err, wf.err) {
				t.Fatalf("Flush with a failing snapshot write: %v, want %v", err, wf.err)
			}
			if fs.Fired() != 1 {
				t.Fatalf("the fault fired %d times", fs.Fired())
			}
			if err := b.CommitOffset("g", "t", 2, 8); err != nil {
				t.Fatal(err)
			}
			b.offsets.mu.Lock()
			j := b.offsets.j
			b.offsets.j = nil // Close does not compact: the journal must still hold the commits
			b.offsets.mu.Unlock()
			j.Close()
			b = reopenReal(t, b, cfg)
			defer b.Close()
			for q, want := range map[int]int64{0: 3, 1: 4, 2: 8} {
				if off, ok := b.QueryOffset("g", "t", q); !ok || off != want {
					t.Fatalf("queue %d: offset %d, %v after reopen; want %d", q, off, ok, want)
				}
			}
			if msgs, err := b.Peek("t", 0, 0, 100); err != nil || len(msgs) != 10 {
				t.Fatalf("after reopen: %d messages of 10, %v", len(msgs), err)
			}
		})
	}
}

// Recovery zeroes the commit log's tail past its end through the seam: a failure there
// fails Open, naming the segment, and changes nothing a later open reads.
func TestFaultRecoveryPunchFails(t *testing.T) {
	cfg := testConfig(t)
	b := mustOpen(t, cfg)
	if err := b.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	appendN(t, b, "t", 0, 0, 25)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	fs := &faultFS{}
	fs.arm("punch", "", 1, syscall.EIO)
	cfg.fs = fs
	if b, err := Open(cfg); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "torn tail") {
		if err == nil {
			b.Close()
		}
		t.Fatalf("Open with a failing hole punch: %v, want EIO zeroing the torn tail", err)
	}
	cfg.fs = nil
	b = mustOpen(t, cfg)
	defer b.Close()
	msgs, err := b.Peek("t", 0, 0, 100)
	if err != nil || len(msgs) != 25 {
		t.Fatalf("after reopen: %d messages of 25, %v", len(msgs), err)
	}
}
