package exec

import (
	"context"
	"sync"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Checkpoints asked for at the same time (the periodic one, the last one of a bounded job,
// one asked for by an operator) must reach every root stage in the same order: a stage
// aligning the barriers of two inputs fails the job when one input brings epoch n+1 while
// it waits for epoch n from the other.
func TestConcurrentCheckpointsReachRootsInOrder(t *testing.T) {
	plan := planSQL(t, `SELECT o.user_id, p.amount FROM orders o JOIN payments p ON o.user_id = p.user_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '1' SECOND`, planCatalog(), "ck")
	if len(plan.Stages) < 3 {
		t.Fatalf("the plan has %d stages: want two roots feeding a join stage", len(plan.Stages))
	}
	srcs := map[string]*memSource{"orders": newMemSource(false, 64, "0", "1"), "payments": newMemSource(false, 64, "0", "1")}
	for k, name := range []string{"orders", "payments"} {
		for sp, split := range []string{"0", "1"} {
			feedAll(srcs[name], split, genEvents(int64(10*k+sp), 2000, 100, 50))
		}
	}
	var mu sync.Mutex
	rows := 0
	env := Env{
		OpenSource:         func(spec planner.SourceSpec) (connectors.Source, error) { return srcs[spec.Stream], nil },
		NewFormat:          newTestFormat,
		OnRow:              func(sql.Row) error { mu.Lock(); rows++; mu.Unlock(); return nil },
		Store:              state.NewMemory(),
		CheckpointInterval: -1,
		Tick:               5 * time.Millisecond,
	}
	j, err := Start(context.Background(), "ck", plan, env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if _, err := j.Checkpoint(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("checkpoint: %v", err)
	}
	select {
	case <-j.Done():
		t.Fatalf("the job ended: %v", j.Wait())
	default:
	}
}
