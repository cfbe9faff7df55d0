package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// LocalCheckpointStore is the CheckpointStore of a single instance: checkpoints are written
// into the instance's own Store (the one operators use), and the split generations and the
// catalog are kept in that Store too, under operator names starting "ckpt." that operators
// may not use. It fences stale generations within the instance (e.g. a split task that
// outlived its removal) but cannot move a split to another machine.
type LocalCheckpointStore struct {
	st Store
	mu sync.Mutex // serializes every read-check-write of generations and the catalog

	// beforeWrite, when set (tests), runs after a commit's checks and before its single
	// write; an error aborts the commit as a crash at that point would.
	beforeWrite func() error
}

// NewLocalCheckpointStore returns a checkpoint store over st. Close does not close st.
func NewLocalCheckpointStore(st Store) *LocalCheckpointStore {
	return &LocalCheckpointStore{st: st}
}

const (
	localSplitOperator   = reservedOperatorPrefix + "split"
	localCatalogOperator = reservedOperatorPrefix + "catalog"
)

func localSplitKey(job, split string) []byte {
	return SplitPrefix(nil, job, localSplitOperator, split)
}

var localCatalogKey = SplitPrefix(nil, "", localCatalogOperator, "catalog")

// splitMeta is what LocalCheckpointStore keeps per split.
type splitMeta struct {
	gen, epoch, offset int64
	hasOffset          bool
	owner              string
}

// encodeSplitMeta: varint generation, varint epoch, one byte (1: has offset), varint
// offset, then the owner's name.
func encodeSplitMeta(m splitMeta) []byte {
	b := binary.AppendVarint(nil, m.gen)
	b = binary.AppendVarint(b, m.epoch)
	if m.hasOffset {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendVarint(b, m.offset)
	return append(b, m.owner...)
}

var errCorruptSplitMeta = errors.New("state: corrupt split checkpoint record")

func decodeSplitMeta(b []byte) (splitMeta, error) {
	var m splitMeta
	var vals [2]int64
	p := 0
	for i := range vals {
		v, n := binary.Varint(b[p:])
		if n <= 0 {
			return m, fmt.Errorf("%w: bad varint at byte %d", errCorruptSplitMeta, p)
		}
		vals[i], p = v, p+n
	}
	if p >= len(b) || b[p] > 1 {
		return m, fmt.Errorf("%w: bad offset flag at byte %d", errCorruptSplitMeta, p)
	}
	m.hasOffset = b[p] == 1
	p++
	v, n := binary.Varint(b[p:])
	if n <= 0 {
		return m, fmt.Errorf("%w: bad varint at byte %d", errCorruptSplitMeta, p)
	}
	m.gen, m.epoch, m.offset, m.owner = vals[0], vals[1], v, string(b[p+n:])
	return m, nil
}

func (s *LocalCheckpointStore) meta(job, split string) (splitMeta, error) {
	v, ok, err := s.st.Get(localSplitKey(job, split))
	if err != nil || !ok {
		return splitMeta{}, err
	}
	m, err := decodeSplitMeta(v)
	if err != nil {
		return m, fmt.Errorf("split %q of job %q: %w", split, job, err)
	}
	return m, nil
}

// Acquire implements CheckpointStore.
func (s *LocalCheckpointStore) Acquire(ctx context.Context, job, split, owner string) (int64, error) {
	if job == "" || split == "" {
		return 0, fmt.Errorf("%w: acquire needs a job and a split (got %q, %q)", ErrBadCheckpoint, job, split)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.meta(job, split)
	if err != nil {
		return 0, err
	}
	m.gen++
	m.owner = owner
	if err := s.st.Put(localSplitKey(job, split), encodeSplitMeta(m)); err != nil {
		return 0, err
	}
	return m.gen, nil
}

// Release implements CheckpointStore.
func (s *LocalCheckpointStore) Release(ctx context.Context, job, split string, gen int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.meta(job, split)
	if err != nil {
		return err
	}
	if m.gen != gen {
		return &FencedError{Job: job, Split: split, Held: gen, Current: m.gen, Owner: m.owner}
	}
	m.gen++
	m.owner = ""
	return s.st.Put(localSplitKey(job, split), encodeSplitMeta(m))
}

// Commit implements CheckpointStore: after the checks, cp.State and the splits' records go
// to the Store in one Write.
func (s *LocalCheckpointStore) Commit(ctx context.Context, cp *Checkpoint) error {
	b := &Batch{}
	pl, err := validateCheckpoint(cp, func(kind OpKind, _ string, key, value []byte) error {
		switch kind {
		case OpPut:
			b.Put(key, value)
		case OpDelete:
			b.Delete(key)
		case OpDropPrefix:
			b.DropPrefix(key)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	metas := make(map[string]splitMeta, len(pl.order))
	for _, sp := range pl.order {
		m, err := s.meta(cp.Job, sp)
		if err != nil {
			return err
		}
		if held := pl.covered[sp]; m.gen == 0 || m.gen != held {
			return &FencedError{Job: cp.Job, Split: sp, Held: held, Current: m.gen, Owner: m.owner}
		}
		if cp.Epoch > m.epoch {
			m.epoch = cp.Epoch
		}
		metas[sp] = m
	}
	for _, o := range cp.Offsets {
		m := metas[o.Split]
		m.offset, m.hasOffset = o.Offset, true
		metas[o.Split] = m
	}
	for _, sp := range pl.order {
		b.Put(localSplitKey(cp.Job, sp), encodeSplitMeta(metas[sp]))
	}
	if s.beforeWrite != nil {
		if err := s.beforeWrite(); err != nil {
			return err
		}
	}
	return s.st.Write(b)
}

// Load implements CheckpointStore. It scans the job's keys (the local store has no index
// by split), skipping the stores' own records.
func (s *LocalCheckpointStore) Load(ctx context.Context, job, split string, fn func(key, value []byte) error) (SplitInfo, error) {
	info := SplitInfo{Job: job, Split: split}
	if split != "" {
		m, err := s.meta(job, split)
		if err != nil {
			return info, err
		}
		info.Owner, info.Generation, info.Epoch = m.owner, m.gen, m.epoch
		info.Offset, info.HasOffset = m.offset, m.hasOffset
	}
	if split == "" {
		return info, s.st.Scan(OperatorPrefix(nil, job, JobOperator), fn)
	}
	jobPrefix := binary.AppendUvarint(nil, uint64(len(job)))
	jobPrefix = append(jobPrefix, job...)
	err := s.st.Scan(jobPrefix, func(k, v []byte) error {
		_, op, sp, _, ok := KeyParts(k)
		if !ok || string(sp) != split || string(op) == JobOperator || len(op) >= len(reservedOperatorPrefix) && string(op[:len(reservedOperatorPrefix)]) == reservedOperatorPrefix {
			return nil
		}
		return fn(k, v)
	})
	return info, err
}

// Catalog implements CheckpointStore.
func (s *LocalCheckpointStore) Catalog(ctx context.Context) ([]byte, int64, error) {
	v, ok, err := s.st.Get(localCatalogKey)
	if err != nil || !ok {
		return nil, 0, err
	}
	ver, n := binary.Varint(v)
	if n <= 0 {
		return nil, 0, fmt.Errorf("state: corrupt catalog record: bad version")
	}
	return v[n:], ver, nil
}

// PutCatalog implements CheckpointStore.
func (s *LocalCheckpointStore) PutCatalog(ctx context.Context, data []byte, version int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, cur, err := s.Catalog(ctx)
	if err != nil {
		return 0, err
	}
	if cur != version {
		return cur, fmt.Errorf("%w: expected version %d, found %d", ErrCatalogConflict, version, cur)
	}
	v := binary.AppendVarint(nil, cur+1)
	if err := s.st.Put(localCatalogKey, append(v, data...)); err != nil {
		return 0, err
	}
	return cur + 1, nil
}

// Close implements CheckpointStore; the underlying Store stays open.
func (s *LocalCheckpointStore) Close() error { return nil }
