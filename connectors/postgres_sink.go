package connectors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"rsql/connectors/options"
	"rsql/sql"
)

// The postgres connector as a sink (docs/sql.md, "PostgreSQL sink"): INSERT INTO t SELECT
// ... where t is a CREATE TABLE ... WITH (connector = 'postgres', ...). The rows reach the
// sink as rows (RowSink: message bodies are sql.AppendRow encodings, RowFormat), not as
// records of a text format.
//
//   - An append-only query's rows are inserted with COPY (text format).
//   - An updating query's rows are changes by the table's primary key (the last column is
//     the change column, sql.ChangeColumn): a row is upserted (INSERT ... ON CONFLICT (key)
//     DO UPDATE), a delete deletes the key's row. The job folds a key's changes of an epoch
//     into one before they reach the sink.
//   - Exactly once (EpochSink): each split's rows of a checkpoint epoch are applied in one
//     transaction that also moves the epoch of (job, stage, split) forward in the progress
//     table (PostgresProgressTable); an epoch the table already holds is skipped, so an
//     epoch published again after a crash is not applied twice. The splits' transactions
//     run in parallel, on connections of their own (transaction = 'epoch': the whole epoch
//     in one transaction, one split after the other).
//   - Values go as text (sql.AppendText, PostgreSQL's own forms) and PostgreSQL converts
//     them to the columns' types, as in the lookup (postgres.go).
//   - A row PostgreSQL refuses (a class 22 or 23 error: a constraint, a value out of a
//     column's range) is tried alone, and given to the reject function with PostgreSQL's
//     message when it fails alone, before the transaction commits; the others are applied.
//   - The database unreachable: the epoch's transaction is tried again with backoff (up
//     to postgresRetryFor), then the error is ErrUnavailable and the job is started again
//     from its checkpoint later (docs/guarantees.md, "Faults"); nothing is dropped.

// PostgresProgressTable is the table of the target database where the sink records the
// last epoch it applied per job, stage and split (docs/sql.md, "PostgreSQL sink").
const PostgresProgressTable = "rsql_sink_progress"

const postgresProgressDDL = `CREATE TABLE IF NOT EXISTS ` + PostgresProgressTable + ` (
  job text NOT NULL,
  stage integer NOT NULL,
  split text NOT NULL,
  epoch bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job, stage, split))`

// DeletePostgresProgress deletes the rows of job from the progress table of the database
// of the postgres table declared as table with options raw: a terminated job never writes
// again, so its rows only took space (and would mislead a later job given the same id).
// A database without the table has nothing to delete.
func DeletePostgresProgress(ctx context.Context, table string, raw map[string]string, job string) error {
	o, err := ParsePostgresOptions(table, raw)
	if err != nil {
		return err
	}
	cfg, err := poolConfig(o.URL, o.Timeout, "rsql sink "+table)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return fmt.Errorf("postgres table %s: %s", table, redactErr(err, o.URL))
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `DELETE FROM `+PostgresProgressTable+` WHERE job = $1`, job)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("postgres table %s: delete the progress rows of job %s: %s", table, job, redactErr(err, o.URL))
	}
	return nil
}

// postgresRetryFor is how long a sink retries a database it cannot reach before it gives
// the job back an ErrUnavailable error (a variable for tests).
var postgresRetryFor = 30 * time.Second

// RowSink is a sink that takes rows: its messages' bodies are sql.AppendRow encodings of
// the sink's schema (RowFormat), not records of a text format.
type RowSink interface {
	Sink
	TakesRows()
}

// RejectSink is a sink that can refuse single rows (a database constraint): it gives them
// to the function set with SetReject, with the split each came from and the reason, and
// goes on with the others. The function is called before the write commits and must have
// the rows stored (in a dead-letter output) when it returns; one that returns an error
// fails the write. A write tried again after a failure may give the same rows again.
type RejectSink interface {
	SetReject(fn func(rows []RejectedRow) error)
}

// RejectedRow is a row a RejectSink refused: its message body, its split and why.
type RejectedRow struct {
	Split string
	Body  []byte
	Cause *sql.Error
}

// EpochEntry is the output of one split in one checkpoint epoch.
type EpochEntry struct {
	Split string
	Msgs  []Message
}

// EpochSink is a sink that applies a checkpoint epoch's output atomically and remembers
// which epochs it applied: WriteEpoch applies the entries of epoch of a job's stage, each
// unless its split's epoch is already recorded, in one transaction with the record.
// Publishing an epoch twice is then harmless, which is what exactly-once output needs.
type EpochSink interface {
	WriteEpoch(ctx context.Context, job string, stage int, epoch int64, entries []EpochEntry) error
}

// RowFormat is the Format of a RowSink: sql.AppendRow of the row. A row holding an error
// value does not encode (its error is returned: the row goes to the job's bad rows).
type RowFormat struct{}

// Encode implements Format.
func (RowFormat) Encode(dst []byte, row sql.Row) ([]byte, error) {
	for _, v := range row {
		if v.IsError() {
			return dst, v.AsError()
		}
	}
	return sql.AppendRow(dst, row), nil
}

// Decode implements Format.
func (RowFormat) Decode(body []byte, row sql.Row) (sql.Row, error) {
	row, n, err := sql.DecodeRow(body, row)
	if err == nil && n != len(body) {
		err = fmt.Errorf("%w: %d bytes after the row", sql.ErrCorrupt, len(body)-n)
	}
	return row, err
}

// PostgresSink writes a PostgreSQL table (see the file comment).
type PostgresSink struct {
	spec   Spec
	opts   PostgresOptions
	pool   *pgxpool.Pool
	cols   []int // the schema's columns written, in order (all but the change column)
	change int   // the change column's index, or -1 (append-only)
	key    []int // the table's primary key (indexes into the schema)
	reject func(rows []RejectedRow) error
	logf   func(string, ...any)
	// wholeEpochs: each epoch in one transaction (transaction = 'epoch'); otherwise each
	// split's entry of an epoch in a transaction of its own, in parallel.
	wholeEpochs bool
	rejectMu    sync.Mutex // the reject function is called by one transaction at a time

	mu        sync.Mutex // guards describe
	described bool
	pgNames   []string // PostgreSQL's name of each of cols
	pgTypes   []string // and its type (format_type)
	copyCols  []string
	upsertSQL string
	deleteSQL string
	insertSQL string // one row, for rows tried alone
	keyPos    []int  // positions in cols of the key columns
}

// SinkCheckError is an error of the sink's table that retrying will not cure (the table
// missing, its key or a column not the declared one, no privilege); Err is a *sql.Error
// with the SQLSTATE.
type SinkCheckError struct{ Err *sql.Error }

func (e *SinkCheckError) Error() string { return e.Err.Message }
func (e *SinkCheckError) Unwrap() error { return e.Err }

// OpenPostgresSink opens a sink writing the table of spec (its options parsed with
// ParsePostgresOptions; spec.Key the declared primary key). The pool connects on the
// first write: opening does not need the database up.
func OpenPostgresSink(spec Spec) (*PostgresSink, error) {
	o, err := ParsePostgresOptions(spec.Stream, spec.Options.Raw)
	if err != nil {
		return nil, err
	}
	if len(spec.Schema) == 0 {
		return nil, fmt.Errorf("postgres sink %s: no schema", spec.Stream)
	}
	p := &PostgresSink{spec: spec, opts: o, change: -1, key: spec.Key, logf: log.Printf}
	if p.wholeEpochs, err = options.PostgresWholeEpochs(spec.Options.Raw); err != nil {
		return nil, err
	}
	for i, c := range spec.Schema {
		if i == len(spec.Schema)-1 && c.Name == sql.ChangeColumn {
			p.change = i
			continue
		}
		p.cols = append(p.cols, i)
	}
	if p.change >= 0 && len(p.key) == 0 {
		return nil, &SinkCheckError{sql.Errorf(sql.CodeNotSupported, "table %s: the rows of this query change by key, and the table declares no PRIMARY KEY to upsert and delete them by", spec.Stream)}
	}
	cfg, err := poolConfig(o.URL, o.Timeout, "rsql sink "+spec.Stream)
	if err != nil {
		return nil, err
	}
	p.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres sink %s: %s", spec.Stream, redactErr(err, o.URL))
	}
	return p, nil
}

// CheckPostgresSink checks, now, that the table of spec can take the rows of spec.Schema:
// the table exists, its primary key is spec.Key, every column is there with a type that
// takes the declared one, and the user may write it and the progress table. Errors are
// *sql.Error with the SQLSTATE (42P01, 42P10, 42703, 42804, 42501; 08001 when the database
// cannot be reached).
func CheckPostgresSink(ctx context.Context, spec Spec) error {
	p, err := OpenPostgresSink(spec)
	if err != nil {
		var ce *SinkCheckError
		if errors.As(err, &ce) {
			return ce.Err
		}
		return sql.Errorf(sql.CodeInvalidValue, "table %s: %v", spec.Stream, err)
	}
	defer p.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.describe(ctx); err != nil {
		var ce *SinkCheckError
		if errors.As(err, &ce) {
			return ce.Err
		}
		return sql.Errorf("08001", "table %s: cannot reach PostgreSQL to check %s: %s", spec.Stream, p.opts.Target, redactErr(err, p.opts.URL))
	}
	return nil
}

// TakesRows implements RowSink.
func (p *PostgresSink) TakesRows() {}

// SetReject implements RejectSink.
func (p *PostgresSink) SetReject(fn func(rows []RejectedRow) error) {
	p.reject = fn
}

// SetLogf sets where retries are logged (default: the standard logger).
func (p *PostgresSink) SetLogf(fn func(string, ...any)) { p.logf = fn }

// Target is the PostgreSQL table's quoted name.
func (p *PostgresSink) Target() string { return p.opts.Target }

func (p *PostgresSink) checkErr(code, format string, args ...any) error {
	return &SinkCheckError{sql.Errorf(code, "table %s: "+format, append([]any{p.spec.Stream}, args...)...)}
}

// pgWriteFits reports whether a PostgreSQL column of category cat and type typname takes
// the values of a declared column of type t: the same kind of value, never a narrower
// one (an INT column does not take BIGINT, a number column does not take VARCHAR); text
// columns take every type (its text form).
func pgWriteFits(t sql.Type, cat, typname string) bool {
	if cat == "S" {
		return true
	}
	switch t.Kind {
	case sql.KindVarchar:
		return cat == "U" || cat == "E" // uuid, enum, ... parsed from text by PostgreSQL
	case sql.KindInt:
		return typname == "int4" || typname == "int8" || typname == "numeric" || typname == "float8"
	case sql.KindBigInt:
		return typname == "int8" || typname == "numeric"
	case sql.KindDouble:
		return typname == "float8" || typname == "float4" || typname == "numeric"
	case sql.KindDecimal:
		return typname == "numeric" || typname == "float8"
	case sql.KindBool:
		return typname == "bool"
	case sql.KindTimestamp:
		return typname == "timestamp" || typname == "timestamptz"
	case sql.KindJSON:
		return typname == "json" || typname == "jsonb"
	}
	return false
}

// describe reads and checks the table (CheckPostgresSink's checks) and builds the
// statements. It is called with mu held.
func (p *PostgresSink) describe(ctx context.Context) error {
	if p.described {
		return nil
	}
	name := pgx.Identifier(p.opts.Table).Sanitize()
	var oid uint32
	if err := p.pool.QueryRow(ctx, `SELECT COALESCE(to_regclass($1)::oid, 0)`, name).Scan(&oid); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "3F000" || pe.Code == "42P01") {
			oid = 0
		} else {
			return err
		}
	}
	if oid == 0 {
		return p.checkErr("42P01", "PostgreSQL has no table %s (table = %q): create it first, with the columns %s", p.opts.Target, strings.Join(p.opts.Table, "."), p.columnList())
	}
	rows, err := p.pool.Query(ctx, `SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), t.typcategory::text, t.typname::text,
  a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = '',
  COALESCE(a.attnum = ANY(i.indkey::int2[]), false)
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return err
	}
	type col struct {
		name, typ, cat, typname string
		required, pk            bool
	}
	var cols []col
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.name, &c.typ, &c.cat, &c.typname, &c.required, &c.pk); err != nil {
			rows.Close()
			return err
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var names []string
	for _, c := range cols {
		names = append(names, c.name)
	}
	matched := make([]int, len(p.cols))
	used := map[int]bool{}
	for i, ci := range p.cols {
		dc := p.spec.Schema[ci]
		found := -1
		for j, c := range cols {
			if c.name == dc.Name {
				found = j
			}
		}
		if found < 0 {
			for j, c := range cols {
				if strings.EqualFold(c.name, dc.Name) {
					if found >= 0 {
						return p.checkErr("42703", "column %s matches both %q and %q of PostgreSQL table %s: name it exactly", dc.Name, cols[found].name, c.name, p.opts.Target)
					}
					found = j
				}
			}
		}
		if found < 0 {
			return p.checkErr("42703", "PostgreSQL table %s has no column %s (its columns: %s)", p.opts.Target, dc.Name, strings.Join(names, ", "))
		}
		c := cols[found]
		if !pgWriteFits(dc.Type, c.cat, c.typname) {
			return p.checkErr("42804", "column %s is %s but is %s in PostgreSQL table %s, which cannot take every %s value", dc.Name, dc.Type, c.typ, p.opts.Target, dc.Type)
		}
		matched[i] = found
		used[found] = true
	}
	for j, c := range cols {
		if c.required && !used[j] {
			return p.checkErr("23502", "column %s of PostgreSQL table %s is NOT NULL without a default, and table %s does not declare it", c.name, p.opts.Target, p.spec.Stream)
		}
	}
	// The primary key: PostgreSQL's must be the declared one (ON CONFLICT and the deletes
	// find rows by it).
	var pgKey []string
	for _, c := range cols {
		if c.pk {
			pgKey = append(pgKey, c.name)
		}
	}
	var declKey []string
	p.keyPos = p.keyPos[:0]
	for _, k := range p.key {
		declKey = append(declKey, p.spec.Schema[k].Name)
		for i, ci := range p.cols {
			if ci == k {
				p.keyPos = append(p.keyPos, i)
			}
		}
	}
	if len(p.key) > 0 {
		if len(pgKey) == 0 {
			return p.checkErr("42P10", "PostgreSQL table %s has no primary key; table %s declares PRIMARY KEY (%s): add it (ALTER TABLE %s ADD PRIMARY KEY (%s))", p.opts.Target, p.spec.Stream, strings.Join(declKey, ", "), p.opts.Target, strings.Join(declKey, ", "))
		}
		same := len(pgKey) == len(p.keyPos)
		for _, kp := range p.keyPos {
			if !cols[matched[kp]].pk {
				same = false
			}
		}
		if !same {
			return p.checkErr("42P10", "the primary key of PostgreSQL table %s is (%s) but table %s declares PRIMARY KEY (%s)", p.opts.Target, strings.Join(pgKey, ", "), p.spec.Stream, strings.Join(declKey, ", "))
		}
	}
	// Privileges: to insert (append-only), or to upsert and delete, and the progress table.
	privs := []string{"INSERT"}
	if p.change >= 0 {
		privs = []string{"INSERT", "UPDATE", "DELETE", "SELECT"}
	}
	for _, priv := range privs {
		var ok bool
		if err := p.pool.QueryRow(ctx, `SELECT has_table_privilege($1::oid, $2)`, oid, priv).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return p.checkErr("42501", "permission denied: the user of url may not %s PostgreSQL table %s (GRANT %s ON %s TO ...)", priv, p.opts.Target, strings.Join(privs, ", "), p.opts.Target)
		}
	}
	if err := p.progressTable(ctx); err != nil {
		return err
	}
	p.pgNames = make([]string, len(p.cols))
	p.pgTypes = make([]string, len(p.cols))
	for i, j := range matched {
		p.pgNames[i], p.pgTypes[i] = cols[j].name, cols[j].typ
	}
	p.buildStatements(name)
	p.described = true
	return nil
}

// columnList renders the declared columns for a message.
func (p *PostgresSink) columnList() string {
	var b []string
	for _, ci := range p.cols {
		c := p.spec.Schema[ci]
		b = append(b, c.Name+" "+c.Type.String())
	}
	return "(" + strings.Join(b, ", ") + ")"
}

// progressTable creates the progress table when it is missing and checks the sink may
// read and write it.
func (p *PostgresSink) progressTable(ctx context.Context) error {
	var exists bool
	if err := p.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, PostgresProgressTable).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := p.pool.Exec(ctx, postgresProgressDDL); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == "42P07" || pe.Code == "23505") {
				return nil // created meanwhile by another sink
			}
			if errors.As(err, &pe) && pe.Code == "42501" {
				return p.checkErr("42501", "cannot create the progress table %s in PostgreSQL (%s): create it as %s, and grant SELECT, INSERT, UPDATE on it", PostgresProgressTable, pe.Message, postgresProgressDDL)
			}
			return err
		}
		return nil
	}
	for _, priv := range []string{"SELECT", "INSERT", "UPDATE"} {
		var ok bool
		if err := p.pool.QueryRow(ctx, `SELECT has_table_privilege($1::regclass, $2)`, PostgresProgressTable, priv).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return p.checkErr("42501", "permission denied: the user of url may not %s the progress table %s (GRANT SELECT, INSERT, UPDATE ON %s TO ...)", priv, PostgresProgressTable, PostgresProgressTable)
		}
	}
	return nil
}

func (p *PostgresSink) buildStatements(table string) {
	n := len(p.cols)
	quoted := make([]string, n)
	params := make([]string, n)
	sel := make([]string, n)
	us := make([]string, n)
	for i := range p.cols {
		quoted[i] = pgx.Identifier{p.pgNames[i]}.Sanitize()
		params[i] = fmt.Sprintf("$%d::text[]", i+1)
		us[i] = fmt.Sprintf("c%d", i)
		sel[i] = fmt.Sprintf("u.c%d::%s", i, p.pgTypes[i])
	}
	p.copyCols = append([]string(nil), p.pgNames...)
	ins := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM unnest(%s) AS u(%s)", table, strings.Join(quoted, ", "),
		strings.Join(sel, ", "), strings.Join(params, ", "), strings.Join(us, ", "))
	p.insertSQL = ins
	if len(p.keyPos) == 0 {
		p.upsertSQL = ins
		return
	}
	keyCols := make([]string, len(p.keyPos))
	isKey := map[int]bool{}
	for i, kp := range p.keyPos {
		keyCols[i] = quoted[kp]
		isKey[kp] = true
	}
	var set []string
	for i := range p.cols {
		if !isKey[i] {
			set = append(set, quoted[i]+" = EXCLUDED."+quoted[i])
		}
	}
	if len(set) == 0 {
		p.upsertSQL = ins + " ON CONFLICT (" + strings.Join(keyCols, ", ") + ") DO NOTHING"
	} else {
		p.upsertSQL = ins + " ON CONFLICT (" + strings.Join(keyCols, ", ") + ") DO UPDATE SET " + strings.Join(set, ", ")
	}
	kparams := make([]string, len(p.keyPos))
	kus := make([]string, len(p.keyPos))
	conds := make([]string, len(p.keyPos))
	for i, kp := range p.keyPos {
		kparams[i] = fmt.Sprintf("$%d::text[]", i+1)
		kus[i] = fmt.Sprintf("k%d", i)
		conds[i] = fmt.Sprintf("t.%s = u.k%d::%s", quoted[kp], i, p.pgTypes[kp])
	}
	p.deleteSQL = fmt.Sprintf("DELETE FROM %s AS t USING unnest(%s) AS u(%s) WHERE %s", table, strings.Join(kparams, ", "),
		strings.Join(kus, ", "), strings.Join(conds, " AND "))
}

// change is one decoded message.
type pgChange struct {
	split string
	body  []byte
	row   sql.Row
	del   bool
	// castErr: a value does not convert to its column's declared type; the row is refused
	// without reaching the database.
	castErr *pgconn.PgError
}

func (p *PostgresSink) decode(split string, msgs []Message, out []pgChange) ([]pgChange, error) {
	for i := range msgs {
		row, err := (RowFormat{}).Decode(msgs[i].Body, nil)
		if err != nil {
			return out, fmt.Errorf("postgres sink %s: message %d: %w", p.spec.Stream, i, err)
		}
		if len(row) != len(p.spec.Schema) {
			return out, fmt.Errorf("postgres sink %s: a row of %d columns, want %d", p.spec.Stream, len(row), len(p.spec.Schema))
		}
		sp := split
		if sp == "" {
			sp = msgs[i].Split
		}
		c := pgChange{split: sp, body: msgs[i].Body, row: row}
		if p.change >= 0 {
			c.del = sql.IsDelete(row[p.change])
		}
		// A value of another type than the declared column's is converted to it as
		// PostgreSQL's INSERT does (an assignment cast: a DOUBLE into a BIGINT column is
		// rounded); one that does not convert refuses the row.
		for _, ci := range p.cols {
			v, t := row[ci], p.spec.Schema[ci].Type
			if v.IsNull() || v.K == t.Kind || t.Kind == sql.KindDecimal && v.K == sql.KindDecimal {
				continue
			}
			cv, err := sql.CastValue(v, t)
			if err != nil {
				code := sql.CodeInvalidText
				var se *sql.Error
				if errors.As(err, &se) {
					code = se.Code
				}
				c.castErr = &pgconn.PgError{Code: code, Message: fmt.Sprintf("column %s: %s does not convert to %s: %v", p.spec.Schema[ci].Name, sql.Text(v), t, err)}
				break
			}
			row[ci] = cv
		}
		out = append(out, c)
	}
	return out, nil
}

// Write implements Sink: the rows are applied at once, in one transaction, without a
// progress record (a job without exactly-once output).
func (p *PostgresSink) Write(ctx context.Context, msgs []Message) error {
	changes, err := p.decode("", msgs, nil)
	if err != nil {
		return err
	}
	return p.retry(ctx, func(tx pgx.Tx) ([]rejected, error) {
		return p.apply(ctx, tx, changes)
	})
}

// WriteEpoch implements EpochSink.
func (p *PostgresSink) WriteEpoch(ctx context.Context, job string, stage int, epoch int64, entries []EpochEntry) error {
	var all [][]pgChange
	for _, e := range entries {
		ch, err := p.decode(e.Split, e.Msgs, nil)
		if err != nil {
			return err
		}
		all = append(all, ch)
	}
	// claim moves the epoch of entry i's split forward in tx and applies its changes: no row
	// comes back when the table already holds this epoch or a later one (applied before a
	// crash), and then the entry is skipped. A second writer of the same split waits here
	// for the first's commit.
	claim := func(tx pgx.Tx, i int) ([]rejected, error) {
		var one int
		err := tx.QueryRow(ctx, `INSERT INTO `+PostgresProgressTable+` AS p (job, stage, split, epoch) VALUES ($1, $2, $3, $4)
ON CONFLICT (job, stage, split) DO UPDATE SET epoch = EXCLUDED.epoch, updated_at = now() WHERE p.epoch < EXCLUDED.epoch RETURNING 1`,
			job, stage, entries[i].Split, epoch).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return p.apply(ctx, tx, all[i])
	}
	if p.wholeEpochs || len(entries) == 1 {
		return p.retry(ctx, func(tx pgx.Tx) ([]rejected, error) {
			var rej []rejected
			for i := range entries {
				r, err := claim(tx, i)
				if err != nil {
					return nil, err
				}
				rej = append(rej, r...)
			}
			return rej, nil
		})
	}
	// One transaction per split, in parallel: each is exactly once by its own progress
	// row. The epoch is done when every one has committed (the next epoch's start waits
	// for that, so a key's changes keep their order across epochs).
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.retry(ctx, func(tx pgx.Tx) ([]rejected, error) { return claim(tx, i) })
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rejected is a row PostgreSQL refused.
type rejected struct {
	c   pgChange
	err *pgconn.PgError
}

// retry runs fn in a transaction until it commits, trying again with backoff while the
// database cannot be reached (up to postgresRetryFor), then hands the rows PostgreSQL
// refused to the reject function.
func (p *PostgresSink) retry(ctx context.Context, fn func(tx pgx.Tx) ([]rejected, error)) error {
	start := time.Now()
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := p.try(ctx, fn)
		if err == nil {
			return nil
		}
		var re *rejectError
		if errors.As(err, &re) {
			return re.err
		}
		var ce *SinkCheckError
		if errors.As(err, &ce) {
			return ce.Err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryablePG(err) {
			return fmt.Errorf("PostgreSQL table %s: %s", p.opts.Target, redactErr(err, p.opts.URL))
		}
		if time.Since(start) > postgresRetryFor {
			return Unavailable(fmt.Errorf("PostgreSQL table %s: %s (tried %d times for %s)", p.opts.Target, redactErr(err, p.opts.URL), attempt, time.Since(start).Round(time.Second)))
		}
		p.logf("sink %s: PostgreSQL table %s: %s; trying again in %s", p.spec.Stream, p.opts.Target, redactErr(err, p.opts.URL), wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if wait *= 2; wait > 5*time.Second {
			wait = 5 * time.Second
		}
	}
}

func pgMessage(e *pgconn.PgError) string {
	m := e.Message
	if e.Detail != "" {
		m += " (" + e.Detail + ")"
	}
	return m + " [SQLSTATE " + e.Code + "]"
}

// rejectError is the reject function's error: it fails the write, not retried.
type rejectError struct{ err error }

func (e *rejectError) Error() string { return e.err.Error() }

// try runs fn in a transaction and, before committing it, hands the rows PostgreSQL
// refused to the reject function.
func (p *PostgresSink) try(ctx context.Context, fn func(tx pgx.Tx) ([]rejected, error)) error {
	p.mu.Lock()
	err := p.describe(ctx)
	p.mu.Unlock()
	if err != nil {
		return err
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return err
	}
	rej, err := fn(tx)
	if err == nil && len(rej) > 0 {
		rows := make([]RejectedRow, len(rej))
		for i, r := range rej {
			rows[i] = RejectedRow{Split: r.c.split, Body: r.c.body, Cause: &sql.Error{Code: r.err.Code, Pos: -1,
				Message: fmt.Sprintf("sink %s: a row for PostgreSQL table %s was refused: %s", p.spec.Stream, p.opts.Target, pgMessage(r.err))}}
		}
		if p.reject == nil {
			err = &rejectError{rows[0].Cause}
		} else {
			p.rejectMu.Lock()
			rerr := p.reject(rows)
			p.rejectMu.Unlock()
			if rerr != nil {
				err = &rejectError{rerr}
			}
		}
	}
	if err != nil {
		tx.Rollback(context.Background())
		return err
	}
	return tx.Commit(ctx)
}

// rowRefused reports whether err is PostgreSQL refusing the rows' values: a data
// exception (class 22) or an integrity constraint (class 23).
func rowRefused(err error) (*pgconn.PgError, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23")) {
		return pe, true
	}
	return nil, false
}

// apply writes changes in tx: deletes, then upserts (an updating query: one change per
// key), or a COPY (append-only). When PostgreSQL refuses the statement's rows, each row is
// tried alone, in a savepoint, and those refused alone are returned.
func (p *PostgresSink) apply(ctx context.Context, tx pgx.Tx, changes []pgChange) ([]rejected, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	var dels, ups []pgChange
	var rej []rejected
	for _, c := range changes {
		if c.castErr != nil {
			rej = append(rej, rejected{c: c, err: c.castErr})
			continue
		}
		if c.del {
			dels = append(dels, c)
		} else {
			ups = append(ups, c)
		}
	}
	for _, part := range []struct {
		rows []pgChange
		del  bool
	}{{dels, true}, {ups, false}} {
		if len(part.rows) == 0 {
			continue
		}
		err := p.savepoint(ctx, tx, func(tx pgx.Tx) error { return p.statement(ctx, tx, part.rows, part.del) })
		if err == nil {
			continue
		}
		if _, ok := rowRefused(err); !ok {
			return nil, err
		}
		for _, c := range part.rows {
			err := p.savepoint(ctx, tx, func(tx pgx.Tx) error { return p.statement(ctx, tx, []pgChange{c}, part.del) })
			if err == nil {
				continue
			}
			pe, ok := rowRefused(err)
			if !ok {
				return nil, err
			}
			rej = append(rej, rejected{c: c, err: pe})
		}
	}
	return rej, nil
}

func (p *PostgresSink) savepoint(ctx context.Context, tx pgx.Tx, fn func(pgx.Tx) error) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(sp); err != nil {
		sp.Rollback(context.Background())
		return err
	}
	return sp.Commit(ctx)
}

// statement writes rows with one statement: DELETE by key, INSERT ... ON CONFLICT, or
// COPY for the rows of an append-only query.
func (p *PostgresSink) statement(ctx context.Context, tx pgx.Tx, rows []pgChange, del bool) error {
	if del {
		params := make([]any, len(p.keyPos))
		for i, kp := range p.keyPos {
			params[i] = p.texts(rows, p.cols[kp])
		}
		_, err := tx.Exec(ctx, p.deleteSQL, params...)
		return err
	}
	if p.change < 0 && len(rows) > 1 {
		return p.copy(ctx, tx, rows)
	}
	q := p.upsertSQL
	if p.change < 0 {
		q = p.insertSQL
	}
	params := make([]any, len(p.cols))
	for i, ci := range p.cols {
		params[i] = p.texts(rows, ci)
	}
	_, err := tx.Exec(ctx, q, params...)
	return err
}

// texts is column col of rows as a text array (NULL for NULL).
func (p *PostgresSink) texts(rows []pgChange, col int) []pgtype.Text {
	out := make([]pgtype.Text, len(rows))
	var buf []byte
	for i, r := range rows {
		v := r.row[col]
		if v.IsNull() {
			continue
		}
		buf = sql.AppendText(buf[:0], v)
		out[i] = pgtype.Text{String: string(buf), Valid: true}
	}
	return out
}

// copy inserts rows with COPY ... FROM STDIN in PostgreSQL's text format.
func (p *PostgresSink) copy(ctx context.Context, tx pgx.Tx, rows []pgChange) error {
	var b bytes.Buffer
	var txt []byte
	for _, r := range rows {
		for i, ci := range p.cols {
			if i > 0 {
				b.WriteByte('\t')
			}
			v := r.row[ci]
			if v.IsNull() {
				b.WriteString(`\N`)
				continue
			}
			txt = sql.AppendText(txt[:0], v)
			for _, c := range txt {
				switch c {
				case '\\':
					b.WriteString(`\\`)
				case '\n':
					b.WriteString(`\n`)
				case '\r':
					b.WriteString(`\r`)
				case '\t':
					b.WriteString(`\t`)
				default:
					b.WriteByte(c)
				}
			}
		}
		b.WriteByte('\n')
	}
	quoted := make([]string, len(p.copyCols))
	for i, c := range p.copyCols {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	stmt := "COPY " + pgx.Identifier(p.opts.Table).Sanitize() + " (" + strings.Join(quoted, ", ") + ") FROM STDIN"
	_, err := tx.Conn().PgConn().CopyFrom(ctx, &b, stmt)
	return err
}

// Flush implements Sink: every Write is committed when it returns.
func (p *PostgresSink) Flush(context.Context) error { return nil }

// Close closes the pool.
func (p *PostgresSink) Close() error {
	p.pool.Close()
	return nil
}
