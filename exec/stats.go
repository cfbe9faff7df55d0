package exec

import "rsql/planner"

// StageStats is the row flow of one stage of a running job: how many rows left each of its
// ports since the job started (planner.Port: a stage input or an operator's output). Each
// port feeds exactly one operator or the stage's output, so these are the counts of the
// plan's edges (planner.Graph). Rates are differences of two snapshots.
type StageStats struct {
	Stage int
	// InputRows[i] is the rows that entered the stage from input i (decoded records of a
	// stream, or rows from an upstream stage).
	InputRows []int64
	// OpRows[i] is the rows operator i emitted (planner.Stage.Ops order).
	OpRows []int64
	// OutputRows is the rows handed to the stage's exchange or sink.
	OutputRows int64
	// Watermark is the stage's output watermark (MinWatermark before any).
	Watermark int64
}

// StageStats returns a snapshot of every stage's row counts and watermark, in plan order.
// It is safe to call while the job runs: the counters are atomics the stage goroutine adds
// to once per batch.
func (j *Job) StageStats() []StageStats {
	out := make([]StageStats, 0, len(j.stages))
	for _, st := range j.stages {
		s := StageStats{Stage: st.plan.ID, InputRows: make([]int64, len(st.inEmit)), OpRows: make([]int64, len(st.nodes))}
		for i, e := range st.inEmit {
			if e != nil {
				s.InputRows[i] = e.rows.Load()
			}
		}
		for i, n := range st.nodes {
			if n != nil && n.emit != nil {
				s.OpRows[i] = n.emit.rows.Load()
			}
		}
		if p := st.plan.Out; p.Op >= 0 && p.Op < len(s.OpRows) {
			s.OutputRows = s.OpRows[p.Op]
		} else if p.Op < 0 && p.Input >= 0 && p.Input < len(s.InputRows) {
			s.OutputRows = s.InputRows[p.Input]
		}
		st.statsMu.Lock()
		s.Watermark = st.statWM
		st.statsMu.Unlock()
		out = append(out, s)
	}
	return out
}

// Plan returns the physical plan the job runs (not to be modified).
func (j *Job) Plan() *planner.Physical { return j.plan }
