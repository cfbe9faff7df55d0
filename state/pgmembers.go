package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Membership of rsql instances sharing a PostgresCheckpointStore. Each instance registers
// under a stable name with a lease that it renews (heartbeat); the live members are those
// whose lease has not expired, by the database's clock (so the instances' clocks do not
// matter). Deciding which member runs which split is the caller's business; the checkpoint
// store's generations keep a takeover safe whatever the members believe.
//
// Table (created by Join if missing, in the store's schema):
//
//	CREATE TABLE members (
//	  name text PRIMARY KEY,          -- the instance's stable name
//	  num bigserial,                  -- a number given once per name, never reused
//	  addr text NOT NULL,             -- for diagnostics (the instance's Postgres-wire address)
//	  lease_until timestamptz NOT NULL,
//	  joined timestamptz NOT NULL DEFAULT now());

// Member is a registered instance.
type Member struct {
	Name string
	// Num is given once per name by the database and never reused: a stable small
	// identity (the server derives disjoint checkpoint epochs from it).
	Num  int64
	Addr string
}

// ErrNotMember says a heartbeat came from a name that is not registered.
var ErrNotMember = errors.New("state: instance is not a registered member")

func (s *PostgresCheckpointStore) schemaName() string {
	return strings.TrimPrefix(s.q.create[0], "CREATE SCHEMA IF NOT EXISTS ")
}

func (s *PostgresCheckpointStore) membersTable() string { return s.schemaName() + ".members" }

// Join registers (or re-registers) the instance name with a lease of ttl and returns its
// membership. A name keeps its Num across restarts.
func (s *PostgresCheckpointStore) Join(ctx context.Context, name, addr string, ttl time.Duration) (Member, error) {
	if name == "" {
		return Member{}, fmt.Errorf("state: join: empty instance name")
	}
	t := s.membersTable()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "rsql members "+t); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
			name text PRIMARY KEY,
			num bigserial,
			addr text NOT NULL,
			lease_until timestamptz NOT NULL,
			joined timestamptz NOT NULL DEFAULT now())`)
		return err
	})
	if err != nil {
		return Member{}, fmt.Errorf("state: create members table: %w", err)
	}
	m := Member{Name: name, Addr: addr}
	err = s.pool.QueryRow(ctx, `INSERT INTO `+t+` AS m (name, addr, lease_until)
		VALUES ($1, $2, now() + $3 * interval '1 millisecond')
		ON CONFLICT (name) DO UPDATE SET addr = EXCLUDED.addr, lease_until = EXCLUDED.lease_until
		RETURNING num`, name, addr, ttl.Milliseconds()).Scan(&m.Num)
	if err != nil {
		return Member{}, fmt.Errorf("state: join as %q: %w", name, err)
	}
	return m, nil
}

// Heartbeat renews name's lease for ttl. It fails with ErrNotMember when the name is not
// registered (Join first).
func (s *PostgresCheckpointStore) Heartbeat(ctx context.Context, name string, ttl time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.membersTable()+` SET lease_until = now() + $2 * interval '1 millisecond' WHERE name = $1`,
		name, ttl.Milliseconds())
	if err != nil {
		return fmt.Errorf("state: heartbeat of %q: %w", name, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: %q", ErrNotMember, name)
	}
	return nil
}

// Leave ends name's lease now (the name keeps its Num for a later Join).
func (s *PostgresCheckpointStore) Leave(ctx context.Context, name string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.membersTable()+` SET lease_until = now() - interval '1 second' WHERE name = $1`, name); err != nil {
		return fmt.Errorf("state: leave as %q: %w", name, err)
	}
	return nil
}

// Members returns the members whose lease has not expired, sorted by name.
func (s *PostgresCheckpointStore) Members(ctx context.Context) ([]Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, num, addr FROM `+s.membersTable()+` WHERE lease_until > now() ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("state: list members: %w", err)
	}
	var out []Member
	for rows.Next() {
		var m Member
		if err := rows.Scan(&m.Name, &m.Num, &m.Addr); err != nil {
			rows.Close()
			return nil, fmt.Errorf("state: list members: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: list members: %w", err)
	}
	return out, nil
}

// JobSplits returns the splits of job the store has ever seen (acquired or committed),
// sorted, without the per-instance splits whose names start with "@".
func (s *PostgresCheckpointStore) JobSplits(ctx context.Context, job string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT split FROM `+s.schemaName()+`.splits WHERE job = $1 AND split NOT LIKE '@%' ORDER BY split`, job)
	if err != nil {
		return nil, fmt.Errorf("state: list splits of job %q: %w", job, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("state: list splits of job %q: %w", job, err)
	}
	return out, nil
}

// SplitOwners returns the current owner of every split of job that has one ("" owners,
// released splits, are left out).
func (s *PostgresCheckpointStore) SplitOwners(ctx context.Context, job string) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT split, owner FROM `+s.schemaName()+`.splits WHERE job = $1 AND owner <> ''`, job)
	if err != nil {
		return nil, fmt.Errorf("state: owners of the splits of job %q: %w", job, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var sp, owner string
		if err := rows.Scan(&sp, &owner); err != nil {
			return nil, fmt.Errorf("state: owners of the splits of job %q: %w", job, err)
		}
		out[sp] = owner
	}
	return out, rows.Err()
}

// JobSplitInfos returns the ownership and last checkpoint of every split of job the store
// knows, sorted by split name.
func (s *PostgresCheckpointStore) JobSplitInfos(ctx context.Context, job string) ([]SplitInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT split, owner, generation, epoch, next_offset FROM `+s.schemaName()+`.splits WHERE job = $1 ORDER BY split`, job)
	if err != nil {
		return nil, fmt.Errorf("state: splits of job %q: %w", job, err)
	}
	defer rows.Close()
	var out []SplitInfo
	for rows.Next() {
		info := SplitInfo{Job: job}
		var off *int64
		if err := rows.Scan(&info.Split, &info.Owner, &info.Generation, &info.Epoch, &off); err != nil {
			return nil, fmt.Errorf("state: splits of job %q: %w", job, err)
		}
		if off != nil {
			info.Offset, info.HasOffset = *off, true
		}
		out = append(out, info)
	}
	return out, rows.Err()
}
