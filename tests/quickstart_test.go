package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// quickstartStep is one thing docs/quickstart.md asks the reader to run.
type quickstartStep struct {
	cmd    string // a `$ ` command, or a whole ```sh block
	want   string // the output the document shows under the command
	script bool   // a ```sh block: run, output not shown
}

// quickstartSteps reads the runnable blocks of the document in order: ```console blocks
// hold `$ command` lines, each followed by its output; ```sh blocks are run as they are.
// ```bash blocks (installing rsql) are not run: the test builds rsql itself.
func quickstartSteps(t *testing.T, doc string) []quickstartStep {
	var steps []quickstartStep
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok || (lang != "console" && lang != "sh") {
			continue
		}
		var block []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			block = append(block, lines[i])
		}
		if lang == "sh" {
			steps = append(steps, quickstartStep{cmd: strings.Join(block, "\n") + "\n", script: true})
			continue
		}
		for _, l := range block {
			if c, ok := strings.CutPrefix(l, "$ "); ok {
				steps = append(steps, quickstartStep{cmd: c})
			} else if len(steps) > 0 {
				steps[len(steps)-1].want += l + "\n"
			} else {
				t.Fatalf("output line before any command: %q", l)
			}
		}
	}
	return steps
}

// TestQuickstart runs docs/quickstart.md command by command in an empty directory, with
// rsql on the PATH, and checks that each command prints exactly what the document shows on
// a terminal (standard output is a pseudo-terminal; standard error is not shown).
// The server listens on free ports: the RSQL_*_ADDR variables move every rsql command
// there unchanged, and the one address a non-rsql command names (curl's) is rewritten.
// `rsql server` runs in the background as the document's first terminal.
func TestQuickstart(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "quickstart.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := quickstartSteps(t, string(doc))
	if len(steps) < 6 {
		t.Fatalf("quickstart has %d runnable steps", len(steps))
	}
	dir := t.TempDir()
	binDir := filepath.Join(dir, ".bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(buildRsql(t), filepath.Join(binDir, "rsql")); err != nil {
		t.Fatal(err)
	}
	pgAddr, httpAddr := freePort(t), freePort(t)
	env := append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"),
		"RSQL_PG_ADDR="+pgAddr, "RSQL_HTTP_ADDR="+httpAddr,
		"RSQL_NAMESRV_ADDR="+freePort(t), "RSQL_BROKER_ADDR="+freePort(t))
	rewrite := strings.NewReplacer("127.0.0.1:8080", httpAddr, "127.0.0.1:5433", pgAddr)

	var srv *proc
	for _, st := range steps {
		if st.cmd == "rsql server" {
			srv = &proc{Cmd: exec.Command(filepath.Join(binDir, "rsql"), "server"), Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, done: make(chan struct{})}
			srv.Cmd.Dir, srv.Cmd.Env = dir, env
			srv.Cmd.Stdout, srv.Cmd.Stderr = srv.Stdout, srv.Stderr
			if err := srv.Cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func(p *proc) { p.err = p.Cmd.Wait(); close(p.done) }(srv)
			t.Cleanup(srv.Kill)
			waitListening(t, srv, pgAddr)
			continue
		}
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", rewrite.Replace(st.cmd))
		cmd.Dir, cmd.Env = dir, env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := outputOnTerminal(cmd)
		if err != nil {
			t.Fatalf("quickstart step failed: %v\n$ %s\nstdout:\n%s\nstderr:\n%s", err, st.cmd, out, stderr.String())
		}
		if !st.script && string(out) != st.want {
			t.Errorf("$ %s\nthe quickstart shows:\n%s\nrsql printed:\n%s", st.cmd, st.want, out)
		}
	}
	if srv == nil {
		t.Fatal("the quickstart never starts `rsql server`")
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("rsql server did not stop cleanly: %v\n%s", err, srv.Stderr.String())
	}
}
