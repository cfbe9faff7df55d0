package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"rsql/server"
)

// BenchViewCmd measures a materialized view of many keys across a restart (docs/sql.md,
// "What a materialized view keeps"): a topic of JSON events pre-produced into the bundled
// broker, a view COUNT/SUM by key over it, built until it holds every key; then the server
// is closed and started again on the same data directory, and the first pull query of
// every row is timed, with the process's peak RSS from the restart on.
type BenchViewCmd struct {
	Keys        int    `name:"keys" default:"1000000" help:"Distinct keys of the view."`
	Events      int    `name:"events" default:"0" help:"Events (0: twice the keys)."`
	Queues      int    `name:"queues" default:"4" help:"Queues of the event topic (the job's splits)."`
	HeapProfile string `name:"heapprofile" help:"Write a heap profile of the build at its peak of live heap (sampled every 100 ms) to FILE."`
}

func (c *BenchViewCmd) Run() error {
	if c.Events == 0 {
		c.Events = 2 * c.Keys
	}
	if c.Keys <= 0 || c.Events < c.Keys || c.Queues <= 0 {
		return &exitError{"--keys and --queues must be positive and --events at least --keys"}
	}
	dir, err := os.MkdirTemp("", "rsql-bench-view-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Printf("rsql bench view: %d keys, %d JSON events, %d queues, a view COUNT/SUM by key; %s/%s, %d CPUs, %s\n\n",
		c.Keys, c.Events, c.Queues, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	cfg := server.SystemConfig{DataDir: dir, Log: io.Discard, Version: version, MaxResultBytes: -1}

	// Build the view.
	sys, err := server.StartSystem(cfg)
	if err != nil {
		return err
	}
	if err := pipelineExec(sys.Engine, pipelineDDL(c.Queues)); err != nil {
		sys.Close()
		return err
	}
	if err := produceEvents(sys.Broker, c.Queues, 0, c.Events, c.Keys, 100_000); err != nil {
		sys.Close()
		return err
	}
	resetPeakRSS()
	stopPeak := func() error { return nil }
	if c.HeapProfile != "" {
		stopPeak = peakHeapProfile(c.HeapProfile)
	}
	start := time.Now()
	if err := pipelineExec(sys.Engine, `CREATE MATERIALIZED VIEW per_key AS
  SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM bench_events GROUP BY user_id`); err != nil {
		sys.Close()
		return err
	}
	// Built when the job has read every event, every key is there and none has fewer rows
	// than every key gets (events go to the keys in turn).
	id, err := onlyJob(sys.Engine, 10*time.Second)
	if err != nil {
		sys.Close()
		return err
	}
	if err := waitConsumed(sys.Engine, id, int64(c.Events), 20*time.Minute); err != nil {
		sys.Close()
		return err
	}
	read := time.Since(start)
	behind := fmt.Sprintf(`SELECT COUNT(*) FROM per_key WHERE n < %d`, c.Events/c.Keys)
	for {
		n, err := viewCount(sys.Engine, `SELECT COUNT(*) FROM per_key`)
		if err != nil {
			sys.Close()
			return err
		}
		short := int64(-1)
		if n == int64(c.Keys) {
			if short, err = viewCount(sys.Engine, behind); err != nil {
				sys.Close()
				return err
			}
		}
		if short == 0 {
			break
		}
		if time.Since(start) > 20*time.Minute {
			sys.Close()
			return fmt.Errorf("the view holds %d keys after 20 minutes, want %d", n, c.Keys)
		}
		time.Sleep(500 * time.Millisecond)
	}
	build, buildRSS := time.Since(start), peakRSSMiB()
	if err := stopPeak(); err != nil {
		sys.Close()
		return err
	}
	if err := sys.Close(); err != nil {
		return err
	}

	// Start again and read every row.
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	start = time.Now()
	sys, err = server.StartSystem(cfg)
	if err != nil {
		return err
	}
	defer sys.Close()
	started := time.Since(start)
	// First a query that reads every row and answers one (COUNT), then every row.
	n, err := viewCount(sys.Engine, `SELECT COUNT(*) FROM per_key`)
	if err != nil {
		return err
	}
	counted, countRSS := time.Since(start), peakRSSMiB()
	if n != int64(c.Keys) {
		return fmt.Errorf("the first pull query after the restart counted %d rows, want %d", n, c.Keys)
	}
	t0 := time.Now()
	rows, err := viewRows(sys.Engine)
	if err != nil {
		return err
	}
	all := time.Since(t0)
	if rows != int64(c.Keys) {
		return fmt.Errorf("a pull query of every row after the restart gave %d rows, want %d", rows, c.Keys)
	}
	fmt.Printf("built: the job read every event %.2f s after CREATE MATERIALIZED VIEW, every key in the view at %.2f s; peak RSS %.0f MiB\n", read.Seconds(), build.Seconds(), buildRSS)
	fmt.Printf("restart: server started in %.2f s; the first pull query, reading every row (COUNT(*): %d), done %.2f s after the start; peak RSS %.0f MiB\n",
		started.Seconds(), n, counted.Seconds(), countRSS)
	fmt.Printf("then SELECT * of every row (%d rows, the result held whole) in %.2f s; peak RSS %.0f MiB\n", rows, all.Seconds(), peakRSSMiB())
	return nil
}

// viewCount is the count a pull query SELECT COUNT(*) ... gives.
func viewCount(eng *server.Engine, query string) (int64, error) {
	var n int64
	err := pullEach(eng, query, func(r []any) { n = r[0].(int64) })
	return n, err
}

// viewRows reads every row of per_key and counts them.
func viewRows(eng *server.Engine) (int64, error) {
	var n int64
	err := pullEach(eng, `SELECT * FROM per_key`, func([]any) { n++ })
	return n, err
}

// pullEach runs a query and calls fn with each row's values.
func pullEach(eng *server.Engine, query string, fn func([]any)) error {
	ctx := context.Background()
	res, err := eng.Execute(ctx, server.NewSession(), query, nil)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Rows == nil {
			continue
		}
		for {
			row, err := r.Rows.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Rows.Close()
				return err
			}
			vals := make([]any, len(row))
			for i, v := range row {
				vals[i] = v.I
			}
			fn(vals)
		}
		r.Rows.Close()
	}
	return nil
}
