package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"rsql/state"
)

// Several instances (rsql server --postgres URL): the instances share a Postgres checkpoint
// store, which also holds their catalog and their membership. Every instance runs every
// RUNNING job of the shared catalog, each for the units it owns (docs/guarantees.md,
// "Several instances"):
//
//   - Membership: each instance joins under a stable name (kept in its data directory) and
//     renews a lease every Tick; the live members are those whose lease has not expired.
//   - Units (cluster_units.go) are a job's (stage, split) pairs, exec.Units: the source
//     stage's splits are its topic's queues, a downstream stage's its shuffle topic's
//     queues (every exchange goes through a shuffle topic, exec.Divisible). Each stage's
//     units are divided evenly among the live members (assign), and any member runs any
//     unit of any stage. A job whose plan keeps an exchange in process (it reads files, or
//     a stage before an exchange keeps state) runs whole on one member: all its units go
//     to one owner.
//   - A change of the assignment (a member joined, left or lost its lease) moves only the
//     units it moves: the owner giving one up removes it from its running job (exec.
//     RemoveUnit: the unit's final state committed) and releases it; the owner gaining it
//     waits until it is released or its owner is no longer live, acquires it (fencing any
//     earlier owner), loads its committed state into the local store and adds it to its
//     running job (exec.AddUnit). The other units go on meanwhile. A job run whole moves
//     by checkpointing, stopping and starting on its new owner.
//   - Every checkpoint commits through the Postgres store with the generations held, each
//     unit's keys under the unit's name ("<stage>/<split>"); a fenced commit (another
//     instance took a unit over) writes nothing, stops the local job, and the next
//     reconcile starts it again with what the instance owns by then. After Postgres, the
//     checkpoint is written to the local store, which operators read.
//   - Keys that belong to the instance and not to a unit — the job's checkpoint epoch and
//     the stages' output watermarks — are committed under the instance's own split
//     "@<name>" (operator "i.<op>.<split>"), so they are atomic with the units' state and
//     come back when the instance restarts. Epochs of an instance start at member number
//     << 40, so two instances never give two outbox entries the same message ids.

// ClusterConfig configures cluster mode.
type ClusterConfig struct {
	// Checkpoints is the shared store (required).
	Checkpoints *state.PostgresCheckpointStore
	// Name is the instance's stable name (default: kept in the data directory).
	Name string
	// Addr is shown to other members (diagnostics).
	Addr string
	// Tick is how often the lease is renewed and ownership reconciled (default 500ms).
	Tick time.Duration
	// Lease is how long a member stays live without renewing (default 3s).
	Lease time.Duration
}

type cluster struct {
	e    *Engine
	cs   *state.PostgresCheckpointStore
	cfg  ClusterConfig
	self state.Member

	mu         sync.Mutex // guards the fields below
	members    []string
	held       map[string]map[string]int64 // job -> split (unit name or "@<self>") -> generation
	selfLoaded map[string]bool             // job -> instance split loaded in this process
	jobs       map[string]*clusterJob      // job -> its units and what runs here
	startErr   map[string]string           // job -> last error starting it (logged once)
	catVersion int64
	catSynced  []byte

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// selfSplit is the instance's own split: keys that belong to no source split.
func (c *cluster) selfSplit() string { return "@" + c.self.Name }

const instanceOpPrefix = "i."

func startCluster(e *Engine, cfg ClusterConfig) (*cluster, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = 500 * time.Millisecond
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 3 * time.Second
	}
	c := &cluster{e: e, cs: cfg.Checkpoints, cfg: cfg, held: map[string]map[string]int64{},
		selfLoaded: map[string]bool{}, jobs: map[string]*clusterJob{}, startErr: map[string]string{}, done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	m, err := c.cs.Join(ctx, cfg.Name, cfg.Addr, cfg.Lease)
	if err != nil {
		return nil, err
	}
	c.self = m
	if err := c.refreshMembers(ctx); err != nil {
		return nil, err
	}
	if err := c.syncCatalog(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// run renews the lease, syncs the catalog and reconciles jobs every Tick until close.
func (c *cluster) run() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
		if err := c.cs.Heartbeat(ctx, c.self.Name, c.cfg.Lease); errors.Is(err, state.ErrNotMember) {
			_, err = c.cs.Join(ctx, c.self.Name, c.cfg.Addr, c.cfg.Lease)
		} else if err != nil {
			c.logf("cluster: heartbeat: %v", err)
		}
		if err := c.refreshMembers(ctx); err != nil {
			c.logf("cluster: %v", err)
		}
		if err := c.syncCatalog(ctx); err != nil {
			c.logf("cluster: catalog: %v", err)
		}
		c.reconcile(ctx)
		cancel()
	}
}

func (c *cluster) logf(format string, args ...any) {
	if c.ctx.Err() == nil {
		fmt.Fprintf(c.e.cfg.Log, format+"\n", args...)
	}
}

func (c *cluster) refreshMembers(ctx context.Context) error {
	ms, err := c.cs.Members(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ms)+1)
	for _, m := range ms {
		names = append(names, m.Name)
	}
	if !slices.Contains(names, c.self.Name) {
		names = append(names, c.self.Name) // we are live as long as we run
		sort.Strings(names)
	}
	c.mu.Lock()
	if !slices.Equal(names, c.members) {
		c.logf("cluster: live members %v", names)
	}
	c.members = names
	c.mu.Unlock()
	return nil
}

// syncCatalog pushes local catalog changes to the shared catalog and pulls the others'.
func (c *cluster) syncCatalog(ctx context.Context) error {
	local, err := c.e.cat.snapshot()
	if err != nil {
		return err
	}
	c.mu.Lock()
	version, synced := c.catVersion, c.catSynced
	c.mu.Unlock()
	if version == 0 && synced == nil {
		// First sync: the shared catalog wins when there is one, else ours becomes it.
		data, v, err := c.cs.Catalog(ctx)
		if err != nil {
			return err
		}
		if v > 0 {
			if err := c.e.cat.replace(data); err != nil {
				return err
			}
			c.setSynced(v, data)
			return nil
		}
		nv, err := c.cs.PutCatalog(ctx, local, 0)
		if errors.Is(err, state.ErrCatalogConflict) {
			return c.pullCatalog(ctx)
		}
		if err != nil {
			return err
		}
		c.setSynced(nv, local)
		return nil
	}
	if !bytes.Equal(local, synced) {
		nv, err := c.cs.PutCatalog(ctx, local, version)
		if errors.Is(err, state.ErrCatalogConflict) {
			// Another instance changed it first: theirs wins; a statement that raced it
			// is undone here (its job, if any, stops at the next reconcile).
			c.logf("cluster: the shared catalog changed concurrently; a local change made since version %d is dropped", version)
			return c.pullCatalog(ctx)
		}
		if err != nil {
			return err
		}
		c.setSynced(nv, local)
		return nil
	}
	return c.pullCatalog(ctx)
}

func (c *cluster) pullCatalog(ctx context.Context) error {
	data, v, err := c.cs.Catalog(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	same := v == c.catVersion
	c.mu.Unlock()
	if same {
		return nil
	}
	if err := c.e.cat.replace(data); err != nil {
		return err
	}
	norm, err := c.e.cat.snapshot()
	if err != nil {
		return err
	}
	c.setSynced(v, norm)
	return nil
}

func (c *cluster) setSynced(v int64, data []byte) {
	c.mu.Lock()
	c.catVersion, c.catSynced = v, data
	c.mu.Unlock()
}

// instanceName returns the instance's stable name, kept in the data directory (created on
// first use).
func instanceName(dataDir string) (string, error) {
	p := filepath.Join(dataDir, "instance-name")
	if b, err := os.ReadFile(p); err == nil {
		if n := strings.TrimSpace(string(b)); n != "" {
			return n, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	n := "rsql-" + hex.EncodeToString(r[:])
	if err := os.WriteFile(p, []byte(n+"\n"), 0o644); err != nil {
		return "", err
	}
	return n, nil
}
