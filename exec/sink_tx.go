package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"rsql/connectors"
	"rsql/state"
)

// Transactional output (delivery = 'transactional', docs/guarantees.md "Transactional
// output"): a main sink that can write transactionally (connectors.TxSink: the broker's
// topics, in process and over the RocketMQ protocol) sends each row at once as a prepared
// message of its epoch's transaction, and commits the transaction once the checkpoint that
// covers the epoch has committed.
//
//   - A run of the sink (one start of the job) has a random id. The rows produced after
//     barrier E-1 form transaction "<run>/<E>" (the tag E is the next barrier's epoch;
//     barriers are numbered consecutively, from the job's last committed epoch on). Each row
//     carries RSQL_TXN = that name and RSQL_ID = "<job>/<E>/<seq>".
//   - At barrier E the sink puts the writer's record of transaction E (where its prepared
//     messages are) into the checkpoint's atomic write, under TxKey(job, stage, E). That
//     record is how the checkpoint store says "epoch E committed": it exists if and only
//     if the checkpoint did.
//   - After the commit the sink ends the transaction (commit) on the committer goroutine,
//     before the stage takes its next barrier, and the next checkpoint deletes the record.
//   - On start, before the job reads anything, every record still in the store — epochs
//     committed whose end may not have reached the broker — is ended again (commit), in
//     epoch order. From then on every prepared message of an earlier run that is still open
//     belongs to an epoch that never committed, and the broker's check-back rolls it back;
//     the run's own are "unknown" (it ends them itself). Before that point every check-back
//     is answered "unknown", so a commit never overtakes the recovery's ordered one.
//   - A job that stops rolls back its epoch in progress; one that ends by LIMIT commits it.

// DeliveryOption is the option of a stream a job writes that chooses how its rows reach a
// topic exactly once: DeliveryOutbox (default) or DeliveryTransactional.
const (
	DeliveryOption        = "delivery"
	DeliveryOutbox        = connectors.DeliveryOutbox
	DeliveryTransactional = connectors.DeliveryTransactional
)

// txOutput is the transactional state of a sinkOp. The stage goroutine runs prepare and
// checkpoint; committed runs on the committer goroutine, never at the same time as
// checkpoint (the stage awaits its last commit first), and reads only staged, stagedEpoch
// and the counts of staged; check runs on the connector's goroutines and reads only run
// and ready.
type txOutput struct {
	job   string
	stage int
	store state.Store
	w     connectors.TxWriter
	run   string
	ready atomic.Bool
	logf  func(string, ...any)

	tag      int64 // the transaction of the rows produced now
	seq      int64 // their next message number
	n, bytes int64 // rows and bytes prepared in tag

	staged, stagedEpoch int64 // the transaction of the checkpoint being committed (0: none)
	stagedN, stagedB    int64
	drop                [][]byte // records of ended transactions: deleted by the next checkpoint
}

// TxGroup is the producer group of a job's transactional sink in a stage: check-backs of its
// prepared messages go to it. instance ("" outside a cluster) keeps instances apart.
func TxGroup(job string, stage int, instance string) string {
	g := "rsql-tx-" + job + "-" + strconv.Itoa(stage)
	if instance != "" {
		g += "-" + instance
	}
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '%' || r == '|' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, g)
}

// openTx starts transactional writing for the sink of stage and recovers what the last
// run left: it runs before the job reads anything.
func openTx(ctx context.Context, env *Env, job string, stage int, ts connectors.TxSink) (*txOutput, error) {
	t := &txOutput{job: job, stage: stage, store: env.Store, logf: env.Logf,
		run: fmt.Sprintf("%016x", rand.Uint64())}
	ep, err := loadEpoch(env.Store, job)
	if err != nil {
		return nil, err
	}
	t.tag = ep + 1
	w, err := ts.Transactional(ctx, TxGroup(job, stage, env.Instance), t.check)
	if err != nil {
		return nil, err
	}
	t.w = w
	if err := t.recover(ctx); err != nil {
		w.Close()
		return nil, err
	}
	t.ready.Store(true)
	return t, nil
}

// recover commits the transactions of every epoch recorded as committed, in epoch order.
func (t *txOutput) recover(ctx context.Context) error {
	type rec struct{ key, val []byte }
	var recs []rec
	prefix := TxPrefix(t.job, t.stage)
	err := t.store.Scan(prefix, func(k, v []byte) error {
		recs = append(recs, rec{append([]byte(nil), k...), append([]byte(nil), v...)})
		return nil
	})
	if err != nil {
		return fmt.Errorf("read transaction records: %w", err)
	}
	for _, r := range recs {
		if len(r.key) != len(prefix)+8 {
			return fmt.Errorf("transaction record key of %d bytes: %w", len(r.key), connectors.ErrBadTxRecord)
		}
		epoch := int64(binary.BigEndian.Uint64(r.key[len(prefix):]))
		if err := t.w.EndRecord(ctx, r.val, true); err != nil {
			return fmt.Errorf("commit the transaction of epoch %d: %w", epoch, err)
		}
		t.drop = append(t.drop, r.key)
	}
	return nil
}

// txnName is the name of transaction tag of run.
func txnName(run string, tag int64) string { return run + "/" + strconv.FormatInt(tag, 10) }

// parseTxn splits a transaction name; ok is false when it is not one.
func parseTxn(txn string) (run string, tag int64, ok bool) {
	run, t, found := strings.Cut(txn, "/")
	if !found || len(run) != 16 {
		return "", 0, false
	}
	for _, c := range run {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", 0, false
		}
	}
	tag, err := strconv.ParseInt(t, 10, 64)
	if err != nil || tag <= 0 {
		return "", 0, false
	}
	return run, tag, true
}

// check answers a check-back (see the file comment).
func (t *txOutput) check(txn string) connectors.TxState {
	run, _, ok := parseTxn(txn)
	if !ok {
		t.logf("job %s: check-back of a prepared message with no valid %s (%q): left undecided", t.job, connectors.PropTxn, txn)
		return connectors.TxUnknown
	}
	if run == t.run || !t.ready.Load() {
		return connectors.TxUnknown
	}
	return connectors.TxRollback
}

// prepare sends rows of the current transaction.
func (t *txOutput) prepare(ctx context.Context, msgs []connectors.Message) error {
	prefix := t.job + "/" + strconv.FormatInt(t.tag, 10) + "/"
	for i := range msgs {
		msgs[i].ID = prefix + strconv.FormatInt(t.seq+int64(i), 10)
	}
	if err := t.w.Prepare(ctx, txnName(t.run, t.tag), msgs); err != nil {
		return err
	}
	t.seq += int64(len(msgs))
	t.n += int64(len(msgs))
	t.bytes += bodyBytes(msgs)
	return nil
}

// checkpoint records the current transaction in the checkpoint of epoch c.Epoch and starts
// the next one; it deletes the records of transactions ended since the last checkpoint.
func (t *txOutput) checkpoint(c *Control) {
	for _, k := range t.drop {
		c.State.Delete(k)
	}
	t.drop = t.drop[:0]
	t.staged, t.stagedEpoch = 0, c.Epoch
	if t.n > 0 {
		c.State.Put(TxKey(t.job, t.stage, t.tag), t.w.Record(txnName(t.run, t.tag)))
		t.staged, t.stagedN, t.stagedB = t.tag, t.n, t.bytes
	}
	t.tag, t.seq, t.n, t.bytes = c.Epoch+1, 0, 0, 0
}

// committed commits the staged transaction once the checkpoint of epoch is durable.
func (t *txOutput) committed(ctx context.Context, s *sinkOp, epoch int64) error {
	if epoch != t.stagedEpoch || t.staged == 0 {
		return nil
	}
	if err := t.w.End(ctx, txnName(t.run, t.staged), true); err != nil {
		return &SinkError{Sink: s.what, Err: err}
	}
	s.cnt.out.Add(t.stagedN)
	s.cnt.bytesOut.Add(t.stagedB)
	t.drop = append(t.drop, TxKey(t.job, t.stage, t.staged))
	t.staged = 0
	return nil
}

// close ends the transactions still open when the sink closes: with commit (the job ended
// by LIMIT without a last checkpoint) both, otherwise the current one is rolled back — this
// run can no longer commit it — and a staged one whose commit did not finish is left to the
// next run. Then it stops answering check-backs.
func (t *txOutput) close(s *sinkOp, commit bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if commit && t.staged != 0 {
		errs = append(errs, t.w.End(ctx, txnName(t.run, t.staged), true))
		s.cnt.out.Add(t.stagedN)
		s.cnt.bytesOut.Add(t.stagedB)
	}
	if t.n > 0 {
		if err := t.w.End(ctx, txnName(t.run, t.tag), commit); err != nil && commit {
			errs = append(errs, err)
		} else if err != nil {
			t.logf("job %s: roll back the output of the epoch in progress: %v (the broker's check-back will)", t.job, err)
		} else if commit {
			s.cnt.out.Add(t.n)
			s.cnt.bytesOut.Add(t.bytes)
		}
	}
	errs = append(errs, t.w.Close())
	return errors.Join(errs...)
}
