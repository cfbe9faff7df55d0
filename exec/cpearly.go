package exec

import "time"

// Early checkpoints. With the adaptive interval (Env.MinCheckpointInterval) a checkpoint
// waits up to ten times what the last commit cost — up to CheckpointInterval for a job with
// a large state delta. Rows that a watermark releases at once (the rows of a window that
// just closed) would wait that long in the outbox. So when a watermark advance puts rows
// into a stage's outbox, the stage asks for an early checkpoint: the checkpoint loop starts
// the next one the adaptive floor (MinCheckpointInterval, or LightCheckpointInterval after a
// light checkpoint) after the last one ended (at once when that is past),
// so the window's rows wait for one commit. To keep the adaptive bound on what
// checkpoints cost, at most one early checkpoint is taken per adaptive interval: a job
// whose watermarks release rows all the time checkpoints at most twice as often as its
// commits' cost allows. A fixed checkpoint_interval is kept as it is.

// askEarlyCheckpoint asks the checkpoint loop for an early checkpoint; it does not wait.
func (j *Job) askEarlyCheckpoint() {
	select {
	case j.early <- struct{}{}:
	default:
	}
}

// earlyCheckpointAt says when an early checkpoint asked for at now starts: at or after
// min past the end of the last one (lastEnd), only if that is before the next one is due
// anyway, and only if no early checkpoint was scheduled within the current adaptive wait.
func earlyCheckpointAt(now, due, lastEnd, lastEarly time.Time, min, wait time.Duration) (time.Time, bool) {
	if !lastEarly.IsZero() && now.Sub(lastEarly) < wait {
		return time.Time{}, false
	}
	at := lastEnd.Add(min)
	if at.Before(now) {
		at = now
	}
	if !at.Before(due) {
		return time.Time{}, false
	}
	return at, true
}

// heldRows measures what the stage's outbox holds for the next checkpoint: the bytes of its
// rows' keys and bodies (0 without an outbox). It grows with every row added.
func (st *stage) heldRows() int {
	if st.sink == nil || st.sink.eo == nil {
		return 0
	}
	return st.sink.eo.pendingBytes
}

// watermarkReleased is called after a watermark went through the stage's operators, with
// heldRows from before: rows the watermark released into the outbox ask for an early
// checkpoint.
func (st *stage) watermarkReleased(before int) {
	if st.heldRows() > before {
		st.job.askEarlyCheckpoint()
	}
}
