package state

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Once RocksDB's allocator settings are in force (fixMalloc, as the first store opens), the
// C allocator makes no arena beyond mallocArenas however many threads allocate at once
// (glibc's default is eight per core: sixteen threads at once would get new ones). Arenas
// made before (the Go runtime's threads') stay. The count runs in a process of its own,
// whose arenas no other test made.
func TestRocksBoundsTheAllocatorsArenas(t *testing.T) {
	if os.Getenv("RSQL_ARENA_CHILD") == "1" {
		fixMalloc()
		before := countArenas(1)
		fmt.Printf("arenas %d %d\n", before, countArenas(16))
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
	var before, after int
	i := strings.Index(string(out), "arenas ")
	if i < 0 {
		t.Fatalf("no count in %s", out)
	}
	if _, err := fmt.Sscanf(string(out[i:]), "arenas %d %d", &before, &after); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if before < 0 || after < 0 {
		t.Skip("the C allocator does not report its arenas (not glibc)")
	}
	if limit := max(before, mallocArenas()); after > limit {
		t.Fatalf("%d arenas after 16 threads allocated at once (%d before), want at most %d", after, before, limit)
	}
	t.Logf("%d arenas, %d before (the limit %d)", after, before, mallocArenas())
}
