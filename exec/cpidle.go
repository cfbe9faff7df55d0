package exec

// Idle jobs take no checkpoints (with the adaptive interval, the server's default; a fixed
// checkpoint_interval is kept as the user set it). A checkpoint records the splits' positions and watermarks,
// the operators' state and what the sinks hold; none of it changes while no event reaches
// the job's stages and no watermark moves. The stages count such activity (touch): a
// batch of rows or shuffle marks, the end of an input, a watermark from an in-process edge,
// a split added or removed, a split's or the stage's watermark rising (which also covers
// windows closed by idleness or the wall clock). When the periodic checkpoint finds the
// count where it was when the last checkpoint started, it skips it and sleeps until the
// next activity wakes it, instead of checkpointing at the
// adaptive interval (a hundred times a second for a job whose commits are cheap). The
// first activity after such a pause wakes the loop, which starts again from the shortest
// wait, so the latency of exactly-once output after a pause stays one short interval.
// Checkpoints asked for (Checkpoint: a pause, a stop, an outbox at its bound) are always
// taken.

// touch records activity that the next checkpoint must capture, and wakes a quiet
// checkpoint loop.
func (j *Job) touch() {
	j.activity.Add(1)
	if j.quiet.Load() {
		select {
		case j.wake <- struct{}{}:
		default:
		}
	}
}

// idleSince reports whether nothing happened since the activity count was last (the start
// of the last checkpoint), and marks the loop quiet if so. Activity that races with the
// marking is seen by the second look: it wakes the loop or was counted before it.
func (j *Job) idleSince(last uint64) bool {
	if j.activity.Load() != last {
		return false
	}
	j.quiet.Store(true)
	if j.activity.Load() != last {
		j.quiet.Store(false)
		return false
	}
	return true
}
