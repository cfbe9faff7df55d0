package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmuxSession drives an interactive program in a detached tmux session on a private socket,
// as a person at a terminal would: keys in, screen out.
type tmuxSession struct {
	t      *testing.T
	socket string
	name   string
}

func startTmux(t *testing.T, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed (apt-get install tmux, or scripts/deps.sh)")
	}
	s := &tmuxSession{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock"), name: "rsql"}
	if out, err := s.tmux("new-session", "-d", "-s", s.name, "-x", "160", "-y", "50", command); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { s.tmux("kill-server") })
	return s
}

func (s *tmuxSession) tmux(args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-S", s.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(cmd.Environ(), "TERM=xterm-256color")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// send types keys; tmux key names (Enter, Tab, C-c) are sent as keys, anything else as text.
func (s *tmuxSession) send(keys ...string) {
	s.t.Helper()
	for _, k := range keys {
		args := []string{"send-keys", "-t", s.name}
		switch k {
		case "Enter", "Tab", "C-c", "C-d":
			args = append(args, k)
		default:
			// tmux reads an argument ending in ';' as a command separator.
			if strings.HasSuffix(k, ";") {
				k = strings.TrimSuffix(k, ";") + `\;`
			}
			args = append(args, "-l", k)
		}
		if out, err := s.tmux(args...); err != nil {
			s.t.Fatalf("tmux send-keys %q: %v\n%s", k, err, out)
		}
	}
}

// screen is the pane's text, including its scrollback.
func (s *tmuxSession) screen() string {
	out, _ := s.tmux("capture-pane", "-p", "-J", "-S", "-1000", "-t", s.name)
	return out
}

// waitFor waits until the screen holds want n times; it fails the test with the screen
// after a minute.
func (s *tmuxSession) waitFor(want string, n int) string {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		scr := s.screen()
		if strings.Count(scr, want) >= n {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %q (%d times):\n%s", want, n, scr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// showsWithin reports whether the screen shows want within d.
func (s *tmuxSession) showsWithin(want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !strings.Contains(s.screen(), want) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

func (s *tmuxSession) alive() bool {
	_, err := s.tmux("has-session", "-t", s.name)
	return err == nil
}

// The shell connected to a running server, driven through a terminal: a statement over
// several lines, tab completion of a stream name, a push query stopped with Ctrl-C (the
// shell stays), an error with a caret, and \q.
func TestShellInTerminal(t *testing.T) {
	srv, addr := startServer(t)
	home := t.TempDir()
	sh := startTmux(t, "HOME="+home+" "+buildRsql(t)+" --pg-addr "+addr+" --data-dir "+filepath.Join(home, "unused"))
	sh.waitFor("connected to it", 1)
	sh.waitFor("rsql> ", 1)

	sh.send("CREATE STREAM click_events (", "Enter")
	sh.waitFor("   -> ", 1)
	sh.send("  user_id VARCHAR, n BIGINT, ts TIMESTAMP", "Enter")
	sh.send(") WITH (queues = 1);", "Enter")
	sh.waitFor("CREATE STREAM\n", 1)

	// "click_e" + Tab completes to the stream's name from the live catalog.
	sh.send("INSERT INTO click_e", "Tab")
	sh.waitFor("INSERT INTO click_events ", 1)
	sh.send("VALUES ('u1', 7, '2026-11-30T05:00:00Z'), ('u22', 35, '2026-11-30T05:00:01Z');", "Enter")
	sh.waitFor("INSERT 0 2", 1)

	// A push query prints rows as they arrive and runs until Ctrl-C.
	sh.send("SET offset_reset = 'earliest';", "Enter")
	sh.waitFor("SET\n", 1)
	sh.send("SELECT user_id, n * 2 AS doubled FROM click_events;", "Enter")
	scr := sh.waitFor(" u22     |      70", 1)
	if !strings.Contains(scr, " user_id | doubled\n---------+---------\n u1      |      14\n") {
		t.Errorf("push query rows are not an aligned table:\n%s", scr)
	}
	prompts := strings.Count(scr, "rsql> ")
	sh.send("C-c")
	sh.waitFor("rsql> ", prompts+1)
	if !sh.alive() {
		t.Fatal("Ctrl-C ended the shell instead of the query")
	}

	// The shell still works, on the same session; an error shows a caret under its place.
	sh.send("SELECT user_id, nope", "Enter", "FROM click_events;", "Enter")
	// Wait for the caret line itself: the screen already holds a "^C" from the cancel above.
	scr = sh.waitFor("\n                        ^", 1)
	if !strings.Contains(scr, "42703") || !strings.Contains(scr, "LINE 1: SELECT user_id, nope\n                        ^") {
		t.Errorf("error without SQLSTATE or caret:\n%s", scr)
	}
	sh.send("SHOW STREAMS;", "Enter")
	sh.waitFor(" click_events | broker", 1)

	sh.send(`\q`, "Enter")
	deadline := time.Now().Add(30 * time.Second)
	for sh.alive() {
		if time.Now().After(deadline) {
			t.Fatalf("\\q did not end the shell:\n%s", sh.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("server: %v\n%s", err, srv.Stderr.String())
	}
}

// The embedded default: `rsql` alone starts the whole system in the process, prints the
// banner and opens the shell; keywords complete; a second rsql pointed at it with --server
// (RSQL_SERVER) talks to it; Ctrl-C stops a push query only.
func TestEmbeddedDefaultShell(t *testing.T) {
	dir := t.TempDir()
	pgAddr := freePort(t)
	bin := buildRsql(t)
	sh := startTmux(t, "cd "+dir+" && HOME="+dir+" RSQL_PG_ADDR="+pgAddr+" RSQL_NAMESRV_ADDR="+freePort(t)+
		" RSQL_BROKER_ADDR="+freePort(t)+" RSQL_HTTP_ADDR="+freePort(t)+" "+bin)
	scr := sh.waitFor("rsql> ", 1)
	for _, want := range []string{"data directory  ./rsql-data", "Postgres wire   " + pgAddr, "Type \\? for help"} {
		if !strings.Contains(scr, want) {
			t.Errorf("banner lacks %q:\n%s", want, scr)
		}
	}
	sh.send("CREATE STREAM events (a BIGINT, b VARCHAR) WITH (queues = 1);", "Enter")
	sh.waitFor("CREATE STREAM\n", 1)
	sh.send("INSERT INTO events VALUES (41, 'x'), (42, 'y');", "Enter")
	sh.waitFor("INSERT 0 2", 1)
	// A keyword completes in the case it was typed.
	sh.send("sho", "Tab")
	sh.waitFor("rsql> show ", 1)
	sh.send("streams;", "Enter")
	sh.waitFor(" events | broker", 1)

	// A second rsql sends its statements to the running one (--server, here RSQL_SERVER).
	// It reads from the beginning of the topic, so it gets the row inserted below however
	// late its query starts (a session starts at the end of the topic by default).
	cmd := exec.Command(bin, "-c", "SET offset_reset = 'earliest'; SELECT a, b FROM events WHERE a > 42 LIMIT 1", "--format", "json")
	cmd.Dir = t.TempDir()
	cmd.Env = append(cmd.Environ(), "RSQL_SERVER="+pgAddr)
	second := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = second, second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	sh.send("\\timing", "Enter")
	sh.waitFor("Timing is on.", 1)
	sh.send("SELECT a FROM events;", "Enter")
	prompts := strings.Count(sh.screen(), "rsql> ")
	// The push query starts at the end of the topic: rows inserted from then on appear. It
	// may start after an insert (the shell sends the query, the server plans and starts a
	// job), so the row is inserted again until it shows.
	for i := 0; ; i++ {
		ins := exec.Command(bin, "-c", "INSERT INTO events VALUES (43, 'z')")
		ins.Env = append(ins.Environ(), "RSQL_SERVER="+pgAddr)
		if out, err := ins.CombinedOutput(); err != nil {
			t.Fatalf("second rsql: %v\n%s", err, out)
		}
		if sh.showsWithin("\n 43\n", 5*time.Second) {
			break
		}
		if i == 10 {
			t.Fatalf("the push query never showed an inserted row:\n%s", sh.screen())
		}
	}
	sh.send("C-c")
	sh.waitFor("rsql> ", prompts+1)
	sh.waitFor("Time: ", 1)
	select {
	case err := <-done:
		if err != nil || second.String() != `{"a":43,"b":"z"}`+"\n" {
			t.Errorf("second rsql's push query: %v %q", err, second.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("second rsql's push query did not end: %q\n%s", second.String(), sh.screen())
	}
	sh.send(`\q`, "Enter")
	deadline := time.Now().Add(60 * time.Second)
	for sh.alive() {
		if time.Now().After(deadline) {
			t.Fatalf("\\q did not end the embedded rsql:\n%s", sh.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
