package connectors

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional writing to Kafka (delivery = 'transactional'; docs/sql.md, "Kafka", and
// docs/guarantees.md, "Transactional output"). A Kafka producer has at most one open
// transaction, while rsql's writer keeps two (the epoch being committed and the one being
// written), so every transaction gets a producer of its own, with transactional id
// "<group>.<topic>.<producer group>.<tag>" — tag being the epoch number that ends the
// transaction's name ("<run>/<epoch>", exec/sink_tx.go). Each transactional id is used for
// one epoch of a job only:
//
//   - Prepare starts the transaction (InitProducerID fences and aborts whatever an earlier
//     run left open under the same id, an epoch that never committed) and sends the
//     messages in it; Record is the id with the producer id and epoch Kafka gave it.
//   - End commits or aborts it with its producer (EndTxn).
//   - EndRecord, after a restart, commits a recorded transaction with a bare EndTxn of the
//     recorded producer id and epoch, which Kafka accepts as long as no producer of the id
//     started since (none does: ids are not reused by later epochs) and the transaction
//     timeout has not aborted it. Committing again a transaction that did commit is
//     answered as the retry it is.
//
// Kafka has no check-back: an open transaction of a dead run is aborted by the run that
// follows when it first writes (abortLeftovers), or by Kafka after transaction_timeout.

// Transactional starts transactional writing to the sink's topic as producer group group.
// check is not used: Kafka never asks about an open transaction.
func (s *KafkaSink) Transactional(ctx context.Context, group string, _ TxCheck) (TxWriter, error) {
	return &kafkaTxWriter{s: s, prefix: s.cfg.Group + "." + s.topic + "." + group, txns: map[string]*kafkaTxn{}}, nil
}

type kafkaTxWriter struct {
	s      *KafkaSink
	prefix string
	// swept: the transactions an earlier run left open were aborted (first Prepare).
	swept bool

	mu   sync.Mutex
	txns map[string]*kafkaTxn
}

// kafkaTxn is one open transaction and its producer.
type kafkaTxn struct {
	id    string
	cl    *kgo.Client
	pid   int64
	epoch int16
	mu    sync.Mutex
	err   error
}

// txnID is the transactional id of transaction txn: the epoch number its name ends with,
// or (a name of another form) a hash of the name.
func (w *kafkaTxWriter) txnID(txn string) string {
	tag := txn[strings.LastIndexByte(txn, '/')+1:]
	if _, err := strconv.ParseInt(tag, 10, 64); err != nil || tag == "" {
		h := fnv.New64a()
		h.Write([]byte(txn))
		tag = fmt.Sprintf("h%016x", h.Sum64())
	}
	return w.prefix + "." + tag
}

func (w *kafkaTxWriter) open(ctx context.Context, txn string) (*kafkaTxn, error) {
	w.mu.Lock()
	t := w.txns[txn]
	w.mu.Unlock()
	if t != nil {
		return t, nil
	}
	id := w.txnID(txn)
	if !w.swept {
		w.swept = true
		w.abortLeftovers(ctx, id)
	}
	cl, err := w.s.cfg.newClient(kgo.TransactionalID(id), kgo.TransactionTimeout(w.s.cfg.TxTimeout),
		kgo.DefaultProduceTopic(w.s.topic), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordRetries(20), kgo.UnknownTopicRetries(20))
	if err != nil {
		return nil, err
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka topic %s: begin transaction %s: %w", w.s.topic, id, err)
	}
	t = &kafkaTxn{id: id, cl: cl, pid: -1}
	w.mu.Lock()
	w.txns[txn] = t
	w.mu.Unlock()
	return t, nil
}

// abortLeftovers aborts the transactions of this writer's ids that an earlier run left
// open: by now the job's recovery committed every one a checkpoint recorded, so those still
// open belong to epochs that never committed. It asks Kafka for the ongoing transactions
// (ListTransactions, Kafka 3.0 and later) and starts a producer of each id found
// (InitProducerID), which fences it and aborts its transaction. Failures are left to the
// transaction timeout; the epoch rsql writes first (first) is fenced when its producer
// starts anyway.
func (w *kafkaTxWriter) abortLeftovers(ctx context.Context, first string) {
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Ongoing"}
	var ids []string
	for _, sh := range w.s.cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			continue
		}
		resp := sh.Resp.(*kmsg.ListTransactionsResponse)
		for _, ts := range resp.TransactionStates {
			if strings.HasPrefix(ts.TransactionalID, w.prefix+".") && ts.TransactionalID != first {
				ids = append(ids, ts.TransactionalID)
			}
		}
	}
	for _, id := range ids {
		ireq := kmsg.NewPtrInitProducerIDRequest()
		ireq.TransactionalID = kmsg.StringPtr(id)
		ireq.TransactionTimeoutMillis = int32(w.s.cfg.TxTimeout.Milliseconds())
		ireq.ProducerID, ireq.ProducerEpoch = -1, -1
		ireq.RequestWith(ctx, w.s.cl)
	}
}

// Prepare sends msgs in transaction txn and returns once Kafka stored them.
func (w *kafkaTxWriter) Prepare(ctx context.Context, txn string, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	t, err := w.open(ctx, txn)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		t.cl.Produce(ctx, kafkaRecord(w.s.topic, m), func(_ *kgo.Record, err error) {
			if err != nil {
				t.mu.Lock()
				if t.err == nil {
					t.err = err
				}
				t.mu.Unlock()
			}
		})
	}
	if err := t.cl.Flush(ctx); err != nil {
		return Unavailable(fmt.Errorf("kafka topic %s: transaction %s: flush: %w", w.s.topic, t.id, err))
	}
	t.mu.Lock()
	err = t.err
	t.mu.Unlock()
	if err != nil {
		return kafkaError(fmt.Errorf("kafka topic %s: transaction %s: produce: %w", w.s.topic, t.id, err))
	}
	pid, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return kafkaError(fmt.Errorf("kafka topic %s: transaction %s: producer id: %w", w.s.topic, t.id, err))
	}
	w.mu.Lock()
	t.pid, t.epoch = pid, epoch
	w.mu.Unlock()
	return nil
}

const kafkaTxRecordKind = 'K'

// Record is 'K', uvarint length and transactional id, varint producer id, varint epoch.
func (w *kafkaTxWriter) Record(txn string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.txns[txn]
	if t == nil || t.pid < 0 {
		return nil
	}
	return encodeKafkaTxRecord(t.id, t.pid, t.epoch)
}

func encodeKafkaTxRecord(id string, pid int64, epoch int16) []byte {
	out := binary.AppendUvarint([]byte{kafkaTxRecordKind}, uint64(len(id)))
	out = append(out, id...)
	out = binary.AppendVarint(out, pid)
	return binary.AppendVarint(out, int64(epoch))
}

// decodeKafkaTxRecord is the inverse of encodeKafkaTxRecord.
func decodeKafkaTxRecord(rec []byte) (id string, pid int64, epoch int16, err error) {
	if len(rec) == 0 || rec[0] != kafkaTxRecordKind {
		kind := "empty"
		if len(rec) > 0 {
			kind = fmt.Sprintf("kind %q", rec[0])
		}
		return "", 0, 0, fmt.Errorf("%w: %s, want %q (a Kafka transaction)", ErrBadTxRecord, kind, kafkaTxRecordKind)
	}
	rec = rec[1:]
	n, k := binary.Uvarint(rec)
	if k <= 0 || n == 0 || n > uint64(len(rec)-k) {
		return "", 0, 0, fmt.Errorf("%w: no transactional id", ErrBadTxRecord)
	}
	id = string(rec[k : k+int(n)])
	rec = rec[k+int(n):]
	pid, k1 := binary.Varint(rec)
	if k1 <= 0 || pid < 0 {
		return "", 0, 0, fmt.Errorf("%w: no producer id", ErrBadTxRecord)
	}
	e, k2 := binary.Varint(rec[k1:])
	if k2 <= 0 || e < 0 || e > 1<<15-1 {
		return "", 0, 0, fmt.Errorf("%w: no producer epoch", ErrBadTxRecord)
	}
	if len(rec) != k1+k2 {
		return "", 0, 0, fmt.Errorf("%w: %d bytes after the producer epoch", ErrBadTxRecord, len(rec)-k1-k2)
	}
	return id, pid, int16(e), nil
}

// End commits or aborts txn with its producer, then closes the producer.
func (w *kafkaTxWriter) End(ctx context.Context, txn string, commit bool) error {
	w.mu.Lock()
	t := w.txns[txn]
	w.mu.Unlock()
	if t == nil {
		return nil
	}
	if err := t.cl.Flush(ctx); err != nil {
		return Unavailable(fmt.Errorf("kafka topic %s: transaction %s: flush: %w", w.s.topic, t.id, err))
	}
	try := kgo.TryAbort
	if commit {
		try = kgo.TryCommit
	}
	if err := t.cl.EndTransaction(ctx, try); err != nil {
		return kafkaError(fmt.Errorf("kafka topic %s: end transaction %s (commit %v): %w", w.s.topic, t.id, commit, err))
	}
	w.mu.Lock()
	delete(w.txns, txn)
	w.mu.Unlock()
	t.cl.Close()
	return nil
}

// EndRecord ends a recorded transaction with a bare EndTxn of its producer id and epoch.
func (w *kafkaTxWriter) EndRecord(ctx context.Context, rec []byte, commit bool) error {
	if len(rec) == 0 {
		return nil
	}
	id, pid, epoch, err := decodeKafkaTxRecord(rec)
	if err != nil {
		return fmt.Errorf("kafka topic %s: %w", w.s.topic, err)
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	resp, err := req.RequestWith(ctx, w.s.cl)
	if err != nil {
		return Unavailable(fmt.Errorf("kafka topic %s: end recorded transaction %s: %w", w.s.topic, id, err))
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerIDMapping) {
			return fmt.Errorf("kafka topic %s: transaction %s of a committed checkpoint can no longer be committed (Kafka aborted it: was the job down longer than transaction_timeout?): %w", w.s.topic, id, err)
		}
		return kafkaError(fmt.Errorf("kafka topic %s: end recorded transaction %s: %w", w.s.topic, id, err))
	}
	return nil
}

// Close closes the producers of transactions still open, leaving them open in Kafka: the
// next run's producer of the same id, or the transaction timeout, aborts them.
func (w *kafkaTxWriter) Close() error {
	w.mu.Lock()
	ts := w.txns
	w.txns = map[string]*kafkaTxn{}
	w.mu.Unlock()
	for _, t := range ts {
		t.cl.Close()
	}
	return nil
}
