package exec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rsql/connectors"
	"rsql/state"
)

// A file sink gets exactly-once output through the outbox although it keeps no message ids:
// after a crash in the middle of publishing a committed checkpoint's rows (one line whole,
// one cut short), recovery leaves each row in the file once, after what earlier
// checkpoints wrote. The crashed checkpoint holds rows of two splits (two outbox entries
// sharing one file position): recovering them one after the other would cut the first's
// rows away again.
func TestFileSinkOutboxRecoversExactlyOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	ctx := context.Background()
	store := state.NewMemory()
	open := func() (*sinkOp, *connectors.FileSink) {
		fs, err := connectors.OpenFileSinkWith(path, connectors.FileSinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := &sinkOp{ctx: ctx, sink: fs, cnt: &counters{}, what: "out"}
		s.eo = &outbox{job: "j", stage: 1, store: store, ds: fs}
		return s, fs
	}
	s, fs := open()
	if err := s.eo.recover(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	// rows are "split:body"
	checkpoint := func(s *sinkOp, epoch int64, rows ...string) {
		t.Helper()
		for _, r := range rows {
			sp, body, _ := strings.Cut(r, ":")
			s.eo.add(sp, []connectors.Message{{Body: []byte(body)}}, nil)
		}
		c := &Control{Kind: Checkpoint, Epoch: epoch, State: &state.Batch{}}
		if err := s.Control(c); err != nil {
			t.Fatal(err)
		}
		if err := store.Write(c.State); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint(s, 1, "0:a", "0:b")
	if err := s.committed(1); err != nil {
		t.Fatal(err)
	}
	checkpoint(s, 2, "0:c", "0:d", "1:e")
	// Crash while publishing epoch 2: "c" and half of "d" reached the file.
	fs.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("c\nd")
	f.Close()

	s2, fs2 := open()
	defer fs2.Close()
	if err := s2.eo.recover(ctx, s2, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if got := strings.ReplaceAll(string(b), "\n", ","); got != "a,b,c,d,e," {
		t.Fatalf("after recovery the file holds %q, want a,b,c,d,e once each", got)
	}

	// A file cut shorter than the checkpoint says is an error, not silent loss.
	checkpoint(s2, 3, "1:f")
	if err := s2.committed(3); err != nil {
		t.Fatal(err)
	}
	fs2.Close()
	if err := os.Truncate(path, 2); err != nil {
		t.Fatal(err)
	}
	s3, fs3 := open()
	defer fs3.Close()
	if err := s3.eo.recover(ctx, s3, nil); err == nil || !strings.Contains(err.Error(), "changed outside rsql") {
		t.Fatalf("recovery over a cut file: %v", err)
	}
}
