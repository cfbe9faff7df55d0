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
)

// shell is the interactive prompt: multi-line statements until ';', history, \? \q \timing.
type shell struct {
	exec    server.Executor
	sess    *server.Session
	timing  bool
	printer *printer
}

const shellHelp = `Statements end with ';' and may span lines.
  \?        this help
  \q        quit
  \timing   toggle printing how long each statement took
Ctrl-C cancels a running query (not the shell); Ctrl-D quits.
SQL reference: docs/sql.md`

// runShell is the embedded default without -c/-f: the engine in this process and the shell.
func runShell(cli *CLI) error {
	eng, err := server.Open(server.Config{DataDir: cli.DataDir})
	if err != nil {
		return &exitError{err.Error()}
	}
	defer eng.Close()
	fmt.Printf("rsql %s — data in %s. Type \\? for help, \\q to quit.\n", version, cli.DataDir)
	sh := &shell{exec: eng, sess: server.NewSession(), printer: newPrinter(os.Stdout, false)}
	return sh.loop(filepath.Join(cli.DataDir, "shell_history"))
}

func (sh *shell) loop(history string) error {
	rl, err := readline.NewEx(&readline.Config{
		Prompt:            "rsql> ",
		HistoryFile:       history,
		InterruptPrompt:   "^C",
		EOFPrompt:         "\\q",
		HistorySearchFold: true,
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
		if !strings.HasSuffix(trimmed, ";") {
			continue
		}
		text := buf.String()
		buf.Reset()
		sh.run(text)
	}
}

// run executes one input; Ctrl-C while it runs cancels it.
func (sh *shell) run(text string) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	start := time.Now()
	results, err := sh.exec.Execute(ctx, sh.sess, text, nil)
	for _, r := range results {
		if perr := sh.printer.result(ctx, r); perr != nil && !errors.Is(perr, context.Canceled) {
			fmt.Fprintln(os.Stderr, perr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, describeError(text, err))
	}
	if sh.timing {
		fmt.Printf("Time: %.3f ms\n", float64(time.Since(start).Microseconds())/1000)
	}
}
