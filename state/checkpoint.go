package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// CheckpointStore is where a job's checkpoints become durable, and the only place where the
// ownership of a split between rsql instances is decided. LocalCheckpointStore keeps
// everything in the instance's own Store; PostgresCheckpointStore keeps it in a Postgres
// database shared by several instances, so that one instance can take a split over from
// another together with its state.
//
// Ownership and fencing. A split is (job, split): split is the split component of the
// state keys (SplitPrefix), e.g. a source queue or an exchange queue. Each split has a
// generation that only grows. Acquire makes the caller the split's owner and returns a
// generation greater than every generation handed out before for that split, so taking a
// split over fences every earlier owner. Commit and Release carry the generation the caller
// holds; if any split's current generation differs, nothing is written and the error
// matches ErrFenced (errors.As gives a *FencedError). An instance that gets ErrFenced has
// lost the split and must stop processing it without touching its state.
//
// Contract:
//   - Acquire(job, split, owner) always succeeds for a live store (ownership is assigned
//     above this layer; the store only makes a takeover safe). owner names the instance for
//     diagnostics. The split "" is refused (it holds job-wide keys).
//   - Commit is atomic: either every operation of cp.State, every offset and the epoch are
//     durable, or (error, crash, lost connection) none of them is and the previous
//     checkpoint stays what Load returns. It writes only if, at the moment it commits, the
//     caller still holds the generation of every split in cp.Splits. Every key of cp.State
//     must belong to cp.Job and to a split in cp.Splits, except job-wide keys (operator
//     JobOperator), which are written unfenced; DropPrefix operations must name at least a
//     whole split prefix (SplitPrefix). A violation is ErrBadCheckpoint and writes nothing.
//     cp.State's operations apply in order, as Store.Write would.
//   - Commits of disjoint sets of splits may run concurrently (from one or many instances).
//   - Load calls fn, in ascending key order, for every committed key of the split (split ""
//     gives the job-wide keys), and returns the split's ownership and last checkpoint. It
//     reads one consistent snapshot. It does not need ownership. key and value are valid
//     only during the call. An error from fn stops Load and is returned.
//   - Release gives a split up: it fails with ErrFenced like Commit, otherwise the split has
//     no owner and the released generation can no longer commit.
//   - Catalog returns the shared catalog blob and its version (0 and nil when none was ever
//     stored). PutCatalog stores a new blob only if the current version is still version,
//     and returns the new version; otherwise it returns ErrCatalogConflict and the caller
//     re-reads, merges and retries.
//   - Every method is safe for concurrent use. Close releases connections; it does not
//     release splits.
type CheckpointStore interface {
	Acquire(ctx context.Context, job, split, owner string) (generation int64, err error)
	Commit(ctx context.Context, cp *Checkpoint) error
	Load(ctx context.Context, job, split string, fn func(key, value []byte) error) (SplitInfo, error)
	Release(ctx context.Context, job, split string, generation int64) error
	Catalog(ctx context.Context) (data []byte, version int64, err error)
	PutCatalog(ctx context.Context, data []byte, version int64) (newVersion int64, err error)
	Close() error
}

// Checkpoint is one atomic commit of a job's state delta for some of its splits.
type Checkpoint struct {
	Job   string
	Epoch int64 // recorded per split and (maximum) per job; 0 for a split given up
	// Splits are the splits this checkpoint covers and the generation the committer holds
	// for each (from Acquire).
	Splits []SplitGeneration
	// Offsets are the splits' next offsets to read; each must be of a split in Splits.
	Offsets []CheckpointOffset
	// State is the delta: keys of the splits in Splits (and job-wide keys). May be nil.
	State *Batch
}

// SplitGeneration is a split and the generation its committer holds.
type SplitGeneration struct {
	Split      string
	Generation int64
}

// CheckpointOffset is the first offset of a split not covered by the checkpoint.
type CheckpointOffset struct {
	Split  string
	Offset int64
}

// SplitInfo is a split's ownership and its last committed checkpoint.
type SplitInfo struct {
	Job, Split string
	Owner      string // "" when released or never acquired
	Generation int64  // 0 when never acquired
	Epoch      int64  // epoch of the last checkpoint that covered the split, 0 if none
	Offset     int64  // valid when HasOffset
	HasOffset  bool
}

// JobOperator is the operator name of job-wide keys (such as the job's epoch):
// SplitPrefix(job, JobOperator, name) keys belong to no split and are not fenced.
const JobOperator = "job"

// reservedOperatorPrefix starts operator names the checkpoint stores keep for themselves.
const reservedOperatorPrefix = "ckpt."

// Errors of the checkpoint stores.
var (
	ErrFenced          = errors.New("state: split is owned by a newer generation")
	ErrBadCheckpoint   = errors.New("state: invalid checkpoint")
	ErrCatalogConflict = errors.New("state: catalog changed since it was read")
)

// FencedError says which split fenced a Commit or Release. It matches ErrFenced.
type FencedError struct {
	Job, Split string
	Held       int64  // generation the caller presented
	Current    int64  // generation in the store (0: never acquired)
	Owner      string // current owner ("" when released)
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("state: split %q of job %q is fenced: held generation %d, current %d (owner %q)",
		e.Split, e.Job, e.Held, e.Current, e.Owner)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// KeyParts splits a state key (or a prefix at least as long as SplitPrefix) into its job,
// operator and split components and the rest. ok is false when key is not of that form
// (lengths must be uvarints in their shortest form, as SplitPrefix writes them).
// The slices alias key.
func KeyParts(key []byte) (job, operator, split, rest []byte, ok bool) {
	var parts [3][]byte
	p := 0
	for i := range parts {
		l, n := binary.Uvarint(key[p:])
		if n <= 0 || l > uint64(len(key)-p-n) || n > 1 && key[p+n-1] == 0 {
			return nil, nil, nil, nil, false // truncated, or a length not in its shortest form
		}
		p += n
		parts[i] = key[p : p+int(l) : p+int(l)]
		p += int(l)
	}
	return parts[0], parts[1], parts[2], key[p:], true
}

// checkpointPlan is a validated Checkpoint: the split every operation belongs to.
type checkpointPlan struct {
	covered map[string]int64 // split -> generation held
	order   []string         // cp.Splits in a fixed (sorted) order, for locking
}

// validateCheckpoint checks cp against the contract and calls fn, in order, for every
// operation of cp.State with the split it belongs to ("" for job-wide keys).
func validateCheckpoint(cp *Checkpoint, fn func(kind OpKind, split string, key, value []byte) error) (*checkpointPlan, error) {
	if cp == nil || cp.Job == "" {
		return nil, fmt.Errorf("%w: no job", ErrBadCheckpoint)
	}
	pl := &checkpointPlan{covered: make(map[string]int64, len(cp.Splits))}
	for _, sg := range cp.Splits {
		if sg.Split == "" {
			return nil, fmt.Errorf("%w: job %q: empty split name", ErrBadCheckpoint, cp.Job)
		}
		if _, dup := pl.covered[sg.Split]; dup {
			return nil, fmt.Errorf("%w: job %q: split %q listed twice", ErrBadCheckpoint, cp.Job, sg.Split)
		}
		pl.covered[sg.Split] = sg.Generation
		pl.order = append(pl.order, sg.Split)
	}
	slices.Sort(pl.order)
	for _, o := range cp.Offsets {
		if _, ok := pl.covered[o.Split]; !ok {
			return nil, fmt.Errorf("%w: job %q: offset of split %q which the checkpoint does not cover", ErrBadCheckpoint, cp.Job, o.Split)
		}
	}
	if cp.State == nil {
		return pl, nil
	}
	i := 0
	err := cp.State.Each(func(kind OpKind, key, value []byte) error {
		defer func() { i++ }()
		split, err := keySplit(cp.Job, key, pl.order)
		if err != nil {
			return fmt.Errorf("%w: operation %d: %v", ErrBadCheckpoint, i, err)
		}
		if kind == OpDropPrefix && split == "" {
			return fmt.Errorf("%w: operation %d: DropPrefix of job-wide keys", ErrBadCheckpoint, i)
		}
		if fn != nil {
			return fn(kind, split, key, value)
		}
		return nil
	})
	return pl, err
}

// keySplit returns the split a key of job belongs to ("" for job-wide keys), checking that
// it is covered.
func keySplit(job string, key []byte, order []string) (string, error) {
	kj, op, sp, _, ok := KeyParts(key)
	if !ok {
		return "", fmt.Errorf("key %x is not a (job, operator, split) state key", key)
	}
	if string(kj) != job {
		return "", fmt.Errorf("key %x belongs to job %q, not %q", key, kj, job)
	}
	if bytes.HasPrefix(op, []byte(reservedOperatorPrefix)) {
		return "", fmt.Errorf("key %x uses the reserved operator %q", key, op)
	}
	if string(op) == JobOperator {
		return "", nil
	}
	for _, s := range order { // few splits: find the name without allocating a string
		if s == string(sp) {
			return s, nil
		}
	}
	return "", fmt.Errorf("key %x belongs to split %q which the checkpoint does not cover", key, sp)
}

// LoadInto copies a split's committed state from cs into dst in one atomic write, after
// dropping every prefix in drop (the split's stale local state, e.g. exec's
// Job.SplitPrefixes). It returns the split's SplitInfo.
func LoadInto(ctx context.Context, cs CheckpointStore, job, split string, dst Store, drop ...[]byte) (SplitInfo, error) {
	b := &Batch{}
	for _, p := range drop {
		b.DropPrefix(p)
	}
	info, err := cs.Load(ctx, job, split, func(k, v []byte) error { b.Put(k, v); return nil })
	if err != nil {
		return info, err
	}
	if err := dst.Write(b); err != nil {
		return info, fmt.Errorf("state: import split %q of job %q: %w", split, job, err)
	}
	return info, nil
}

// BatchSplits returns, sorted, the splits of job that b's operations touch (job-wide keys
// and keys of other jobs excluded) — the splits a checkpoint of b must cover. Operations
// that are not state keys are ignored here; Commit refuses them.
func BatchSplits(job string, b *Batch) []string {
	var out []string
	if b == nil {
		return nil
	}
	b.Each(func(_ OpKind, key, _ []byte) error {
		kj, op, sp, _, ok := KeyParts(key)
		if !ok || string(kj) != job || string(op) == JobOperator {
			return nil
		}
		for _, s := range out {
			if s == string(sp) {
				return nil
			}
		}
		out = append(out, string(sp))
		return nil
	})
	slices.Sort(out)
	return out
}
