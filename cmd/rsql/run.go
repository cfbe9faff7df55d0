package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"rsql/server"
	"rsql/sql"
)

// runStatements is `rsql -c` / `rsql -f`: run the statements, print their results, and with
// the embedded system keep running while any job it started runs.
func runStatements(cli *CLI) error {
	text := cli.Command
	if cli.File != "" {
		b, err := os.ReadFile(cli.File)
		if err != nil {
			return &exitError{fmt.Sprintf("read %s: %v", cli.File, err)}
		}
		text = string(b)
	}
	jsonOut := cli.Format == "json" || (cli.Format == "" && !term.IsTerminal(int(os.Stdout.Fd())))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cli.Server != "" {
		return runRemote(ctx, cli.Server, text, jsonOut)
	}
	// Like the shell: when an rsql server already answers on --pg-addr, the statements go to
	// it (its data directory is locked, and its broker holds the streams).
	probe, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	conn, err := connectServer(probe, cli.PgAddr)
	cancel()
	if err == nil {
		conn.Close(context.Background())
		return runRemote(ctx, cli.PgAddr, text, jsonOut)
	}

	eng, err := server.Open(server.Config{DataDir: cli.DataDir})
	if err != nil {
		return &exitError{err.Error()}
	}
	defer eng.Close()
	p := newPrinter(os.Stdout, jsonOut)
	sess := server.NewSession()
	results, err := eng.Execute(ctx, sess, text, nil)
	for _, r := range results {
		if perr := p.result(ctx, r); perr != nil {
			return &exitError{perr.Error()}
		}
	}
	if err != nil {
		return &exitError{describeError(text, err)}
	}
	started := eng.RunningJobIDs()
	if n := len(started); n > 0 {
		fmt.Fprintf(os.Stderr, "%d job(s) running; Ctrl-C stops them\n", n)
	}
	if err := eng.WaitJobs(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "stopping: jobs still running are checkpointed and resume at the next start")
	}
	return failedJobs(context.Background(), eng, sess, started)
}

// failedJobs returns an exit error naming the jobs of ids that ended FAILED (so a bounded
// run whose job failed exits non-zero), or nil.
func failedJobs(ctx context.Context, eng *server.Engine, sess *server.Session, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	results, err := eng.Execute(ctx, sess, "SHOW JOBS", nil)
	if err != nil || len(results) != 1 || results[0].Rows == nil {
		return nil
	}
	r := results[0]
	defer r.Rows.Close()
	id, st, msg := r.Columns.Index("id"), r.Columns.Index("state"), r.Columns.Index("error")
	mine := map[string]bool{}
	for _, j := range ids {
		mine[j] = true
	}
	var failed []string
	for {
		row, err := r.Rows.Next(ctx)
		if err != nil || row == nil {
			break
		}
		if id >= 0 && st >= 0 && mine[row[id].S] && row[st].S == "FAILED" {
			line := row[id].S + " failed"
			if msg >= 0 && row[msg].S != "" {
				line += ": " + row[msg].S
			}
			failed = append(failed, line)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &exitError{strings.Join(failed, "\n")}
}

// describeError renders an error; a SQL error with a position shows the line of the
// statement text and a caret under the column.
func describeError(text string, err error) string {
	var se *sql.Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	msg := fmt.Sprintf("ERROR %s: %s", se.Code, se.Error())
	if se.Line <= 0 {
		return msg
	}
	lines := strings.Split(text, "\n")
	if se.Line > len(lines) {
		return msg
	}
	line := strings.ReplaceAll(lines[se.Line-1], "\t", " ")
	col := se.Column
	if col < 1 {
		col = 1
	}
	if col > len(line)+1 {
		col = len(line) + 1
	}
	prefix := fmt.Sprintf("LINE %d: ", se.Line)
	return msg + "\n" + prefix + line + "\n" + strings.Repeat(" ", len(prefix)+col-1) + "^"
}

// ShellCmd is the embedded default: with -c/-f it runs statements; otherwise it starts the
// whole system and opens the shell.
type ShellCmd struct{}

func (c *ShellCmd) Run(cli *CLI) error {
	if cli.Command != "" || cli.File != "" {
		return runStatements(cli)
	}
	return runShell(cli)
}
