package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/term"

	"rsql/server"
	"rsql/sql"
)

// runStatements is `rsql -c` / `rsql -f`. With --server the statements go to that server
// over the Postgres wire (file paths in them are the server's). Without it they run here, in
// an embedded engine with no listeners and no broker: on --data-dir when it is given,
// otherwise in a private temporary directory removed at exit, so a run never touches (or is
// locked out by) the state of a server running in ./rsql-data. Relative paths are then this
// process's, and the run waits for the jobs it started to end (bounded ones, reading files,
// end by themselves; Ctrl-C stops the others). docs/cli.md states this contract.
func runStatements(c *ShellCmd) error {
	text := c.Command
	if c.File != "" {
		b, err := os.ReadFile(c.File)
		if err != nil {
			return &exitError{fmt.Sprintf("read %s: %v", c.File, err)}
		}
		text = string(b)
	}
	jsonOut := c.Format == "json" || (c.Format == "" && !term.IsTerminal(int(os.Stdout.Fd())))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.Server != "" {
		return runRemote(ctx, c.Server, text, jsonOut)
	}
	dir, persistent := c.DataDir, true
	if dir == "" {
		tmp, err := os.MkdirTemp("", "rsql-run-")
		if err != nil {
			return &exitError{fmt.Sprintf("cannot make a temporary data directory: %v", err)}
		}
		defer os.RemoveAll(tmp)
		dir, persistent = tmp, false
	}
	roots := c.FileRoot
	if len(roots) == 0 {
		roots = embeddedFileRoots(dir)
	}
	lf := c.LimitFlags
	eng, err := server.Open(server.Config{DataDir: dir, FileRoots: roots,
		Limits: sql.Limits{MaxStatementBytes: lf.MaxStatementBytes, MaxExprDepth: lf.MaxExprDepth,
			MaxExprNodes: lf.MaxExprNodes, MaxInsertRows: lf.MaxInsertRows},
		MaxResultBytes: lf.MaxResultBytes})
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
	// Jobs that read only files finish at their end, and say so when they do; the others
	// run until stopped.
	unbounded := 0
	for _, id := range started {
		if !eng.JobBounded(id) {
			unbounded++
		}
	}
	if unbounded > 0 {
		fmt.Fprintf(os.Stderr, "%d job(s) running until stopped; Ctrl-C stops them\n", unbounded)
	}
	if err := eng.WaitJobs(ctx); err != nil {
		if persistent {
			fmt.Fprintf(os.Stderr, "stopping: running jobs are checkpointed in %s and resume at the next run on it\n", dir)
		} else {
			fmt.Fprintln(os.Stderr, "stopping: the jobs still running are dropped with the temporary state (pass --data-dir to keep it)")
		}
	}
	return failedJobs(context.Background(), eng, sess, started)
}

// embeddedFileRoots are the file roots of an embedded run (rsql -c/-f, the shell) without
// --file-root: the working directory, where relative paths start, and the data
// directory's files/ (created when missing).
func embeddedFileRoots(dataDir string) []string {
	roots := []string{"."}
	files := filepath.Join(dataDir, "files")
	if err := os.MkdirAll(files, 0o755); err == nil {
		roots = append(roots, files)
	}
	return roots
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
		if id >= 0 && st >= 0 && mine[row[id].S] && row[st].S == server.JobFailed.String() {
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
type ShellCmd struct {
	DataDir string `name:"data-dir" env:"RSQL_DATA_DIR" help:"All local state: broker store, RocksDB, catalog (default: ./rsql-data for the shell; for -c/-f a private temporary directory removed at exit)."`
	ListenFlags
	ClusterFlags
	SecurityFlags
	Server  string `name:"server" env:"RSQL_SERVER" help:"Send statements (-c, -f, the shell) to this rsql server over the Postgres wire instead of running one here."`
	Command string `short:"c" name:"command" help:"Run these SQL statements and exit." xor:"input"`
	File    string `short:"f" name:"file" help:"Run the SQL statements in this file and exit." xor:"input" type:"existingfile"`
	Format  string `name:"format" enum:"table,json," default:"" help:"Result format of -c/-f: table (default on a terminal) or json (JSON lines)."`
}

func (c *ShellCmd) Run() error {
	if c.Command != "" || c.File != "" {
		return runStatements(c)
	}
	return runShell(c)
}
