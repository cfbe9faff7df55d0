package server

import (
	"fmt"
	"strings"

	"rsql/broker"
	"rsql/planner"
	"rsql/sql"
)

// replace runs CREATE OR REPLACE: d takes the place of the stream or view of its name. With
// j (a derived stream or a view), the query q is checked before anything changes, the
// old definition's job is stopped, and a new job starts writing sink. Other jobs that read
// or write the old stream make it refuse (55006, Catalog.ReplaceStream); docs/sql.md says
// what happens to the old output.
func (e *Engine) replace(d StreamDef, j *JobDef, q *sql.Query, sink planner.SinkSpec, tag string) (*Result, error) {
	var def JobDef
	if j != nil {
		if _, _, err := planner.Plan(q, planner.Options{Job: "check", Sink: sink, StateTTL: j.StateTTL}); err != nil {
			return nil, err
		}
		def = JobDef{Statement: j.Statement, State: JobRunning, Sink: d.Name, Sources: relationNames(q), StateTTL: j.StateTTL, Functions: j.Functions, Layout: newJobLayout}
	}
	if e.cluster != nil {
		e.jobs.startMu.Lock()
		defer e.jobs.startMu.Unlock()
	}
	old, _ := e.cat.Stream(d.Name)
	if o := d.StreamOptions(); j != nil && o.Connector == "file" {
		if w := e.fileWriter(o.Path, old.Job); w != "" {
			return nil, sql.Errorf(sql.CodeInUse, "CREATE OR REPLACE %s: job %s writes %s, and a file has one writer at a time (TERMINATE JOB %s first)", d.Name, w, o.Path, w)
		}
	}
	var jp *JobDef
	if j != nil {
		jp = &def
	}
	oldJob, newJob, err := e.cat.ReplaceStream(d, jp)
	if err != nil {
		return nil, err
	}
	if oldJob != "" {
		e.jobs.cancelRetry(oldJob)
		rj := e.jobs.get(oldJob)
		if rj != nil {
			rj.stop()
		}
		e.dropJobState(oldJob)
		if old, ok := e.cat.Job(oldJob); ok {
			e.releaseExternal(old, d)
		}
	}
	res := &Result{Tag: tag}
	if newJob != "" {
		def.ID = newJob
		if err := e.startJob(def, q, sink, true, 0); err != nil {
			e.cat.SetJobState(newJob, JobFailed, err.Error())
			return nil, err
		}
		res.Notice = e.startedNotice(newJob, d.Name)
		if oldJob != "" {
			res.Notice.Message = fmt.Sprintf("terminated job %s (the replaced definition's); %s", oldJob, res.Notice.Message)
		}
	}
	return res, nil
}

// checkTopicName refuses (42602) a topic name the broker would refuse or keeps for itself.
// what names the name's origin in the message.
func checkTopicName(what, topic string) error {
	if !broker.ValidTopic(topic) {
		return sql.Errorf(sql.CodeInvalidName, "%s: %q is not a valid topic name: a topic name is 1 to 127 characters, each a letter, a digit, '_', '-', '|' or '%%' (name the stream so, or give WITH (topic = '...'))", what, topic)
	}
	if broker.IsSystemTopic(topic) || strings.HasPrefix(topic, "rmq_sys_") || strings.HasPrefix(topic, "RMQ_SYS_") {
		return sql.Errorf(sql.CodeInvalidName, "%s: topic %q is reserved for the broker (names starting with %%RETRY%% or %%DLQ%%, rmq_sys_, TBW102 and SCHEDULE_TOPIC_XXXX are)", what, topic)
	}
	return nil
}

// checkPartitionColumns refuses (42703) a key or partitioned_by option that names a column
// the stream does not have (the planner would otherwise ignore the option).
func checkPartitionColumns(d StreamDef) error {
	schema := d.Schema()
	for _, opt := range []string{"partitioned_by", "key"} {
		v, ok := d.Options[opt]
		if !ok {
			continue
		}
		for _, name := range strings.Split(v, ",") {
			if schema.Index(strings.TrimSpace(name)) < 0 {
				return sql.Errorf(sql.CodeUnknownColumn, "%s = '%s': stream %s has no column %q", opt, v, d.Name, strings.TrimSpace(name))
			}
		}
	}
	return nil
}

// checkStreamTopic checks the topic of a stream on the broker (by default its name).
func checkStreamTopic(d StreamDef) error {
	o := d.StreamOptions()
	if o.Connector != "broker" {
		return nil
	}
	return checkTopicName("stream "+d.Name, o.TopicOf(d.Name))
}

// transactionResult answers BEGIN, COMMIT and ROLLBACK: rsql has no transactions, so they
// do nothing, and the notice says so (a warning for ROLLBACK, which undoes nothing).
func transactionResult(s *sql.Transaction) *Result {
	r := &Result{Tag: s.Action.String()}
	switch s.Action {
	case sql.TxBegin:
		r.Notice = &Notice{Severity: "NOTICE", Code: "00000", Message: "rsql has no transactions: BEGIN does nothing, and each statement takes effect when it runs"}
	case sql.TxCommit:
		r.Notice = &Notice{Severity: "NOTICE", Code: "00000", Message: "rsql has no transactions: COMMIT does nothing (each statement took effect when it ran)"}
	default:
		r.Notice = &Notice{Severity: "WARNING", Code: "25P01", Message: "rsql has no transactions: ROLLBACK undoes nothing (each statement took effect when it ran)"}
	}
	return r
}
