package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// BenchIdleCmd measures what idle jobs cost: it starts `rsql server` (this binary) on free
// loopback ports, measures the server's CPU over a stretch with no job, then creates a
// stream over a topic that receives nothing and --jobs tumbling-window jobs over it, and
// measures again once they run: CPU as a share of one core (user + system time of the
// process, /proc/PID/stat) and checkpoints per second per job (/metrics).
type BenchIdleCmd struct {
	Jobs     int           `name:"jobs" default:"100" help:"Idle jobs to run."`
	Duration time.Duration `name:"duration" default:"20s" help:"How long each stretch is measured."`
	Warmup   time.Duration `name:"warmup" default:"15s" help:"Wait after the server or the jobs started before measuring (past the splits' idle timeout and the checkpoints of the start)."`
	Server   string        `name:"server-binary" help:"Run this rsql binary as the server (default: this one), to compare builds."`
}

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

// processCPU is the user + system CPU time of process pid so far.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// metricSum sums the values of every series of metric name on a /metrics page.
func metricSum(ctx context.Context, httpAddr, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("/metrics: %q", line)
		}
		sum += v
	}
	return sum, sc.Err()
}

func (c *BenchIdleCmd) Run() error {
	if c.Jobs < 0 || c.Duration < time.Second {
		return &exitError{"--jobs must not be negative and --duration at least 1s"}
	}
	dir, err := os.MkdirTemp("", "rsql-bench-idle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	s, err := startBenchServer(ctx, c.Server, dir)
	if err != nil {
		return err
	}
	defer s.stop()
	// measure returns the server's CPU share of one core and the checkpoints taken per
	// second over --duration.
	// The /metrics scrapes stay outside the CPU measurement (a scrape of a hundred jobs'
	// series costs the server more than the jobs do idle).
	measure := func() (cpu, cps float64, err error) {
		k0, err := metricSum(ctx, s.httpAddr, "rsql_job_checkpoints_total")
		if err != nil {
			return 0, 0, err
		}
		t0 := time.Now()
		c0, err := processCPU(s.pid)
		if err != nil {
			return 0, 0, err
		}
		time.Sleep(c.Duration)
		c1, err := processCPU(s.pid)
		if err != nil {
			return 0, 0, err
		}
		el := time.Since(t0)
		k1, err := metricSum(ctx, s.httpAddr, "rsql_job_checkpoints_total")
		if err != nil {
			return 0, 0, err
		}
		return float64(c1-c0) / float64(el), (k1 - k0) / el.Seconds(), nil
	}
	fmt.Printf("rsql bench idle: %d tumbling-window jobs over a topic that receives nothing, %v per measurement; %s\n\n",
		c.Jobs, c.Duration, time.Now().UTC().Format("2006-01-02"))
	time.Sleep(c.Warmup)
	base, _, err := measure()
	if err != nil {
		return err
	}
	if _, err := s.conn.Exec(ctx, `CREATE STREAM idle_events (user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (topic = 'idle_events', queues = 4)`); err != nil {
		return err
	}
	for i := 0; i < c.Jobs; i++ {
		if _, err := s.conn.Exec(ctx, fmt.Sprintf(`CREATE STREAM idle_out_%d WITH (queues = 4) AS
  SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
  FROM TUMBLE(idle_events, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end`, i)); err != nil {
			return err
		}
	}
	time.Sleep(c.Warmup)
	cpu, cps, err := measure()
	if err != nil {
		return err
	}
	fmt.Printf("%-28s %14s %22s\n", "rsql server", "CPU % of a core", "checkpoints/s per job")
	fmt.Printf("%-28s %14.2f %22s\n", "no job", 100*base, "-")
	perJob := "-"
	if c.Jobs > 0 {
		perJob = fmt.Sprintf("%.2f", cps/float64(c.Jobs))
	}
	fmt.Printf("%-28s %14.2f %22s\n", fmt.Sprintf("%d idle jobs", c.Jobs), 100*cpu, perJob)
	return nil
}
