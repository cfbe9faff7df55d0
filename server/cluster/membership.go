package cluster

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"

	"rsql/state"
)

// Membership is this instance's membership of the instances sharing a Postgres checkpoint
// store: it joins under a stable name, renews its lease every Tick, and knows the live
// members (those whose lease has not expired) as of the last Refresh.
type Membership struct {
	cs   *state.PostgresCheckpointStore
	cfg  Config
	logf func(format string, args ...any)
	self state.Member

	mu      sync.Mutex // guards members
	members []string
}

// Join joins the members under cfg.Name and reads who is live. logf logs what changes.
func Join(ctx context.Context, cfg Config, logf func(format string, args ...any)) (*Membership, error) {
	m := &Membership{cs: cfg.Checkpoints, cfg: cfg, logf: logf}
	self, err := m.cs.Join(ctx, cfg.Name, cfg.Addr, cfg.Lease)
	if err != nil {
		return nil, err
	}
	m.self = self
	if err := m.Refresh(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Self is this instance's membership record (its name and member number).
func (m *Membership) Self() state.Member { return m.self }

// Members returns the live members' names, sorted, as of the last Refresh. The slice is
// replaced, never changed, by Refresh: callers must not change it.
func (m *Membership) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.members
}

// Live reports whether name is a live member as of the last Refresh.
func (m *Membership) Live(name string) bool {
	return slices.Contains(m.Members(), name)
}

// Renew renews the lease (joining again when the store no longer knows this instance, its
// lease having expired) and refreshes the live members; it logs what fails.
func (m *Membership) Renew(ctx context.Context) {
	if err := m.cs.Heartbeat(ctx, m.self.Name, m.cfg.Lease); errors.Is(err, state.ErrNotMember) {
		_, err = m.cs.Join(ctx, m.self.Name, m.cfg.Addr, m.cfg.Lease)
	} else if err != nil {
		m.logf("cluster: heartbeat: %v", err)
	}
	if err := m.Refresh(ctx); err != nil {
		m.logf("cluster: %v", err)
	}
}

// Leave ends the lease, so the other members take over without waiting for it to expire.
func (m *Membership) Leave(ctx context.Context) { m.cs.Leave(ctx, m.self.Name) }

// Refresh reads the live members from the shared store (this instance is live as long as
// it runs, whatever the store says).
func (m *Membership) Refresh(ctx context.Context) error {
	ms, err := m.cs.Members(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ms)+1)
	for _, mb := range ms {
		names = append(names, mb.Name)
	}
	if !slices.Contains(names, m.self.Name) {
		names = append(names, m.self.Name) // we are live as long as we run
		sort.Strings(names)
	}
	m.mu.Lock()
	if !slices.Equal(names, m.members) {
		m.logf("cluster: live members %v", names)
	}
	m.members = names
	m.mu.Unlock()
	return nil
}
