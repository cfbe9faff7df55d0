package broker

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// mappedRSS sums the resident kilobytes of this process's mappings of files under dir
// (/proc/self/smaps).
func mappedRSS(t *testing.T, dir string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	defer f.Close()
	var kb int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			// A mapping's header: address range, perms, offset, device, inode [path].
			in = len(fields) >= 6 && strings.HasPrefix(fields[5], dir)
			continue
		}
		if in && len(fields) >= 2 && fields[0] == "Rss:" {
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			kb += n
		}
	}
	return kb
}

// Released pages leave the resident set, and what they hold reads back unchanged.
func TestReleaseMappedPages(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentSize = 8 << 20
	cfg.QueueFileEntries = 1 << 16
	cfg.ReleaseInterval = -1 // released by hand below
	b := mustOpen(t, cfg)
	defer b.Close()
	if err := b.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	// About 20 MiB of messages over three segments.
	const n = 12000
	for q := 0; q < 2; q++ {
		for i := 0; i < n; i += 100 {
			var batch []Message
			for j := i; j < i+100; j++ {
				batch = append(batch, Message{Key: "k", Body: append(body(q, j), make([]byte, 800)...)})
			}
			if _, err := b.Append("t", q, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir, _ := filepath.EvalSymlinks(cfg.Dir)
	before := mappedRSS(t, dir)
	if before < 16<<10 {
		t.Fatalf("only %d KiB of the store mapped before the release: the test measures nothing", before)
	}
	if err := b.releaseMapped(); err != nil {
		t.Fatal(err)
	}
	after := mappedRSS(t, dir)
	// What stays: the tail, and the reserved chunk mapped ahead of the writer (prefault.go).
	if limit := int64((residentTail+segmentReserveChunk)>>10) + 512; after > limit {
		t.Fatalf("%d KiB of the store still resident after the release (was %d KiB), want at most %d", after, before, limit)
	}
	for q := 0; q < 2; q++ {
		pullPadded(t, b, q, n, 500)
	}
	// Reading mapped the pages again; the next release drops them again.
	if err := b.releaseMapped(); err != nil {
		t.Fatal(err)
	}
	if again := mappedRSS(t, dir); again > int64((residentTail+segmentReserveChunk)>>10)+512 {
		t.Fatalf("%d KiB resident after reading and releasing again", again)
	}
}

// A reader far behind the head releases the pages it read as soon as its read is done:
// pulling a whole queue back leaves no more of the log resident than the release leaves.
func TestReadReleasesFinishedRange(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentSize = 8 << 20
	cfg.QueueFileEntries = 1 << 16
	cfg.ReleaseInterval = -1 // no periodic release: only the reads release
	b := mustOpen(t, cfg)
	defer b.Close()
	if err := b.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	// About 20 MiB over three segments, the two queues' records interleaved in batches of 10
	// (every page holds records of both).
	const n = 12000
	for i := 0; i < n; i += 10 {
		for q := 0; q < 2; q++ {
			var batch []Message
			for j := i; j < i+10; j++ {
				batch = append(batch, Message{Key: "k", Body: append(body(q, j), make([]byte, 800)...)})
			}
			if _, err := b.Append("t", q, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.releaseMapped(); err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.EvalSymlinks(cfg.Dir)
	limit := int64((residentTail+segmentReserveChunk)>>10) + 512
	if after := mappedRSS(t, dir); after > limit {
		t.Fatalf("%d KiB of the store resident after the release, want at most %d", after, limit)
	}
	for q := 0; q < 2; q++ {
		pullPadded(t, b, q, n, 100)
		// Both queues' records span the whole log: reading one mapped (and released) every page.
		if got := mappedRSS(t, dir); got > limit {
			t.Fatalf("%d KiB of the store resident after reading queue %d back, want at most %d (the reads' pages were not released)", got, q, limit)
		}
	}
}

// pullPadded pulls queue q of topic "t" back from offset 0 to n, maxN messages a pull, and
// checks each message is body(q, offset) padded with 800 zero bytes, as the tests wrote them.
func pullPadded(t *testing.T, b *Broker, q int, n int64, maxN int) {
	t.Helper()
	var off int64
	for off < n {
		msgs, next, err := b.Pull(t.Context(), "t", q, off, maxN, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if want := append(body(q, int(m.QueueOffset)), make([]byte, 800)...); string(m.Body) != string(want) {
				t.Fatalf("queue %d message %d changed after its pages were released", q, m.QueueOffset)
			}
		}
		off = next
	}
}
