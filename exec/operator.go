package exec

import (
	"errors"
	"math"

	"rsql/sql"
	"rsql/state"
)

// Watermark bounds.
const (
	// MinWatermark is the watermark before any event time is known.
	MinWatermark int64 = math.MinInt64
	// MaxWatermark is the watermark of an input that has ended: every window closes.
	MaxWatermark int64 = math.MaxInt64
)

// Batch is a group of rows from one split, pushed through a pipeline. Rows and their values
// are valid only during the Process call that receives the batch: an operator that keeps a
// value past the call copies it (sql.Value is a plain struct, so copying a Value is enough).
type Batch struct {
	Split string
	Rows  []sql.Row
	// Offsets, when not nil, is the source offset of each row (parallel to Rows): stages
	// that end in a shuffle topic track it so the rows get deterministic ids. Operators
	// that drop, repeat or truncate rows keep it parallel; operators that make new rows
	// (aggregations) leave it nil.
	Offsets []int64
}

// ControlKind is the kind of a Control message.
type ControlKind uint8

// Control messages flow in-band, in order with data.
const (
	// NewSplit: the split's first record follows; load its state before.
	NewSplit ControlKind = iota + 1
	// RemoveSplit: the split has no more records here; write its state to Control.State and
	// drop the local copy.
	RemoveSplit
	// Checkpoint: a barrier; write every split's changed state to Control.State, sinks flush.
	Checkpoint
)

func (k ControlKind) String() string {
	switch k {
	case NewSplit:
		return "NewSplit"
	case RemoveSplit:
		return "RemoveSplit"
	case Checkpoint:
		return "Checkpoint"
	}
	return "Control?"
}

// Control is a control message. State collects the state writes of RemoveSplit and
// Checkpoint; the runtime commits it atomically with the source offsets.
type Control struct {
	Kind  ControlKind
	Split string // NewSplit, RemoveSplit
	Epoch int64  // Checkpoint
	State *state.Batch
}

// Operator is one step of a pipeline. An operator pushes its output to the next operator
// (given when it is built) synchronously, so when Process returns every row of the batch has
// reached the end of the pipeline or the operator's state. All calls come from one goroutine
// (the stage's task); an operator needs no locks.
type Operator interface {
	// Process handles a batch of rows.
	Process(b *Batch) error
	// Watermark says no more rows with event time < wm will arrive (MaxWatermark: input
	// ended). Watermarks only increase. Operators forward it after acting on it.
	Watermark(wm int64) error
	// Control handles a control message and forwards it.
	Control(c *Control) error
	// Close releases resources after the last call; it does not emit anything.
	Close() error
}

// ErrLimitReached is returned by a LIMIT operator once it has let its last row through; the
// runtime then ends the job normally.
var ErrLimitReached = errors.New("exec: limit reached")

// rowArena builds output rows without allocating per row: values go into one slice and rows
// are cut from it once the batch is complete.
type rowArena struct {
	vals  []sql.Value
	ends  []int
	rows  []sql.Row
	batch Batch
}

func (a *rowArena) reset() { a.vals, a.ends = a.vals[:0], a.ends[:0] }

// endRow marks the values appended since the previous endRow as one row.
func (a *rowArena) endRow() { a.ends = append(a.ends, len(a.vals)) }

func (a *rowArena) len() int { return len(a.ends) }

// build cuts the rows and returns a batch over them (valid until the next reset).
func (a *rowArena) build(split string) *Batch {
	a.rows = a.rows[:0]
	start := 0
	for _, e := range a.ends {
		a.rows = append(a.rows, sql.Row(a.vals[start:e:e]))
		start = e
	}
	a.batch.Split, a.batch.Rows, a.batch.Offsets = split, a.rows, nil
	return &a.batch
}

// flush pushes the arena's rows to next (if any) and resets it.
func (a *rowArena) flush(split string, next Operator) error {
	if len(a.ends) == 0 {
		return nil
	}
	b := a.build(split)
	a.reset()
	return next.Process(b)
}
