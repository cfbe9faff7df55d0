package server

import (
	"context"
	"fmt"

	"rsql/exec"
)

// JobStats returns the live statistics of a job this engine runs (false when it runs none
// with that id). Benchmarks and tools watch progress through it.
func (e *Engine) JobStats(id string) (exec.JobStats, bool) {
	e.mu.Lock()
	rj := e.jobs[id]
	e.mu.Unlock()
	if rj == nil {
		return exec.JobStats{}, false
	}
	return rj.job.Stats(), true
}

// RunningJobIDs lists the ids of the jobs this engine runs.
func (e *Engine) RunningJobIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.jobs))
	for id := range e.jobs {
		ids = append(ids, id)
	}
	return ids
}

// CheckpointJob runs one checkpoint of a running job now (the same barrier the periodic
// checkpoints inject) and returns its epoch.
func (e *Engine) CheckpointJob(ctx context.Context, id string) (int64, error) {
	e.mu.Lock()
	rj := e.jobs[id]
	e.mu.Unlock()
	if rj == nil {
		return 0, fmt.Errorf("job %s is not running", id)
	}
	return rj.job.Checkpoint(ctx)
}

// JobCheckpointTimes returns the checkpoint phase histograms of a job this engine runs
// (false when it runs none with that id).
func (e *Engine) JobCheckpointTimes(id string) (exec.CheckpointTimes, bool) {
	e.mu.Lock()
	rj := e.jobs[id]
	e.mu.Unlock()
	if rj == nil {
		return exec.CheckpointTimes{}, false
	}
	return rj.job.CheckpointTimes(), true
}
