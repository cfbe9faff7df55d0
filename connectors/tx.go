package connectors

import (
	"context"
	"errors"
)

// Transactional writing, as RocketMQ does it (docs/guarantees.md, "Transactional output"):
// messages are sent at once as prepared (half) messages — stored by the broker, invisible to
// every consumer — and a later decision per transaction commits them (they reach their
// queues then, in the order they were prepared) or rolls them back. A broker that finds a
// prepared message still open after a while asks its producer group (the check-back); the
// writer answers by the transaction named in the message's PropTxn property.

// PropTxn is the property every prepared message of a TxWriter carries: the name of its
// transaction.
const PropTxn = "RSQL_TXN"

// TxState is an answer to a check-back.
type TxState int8

const (
	// TxUnknown: not decided yet; the broker asks again later.
	TxUnknown TxState = iota
	TxCommit
	TxRollback
)

// TxCheck answers the check-back of a prepared message by its transaction (its PropTxn
// property; "" when it has none). It is called from the connector's goroutines, concurrently
// with everything else, and must be quick.
type TxCheck func(txn string) TxState

// TxSink is a sink that can also write transactionally.
type TxSink interface {
	Sink
	// Transactional starts writing as producer group group, a name the writer keeps across
	// restarts and shares with no other writer (check-backs go to the group). check answers
	// check-backs from then on; an in-process broker also asks it about every prepared
	// message of the group still open before Transactional returns (what a crashed writer
	// left behind).
	Transactional(ctx context.Context, group string, check TxCheck) (TxWriter, error)
}

// TxWriter writes transactions to a sink's topic: Prepare adds messages to a transaction,
// End decides it. Prepare and End may run concurrently for different transactions.
type TxWriter interface {
	// Prepare sends msgs as prepared messages of transaction txn (queue by key as the
	// sink's Write chooses; Message.ID travels as RSQL_ID) and returns once the broker
	// stored all of them.
	Prepare(ctx context.Context, txn string, msgs []Message) error
	// Record describes what txn prepared so far, for EndRecord by a later writer of the
	// same group and topic (after a restart); nil when nothing.
	Record(txn string) []byte
	// End commits or rolls back every message this writer prepared in txn, and returns once
	// the broker applied the decision: a commit makes them visible, the messages of a key
	// in the order they were prepared (in process: those of a queue). Ending a transaction
	// with nothing prepared does nothing.
	End(ctx context.Context, txn string, commit bool) error
	// EndRecord decides the messages of a Record as End does. A message already decided
	// is skipped by the bundled broker; Apache RocketMQ commits it again
	// (docs/guarantees.md). A record this kind of writer cannot read is an error.
	EndRecord(ctx context.Context, rec []byte, commit bool) error
	// Close stops answering check-backs. Open transactions stay open for the group's next
	// writer (or the broker's check limit).
	Close() error
}

// ErrBadTxRecord says a transaction record is corrupt or of another kind of writer.
var ErrBadTxRecord = errors.New("bad transaction record")
