package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rsql/bench/nexmark"
)

// BenchNexmarkCmd runs Nexmark queries (bench/nexmark/q*.sql) as jobs in this process: the
// nexmark source, the query's operators, and a sink that discards the rows (docs/nexmark.md).
type BenchNexmarkCmd struct {
	GoMemoryFlag
	Query       string        `name:"query" default:"all" help:"Queries to run: q0,q1,... or all."`
	Events      int64         `name:"events" default:"10000000" help:"Events of the sequence (persons, auctions and bids together)."`
	Splits      int           `name:"splits" default:"1" help:"Splits of each stream, read in parallel."`
	State       string        `name:"state" enum:"memory,rocksdb" default:"memory" help:"State store of the jobs: memory or rocksdb."`
	Format      string        `name:"messages" enum:"rows,nexmark,json" default:"rows" help:"How the source hands events over: rows (typed rows, nothing encoded), nexmark (messages of event numbers the decoder generates) or json (rows written and parsed as JSON)."`
	Seed        uint64        `name:"seed" default:"0" help:"Seed of the generator."`
	EventRate   int64         `name:"event-rate" default:"10000000" help:"Events per second of event time (10 M: the published nexmark-flink suite)."`
	Checkpoint  time.Duration `name:"checkpoint-interval" default:"1s" help:"Checkpoint interval of the jobs (negative: only at the end)."`
	JoinCache   int           `name:"join-cache-keys" default:"0" help:"Join keys a regular join keeps in memory with rocksdb state (0: the engine's default, 16384; negative: all)."`
	Leveled     bool          `name:"rocksdb-leveled" help:"Open the rocksdb state with RocksDB's leveled compaction instead of universal compaction (the engine's default; docs/operations.md, \"Memory\")."`
	AggCache    int           `name:"agg-cache-groups" default:"0" help:"Groups an aggregation without a window (and partitions a Top-N or a window aggregate without one) keeps in memory with rocksdb state (0: the engine's default, 16384 groups, 16384/N partitions, 16384/(n+1) for ROWS n PRECEDING; negative: all)."`
	JSON        bool          `name:"json" help:"Print the results as JSON lines instead of a table."`
	CPUProfile  string        `name:"cpuprofile" help:"Write a CPU profile of each query to FILE.<query>."`
	MemProfile  string        `name:"memprofile" help:"Write an allocation profile of each query to FILE.<query>."`
	HeapProfile string        `name:"heapprofile" help:"Write a heap profile of each query at its peak of live heap (sampled every 100 ms) to FILE.<query>."`
	Broker      bool          `name:"through-broker" help:"Put the streams on topics of a bundled broker first (not timed) and have the jobs read them there."`
}

// nexmarkGoals are the events per CPU-second rsql aims at (docs/benchmarks.md).
var nexmarkGoals = map[string]float64{"q0": 2e6, "q1": 2e6, "q2": 2e6, "q3": 1e6, "q5": 800e3, "q7": 500e3, "q8": 800e3, "q11": 300e3, "q12": 800e3}

type nexmarkRow struct {
	Query          string  `json:"query"`
	Events         int64   `json:"events"`
	RowsIn         int64   `json:"rows_in"`
	WallSeconds    float64 `json:"wall_s"`
	EventsPerSec   float64 `json:"events_per_s"`
	CPUSeconds     float64 `json:"cpu_s"`
	EventsPerCPU   float64 `json:"events_per_cpu_s"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"`
	RowsOut        int64   `json:"rows_out"`
	Late           int64   `json:"late"`
	Checkpoints    int64   `json:"checkpoints"`
	GoalPerCPU     float64 `json:"goal_events_per_cpu_s,omitempty"`
	PeakRSSIsTotal bool    `json:"peak_rss_is_process_lifetime,omitempty"`
	// RocksMiB is the largest of each part of RocksDB's own memory accounting during the run.
	RocksMiB *rocksMiB `json:"rocksdb_peak_mib,omitempty"`
	// DiskMiB is the largest size of RocksDB's table and blob files during the run.
	DiskMiB *diskMiB `json:"rocksdb_peak_disk_mib,omitempty"`
	// Batches is the state batches written to RocksDB (checkpoints and split moves).
	Batches *batchesRow `json:"state_batches,omitempty"`
}

type batchesRow struct {
	Count   int64   `json:"count"`
	MaxOps  int64   `json:"max_ops"`
	MaxMiB  float64 `json:"max_mib"`
	MeanOps int64   `json:"mean_ops"`
	MeanMiB float64 `json:"mean_mib"`
}

type diskMiB struct {
	Tables float64 `json:"tables"`
	Blobs  float64 `json:"blobs"`
}

type rocksMiB struct {
	Memtables    float64 `json:"memtables"`
	TableReaders float64 `json:"table_readers"`
	BlockCache   float64 `json:"block_cache"`
}

func (c *BenchNexmarkCmd) Run() error {
	if c.Events <= 0 || c.Splits <= 0 || c.EventRate <= 0 {
		return &exitError{"--events, --splits and --event-rate must be positive"}
	}
	qs, err := nexmark.Select(c.Query)
	if err != nil {
		return &exitError{err.Error()}
	}
	c.GoMemoryFlag.apply(c.State == "rocksdb")
	if !c.JSON {
		fmt.Printf("rsql bench nexmark: %d events, %d split(s), %s state, %s messages, checkpoints every %v, seed %d, event rate %d/s; %s/%s, %d CPUs, %s\n",
			c.Events, c.Splits, c.State, c.Format, c.Checkpoint, c.Seed, c.EventRate, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
		fmt.Printf("in process: nexmark source -> operators -> discarding sink; CPU is every thread of the process (getrusage)\n\n")
		fmt.Printf("%-5s %11s %10s %7s %11s %11s %7s %8s %10s %12s\n", "query", "events", "rows in", "wall s", "events/s", "ev/CPU-s", "CPU s", "RSS MiB", "rows out", "goal ev/CPU-s")
	}
	for _, q := range qs {
		r, err := c.runOne(q)
		if err != nil {
			return err
		}
		if c.JSON {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			fmt.Println(string(b))
			continue
		}
		goal := "-"
		if r.GoalPerCPU > 0 {
			goal = fmt.Sprintf("%.0f", r.GoalPerCPU)
		}
		fmt.Printf("%-5s %11d %10d %7.2f %11.0f %11.0f %7.2f %8.1f %10d %12s\n", r.Query, r.Events, r.RowsIn, r.WallSeconds,
			r.EventsPerSec, r.EventsPerCPU, r.CPUSeconds, r.PeakRSSMiB, r.RowsOut, goal)
	}
	if !c.JSON {
		fmt.Printf("\nevents: of the whole sequence (1 person : 3 auctions : 46 bids), as the published suites count them;\n")
		fmt.Printf("rows in: the rows of the stream the query reads. RSS: peak resident memory during the query.\n")
	}
	return nil
}

func (c *BenchNexmarkCmd) runOne(q nexmark.Query) (nexmarkRow, error) {
	// Start each query from a small heap, with the peak RSS reset (Linux: clear_refs 5).
	runtime.GC()
	debug.FreeOSMemory()
	resetOK := resetPeakRSS()
	start, cpu0 := time.Now(), cpuTime()
	cfg := nexmark.Config{Events: c.Events, Splits: c.Splits, Seed: c.Seed, EventRate: c.EventRate, State: c.State,
		Format: c.Format, CheckpointInterval: c.Checkpoint, ThroughBroker: c.Broker, AggCacheGroups: c.AggCache, JoinCacheKeys: c.JoinCache, RocksLeveled: c.Leveled,
		Started: func() {
			// The job alone: writing the topics first is not timed; the peak RSS is the job's.
			start, cpu0 = time.Now(), cpuTime()
			resetPeakRSS()
		}}
	if c.CPUProfile != "" {
		stop, err := startCPUProfile(c.CPUProfile + "." + q.Name)
		if err != nil {
			return nexmarkRow{}, err
		}
		defer stop()
	}
	if c.MemProfile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	var stopPeak func() error
	if c.HeapProfile != "" {
		runtime.MemProfileRate = 64 << 10
		stopPeak = peakHeapProfile(c.HeapProfile + "." + q.Name)
	}
	res, err := nexmark.Run(context.Background(), q, cfg)
	if stopPeak != nil {
		if perr := stopPeak(); perr != nil && err == nil {
			err = perr
		}
	}
	wall, cpu := time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds()
	if err != nil {
		return nexmarkRow{}, err
	}
	if c.MemProfile != "" {
		if err := writeAllocsProfile(c.MemProfile + "." + q.Name); err != nil {
			return nexmarkRow{}, err
		}
	}
	if res.Late > 0 {
		return nexmarkRow{}, fmt.Errorf("%s: %d late rows (the generator's events are in order: the runtime lost order)", q.Name, res.Late)
	}
	r := nexmarkRow{Query: q.Name, Events: res.Events, RowsIn: res.RecordsIn, WallSeconds: wall,
		EventsPerSec: float64(res.Events) / wall, CPUSeconds: cpu, RowsOut: res.RowsOut, Late: res.Late,
		Checkpoints: res.Checkpoints, GoalPerCPU: nexmarkGoals[q.Name], PeakRSSMiB: peakRSSMiB(), PeakRSSIsTotal: !resetOK}
	if cpu > 0 {
		r.EventsPerCPU = float64(res.Events) / cpu
	}
	if b := res.Batches; b.Count > 0 {
		r.Batches = &batchesRow{Count: b.Count, MaxOps: b.MaxOps, MaxMiB: mib(uint64(b.MaxBytes)),
			MeanOps: b.TotalOps / b.Count, MeanMiB: mib(uint64(b.TotalBytes / b.Count))}
	}
	if m := res.Rocks; m.Total() > 0 {
		r.RocksMiB = &rocksMiB{Memtables: mib(m.Memtables), TableReaders: mib(m.TableReaders), BlockCache: mib(m.BlockCache)}
	}
	if d := res.RocksDisk; d.Tables+d.Blobs > 0 {
		r.DiskMiB = &diskMiB{Tables: mib(d.Tables), Blobs: mib(d.Blobs)}
	}
	return r, nil
}

// resetPeakRSS resets the process's peak resident set size (VmHWM) so the next reading is
// the peak of what follows. It reports false where that is not possible (then the peak is
// the process's lifetime peak).
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSSMiB is the peak resident set size: VmHWM from /proc/self/status, else getrusage's
// lifetime maximum.
func peakRSSMiB() float64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if f := strings.Fields(string(line)); len(f) >= 2 && f[0] == "VmHWM:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					return kb / 1024
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}

// peakHeapProfile samples the live heap every 100 ms and writes a heap profile to path
// each time it grows 5 % past its largest sample so far, so the file ends up holding the
// heap near its peak. The returned function stops the sampling and reports a write error.
func peakHeapProfile(path string) func() error {
	done, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		var peak uint64
		var werr error
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				stopped <- werr
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc < peak+peak/20 {
				continue
			}
			peak = ms.HeapAlloc
			f, err := os.Create(path)
			if err == nil {
				err = pprof.Lookup("heap").WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil && werr == nil {
				werr = err
			}
		}
	}()
	return func() error { close(done); return <-stopped }
}

// writeAllocsProfile writes the process's allocation profile to path.
func writeAllocsProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startCPUProfile starts a CPU profile written to path; stop ends it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func mib(b uint64) float64 { return math.Round(float64(b)/(1<<20)*10) / 10 }
