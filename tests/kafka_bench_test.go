package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkKafkaTumble: the tumbling COUNT/SUM job of jobs_e2e_test.go over 300,000
// pre-produced events, from Kafka to Kafka (at least once, and in Kafka transactions) and,
// beside it, from a topic of the bundled broker to one (the outbox). Kafka is franz-go's
// kfake in the benchmark's process; the rsql server is a process of its own. Reports
// events/s (from the job's start until its watermark passed the last window) and events
// per CPU-second of the rsql server process (its engine, and for the broker path its
// bundled broker too: Kafka's own CPU is not in it), with kafka-cpu-s the CPU of this
// process over the run (kfake's, mostly) for the Kafka paths.
//
//	go test ./tests/ -run '^$' -bench BenchmarkKafkaTumble -benchtime 1x -count 3
func BenchmarkKafkaTumble(b *testing.B) {
	for _, path := range []string{"kafka-atleastonce", "kafka-transactional", "broker-outbox"} {
		b.Run(path, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchKafkaTumble(b, path)
			}
		})
	}
}

// benchEvents is genEvents three times over, each copy later by the span of the first.
func benchEvents() []event {
	base := genEvents(97)
	var span int64
	for _, e := range base {
		span = max(span, e.TsMs-baseMs)
	}
	span += 10000
	var out []event
	for k := int64(0); k < 3; k++ {
		for _, e := range base {
			e.TsMs += k * span
			e.OrderID += k * int64(len(base))
			out = append(out, e)
		}
	}
	return out
}

// serverCPU is the user + system CPU time of process pid (/proc/<pid>/stat, in clock ticks of
// 10 ms).
func serverCPU(b *testing.B, pid int) time.Duration {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stm, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+stm) * 10 * time.Millisecond
}

// cpuSelf is the CPU time (user + system) of this process.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchKafkaTumble(b *testing.B, path string) {
	b.StopTimer()
	evs := benchEvents()
	_, lastEnd := batchResult(evs)
	s := &jobsServer{dir: b.TempDir(), pg: freePort(b), ns: freePort(b), br: freePort(b), http: freePort(b)}
	s.p = startProc(b, buildRsql(b), "server", "--data-dir", s.dir, "--pg-addr", s.pg,
		"--namesrv-addr", s.ns, "--broker-addr", s.br, "--http-addr", s.http)
	waitListening(b, s.p, s.pg)
	waitListening(b, s.p, s.ns)
	sqlB := func(text string) {
		out, errOut, err := runRsql(b, "", "--server", s.pg, "-c", text)
		if err != nil {
			b.Fatalf("rsql -c: %v\n%s\n%s", err, out, errOut)
		}
	}
	var ddl string
	var addr string
	if strings.HasPrefix(path, "kafka") {
		addr = startKafkaCluster(b)
		opts := ""
		if path == "kafka-transactional" {
			opts = ", delivery = 'transactional'"
		}
		ddl = kafkaDDL(addr, opts)
	} else {
		ddl = jobsDDL
	}
	stmts := strings.SplitN(ddl, ";", 2)
	sqlB(stmts[0]) // the source stream
	if addr != "" {
		produceKafka(b, addr, evs)
		closeKafkaWindows(b, addr, lastEnd, 4)
	} else {
		var close []event
		for i := 0; i < 64; i++ {
			close = append(close, event{OrderID: int64(-1 - i), UserID: fmt.Sprintf("~close-%d", i), TsMs: lastEnd, Category: "none"})
		}
		for _, in := range [][]event{evs, close} {
			_, errOut, err := runRsql(b, eventLines(in), "produce", "orders", "--key", "user_id", "--namesrv-addr", s.ns)
			if err != nil || !strings.Contains(errOut, fmt.Sprintf("produced %d records", len(in))) {
				b.Fatalf("produce: %v\n%s", err, errOut)
			}
		}
	}
	pid := s.p.Cmd.Process.Pid
	c0, self0 := serverCPU(b, pid), cpuSelf()
	start := time.Now()
	b.StartTimer()
	sqlB(stmts[1]) // the job
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		wm, err := s.watermark(ctx)
		cancel()
		if err == nil && wm >= lastEnd {
			break
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("watermark %d has not reached %d (%v)\n%s", wm, lastEnd, err, s.p.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.StopTimer()
	el := time.Since(start)
	cpu := serverCPU(b, pid) - c0
	b.ReportMetric(float64(len(evs))/el.Seconds(), "events/s")
	b.ReportMetric(float64(len(evs))/cpu.Seconds(), "events/cpu-s")
	if addr != "" {
		b.ReportMetric((cpuSelf() - self0).Seconds(), "kafka-cpu-s")
	}
	s.p.Kill()
}
