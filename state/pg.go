package state

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresCheckpointStore is a CheckpointStore in a Postgres database that several rsql
// instances share (schema: docs/checkpoints.md). Split ownership is a row per split whose
// generation a takeover increments; a commit is one transaction that locks the rows of the
// splits it covers (SELECT ... FOR UPDATE), checks their generations and applies the state
// delta as upserts and deletes of (job, split, key) rows.
type PostgresCheckpointStore struct {
	pool *pgxpool.Pool
	q    pgQueries

	// beforeCommit, when set (tests), runs inside a commit's transaction after every write
	// and before COMMIT, with the server process ID of the transaction's connection.
	beforeCommit func(pid uint32) error
}

// PostgresOptions configures OpenPostgres.
type PostgresOptions struct {
	// Schema is the Postgres schema holding the tables (default "rsql"); lower-case
	// letters, digits and underscores.
	Schema string
	// MaxConns bounds the connection pool (default 8).
	MaxConns int32
}

var schemaNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// OpenPostgres connects to the database at url (a pgx connection string) and creates the
// schema and tables if they do not exist yet. Creation runs in one transaction under a
// transaction-scoped advisory lock, so instances starting together do not race.
func OpenPostgres(ctx context.Context, url string, o PostgresOptions) (*PostgresCheckpointStore, error) {
	if o.Schema == "" {
		o.Schema = "rsql"
	}
	if !schemaNameRE.MatchString(o.Schema) {
		return nil, fmt.Errorf("state: postgres schema name %q: want lower-case letters, digits and _", o.Schema)
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 8
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("state: postgres url: %w", err)
	}
	cfg.MaxConns = o.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("state: connect to postgres: %w", err)
	}
	s := &PostgresCheckpointStore{pool: pool, q: newPgQueries(pgx.Identifier{o.Schema}.Sanitize())}
	if err := s.createSchema(ctx, o.Schema); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// pgQueries are the statements, with the schema name filled in.
type pgQueries struct {
	create                                   []string
	acquire, release, owner                  string
	lockSplits, dropRange, dropFrom, deletes string
	upserts, epochs, offsets                 string
	loadMeta, loadState                      string
	scanJob, scanJobFrom, getJob             string
	catalog, catalogInsert, catalogUpdate    string
}

func newPgQueries(schema string) pgQueries {
	r := strings.NewReplacer("S.", schema+".", "$schema", schema)
	q := pgQueries{
		create: []string{
			`CREATE SCHEMA IF NOT EXISTS $schema`,
			`CREATE TABLE IF NOT EXISTS S.splits (
				job text NOT NULL,
				split text NOT NULL,
				generation bigint NOT NULL,
				owner text NOT NULL,
				epoch bigint NOT NULL DEFAULT 0,
				next_offset bigint,
				updated timestamptz NOT NULL DEFAULT now(),
				PRIMARY KEY (job, split))`,
			`CREATE TABLE IF NOT EXISTS S.state (
				job text NOT NULL,
				split text NOT NULL,
				key bytea NOT NULL,
				value bytea NOT NULL,
				PRIMARY KEY (job, split, key))`,
			`CREATE TABLE IF NOT EXISTS S.catalog (
				id int PRIMARY KEY CHECK (id = 1),
				version bigint NOT NULL,
				data bytea NOT NULL,
				updated timestamptz NOT NULL DEFAULT now())`,
		},
		acquire: `INSERT INTO S.splits AS sp (job, split, generation, owner) VALUES ($1, $2, 1, $3)
			ON CONFLICT (job, split) DO UPDATE SET generation = sp.generation + 1, owner = EXCLUDED.owner, updated = now()
			RETURNING generation`,
		release: `UPDATE S.splits SET generation = generation + 1, owner = '', updated = now()
			WHERE job = $1 AND split = $2 AND generation = $3`,
		owner: `SELECT generation, owner FROM S.splits WHERE job = $1 AND split = $2`,
		lockSplits: `SELECT split, generation, owner FROM S.splits WHERE job = $1 AND split = ANY($2)
			ORDER BY split FOR UPDATE`,
		dropRange: `DELETE FROM S.state WHERE job = $1 AND split = $2 AND key >= $3 AND key < $4`,
		dropFrom:  `DELETE FROM S.state WHERE job = $1 AND split = $2 AND key >= $3`,
		deletes: `DELETE FROM S.state st USING unnest($2::text[], $3::bytea[]) AS d(split, key)
			WHERE st.job = $1 AND st.split = d.split AND st.key = d.key`,
		upserts: `INSERT INTO S.state (job, split, key, value)
			SELECT $1, u.split, u.key, u.value FROM unnest($2::text[], $3::bytea[], $4::bytea[]) AS u(split, key, value)
			ON CONFLICT (job, split, key) DO UPDATE SET value = EXCLUDED.value`,
		epochs: `UPDATE S.splits SET epoch = GREATEST(epoch, $2), updated = now() WHERE job = $1 AND split = ANY($3)`,
		offsets: `UPDATE S.splits sp SET next_offset = o.off FROM unnest($2::text[], $3::bigint[]) AS o(split, off)
			WHERE sp.job = $1 AND sp.split = o.split`,
		loadMeta:      `SELECT owner, generation, epoch, next_offset FROM S.splits WHERE job = $1 AND split = $2`,
		loadState:     `SELECT key, value FROM S.state WHERE job = $1 AND split = $2 ORDER BY key`,
		scanJob:       `SELECT key, value FROM S.state WHERE job = $1 AND key >= $2 AND key < $3 ORDER BY key`,
		scanJobFrom:   `SELECT key, value FROM S.state WHERE job = $1 AND key >= $2 ORDER BY key`,
		getJob:        `SELECT value FROM S.state WHERE job = $1 AND key = $2 LIMIT 1`,
		catalog:       `SELECT version, data FROM S.catalog WHERE id = 1`,
		catalogInsert: `INSERT INTO S.catalog (id, version, data) VALUES (1, 1, $1) ON CONFLICT (id) DO NOTHING RETURNING version`,
		catalogUpdate: `UPDATE S.catalog SET version = version + 1, data = $1, updated = now() WHERE id = 1 AND version = $2 RETURNING version`,
	}
	for i, c := range q.create {
		q.create[i] = r.Replace(c)
	}
	for _, p := range []*string{&q.acquire, &q.release, &q.owner, &q.lockSplits, &q.dropRange, &q.dropFrom,
		&q.deletes, &q.upserts, &q.epochs, &q.offsets, &q.loadMeta, &q.loadState, &q.scanJob, &q.scanJobFrom, &q.getJob, &q.catalog,
		&q.catalogInsert, &q.catalogUpdate} {
		*p = r.Replace(*p)
	}
	return q
}

func (s *PostgresCheckpointStore) createSchema(ctx context.Context, schema string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "rsql checkpoint schema "+schema); err != nil {
			return err
		}
		for _, c := range s.q.create {
			if _, err := tx.Exec(ctx, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: create postgres schema %q: %w", schema, err)
	}
	return nil
}

// Acquire implements CheckpointStore: one upsert that increments the split's generation.
func (s *PostgresCheckpointStore) Acquire(ctx context.Context, job, split, owner string) (int64, error) {
	if job == "" || split == "" {
		return 0, fmt.Errorf("%w: acquire needs a job and a split (got %q, %q)", ErrBadCheckpoint, job, split)
	}
	var gen int64
	if err := s.pool.QueryRow(ctx, s.q.acquire, job, split, owner).Scan(&gen); err != nil {
		return 0, fmt.Errorf("state: acquire split %q of job %q: %w", split, job, err)
	}
	return gen, nil
}

// Release implements CheckpointStore.
func (s *PostgresCheckpointStore) Release(ctx context.Context, job, split string, gen int64) error {
	tag, err := s.pool.Exec(ctx, s.q.release, job, split, gen)
	if err != nil {
		return fmt.Errorf("state: release split %q of job %q: %w", split, job, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	fe := &FencedError{Job: job, Split: split, Held: gen}
	err = s.pool.QueryRow(ctx, s.q.owner, job, split).Scan(&fe.Current, &fe.Owner)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("state: release split %q of job %q: %w", split, job, err)
	}
	return fe
}

// pgDelta is a checkpoint's state delta reduced to its net effect, in the order the
// statements run: prefix deletions, then key deletions, then upserts. That order gives the
// same result as applying the operations one by one: a key's final state is decided by the
// last operation that touched it, and an operation is dropped from the net lists when a
// later prefix deletion covers it.
type pgDelta struct {
	drops   []pgDrop
	arena   []byte
	entries []pgEntry
	index   map[string]int // key -> entries index
}

type pgDrop struct {
	split  string
	prefix []byte
}

type pgEntry struct {
	split      string
	kOff, kLen int
	vOff, vLen int
	del, dead  bool
}

func (d *pgDelta) add(kind OpKind, split string, key, value []byte) {
	switch kind {
	case OpDropPrefix:
		d.drops = append(d.drops, pgDrop{split: split, prefix: append([]byte(nil), key...)})
		for k, i := range d.index {
			if strings.HasPrefix(k, string(key)) {
				d.entries[i].dead = true
				delete(d.index, k)
			}
		}
		return
	}
	e := pgEntry{split: split, kOff: len(d.arena), kLen: len(key), del: kind == OpDelete}
	d.arena = append(d.arena, key...)
	if kind == OpPut {
		e.vOff, e.vLen = len(d.arena), len(value)
		d.arena = append(d.arena, value...)
	}
	if i, ok := d.index[string(key)]; ok {
		d.entries[i].dead = true
	}
	d.index[string(key)] = len(d.entries)
	d.entries = append(d.entries, e)
}

// DropJob deletes job's rows from the shared state and splits tables, once no live member
// (a name in live) holds one of its units — an instance's own split ("@<name>") does not
// count — and reports whether it did. The job must have ended for good: a later commit of
// one of its splits is fenced (its row is gone), and an acquisition starts it afresh.
func (s *PostgresCheckpointStore) DropJob(ctx context.Context, job string, live []string) (bool, error) {
	dropped := false
	schema := s.schemaName()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT owner FROM `+schema+`.splits WHERE job = $1 AND split NOT LIKE '@%' AND owner <> '' FOR UPDATE`, job)
		if err != nil {
			return err
		}
		owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, o := range owners {
			if slices.Contains(live, o) {
				return nil
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+schema+`.state WHERE job = $1`, job); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+schema+`.splits WHERE job = $1`, job); err != nil {
			return err
		}
		dropped = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("state: delete the state of job %q: %w", job, err)
	}
	return dropped, nil
}

// Commit implements CheckpointStore in one transaction.
func (s *PostgresCheckpointStore) Commit(ctx context.Context, cp *Checkpoint) error {
	d := &pgDelta{index: make(map[string]int)}
	pl, err := validateCheckpoint(cp, func(kind OpKind, split string, key, value []byte) error {
		d.add(kind, split, key, value)
		return nil
	})
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.commitTx(ctx, tx, cp, pl, d) })
	if err != nil {
		var fe *FencedError
		if errors.As(err, &fe) {
			return fe
		}
		return fmt.Errorf("state: commit checkpoint %d of job %q: %w", cp.Epoch, cp.Job, err)
	}
	return nil
}

func (s *PostgresCheckpointStore) commitTx(ctx context.Context, tx pgx.Tx, cp *Checkpoint, pl *checkpointPlan, d *pgDelta) error {
	if len(pl.order) > 0 {
		rows, err := tx.Query(ctx, s.q.lockSplits, cp.Job, pl.order)
		if err != nil {
			return err
		}
		found := make(map[string]bool, len(pl.order))
		for rows.Next() {
			var sp, owner string
			var gen int64
			if err := rows.Scan(&sp, &gen, &owner); err != nil {
				rows.Close()
				return err
			}
			found[sp] = true
			if held := pl.covered[sp]; gen != held {
				rows.Close()
				return &FencedError{Job: cp.Job, Split: sp, Held: held, Current: gen, Owner: owner}
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, sp := range pl.order {
			if !found[sp] {
				return &FencedError{Job: cp.Job, Split: sp, Held: pl.covered[sp]}
			}
		}
	}
	b := &pgx.Batch{}
	for _, dr := range d.drops {
		if end := PrefixEnd(dr.prefix); end != nil {
			b.Queue(s.q.dropRange, cp.Job, dr.split, dr.prefix, end)
		} else {
			b.Queue(s.q.dropFrom, cp.Job, dr.split, dr.prefix)
		}
	}
	var delSplits, putSplits []string
	var delKeys, putKeys, putVals [][]byte
	for _, e := range d.entries {
		if e.dead {
			continue
		}
		k := d.arena[e.kOff : e.kOff+e.kLen : e.kOff+e.kLen]
		if e.del {
			delSplits, delKeys = append(delSplits, e.split), append(delKeys, k)
		} else {
			putSplits, putKeys = append(putSplits, e.split), append(putKeys, k)
			putVals = append(putVals, d.arena[e.vOff:e.vOff+e.vLen:e.vOff+e.vLen])
		}
	}
	if len(delKeys) > 0 {
		b.Queue(s.q.deletes, cp.Job, delSplits, delKeys)
	}
	if len(putKeys) > 0 {
		b.Queue(s.q.upserts, cp.Job, putSplits, putKeys, putVals)
	}
	if len(pl.order) > 0 {
		b.Queue(s.q.epochs, cp.Job, cp.Epoch, pl.order)
	}
	if len(cp.Offsets) > 0 {
		splits := make([]string, len(cp.Offsets))
		offs := make([]int64, len(cp.Offsets))
		for i, o := range cp.Offsets {
			splits[i], offs[i] = o.Split, o.Offset
		}
		b.Queue(s.q.offsets, cp.Job, splits, offs)
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(tx.Conn().PgConn().PID()); err != nil {
			return err
		}
	}
	return nil
}

// Load implements CheckpointStore from one REPEATABLE READ snapshot.
func (s *PostgresCheckpointStore) Load(ctx context.Context, job, split string, fn func(key, value []byte) error) (SplitInfo, error) {
	info := SplitInfo{Job: job, Split: split}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if split != "" {
			var off *int64
			err := tx.QueryRow(ctx, s.q.loadMeta, job, split).Scan(&info.Owner, &info.Generation, &info.Epoch, &off)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if off != nil {
				info.Offset, info.HasOffset = *off, true
			}
		}
		return eachKey(ctx, tx, fn, s.q.loadState, job, split)
	})
	var ce *callbackError
	if errors.As(err, &ce) {
		return info, ce.err
	}
	if err != nil {
		return info, fmt.Errorf("state: load split %q of job %q: %w", split, job, err)
	}
	return info, nil
}

// ScanJob calls fn, in key order, for every committed key of job that starts with prefix,
// whichever split holds it (the shared form of the key, as committed). One read-only
// transaction: the keys of one moment.
func (s *PostgresCheckpointStore) ScanJob(ctx context.Context, job string, prefix []byte, fn func(key, value []byte) error) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if end := PrefixEnd(prefix); end != nil {
			return eachKey(ctx, tx, fn, s.q.scanJob, job, prefix, end)
		}
		return eachKey(ctx, tx, fn, s.q.scanJobFrom, job, prefix)
	})
	var ce *callbackError
	if errors.As(err, &ce) {
		return ce.err
	}
	if err != nil {
		return fmt.Errorf("state: scan job %q: %w", job, err)
	}
	return nil
}

// GetJob returns the committed value of key (its shared form) in job.
func (s *PostgresCheckpointStore) GetJob(ctx context.Context, job string, key []byte) ([]byte, bool, error) {
	var v []byte
	err := s.pool.QueryRow(ctx, s.q.getJob, job, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: get a key of job %q: %w", job, err)
	}
	return v, true, nil
}

// eachKey runs query (its rows: key, value) in tx and calls fn with each row; an error of
// fn comes back as a callbackError.
func eachKey(ctx context.Context, tx pgx.Tx, fn func(key, value []byte) error, query string, args ...any) error {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var k, v []byte
	for rows.Next() {
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		if err := fn(k, v); err != nil {
			return &callbackError{err}
		}
	}
	return rows.Err()
}

// callbackError carries an error of the caller's callback out of a transaction unchanged.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// Catalog implements CheckpointStore.
func (s *PostgresCheckpointStore) Catalog(ctx context.Context) ([]byte, int64, error) {
	var ver int64
	var data []byte
	err := s.pool.QueryRow(ctx, s.q.catalog).Scan(&ver, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("state: read catalog: %w", err)
	}
	return data, ver, nil
}

// PutCatalog implements CheckpointStore with a conditional insert or update.
func (s *PostgresCheckpointStore) PutCatalog(ctx context.Context, data []byte, version int64) (int64, error) {
	if data == nil {
		data = []byte{}
	}
	var nv int64
	var err error
	if version == 0 {
		err = s.pool.QueryRow(ctx, s.q.catalogInsert, data).Scan(&nv)
	} else {
		err = s.pool.QueryRow(ctx, s.q.catalogUpdate, data, version).Scan(&nv)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		_, cur, rerr := s.Catalog(ctx)
		if rerr != nil {
			return 0, rerr
		}
		return cur, fmt.Errorf("%w: expected version %d, found %d", ErrCatalogConflict, version, cur)
	}
	if err != nil {
		return 0, fmt.Errorf("state: write catalog: %w", err)
	}
	return nv, nil
}

// Close implements CheckpointStore: it closes the connection pool.
func (s *PostgresCheckpointStore) Close() error {
	s.pool.Close()
	return nil
}
