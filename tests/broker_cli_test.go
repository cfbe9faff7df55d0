package tests

import (
	"fmt"
	"sort"
	"strings"
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
