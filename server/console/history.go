package console

import (
	"sync"
	"time"

	"rsql/exec"
	"rsql/planner"
)

// The console's job history: every consoleSampleEvery, the sampler reads each running job's
// counters and keeps, per job, the last consoleWindow of samples in a ring, so a page opened
// now can draw the last 15 minutes. Rates are differences between consecutive samples of
// the same run of the job; the first sample after a (re)start has none.

const (
	consoleSampleEvery = 2 * time.Second
	consoleWindow      = 15 * time.Minute
)

// histSample is one sample of a job; the Has* flags say whether a rate or the checkpoint
// duration was known (the JSON then says null).
type histSample struct {
	T        int64 // wall clock, epoch ms
	In, Out  int64 // counters at T
	InRate   float64
	OutRate  float64
	HasRates bool
	Lag      int64 // summed split lag; -1: unknown
	WMDelay  int64 // wall clock minus watermark, ms; -1: unknown
	CkptMs   float64
	HasCkpt  bool
	Epoch    int64
}

// jobHistory is the ring of one job's samples, and the row counts of its plan's nodes at
// the last sample with the rates since the one before (maps replaced, never changed, so a
// reader may keep them).
type jobHistory struct {
	ring  []histSample
	start int // index of the oldest sample
	n     int

	run       Run // the run the last sample came from
	nodeRows  map[string]int64
	nodeRates map[string]float64
}

func (h *jobHistory) add(s histSample) {
	if h.n < len(h.ring) {
		h.ring[(h.start+h.n)%len(h.ring)] = s
		h.n++
		return
	}
	h.ring[h.start] = s
	h.start = (h.start + 1) % len(h.ring)
}

func (h *jobHistory) last() (histSample, bool) {
	if h.n == 0 {
		return histSample{}, false
	}
	return h.ring[(h.start+h.n-1)%len(h.ring)], true
}

// since returns the samples taken after t (epoch ms), oldest first.
func (h *jobHistory) since(t int64) []histSample {
	out := make([]histSample, 0, h.n)
	for i := 0; i < h.n; i++ {
		s := h.ring[(h.start+i)%len(h.ring)]
		if s.T > t {
			out = append(out, s)
		}
	}
	return out
}

// consoleHistory samples the engine's jobs. mu guards jobs.
type consoleHistory struct {
	e     Engine
	every time.Duration
	size  int
	now   func() time.Time

	mu   sync.Mutex
	jobs map[string]*jobHistory
}

func newConsoleHistory(e Engine, every, window time.Duration) *consoleHistory {
	return &consoleHistory{e: e, every: every, size: int(window / every), now: time.Now, jobs: map[string]*jobHistory{}}
}

// run samples until done is closed.
func (c *consoleHistory) run(done <-chan struct{}) {
	t := time.NewTicker(c.every)
	defer t.Stop()
	c.sample()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			c.sample()
		}
	}
}

// sample takes one sample of every running job and forgets jobs with no sample in the
// window.
func (c *consoleHistory) sample() {
	now := c.now()
	ms := now.UnixMilli()
	running := c.e.RunningJobs()
	type taken struct {
		rj     Run
		st     exec.JobStats
		stages []exec.StageStats
	}
	snaps := make([]taken, len(running))
	for i, rj := range running {
		snaps[i] = taken{rj, rj.Stats(), rj.StageStats()}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range snaps {
		id := s.rj.ID()
		h := c.jobs[id]
		if h == nil {
			h = &jobHistory{ring: make([]histSample, c.size)}
			c.jobs[id] = h
		}
		smp := histSample{T: ms, In: s.st.RecordsIn, Out: s.st.RecordsOut, Lag: jobLag(s.st), WMDelay: -1, Epoch: s.st.Epoch}
		if wm := s.st.Watermark; finiteWM(wm) {
			smp.WMDelay = max(0, ms-wm)
		}
		if nanos, _, count := s.rj.Checkpoint(); count > 0 {
			smp.CkptMs, smp.HasCkpt = float64(nanos)/1e6, true
		}
		rows := nodeRows(s.rj.Plan(), s.stages)
		prev, ok := h.last()
		sameRun := ok && h.run == s.rj && ms > prev.T
		if sameRun {
			dt := float64(ms-prev.T) / 1000
			smp.InRate, smp.OutRate, smp.HasRates = float64(smp.In-prev.In)/dt, float64(smp.Out-prev.Out)/dt, true
			h.nodeRates = map[string]float64{}
			for k, v := range rows {
				h.nodeRates[k] = float64(v-h.nodeRows[k]) / dt
			}
		} else {
			h.nodeRates = nil
		}
		h.add(smp)
		h.run, h.nodeRows = s.rj, rows
	}
	for id, h := range c.jobs {
		if last, ok := h.last(); !ok || ms-last.T > int64(c.size)*c.every.Milliseconds() {
			delete(c.jobs, id)
		}
	}
}

// jobView is what the console shows of a job's history: its samples after since, the rates
// of its plan's nodes, and its stages' counters as of the last sample.
type jobView struct {
	samples   []histSample
	nodeRows  map[string]int64
	nodeRates map[string]float64
	latest    histSample
	hasLatest bool
	current   bool // the last sample is of the job's current run
}

func (c *consoleHistory) view(id string, rj Run, since int64) jobView {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.jobs[id]
	if h == nil {
		return jobView{}
	}
	v := jobView{samples: h.since(since), current: rj != nil && h.run == rj}
	v.latest, v.hasLatest = h.last()
	if v.current {
		v.nodeRows, v.nodeRates = h.nodeRows, h.nodeRates
	}
	return v
}

// nodeRows maps planner.Graph node ids to the rows that left each node: a stage input's
// and an operator's output, an exchange's rows as the downstream stage received them, a
// sink's rows written.
func nodeRows(p *planner.Physical, stages []exec.StageStats) map[string]int64 {
	out := map[string]int64{}
	byID := map[int]exec.StageStats{}
	for _, s := range stages {
		byID[s.Stage] = s
		for i, n := range s.InputRows {
			out[planner.NodeID(s.Stage, planner.FromInput(i))] = n
		}
		for i, n := range s.OpRows {
			out[planner.NodeID(s.Stage, planner.FromOp(i))] = n
		}
	}
	if p == nil {
		return out
	}
	for _, st := range p.Stages {
		if st.Exchange == nil {
			out[planner.OutputID(st.ID)] = byID[st.ID].OutputRows
			continue
		}
		var n int64
		for _, down := range p.Stages {
			for i, src := range down.Inputs {
				if src.FromStage == st.ID && i < len(byID[down.ID].InputRows) {
					n += byID[down.ID].InputRows[i]
				}
			}
		}
		out[planner.OutputID(st.ID)] = n
	}
	return out
}

// jobLag is the summed lag of the splits that know theirs, or -1 when none does.
func jobLag(st exec.JobStats) int64 {
	var total int64 = -1
	for _, sp := range st.Splits {
		if sp.Lag >= 0 {
			total = max(total, 0) + sp.Lag
		}
	}
	return total
}

func finiteWM(wm int64) bool { return wm > -1<<62 && wm < 1<<62 }
