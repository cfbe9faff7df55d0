package connectors

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"rsql/broker"
)

// Transactional starts transactional writing to the sink's topic of the bundled broker, in
// process (broker.Prepare, broker.EndTransactions): a batch of messages is prepared with one
// append per queue, a decision is one append per 1,024 messages. check becomes the group's
// in-process checker: before this returns it decides every prepared message the group's
// previous writer left open.
func (s *BrokerSink) Transactional(ctx context.Context, group string, check TxCheck) (TxWriter, error) {
	w := &brokerTxWriter{s: s, group: group, txns: map[string][]broker.HalfMessage{}}
	remove, err := s.b.SetTransactionChecker(group, func(m broker.Message) broker.TxnState {
		return brokerTxnState(check(m.Properties[PropTxn]))
	})
	if err != nil {
		return nil, fmt.Errorf("topic %s: transactional writing as %s: %w", s.topic, group, err)
	}
	w.remove = remove
	return w, nil
}

func brokerTxnState(s TxState) broker.TxnState {
	switch s {
	case TxCommit:
		return broker.TxnCommit
	case TxRollback:
		return broker.TxnRollback
	}
	return broker.TxnUnknown
}

// brokerTxWriter is a TxWriter on the bundled broker in process.
type brokerTxWriter struct {
	s      *BrokerSink
	group  string
	remove func()

	mu   sync.Mutex
	txns map[string][]broker.HalfMessage // prepared, in order, per transaction
}

func (w *brokerTxWriter) Prepare(ctx context.Context, txn string, msgs []Message) error {
	s := w.s
	byQ := make([][]broker.Message, s.queues)
	s.mu.Lock()
	for _, m := range msgs {
		q := pickQueue(m.Key, s.queues, &s.rr)
		p := map[string]string{PropTxn: txn}
		if m.ID != "" {
			p[PropMessageID] = m.ID
		}
		byQ[q] = append(byQ[q], broker.Message{Key: string(m.Key), Body: m.Body, Properties: p})
	}
	s.mu.Unlock()
	var hs []broker.HalfMessage
	for q, batch := range byQ {
		if len(batch) == 0 {
			continue
		}
		h, err := s.b.Prepare(w.group, s.topic, q, batch)
		if err != nil {
			return fmt.Errorf("topic %s queue %d: prepare %d messages: %w", s.topic, q, len(batch), err)
		}
		hs = append(hs, h...)
	}
	w.mu.Lock()
	w.txns[txn] = append(w.txns[txn], hs...)
	w.mu.Unlock()
	return nil
}

func (w *brokerTxWriter) End(ctx context.Context, txn string, commit bool) error {
	w.mu.Lock()
	hs := w.txns[txn]
	w.mu.Unlock()
	if err := w.s.b.EndTransactions(w.group, hs, commit); err != nil {
		return fmt.Errorf("topic %s: end transaction %s: %w", w.s.topic, txn, err)
	}
	w.mu.Lock()
	delete(w.txns, txn)
	w.mu.Unlock()
	return nil
}

// Record is 'B', uvarint n, then n times varint half queue offset, varint commit-log
// offset (the broker's HalfMessage).
func (w *brokerTxWriter) Record(txn string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return encodeBrokerTxRecord(w.txns[txn])
}

func encodeBrokerTxRecord(hs []broker.HalfMessage) []byte {
	if len(hs) == 0 {
		return nil
	}
	out := binary.AppendUvarint([]byte{brokerTxRecordKind}, uint64(len(hs)))
	for _, h := range hs {
		out = binary.AppendVarint(out, h.QueueOffset)
		out = binary.AppendVarint(out, h.PhysOffset)
	}
	return out
}

const brokerTxRecordKind = 'B'

// decodeBrokerTxRecord is the inverse of encodeBrokerTxRecord.
func decodeBrokerTxRecord(rec []byte) ([]broker.HalfMessage, error) {
	if len(rec) == 0 {
		return nil, nil
	}
	if rec[0] != brokerTxRecordKind {
		return nil, fmt.Errorf("%w: kind %q, want %q (the bundled broker in process)", ErrBadTxRecord, rec[0], brokerTxRecordKind)
	}
	rec = rec[1:]
	n, k := binary.Uvarint(rec)
	if k <= 0 || n > uint64(len(rec))/2 {
		return nil, fmt.Errorf("%w: no message count", ErrBadTxRecord)
	}
	rec = rec[k:]
	hs := make([]broker.HalfMessage, n)
	for i := range hs {
		q, k1 := binary.Varint(rec)
		if k1 <= 0 {
			return nil, fmt.Errorf("%w: message %d has no queue offset", ErrBadTxRecord, i)
		}
		p, k2 := binary.Varint(rec[k1:])
		if k2 <= 0 {
			return nil, fmt.Errorf("%w: message %d has no commit-log offset", ErrBadTxRecord, i)
		}
		if q < 0 || p < 0 {
			return nil, fmt.Errorf("%w: message %d has a negative offset", ErrBadTxRecord, i)
		}
		hs[i] = broker.HalfMessage{QueueOffset: q, PhysOffset: p}
		rec = rec[k1+k2:]
	}
	if len(rec) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last message", ErrBadTxRecord, len(rec))
	}
	return hs, nil
}

func (w *brokerTxWriter) EndRecord(ctx context.Context, rec []byte, commit bool) error {
	hs, err := decodeBrokerTxRecord(rec)
	if err != nil {
		return fmt.Errorf("topic %s: %w", w.s.topic, err)
	}
	if err := w.s.b.EndTransactions(w.group, hs, commit); err != nil {
		return fmt.Errorf("topic %s: end a recorded transaction: %w", w.s.topic, err)
	}
	return nil
}

func (w *brokerTxWriter) Close() error {
	w.remove()
	return nil
}
