package connectors

import (
	"context"
	"errors"
)

// Message is one raw record of a split: a file line, a topic message.
type Message struct {
	// Offset is the record's position in its split: the queue offset for topics, the
	// 1-based line number for files. Offsets increase within a split.
	Offset int64
	Key    []byte
	Body   []byte
	// Timestamp is the store time in epoch milliseconds (0 when unknown).
	Timestamp int64
	// ID is a deterministic message id set by exactly-once writers ("<job>/<epoch>/<seq>",
	// or "<stream>/<split>/<offset>" for a dead-letter copy); sinks that can store it with the
	// message do (broker: property RSQL_ID), so a writer that replays after a crash can skip
	// what the sink already holds.
	ID string
	// Split is the split a source read the message from (set by every source's reader).
	Split string
	// Err is set when the record is there but its body cannot be read (a compressed body
	// that does not inflate): Body then holds the stored bytes, and the reader of the
	// record counts it as a bad record instead of decoding it.
	Err error
}

// ErrEndOfSplit is returned by SplitReader.Read when a bounded split has no more records.
var ErrEndOfSplit = errors.New("end of split")

// ErrUnavailable marks a failure of the service behind a connector that passes with time:
// the broker unreachable or restarting, a topic's route missing for now, a request timing
// out, the broker's disk full. A job that stops on it is started again with backoff rather
// than failed. Match it with errors.Is; Unavailable marks an error so.
var ErrUnavailable = errors.New("unavailable for now")

// Unavailable marks err as ErrUnavailable, keeping its message and its chain (nil stays nil).
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return unavailableError{err}
}

type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// ErrFileChanged says a file sink's file no longer holds what its job wrote (it was cut
// or replaced by something else).
var ErrFileChanged = errors.New("file changed by another writer")

// Source is a readable stream: a set of splits (file: one; topic: its queues).
type Source interface {
	// Splits lists the split ids. For a topic, the ids are the queue numbers as text.
	Splits(ctx context.Context) ([]string, error)
	// Open reads split from offset (the first offset not yet processed; 0 = from the start).
	Open(ctx context.Context, split string, offset int64) (SplitReader, error)
	// Bounded reports whether every split ends (files) rather than waiting for more (topics).
	Bounded() bool
	Close() error
}

// SplitReader reads one split in order.
type SplitReader interface {
	// Read appends up to max messages to buf and returns it. It returns ErrEndOfSplit when a
	// bounded split is exhausted, and may return no messages and a nil error when nothing
	// arrived within a short wait (unbounded splits), so callers can check idleness.
	Read(ctx context.Context, buf []Message, max int) ([]Message, error)
	Close() error
}

// Sink is a writable stream.
type Sink interface {
	// Write appends messages; they become durable/visible at the latest at Flush.
	Write(ctx context.Context, msgs []Message) error
	// Flush makes everything written so far durable.
	Flush(ctx context.Context) error
	Close() error
}
