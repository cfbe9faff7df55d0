package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/fuzz.sh (run by `make test`) fuzzes every target of the module and fails when one
// finds a crash, naming the target and where the input is. It runs here on a module of
// its own: one target that holds, one whose corpus holds an input that panics.
func TestFuzzScriptFailsOnACrash(t *testing.T) {
	work := t.TempDir()
	script, err := os.ReadFile(filepath.Join(repoRoot(), "scripts", "fuzz.sh"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"scripts/fuzz.sh": string(script),
		"go.mod":          "module fuzzcheck\n\ngo 1.26\n",
		// Decode panics on "boom!" only (by its CRC, which the fuzzer does not guess in a
		// second): the crash comes from the corpus.
		"a/a.go": "package a\n\nimport \"hash/crc32\"\n\nfunc Decode(b []byte) int {\n\tif crc32.ChecksumIEEE(b) == 0x9924bdcc {\n\t\tpanic(\"decoder bug\")\n\t}\n\treturn len(b)\n}\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\n" +
			"func FuzzHolds(f *testing.F) {\n\tf.Add([]byte(\"x\"))\n\tf.Fuzz(func(t *testing.T, b []byte) { _ = len(b) })\n}\n\n" +
			"func FuzzDecode(f *testing.F) {\n\tf.Add([]byte(\"ok\"))\n\tf.Fuzz(func(t *testing.T, b []byte) { Decode(b) })\n}\n",
		"a/testdata/fuzz/FuzzDecode/crash": "go test fuzz v1\n[]byte(\"boom!\")\n",
	}
	for name, body := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func() (string, error) {
		cmd := exec.Command("bash", filepath.Join(work, "scripts", "fuzz.sh"))
		cmd.Env = append(os.Environ(), "FUZZTIME=1s", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	if err == nil || !strings.Contains(out, "a FuzzDecode FAILED") || !strings.Contains(out, "a/testdata/fuzz/FuzzDecode/") || !strings.Contains(out, "decoder bug") {
		t.Fatalf("a target whose corpus crashes: %v\n%s", err, out)
	}
	if err := os.Remove(filepath.Join(work, "a", "testdata", "fuzz", "FuzzDecode", "crash")); err != nil {
		t.Fatal(err)
	}
	out, err = run()
	if err != nil || !strings.Contains(out, "a FuzzHolds ok") || !strings.Contains(out, "fuzz: 2 targets, 1s each") {
		t.Fatalf("targets that hold: %v\n%s", err, out)
	}
}
