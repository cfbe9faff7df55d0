package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"rsql/exec"
	"rsql/planner"
	"rsql/server/cluster"
	"rsql/state"
)

// Units of ownership in cluster mode (see cluster.go for the whole picture).
//
// Concurrency: reconcile, prepare (under the job manager's startMu, from reconcile or a statement) and
// close change what runs; c.mu guards the maps they share with commits (which run on jobs'
// committer goroutines) and with SHOW UNITS and /metrics.

// clusterJob is what the cluster knows of one job.
type clusterJob struct {
	units []exec.Unit // every unit of the job, as of its last start here
	whole bool        // its plan keeps an exchange in process: all units on one member
	// feeds: for each stage writing a shuffle topic, the stages reading it. A stage's
	// readers are held within the alignment window of the slowest split of the stages it
	// feeds that run here (exec: the alignment floor), the only view an instance has of
	// the other instances' progress; a source unit started where none runs would read its
	// backlog unbounded and make late records on time downstream. So a unit of a feeding
	// stage starts here only once a unit of each stage it feeds, when one is assigned
	// here, runs here (holdUpstream), and units are handed over downstream first.
	feeds map[int][]int
	// local are the units the job runs here now (divided jobs).
	local map[exec.Unit]bool
	// wantSince: units assigned here and not running here yet because another live
	// member still holds them, since when and who (a move's duration counts from it).
	wantSince map[exec.Unit]wanted
	// moves counts the units moved here since this process started, moveTime their total
	// duration, lastMove the last one's.
	moves              int64
	moveTime, lastMove time.Duration
}

// wanted is a unit waiting for its owner to hand it over.
type wanted struct {
	since time.Time
	from  string
}

// job returns the cluster's record of job (made on first use). c.mu must be held.
func (c *clusterNode) job(id string) *clusterJob {
	cj := c.jobs[id]
	if cj == nil {
		cj = &clusterJob{local: map[exec.Unit]bool{}, wantSince: map[exec.Unit]wanted{}}
		c.jobs[id] = cj
	}
	return cj
}

// assigned returns the units of job assigned to member among the live members (as of the
// last refresh), from the units known for it; nil when it is unknown here.
func (c *clusterNode) assigned(job, member string) []exec.Unit {
	var out []exec.Unit
	for u, m := range c.division(job) {
		if m == member {
			out = append(out, u)
		}
	}
	cluster.SortUnits(out)
	return out
}

// runners is how many live members the division gives units of job (1 when it gives
// none or the units are not known here).
func (c *clusterNode) runners(job string) int {
	seen := map[string]bool{}
	for _, m := range c.division(job) {
		seen[m] = true
	}
	return max(len(seen), 1)
}

// division is the member the live members' division gives each unit of job.
func (c *clusterNode) division(job string) map[exec.Unit]string {
	c.mu.Lock()
	cj := c.jobs[job]
	members := c.members.Members()
	var units []exec.Unit
	whole := false
	if cj != nil {
		units, whole = cj.units, cj.whole
	}
	c.mu.Unlock()
	return cluster.Assign(job, units, members, whole)
}

// assignment is the division of job's units among the live members as SHOW JOBS shows it,
// "rsql-1: 0/0 1/2; rsql-2: 0/1 1/0" (members sorted), "" when the units are not known
// here.
func (c *clusterNode) assignment(job string) string {
	c.mu.Lock()
	members := slices.Clone(c.members.Members())
	c.mu.Unlock()
	sort.Strings(members)
	var parts []string
	for _, m := range members {
		if us := c.assigned(job, m); len(us) > 0 {
			parts = append(parts, m+": "+strings.Join(cluster.UnitNames(us), " "))
		}
	}
	return strings.Join(parts, "; ")
}

// listUnits lists every unit of plan (opening its sources to list their splits).
func listUnits(ctx context.Context, plan *planner.Physical, env *exec.Env) ([]exec.Unit, error) {
	q := env.ExchangeQueues
	if q <= 0 {
		q = exec.DefaultExchangeQueues
	}
	return exec.Units(ctx, plan, q, func(ctx context.Context, spec planner.SourceSpec) ([]string, error) {
		src, err := env.OpenSource(spec)
		if err != nil {
			return nil, err
		}
		defer src.Close()
		return src.Splits(ctx)
	})
}

// prepare runs before a job starts in cluster mode: it lists the job's units, takes the
// ones assigned here that no other live member holds (acquire, load their committed state),
// and routes the job's checkpoints through the shared store. ok is false when nothing of
// the job can run here now. units and owned name all units and those the job starts with;
// whole says the job runs whole.
func (c *clusterNode) prepare(ctx context.Context, job string, plan *planner.Physical, env *exec.Env) (units, owned []string, whole, ok bool, err error) {
	whole = exec.Divisible(plan, *env) != nil
	all, err := listUnits(ctx, plan, env)
	if err != nil {
		return nil, nil, false, false, err
	}
	c.mu.Lock()
	cj := c.job(job)
	cj.units, cj.whole = all, whole
	cj.feeds = map[int][]int{}
	for _, st := range plan.Stages {
		for _, in := range st.Inputs {
			if in.FromStage >= 0 && !slices.Contains(cj.feeds[in.FromStage], st.ID) {
				cj.feeds[in.FromStage] = append(cj.feeds[in.FromStage], st.ID)
			}
		}
	}
	c.mu.Unlock()
	desired := c.assigned(job, c.self.Name)
	if len(desired) == 0 {
		return cluster.UnitNames(all), nil, whole, false, nil
	}
	owners, err := c.cs.SplitOwners(ctx, job)
	if err != nil {
		return nil, nil, false, false, err
	}
	var take []exec.Unit
	now := time.Now()
	for _, u := range desired {
		if c.busyElsewhere(owners[u.String()]) {
			c.mu.Lock()
			if _, ok := cj.wantSince[u]; !ok {
				cj.wantSince[u] = wanted{since: now, from: owners[u.String()]}
			}
			c.mu.Unlock()
			if whole {
				// A job run whole starts once its previous owner has let go of all of it
				// (checkpoint, stop, release), a tick or two.
				return cluster.UnitNames(all), nil, whole, false, nil
			}
			continue
		}
		take = append(take, u)
	}
	if !whole {
		take = c.holdUpstream(cj, take, desired, nil, owners, now)
	}
	if len(take) == 0 {
		return cluster.UnitNames(all), nil, whole, false, nil
	}
	if err := c.prepareInstance(ctx, job, plan); err != nil {
		return nil, nil, false, false, err
	}
	start := time.Now()
	gained, err := c.gain(ctx, job, cluster.UnitNames(take))
	if err != nil {
		return nil, nil, false, false, err
	}
	var load []exec.Unit
	for _, u := range take {
		if slices.Contains(gained, u.String()) {
			load = append(load, u)
		}
	}
	if err := c.loadUnits(ctx, job, load); err != nil {
		return nil, nil, false, false, err
	}
	runs := make(map[exec.Unit]bool, len(take))
	for _, u := range take {
		runs[u] = true
	}
	c.mu.Lock()
	cj.local = runs
	for _, u := range load {
		c.noteMove(job, cj, u, owners[u.String()], start)
	}
	c.mu.Unlock()
	if !whole {
		owns := make(map[exec.Unit]bool, len(runs))
		for u := range runs {
			owns[u] = true
		}
		env.OwnsUnit = func(u exec.Unit) bool { return owns[u] }
	}
	env.Commit = func(ci *exec.CheckpointInfo) error { return c.commit(job, ci) }
	env.Instance = c.self.Name
	return cluster.UnitNames(all), cluster.UnitNames(take), whole, true, nil
}

// holdUpstream returns the units of take that may start here: a unit of a stage feeding
// others through a shuffle topic only when, for each stage it feeds of which a unit is
// assigned here (desired), a unit runs here (local) or starts with it (take). The others
// wait, as units still held elsewhere do (wantSince), for a later tick.
func (c *clusterNode) holdUpstream(cj *clusterJob, take, desired []exec.Unit, local map[exec.Unit]bool, owners map[string]string, now time.Time) []exec.Unit {
	here, runs := map[int]bool{}, map[int]bool{}
	for _, u := range desired {
		here[u.Stage] = true
	}
	for u := range local {
		runs[u.Stage] = true
	}
	for _, u := range take {
		runs[u.Stage] = true
	}
	out := take[:0:0]
	for _, u := range take {
		ok := true
		for _, d := range cj.feeds[u.Stage] {
			ok = ok && (runs[d] || !here[d])
		}
		if ok {
			out = append(out, u)
			continue
		}
		c.mu.Lock()
		if _, ok := cj.wantSince[u]; !ok {
			cj.wantSince[u] = wanted{since: now, from: owners[u.String()]}
		}
		c.mu.Unlock()
	}
	return out
}

// busyElsewhere reports whether owner is another live member (which will hand its unit
// over itself).
func (c *clusterNode) busyElsewhere(owner string) bool {
	if owner == "" || owner == c.self.Name {
		return false
	}
	return c.members.Live(owner)
}

// noteMove records and logs that unit u of job now runs here, taken from from (its owner
// in the shared store when it was acquired, "" if none): how long after the assignment
// gave it to this instance while its owner still held it, or else how long taking it
// took, and how it came (handed over by a live owner, taken over after its owner's lease
// expired, or free: new, or released by an owner that stopped). c.mu must be held.
func (c *clusterNode) noteMove(job string, cj *clusterJob, u exec.Unit, from string, loadStart time.Time) {
	w, waited := cj.wantSince[u]
	delete(cj.wantSince, u)
	since := loadStart
	if waited {
		since = w.since
	}
	d := time.Since(since)
	cj.moves++
	cj.moveTime += d
	cj.lastMove = d
	how, prev := "free", ""
	switch {
	case from != "" && from != c.self.Name:
		how, prev = "its owner's lease expired", " from "+from
	case waited && w.from != "":
		how, prev = "handed over", " from "+w.from
	}
	c.logf("cluster: job %s: unit %s moved here%s in %v (%s; state loaded and started in %v)", job, u, prev,
		d.Round(time.Millisecond), how, time.Since(loadStart).Round(time.Millisecond))
}

// prepareInstance takes the instance's own split of job (loading its keys once per
// process), puts the job's epochs in this member's range and drops the stages' output
// watermarks (each unit brings its own; the stages' are recomputed from them).
func (c *clusterNode) prepareInstance(ctx context.Context, job string, plan *planner.Physical) error {
	if _, err := c.gain(ctx, job, []string{c.selfSplit()}); err != nil {
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
	b := &state.Batch{}
	for _, st := range plan.Stages {
		b.Delete(exec.WatermarkKey(job, st.ID))
	}
	epochKey := exec.EpochKey(job)
	base := c.self.Num << 40
	if v, ok, err := c.e.store.Get(epochKey); err != nil {
		return err
	} else if ep, n := binary.Varint(v); !ok || n <= 0 || ep < base {
		b.Put(epochKey, binary.AppendVarint(nil, base))
	}
	return c.e.store.Write(b)
}

// reconcile starts, changes and stops local jobs so that each runs what this instance owns.
func (c *clusterNode) reconcile(ctx context.Context) {
	e := c.e
	e.jobs.startMu.Lock()
	defer e.jobs.startMu.Unlock()
	want := map[string]JobDef{}
	for _, j := range e.cat.Jobs() {
		if j.State == JobRunning {
			want[j.ID] = j
		}
	}
	running := map[string]*runningJob{}
	for _, rj := range e.jobs.list() {
		running[rj.def.ID] = rj
	}
	for id, rj := range running {
		if _, ok := want[id]; !ok {
			c.stopLocal(ctx, rj)
			delete(running, id)
		}
	}
	c.releaseIdle(ctx, running, want)
	c.dropTerminated(ctx, running)
	for id, def := range want {
		if rj := running[id]; rj != nil {
			if rj.whole {
				if len(c.assigned(id, c.self.Name)) == 0 {
					c.logf("cluster: job %s: moves whole to another instance", id)
					c.stopLocal(ctx, rj)
				}
				continue
			}
			c.moveUnits(ctx, rj)
			continue
		}
		c.mu.Lock()
		cj, known := c.jobs[id]
		c.mu.Unlock()
		if known && len(c.assigned(id, c.self.Name)) == 0 && len(cj.units) > 0 {
			continue // nothing of it is ours: do not open its sources every tick
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

// dropTerminated deletes the state of terminated jobs — a terminated job never runs again
// — from the shared store (state and splits rows, once no live member holds one of their
// units: DropJob) and from the local store, once per job and process; a job whose units
// are still held is tried again at the next tick.
func (c *clusterNode) dropTerminated(ctx context.Context, running map[string]*runningJob) {
	for _, j := range c.e.cat.Jobs() {
		if j.State != JobTerminated || c.dropped[j.ID] || running[j.ID] != nil {
			continue
		}
		done, err := c.cs.DropJob(ctx, j.ID, c.members.Members())
		if err != nil {
			c.logf("cluster: job %s: %v", j.ID, err)
			return
		}
		if !done {
			continue
		}
		if err := c.e.dropLocalState(j.ID); err != nil {
			c.logf("cluster: job %s: delete its local state: %v", j.ID, err)
			continue
		}
		c.mu.Lock()
		delete(c.held, j.ID)
		delete(c.selfLoaded, j.ID)
		delete(c.jobs, j.ID)
		c.mu.Unlock()
		c.dropped[j.ID] = true
		c.logf("cluster: job %s: terminated; its state deleted", j.ID)
	}
}

// moveUnits brings the units a running divided job runs here in line with the assignment:
// units assigned elsewhere are removed (their final state committed) and released; units
// assigned here are taken, once no other live member holds them, and added.
func (c *clusterNode) moveUnits(ctx context.Context, rj *runningJob) {
	job := rj.def.ID
	desired := c.assigned(job, c.self.Name)
	c.mu.Lock()
	cj := c.job(job)
	var drop []exec.Unit
	for u := range cj.local {
		if !slices.Contains(desired, u) {
			drop = append(drop, u)
		}
	}
	var add []exec.Unit
	for _, u := range desired {
		if !cj.local[u] {
			add = append(add, u)
		}
	}
	c.mu.Unlock()
	// Downstream first: the member taking these units then runs a unit of the stage a
	// source feeds before the source (clusterJob.feeds).
	sortDownstreamFirst(drop)
	for _, u := range drop {
		start := time.Now()
		if err := rj.job.RemoveUnit(ctx, u); err != nil {
			c.logf("cluster: job %s: give unit %s up: %v", job, u, err)
			return // the job ended or failed: watch and the next reconcile deal with it
		}
		c.mu.Lock()
		delete(cj.local, u)
		gen, held := c.held[job][u.String()]
		delete(c.held[job], u.String())
		c.mu.Unlock()
		if held {
			if err := c.cs.Release(ctx, job, u.String(), gen); err != nil && !errors.Is(err, state.ErrFenced) {
				c.logf("cluster: job %s: release unit %s: %v", job, u, err)
			}
		}
		if err := c.dropLocal(job, []exec.Unit{u}); err != nil {
			c.logf("cluster: job %s: drop the local state of unit %s: %v", job, u, err)
		}
		c.logf("cluster: job %s: unit %s handed over in %v", job, u, time.Since(start).Round(time.Millisecond))
	}
	if len(add) == 0 {
		return
	}
	owners, err := c.cs.SplitOwners(ctx, job)
	if err != nil {
		c.logf("cluster: job %s: %v", job, err)
		return
	}
	sortDownstreamFirst(add)
	now := time.Now()
	for _, u := range add {
		from := owners[u.String()]
		c.mu.Lock()
		local := maps.Clone(cj.local)
		c.mu.Unlock()
		if len(c.holdUpstream(cj, []exec.Unit{u}, desired, local, owners, now)) == 0 {
			continue
		}
		if c.busyElsewhere(from) {
			c.mu.Lock()
			if _, ok := cj.wantSince[u]; !ok {
				cj.wantSince[u] = wanted{since: now, from: from}
			}
			c.mu.Unlock()
			continue
		}
		start := time.Now()
		gained, err := c.gain(ctx, job, []string{u.String()})
		if err == nil && len(gained) > 0 {
			err = c.loadUnits(ctx, job, []exec.Unit{u})
		}
		if err == nil {
			err = rj.job.AddUnit(ctx, u)
		}
		if err != nil {
			c.logf("cluster: job %s: take unit %s: %v", job, u, err)
			return
		}
		c.mu.Lock()
		cj.local[u] = true
		c.noteMove(job, cj, u, from, start)
		c.mu.Unlock()
	}
}

// sortDownstreamFirst orders units by stage, the last stage first, then by split.
func sortDownstreamFirst(us []exec.Unit) {
	cluster.SortUnits(us)
	sort.SliceStable(us, func(i, j int) bool { return us[i].Stage > us[j].Stage })
}

// stopLocal checkpoints and stops a local job, then releases every unit it held.
func (c *clusterNode) stopLocal(ctx context.Context, rj *runningJob) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := rj.job.Checkpoint(cctx); err != nil {
		c.logf("cluster: job %s: checkpoint before handing units over: %v", rj.def.ID, err)
	}
	cancel()
	rj.stop()
	job := rj.def.ID
	c.mu.Lock()
	held := c.held[job]
	var release []string
	for sp := range held {
		if !strings.HasPrefix(sp, "@") {
			release = append(release, sp)
		}
	}
	if cj := c.jobs[job]; cj != nil {
		cj.local = map[exec.Unit]bool{}
	}
	c.mu.Unlock()
	c.releaseUnits(ctx, job, release)
}

// releaseUnits releases the named units of job held here and drops their local state (a
// later takeover loads them again).
func (c *clusterNode) releaseUnits(ctx context.Context, job string, names []string) {
	var dropped []exec.Unit
	for _, sp := range names {
		c.mu.Lock()
		gen, ok := c.held[job][sp]
		delete(c.held[job], sp)
		c.mu.Unlock()
		if !ok {
			continue
		}
		if err := c.cs.Release(ctx, job, sp, gen); err != nil && !errors.Is(err, state.ErrFenced) {
			c.logf("cluster: job %s: release unit %s: %v", job, sp, err)
		}
		if u, ok := exec.ParseUnit(sp); ok {
			dropped = append(dropped, u)
		}
	}
	if err := c.dropLocal(job, dropped); err != nil {
		c.logf("cluster: job %s: drop the local state of units %v: %v", job, dropped, err)
	}
}

// releaseIdle releases the units held for jobs that do not run here (stopped by a failure,
// or no longer RUNNING) and that this instance is not assigned any more, so that their new
// owner can take them.
func (c *clusterNode) releaseIdle(ctx context.Context, running map[string]*runningJob, want map[string]JobDef) {
	c.mu.Lock()
	var jobs []string
	for job := range c.held {
		if running[job] == nil {
			jobs = append(jobs, job)
		}
	}
	c.mu.Unlock()
	for _, job := range jobs {
		var keep []exec.Unit
		if _, ok := want[job]; ok {
			keep = c.assigned(job, c.self.Name)
		}
		var release []string
		c.mu.Lock()
		for sp := range c.held[job] {
			u, ok := exec.ParseUnit(sp)
			if ok && !slices.Contains(keep, u) {
				release = append(release, sp)
			}
		}
		c.mu.Unlock()
		c.releaseUnits(ctx, job, release)
	}
}

// gain acquires the splits of job not held yet and returns them.
func (c *clusterNode) gain(ctx context.Context, job string, splits []string) ([]string, error) {
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

// deleteUnitKeys returns a batch that deletes the local keys of units of job.
func (c *clusterNode) deleteUnitKeys(job string, units []exec.Unit) (*state.Batch, error) {
	b := &state.Batch{}
	err := c.e.store.Scan(jobPrefix(job), func(k, _ []byte) error {
		if u, ok := exec.KeyUnit(job, k); ok && slices.Contains(units, u) {
			b.Delete(append([]byte(nil), k...))
		}
		return nil
	})
	return b, err
}

// dropLocal deletes the local keys of units of job.
func (c *clusterNode) dropLocal(job string, units []exec.Unit) error {
	if len(units) == 0 {
		return nil
	}
	b, err := c.deleteUnitKeys(job, units)
	if err != nil || b.Len() == 0 {
		return err
	}
	return c.e.store.Write(b)
}

// loadUnits replaces the local keys of units of job with their committed state, in one
// write.
func (c *clusterNode) loadUnits(ctx context.Context, job string, units []exec.Unit) error {
	if len(units) == 0 {
		return nil
	}
	b, err := c.deleteUnitKeys(job, units)
	if err != nil {
		return err
	}
	for _, u := range units {
		var bad error
		_, err := c.cs.Load(ctx, job, u.String(), func(k, v []byte) error {
			nk, ok := unitNativeKey(job, k)
			if !ok {
				bad = fmt.Errorf("key %x of unit %s of job %s is not a unit key", k, u, job)
				return bad
			}
			b.Put(nk, v)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return c.e.store.Write(b)
}

// loadInstanceKeys replaces the job's local instance keys with what the instance committed
// under its own split.
func (c *clusterNode) loadInstanceKeys(ctx context.Context, job string) error {
	b := &state.Batch{}
	err := c.e.store.Scan(jobPrefix(job), func(k, _ []byte) error {
		if _, ok := exec.KeyUnit(job, k); !ok {
			b.Delete(append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = c.cs.Load(ctx, job, c.selfSplit(), func(k, v []byte) error {
		nk, ok := nativeKey(job, k)
		if !ok {
			return fmt.Errorf("instance key %x of job %s is not an instance key", k, job)
		}
		b.Put(nk, v)
		return nil
	})
	if err != nil {
		return err
	}
	return c.e.store.Write(b)
}

// sharedKey maps a local key of job to the key it is committed under in the shared store:
// a unit's key gets the unit's name ("<stage>/<split>") as its split; every other key of
// the job is the instance's (operator "i.<op>.<split>", split "@<name>"). Keys of other
// jobs and non-state keys come back unchanged (the store refuses them).
func (c *clusterNode) sharedKey(job string, key []byte) []byte {
	j, op, sp, rest, ok := state.KeyParts(key)
	if !ok || string(j) != job {
		return key
	}
	if u, ok := exec.KeyUnit(job, key); ok {
		return append(state.SplitPrefix(nil, job, string(op), u.String()), rest...)
	}
	k := state.SplitPrefix(nil, job, instanceOpPrefix+string(op)+"."+string(sp), c.selfSplit())
	return append(k, rest...)
}

// unitNativeKey is the inverse of sharedKey for a unit's key.
func unitNativeKey(job string, key []byte) ([]byte, bool) {
	j, op, sp, rest, ok := state.KeyParts(key)
	if !ok || string(j) != job {
		return nil, false
	}
	u, ok := exec.ParseUnit(string(sp))
	if !ok {
		return nil, false
	}
	nk := append(state.SplitPrefix(nil, job, string(op), u.Split), rest...)
	if ku, ok := exec.KeyUnit(job, nk); !ok || ku != u {
		return nil, false
	}
	return nk, true
}

// nativeKey is the inverse of sharedKey for an instance key.
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
func (c *clusterNode) commit(job string, ci *exec.CheckpointInfo) error {
	// Not c.ctx: the final checkpoints of close run after the loop has stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cp := &state.Checkpoint{Job: job, Epoch: ci.Epoch, State: &state.Batch{}}
	ci.State.Each(func(kind state.OpKind, key, value []byte) error {
		k := c.sharedKey(job, key)
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
	splits := state.BatchSplits(job, cp.State)
	for _, o := range ci.Offsets {
		name := exec.Unit{Stage: o.Stage, Split: o.Split}.String()
		if !slices.Contains(splits, name) {
			splits = append(splits, name)
		}
		cp.Offsets = append(cp.Offsets, state.CheckpointOffset{Split: name, Offset: o.Offset})
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

// close stops the loop, checkpoints and stops the local jobs, releases their units and
// ends the lease, so the other members take over without waiting for it to expire.
func (c *clusterNode) close() {
	c.cancel()
	<-c.done
	c.e.jobs.startMu.Lock()
	defer c.e.jobs.startMu.Unlock()
	jobs := c.e.jobs.list()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, rj := range jobs {
		c.stopLocal(ctx, rj)
	}
	c.members.Leave(ctx)
}
