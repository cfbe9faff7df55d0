package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"rsql/broker"
	"rsql/connectors"
)

// Jobs that fail for a while (docs/guarantees.md, "Faults"). A job whose error retrying can
// fix — the broker unreachable or restarting, a route missing, a request timing out, the
// broker's disk full — is not ended: it stays RUNNING in the catalog, shows as RETRYING, and
// is started again from its last checkpoint after a backoff that doubles from
// retryFirstDelay to retryMaxDelay (reset once a run lasted retryResetAfter). Restarting from
// the checkpoint is what a restart of the server does, so the output stays exactly once.
// FAILED is for errors retrying cannot fix (a bad plan, a sink that refuses the rows, a
// record too large); RESUME JOB starts a FAILED job again. An engine that cannot run a job at
// all (an embedded `rsql -c/-f` has no broker) leaves it as it was.

const (
	retryFirstDelay = time.Second
	retryMaxDelay   = 30 * time.Second
	retryResetAfter = 2 * time.Minute
)

// jobRetry is a job waiting to be started again. The engine's mu guards the map holding it.
type jobRetry struct {
	attempt int
	at      time.Time // when it starts again
	err     string    // why it stopped
	timer   *time.Timer
}

// retryable reports whether err is one that the same job, started again later, can get
// past: connectors mark what is transient (ErrUnavailable), and network and disk-full
// errors of the system are too.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, connectors.ErrUnavailable) || errors.Is(err, broker.ErrNoSpace) {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENOSPC, syscall.EDQUOT} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// notRunnableHere reports whether err says this engine lacks what the job needs (a broker),
// as opposed to the job being wrong: the job is left as it was for an engine that has it.
func notRunnableHere(err error) bool { return errors.Is(err, connectors.ErrNoBroker) }

// retryDelay is the wait before attempt n (1-based).
func retryDelay(n int) time.Duration {
	d := retryFirstDelay
	for i := 1; i < n && d < retryMaxDelay; i++ {
		d *= 2
	}
	return min(d, retryMaxDelay)
}

// scheduleRetry starts def again after the backoff of attempt, unless the engine closes or
// the job is stopped first (stopJob cancels it). It reports whether it scheduled.
func (e *Engine) scheduleRetry(def JobDef, attempt int, cause error) bool {
	d := retryDelay(attempt)
	r := &jobRetry{attempt: attempt, at: time.Now().Add(d), err: cause.Error()}
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return false
	}
	if old := e.retries[def.ID]; old != nil {
		old.timer.Stop()
	}
	e.retries[def.ID] = r
	r.timer = time.AfterFunc(d, func() { e.retry(def.ID, r) })
	e.mu.Unlock()
	fmt.Fprintf(e.cfg.Log, "job %s paused: %v; starting again from its last checkpoint in %v (attempt %d)\n", def.ID, cause, d, attempt)
	return true
}

// retry starts a job again after its backoff (scheduleRetry's timer).
func (e *Engine) retry(id string, r *jobRetry) {
	e.mu.Lock()
	if e.closing || e.retries[id] != r {
		e.mu.Unlock()
		return
	}
	delete(e.retries, id)
	e.mu.Unlock()
	def, ok := e.cat.Job(id)
	if !ok || def.State != JobRunning {
		return
	}
	if err := e.restartAttempt(def, r.attempt); err != nil {
		e.restartFailed(def, r.attempt+1, err)
		return
	}
	fmt.Fprintf(e.cfg.Log, "job %s started again (attempt %d)\n", id, r.attempt)
	// A TERMINATE, PAUSE or DROP that came while it started finds it either running (and
	// stops it) or not yet: then it is stopped here.
	if def, ok := e.cat.Job(id); !ok || def.State != JobRunning {
		if rj := e.running(id); rj != nil {
			rj.stop()
		}
	}
}

// restartFailed handles a job that could not be started again: retried later when the
// error is transient, left as it is when this engine cannot run it, FAILED otherwise.
func (e *Engine) restartFailed(def JobDef, attempt int, err error) {
	switch {
	case notRunnableHere(err):
		fmt.Fprintf(e.cfg.Log, "job %s is not started by this process: %v\n", def.ID, err)
	case retryable(err) && e.scheduleRetry(def, attempt, err):
	default:
		fmt.Fprintf(e.cfg.Log, "job %s failed to start: %v\n", def.ID, err)
		e.cat.SetJobState(def.ID, JobFailed, err.Error())
	}
}

// cancelRetry drops a job's pending retry; it reports whether there was one.
func (e *Engine) cancelRetry(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.retries[id]
	if r != nil {
		r.timer.Stop()
		delete(e.retries, id)
	}
	return r != nil
}

// displayState is a job's state as SHOW JOBS and the console show it: RETRYING (with why
// and when) for a RUNNING job waiting to start again.
func (e *Engine) displayState(def JobDef) (state, errText string) {
	if def.State != JobRunning {
		return def.State.String(), def.Error
	}
	e.mu.Lock()
	r := e.retries[def.ID]
	e.mu.Unlock()
	if r == nil {
		return def.State.String(), def.Error
	}
	wait := max(0, time.Until(r.at)).Round(100 * time.Millisecond)
	return "RETRYING", fmt.Sprintf("starting again in %v (attempt %d) after: %s", wait, r.attempt, r.err)
}
