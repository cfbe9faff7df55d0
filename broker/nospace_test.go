package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"rsql/broker/remoting"
)

// fullFS is the real file system whose reservations fail with ENOSPC, for the files full
// selects, while it is set.
type fullFS struct {
	osFS
	full  atomic.Bool
	which func(name string) bool // nil: every file
	fails atomic.Int64
}

func (f *fullFS) Allocate(file *os.File, off, n int64) error {
	if f.full.Load() && (f.which == nil || f.which(file.Name())) {
		f.fails.Add(1)
		return syscall.ENOSPC
	}
	return f.osFS.Allocate(file, off, n)
}

// TestNoSpaceRefusesSendsKeepsReads: with the disk full, an append fails with ErrNoSpace and
// leaves nothing behind (the queue's end does not move), a send over the protocol gets
// SERVICE_NOT_AVAILABLE with the reason, pulls go on, the store reopens on the full disk
// (no SIGBUS in recovery) and takes appends again once there is space, with dense offsets.
func TestNoSpaceRefusesSendsKeepsReads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		which func(string) bool
	}{
		{"everything", nil},
		{"commit log", func(n string) bool { return strings.Contains(n, "commitlog") }},
		{"consume queues", func(n string) bool { return strings.Contains(n, "consumequeue") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fullFS{which: tc.which}
			cfg := testConfig(t)
			cfg.QueueFileEntries = 256 // 5 KiB files: a queue needs new files as it grows
			cfg.fs = fs
			b := mustOpen(t, cfg)
			if err := b.CreateTopic("t", 2); err != nil {
				t.Fatal(err)
			}
			appendN(t, b, "t", 0, 0, 100)
			fs.full.Store(true)
			// Append until the reserved room runs out: every failure is ErrNoSpace and
			// moves nothing.
			n := 100
			var err error
			for i := 0; i < 100000 && err == nil; i++ {
				max0, _ := b.MaxOffset("t", 0)
				_, err = b.Append("t", 0, []Message{{Key: fmt.Sprint("k", n), Tags: fmt.Sprint("T", n%3),
					Properties: map[string]string{"i": fmt.Sprint(n)}, Body: body(0, n)}})
				if err == nil {
					n++
					continue
				}
				if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("append on a full disk: %v, want ErrNoSpace wrapping ENOSPC", err)
				}
				if m, _ := b.MaxOffset("t", 0); m != max0 {
					t.Fatalf("a refused append moved the queue end from %d to %d", max0, m)
				}
			}
			if err == nil {
				t.Fatal("appends never ran out of reserved room")
			}
			if fs.fails.Load() == 0 {
				t.Fatal("no reservation was refused")
			}
			readAll(t, b, "t", 0, n)
			// Over the protocol: the send is refused with 14 and the reason.
			if err := b.Serve("", "127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			_, addr := b.Addrs()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			r := call(t, c, &remoting.Command{Code: codeSendMessage, Opaque: 1, Body: []byte("x"),
				ExtFields: map[string]string{"topic": "t", "queueId": "0"}})
			if r.Code != respServiceUnavailable || !strings.Contains(r.Remark, "no space") {
				t.Fatalf("send on a full disk: code %d %q", r.Code, r.Remark)
			}
			r = call(t, c, &remoting.Command{Code: codePullMessage, Opaque: 2, ExtFields: map[string]string{
				"consumerGroup": "g", "topic": "t", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32"}})
			if msgs, err := DecodeRecords(r.Body); r.Code != 0 || err != nil || len(msgs) != 32 {
				t.Fatalf("pull on a full disk: code %d, %d messages, %v", r.Code, len(msgs), err)
			}
			c.Close()
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			// Recovery on the full disk.
			b = mustOpen(t, cfg)
			readAll(t, b, "t", 0, n)
			if _, err := b.Append("t", 0, []Message{{Body: body(0, n)}}); !errors.Is(err, ErrNoSpace) {
				// The segment's reserved room may hold one more: fill it.
				for i := 0; i < 100000 && err == nil; i++ {
					n++
					_, err = b.Append("t", 0, []Message{{Key: fmt.Sprint("k", n), Tags: fmt.Sprint("T", n%3),
						Properties: map[string]string{"i": fmt.Sprint(n)}, Body: body(0, n)}})
				}
				if !errors.Is(err, ErrNoSpace) {
					t.Fatalf("append after reopening on a full disk: %v", err)
				}
			}
			// Space returns: appends go on where the log ends, offsets stay dense.
			fs.full.Store(false)
			appendN(t, b, "t", 0, n, 300)
			appendN(t, b, "t", 1, 0, 50)
			readAll(t, b, "t", 0, n+300)
			readAll(t, b, "t", 1, 50)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = mustOpen(t, cfg)
			defer b.Close()
			readAll(t, b, "t", 0, n+300)
		})
	}
}

// TestNoSpaceForTheIndex: the key index cannot reserve room; appends still succeed (the
// indexer takes over and retries), and once there is space the keys are found.
func TestNoSpaceForTheIndex(t *testing.T) {
	fs := &fullFS{which: func(n string) bool { return strings.Contains(n, "index") }}
	cfg := testConfig(t)
	cfg.IndexSlots, cfg.IndexEntries = 64, 64 // a new file every 64 keys
	cfg.fs = fs
	fs.full.Store(true)
	b := mustOpen(t, cfg)
	defer b.Close()
	b.CreateTopic("t", 1)
	appendN(t, b, "t", 0, 0, 200)
	fs.full.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for {
		msgs, err := b.QueryMessages("t", "k150", 10, 0, 1<<62)
		if err == nil && len(msgs) == 1 && string(msgs[0].Body) == string(body(0, 150)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("key k150 not found once space returned: %v %d", err, len(msgs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
