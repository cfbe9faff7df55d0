package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// fileOutput is how one job writes its file sink (docs/sql.md, "File sinks"):
//
//   - the job that defines the stream (CREATE [OR REPLACE] STREAM ... AS) replaces the
//     file's content: a bounded job (every source a file) writes a temporary file next to
//     it and renames it over the path when it finishes, so the path holds either the
//     previous complete output or the new one; an unbounded job empties the file when it
//     first starts;
//   - an INSERT INTO job appends to the file;
//   - a job started again (rsql restarted, RESUME, another instance taking it over)
//     continues its file exactly once: the file sink cuts the file back to the end its last
//     checkpoint recorded and the job writes what followed again (connectors.FileSink).
//
// That needs one writer per file, which the engine enforces (Engine.fileWriter).
type fileOutput struct {
	files   *connectors.FileRoots
	final   string // the stream's path
	temp    string // where a bounded replacing job writes until it finishes; "" otherwise
	replace bool   // the job defines the stream: its output replaces the file's content

	mu     sync.Mutex
	opened bool // the main sink was opened once in this process
}

// newFileOutput describes the file output of job for a sink with path, or returns nil for
// sinks of other connectors.
func newFileOutput(files *connectors.FileRoots, job string, sink planner.SinkSpec, defines, bounded bool) *fileOutput {
	if sink.Connector != "file" || sink.Options.Path == "" {
		return nil
	}
	o := &fileOutput{files: files, final: sink.Options.Path, replace: defines}
	if defines && bounded {
		dir, base := filepath.Split(o.final)
		o.temp = filepath.Join(dir, "."+base+"."+job+".rsql-tmp")
	}
	return o
}

// open opens the job's main file sink: the temporary file of a bounded replacing job, the
// path otherwise. fresh says the job is new (not started again): then a replacing job's
// file starts empty; the first open in this process only.
func (o *fileOutput) open(fresh bool) (connectors.Sink, error) {
	o.mu.Lock()
	truncate := fresh && o.replace && !o.opened
	o.opened = true
	o.mu.Unlock()
	path := o.final
	if o.temp != "" {
		path = o.temp
	}
	sink, err := o.files.OpenSink(path, connectors.FileSinkOptions{Truncate: truncate})
	if err != nil {
		return nil, fileError(err)
	}
	return sink, nil
}

// finish puts a bounded job's complete output in place.
func (o *fileOutput) finish() error {
	if o.temp == "" {
		return nil
	}
	if err := o.files.Rename(o.temp, o.final); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// The job wrote nothing: its output is an empty file.
			return o.files.WriteFile(o.final, nil)
		}
		return fmt.Errorf("file sink %s: put the finished output in place: %w", o.final, err)
	}
	return nil
}

// discard removes a bounded job's unfinished output (the job failed or was terminated).
func (o *fileOutput) discard() {
	if o.temp != "" {
		o.files.Remove(o.temp)
	}
}

// isMain reports whether spec is the job's main sink (and not a dead-letter or late file).
func (o *fileOutput) isMain(spec, sink planner.SinkSpec) bool {
	return spec.Connector == "file" && spec.Stream == sink.Stream && spec.Options.Path == o.final
}

// fileWriter returns the id of a live job (RUNNING or PAUSED) other than except that
// writes the file at path, or "".
func (e *Engine) fileWriter(path, except string) string {
	want := e.files.Abs(path)
	for _, j := range e.cat.Jobs() {
		if !j.live() || j.ID == except {
			continue
		}
		d, ok := e.cat.Stream(j.Sink)
		if !ok {
			continue
		}
		if o := d.StreamOptions(); o.Connector == "file" && e.files.Abs(o.Path) == want {
			return j.ID
		}
	}
	return ""
}

// checkFileWriter refuses (55006) a new writer of a file stream that a live job writes.
func (e *Engine) checkFileWriter(d StreamDef, what string) error {
	o := d.StreamOptions()
	if o.Connector != "file" {
		return nil
	}
	if j := e.fileWriter(o.Path, ""); j != "" {
		return sql.Errorf(sql.CodeInUse, "%s: job %s writes %s, and a file has one writer at a time (TERMINATE JOB %s first)", what, j, o.Path, j)
	}
	return nil
}
