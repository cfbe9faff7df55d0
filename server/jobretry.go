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

// jobRetry is a job waiting to be started again. The job manager's mu guards the map holding it.
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
// the job is stopped first (stop cancels it). It reports whether it scheduled.
func (m *jobManager) scheduleRetry(def JobDef, attempt int, cause error) bool {
	d := retryDelay(attempt)
	r := &jobRetry{attempt: attempt, at: time.Now().Add(d), err: cause.Error()}
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return false
	}
	if old := m.retries[def.ID]; old != nil {
		old.timer.Stop()
	}
	m.retries[def.ID] = r
	r.timer = time.AfterFunc(d, func() { m.retry(def.ID, r) })
	m.mu.Unlock()
	fmt.Fprintf(m.log, "job %s paused: %v; starting again from its last checkpoint in %v (attempt %d)\n", def.ID, cause, d, attempt)
	return true
}

// retry starts a job again after its backoff (scheduleRetry's timer).
func (m *jobManager) retry(id string, r *jobRetry) {
	m.mu.Lock()
	if m.closing || m.retries[id] != r {
		m.mu.Unlock()
		return
	}
	delete(m.retries, id)
	m.mu.Unlock()
	def, ok := m.cat.Job(id)
	if !ok || def.State != JobRunning {
		return
	}
	if err := m.restart(def, r.attempt); err != nil {
		m.restartFailed(def, r.attempt+1, err)
		return
	}
	fmt.Fprintf(m.log, "job %s started again (attempt %d)\n", id, r.attempt)
	// A TERMINATE, PAUSE or DROP that came while it started finds it either running (and
	// stops it) or not yet: then it is stopped here.
	if def, ok := m.cat.Job(id); !ok || def.State != JobRunning {
		if rj := m.get(id); rj != nil {
			rj.stop()
		}
	}
}

// restartFailed handles a job that could not be started again: retried later when the
// error is transient, left as it is when this engine cannot run it, FAILED otherwise.
func (m *jobManager) restartFailed(def JobDef, attempt int, err error) {
	switch {
	case notRunnableHere(err):
		fmt.Fprintf(m.log, "job %s is not started by this process: %v\n", def.ID, err)
	case retryable(err) && m.scheduleRetry(def, attempt, err):
	default:
		fmt.Fprintf(m.log, "job %s failed to start: %v\n", def.ID, err)
		m.cat.SetJobState(def.ID, JobFailed, err.Error())
	}
}

// cancelRetry drops a job's pending retry; it reports whether there was one.
func (m *jobManager) cancelRetry(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.retries[id]
	if r != nil {
		r.timer.Stop()
		delete(m.retries, id)
	}
	return r != nil
}

// displayState is a job's state as SHOW JOBS and the console show it: RETRYING (with why
// and when) for a RUNNING job waiting to start again.
func (m *jobManager) displayState(def JobDef) (state, errText string) {
	if def.State != JobRunning {
		return def.State.String(), def.Error
	}
	m.mu.Lock()
	r := m.retries[def.ID]
	m.mu.Unlock()
	if r == nil {
		return def.State.String(), def.Error
	}
	wait := max(0, time.Until(r.at)).Round(100 * time.Millisecond)
	return "RETRYING", fmt.Sprintf("starting again in %v (attempt %d) after: %s", wait, r.attempt, r.err)
}
