package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rsql/broker"
	"rsql/connectors"
	"rsql/server"
)

// BenchPipelineCmd measures a whole streaming job in one process: a topic of JSON events,
// pre-produced into the bundled broker, through a tumbling COUNT/SUM by key (RocksDB state)
// into a sink topic; with 1 s checkpoints and with checkpoints off; and the time a restarted
// system needs after kill -9 to be back to processing with a million keys of state.
type BenchPipelineCmd struct {
	Events       int    `name:"events" default:"2000000" help:"Events per throughput run."`
	Keys         int    `name:"keys" default:"10000" help:"Distinct group keys in throughput runs."`
	Queues       int    `name:"queues" default:"4" help:"Queues of the event topic (the job's splits)."`
	EventRate    int    `name:"event-rate" default:"100000" help:"Events per second of event time (so events/this = windows of 1 s)."`
	RecoveryKeys int    `name:"recovery-keys" default:"1000000" help:"Keys of state when the server is killed (0: skip the recovery run)."`
	Runs         int    `name:"runs" default:"3" help:"Throughput runs per mode, alternating (the table shows each; the summary their medians)."`
	CPUProfile   string `name:"cpuprofile" help:"Write CPU profiles of the timed part of the throughput runs to FILE.on and FILE.off."`
	Only         string `name:"only" enum:",on,off" default:"" help:"Run only the throughput runs with checkpoints on or off (for profiling)."`
	ChildDir     string `name:"child-dir" hidden:"" help:"Internal: run the to-be-killed side of the recovery run in this directory."`
}

const (
	pipelineTopic = "bench_events"
	pipelineSink  = "bench_totals"
	pipelineBase  = int64(1_700_000_000_000) // event time of the first event (ms)
)

func pipelineDDL(queues int) string {
	return fmt.Sprintf(`CREATE STREAM bench_events (user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (topic = '%s', queues = %d, idle_timeout = '1s')`, pipelineTopic, queues)
}

func pipelineJob(queues int, window, checkpoint string) string {
	return fmt.Sprintf(`CREATE STREAM bench_totals WITH (topic = '%s', queues = %d, checkpoint_interval = '%s') AS
  SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
  FROM TUMBLE(bench_events, ts, INTERVAL %s) GROUP BY user_id, window_start, window_end`,
		pipelineSink, queues, checkpoint, window)
}

// produceEvents appends events [from, to) to the topic: event i has key u<i mod keys>,
// amount i mod 100 + 0.5 and event time base + i*1000/rate, in time order per queue.
func produceEvents(b *broker.Broker, queues, from, to, keys, rate int) error {
	byQ := make([][]broker.Message, queues)
	flush := func() error {
		for q, batch := range byQ {
			if len(batch) == 0 {
				continue
			}
			if _, err := b.Append(pipelineTopic, q, batch); err != nil {
				return err
			}
			byQ[q] = batch[:0]
		}
		return nil
	}
	var body []byte
	for i := from; i < to; i++ {
		key := "u" + strconv.Itoa(i%keys)
		ts := pipelineBase + int64(i)*1000/int64(rate)
		body = append(body[:0], `{"user_id":"`...)
		body = append(body, key...)
		body = append(body, `","amount":`...)
		body = strconv.AppendInt(body, int64(i%100), 10)
		body = append(body, `.5,"ts":`...)
		body = strconv.AppendInt(body, ts, 10)
		body = append(body, '}')
		q := connectors.QueueOf([]byte(key), queues)
		byQ[q] = append(byQ[q], broker.Message{Key: key, Body: append([]byte(nil), body...)})
		if len(byQ[q]) == 512 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

func pipelineExec(eng *server.Engine, text string) error {
	_, err := eng.Execute(context.Background(), server.NewSession(), text, nil)
	return err
}

// onlyJob waits for the engine to run exactly one job and returns its id.
func onlyJob(eng *server.Engine, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ids := eng.RunningJobIDs(); len(ids) == 1 {
			return ids[0], nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "", fmt.Errorf("no running job after %v (running: %v)", timeout, eng.RunningJobIDs())
}

// waitConsumed polls the job until it has read want events of the event topic.
func waitConsumed(eng *server.Engine, id string, want int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st, ok := eng.JobStats(id)
		if !ok {
			return fmt.Errorf("job %s stopped", id)
		}
		var n int64
		for _, sp := range st.Splits {
			if sp.Stream == "bench_events" {
				n += sp.Offset
			}
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s read %d of %d events in %v (bad %d: %v)", id, n, want, timeout, st.Bad, st.BadErrors)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cpuTime is the CPU time this process has used, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// firedRows is how many result rows the windows that must have fired once every event is
// read hold: 1 s windows ending at least one window before the watermark (last event time
// minus the 1 s delay); a window's rows are its distinct keys, and a run of L consecutive
// event numbers has min(L, keys) distinct keys.
func firedRows(events, keys, rate int) int64 {
	last := int64(events-1) * 1000 / int64(rate)
	limit := last - 2000 // window ends <= limit fired for sure
	var rows int64
	for w := int64(0); (w+1)*1000 <= limit; w++ {
		// events i with i*1000/rate in [w*1000, (w+1)*1000)
		lo := (w*1000*int64(rate) + 999) / 1000
		hi := ((w+1)*1000*int64(rate) + 999) / 1000
		rows += min(hi-lo, int64(keys))
	}
	return rows
}

type pipelineRun struct {
	mode        string
	events      int
	readSecs    float64 // until every event was read
	readRate    float64
	secs        float64 // until every fired window's rows were written
	rate        float64
	cpuPerEvent float64 // µs of process CPU time (every thread) per event, until out
	checkpoints int64
	out         int64
}

func (c *BenchPipelineCmd) Run() error {
	if c.ChildDir != "" {
		return c.recoveryChild()
	}
	if c.Events <= 0 || c.Keys <= 0 || c.Queues <= 0 || c.EventRate <= 0 {
		return &exitError{"--events, --keys, --queues and --event-rate must be positive"}
	}
	fmt.Printf("rsql bench pipeline: %d JSON events, %d keys, %d queues, TUMBLE 1 s COUNT/SUM by key, RocksDB state; %s/%s, %d CPUs, %s\n\n",
		c.Events, c.Keys, c.Queues, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	var runs []pipelineRun
	for i := 0; i < c.Runs; i++ {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true} // alternate which mode goes first
		}
		for _, on := range order {
			if c.Only == "on" && !on || c.Only == "off" && on {
				continue
			}
			r, err := c.throughput(on)
			if err != nil {
				return err
			}
			runs = append(runs, r)
			fmt.Fprintf(os.Stderr, "  %s: %.0f events/s\n", r.mode, r.rate)
		}
	}
	fmt.Printf("%-18s %9s %7s %10s %7s %10s %8s %11s %9s\n", "run", "events", "read s", "read ev/s", "out s", "out ev/s", "cpu µs/ev", "checkpoints", "rows out")
	var on, off, onOut, offOut, onCPU, offCPU []float64
	for _, r := range runs {
		fmt.Printf("%-18s %9d %7.2f %10.0f %7.2f %10.0f %9.2f %11d %9d\n", r.mode, r.events, r.readSecs, r.readRate, r.secs, r.rate, r.cpuPerEvent, r.checkpoints, r.out)
		if strings.HasPrefix(r.mode, "checkpoints 1s") {
			on, onOut, onCPU = append(on, r.readRate), append(onOut, r.rate), append(onCPU, r.cpuPerEvent)
		} else {
			off, offOut, offCPU = append(off, r.readRate), append(offOut, r.rate), append(offCPU, r.cpuPerEvent)
		}
	}
	if len(on) == 0 || len(off) == 0 {
		return nil
	}
	fmt.Printf("\nread s: until the job has read every event; out s: until it has also written the rows of\n")
	fmt.Printf("every window that must have fired (with checkpoints on, rows are published after the\n")
	fmt.Printf("checkpoint that covers them, so out s includes up to one checkpoint interval).\n")
	mOn, mOff, mOnOut, mOffOut := median(on), median(off), median(onOut), median(offOut)
	fmt.Printf("medians of %d alternating runs per mode:\n", len(on))
	fmt.Printf("sustained with 1 s checkpoints: %.0f events/s read, %.0f events/s to the sink (target >= 300000)\n", mOn, mOnOut)
	fmt.Printf("checkpoint cost: %.1f %% read, %.1f %% to the sink (1 - on/off; target <= 10 %%); CPU per event %+.1f %%\n",
		100*(1-mOn/mOff), 100*(1-mOnOut/mOffOut), 100*(median(onCPU)/median(offCPU)-1))
	if c.RecoveryKeys > 0 {
		if err := c.recovery(); err != nil {
			return err
		}
	}
	return nil
}

// throughput runs one job over pre-produced events and measures the rate until it has read
// them all and written the rows of every window that must have fired by then. With
// checkpoints on, the job has checkpoint_interval '1s' (exactly-once output: rows are
// published after the checkpoint that covers them); off is checkpoint_interval '-1s' (no
// periodic checkpoint, at-least-once output as rows are produced).
func (c *BenchPipelineCmd) throughput(checkpoints bool) (pipelineRun, error) {
	dir, err := os.MkdirTemp("", "rsql-bench-pipeline-")
	if err != nil {
		return pipelineRun{}, err
	}
	defer os.RemoveAll(dir)
	sys, err := server.StartSystem(server.SystemConfig{DataDir: dir, Log: io.Discard, Version: version})
	if err != nil {
		return pipelineRun{}, err
	}
	defer sys.Close()
	eng := sys.Engine
	if err := pipelineExec(eng, pipelineDDL(c.Queues)); err != nil {
		return pipelineRun{}, err
	}
	if err := produceEvents(sys.Broker, c.Queues, 0, c.Events, c.Keys, c.EventRate); err != nil {
		return pipelineRun{}, err
	}
	runtime.GC()
	interval, mode := "-1s", "checkpoints off"
	if checkpoints {
		interval, mode = "1s", "checkpoints 1s"
	}
	if c.CPUProfile != "" {
		// One profile per mode, of the timed part only: FILE.on and FILE.off.
		stop, err := startCPUProfile(c.CPUProfile + "." + map[bool]string{true: "on", false: "off"}[checkpoints])
		if err != nil {
			return pipelineRun{}, err
		}
		defer stop()
	}
	start, cpu0 := time.Now(), cpuTime()
	if err := pipelineExec(eng, pipelineJob(c.Queues, "'1' SECOND", interval)); err != nil {
		return pipelineRun{}, err
	}
	id, err := onlyJob(eng, 10*time.Second)
	if err != nil {
		return pipelineRun{}, err
	}
	err = waitConsumed(eng, id, int64(c.Events), 10*time.Minute)
	readSecs := time.Since(start).Seconds()
	wantOut := firedRows(c.Events, c.Keys, c.EventRate)
	for err == nil {
		st, ok := eng.JobStats(id)
		if !ok {
			err = fmt.Errorf("job %s stopped", id)
		} else if st.RecordsOut >= wantOut {
			break
		} else if time.Since(start) > 10*time.Minute || os.Getenv("RSQL_BENCH_DEBUG") != "" && time.Since(start) > 20*time.Second {
			fmt.Fprintf(os.Stderr, "stats: %+v\n", st)
			err = fmt.Errorf("job %s wrote %d of %d rows", id, st.RecordsOut, wantOut)
		}
		time.Sleep(5 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	cpu := (cpuTime() - cpu0).Seconds()
	r := pipelineRun{cpuPerEvent: cpu / float64(c.Events) * 1e6, mode: mode, events: c.Events, readSecs: readSecs, readRate: float64(c.Events) / readSecs,
		secs: secs, rate: float64(c.Events) / secs}
	if err != nil {
		return r, err
	}
	st, ok := eng.JobStats(id)
	if !ok {
		return r, fmt.Errorf("job %s is gone: no counters", id)
	}
	r.checkpoints, r.out = st.Epoch, st.RecordsOut
	if st.Bad > 0 {
		return r, fmt.Errorf("job %s had %d bad records: %v", id, st.Bad, st.BadErrors)
	}
	return r, nil
}

// recovery builds a million keys of state in a child rsql, kills it with SIGKILL, then starts
// the system again on its data directory and measures the time until the restarted job has
// read everything, including events appended after the restart.
func (c *BenchPipelineCmd) recovery() error {
	dir, err := os.MkdirTemp("", "rsql-bench-recovery-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self, "bench", "pipeline", "--child-dir", dir, "--recovery-keys", strconv.Itoa(c.RecoveryKeys),
		"--queues", strconv.Itoa(c.Queues))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	ready := ""
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "READY") {
			ready = line
			break
		}
	}
	if ready == "" {
		child.Process.Kill()
		child.Wait()
		return fmt.Errorf("the recovery child ended before its state was built")
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL: no shutdown, no final checkpoint
		return err
	}
	child.Wait()
	fmt.Printf("\nrecovery: child %s; killed with SIGKILL\n", strings.TrimPrefix(ready, "READY "))

	t0 := time.Now()
	sys, err := server.StartSystem(server.SystemConfig{DataDir: dir, Log: io.Discard, Version: version})
	if err != nil {
		return err
	}
	defer sys.Close()
	opened := time.Since(t0)
	// New events after the restart: the job is back to processing when it has read them.
	total := c.RecoveryKeys + c.RecoveryKeys/100
	more := total + 1000
	if err := produceEvents(sys.Broker, c.Queues, total, more, c.RecoveryKeys, c.EventRate); err != nil {
		return err
	}
	id, err := onlyJob(sys.Engine, 30*time.Second)
	if err != nil {
		return err
	}
	var first time.Duration
	for {
		st, ok := sys.Engine.JobStats(id)
		if !ok {
			return fmt.Errorf("restarted job %s stopped", id)
		}
		if first == 0 && st.RecordsIn > 0 {
			first = time.Since(t0)
		}
		var n int64
		for _, sp := range st.Splits {
			if sp.Stream == "bench_events" {
				n += sp.Offset
			}
		}
		if n >= int64(more) {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return fmt.Errorf("restarted job read %d of %d events in 5 minutes", n, more)
		}
		time.Sleep(2 * time.Millisecond)
	}
	caught := time.Since(t0)
	fmt.Printf("%-44s %8.2f s\n", "system open (broker + RocksDB + catalog)", opened.Seconds())
	fmt.Printf("%-44s %8.2f s\n", "first record read after restart", first.Seconds())
	fmt.Printf("%-44s %8.2f s (target <= 5 s)\n", "caught up (replayed tail + 1,000 new events)", caught.Seconds())
	return nil
}

// recoveryChild is the side of the recovery run that gets killed: it builds RecoveryKeys keys
// of open-window state, checkpoints it, reads an unchecked tail of 1 % more events, prints
// READY and waits to be killed.
func (c *BenchPipelineCmd) recoveryChild() error {
	sys, err := server.StartSystem(server.SystemConfig{DataDir: c.ChildDir, Log: io.Discard, Version: version})
	if err != nil {
		return err
	}
	eng := sys.Engine
	if err := pipelineExec(eng, pipelineDDL(c.Queues)); err != nil {
		return err
	}
	n := c.RecoveryKeys
	// One key per event, all in one one-hour window: every key stays in state.
	if err := produceEvents(sys.Broker, c.Queues, 0, n, n, 1<<30); err != nil {
		return err
	}
	if err := pipelineExec(eng, pipelineJob(c.Queues, "'1' HOUR", "1h")); err != nil {
		return err
	}
	id, err := onlyJob(eng, 10*time.Second)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := waitConsumed(eng, id, int64(n), 10*time.Minute); err != nil {
		return err
	}
	built := time.Since(start)
	start = time.Now()
	epoch, err := eng.CheckpointJob(context.Background(), id)
	if err != nil {
		return err
	}
	cpTime := time.Since(start)
	tail := n + n/100
	if err := produceEvents(sys.Broker, c.Queues, n, tail, n, 1<<30); err != nil {
		return err
	}
	if err := waitConsumed(eng, id, int64(tail), 10*time.Minute); err != nil {
		return err
	}
	fmt.Printf("READY %d keys of state read in %.2f s, checkpoint (epoch %d) took %.2f s, then %d more events read and not checkpointed\n",
		n, built.Seconds(), epoch, cpTime.Seconds(), tail-n)
	os.Stdout.Sync()
	select {} // wait for SIGKILL
}

// median is the middle value of xs (the mean of the two middle ones for an even count).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
