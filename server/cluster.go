package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"rsql/server/cluster"
	"rsql/state"
)

// Several instances (rsql server --postgres URL): the instances share a Postgres checkpoint
// store, which also holds their catalog and their membership. Every instance runs every
// RUNNING job of the shared catalog, each for the units it owns (docs/guarantees.md,
// "Several instances"):
//
//   - Membership (server/cluster): each instance joins under a stable name (kept in its
//     data directory) and renews a lease every Tick; the live members are those whose
//     lease has not expired. The shared catalog is kept in step by cluster.CatalogSync.
//   - Units (cluster_units.go) are a job's (stage, split) pairs, exec.Units: the source
//     stage's splits are its topic's queues, a downstream stage's its shuffle topic's
//     queues (every exchange goes through a shuffle topic, exec.Divisible). Each stage's
//     units are divided evenly among the live members (cluster.Assign), and any member runs any
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
type ClusterConfig = cluster.Config

// clusterNode is this instance's part in cluster mode: the units it owns and the jobs it
// runs for them; membership and the shared catalog are server/cluster's.
type clusterNode struct {
	e       *Engine
	cs      *state.PostgresCheckpointStore
	cfg     ClusterConfig
	self    state.Member
	members *cluster.Membership
	catSync *cluster.CatalogSync

	mu         sync.Mutex                  // guards the fields below
	held       map[string]map[string]int64 // job -> split (unit name or "@<self>") -> generation
	selfLoaded map[string]bool             // job -> instance split loaded in this process
	jobs       map[string]*clusterJob      // job -> its units and what runs here
	startErr   map[string]string           // job -> last error starting it (logged once)

	// dropped: the terminated jobs whose shared and local state this process deleted
	// (or found deleted); used by reconcile only.
	dropped map[string]bool

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// selfSplit is the instance's own split: keys that belong to no source split.
func (c *clusterNode) selfSplit() string { return "@" + c.self.Name }

const instanceOpPrefix = "i."

func startCluster(e *Engine, cfg ClusterConfig) (*clusterNode, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = 500 * time.Millisecond
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 3 * time.Second
	}
	c := &clusterNode{e: e, cs: cfg.Checkpoints, cfg: cfg, held: map[string]map[string]int64{},
		selfLoaded: map[string]bool{}, jobs: map[string]*clusterJob{}, startErr: map[string]string{}, dropped: map[string]bool{},
		done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	m, err := cluster.Join(ctx, cfg, c.logf)
	if err != nil {
		return nil, err
	}
	c.members, c.self = m, m.Self()
	c.catSync = cluster.NewCatalogSync(c.cs, sharedCatalog{e.cat}, c.logf)
	if err := c.catSync.Sync(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// run renews the lease, syncs the catalog and reconciles jobs every Tick until close.
func (c *clusterNode) run() {
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
		c.members.Renew(ctx)
		if err := c.catSync.Sync(ctx); err != nil {
			c.logf("cluster: catalog: %v", err)
		}
		c.reconcile(ctx)
		cancel()
	}
}

func (c *clusterNode) logf(format string, args ...any) {
	if c.ctx.Err() == nil {
		fmt.Fprintf(c.e.cfg.Log, format+"\n", args...)
	}
}
