package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchMemoryCmd measures the memory of `rsql server` running a topic-to-topic tumbling
// aggregation: it starts `rsql server` (this binary) on free loopback ports with a fresh
// data directory, appends the events with `rsql produce`, starts the job over the Postgres
// wire and samples the server's /proc status (peak RSS, anonymous and file-backed
// resident memory) until the job has read every event and the windows closed.
type BenchMemoryCmd struct {
	Events      int           `name:"events" default:"2000000" help:"Events appended to the input topic."`
	Users       int           `name:"users" default:"1000" help:"Distinct users (the group key)."`
	Queues      int           `name:"queues" default:"4" help:"Queues of the input topic."`
	EventRate   int           `name:"event-rate" default:"100000" help:"Events per second of event time."`
	Window      time.Duration `name:"window" default:"10s" help:"Tumbling window size."`
	Checkpoint  time.Duration `name:"checkpoint-interval" default:"1s" help:"Checkpoint interval of the job."`
	HeapProfile string        `name:"heap-profile" help:"Write the server's heap profile when the job has read every event (near its peak) to FILE, and as text with the runtime's memory statistics to FILE.txt."`
	Keep        bool          `name:"keep" help:"Keep the data directory (printed)."`
	Server      string        `name:"server-binary" help:"Run this rsql binary as the server (default: this one), to compare builds."`
}

// memSample is one reading of a process's memory (/proc/PID/status), in KiB.
type memSample struct{ hwm, rss, anon, file, shmem int64 }

func readMem(pid int) (memSample, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memSample{}, err
	}
	var m memSample
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue // a line of /proc/PID/status that is not a number of kB (Name:, State:, ...)
		}
		switch f[0] {
		case "VmHWM:":
			m.hwm = v
		case "VmRSS:":
			m.rss = v
		case "RssAnon:":
			m.anon = v
		case "RssFile:":
			m.file = v
		case "RssShmem:":
			m.shmem = v
		}
	}
	return m, nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (c *BenchMemoryCmd) Run() error {
	if c.Events <= 0 || c.Users <= 0 || c.Queues <= 0 || c.EventRate <= 0 || c.Window <= 0 {
		return &exitError{"--events, --users, --queues, --event-rate and --window must be positive"}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "rsql-bench-memory-")
	if err != nil {
		return err
	}
	if c.Keep {
		fmt.Printf("data directory: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	// The events, as `rsql produce` reads them: JSON lines.
	events := filepath.Join(dir, "events.jsonl")
	if err := writeMemoryEvents(events, c.Events, c.Users, c.EventRate); err != nil {
		return err
	}
	var extra []string
	if c.HeapProfile != "" {
		extra = append(extra, "--heap-profile", c.HeapProfile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	s, err := startBenchServer(ctx, c.Server, dir, extra...)
	if err != nil {
		return err
	}
	defer s.stop()
	srv, pid, conn, nsAddr := s.cmd, s.pid, s.conn, s.nsAddr
	idle, _ := readMem(pid)

	fmt.Printf("rsql bench memory: %d events, %d users, %d queues, TUMBLE %v COUNT/SUM by user to a topic, checkpoints every %v; %s\n\n",
		c.Events, c.Users, c.Queues, c.Window, c.Checkpoint, time.Now().UTC().Format("2006-01-02"))
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE STREAM mem_events (user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (topic = 'mem_events', queues = %d, idle_timeout = '1s')`, c.Queues)); err != nil {
		return err
	}
	t0 := time.Now()
	prod := exec.Command(self, "produce", "mem_events", "--file", events, "--key", "user_id", "--namesrv-addr", nsAddr)
	if out, err := prod.CombinedOutput(); err != nil {
		return fmt.Errorf("rsql produce: %v\n%s", err, out)
	}
	produceSecs := time.Since(t0).Seconds()
	produced, _ := readMem(pid)

	t0 = time.Now()
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE STREAM mem_totals WITH (topic = 'mem_totals', queues = %d, checkpoint_interval = '%s') AS
  SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
  FROM TUMBLE(mem_events, ts, INTERVAL '%d' SECOND) GROUP BY user_id, window_start, window_end`,
		c.Queues, c.Checkpoint, int(c.Window.Seconds()))); err != nil {
		return err
	}
	var peak memSample
	sample := func() {
		m, err := readMem(pid)
		if err != nil {
			return
		}
		peak.rss, peak.anon, peak.file = max(peak.rss, m.rss), max(peak.anon, m.anon), max(peak.file, m.file)
		peak.hwm = m.hwm
	}
	var in, out int64
	for {
		sample()
		if err := conn.QueryRow(ctx, "SELECT records_in, records_out FROM (SHOW JOBS) AS j").Scan(&in, &out); err != nil {
			// Older servers cannot select from SHOW: read the whole result.
			in, out, err = showJobsCounts(ctx, conn)
			if err != nil {
				return err
			}
		}
		if in >= int64(c.Events) {
			if c.HeapProfile != "" {
				srv.Process.Signal(syscall.SIGUSR1) // near the peak: every event just read
			}
			break
		}
		if time.Since(t0) > 15*time.Minute {
			return fmt.Errorf("the job read %d of %d events in 15 minutes", in, c.Events)
		}
		time.Sleep(20 * time.Millisecond)
	}
	readSecs := time.Since(t0).Seconds()
	// Let the last checkpoints publish the closed windows, sampling meanwhile.
	for end := time.Now().Add(2*c.Checkpoint + time.Second); time.Now().Before(end); {
		sample()
		time.Sleep(20 * time.Millisecond)
	}
	last, _ := readMem(pid)
	in, out, _ = showJobsCounts(ctx, conn)
	mib := func(kb int64) float64 { return float64(kb) / 1024 }
	fmt.Printf("%-44s %10s %10s %10s %10s\n", "rsql server", "RSS MiB", "anon MiB", "file MiB", "peak MiB")
	fmt.Printf("%-44s %10.1f %10.1f %10.1f %10.1f\n", "started, idle", mib(idle.rss), mib(idle.anon), mib(idle.file), mib(idle.hwm))
	fmt.Printf("%-44s %10.1f %10.1f %10.1f %10.1f\n", fmt.Sprintf("after rsql produce (%.1f s)", produceSecs), mib(produced.rss), mib(produced.anon), mib(produced.file), mib(produced.hwm))
	fmt.Printf("%-44s %10.1f %10.1f %10.1f %10.1f\n", fmt.Sprintf("job, highest sampled (read all in %.1f s)", readSecs), mib(peak.rss), mib(peak.anon), mib(peak.file), mib(peak.hwm))
	fmt.Printf("%-44s %10.1f %10.1f %10.1f %10.1f\n", "job done", mib(last.rss), mib(last.anon), mib(last.file), mib(last.hwm))
	fmt.Printf("\nrecords in %d, rows out %d. peak MiB: the server's VmHWM (its whole life, produce included);\n", in, out)
	fmt.Printf("anon: RssAnon (Go heap, RocksDB, stacks); file: RssFile (mapped broker segments and binary).\n")
	return nil
}

// showJobsCounts sums records_in and records_out over SHOW JOBS.
func showJobsCounts(ctx context.Context, conn *pgx.Conn) (in, out int64, err error) {
	rows, err := conn.Query(ctx, "SHOW JOBS")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return 0, 0, err
		}
		descs := rows.FieldDescriptions()
		for i, d := range descs {
			if d.Name != "records_in" && d.Name != "records_out" {
				continue
			}
			v := fmt.Sprint(vals[i])
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("SHOW JOBS: %s is %q, not a count", d.Name, v)
			}
			if d.Name == "records_in" {
				in += n
			} else {
				out += n
			}
		}
	}
	return in, out, rows.Err()
}

// writeMemoryEvents writes the events: event i has user u<i mod users>, amount i mod 100 +
// 0.5 and event time i*1000/rate ms after a fixed base, in time order.
func writeMemoryEvents(path string, events, users, rate int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var line []byte
	for i := 0; i < events; i++ {
		line = append(line[:0], `{"user_id":"u`...)
		line = strconv.AppendInt(line, int64(i%users), 10)
		line = append(line, `","amount":`...)
		line = strconv.AppendInt(line, int64(i%100), 10)
		line = append(line, `.5,"ts":`...)
		line = strconv.AppendInt(line, pipelineBase+int64(i)*1000/int64(rate), 10)
		line = append(line, "}\n"...)
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
