package server

import (
	"context"
	"sort"

	"rsql/exec"
	"rsql/planner"
	"rsql/server/auth"
	"rsql/server/cluster"
	"rsql/server/console"
	"rsql/server/pgwire"
	"rsql/sql"
)

// consoleEngine is what the web console (server/console) sees of the engine: the catalog's
// jobs and streams, the jobs running here, the cluster's members, job control and
// statements.
type consoleEngine struct{ e *Engine }

var _ console.Engine = consoleEngine{}

func (c consoleEngine) job(def JobDef) console.Job {
	state, errText := c.e.jobs.displayState(def)
	j := console.Job{ID: def.ID, Statement: def.Statement, State: state, Error: errText, Sink: def.Sink,
		Sources: def.Sources, Live: def.live()}
	if l := def.Last; l != nil {
		j.Last = &console.Counters{RecordsIn: l.RecordsIn, RecordsOut: l.RecordsOut, Late: l.Late, Bad: l.Bad, Watermark: l.Watermark}
	}
	return j
}

func (c consoleEngine) Jobs() []console.Job {
	defs := c.e.cat.Jobs()
	out := make([]console.Job, len(defs))
	for i, def := range defs {
		out[i] = c.job(def)
	}
	return out
}

func (c consoleEngine) Job(id string) (console.Job, bool) {
	def, ok := c.e.cat.Job(id)
	if !ok {
		return console.Job{}, false
	}
	return c.job(def), true
}

func consoleStream(d StreamDef) console.Stream {
	return console.Stream{Name: d.Name, IsView: d.IsView, Schema: d.Schema(), EventTime: d.EventTime,
		WatermarkDelay: d.WatermarkDelay, Options: d.Options, Topic: topicOf(d.Name, d.Options), Job: d.Job,
		Statement: d.Statement}
}

func (c consoleEngine) Streams() []console.Stream {
	defs := c.e.cat.Streams()
	out := make([]console.Stream, len(defs))
	for i, d := range defs {
		out[i] = consoleStream(d)
	}
	return out
}

func (c consoleEngine) Stream(name string) (console.Stream, bool) {
	d, ok := c.e.cat.Stream(name)
	if !ok {
		return console.Stream{}, false
	}
	return consoleStream(d), true
}

func (c consoleEngine) Running(id string) console.Run {
	if rj := c.e.jobs.get(id); rj != nil {
		return consoleRun{rj}
	}
	return nil
}

func (c consoleEngine) RunningJobs() []console.Run {
	jobs := c.e.jobs.list()
	out := make([]console.Run, len(jobs))
	for i, rj := range jobs {
		out[i] = consoleRun{rj}
	}
	return out
}

// Instances names who runs the job: this process alone, or in cluster mode each live
// member with the units the division gives it.
func (c consoleEngine) Instances(id string, run console.Run) []console.Instance {
	cl := c.e.cluster
	if cl == nil {
		if run == nil {
			return nil
		}
		return []console.Instance{{Name: "this server", Self: true}}
	}
	cl.mu.Lock()
	members := append([]string(nil), cl.members.Members()...)
	cl.mu.Unlock()
	sort.Strings(members)
	var out []console.Instance
	for _, m := range members {
		if got := cl.assigned(id, m); len(got) > 0 {
			out = append(out, console.Instance{Name: m, Units: cluster.UnitNames(got), Self: m == cl.self.Name})
		}
	}
	return out
}

// Plan is the physical plan of a job: the one its run here executes, else planned again
// from its statement as a restart would.
func (c consoleEngine) Plan(id string) (*planner.Physical, error) {
	if rj := c.e.jobs.get(id); rj != nil {
		return rj.job.Plan(), nil
	}
	def, ok := c.e.cat.Job(id)
	if !ok {
		return nil, sql.Errorf(sql.CodeUnknownTable, "job %q does not exist", id)
	}
	q, sink, err := c.e.jobQuery(def)
	if err != nil {
		return nil, err
	}
	if sink.Connector == "view" && c.e.cluster != nil {
		sink = planner.SinkSpec{Schema: sink.Schema}
	}
	_, p, err := planner.Plan(q, def.planOptions(sink))
	return p, err
}

func (c consoleEngine) JobControl(act sql.JobAction, id string) error {
	_, err := c.e.jobControl(&sql.JobControl{Action: act, ID: id})
	return err
}

func (c consoleEngine) Execute(ctx context.Context, sess *pgwire.Session, text string, params []sql.Value) ([]*pgwire.Result, error) {
	return c.e.Execute(ctx, sess, text, params)
}

func (c consoleEngine) Users() auth.UserStore { return c.e.cat }

// consoleRun is a job running here as the console sees it; it compares equal to another
// only for the same run.
type consoleRun struct{ rj *runningJob }

func (r consoleRun) ID() string                    { return r.rj.def.ID }
func (r consoleRun) Stats() exec.JobStats          { return r.rj.job.Stats() }
func (r consoleRun) StageStats() []exec.StageStats { return r.rj.job.StageStats() }
func (r consoleRun) Plan() *planner.Physical       { return r.rj.job.Plan() }
func (r consoleRun) InputRate() float64            { return r.rj.rate.perSecond() }
func (r consoleRun) Checkpoint() (nanos, size, count int64) {
	if cps := r.rj.checkpoints; cps != nil {
		if n := cps.count.Load(); n > 0 {
			return cps.lastNanos.Load(), cps.lastBytes.Load(), n
		}
	}
	return 0, 0, 0
}
