package exec

import (
	"context"
	"testing"
	"time"

	"rsql/broker"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// A job started again from its state (resumed, or after a restart) goes on counting from
// its last checkpoint's counters instead of from zero (docs/operations.md, "Job counters").
func TestCountersContinueAfterRestart(t *testing.T) {
	store := state.NewMemory()
	src := newMemSource(false, 0, "0")
	outSchema := sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}}
	plan := func() *planner.Physical {
		return &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, sourceSpec(map[string]string{"dlq_path": "dlq"}, 0), sinkSpec(outSchema),
			&planner.ProjectNode{Exprs: []planner.Evaluator{col(0)}, Schema: outSchema})}}
	}
	var sk sinks
	env := testEnv(src, &sk)
	env.Store = store
	start := func() *Job {
		j, err := Start(context.Background(), "job", plan(), env)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	waitIn := func(j *Job, n int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for j.Stats().RecordsIn+j.Stats().Bad < n {
			if time.Now().After(deadline) {
				t.Fatalf("job read %d records, want %d", j.Stats().RecordsIn+j.Stats().Bad, n)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	src.feed("0", "a,1,1,", "b,2,2,", "garbage", "c,3,3,")
	j := start()
	waitIn(j, 4)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := j.Stats()
	j.Stop()
	if first.RecordsIn != 3 || first.Bad != 1 || first.RecordsOut != 3 || first.BytesIn == 0 || first.BytesOut == 0 {
		t.Fatalf("first run: %+v", first)
	}

	// Started again: the counters are where they were, before any new record.
	j = start()
	if st := j.Stats(); st.RecordsIn != first.RecordsIn || st.Bad != first.Bad || st.RecordsOut != first.RecordsOut ||
		st.BytesIn != first.BytesIn || st.BytesOut != first.BytesOut {
		t.Fatalf("after restart: %+v, want the counters of %+v", st, first)
	}
	src.feed("0", "d,4,4,", "e,5,5,")
	waitIn(j, 6)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := j.Stats()
	j.Stop()
	if second.RecordsIn != 5 || second.Bad != 1 || second.RecordsOut != 5 {
		t.Fatalf("second run: in=%d bad=%d out=%d, want 5 1 5", second.RecordsIn, second.Bad, second.RecordsOut)
	}
	j = start()
	defer j.Stop()
	if st := j.Stats(); st.RecordsIn != 5 || st.RecordsOut != 5 {
		t.Fatalf("third start: in=%d out=%d, want 5 5", st.RecordsIn, st.RecordsOut)
	}
}

func FuzzDecodeCounters(f *testing.F) {
	var c counters
	c.in.Store(7)
	c.bytesOut.Store(1 << 40)
	f.Add(appendCounters(nil, &c))
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, v []byte) {
		var got counters
		if err := decodeCounters(v, &got); err != nil {
			return
		}
		// What decodes encodes to a prefix of the input (a later version may add fields).
		enc := appendCounters(nil, &got)
		for _, f := range got.fields() {
			if f.Load() < 0 {
				t.Fatalf("negative counter from %x", v)
			}
		}
		if len(enc) > len(v) {
			t.Fatalf("%x decoded to %x", v, enc)
		}
	})
}

// Rows of exactly-once output are published after the checkpoint that covers them: the
// checkpoint's counters include them, so that a job stopped (or killed) right after the
// commit starts again with every row it wrote counted.
func TestCountersIncludeOutputPublishedAfterCommit(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fillTopic(t, b, 100)
	store := state.NewMemory()
	env := brokerEnv(b, store, true)
	env.CheckpointInterval, env.MinCheckpointInterval = time.Hour, 0 // only the checkpoints asked for
	j, err := Start(context.Background(), "cj", brokerPlan(), env)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rows read", func() bool { return j.Stats().RecordsIn >= 300 })
	// A checkpoint publishes the rows its epoch covers; the windows fire once the source
	// splits' watermarks crossed the shuffle topic (at most a tick after they rose,
	// exec/shuffle.go), which may be after a checkpoint taken at once: checkpoint until
	// rows are out.
	waitFor(t, "the output published", func() bool {
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
		return int64(len(topicBodies(t, b, "out"))) == j.Stats().RecordsOut && j.Stats().RecordsOut > 0
	})
	first := j.Stats()
	j.Stop() // no last checkpoint: as if killed
	j, err = Start(context.Background(), "cj", brokerPlan(), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	if got := j.Stats().RecordsOut; got != first.RecordsOut {
		t.Fatalf("after a restart records_out is %d, want the %d written before", got, first.RecordsOut)
	}
}
