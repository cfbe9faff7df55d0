package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"rsql/exec"
)

// jobManager keeps the jobs this process runs, once the engine has planned and started
// them (Engine.startJob): it watches each until it ends and records how it ended in the
// catalog, starts again after a backoff the ones that failed for a while (jobretry.go),
// stops them (TERMINATE, PAUSE, DROP, shutdown) and waits for them. Statement execution
// and the catalog stay the engine's; a job started again goes back through restart.
type jobManager struct {
	cat *Catalog
	log io.Writer
	// restart starts a recorded job again from its statement text (Engine.restartAttempt),
	// for its attempt-th start after transient errors.
	restart func(def JobDef, attempt int) error
	// clustered reports cluster mode (cluster.go): a job failing there is this instance's
	// failure, not the job's.
	clustered func() bool

	mu   sync.Mutex // guards jobs, retries and closing
	jobs map[string]*runningJob
	idle *sync.Cond // signalled whenever a job stops
	// retries are the jobs waiting to start again after a transient error (jobretry.go);
	// closing is set by close, after which none is scheduled or started.
	retries map[string]*jobRetry
	closing bool

	// startMu serializes starting and stopping jobs in cluster mode.
	startMu sync.Mutex
}

func newJobManager(cat *Catalog, log io.Writer, restart func(JobDef, int) error, clustered func() bool) *jobManager {
	m := &jobManager{cat: cat, log: log, restart: restart, clustered: clustered,
		jobs: map[string]*runningJob{}, retries: map[string]*jobRetry{}}
	m.idle = sync.NewCond(&m.mu)
	return m
}

// runningJob is a job this process runs.
type runningJob struct {
	def    JobDef
	job    *exec.Job
	cancel context.CancelFunc
	done   chan struct{}
	rate   rateMeter
	// checkpoints measures the job's checkpoint commits.
	checkpoints *checkpointStats
	// stopped is set by whoever stops the job (TERMINATE, PAUSE, DROP, shutdown), who also
	// records its state; watch then leaves the state alone.
	stopped atomic.Bool
	// Cluster mode: the job's units ("<stage>/<split>"), those this instance started it
	// with (cluster.jobs has what it runs now), and whether it runs whole.
	units, owned []string
	whole        bool
	// out is how the job writes its file sink, or nil (fileout.go).
	out *fileOutput
	// attempt counts the starts since the job last ran without a transient error for
	// retryResetAfter (jobretry.go); started is when this run started.
	attempt int
	started time.Time
}

// stop stops the job on behalf of the engine and waits for it to end.
func (rj *runningJob) stop() {
	rj.stopped.Store(true)
	rj.cancel()
	<-rj.done
}

// startRecorded starts again the jobs the catalog lists as RUNNING. One that cannot
// start for now is retried (jobretry.go); one this process cannot run (it has no broker)
// is left as it is.
func (m *jobManager) startRecorded() {
	for _, j := range m.cat.Jobs() {
		if j.State != JobRunning {
			continue
		}
		if err := m.restart(j, 0); err != nil {
			m.restartFailed(j, 1, err)
		}
	}
}

// add registers a started job and watches it until it ends.
func (m *jobManager) add(rj *runningJob) {
	m.mu.Lock()
	m.jobs[rj.def.ID] = rj
	m.mu.Unlock()
	go m.watch(rj)
}

// get returns job id if it runs in this process, else nil.
func (m *jobManager) get(id string) *runningJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.jobs[id]
}

// list returns the jobs running in this process, in no order.
func (m *jobManager) list() []*runningJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	jobs := make([]*runningJob, 0, len(m.jobs))
	for _, j := range m.jobs {
		jobs = append(jobs, j)
	}
	return jobs
}

// close drops the pending retries, after which none is scheduled or started, and stops
// every running job after a last checkpoint.
func (m *jobManager) close() {
	m.mu.Lock()
	m.closing = true
	for id, r := range m.retries {
		r.timer.Stop()
		delete(m.retries, id)
	}
	m.mu.Unlock()
	for _, j := range m.list() {
		// A last checkpoint, so the next start resumes exactly here; then stop. The job
		// stays RUNNING in the catalog and starts again with the server.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		j.job.Checkpoint(ctx)
		cancel()
		j.stop()
	}
}

// count returns the number of jobs running in this process.
func (m *jobManager) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.jobs)
}

// wait blocks until no job runs in this process or ctx is done.
func (m *jobManager) wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		m.mu.Lock()
		m.idle.Broadcast()
		m.mu.Unlock()
	})
	defer stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.jobs) > 0 && ctx.Err() == nil {
		m.idle.Wait()
	}
	return ctx.Err()
}

// stop records state (TERMINATED, PAUSED) for job id, drops its pending retry and stops it
// if it runs here, waiting for it to end.
func (m *jobManager) stop(id string, state JobState) error {
	m.cancelRetry(id)
	m.mu.Lock()
	rj := m.jobs[id]
	m.mu.Unlock()
	if err := m.cat.SetJobState(id, state, ""); err != nil {
		return err
	}
	if rj != nil {
		rj.stop()
	}
	return nil
}

// watch waits for a job to end and records how it ended.
func (m *jobManager) watch(rj *runningJob) {
	err := rj.job.Wait()
	st := rj.job.Stats()
	summary := fmt.Sprintf("in=%d out=%d late=%d bad=%d", st.RecordsIn, st.RecordsOut, st.Late, st.Bad)
	cancelled := rj.stopped.Load() || errors.Is(err, context.Canceled)
	if m.clustered() && err != nil && !cancelled {
		// In cluster mode a failure here is this instance's (another instance took a split
		// over, or the broker is unreachable): the job stays RUNNING for the others, and
		// the cluster's next reconcile starts it again with what this instance owns.
		fmt.Fprintf(m.log, "job %s stopped on this instance: %v (%s)\n", rj.def.ID, err, summary)
		cancelled = true
	}
	jc := JobCounters{RecordsIn: st.RecordsIn, RecordsOut: st.RecordsOut, Late: st.Late, Bad: st.Bad}
	if st.Watermark > -1<<62 && st.Watermark < 1<<62 {
		wm := st.Watermark
		jc.Watermark = &wm
	}
	m.cat.SetJobCounters(rj.def.ID, jc)
	if err == nil && !cancelled && rj.out != nil {
		if ferr := rj.out.finish(); ferr != nil {
			err = ferr
		}
	}
	retry := false
	if err != nil && !cancelled && (retryable(err) || notRunnableHere(err)) {
		// Paused, not ended: started again from its last checkpoint after a backoff
		// (jobretry.go), its file output kept as a paused job's is.
		attempt := 1
		if time.Since(rj.started) < retryResetAfter {
			attempt = rj.attempt + 1
		}
		if notRunnableHere(err) {
			fmt.Fprintf(m.log, "job %s stopped in this process: %v (%s)\n", rj.def.ID, err, summary)
			retry = true
		} else {
			retry = m.scheduleRetry(rj.def, attempt, fmt.Errorf("%w (%s)", err, summary))
		}
	}
	switch {
	case retry:
	case err != nil && !cancelled:
		fmt.Fprintf(m.log, "job %s failed: %v (%s)\n", rj.def.ID, err, summary)
		var pe *exec.PanicError
		if errors.As(err, &pe) {
			fmt.Fprintf(m.log, "job %s: statement: %s\n%s\n", rj.def.ID, logStatement(rj.def.Statement), pe.Stack)
		}
		m.cat.SetJobState(rj.def.ID, JobFailed, err.Error())
		if rj.out != nil {
			rj.out.discard()
		}
	case cancelled:
		// Stopped by TERMINATE, PAUSE, DROP or shutdown: whoever stopped it set the state.
		// A terminated job's unfinished output goes; a paused or shut-down one resumes it.
		if j, ok := m.cat.Job(rj.def.ID); rj.out != nil && (!ok || !j.live()) {
			rj.out.discard()
		}
	default:
		fmt.Fprintf(m.log, "job %s finished: %s\n", rj.def.ID, summary)
		m.cat.SetJobState(rj.def.ID, JobFinished, "")
	}
	if st.Bad > 0 {
		shown := st.BadErrors
		if len(shown) > 5 {
			shown = shown[len(shown)-5:]
		}
		fmt.Fprintf(m.log, "job %s: %d bad records; the last %d:\n", rj.def.ID, st.Bad, len(shown))
		for _, b := range shown {
			fmt.Fprintf(m.log, "  %s\n", b)
		}
	}
	m.mu.Lock()
	delete(m.jobs, rj.def.ID)
	m.idle.Broadcast()
	m.mu.Unlock()
	close(rj.done)
}
