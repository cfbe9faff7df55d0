package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestScaleOutFigures measures the exchange job of TestExchangeJobOnThreeInstances on 1, 2
// and 3 instances sharing a private Postgres and a standalone broker: the CPU the
// instances spend per input event (user + system time of their processes while the job
// consumes the input, summed), the time for a joining instance to take its units, each
// unit's move as the instances log it, and the time from a SIGKILL until the survivors run
// the dead instance's units (lease expiry included). It prints the figures recorded in
// docs/benchmarks.md and asserts only that the job's result is the batch result. It runs
// for a minute or two, so only when RSQL_SCALEOUT_FIGURES=1:
//
//	RSQL_SCALEOUT_FIGURES=1 go test ./tests/ -run TestScaleOutFigures -v -count=1
//
// RSQL_SCALEOUT_EVENTS=N generates N on-time events (and their share of late ones) instead
// of 100,000 and measures only the CPU, without the rebalances: a run long enough for the
// instances' fixed costs not to dominate (docs/benchmarks.md, Scale-out).
// RSQL_SCALEOUT_INSTANCES=1,3 picks the instance counts (default 1,2,3).
func TestScaleOutFigures(t *testing.T) {
	if os.Getenv("RSQL_SCALEOUT_FIGURES") == "" {
		t.Skip("set RSQL_SCALEOUT_FIGURES=1 to measure scale-out figures")
	}
	events, rebalance := nEvents, true
	if v := os.Getenv("RSQL_SCALEOUT_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RSQL_SCALEOUT_EVENTS=%q: want a positive number of events", v)
		}
		events, rebalance = n, false
	}
	counts := []int{1, 2, 3}
	if v := os.Getenv("RSQL_SCALEOUT_INSTANCES"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 4 {
				t.Fatalf("RSQL_SCALEOUT_INSTANCES=%q: want instance counts from 1 to 4", v)
			}
			counts = append(counts, n)
		}
	}
	for _, n := range counts {
		t.Run(fmt.Sprintf("%d-instances", n), func(t *testing.T) { scaleOutFigures(t, n, events, rebalance) })
	}
}

var moveLine = regexp.MustCompile(`unit (\d+/\d+) moved here(?: from (\S+))? in ([0-9.]+[a-zµ]+) \(([^;]*);`)

func scaleOutFigures(t *testing.T, n, events int, rebalance bool) {
	pgc := startPostgres(t)
	br := startBroker(t)
	evs := genEventsN(67, events)
	if !rebalance {
		// Without its late copies: whether a record far behind its own queue is late
		// depends on how far the other queues' readers are ahead, which a long run on busy
		// cores does not fix (the 100,000-event run keeps them).
		evs = slices.DeleteFunc(evs, func(e event) bool { return e.Late })
	}
	want, lastEnd := batchResult(evs)
	var srv []*clusterServer
	var names []string
	for i := 0; i < n; i++ {
		s := &clusterServer{t: t, name: string(rune('A' + i)), dir: t.TempDir(), pg: freePort(t), http: freePort(t), ns: br.NS, external: true, postgres: pgc.URL}
		name := fmt.Sprintf("rsql-%d", i+1)
		if err := os.WriteFile(filepath.Join(s.dir, "instance-name"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		srv = append(srv, s)
		names = append(names, name)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgc.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range srv {
		s.start()
	}
	defer func() {
		if t.Failed() {
			for _, s := range srv {
				t.Logf("%s stderr:\n%s", s.name, s.stderr())
			}
		}
	}()
	waitCond(t, 30*time.Second, func() bool {
		return scrapeMetrics(t, srv[0].http)["rsql_cluster_members"] == float64(n)
	}, "%d members", n)

	// Throughput: CPU of the instances from the job's start until its watermark passes
	// the end of the input.
	cpu0 := make([]time.Duration, n)
	for i, s := range srv {
		cpu0[i] = procCPU(t, s.p.Cmd.Process.Pid)
	}
	start := time.Now()
	if out, errOut, err := runRsql(t, "", "--server", srv[0].pg, "-c", exchangeDDL); err != nil {
		t.Fatalf("DDL: %v\n%s\n%s", err, out, errOut)
	}
	// In pieces of at most 250,000 events: one `rsql produce` reads its input whole.
	for i := 0; i < len(evs); i += 250_000 {
		produceEvents(t, br.NS, evs[i:min(i+250_000, len(evs))])
	}
	closeWindows(t, br.NS, lastEnd)
	waitCond(t, 180*time.Second+time.Duration(len(evs))*50*time.Microsecond, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		wm, err := jobWatermark(cctx, srv[0].pg)
		return err == nil && wm >= lastEnd
	}, "the watermark to pass the last window end")
	elapsed := time.Since(start)
	var total time.Duration
	var per []string
	for i, s := range srv {
		d := procCPU(t, s.p.Cmd.Process.Pid) - cpu0[i]
		total += d
		per = append(per, fmt.Sprintf("%s %.1fs, %.0f checkpoints", names[i], d.Seconds(),
			scrapeMetrics(t, s.http)[`rsql_job_checkpoints_total{job="job-1"}`]))
	}
	time.Sleep(2500 * time.Millisecond)
	compareMultisets(t, fmt.Sprintf("result on %d instances", n), want, consumedResult(t, br.NS))
	t.Logf("FIGURES %d instance(s): %d events in %.1fs; instances' CPU %.2fs (%s): %.1f µs per event",
		n, len(evs), elapsed.Seconds(), total.Seconds(), strings.Join(per, ", "), float64(total.Microseconds())/float64(len(evs)))

	if n == 1 || !rebalance {
		for _, s := range srv {
			if err := s.p.Stop(); err != nil {
				t.Errorf("%s stop: %v", s.name, err)
			}
		}
		return
	}
	// Rebalance on a join: the last instance leaves (SIGTERM: it hands its units over),
	// then starts again and takes its share back while input flows.
	last := srv[n-1]
	if err := last.p.Stop(); err != nil {
		t.Fatal(err)
	}
	waitUnitsSpread(t, conn, names[:n-1])
	logLen := make([]int, n)
	for i, s := range srv[:n-1] {
		logLen[i] = len(s.stderr())
	}
	more := genEvents(71)
	go runRsql(t, eventLines(more), "produce", "orders", "--key", "user_id", "--namesrv-addr", br.NS)
	joinStart := time.Now()
	last.start()
	logLen[n-1] = len(last.stderr())
	waitUnitsSpread(t, conn, names)
	join := time.Since(joinStart)
	time.Sleep(2 * time.Second) // the moves finish loading after the store names the owner
	t.Logf("FIGURES %d instances: %s joins: all units placed %.2fs after its process started; unit moves to it: %s",
		n, names[n-1], join.Seconds(), strings.Join(moves(last.stderr()[logLen[n-1]:]), ", "))

	// Rebalance on a crash: SIGKILL the last instance; the survivors take its units once
	// its lease (3 s) expires.
	killAt := time.Now()
	last.p.Kill()
	waitUnitsSpread(t, conn, names[:n-1])
	takeover := time.Since(killAt)
	time.Sleep(2 * time.Second)
	var mv []string
	for i, s := range srv[:n-1] {
		mv = append(mv, moves(s.stderr()[logLen[i]:])...)
	}
	t.Logf("FIGURES %d instances: SIGKILL of %s: its units owned by the survivors %.2fs later; unit moves: %s",
		n, names[n-1], takeover.Seconds(), strings.Join(mv, ", "))
	for _, s := range srv[:n-1] {
		if err := s.p.Stop(); err != nil {
			t.Errorf("%s stop: %v", s.name, err)
		}
	}
}

// moves lists the "unit moved here" lines of an instance's log as "unit from owner
// duration (how)".
func moves(log string) []string {
	var out []string
	for _, m := range moveLine.FindAllStringSubmatch(log, -1) {
		out = append(out, fmt.Sprintf("%s from %s %s (%s)", m[1], m[2], m[3], m[4]))
	}
	return out
}

// procCPU is the user + system CPU time process pid has used (Linux: /proc/pid/stat, in
// clock ticks of 10 ms).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}
