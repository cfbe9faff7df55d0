package server

import (
	"context"
	"fmt"

	"rsql/exec"
)

// JobStats returns the live statistics of a job this engine runs (false when it runs none
// with that id). Benchmarks and tools watch progress through it.
func (e *Engine) JobStats(id string) (exec.JobStats, bool) {
	rj := e.jobs.get(id)
	if rj == nil {
		return exec.JobStats{}, false
	}
	return rj.job.Stats(), true
}

// RunningJobIDs lists the ids of the jobs this engine runs.
func (e *Engine) RunningJobIDs() []string {
	jobs := e.jobs.list()
	ids := make([]string, 0, len(jobs))
	for _, rj := range jobs {
		ids = append(ids, rj.def.ID)
	}
	return ids
}

// CheckpointJob runs one checkpoint of a running job now (the same barrier the periodic
// checkpoints inject) and returns its epoch.
func (e *Engine) CheckpointJob(ctx context.Context, id string) (int64, error) {
	rj := e.jobs.get(id)
	if rj == nil {
		return 0, fmt.Errorf("job %s is not running", id)
	}
	return rj.job.Checkpoint(ctx)
}

// JobCheckpointTimes returns the checkpoint phase histograms of a job this engine runs
// (false when it runs none with that id).
func (e *Engine) JobCheckpointTimes(id string) (exec.CheckpointTimes, bool) {
	rj := e.jobs.get(id)
	if rj == nil {
		return exec.CheckpointTimes{}, false
	}
	return rj.job.CheckpointTimes(), true
}
