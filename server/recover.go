package server

import (
	"context"
	"fmt"
	"runtime/debug"

	"rsql/connectors"
	"rsql/sql"
)

// A job reads records from anywhere (files, topics anyone may produce to): a bug that makes
// a decoder or a source panic on some input must fail that record or that job, never the
// process. The engine hands a job's runtime formats and sources wrapped so that a panic in
// them becomes an error: a record's decoding error goes the bad-record path (the job goes
// on), a source's read error fails the job. The job's own stages recover in exec.

// safeFormat turns a panic of a Format into an error.
type safeFormat struct {
	f   connectors.Format
	log func(format string, args ...any)
}

func (s safeFormat) Decode(body []byte, row sql.Row) (out sql.Row, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log("record decoder panicked: %v\n%s", p, debug.Stack())
			out, err = row[:0], &connectors.DecodeError{Reason: fmt.Sprintf("internal error decoding the record: %v", p)}
		}
	}()
	return s.f.Decode(body, row)
}

func (s safeFormat) Encode(dst []byte, row sql.Row) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log("record encoder panicked: %v\n%s", p, debug.Stack())
			out, err = dst, fmt.Errorf("internal error encoding a row: %v", p)
		}
	}()
	return s.f.Encode(dst, row)
}

// safeSource wraps the readers of a Source so that a panic in Read is a read error.
type safeSource struct {
	connectors.Source
	log func(format string, args ...any)
}

// Committed passes the positions a committed checkpoint covers on to a source that
// listens for them (connectors.CheckpointListener: a replication slot's reader).
func (s safeSource) Committed(split string, offset int64) {
	if l, ok := s.Source.(connectors.CheckpointListener); ok {
		l.Committed(split, offset)
	}
}

func (s safeSource) Open(ctx context.Context, split string, offset int64) (r connectors.SplitReader, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log("source panicked opening split %s: %v\n%s", split, p, debug.Stack())
			r, err = nil, fmt.Errorf("internal error opening split %s: %v", split, p)
		}
	}()
	r, err = s.Source.Open(ctx, split, offset)
	if err != nil || r == nil {
		return r, err
	}
	sr := safeReader{SplitReader: r, split: split, log: s.log}
	if l, ok := r.(interface{ Lag() int64 }); ok {
		return safeLagReader{sr, l}, nil
	}
	return sr, nil
}

type safeReader struct {
	connectors.SplitReader
	split string
	log   func(format string, args ...any)
}

func (r safeReader) Read(ctx context.Context, buf []connectors.Message, max int) (out []connectors.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log("source panicked reading split %s: %v\n%s", r.split, p, debug.Stack())
			out, err = buf[:0], fmt.Errorf("internal error reading split %s: %v", r.split, p)
		}
	}()
	return r.SplitReader.Read(ctx, buf, max)
}

// safeLagReader keeps the Lag capability of the reader it wraps.
type safeLagReader struct {
	safeReader
	lag interface{ Lag() int64 }
}

func (r safeLagReader) Lag() int64 { return r.lag.Lag() }
