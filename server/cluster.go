package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"rsql/connectors"
	"rsql/exec"
	"rsql/planner"
	"rsql/state"
)

// Several instances (rsql server --postgres URL): the instances share a Postgres checkpoint
// store, which also holds their catalog and their membership. Every instance runs every
// RUNNING job of the shared catalog, each for the splits it owns:
//
//   - Membership: each instance joins under a stable name (kept in its data directory) and
//     renews a lease every Tick; the live members are those whose lease has not expired.
//   - Units: a job whose plan is one stage (no exchange: the source is partitioned by the
//     group key, or there is no aggregation) is divided by source split. Its splits,
//     sorted, go round-robin to the live members sorted by name, starting at a member
//     chosen by the job's name. A job with an exchange runs whole on one member (the
//     round-robin owner of its single unit "*"): its downstream stage keeps state per
//     shuffle queue, and the upstream watermark reaches it as one value per queue, which is
//     only right when one instance writes all of it (docs/guarantees.md, "Several
//     instances").
//   - A change of what an instance owns (a member joined, left or lost its lease) restarts
//     the job locally: checkpoint, stop, release the splits given up, then — once no other
//     live member owns them — acquire the splits gained and load their committed state and
//     offsets from Postgres, start again. A job run whole acquires every split it can write
//     (source queues, shuffle queues, stage numbers) before it runs. Splits held for a job
//     that does not run here any more are released by the next reconcile.
//   - Every checkpoint commits through the Postgres store with the generations held; a
//     fenced commit (another instance took a split over) writes nothing, stops the local
//     job, and the next reconcile starts it again with what the instance owns by then.
//     After Postgres, the checkpoint is written to the local store, which operators read.
//   - Keys that belong to the instance and not to a split — a split-divided job's outbox
//     (rows waiting for their checkpoint to be published), stage watermarks and epoch — are
//     committed under the instance's own split "@<name>" (operator "i.<op>.<split>"), so
//     they are atomic with the splits' state and come back when the instance restarts.
//     Epochs of a split-divided job start at member number << 40, so two instances never
//     use the same outbox message id.

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
	held       map[string]map[string]int64 // job -> split -> generation
	selfLoaded map[string]bool             // job -> instance split loaded in this process
	units      map[string][]string         // job -> its units, as of its last start here
	startErr   map[string]string           // job -> last error starting it (logged once)
	catVersion int64
	catSynced  []byte

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// selfSplit is the instance's own split: keys that belong to no source split.
func (c *cluster) selfSplit() string { return "@" + c.self.Name }

// instanceOps are the operators whose keys belong to the instance, not to a split, in a
// split-divided job: the outbox, stage watermarks and the epoch.
var instanceOps = map[string]bool{exec.OutboxOperator: true, exec.WatermarkOperator: true, state.JobOperator: true}

const instanceOpPrefix = "i."

func startCluster(e *Engine, cfg ClusterConfig) (*cluster, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = 500 * time.Millisecond
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 3 * time.Second
	}
	c := &cluster{e: e, cs: cfg.Checkpoints, cfg: cfg, held: map[string]map[string]int64{},
		selfLoaded: map[string]bool{}, units: map[string][]string{}, startErr: map[string]string{}, done: make(chan struct{})}
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

// reconcile starts, restarts and stops local jobs so that each runs what this instance owns.
func (c *cluster) reconcile(ctx context.Context) {
	e := c.e
	e.startMu.Lock()
	defer e.startMu.Unlock()
	want := map[string]JobDef{}
	for _, j := range e.cat.Jobs() {
		if j.State == "RUNNING" {
			want[j.ID] = j
		}
	}
	e.mu.Lock()
	running := make(map[string]*runningJob, len(e.jobs))
	for id, rj := range e.jobs {
		running[id] = rj
	}
	e.mu.Unlock()
	for id, rj := range running {
		if _, ok := want[id]; !ok {
			c.stopLocal(ctx, rj, nil)
			delete(running, id)
		}
	}
	c.releaseIdle(ctx, running, want)
	for id, def := range want {
		rj := running[id]
		if rj != nil {
			owned := c.assign(id, rj.units)
			if slices.Equal(owned, rj.owned) {
				continue
			}
			c.logf("cluster: job %s: splits here change from %v to %v", id, rj.owned, owned)
			c.stopLocal(ctx, rj, owned)
		}
		c.mu.Lock()
		units, known := c.units[id]
		c.mu.Unlock()
		if rj == nil && known && len(c.assign(id, units)) == 0 {
			continue // nothing of it is ours: do not open its source every tick
		}
		err := e.restartJob(def)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		c.mu.Lock()
		if msg != c.startErr[id] {
			if msg != "" {
				c.logf("cluster: job %s: start: %v (retried every %v)", id, err, c.cfg.Tick)
			}
			c.startErr[id] = msg
		}
		c.mu.Unlock()
	}
}

// stopLocal checkpoints and stops a local job, then releases the splits not in keep.
func (c *cluster) stopLocal(ctx context.Context, rj *runningJob, keep []string) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := rj.job.Checkpoint(cctx); err != nil {
		c.logf("cluster: job %s: checkpoint before handing splits over: %v", rj.def.ID, err)
	}
	cancel()
	rj.stop()
	job := rj.def.ID
	c.mu.Lock()
	held := c.held[job]
	var release []string
	for sp := range held {
		if strings.HasPrefix(sp, "@") || c.unitOf(rj, sp, keep) {
			continue
		}
		release = append(release, sp)
	}
	c.mu.Unlock()
	for _, sp := range release {
		c.mu.Lock()
		gen := held[sp]
		delete(held, sp)
		c.mu.Unlock()
		if err := c.cs.Release(ctx, job, sp, gen); err != nil && !errors.Is(err, state.ErrFenced) {
			c.logf("cluster: job %s: release split %s: %v", job, sp, err)
		}
	}
	// The local copy of a split given up is stale from now on: drop it (a later takeover
	// loads the split again anyway).
	if len(release) > 0 {
		if err := c.dropLocal(job, release); err != nil {
			c.logf("cluster: job %s: drop the local state of splits %v: %v", job, release, err)
		}
	}
}

// dropLocal deletes the local keys of splits of job (instance keys stay).
func (c *cluster) dropLocal(job string, splits []string) error {
	b := &state.Batch{}
	err := c.e.store.Scan(jobPrefix(job), func(k, _ []byte) error {
		if j, op, sp, _, ok := state.KeyParts(k); ok && string(j) == job && !instanceOps[string(op)] && slices.Contains(splits, string(sp)) {
			b.Delete(k)
		}
		return nil
	})
	if err != nil || b.Len() == 0 {
		return err
	}
	return c.e.store.Write(b)
}

// unitOf reports whether split sp of rj is among the units in keep.
func (c *cluster) unitOf(rj *runningJob, sp string, keep []string) bool {
	if rj.whole {
		return len(keep) > 0
	}
	return slices.Contains(keep, sp)
}

// assign returns the units of job this instance owns among the live members, sorted.
func (c *cluster) assign(job string, units []string) []string {
	c.mu.Lock()
	members := c.members
	c.mu.Unlock()
	return assignUnits(job, units, members, c.self.Name)
}

// assignUnits divides units (sorted numerically when they are numbers) round-robin among
// members (sorted), starting at a member chosen by hashing job, and returns self's units.
func assignUnits(job string, units, members []string, self string) []string {
	if len(members) == 0 {
		return nil
	}
	us := append([]string(nil), units...)
	sort.Slice(us, func(i, j int) bool {
		if len(us[i]) != len(us[j]) {
			return len(us[i]) < len(us[j])
		}
		return us[i] < us[j]
	})
	ms := append([]string(nil), members...)
	sort.Strings(ms)
	h := fnv.New32a()
	h.Write([]byte(job))
	start := int(h.Sum32() % uint32(len(ms)))
	var out []string
	for i, u := range us {
		if ms[(start+i)%len(ms)] == self {
			out = append(out, u)
		}
	}
	return out
}

// prepare runs before a job starts in cluster mode: it decides what this instance runs,
// acquires and loads the splits it gains, and routes the job's checkpoints through the
// shared store. ok is false when this instance owns nothing of the job.
func (c *cluster) prepare(ctx context.Context, job string, plan *planner.Physical, env *exec.Env) (units, owned []string, whole, ok bool, err error) {
	whole = len(plan.Stages) > 1
	if whole {
		units = []string{"*"}
	} else {
		src, err := env.OpenSource(plan.Stages[0].Source())
		if err != nil {
			return nil, nil, false, false, err
		}
		units, err = src.Splits(ctx)
		src.Close()
		if err != nil {
			return nil, nil, false, false, err
		}
	}
	c.mu.Lock()
	c.units[job] = units
	c.mu.Unlock()
	owned = c.assign(job, units)
	if len(owned) == 0 {
		return units, nil, whole, false, nil
	}
	var expected []string
	if whole {
		expected = wholeSplits(ctx, plan, env)
	}
	// Splits another live member still owns are handed over by it (checkpoint, release)
	// once it sees the new assignment: wait for that, a tick or two, rather than fence it
	// while it runs (both would write the job's shuffle topic meanwhile).
	if busy, err := c.ownedByOthers(ctx, job, append(slices.Clone(owned), expected...)); err != nil || busy {
		return units, nil, whole, false, err
	}
	if whole {
		err = c.prepareWhole(ctx, job, expected)
	} else {
		err = c.prepareSplits(ctx, job, plan, owned, env)
	}
	if err != nil {
		return nil, nil, false, false, err
	}
	env.Commit = func(ci *exec.CheckpointInfo) error { return c.commit(job, whole, ci) }
	env.Instance = c.self.Name
	return units, owned, whole, true, nil
}

// ownedByOthers reports whether a split of job among splits (or, for a job run whole, any
// split of it) is owned by another live member.
func (c *cluster) ownedByOthers(ctx context.Context, job string, splits []string) (bool, error) {
	owners, err := c.cs.SplitOwners(ctx, job)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	live := c.members
	c.mu.Unlock()
	whole := slices.Contains(splits, "*")
	for sp, o := range owners {
		if o == c.self.Name || strings.HasPrefix(sp, "@") || !slices.Contains(live, o) {
			continue
		}
		if whole || slices.Contains(splits, sp) {
			return true, nil
		}
	}
	return false, nil
}

// releaseIdle releases the splits held for jobs that do not run here (stopped by a
// failure, or no longer RUNNING) and that this instance does not own any more, so that
// their new owner can take them.
func (c *cluster) releaseIdle(ctx context.Context, running map[string]*runningJob, want map[string]JobDef) {
	c.mu.Lock()
	type rel struct {
		job, split string
		gen        int64
	}
	var todo []rel
	for job, held := range c.held {
		if running[job] != nil {
			continue
		}
		var owned []string
		if _, ok := want[job]; ok {
			owned = assignUnits(job, c.units[job], c.members, c.self.Name)
		}
		whole := slices.Equal(c.units[job], []string{"*"})
		for sp, gen := range held {
			if strings.HasPrefix(sp, "@") || (whole && len(owned) > 0) || (!whole && slices.Contains(owned, sp)) {
				continue
			}
			todo = append(todo, rel{job, sp, gen})
			delete(held, sp)
		}
	}
	c.mu.Unlock()
	byJob := map[string][]string{}
	for _, r := range todo {
		if err := c.cs.Release(ctx, r.job, r.split, r.gen); err != nil && !errors.Is(err, state.ErrFenced) {
			c.logf("cluster: job %s: release split %s: %v", r.job, r.split, err)
		}
		byJob[r.job] = append(byJob[r.job], r.split)
	}
	for job, splits := range byJob {
		if err := c.dropLocal(job, splits); err != nil {
			c.logf("cluster: job %s: drop the local state of splits %v: %v", job, splits, err)
		}
	}
}

// gain acquires the splits of job not held yet and returns them.
func (c *cluster) gain(ctx context.Context, job string, splits []string) ([]string, error) {
	c.mu.Lock()
	held := c.held[job]
	if held == nil {
		held = map[string]int64{}
		c.held[job] = held
	}
	var todo []string
	for _, sp := range splits {
		if _, ok := held[sp]; !ok {
			todo = append(todo, sp)
		}
	}
	c.mu.Unlock()
	for _, sp := range todo {
		gen, err := c.cs.Acquire(ctx, job, sp, c.self.Name)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		held[sp] = gen
		c.mu.Unlock()
	}
	return todo, nil
}

// jobPrefix is the store prefix of every key of job.
func jobPrefix(job string) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(job))), job...)
}

// loadSplits replaces the local keys of splits (of every operator, except instance keys
// when skipInstance) with their committed state, in one write.
func (c *cluster) loadSplits(ctx context.Context, job string, splits []string, skipInstance bool) error {
	if len(splits) == 0 {
		return nil
	}
	b := &state.Batch{}
	err := c.e.store.Scan(jobPrefix(job), func(k, _ []byte) error {
		j, op, sp, _, ok := state.KeyParts(k)
		if !ok || string(j) != job || (skipInstance && instanceOps[string(op)]) {
			return nil
		}
		if slices.Contains(splits, string(sp)) {
			b.Delete(k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, sp := range splits {
		if _, err := c.cs.Load(ctx, job, sp, func(k, v []byte) error { b.Put(k, v); return nil }); err != nil {
			return err
		}
	}
	return c.e.store.Write(b)
}

// wholeSplits are the split names a job run whole can write state under: the splits of
// every stage (source splits and exchange queues, exec.Units) and its stage numbers (stage
// watermarks and outboxes are keyed by stage).
func wholeSplits(ctx context.Context, plan *planner.Physical, env *exec.Env) []string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	// A source that cannot be opened lists nothing: the store's list of the job's splits
	// still covers whatever was committed.
	units, _ := exec.Units(ctx, plan, exec.DefaultExchangeQueues, func(ctx context.Context, spec planner.SourceSpec) ([]string, error) {
		src, err := env.OpenSource(spec)
		if err != nil {
			return nil, nil
		}
		defer src.Close()
		splits, _ := src.Splits(ctx)
		return splits, nil
	})
	for _, u := range units {
		add(u.Split)
	}
	for _, st := range plan.Stages {
		add(strconv.Itoa(st.ID))
	}
	return out
}

// prepareWhole takes over every split of the job — those the store knows and those the
// plan can write — and its job-wide keys. Acquiring them all before the job runs means a
// commit never has to take a split over (which could fence the instance the job moved to).
func (c *cluster) prepareWhole(ctx context.Context, job string, expected []string) error {
	splits, err := c.cs.JobSplits(ctx, job)
	if err != nil {
		return err
	}
	for _, sp := range expected {
		if !slices.Contains(splits, sp) {
			splits = append(splits, sp)
		}
	}
	gained, err := c.gain(ctx, job, splits)
	if err != nil {
		return err
	}
	if err := c.loadSplits(ctx, job, gained, false); err != nil {
		return err
	}
	if len(gained) > 0 {
		if _, err := state.LoadInto(ctx, c.cs, job, "", c.e.store); err != nil {
			return err
		}
	}
	return nil
}

// prepareSplits takes over the owned source splits of a one-stage job and the instance's
// own split, then restarts the stage watermark from the owned splits and moves the epoch
// into this member's range.
func (c *cluster) prepareSplits(ctx context.Context, job string, plan *planner.Physical, owned []string, env *exec.Env) error {
	self := c.selfSplit()
	if _, err := c.gain(ctx, job, []string{self}); err != nil {
		return err
	}
	c.mu.Lock()
	loadSelf := !c.selfLoaded[job]
	c.selfLoaded[job] = true
	c.mu.Unlock()
	if loadSelf {
		if err := c.loadInstanceKeys(ctx, job); err != nil {
			return err
		}
	}
	gained, err := c.gain(ctx, job, owned)
	if err != nil {
		return err
	}
	if err := c.loadSplits(ctx, job, gained, true); err != nil {
		return err
	}
	st := plan.Stages[0]
	b := &state.Batch{}
	// The stage's output watermark: the minimum over the owned splits' watermarks
	// (nothing known if one has none yet). Each split's own watermark moves with it (its
	// position, exec.SplitPos), so rows late on the previous owner are late here too.
	wmKey := exec.WatermarkKey(job, st.ID)
	wm, known := int64(0), true
	for i, sp := range owned {
		v, ok, err := c.e.store.Get(exec.SplitKey(job, st.ID, sp))
		if err != nil {
			return err
		}
		pos := exec.SplitPos{WM: exec.MinWatermark}
		if ok {
			if pos, err = exec.DecodeSplitPos(v, st.Source().WatermarkDelay); err != nil {
				return fmt.Errorf("job %s, split %s: %w", job, sp, err)
			}
		}
		if pos.WM == exec.MinWatermark {
			known = false
			break
		}
		if i == 0 || pos.WM < wm {
			wm = pos.WM
		}
	}
	if known && len(gained) == 0 {
		// The same splits as before (or fewer): the watermark this instance checkpointed
		// for them may be ahead of their event times (idle splits advance it with the
		// wall clock); rows it judged late stay late.
		if v, ok, err := c.e.store.Get(wmKey); err != nil {
			return err
		} else if w, n := binary.Varint(v); ok && n > 0 && w > wm {
			wm = w
		}
	}
	if known {
		b.Put(wmKey, binary.AppendVarint(nil, wm))
	} else {
		b.Delete(wmKey)
	}
	epochKey := exec.EpochKey(job)
	base := c.self.Num << 40
	if v, ok, err := c.e.store.Get(epochKey); err != nil {
		return err
	} else if ep, n := binary.Varint(v); !ok || n <= 0 || ep < base {
		b.Put(epochKey, binary.AppendVarint(nil, base))
	}
	if err := c.e.store.Write(b); err != nil {
		return err
	}
	open := env.OpenSource
	env.OpenSource = func(spec planner.SourceSpec) (connectors.Source, error) {
		src, err := open(spec)
		if err != nil {
			return nil, err
		}
		return &ownedSource{Source: src, owned: owned}, nil
	}
	return nil
}

// loadInstanceKeys replaces the job's local instance keys with what the instance committed
// under its own split.
func (c *cluster) loadInstanceKeys(ctx context.Context, job string) error {
	b := &state.Batch{}
	err := c.e.store.Scan(jobPrefix(job), func(k, _ []byte) error {
		if j, op, _, _, ok := state.KeyParts(k); ok && string(j) == job && instanceOps[string(op)] {
			b.Delete(k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var bad error
	_, err = c.cs.Load(ctx, job, c.selfSplit(), func(k, v []byte) error {
		nk, ok := nativeKey(job, k)
		if !ok {
			bad = fmt.Errorf("instance key %x of job %s is not an instance key", k, job)
			return bad
		}
		b.Put(nk, v)
		return nil
	})
	if err != nil {
		return err
	}
	return c.e.store.Write(b)
}

// instanceKey maps an instance key of job to the key it is committed under in the
// instance's split; other keys come back unchanged.
func (c *cluster) instanceKey(job string, key []byte) []byte {
	j, op, sp, rest, ok := state.KeyParts(key)
	if !ok || string(j) != job || !instanceOps[string(op)] {
		return key
	}
	k := state.SplitPrefix(nil, job, instanceOpPrefix+string(op)+"."+string(sp), c.selfSplit())
	return append(k, rest...)
}

// nativeKey is the inverse of instanceKey.
func nativeKey(job string, key []byte) ([]byte, bool) {
	j, op, _, rest, ok := state.KeyParts(key)
	if !ok || string(j) != job || !strings.HasPrefix(string(op), instanceOpPrefix) {
		return nil, false
	}
	name, sp, ok := strings.Cut(string(op)[len(instanceOpPrefix):], ".")
	if !ok {
		return nil, false
	}
	return append(state.SplitPrefix(nil, job, name, sp), rest...), true
}

// commit makes a checkpoint durable in the shared store with the generations held, then
// writes it to the local store (and the broker's consumer-group offsets).
func (c *cluster) commit(job string, whole bool, ci *exec.CheckpointInfo) error {
	// Not c.ctx: the final checkpoints of close run after the loop has stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cp := &state.Checkpoint{Job: job, Epoch: ci.Epoch, State: ci.State}
	if !whole {
		cp.State = &state.Batch{}
		ci.State.Each(func(kind state.OpKind, key, value []byte) error {
			k := c.instanceKey(job, key)
			switch kind {
			case state.OpPut:
				cp.State.Put(k, value)
			case state.OpDelete:
				cp.State.Delete(k)
			case state.OpDropPrefix:
				cp.State.DropPrefix(k)
			}
			return nil
		})
	}
	splits := state.BatchSplits(job, cp.State)
	for _, o := range ci.Offsets {
		if !slices.Contains(splits, o.Split) {
			splits = append(splits, o.Split)
		}
		cp.Offsets = append(cp.Offsets, state.CheckpointOffset{Split: o.Split, Offset: o.Offset})
	}
	c.mu.Lock()
	held := c.held[job]
	for _, sp := range splits {
		gen, ok := held[sp]
		if !ok {
			c.mu.Unlock()
			return &state.FencedError{Job: job, Split: sp}
		}
		cp.Splits = append(cp.Splits, state.SplitGeneration{Split: sp, Generation: gen})
	}
	c.mu.Unlock()
	if err := c.cs.Commit(ctx, cp); err != nil {
		var fe *state.FencedError
		if errors.As(err, &fe) {
			c.mu.Lock()
			delete(held, fe.Split)
			c.mu.Unlock()
			c.logf("cluster: job %s: %v; this instance stops the job and reconciles", job, err)
		}
		return err
	}
	return c.e.commitLocal(ci)
}

// close stops the loop, checkpoints and stops the local jobs, releases their splits and
// ends the lease, so the other members take over without waiting for it to expire.
func (c *cluster) close() {
	c.cancel()
	<-c.done
	c.e.startMu.Lock()
	defer c.e.startMu.Unlock()
	c.e.mu.Lock()
	jobs := make([]*runningJob, 0, len(c.e.jobs))
	for _, rj := range c.e.jobs {
		jobs = append(jobs, rj)
	}
	c.e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, rj := range jobs {
		c.stopLocal(ctx, rj, nil)
	}
	c.cs.Leave(ctx, c.self.Name)
}

// ownedSource is a source whose splits are the ones this instance owns.
type ownedSource struct {
	connectors.Source
	owned []string
}

func (s *ownedSource) Splits(ctx context.Context) ([]string, error) {
	all, err := s.Source.Splits(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sp := range all {
		if slices.Contains(s.owned, sp) {
			out = append(out, sp)
		}
	}
	return out, nil
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
