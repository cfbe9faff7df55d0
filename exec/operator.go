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

// Batch is a group of rows of one split of a stage. Rows and their values are valid only
// during the call that receives the batch: an operator that keeps a value past the call
// copies it (sql.Value is a plain struct, so copying a Value is enough, but its string is
// shared: see ownValue).
type Batch struct {
	Split string
	Rows  []sql.Row
	// Offsets, when not nil, is the source offset of each row (parallel to Rows): stages
	// that end in a shuffle topic track it so the rows get deterministic ids. Operators
	// that drop, repeat or truncate rows keep it parallel; operators that make new rows
	// (aggregations) leave it nil.
	Offsets []int64
	// Hashes, when not nil, is the hash of each row's exchange keys (sql.HashValue from
	// sql.HashSeed, parallel to Rows), from the in-process exchange that delivered the
	// batch to its stage. Only an operator that reads its stage's input directly may read
	// it (planner.AggregateNode.KeysHashed); operators pass it on to no one.
	Hashes []uint64
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

// Emitter takes an operator's output rows. The batch and its rows are only borrowed: the
// receiver is done with them when Emit returns, so the operator may reuse their storage.
type Emitter interface {
	Emit(b *Batch) error
}

// Operator is one operator of a stage's DAG (the arroyo shape). It is told which of its
// inputs a batch came from and emits through the Emitter it is handed; it never holds a
// reference to its downstream. The runtime, not the operator, forwards watermarks and
// control messages: after an operator's Watermark or Control returns, the runtime hands the
// same message to the operator downstream, so whatever the operator emitted in the call
// reaches downstream first. All calls come from the stage's one goroutine: an operator
// needs no locks.
//
// Watermarks are per split. Operators keep their state per split (a split's rows never
// share a group with another split's, see the planner's exchange rule), so a split's
// windows close on that split's watermark: a split that falls behind the others, or comes
// back after a rebalance with its checkpointed watermark, is judged by its own progress,
// and a row that is in order within its split is never late because of another split.
type Operator interface {
	// Process handles a batch that arrived on input in (0 for one-input operators).
	Process(in int, b *Batch, out Emitter) error
	// Watermark says no more rows of split with event time < wm will arrive (MaxWatermark:
	// the split ended). A split's watermarks only increase.
	Watermark(split string, wm int64, out Emitter) error
	// Control handles a control message (NewSplit, RemoveSplit, Checkpoint).
	Control(c *Control, out Emitter) error
	// Close releases resources after the last call; it does not emit anything.
	Close() error
}

// inputWatermarker is an operator of several inputs that judges a row's lateness by its own
// input's watermark rather than the split's (the minimum over the inputs): a row that is in
// order within its stream is then never late because another input lags, and a row late
// for its stream is late whatever the other inputs do. The stage calls InputWatermark, before
// Watermark, when an input it feeds directly reports a higher watermark for a split.
type inputWatermarker interface {
	InputWatermark(split string, input int, wm int64)
}

// stateless gives an operator without state the Watermark, Control and Close it needs.
type stateless struct{}

func (stateless) Watermark(string, int64, Emitter) error { return nil }
func (stateless) Control(*Control, Emitter) error        { return nil }
func (stateless) Close() error                           { return nil }

// output is where a stage's rows leave it: a sink, the client, an in-process exchange or a
// shuffle topic. It sees the stage's watermark (the minimum over the stage's splits), and
// the checkpoint barrier after every operator has written its state.
type output interface {
	Process(b *Batch) error
	Watermark(wm int64) error
	Control(c *Control) error
	// End says the stage's input ended normally (bounded input, LIMIT): an exchange tells
	// the downstream stage.
	End() error
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

// flush emits the arena's rows (if any) and resets it.
func (a *rowArena) flush(split string, out Emitter) error {
	if len(a.ends) == 0 {
		return nil
	}
	b := a.build(split)
	a.reset()
	return out.Emit(b)
}
