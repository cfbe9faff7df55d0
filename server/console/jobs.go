package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"rsql/planner"
	"rsql/server/auth"
	"rsql/sql"
)

// jobJSON is a job in the API's list and at the top of its own page.
type jobJSON struct {
	ID        string   `json:"id"`
	Statement string   `json:"statement"`
	State     string   `json:"state"`
	Error     string   `json:"error,omitempty"`
	Sink      string   `json:"sink"`
	Sources   []string `json:"sources"`
	// Running says this process runs (its part of) the job; the counters are then live,
	// else the ones it had when it last stopped.
	Running     bool         `json:"running"`
	Instances   []instJSON   `json:"instances"`
	InputRate   *float64     `json:"input_rate"`
	OutputRate  *float64     `json:"output_rate"`
	RecordsIn   int64        `json:"records_in"`
	RecordsOut  int64        `json:"records_out"`
	BytesIn     int64        `json:"bytes_in"`
	BytesOut    int64        `json:"bytes_out"`
	Lag         *int64       `json:"lag"`
	Watermark   *string      `json:"watermark"`
	WatermarkMs *int64       `json:"watermark_ms"`
	WMDelayMs   *int64       `json:"watermark_delay_ms"`
	Late        int64        `json:"late"`
	Bad         int64        `json:"bad"`
	Checkpoint  *ckptJSON    `json:"checkpoint"`
	Detail      *jobDetail   `json:"detail,omitempty"`
	History     *historyJSON `json:"history,omitempty"`
}

type instJSON struct {
	Name string `json:"name"`
	// Units are the source splits the instance runs (cluster mode, a job divided by
	// split), or ["*"] for a job run whole.
	Units []string `json:"units,omitempty"`
	Self  bool     `json:"self"`
}

type ckptJSON struct {
	Epoch      int64   `json:"epoch"`
	DurationMs float64 `json:"duration_ms"`
	SizeBytes  int64   `json:"size_bytes"`
	Count      int64   `json:"count"`
}

// jobDetail is what only a job's own page shows.
type jobDetail struct {
	Splits    []splitJSON         `json:"splits"`
	Stages    []stageJSON         `json:"stages"`
	Nodes     map[string]nodeJSON `json:"nodes"`
	BadErrors []string            `json:"bad_errors"`
}

type splitJSON struct {
	Stage       int     `json:"stage"`
	Stream      string  `json:"stream,omitempty"`
	Split       string  `json:"split"`
	Offset      int64   `json:"offset"`
	Watermark   *string `json:"watermark"`
	MaxEvent    *string `json:"max_event_time"`
	Lag         *int64  `json:"lag"`
	Idle        bool    `json:"idle"`
	Done        bool    `json:"done"`
	WatermarkMs *int64  `json:"watermark_ms"`
}

type stageJSON struct {
	ID          int      `json:"id"`
	Watermark   *string  `json:"watermark"`
	WatermarkMs *int64   `json:"watermark_ms"`
	WMDelayMs   *int64   `json:"watermark_delay_ms"`
	Lag         *int64   `json:"lag"`
	Splits      int      `json:"splits"`
	InputRate   *float64 `json:"input_rate"`
	OutputRate  *float64 `json:"output_rate"`
}

// nodeJSON is the rows that left a plan node (planner.Graph ids) and their rate over the
// last sample interval.
type nodeJSON struct {
	Rows int64    `json:"rows"`
	Rate *float64 `json:"rate"`
}

type historyJSON struct {
	IntervalMs int64       `json:"interval_ms"`
	WindowMs   int64       `json:"window_ms"`
	Points     []pointJSON `json:"points"`
}

type pointJSON struct {
	T            int64    `json:"t"`
	InputRate    *float64 `json:"input_rate"`
	OutputRate   *float64 `json:"output_rate"`
	Lag          *int64   `json:"lag"`
	WMDelayMs    *int64   `json:"watermark_delay_ms"`
	CheckpointMs *float64 `json:"checkpoint_ms"`
	Epoch        int64    `json:"epoch"`
}

func ptr[T any](v T) *T { return &v }

// jobSummary describes def with the live counters of rj (nil: not running here) and the
// last sample of its history.
func (c *console) jobSummary(def Job, rj Run, v jobView) jobJSON {
	j := jobJSON{ID: def.ID, Statement: def.Statement, State: def.State, Error: def.Error, Sink: def.Sink,
		Sources: def.Sources, Running: rj != nil, Instances: c.instances(def, rj)}
	if j.Sources == nil {
		j.Sources = []string{}
	}
	if rj == nil {
		if l := def.Last; l != nil {
			j.RecordsIn, j.RecordsOut, j.Late, j.Bad = l.RecordsIn, l.RecordsOut, l.Late, l.Bad
			if l.Watermark != nil {
				j.Watermark, j.WatermarkMs = wmText(*l.Watermark), ptr(*l.Watermark)
			}
		}
		return j
	}
	st := rj.Stats()
	j.RecordsIn, j.RecordsOut, j.BytesIn, j.BytesOut = st.RecordsIn, st.RecordsOut, st.BytesIn, st.BytesOut
	j.Late, j.Bad = st.Late, st.Bad
	if lag := jobLag(st); lag >= 0 {
		j.Lag = &lag
	}
	if finiteWM(st.Watermark) {
		j.Watermark, j.WatermarkMs = wmText(st.Watermark), ptr(st.Watermark)
		j.WMDelayMs = ptr(max(0, time.Now().UnixMilli()-st.Watermark))
	}
	if v.current && v.latest.HasRates {
		j.InputRate, j.OutputRate = ptr(v.latest.InRate), ptr(v.latest.OutRate)
	} else {
		j.InputRate = ptr(rj.InputRate())
	}
	if nanos, size, count := rj.Checkpoint(); count > 0 {
		j.Checkpoint = &ckptJSON{Epoch: st.Epoch, DurationMs: float64(nanos) / 1e6,
			SizeBytes: size, Count: count}
	} else if st.Epoch > 0 {
		j.Checkpoint = &ckptJSON{Epoch: st.Epoch}
	}
	return j
}

// instances names who runs the job: this process alone, or in cluster mode each live
// member with the units the division gives it.
func (c *console) instances(def Job, rj Run) []instJSON {
	out := []instJSON{}
	for _, in := range c.e.Instances(def.ID, rj) {
		out = append(out, instJSON{Name: in.Name, Units: in.Units, Self: in.Self})
	}
	return out
}

func (c *console) listJobs(w http.ResponseWriter, r *http.Request) {
	out := []jobJSON{}
	for _, def := range c.e.Jobs() {
		rj := c.e.Running(def.ID)
		out = append(out, c.jobSummary(def, rj, c.hist.view(def.ID, rj, 1<<62)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out})
}

// jobDef finds a job by any of the spellings PAUSE JOB accepts.
func (c *console) jobDef(w http.ResponseWriter, id string) (Job, bool) {
	def, ok := c.e.Job(id)
	if !ok {
		apiError(w, http.StatusNotFound, sql.CodeUnknownTable, "job "+`"`+id+`"`+" does not exist (GET /api/v1/jobs lists them)")
	}
	return def, ok
}

func (c *console) getJob(w http.ResponseWriter, r *http.Request) {
	def, ok := c.jobDef(w, r.PathValue("id"))
	if !ok {
		return
	}
	since, err := queryInt(r, "since", 0, 0, 1<<62)
	if err != nil {
		apiError(w, http.StatusBadRequest, "", err.Error())
		return
	}
	rj := c.e.Running(def.ID)
	v := c.hist.view(def.ID, rj, since)
	j := c.jobSummary(def, rj, v)
	d := &jobDetail{Splits: []splitJSON{}, Stages: []stageJSON{}, Nodes: map[string]nodeJSON{}, BadErrors: []string{}}
	if rj != nil {
		st := rj.Stats()
		d.BadErrors = append(d.BadErrors, st.BadErrors...)
		now := time.Now().UnixMilli()
		stageLag := map[int]int64{}
		stageSplits := map[int]int{}
		for _, sp := range st.Splits {
			s := splitJSON{Stage: sp.Stage, Stream: sp.Stream, Split: sp.Split, Offset: sp.Offset, Idle: sp.Idle, Done: sp.Done,
				Watermark: wmText(sp.Watermark), MaxEvent: wmText(sp.MaxEventTime)}
			if finiteWM(sp.Watermark) {
				s.WatermarkMs = ptr(sp.Watermark)
			}
			stageSplits[sp.Stage]++
			if sp.Lag >= 0 {
				s.Lag = ptr(sp.Lag)
				stageLag[sp.Stage] += sp.Lag
			} else if _, ok := stageLag[sp.Stage]; !ok {
				stageLag[sp.Stage] = -1
			}
			d.Splits = append(d.Splits, s)
		}
		plan := rj.Plan()
		for _, ss := range rj.StageStats() {
			s := stageJSON{ID: ss.Stage, Watermark: wmText(ss.Watermark), Splits: stageSplits[ss.Stage]}
			if finiteWM(ss.Watermark) {
				s.WatermarkMs, s.WMDelayMs = ptr(ss.Watermark), ptr(max(0, now-ss.Watermark))
			}
			if lag, ok := stageLag[ss.Stage]; ok && lag >= 0 {
				s.Lag = ptr(lag)
			}
			if v.nodeRates != nil {
				var in float64
				for i := range ss.InputRows {
					in += v.nodeRates[planner.NodeID(ss.Stage, planner.FromInput(i))]
				}
				s.InputRate = &in
				if ps := plan.Stage(ss.Stage); ps != nil {
					s.OutputRate = ptr(v.nodeRates[planner.NodeID(ss.Stage, ps.Out)])
				}
			}
			d.Stages = append(d.Stages, s)
		}
		for id, n := range v.nodeRows {
			nj := nodeJSON{Rows: n}
			if v.nodeRates != nil {
				nj.Rate = ptr(v.nodeRates[id])
			}
			d.Nodes[id] = nj
		}
	}
	j.Detail = d
	h := &historyJSON{IntervalMs: c.hist.every.Milliseconds(), WindowMs: int64(c.hist.size) * c.hist.every.Milliseconds(), Points: []pointJSON{}}
	for _, s := range v.samples {
		p := pointJSON{T: s.T, Epoch: s.Epoch}
		if s.HasRates {
			p.InputRate, p.OutputRate = ptr(s.InRate), ptr(s.OutRate)
		}
		if s.Lag >= 0 {
			p.Lag = ptr(s.Lag)
		}
		if s.WMDelay >= 0 {
			p.WMDelayMs = ptr(s.WMDelay)
		}
		if s.HasCkpt {
			p.CheckpointMs = ptr(s.CkptMs)
		}
		h.Points = append(h.Points, p)
	}
	j.History = h
	writeJSON(w, http.StatusOK, j)
}

// planOf is the physical plan of a job: the one its run here executes, else planned again
// from its statement as a restart would.
func (c *console) planOf(def Job) (*planner.Physical, error) {
	if rj := c.e.Running(def.ID); rj != nil {
		return rj.Plan(), nil
	}
	return c.e.Plan(def.ID)
}

func (c *console) getPlan(w http.ResponseWriter, r *http.Request) {
	def, ok := c.jobDef(w, r.PathValue("id"))
	if !ok {
		return
	}
	p, err := c.planOf(def)
	if err != nil {
		engineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": def.ID, "graph": planner.Graph(p), "explain": planner.Explain(nil, p)})
}

// jobAction is POST /api/v1/jobs/{id}/pause|resume|terminate: the JOB statement of that
// name, through the engine, answered with the job as it is after.
func (c *console) jobAction(w http.ResponseWriter, r *http.Request) {
	action := strings.ToUpper(r.PathValue("action"))
	act, ok := map[string]sql.JobAction{"PAUSE": sql.JobPause, "RESUME": sql.JobResume, "TERMINATE": sql.JobTerminate}[action]
	if !ok {
		apiError(w, http.StatusNotFound, "", "no job action "+strconv.Quote(r.PathValue("action"))+" (pause, resume or terminate)")
		return
	}
	if u := consoleUser(r.Context()); u.Role != auth.RoleAdmin {
		apiError(w, http.StatusForbidden, "42501", fmt.Sprintf("permission denied: user %q is %s and may not %s a job (an admin may)", u.Name, auth.RoleText(u.Role), strings.ToLower(action)))
		return
	}
	def, ok := c.jobDef(w, r.PathValue("id"))
	if !ok {
		return
	}
	if err := c.e.JobControl(act, def.ID); err != nil {
		engineError(w, err)
		return
	}
	def, _ = c.e.Job(def.ID)
	rj := c.e.Running(def.ID)
	writeJSON(w, http.StatusOK, c.jobSummary(def, rj, c.hist.view(def.ID, rj, 1<<62)))
}
