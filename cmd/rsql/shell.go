package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/chzyer/readline"

	"rsql/server"
	"rsql/sql"
)

// shell is the interactive prompt: multi-line statements until ';', history, tab completion,
// \? \q \timing.
type shell struct {
	// run executes one input text and prints its results; it returns the error to show.
	run func(ctx context.Context, text string) error
	// names lists the live catalog's stream, view and job names for tab completion.
	names  func(ctx context.Context) []string
	timing bool
}

const shellHelp = `Statements end with ';' and may span lines.
  \?        this help
  \q        quit
  \timing   toggle printing how long each statement took
Tab completes keywords and the names of streams, views and jobs.
A query over a stream prints rows as they arrive until its LIMIT;
Ctrl-C cancels a running query (not the shell); Ctrl-D quits.
SQL reference: docs/sql.md`

// runShell is the embedded default without -c/-f: the whole system in this process and the
// shell; or, when an rsql server already answers on --pg-addr, the shell connected to it.
func runShell(cli *ShellCmd) error {
	if cli.DataDir == "" {
		cli.DataDir = "./rsql-data"
	}
	addr := cli.Server
	if addr == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		conn, err := connectServer(ctx, cli.PgAddr)
		cancel()
		var refused *refusedError
		switch {
		case err == nil:
			conn.Close(context.Background())
			addr = cli.PgAddr
			fmt.Printf("rsql server already running at %s: connected to it.\n", addr)
		case errors.As(err, &refused):
			return refused
		}
	}
	if addr != "" {
		rc := &remoteConn{addr: addr, check: true}
		defer rc.close()
		sh := &shell{
			run:   func(ctx context.Context, text string) error { return rc.run(ctx, text, false) },
			names: rc.catalogNames,
		}
		home, _ := os.UserHomeDir()
		if home == "" {
			home = os.TempDir()
		}
		return sh.loop(filepath.Join(home, ".rsql_history"))
	}
	sys, err := startSystem(cli.DataDir, cli.ListenFlags, cli.ClusterFlags, cli.SecurityFlags, "", embeddedFileRoots(cli.DataDir), "rocksdb", 0, 0)
	if err != nil {
		return err
	}
	defer sys.Close()
	banner(os.Stdout, cli.DataDir, cli.ListenFlags, cli.ClusterFlags, sys)
	fmt.Println("Type \\? for help, \\q to quit.")
	sess := server.NewSession()
	p := newPrinter(os.Stdout, false)
	sh := &shell{run: func(ctx context.Context, text string) error {
		results, err := sys.Engine.Execute(ctx, sess, text, nil)
		for _, r := range results {
			if perr := p.result(ctx, r); perr != nil && !errors.Is(perr, context.Canceled) {
				fmt.Fprintln(os.Stderr, perr)
			}
		}
		if err != nil {
			return &exitError{describeError(text, err)}
		}
		return nil
	}}
	sh.names = func(ctx context.Context) []string {
		var names []string
		for _, q := range []string{"SHOW STREAMS", "SHOW VIEWS", "SHOW JOBS"} {
			results, err := sys.Engine.Execute(ctx, sess, q, nil)
			if err != nil {
				continue
			}
			for _, r := range results {
				names = append(names, firstColumn(ctx, r.Rows)...)
			}
		}
		return names
	}
	return sh.loop(filepath.Join(cli.DataDir, "shell_history"))
}

func (sh *shell) loop(history string) error {
	rl, err := readline.NewEx(&readline.Config{
		Prompt:            "rsql> ",
		HistoryFile:       history,
		InterruptPrompt:   "^C",
		EOFPrompt:         "\\q",
		HistorySearchFold: true,
		AutoComplete:      &completer{names: sh.names},
	})
	if err != nil {
		return err
	}
	defer rl.Close()
	var buf strings.Builder
	for {
		if buf.Len() == 0 {
			rl.SetPrompt("rsql> ")
		} else {
			rl.SetPrompt("   -> ")
		}
		line, err := rl.Readline()
		if errors.Is(err, readline.ErrInterrupt) {
			buf.Reset()
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		trimmed := strings.TrimSpace(line)
		if buf.Len() == 0 && strings.HasPrefix(trimmed, `\`) {
			switch trimmed {
			case `\q`:
				return nil
			case `\?`:
				fmt.Println(shellHelp)
			case `\timing`:
				sh.timing = !sh.timing
				fmt.Printf("Timing is %s.\n", map[bool]string{true: "on", false: "off"}[sh.timing])
			default:
				fmt.Printf("unknown command %s: \\? lists the commands\n", trimmed)
			}
			continue
		}
		buf.WriteString(line)
		buf.WriteString("\n")
		if !strings.HasSuffix(trimmed, ";") || !sql.Complete(buf.String()) {
			continue // a ';' inside a quoted string or a $$ function body does not end it
		}
		text := buf.String()
		buf.Reset()
		sh.execute(text)
	}
}

// execute runs one input; Ctrl-C while it runs cancels it, not the shell.
func (sh *shell) execute(text string) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	start := time.Now()
	if err := sh.run(ctx, text); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if sh.timing {
		fmt.Printf("Time: %.3f ms\n", float64(time.Since(start).Microseconds())/1000)
	}
}
