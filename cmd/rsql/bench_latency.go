package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"rsql/broker"
	"rsql/exec"
	"rsql/server"
)

// BenchLatencyCmd measures born-to-delivery latency through a continuous job with
// exactly-once output: events are appended to a topic of the bundled broker at a steady
// rate, each carrying the wall-clock time it was born; a job reads the topic and writes a
// topic; a consumer long-polls the output topic and, for each row, takes the time from the
// row's birth to its delivery (stateless job), or from the wall-clock moment its window
// closed to its delivery (windowed job). Everything runs in one process (rsql server's
// System), so the clocks are the same.
type BenchLatencyCmd struct {
	Rate       int           `name:"rate" default:"100000" help:"Events per second appended to the input topic."`
	Duration   time.Duration `name:"duration" default:"10s" help:"How long events are appended (the first second is warm-up, not measured)."`
	Queues     int           `name:"queues" default:"4" help:"Queues of the input and output topics."`
	Job        string        `name:"job" enum:"filter,window,both" default:"both" help:"filter: a stateless filter topic -> topic; window: a 1 s tumbling COUNT per key; both: one after the other."`
	Checkpoint string        `name:"checkpoint-interval" default:"" help:"The jobs' checkpoint_interval, e.g. 1s; comma-separated to compare several in one run (default: the server's default)."`
	Throughput int           `name:"throughput-events" default:"2000000" help:"Also run each setting unpaced over this many pre-appended events and report events/s (0: skip)."`
	CPUProfile string        `name:"cpuprofile" help:"Write a CPU profile of each paced run to FILE.<job>.<interval>."`
	MemProfile string        `name:"memprofile" help:"Write an allocation profile of the whole command (every allocation sampled since it started; pprof -sample_index=alloc_space) to FILE when it ends."`
	Progress   bool          `name:"progress" help:"Print events sent, read, written and delivered every 50,000 events (standard error)."`
}

type latencyResult struct {
	Job        string  `json:"job"`
	Checkpoint string  `json:"checkpoint_interval"`
	Rate       int     `json:"rate"`
	Rows       int     `json:"rows"`
	P50, P90   float64 `json:"-"`
	P99, Max   float64 `json:"-"`
	Through    float64 `json:"-"`
	Epochs     int64   `json:"-"`
	// Phases are the job's checkpoint phase histograms (exec.CheckpointTimes).
	Phases exec.CheckpointTimes `json:"-"`
}

func (c *BenchLatencyCmd) Run() error {
	if c.Rate <= 0 || c.Duration <= time.Second || c.Queues <= 0 {
		return &exitError{"--rate and --queues must be positive, --duration above 1s"}
	}
	jobs := []string{c.Job}
	if c.Job == "both" {
		jobs = []string{"filter", "window"}
	}
	intervals := []string{""}
	if c.Checkpoint != "" {
		intervals = strings.Split(c.Checkpoint, ",")
	}
	fmt.Printf("rsql bench latency: %d events/s for %v over %d queues, exactly-once topic output; %s/%s, %d CPUs, %s\n\n",
		c.Rate, c.Duration, c.Queues, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	fmt.Printf("%-7s %-11s %9s %8s %8s %8s %8s %11s %12s\n", "job", "checkpoint", "rows", "p50 ms", "p90 ms", "p99 ms", "max ms", "checkpoints", "unpaced ev/s")
	var all []latencyResult
	for _, job := range jobs {
		for _, iv := range intervals {
			r, err := c.runOne(job, strings.TrimSpace(iv))
			if err != nil {
				return err
			}
			name := r.Checkpoint
			if name == "" {
				name = "default"
			}
			through := "-"
			if r.Through > 0 {
				through = strconv.FormatFloat(r.Through, 'f', 0, 64)
			}
			fmt.Printf("%-7s %-11s %9d %8.1f %8.1f %8.1f %8.1f %11d %12s\n", r.Job, name, r.Rows, r.P50, r.P90, r.P99, r.Max, r.Epochs, through)
			r.Checkpoint = name
			all = append(all, r)
		}
	}
	fmt.Printf("\ncheckpoint phases of the paced runs, ms (upper bounds of power-of-two buckets; max exact):\n")
	fmt.Printf("%-7s %-11s %-8s %8s %8s %8s %8s\n", "job", "checkpoint", "phase", "p50", "p90", "p99", "max")
	for _, r := range all {
		for _, ph := range []struct {
			name string
			h    *exec.DurationHistogram
		}{{"align", &r.Phases.Align}, {"commit", &r.Phases.Commit}, {"publish", &r.Phases.Publish}, {"total", &r.Phases.Total}} {
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			fmt.Printf("%-7s %-11s %-8s %8.2f %8.2f %8.2f %8.2f\n", r.Job, r.Checkpoint, ph.name,
				ms(ph.h.Quantile(0.5)), ms(ph.h.Quantile(0.9)), ms(ph.h.Quantile(0.99)), ms(ph.h.Max))
		}
	}
	fmt.Printf("\nfilter: from an event's birth (appended to the input topic) to its delivery to a consumer of\n")
	fmt.Printf("the output topic. window: from the wall-clock end of its 1 s window (the watermark has no\n")
	fmt.Printf("delay) to the delivery of the window's row, for the windows that events after their end\n")
	fmt.Printf("closed (not the last one, closed by the idle timeout once events stop). unpaced: the same\n")
	fmt.Printf("job over pre-appended events. Phases: align = barrier injected until every stage of the\n")
	fmt.Printf("commit group handed its part over, commit = the atomic write, publish = the outbox appended.\n")
	if c.MemProfile != "" {
		return writeAllocsProfile(c.MemProfile)
	}
	return nil
}

const (
	latIn  = "lat_events"
	latOut = "lat_out"
)

func latencyDDL(queues int) string {
	return fmt.Sprintf(`CREATE STREAM lat_events (id BIGINT, k VARCHAR, born BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '0' SECOND) WITH (topic = '%s', queues = %d, idle_timeout = '100ms')`, latIn, queues)
}

func latencyJob(job string, queues int, interval string) string {
	with := fmt.Sprintf("topic = '%s', queues = %d", latOut, queues)
	if interval != "" {
		with += fmt.Sprintf(", checkpoint_interval = '%s'", interval)
	}
	if job == "window" {
		return fmt.Sprintf(`CREATE STREAM lat_out WITH (%s) AS
  SELECT k, window_end, COUNT(*) AS n FROM TUMBLE(lat_events, ts, INTERVAL '1' SECOND) GROUP BY k, window_start, window_end`, with)
	}
	return fmt.Sprintf(`CREATE STREAM lat_out WITH (%s) AS SELECT id, born FROM lat_events WHERE id %% 2 = 0`, with)
}

// latencyAppender appends the benchmark's input events. It shares the process with the
// server it measures, so it allocates little: the per-queue message lists are reused, and
// the bodies of one call share one buffer (the broker copies them into its log).
type latencyAppender struct {
	b   *broker.Broker
	byQ [][]broker.Message
}

func newLatencyAppender(b *broker.Broker, queues int) *latencyAppender {
	return &latencyAppender{b: b, byQ: make([][]broker.Message, queues)}
}

// append appends events [from, to) born now: event i has key k<i mod 100> and goes to
// queue i mod queues.
func (a *latencyAppender) append(from, to int64, now time.Time) error {
	born := now.UnixMicro()
	const bodyCap = 80 // about a body's size (a longer one only makes the buffer grow)
	bodies := make([]byte, 0, int(to-from)*bodyCap)
	for q := range a.byQ {
		clear(a.byQ[q])
		a.byQ[q] = a.byQ[q][:0]
	}
	for i := from; i < to; i++ {
		at := len(bodies)
		bodies = strconv.AppendInt(append(bodies, `{"id":`...), i, 10)
		bodies = strconv.AppendInt(append(bodies, `,"k":"k`...), i%100, 10)
		bodies = strconv.AppendInt(append(bodies, `","born":`...), born, 10)
		bodies = strconv.AppendInt(append(bodies, `,"ts":`...), born/1000, 10)
		bodies = append(bodies, '}')
		q := int(i % int64(len(a.byQ)))
		a.byQ[q] = append(a.byQ[q], broker.Message{Body: bodies[at:len(bodies):len(bodies)]})
	}
	for q, msgs := range a.byQ {
		if len(msgs) == 0 {
			continue
		}
		if _, err := a.b.Append(latIn, q, msgs); err != nil {
			return err
		}
	}
	return nil
}

func (c *BenchLatencyCmd) runOne(job, interval string) (latencyResult, error) {
	res := latencyResult{Job: job, Checkpoint: interval, Rate: c.Rate}
	dir, err := os.MkdirTemp("", "rsql-bench-latency-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	sys, err := server.StartSystem(server.SystemConfig{DataDir: dir, Log: io.Discard, Version: version})
	if err != nil {
		return res, err
	}
	defer sys.Close()
	eng, b := sys.Engine, sys.Broker
	if err := pipelineExec(eng, latencyDDL(c.Queues)); err != nil {
		return res, err
	}
	if err := b.CreateTopic(latOut, c.Queues); err != nil {
		return res, err
	}
	if err := pipelineExec(eng, latencyJob(job, c.Queues, interval)); err != nil {
		return res, err
	}
	id, err := onlyJob(eng, 10*time.Second)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Consumers: one per output queue, long-polling.
	var mu sync.Mutex
	// The observations hold no pointers and are sized for the run up front: the
	// consumers share the process with the job they measure, and a slice of time.Time
	// (which points to its location) that grows to hundreds of thousands was scanned by
	// every collection and copied at every growth.
	type obs struct {
		at  int64   // born (filter) or window end (window), Unix µs
		lat float64 // ms
	}
	lats := make([]obs, 0, int(float64(c.Rate)*c.Duration.Seconds())/2+1024)
	measureFrom := time.Now().Add(time.Second) // warm-up
	var wg sync.WaitGroup
	for q := 0; q < c.Queues; q++ {
		wg.Add(1)
		go func(q int) {
			defer wg.Done()
			var off int64
			var local []obs
			for ctx.Err() == nil {
				msgs, next, err := b.Pull(ctx, latOut, q, off, 1024, 50*time.Millisecond)
				if err != nil {
					return
				}
				now := time.Now()
				off = next
				local = local[:0]
				for _, m := range msgs {
					var at time.Time
					if job == "window" {
						t, ok := parseJSONTime(jsonField(m.Body, "window_end"))
						if !ok {
							continue
						}
						at = t
					} else {
						born, err := strconv.ParseInt(string(jsonField(m.Body, "born")), 10, 64)
						if err != nil {
							continue
						}
						at = time.UnixMicro(born)
					}
					if at.Before(measureFrom) {
						continue
					}
					local = append(local, obs{at.UnixMicro(), float64(now.Sub(at).Microseconds()) / 1000})
				}
				mu.Lock()
				lats = append(lats, local...)
				mu.Unlock()
			}
		}(q)
	}
	if c.CPUProfile != "" {
		stop, err := startCPUProfile(c.CPUProfile + "." + job + "." + strings.ReplaceAll(interval+"default", "default", ""))
		if err != nil {
			return res, err
		}
		defer stop()
	}
	// Producer: every millisecond, the events due by then.
	start := time.Now()
	var sent int64
	events := newLatencyAppender(b, c.Queues)
	for {
		now := time.Now()
		el := now.Sub(start)
		if el >= c.Duration {
			break
		}
		due := int64(el.Seconds() * float64(c.Rate))
		if c.Progress && due/50000 != sent/50000 {
			st, _ := eng.JobStats(id) // progress only: a job that is gone shows zeros here and fails below
			mu.Lock()
			n := len(lats)
			mu.Unlock()
			fmt.Fprintf(os.Stderr, "%6.2fs sent %d in %d out %d delivered %d epoch %d\n", el.Seconds(), sent, st.RecordsIn, st.RecordsOut, n, st.Epoch)
		}
		if due > sent {
			if err := events.append(sent, due, now); err != nil {
				return res, err
			}
			sent = due
		}
		time.Sleep(time.Millisecond)
	}
	lastBorn := time.Now()
	// Let the last rows (and, for windows, the window closed by the idle timeout) arrive.
	time.Sleep(2500 * time.Millisecond)
	cancel()
	wg.Wait()
	st, ok := eng.JobStats(id)
	if !ok {
		return res, fmt.Errorf("job %s is gone: no counters", id)
	}
	res.Epochs = st.Epoch
	if res.Phases, ok = eng.JobCheckpointTimes(id); !ok {
		return res, fmt.Errorf("job %s is gone: no checkpoint times", id)
	}
	var ms []float64
	for _, o := range lats {
		// A window that ends after the last event closes by the idle timeout, not by the
		// watermark: its wait is the timeout's, which this does not measure.
		if job == "window" && o.at > lastBorn.UnixMicro() {
			continue
		}
		ms = append(ms, o.lat)
	}
	if len(ms) == 0 {
		return res, fmt.Errorf("%s job: no rows delivered (job stats %+v)", job, st)
	}
	slices.Sort(ms)
	pct := func(p float64) float64 { return ms[min(len(ms)-1, int(p*float64(len(ms))))] }
	res.Rows, res.P50, res.P90, res.P99, res.Max = len(ms), pct(0.5), pct(0.9), pct(0.99), ms[len(ms)-1]
	if c.Throughput > 0 {
		t, err := c.throughput(job, interval)
		if err != nil {
			return res, err
		}
		res.Through = t
	}
	return res, nil
}

// throughput runs the job over Throughput pre-appended events and returns events/s until
// it has read them all.
func (c *BenchLatencyCmd) throughput(job, interval string) (float64, error) {
	dir, err := os.MkdirTemp("", "rsql-bench-latency-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	sys, err := server.StartSystem(server.SystemConfig{DataDir: dir, Log: io.Discard, Version: version})
	if err != nil {
		return 0, err
	}
	defer sys.Close()
	eng, b := sys.Engine, sys.Broker
	if err := pipelineExec(eng, latencyDDL(c.Queues)); err != nil {
		return 0, err
	}
	now := time.Now()
	events := newLatencyAppender(b, c.Queues)
	for from := int64(0); from < int64(c.Throughput); from += 4096 {
		// 10,000 events per second of event time, so windows close as they would.
		if err := events.append(from, min(from+4096, int64(c.Throughput)), now.Add(time.Duration(from)*100*time.Microsecond)); err != nil {
			return 0, err
		}
	}
	runtime.GC()
	start := time.Now()
	if err := pipelineExec(eng, latencyJob(job, c.Queues, interval)); err != nil {
		return 0, err
	}
	id, err := onlyJob(eng, 10*time.Second)
	if err != nil {
		return 0, err
	}
	for {
		st, ok := eng.JobStats(id)
		if !ok {
			return 0, fmt.Errorf("job %s stopped", id)
		}
		if st.RecordsIn >= int64(c.Throughput) {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return 0, fmt.Errorf("job read %d of %d events in 5 minutes", st.RecordsIn, c.Throughput)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return float64(c.Throughput) / time.Since(start).Seconds(), nil
}

// parseJSONTime reads a timestamp written by the JSON format: epoch milliseconds or text.
func parseJSONTime(raw json.RawMessage) (time.Time, bool) {
	if ms, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return time.UnixMilli(ms), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return time.Time{}, false
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// jsonField returns the raw value of a top-level field of a flat JSON object (the rows the
// jobs write: no nesting, no escaped quotes in keys), or nil.
func jsonField(body []byte, name string) []byte {
	i := bytes.Index(body, []byte(`"`+name+`":`))
	if i < 0 {
		return nil
	}
	v := body[i+len(name)+3:]
	end := 0
	if len(v) > 0 && v[0] == '"' {
		end = bytes.IndexByte(v[1:], '"') + 2
		if end < 2 {
			return nil
		}
	} else {
		for end < len(v) && v[end] != ',' && v[end] != '}' {
			end++
		}
	}
	return v[:end]
}
