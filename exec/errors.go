package exec

import (
	"errors"
	"fmt"
)

// Errors of the package. Match them with errors.Is / errors.As.
var (
	// ErrBadPlan: the physical plan cannot be run (e.g. an exchange that is not the last
	// node of its stage, a stage that reads an unknown upstream stage).
	ErrBadPlan = errors.New("exec: bad physical plan")
	// ErrMissingEnv: the plan needs something Env does not provide (a sink opener, a format).
	ErrMissingEnv = errors.New("exec: missing from Env")
)

// RecordError describes one bad input record: which stream, split and offset (for files the
// offset is the 1-based line number) and why it could not be used.
type RecordError struct {
	Stream string
	Split  string
	Offset int64
	Line   bool // Offset is a line number
	Err    error
}

func (e *RecordError) Error() string {
	where := "offset"
	if e.Line {
		where = "line"
	}
	return fmt.Sprintf("stream %s, split %s, %s %d: %v", e.Stream, e.Split, where, e.Offset, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// SinkError wraps a failure to write to, flush or close a sink.
type SinkError struct {
	Sink string
	Err  error
}

func (e *SinkError) Error() string { return fmt.Sprintf("sink %s: %v", e.Sink, e.Err) }
func (e *SinkError) Unwrap() error { return e.Err }

// SourceError wraps a failure to open or read a source split.
type SourceError struct {
	Stream, Split string
	Err           error
}

func (e *SourceError) Error() string {
	if e.Split == "" {
		return fmt.Sprintf("source %s: %v", e.Stream, e.Err)
	}
	return fmt.Sprintf("source %s, split %s: %v", e.Stream, e.Split, e.Err)
}
func (e *SourceError) Unwrap() error { return e.Err }
