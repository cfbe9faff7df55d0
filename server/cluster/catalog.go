package cluster

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"rsql/state"
)

// Catalog is what the instances share of the engine's catalog: its canonical form, and
// replacing it with another instance's (persisted).
type Catalog interface {
	// Snapshot returns the catalog as canonical JSON.
	Snapshot() ([]byte, error)
	// Replace makes the catalog exactly what data (a Snapshot) holds, and persists it.
	Replace(data []byte) error
}

// CatalogSync keeps a local catalog and the shared one (in the checkpoint store) the same:
// local changes are pushed, the others' pulled, and a conflict goes to whoever wrote first.
type CatalogSync struct {
	cs   *state.PostgresCheckpointStore
	cat  Catalog
	logf func(format string, args ...any)

	mu      sync.Mutex // guards version and synced
	version int64      // the shared catalog's version last pushed or pulled
	synced  []byte     // its contents then
}

// NewCatalogSync syncs cat through cs; logf logs a local change dropped in a conflict.
func NewCatalogSync(cs *state.PostgresCheckpointStore, cat Catalog, logf func(format string, args ...any)) *CatalogSync {
	return &CatalogSync{cs: cs, cat: cat, logf: logf}
}

// Sync pushes local catalog changes to the shared catalog and pulls the others'.
func (s *CatalogSync) Sync(ctx context.Context) error {
	local, err := s.cat.Snapshot()
	if err != nil {
		return err
	}
	s.mu.Lock()
	version, synced := s.version, s.synced
	s.mu.Unlock()
	if version == 0 && synced == nil {
		// First sync: the shared catalog wins when there is one, else ours becomes it.
		data, v, err := s.cs.Catalog(ctx)
		if err != nil {
			return err
		}
		if v > 0 {
			if err := s.cat.Replace(data); err != nil {
				return err
			}
			s.setSynced(v, data)
			return nil
		}
		nv, err := s.cs.PutCatalog(ctx, local, 0)
		if errors.Is(err, state.ErrCatalogConflict) {
			return s.pull(ctx)
		}
		if err != nil {
			return err
		}
		s.setSynced(nv, local)
		return nil
	}
	if !bytes.Equal(local, synced) {
		nv, err := s.cs.PutCatalog(ctx, local, version)
		if errors.Is(err, state.ErrCatalogConflict) {
			// Another instance changed it first: theirs wins; a statement that raced it
			// is undone here (its job, if any, stops at the next reconcile).
			s.logf("cluster: the shared catalog changed concurrently; a local change made since version %d is dropped", version)
			return s.pull(ctx)
		}
		if err != nil {
			return err
		}
		s.setSynced(nv, local)
		return nil
	}
	return s.pull(ctx)
}

func (s *CatalogSync) pull(ctx context.Context) error {
	data, v, err := s.cs.Catalog(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	same := v == s.version
	s.mu.Unlock()
	if same {
		return nil
	}
	if err := s.cat.Replace(data); err != nil {
		return err
	}
	norm, err := s.cat.Snapshot()
	if err != nil {
		return err
	}
	s.setSynced(v, norm)
	return nil
}

func (s *CatalogSync) setSynced(v int64, data []byte) {
	s.mu.Lock()
	s.version, s.synced = v, data
	s.mu.Unlock()
}
