package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// depsRun is one run of scripts/deps.sh against fake system tools.
type depsRun struct {
	calls  []string // "<tool> <argv...>" as the fakes recorded them, in order
	stderr string
	err    error
}

// runDeps runs a copy of scripts/deps.sh with every dependency looking missing: PATH holds
// only fake apt-get, sudo, id and go (which record their argv) and the few real tools
// the script itself uses; RSQL_DEPS_ROOT points the file checks at an empty directory.
// uid is what the fake `id -u` prints; sudo says whether a fake sudo exists; failing names
// the packages the fake apt-get refuses to install.
func runDeps(t *testing.T, mode, uid string, sudo bool, failing ...string) depsRun {
	t.Helper()
	work := t.TempDir()
	script, err := os.ReadFile(filepath.Join(repoRoot(), "scripts", "deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"scripts", "tests/node", "fake", "real", "empty"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "scripts", "deps.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"env", "mktemp", "rm", "tail", "dirname", "cat"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(work, "real", tool)); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(work, "calls.log")
	fake := func(name, body string) {
		s := "#!/bin/bash\necho \"" + name + " $*\" >> " + log + "\n" + body + "\n"
		if err := os.WriteFile(filepath.Join(work, "fake", name), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	refuse := ""
	for _, p := range failing {
		refuse += "[ \"$1\" = install ] && [ \"${@: -1}\" = " + p + " ] && { echo \"E: cannot install " + p + "\" >&2; exit 100; }\n"
	}
	// apt-get also records the environment variable that must reach it (the line after its
	// argv).
	fake("apt-get", "echo \"apt-get DEBIAN_FRONTEND=$DEBIAN_FRONTEND\" >> "+log+"\n"+refuse+"exit 0")
	fake("id", "[ \"$1\" = -u ] && echo "+uid)
	fake("go", "exit 0")
	if sudo {
		fake("sudo", "exec \"$@\"")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, filepath.Join(work, "scripts", "deps.sh"), mode)
	cmd.Env = []string{
		"PATH=" + filepath.Join(work, "fake") + ":" + filepath.Join(work, "real"),
		"RSQL_DEPS_ROOT=" + filepath.Join(work, "empty"),
		"HOME=" + work,
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	out, _ := os.ReadFile(log)
	var calls []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			calls = append(calls, l)
		}
	}
	return depsRun{calls: calls, stderr: stderr.String(), err: err}
}

// installs returns the packages apt-get was asked to install, one call each, and fails
// the test when an install call did not get DEBIAN_FRONTEND=noninteractive.
func (r depsRun) installs(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	for i, c := range r.calls {
		if !strings.HasPrefix(c, "apt-get install") {
			continue
		}
		f := strings.Fields(c)
		pkgs = append(pkgs, f[len(f)-1])
		if i+1 == len(r.calls) || r.calls[i+1] != "apt-get DEBIAN_FRONTEND=noninteractive" {
			t.Errorf("apt-get %q ran without DEBIAN_FRONTEND=noninteractive (calls %q)", c, r.calls)
		}
		n := 0
		for _, a := range f[2:] {
			if !strings.HasPrefix(a, "-") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("apt-get call %q installs %d packages, want one per call", c, n)
		}
	}
	return pkgs
}

func TestDepsScript(t *testing.T) {
	testPkgs := "librocksdb-dev postgresql postgresql-client tmux nodejs npm chromium"
	t.Run("root installs each package on its own", func(t *testing.T) {
		r := runDeps(t, "test", "0", false)
		if r.err != nil {
			t.Fatalf("deps.sh as root: %v\n%s", r.err, r.stderr)
		}
		if got := strings.Join(r.installs(t), " "); got != testPkgs {
			t.Errorf("installed %q, want %q", got, testPkgs)
		}
		for _, c := range r.calls {
			if strings.HasPrefix(c, "sudo") {
				t.Errorf("root ran %q", c)
			}
		}
		if !contains(r.calls, "apt-get update -qq") || !contains(r.calls, "go mod download") {
			t.Errorf("calls %q lack apt-get update or go mod download", r.calls)
		}
	})
	t.Run("non-root goes through sudo", func(t *testing.T) {
		r := runDeps(t, "test", "1000", true)
		if r.err != nil {
			t.Fatalf("deps.sh as a user: %v\n%s", r.err, r.stderr)
		}
		if got := strings.Join(r.installs(t), " "); got != testPkgs {
			t.Errorf("installed %q, want %q", got, testPkgs)
		}
		for _, p := range strings.Fields(testPkgs) {
			want := "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends " + p
			if !contains(r.calls, want) {
				t.Errorf("no %q in %q", want, r.calls)
			}
		}
	})
	t.Run("one package that cannot be installed holds back no other", func(t *testing.T) {
		r := runDeps(t, "test", "0", false, "npm", "chromium")
		if r.err != nil {
			t.Fatalf("deps.sh failed over an optional package: %v\n%s", r.err, r.stderr)
		}
		if got := strings.Join(r.installs(t), " "); got != testPkgs {
			t.Errorf("tried %q, want %q", got, testPkgs)
		}
		if !strings.Contains(r.stderr, "could not install npm chromium") {
			t.Errorf("stderr does not name npm and chromium:\n%s", r.stderr)
		}
	})
	t.Run("a required package that fails stops with what to do", func(t *testing.T) {
		r := runDeps(t, "test", "0", false, "librocksdb-dev")
		if r.err == nil {
			t.Fatalf("deps.sh succeeded without librocksdb-dev\n%s", r.stderr)
		}
		if got := strings.Join(r.installs(t), " "); got != testPkgs {
			t.Errorf("tried %q, want %q (every package, even after one failed)", got, testPkgs)
		}
		if !strings.Contains(r.stderr, "apt-get install librocksdb-dev") {
			t.Errorf("stderr does not say what to run:\n%s", r.stderr)
		}
	})
	t.Run("non-root without sudo says to run as root", func(t *testing.T) {
		r := runDeps(t, "build", "1000", false)
		if r.err == nil {
			t.Fatal("deps.sh succeeded with nothing installed")
		}
		if !strings.Contains(r.stderr, "run as root") {
			t.Errorf("stderr:\n%s", r.stderr)
		}
	})
	t.Run("build needs only RocksDB and the Go modules", func(t *testing.T) {
		r := runDeps(t, "build", "0", false)
		if r.err != nil {
			t.Fatalf("%v\n%s", r.err, r.stderr)
		}
		if got := strings.Join(r.installs(t), " "); got != "librocksdb-dev" {
			t.Errorf("installed %q, want librocksdb-dev", got)
		}
		if strings.Contains(r.stderr, "npm") {
			t.Errorf("build looked for npm:\n%s", r.stderr)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
