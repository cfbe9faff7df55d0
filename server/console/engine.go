package console

import (
	"context"

	"rsql/exec"
	"rsql/planner"
	"rsql/server/auth"
	"rsql/server/pgwire"
	"rsql/sql"
)

// Engine is what the console needs of the engine; package server implements it with an
// adapter over its catalog, job manager and cluster node.
type Engine interface {
	// Jobs are the catalog's jobs; Job finds one by any spelling PAUSE JOB accepts.
	Jobs() []Job
	Job(id string) (Job, bool)
	// Streams are the catalog's streams and views; Stream finds one by name.
	Streams() []Stream
	Stream(name string) (Stream, bool)
	// Running is the run of a job in this process, or nil; RunningJobs all of them.
	Running(id string) Run
	RunningJobs() []Run
	// Instances names who runs the job (nil run: not running here).
	Instances(id string, run Run) []Instance
	// Plan plans a job that does not run here again from its statement, as a restart would.
	Plan(id string) (*planner.Physical, error)
	// JobControl runs PAUSE, RESUME or TERMINATE JOB.
	JobControl(act sql.JobAction, id string) error
	// Execute runs statements in a session, as the Postgres wire does.
	Execute(ctx context.Context, sess *pgwire.Session, text string, params []sql.Value) ([]*pgwire.Result, error)
	// Users checks the console's logins.
	Users() auth.UserStore
}

// Job is a job as the catalog stores it, with the state SHOW JOBS shows.
type Job struct {
	ID, Statement string
	State, Error  string // the displayed state and error text
	Sink          string
	Sources       []string
	Live          bool // running or to be restarted: it reads its sources
	Last          *Counters
}

// Counters are a job's counters when it last stopped.
type Counters struct {
	RecordsIn, RecordsOut, Late, Bad int64
	Watermark                        *int64
}

// Stream is a stream or view as the catalog stores it.
type Stream struct {
	Name           string
	IsView         bool
	Schema         sql.Schema
	EventTime      string
	WatermarkDelay int64 // milliseconds
	Options        map[string]string
	Topic          string // the broker topic a broker stream reads
	Job            string
	Statement      string
}

// Run is one run of a job in this process; two runs are the same value only if they are
// the same run.
type Run interface {
	ID() string
	Stats() exec.JobStats
	StageStats() []exec.StageStats
	Plan() *planner.Physical
	InputRate() float64
	// Checkpoint is the last checkpoint commit's duration and size and the commits so far
	// (count 0: none measured).
	Checkpoint() (lastNanos, lastBytes, count int64)
}

// Instance is a process that runs (part of) a job.
type Instance struct {
	Name  string
	Units []string
	Self  bool
}
