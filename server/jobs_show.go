package server

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rsql/exec"
	"rsql/server/cluster"
	"rsql/sql"
)

// rateMeter is a job's input rate: records per second over the last rateWindow samples
// taken every second. mu guards samples.
type rateMeter struct {
	mu      sync.Mutex
	samples []int64 // counter values, oldest first, one per second
}

const rateWindow = 5

// run samples count every second until done is closed. One goroutine (rateHub) samples
// every job's meter: a ticker per job woke an idle server a hundred times a second with a
// hundred jobs (docs/benchmarks.md, "Idle jobs").
func (m *rateMeter) run(done <-chan struct{}, count func() int64) {
	m.add(count())
	rates.join(m, count)
	<-done
	rates.leave(m)
}

// rateHub samples the registered meters every second while there are any.
type rateHub struct {
	mu     sync.Mutex
	meters map[*rateMeter]func() int64
	stop   chan struct{} // closes the sampling goroutine; nil when none runs
}

var rates rateHub

func (h *rateHub) join(m *rateMeter, count func() int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.meters == nil {
		h.meters = map[*rateMeter]func() int64{}
	}
	h.meters[m] = count
	if h.stop == nil {
		h.stop = make(chan struct{})
		go h.run(h.stop)
	}
}

func (h *rateHub) leave(m *rateMeter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.meters, m)
	if len(h.meters) == 0 && h.stop != nil {
		close(h.stop)
		h.stop = nil
	}
}

func (h *rateHub) run(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	type meter struct {
		m     *rateMeter
		count func() int64
	}
	var ms []meter
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		ms = ms[:0]
		for m, count := range h.meters {
			ms = append(ms, meter{m, count})
		}
		h.mu.Unlock()
		for _, x := range ms {
			x.m.add(x.count())
		}
	}
}

func (m *rateMeter) add(v int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, v)
	if len(m.samples) > rateWindow+1 {
		m.samples = m.samples[1:]
	}
}

// perSecond is the mean rate over the samples held; 0 before two samples exist.
func (m *rateMeter) perSecond() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) < 2 {
		return 0
	}
	return float64(m.samples[len(m.samples)-1]-m.samples[0]) / float64(len(m.samples)-1)
}

// showJobs is SHOW JOBS: per job its state, counters, input rate, lag per split,
// watermark and units: who runs which of its units ("<stage>/<split>"), in cluster mode
// every live instance with the units the division gives it ("rsql-1: 0/0 1/2; rsql-2:
// ..."; SHOW UNITS has each unit's owner in the shared store), on a single server the
// units the running job reads.
func (e *Engine) showJobs() *Result {
	cols := sql.Schema{{Name: "id", Type: sql.TypeVarchar}, {Name: "statement", Type: sql.TypeVarchar},
		{Name: "state", Type: sql.TypeVarchar}, {Name: "input_rate", Type: sql.TypeDouble},
		{Name: "records_in", Type: sql.TypeBigInt}, {Name: "records_out", Type: sql.TypeBigInt},
		{Name: "lag", Type: sql.TypeBigInt}, {Name: "lag_per_split", Type: sql.TypeVarchar},
		{Name: "watermark", Type: sql.TypeTimestamp}, {Name: "late", Type: sql.TypeBigInt},
		{Name: "bad", Type: sql.TypeBigInt}, {Name: "error", Type: sql.TypeVarchar},
		{Name: "units", Type: sql.TypeVarchar}}
	var rows []sql.Row
	for _, j := range e.cat.Jobs() {
		row := make(sql.Row, len(cols))
		state, errText := e.jobs.displayState(j)
		row[0], row[1], row[2], row[11] = sql.Varchar(j.ID), sql.Varchar(j.Statement), sql.Varchar(state), nullable(errText)
		rj := e.jobs.get(j.ID)
		if rj != nil {
			st := rj.job.Stats()
			row[3] = sql.Double(rj.rate.perSecond())
			row[4], row[5] = sql.BigInt(st.RecordsIn), sql.BigInt(st.RecordsOut)
			var total int64
			var per []string
			known := false
			for _, sp := range st.Splits {
				if sp.Lag < 0 {
					continue
				}
				known = true
				total += sp.Lag
				per = append(per, fmt.Sprintf("%s/%s:%d", sp.Stream, sp.Split, sp.Lag))
			}
			if known {
				row[6], row[7] = sql.BigInt(total), sql.Varchar(strings.Join(per, " "))
			}
			if st.Watermark > -1<<62 && st.Watermark < 1<<62 {
				row[8] = sql.Timestamp(st.Watermark)
			}
			row[9], row[10] = sql.BigInt(st.Late), sql.BigInt(st.Bad)
			if e.cluster == nil {
				var us []exec.Unit
				for _, sp := range st.Splits {
					us = append(us, exec.Unit{Stage: sp.Stage, Split: sp.Split})
				}
				if len(us) > 0 {
					cluster.SortUnits(us)
					row[12] = sql.Varchar("this server: " + strings.Join(cluster.UnitNames(us), " "))
				}
			}
		} else if l := j.Last; l != nil {
			// Not running here: the counters it had when it stopped (no rate, no lag).
			row[4], row[5] = sql.BigInt(l.RecordsIn), sql.BigInt(l.RecordsOut)
			if l.Watermark != nil {
				row[8] = sql.Timestamp(*l.Watermark)
			}
			row[9], row[10] = sql.BigInt(l.Late), sql.BigInt(l.Bad)
		}
		if e.cluster != nil && j.State == JobRunning {
			if a := e.cluster.assignment(j.ID); a != "" {
				row[12] = sql.Varchar(a)
			}
		}
		rows = append(rows, row)
	}
	return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "SHOW"}
}

// checkpointStats measures a job's checkpoint commits: how long the last took, how big it
// was, and how many there were. The fields are atomics: commits run on the job's committer
// goroutine while metrics and SHOW JOBS read them.
type checkpointStats struct {
	count      atomic.Int64
	lastNanos  atomic.Int64
	lastBytes  atomic.Int64
	totalNanos atomic.Int64
}

// measure wraps a job's commit function; nil (the runtime's default commit) stays nil and
// is not measured.
func (c *checkpointStats) measure(next func(*exec.CheckpointInfo) error) func(*exec.CheckpointInfo) error {
	if next == nil {
		return nil
	}
	return func(cp *exec.CheckpointInfo) error {
		start := time.Now()
		err := next(cp)
		if err == nil {
			d := time.Since(start).Nanoseconds()
			c.count.Add(1)
			c.lastNanos.Store(d)
			c.totalNanos.Add(d)
			if cp.State != nil {
				c.lastBytes.Store(int64(cp.State.Size()))
			}
		}
		return err
	}
}
