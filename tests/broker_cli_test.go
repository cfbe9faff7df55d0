package tests

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

// TestBrokerCLIProduceConsume drives `rsql produce` and `rsql consume` against `rsql broker`.
func TestBrokerCLIProduceConsume(t *testing.T) {
	b := startBroker(t)
	var in strings.Builder
	var want []string
	for i := 0; i < 300; i++ {
		line := fmt.Sprintf(`{"id":%d,"user":"u%d"}`, i, i%7)
		in.WriteString(line + "\n")
		want = append(want, line)
	}
	_, errOut, err := runRsql(t, in.String(), "produce", "clitopic", "--key", "user", "--namesrv-addr", b.NS)
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "produced 300 records") {
		t.Fatalf("produce summary: %q", errOut)
	}
	// CSV from a file, no key (batched).
	_, errOut, err = runRsql(t, "a,1\nb,2\n", "produce", "csvtopic", "--format", "csv", "--namesrv-addr", b.NS)
	if err != nil || !strings.Contains(errOut, "produced 2 records") {
		t.Fatalf("csv produce: %v %q", err, errOut)
	}
	// A group reads 100, then the same group reads the rest.
	out1, errOut, err := runRsql(t, "", "consume", "clitopic", "--from-beginning", "--group", "cli-g", "--max", "100", "--namesrv-addr", b.NS)
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, errOut)
	}
	out2, errOut, err := runRsql(t, "", "consume", "clitopic", "--from-beginning", "--group", "cli-g", "--idle-exit", "2s", "--namesrv-addr", b.NS)
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, errOut)
	}
	l1, l2 := lines(out1), lines(out2)
	if len(l1) != 100 {
		t.Fatalf("first consume printed %d lines, want 100", len(l1))
	}
	got := append(l1, l2...)
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("consumed %d lines (%d + %d); want each of the 300 exactly once", len(got), len(l1), len(l2))
	}
	// Records with one key keep their order (one queue, orderly consumer).
	out3, _, err := runRsql(t, "", "consume", "clitopic", "--from-beginning", "--max", "300", "--namesrv-addr", b.NS)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int{}
	for _, l := range lines(out3) {
		var id int
		var user string
		fmt.Sscanf(strings.NewReplacer(`{"id":`, "", `,"user":"`, " ", `"}`, "").Replace(l), "%d %s", &id, &user)
		if p, ok := last[user]; ok && id <= p {
			t.Fatalf("user %s: id %d after %d", user, id, p)
		}
		last[user] = id
	}
}

// Consumer-group offsets of `rsql consume --group G --max N`: run after run, each record is
// printed by exactly one run, none twice and none lost, across several queues. Each run
// stops in the middle of what its readers fetched, so a run that committed what it read
// instead of what it printed would lose records, and one that committed late, one-way or not
// at all would print records again. The runs compete with busy goroutines for the CPU, as on
// a loaded CI machine, where a commit racing the process's exit loses.
func TestBrokerCLIConsumeGroupRounds(t *testing.T) {
	b := startBroker(t)
	defer busyCPU()()
	var in strings.Builder
	want := map[string]bool{}
	for i := 0; i < 200; i++ {
		line := fmt.Sprintf(`{"id":%d,"user":"u%d"}`, i, i%5)
		in.WriteString(line + "\n")
		want[line] = true
	}
	if _, errOut, err := runRsql(t, in.String(), "produce", "rounds", "--key", "user", "--namesrv-addr", b.NS); err != nil {
		t.Fatalf("produce: %v\n%s", err, errOut)
	}
	seen := map[string]int{}
	for run := 1; len(seen) < len(want) && run <= 50; run++ {
		out, errOut, err := runRsql(t, "", "consume", "rounds", "--from-beginning", "--group", "rounds-g", "--max", "5",
			"--idle-exit", "3s", "--namesrv-addr", b.NS)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, errOut)
		}
		got := lines(out)
		if len(got) != 5 && len(seen)+len(got) != len(want) {
			t.Fatalf("run %d printed %d records, want 5 (or the %d left)", run, len(got), len(want)-len(seen))
		}
		for _, l := range got {
			if !want[l] {
				t.Fatalf("run %d printed %q, which was never produced", run, l)
			}
			if seen[l]++; seen[l] > 1 {
				t.Fatalf("run %d printed %s again: its offset was not committed by the run that printed it", run, l)
			}
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("the runs printed %d of the %d records", len(seen), len(want))
	}
	out, _, err := runRsql(t, "", "consume", "rounds", "--group", "rounds-g", "--idle-exit", "1s", "--namesrv-addr", b.NS)
	if err != nil || len(lines(out)) != 0 {
		t.Fatalf("after every record was consumed the group still gets %d records (%v)", len(lines(out)), err)
	}
}

// A line over the record limit stops `rsql produce` with a message naming it; the records
// before it are sent, none after, and nothing is lost silently.
func TestBrokerCLIProduceLongLine(t *testing.T) {
	b := startBroker(t)
	in := "{\"n\":1}\n{\"n\":2}\n{\"n\":\"" + strings.Repeat("x", 5<<20) + "\"}\n{\"n\":4}\n"
	_, errOut, err := runRsql(t, in, "produce", "longline", "--namesrv-addr", b.NS)
	if err == nil {
		t.Fatalf("produce accepted a 5 MiB line: %s", errOut)
	}
	for _, want := range []string{"line 3 is 5242888 bytes", "limit of 4190208 bytes", "the 2 records before it were sent"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("produce's message lacks %q:\n%s", want, errOut)
		}
	}
	out, _, err := runRsql(t, "", "consume", "longline", "--from-beginning", "--idle-exit", "1s", "--namesrv-addr", b.NS)
	if err != nil || strings.Join(lines(out), " ") != `{"n":1} {"n":2}` {
		t.Errorf("the topic holds %q (%v), want the two records before the long line", out, err)
	}
}

// busyCPU keeps every CPU busy with spinning goroutines until the returned stop is called.
func busyCPU() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				if n%1000 == 0 {
					select {
					case <-done:
						return
					default:
					}
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// TestBrokerCLINoBroker: with nothing listening, produce and consume fail with a hint.
func TestBrokerCLINoBroker(t *testing.T) {
	addr := freePort(t)
	for _, args := range [][]string{{"produce", "t"}, {"consume", "t"}} {
		_, errOut, err := runRsql(t, "{}\n", append(args, "--namesrv-addr", addr)...)
		if err == nil || !strings.Contains(errOut, "no broker answers at "+addr+": start one with `rsql server`") {
			t.Fatalf("%v: err %v, stderr %q", args, err, errOut)
		}
		if n := strings.Count(strings.TrimSpace(errOut), "\n"); n != 0 {
			t.Fatalf("%v: message is not one line: %q", args, errOut)
		}
	}
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// A topic that does not exist: consume says so once, on one line; produce creates it and
// says so, with its queues, on stderr (a mistyped name does not pass silently), and says
// nothing of the kind once it exists.
func TestBrokerCLIMissingTopic(t *testing.T) {
	b := startBroker(t)
	_, errOut, err := runRsql(t, "", "consume", "nosuchtopic", "--namesrv-addr", b.NS)
	if err == nil || strings.Count(errOut, "nosuchtopic") != 1 || strings.Count(errOut, "does not exist") != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("consume of a missing topic: err %v, stderr %q", err, errOut)
	}
	_, errOut, err = runRsql(t, "{\"a\":1}\n", "produce", "ordrs", "--namesrv-addr", b.NS)
	if err != nil || !strings.Contains(errOut, "created topic ordrs with 4 queues") {
		t.Errorf("produce to a new topic: err %v, stderr %q", err, errOut)
	}
	_, errOut, err = runRsql(t, "{\"a\":2}\n", "produce", "ordrs", "--namesrv-addr", b.NS)
	if err != nil || strings.Contains(errOut, "created") || !strings.Contains(errOut, "produced 1 records") {
		t.Errorf("produce to an existing topic: err %v, stderr %q", err, errOut)
	}
}
