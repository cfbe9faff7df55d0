package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"

	"rsql/server"
)

// BenchPgsinkCmd measures a job writing a PostgreSQL table (docs/sql.md, "PostgreSQL
// sink"): a topic of JSON events, pre-produced into the bundled broker, through an
// unwindowed COUNT/SUM by key (an updating query: each checkpoint epoch upserts the keys
// that changed in it) into a table of the database at --url, with 1 s checkpoints; beside
// the same job writing a topic.
type BenchPgsinkCmd struct {
	URL        string   `name:"url" required:"" help:"PostgreSQL connection string of the database to write (its table bench_pg_totals is dropped and created)."`
	Events     int      `name:"events" default:"2000000" help:"Events per run."`
	Keys       int      `name:"keys" default:"200000" help:"Distinct group keys."`
	Queues     int      `name:"queues" default:"4" help:"Queues of the event topic (the job's splits)."`
	Runs       int      `name:"runs" default:"3" help:"Runs per sink, alternating (the summary gives their medians)."`
	CPUProfile string   `name:"cpuprofile" help:"Write a CPU profile of each timed run to FILE.<sink>.<run>."`
	Sinks      []string `name:"sinks" default:"postgres,topic" enum:"postgres,postgres-epoch,topic" help:"Sinks to measure: postgres (each split's rows of an epoch in a transaction of its own, in parallel), postgres-epoch (transaction = 'epoch': each epoch in one transaction), topic."`
}

const pgsinkTable = "bench_pg_totals"

type pgsinkRun struct {
	sink      string
	secs      float64 // until every event was read and its key's row written
	rows      int64   // rows written (changed keys, summed over the epochs)
	cpu       float64 // CPU seconds of the rsql process
	epochs    int64
	readSecs  float64
	eventRate float64
}

func (c *BenchPgsinkCmd) Run() error {
	if c.Events <= 0 || c.Keys <= 0 || c.Queues <= 0 || c.Runs <= 0 {
		return &exitError{"--events, --keys, --queues and --runs must be positive"}
	}
	fmt.Printf("rsql bench pgsink: %d JSON events, %d keys, %d queues, COUNT/SUM by key (updating) with 1 s checkpoints; %s/%s, %d CPUs, %s\n\n",
		c.Events, c.Keys, c.Queues, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	var runs []pgsinkRun
	for i := 0; i < c.Runs; i++ {
		for j := range c.Sinks {
			sink := c.Sinks[(i+j)%len(c.Sinks)] // each run starts with the next sink
			r, err := c.run(sink, i)
			if err != nil {
				return err
			}
			runs = append(runs, r)
			fmt.Fprintf(os.Stderr, "  %s: %.0f rows/s\n", sink, float64(r.rows)/r.secs)
		}
	}
	fmt.Printf("%-9s %9s %7s %10s %7s %10s %10s %12s %7s\n", "sink", "events", "read s", "read ev/s", "out s", "rows out", "rows/s", "rows/cpu-s", "epochs")
	med := map[string][]float64{}
	medCPU := map[string][]float64{}
	for _, r := range runs {
		rate := float64(r.rows) / r.secs
		fmt.Printf("%-9s %9d %7.2f %10.0f %7.2f %10d %10.0f %12.0f %7d\n", r.sink, c.Events, r.readSecs, r.eventRate, r.secs, r.rows, rate, float64(r.rows)/r.cpu, r.epochs)
		med[r.sink] = append(med[r.sink], rate)
		medCPU[r.sink] = append(medCPU[r.sink], float64(r.rows)/r.cpu)
	}
	fmt.Printf("\nrows: the changed rows the job wrote (a key's changes within an epoch folded into one);\n")
	fmt.Printf("out s: until every event was read and the sink holds every key's final row.\n")
	fmt.Printf("medians of %d runs:", c.Runs)
	for i, sink := range c.Sinks {
		if i > 0 {
			fmt.Print(",")
		}
		fmt.Printf(" %s %.0f rows/s (%.0f per CPU-second of rsql)", sink, median(med[sink]), median(medCPU[sink]))
	}
	fmt.Println()
	return nil
}

// run measures one job into sink ("postgres", "postgres-epoch" or "topic").
func (c *BenchPgsinkCmd) run(sink string, run int) (pgsinkRun, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rsql-bench-pgsink-")
	if err != nil {
		return pgsinkRun{}, err
	}
	defer os.RemoveAll(dir)
	sys, err := server.StartSystem(server.SystemConfig{DataDir: dir, Log: io.Discard, Version: version})
	if err != nil {
		return pgsinkRun{}, err
	}
	defer sys.Close()
	eng := sys.Engine
	if err := pipelineExec(eng, pipelineDDL(c.Queues)); err != nil {
		return pgsinkRun{}, err
	}
	if err := produceEvents(sys.Broker, c.Queues, 0, c.Events, c.Keys, 100_000); err != nil {
		return pgsinkRun{}, err
	}
	var conn *pgx.Conn
	job := `CREATE STREAM bench_totals WITH (topic = 'bench_totals', queues = 4, checkpoint_interval = '1s') AS
  SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM bench_events GROUP BY user_id`
	if sink != "topic" {
		if conn, err = pgx.Connect(ctx, c.URL); err != nil {
			return pgsinkRun{}, err
		}
		defer conn.Close(ctx)
		for _, s := range []string{`DROP TABLE IF EXISTS ` + pgsinkTable, `CREATE TABLE ` + pgsinkTable + ` (user_id text PRIMARY KEY, n bigint, total float8)`,
			`DELETE FROM rsql_sink_progress WHERE job LIKE 'job-%'`} {
			if _, err := conn.Exec(ctx, s); err != nil && s[0] != 'D' {
				return pgsinkRun{}, err
			}
		}
		tx := "split"
		if sink == "postgres-epoch" {
			tx = "epoch"
		}
		ddl := fmt.Sprintf(`CREATE TABLE pg_totals (user_id VARCHAR PRIMARY KEY, n BIGINT, total DOUBLE)
  WITH (connector = 'postgres', url = '%s', table = '%s', checkpoint_interval = '1s', transaction = '%s')`, c.URL, pgsinkTable, tx)
		if err := pipelineExec(eng, ddl); err != nil {
			return pgsinkRun{}, err
		}
		job = `INSERT INTO pg_totals SELECT user_id, COUNT(*), SUM(amount) FROM bench_events GROUP BY user_id`
	}
	runtime.GC()
	if c.CPUProfile != "" {
		stop, err := startCPUProfile(fmt.Sprintf("%s.%s.%d", c.CPUProfile, sink, run))
		if err != nil {
			return pgsinkRun{}, err
		}
		defer stop()
	}
	start, cpu0 := time.Now(), cpuTime()
	if err := pipelineExec(eng, job); err != nil {
		return pgsinkRun{}, err
	}
	id, err := onlyJob(eng, 10*time.Second)
	if err != nil {
		return pgsinkRun{}, err
	}
	if err := waitConsumed(eng, id, int64(c.Events), 10*time.Minute); err != nil {
		return pgsinkRun{}, err
	}
	r := pgsinkRun{sink: sink, readSecs: time.Since(start).Seconds()}
	r.eventRate = float64(c.Events) / r.readSecs
	// Done when the output holds every event: the table's counts sum to the events, or the
	// topic's job has committed an epoch after reading the last event and published it.
	st, _ := eng.JobStats(id)
	readEpoch := st.Epoch
	for {
		if sink != "topic" {
			var n int64
			if err := conn.QueryRow(ctx, `SELECT COALESCE(sum(n), 0) FROM `+pgsinkTable).Scan(&n); err != nil {
				return r, err
			}
			if n >= int64(c.Events) {
				break
			}
		} else if st, ok := eng.JobStats(id); !ok {
			return r, fmt.Errorf("job %s stopped", id)
		} else if st.Epoch >= readEpoch+1 {
			// The checkpoint after the last event committed: its rows are published next.
			last, same := st.RecordsOut, 0
			for same < 5 {
				time.Sleep(10 * time.Millisecond)
				if st, _ := eng.JobStats(id); st.RecordsOut == last {
					same++
				} else {
					last, same = st.RecordsOut, 0
				}
			}
			break
		}
		if time.Since(start) > 10*time.Minute {
			return r, fmt.Errorf("job %s: output incomplete after 10 minutes", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.secs = time.Since(start).Seconds()
	r.cpu = (cpuTime() - cpu0).Seconds()
	st, ok := eng.JobStats(id)
	if !ok {
		return r, fmt.Errorf("job %s is gone: no counters", id)
	}
	r.rows, r.epochs = st.RecordsOut, st.Epoch
	if st.Bad > 0 {
		return r, fmt.Errorf("job %s had %d bad records: %v", id, st.Bad, st.BadErrors)
	}
	return r, nil
}
