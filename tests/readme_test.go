package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeExample runs the README's 30-second example as written and checks that the
// output it shows is what rsql writes.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "```sh\ncat > orders.jsonl")
	if start < 0 {
		t.Fatal("README has no 30-second example")
	}
	rest := text[start+len("```sh\n"):]
	end := strings.Index(rest, "```\n")
	script := rest[:end]
	rest = rest[end+4:]
	outStart := strings.Index(rest, "```\n")
	outEnd := strings.Index(rest[outStart+4:], "```")
	want := rest[outStart+4 : outStart+4+outEnd]

	dir := t.TempDir()
	bin := buildRsql(t)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin", "rsql")); err != nil {
		t.Fatal(err)
	}
	// The example runs as written, and again in the same directory: the second run makes
	// its streams afresh and replaces totals.jsonl instead of failing or doubling it.
	for run := 1; run <= 2; run++ {
		cmd := exec.Command("bash", "-e", "-c", script)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("README example, run %d, failed: %v\n%s", run, err, stderr.String())
		}
		if string(got) != want {
			t.Errorf("run %d: README shows:\n%s\nrsql printed:\n%s", run, want, got)
		}
	}
}
