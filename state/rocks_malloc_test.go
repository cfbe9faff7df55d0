package state

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The C allocator makes no arena beyond its bound however many threads allocate at once
// (glibc's default is eight per core: sixteen threads at once would get new ones): the
// bound set as the program loads (one per online processor, two to eight), then
// mallocArenas once fixMalloc ran (as the first store opens). The counts run in a process
// of its own, whose arenas no other test made.
func TestRocksBoundsTheAllocatorsArenas(t *testing.T) {
	if os.Getenv("RSQL_ARENA_CHILD") == "1" {
		atStart := countArenas(16)
		fixMalloc()
		fmt.Printf("arenas %d %d\n", atStart, countArenas(16))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRocksBoundsTheAllocatorsArenas$", "-test.count=1")
	cmd.Env = []string{"RSQL_ARENA_CHILD=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MALLOC_ARENA_MAX=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var atStart, after int
	i := strings.Index(string(out), "arenas ")
	if i < 0 {
		t.Fatalf("no count in %s", out)
	}
	if _, err := fmt.Sscanf(string(out[i:]), "arenas %d %d", &atStart, &after); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if atStart < 0 || after < 0 {
		t.Skip("the C allocator does not report its arenas (not glibc)")
	}
	if limit := min(max(onlineProcessors(), 2), 8); atStart > limit {
		t.Errorf("%d arenas after 16 threads allocated at once as the program runs, want at most %d", atStart, limit)
	}
	if limit := max(atStart, mallocArenas()); after > limit {
		t.Errorf("%d arenas after 16 threads allocated at once once RocksDB's settings are in force, want at most %d", after, limit)
	}
	t.Logf("%d arenas at start, %d after (the limit %d)", atStart, after, mallocArenas())
}
