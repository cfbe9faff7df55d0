package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"rsql/planner"
	"rsql/state"
)

// The state of a job lives in the store under keys state.SplitPrefix(job, operator, split)
// (state/keys.go), so that a split's keys can be listed, exported and dropped as a unit.
// This file is the one place that knows the operator names; everything else (the cluster
// code in server/ included) builds keys through it.
//
//	operator            split        value
//	"src<stage>"        split        SplitPos: where the split resumes and its watermark
//	"shuf<stage>"       split        a split reading shuffle topics: per input its queue
//	                                 offset, per producing split its de-duplication mark
//	                                 and watermark (shuffle.go: queueState)
//	"dedup<stage>"      queue        de-duplication marks as written before "shuf" (read
//	                                 when "shuf" is absent)
//	"s<stage>.<kind><i>" split       operator i's state (OperatorID), keys below the prefix
//	"out<stage>"        split        the split's outbox entries (rows of the stage's sink
//	                                 held for their checkpoint), + 8-byte epoch
//	"view<stage>"       split        a materialized view's rows (tableout.go)
//	"wm"                "<stage>"    the stage's output watermark (varint)
//	"out"               "<stage>"    outbox entries written before "out<stage>" (recovered)
//	"out"               "<stage>.tx" transaction records of its transactional sink, + 8-byte epoch
//	"job"               "epoch"      the last committed epoch (state.JobOperator)
//
// The first six are per split — the unit (Unit: stage, split) an instance can own — and
// move with it (KeyUnit tells which unit a key belongs to); the last four belong to the
// instance running the stage (see docs/checkpoints.md).

// Operator names of the keys above that belong to no split of a source.
const (
	WatermarkOperator = "wm"
	OutboxOperator    = "out"
)

// SplitKey is the store key of a split's position (SplitPos) in a stage.
func SplitKey(job string, stage int, split string) []byte {
	return state.SplitPrefix(nil, job, "src"+strconv.Itoa(stage), split)
}

// OffsetKey is SplitKey (the name it had when it held only the offset).
func OffsetKey(job string, stage int, split string) []byte { return SplitKey(job, stage, split) }

// WatermarkKey is the store key of a stage's output watermark at the last checkpoint.
func WatermarkKey(job string, stage int) []byte {
	return state.SplitPrefix(nil, job, WatermarkOperator, strconv.Itoa(stage))
}

// EpochKey is the store key of the job's last committed epoch.
func EpochKey(job string) []byte { return state.SplitPrefix(nil, job, state.JobOperator, "epoch") }

// loadEpoch reads the job's last committed epoch (0 when none was committed); a value that
// is not a varint is reported, not read as epoch 0.
func loadEpoch(st state.Store, job string) (int64, error) {
	v, ok, err := st.Get(EpochKey(job))
	if err != nil || !ok {
		return 0, err
	}
	ep, n := binary.Varint(v)
	if n <= 0 {
		return 0, fmt.Errorf("job %s: the stored epoch (%d bytes) is not a varint", job, len(v))
	}
	return ep, nil
}

// CountersKey is the store key of the job's counters (records in and out, bytes, bad and
// late rows) as of its last checkpoint: a job started again from its state goes on counting
// from them (docs/operations.md, "Job counters").
func CountersKey(job string) []byte {
	return state.SplitPrefix(nil, job, state.JobOperator, "counters")
}

// fields lists the counters a checkpoint keeps, in their stored order.
func (c *counters) fields() []*atomic.Int64 {
	return []*atomic.Int64{&c.in, &c.out, &c.bad, &c.late, &c.bytesIn, &c.bytesOut}
}

// appendCounters encodes the counters as varints, in fields order.
func appendCounters(b []byte, c *counters) []byte {
	for _, f := range c.fields() {
		v := f.Load()
		switch f {
		case &c.out:
			v += c.stagedOut.Load()
		case &c.bytesOut:
			v += c.stagedBytes.Load()
		}
		b = binary.AppendVarint(b, v)
	}
	return b
}

// decodeCounters reads what appendCounters wrote into c. A value written by a later
// version with more counters is read as far as this one knows; a truncated or negative
// one is an error.
func decodeCounters(v []byte, c *counters) error {
	for i, f := range c.fields() {
		x, n := binary.Varint(v)
		if n <= 0 {
			return fmt.Errorf("stored counters: field %d of %d is not a varint", i+1, len(c.fields()))
		}
		if x < 0 {
			return fmt.Errorf("stored counters: field %d is negative (%d)", i+1, x)
		}
		f.Store(x)
		v = v[n:]
	}
	return nil
}

// loadCounters sets c to the job's counters as of its last checkpoint (zero when none).
func loadCounters(st state.Store, job string, c *counters) error {
	v, ok, err := st.Get(CountersKey(job))
	if err != nil || !ok {
		return err
	}
	var tmp counters
	if err := decodeCounters(v, &tmp); err != nil {
		return fmt.Errorf("job %s: %w", job, err)
	}
	for i, f := range c.fields() {
		f.Store(tmp.fields()[i].Load())
	}
	return nil
}

// OutboxPrefix is the store prefix of a stage's outbox entries.
func OutboxPrefix(job string, stage int) []byte {
	return state.SplitPrefix(nil, job, OutboxOperator, strconv.Itoa(stage))
}

// TxPrefix is the store prefix of the transaction records of a stage's transactional sink
// (sink_tx.go).
func TxPrefix(job string, stage int) []byte {
	return state.SplitPrefix(nil, job, OutboxOperator, strconv.Itoa(stage)+".tx")
}

// TxKey is the store key of the record of a stage's transaction of epoch: TxPrefix and the
// epoch as 8 big-endian bytes.
func TxKey(job string, stage int, epoch int64) []byte {
	return binary.BigEndian.AppendUint64(TxPrefix(job, stage), uint64(epoch))
}

// DedupKey is the store key of a shuffle queue's de-duplication marks as written before
// ShuffleKey (still read when a split has no ShuffleKey).
func DedupKey(job string, stage int, queue string) []byte {
	return state.SplitPrefix(nil, job, "dedup"+strconv.Itoa(stage), queue)
}

// ShuffleKey is the store key of what a split reading shuffle topics has applied: per
// input its queue offset, per producing split its de-duplication mark and watermark.
func ShuffleKey(job string, stage int, split string) []byte {
	return state.SplitPrefix(nil, job, "shuf"+strconv.Itoa(stage), split)
}

// UnitOutboxPrefix is the store prefix of the outbox entries of one split of a stage.
func UnitOutboxPrefix(job string, stage int, split string) []byte {
	return state.SplitPrefix(nil, job, OutboxOperator+strconv.Itoa(stage), split)
}

// KeyUnit returns the unit a store key of job belongs to; ok is false for keys of no unit
// (the instance's: stage watermarks, outboxes written before units had their own, the
// epoch) and for keys that are not the job's.
func KeyUnit(job string, key []byte) (u Unit, ok bool) {
	j, op, sp, _, ok := state.KeyParts(key)
	if !ok || string(j) != job {
		return Unit{}, false
	}
	o := string(op)
	var digits string
	switch {
	case strings.HasPrefix(o, "src"):
		digits = o[3:]
	case strings.HasPrefix(o, "shuf"):
		digits = o[4:]
	case strings.HasPrefix(o, "dedup"):
		digits = o[5:]
	case strings.HasPrefix(o, "view"):
		digits = o[4:]
	case strings.HasPrefix(o, OutboxOperator):
		digits = o[len(OutboxOperator):]
	case strings.HasPrefix(o, "s"):
		digits, _, ok = strings.Cut(o[1:], ".")
		if !ok {
			return Unit{}, false
		}
	default:
		return Unit{}, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || strconv.Itoa(n) != digits {
		return Unit{}, false
	}
	return Unit{Stage: n, Split: string(sp)}, true
}

// OperatorID names operator i of a stage in state keys: "s<stage>.<kind><i>", kind "agg"
// for aggregations (the other stateful kinds name themselves: "topn", ...).
func OperatorID(stage int, kind string, i int) string {
	return "s" + strconv.Itoa(stage) + "." + kind + strconv.Itoa(i)
}

// SplitPos is what a checkpoint records of a split: the next offset to read (sources and
// shuffle queues; 0 for in-process queues), the largest event time read (MinWatermark:
// none), and the split's watermark, which may be ahead of MaxTs - delay when the split was
// idle.
type SplitPos struct {
	Next  int64
	MaxTs int64
	WM    int64
	// InWM is, for a split of a stage with several inputs, each input's own watermark (what
	// its operators judge lateness by); nil otherwise.
	InWM []int64
}

// Encode returns the stored form: three varints, then, with InWM, its length (uvarint) and
// its values (varints).
func (p SplitPos) Encode() []byte {
	b := binary.AppendVarint(nil, p.Next)
	b = binary.AppendVarint(b, p.MaxTs)
	b = binary.AppendVarint(b, p.WM)
	if len(p.InWM) > 0 {
		b = binary.AppendUvarint(b, uint64(len(p.InWM)))
		for _, w := range p.InWM {
			b = binary.AppendVarint(b, w)
		}
	}
	return b
}

var errBadSplitPos = errors.New("corrupt split position")

// DecodeSplitPos decodes a SplitPos. A value written before the watermark was kept has two
// varints: its watermark is MaxTs - delay.
func DecodeSplitPos(v []byte, delay int64) (SplitPos, error) {
	p := SplitPos{MaxTs: MinWatermark, WM: MinWatermark}
	var n int
	if p.Next, n = binary.Varint(v); n <= 0 {
		return p, errBadSplitPos
	}
	v = v[n:]
	if len(v) == 0 {
		return p, nil
	}
	if p.MaxTs, n = binary.Varint(v); n <= 0 {
		return p, errBadSplitPos
	}
	v = v[n:]
	if len(v) == 0 {
		p.WM = splitWM(p.MaxTs, delay)
		return p, nil
	}
	if p.WM, n = binary.Varint(v); n <= 0 {
		return p, errBadSplitPos
	}
	v = v[n:]
	if len(v) == 0 {
		return p, nil
	}
	cnt, n := binary.Uvarint(v)
	if n <= 0 || cnt == 0 || cnt > uint64(len(v)) {
		return p, errBadSplitPos
	}
	v = v[n:]
	p.InWM = make([]int64, cnt)
	for i := range p.InWM {
		if p.InWM[i], n = binary.Varint(v); n <= 0 {
			return p, errBadSplitPos
		}
		v = v[n:]
	}
	if len(v) != 0 {
		return p, errBadSplitPos
	}
	return p, nil
}

// Unit is what an instance can own of a job: one split of one stage, with its position,
// its operators' state and its de-duplication marks.
type Unit struct {
	Stage int
	Split string
}

func (u Unit) String() string { return strconv.Itoa(u.Stage) + "/" + u.Split }

// ParseUnit is the inverse of Unit.String.
func ParseUnit(s string) (Unit, bool) {
	st, sp, ok := strings.Cut(s, "/")
	if !ok || sp == "" {
		return Unit{}, false
	}
	n, err := strconv.Atoi(st)
	if err != nil || n < 0 || strconv.Itoa(n) != st {
		return Unit{}, false
	}
	return Unit{Stage: n, Split: sp}, true
}

// Units lists the ownable units of a plan: every split of every stage. splits lists a
// stream source's splits (it opens the source); exchange queues are counted from the plan
// (defaultQueues when an exchange does not say).
func Units(ctx context.Context, plan *planner.Physical, defaultQueues int, splits func(context.Context, planner.SourceSpec) ([]string, error)) ([]Unit, error) {
	var out []Unit
	for _, st := range plan.Stages {
		names, err := stageSplits(ctx, plan, st, defaultQueues, func(ctx context.Context, i int) ([]string, error) {
			return splits(ctx, st.Inputs[i])
		})
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			out = append(out, Unit{Stage: st.ID, Split: n})
		}
	}
	return out, nil
}

// stageSplits names a stage's splits (see planner.Stage).
func stageSplits(ctx context.Context, plan *planner.Physical, st *planner.Stage, defaultQueues int, splits func(context.Context, int) ([]string, error)) ([]string, error) {
	var out []string
	for i, in := range st.Inputs {
		if in.FromStage >= 0 {
			up := plan.Stage(in.FromStage)
			if up == nil || up.Exchange == nil {
				return nil, fmt.Errorf("%w: stage %d reads stage %d, which has no exchange", ErrBadPlan, st.ID, in.FromStage)
			}
			q := exchangeQueues(up.Exchange, defaultQueues)
			if len(out) == 0 {
				for k := 0; k < q; k++ {
					out = append(out, strconv.Itoa(k))
				}
			} else if len(out) != q {
				return nil, fmt.Errorf("%w: stage %d reads exchanges of %d and %d queues", ErrBadPlan, st.ID, len(out), q)
			}
			continue
		}
		names, err := splits(ctx, i)
		if err != nil {
			return nil, &SourceError{Stream: in.Stream, Err: err}
		}
		for _, n := range names {
			out = append(out, qualifySplit(st, i, n))
		}
	}
	return out, nil
}

// qualifySplit is the stage's name of split raw of input i: the raw name when the stage
// has one input, else "<i>:<raw>".
func qualifySplit(st *planner.Stage, i int, raw string) string {
	if len(st.Inputs) == 1 {
		return raw
	}
	return strconv.Itoa(i) + ":" + raw
}

// unqualifySplit is the inverse of qualifySplit.
func unqualifySplit(st *planner.Stage, name string) (input int, raw string, ok bool) {
	if len(st.Inputs) == 1 {
		return 0, name, true
	}
	i, rest, found := strings.Cut(name, ":")
	if !found {
		return 0, "", false
	}
	n, err := strconv.Atoi(i)
	if err != nil || n < 0 || n >= len(st.Inputs) {
		return 0, "", false
	}
	return n, rest, true
}

func exchangeQueues(x *planner.ExchangeNode, defaultQueues int) int {
	if x.Queues > 0 {
		return x.Queues
	}
	return defaultQueues
}
