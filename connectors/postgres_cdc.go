package connectors

// The postgres-cdc connector: a table of a PostgreSQL database read as its rows (a
// snapshot) and then their changes, through logical replication with the pgoutput plugin
// (docs/sql.md, "PostgreSQL change data capture"). It is declared with CREATE TABLE ...
// PRIMARY KEY ... WITH (connector = 'postgres-cdc', url = '...', table = '...', slot = '...',
// publication = '...').
//
// Its one split's rows are a retract changelog keyed by the primary key: an insert is the
// row, a delete the old row with the change column "delete", an update the old row's delete
// followed by the new row (a change of the primary key is so a deletion of the old key and
// an insertion of the new). The table needs REPLICA IDENTITY FULL for the old rows. A
// TRUNCATE of the table is, with on_truncate = 'delete', one row of NULLs whose change
// column is sql.OpTruncate, which the table's latest versions kept above the source (the
// planner's truncatingScan) turn into the deletes of the rows they hold.
//
// Offsets are WAL positions (LSNs). The snapshot is read in a REPEATABLE READ transaction
// on the snapshot the replication slot exported when it was created, and handed over as
// one batch whose rows all have the slot's consistent point as offset; each transaction
// after it is one batch whose rows have the transaction's end LSN as offset. A checkpoint
// (docs/checkpoints.md) therefore never falls inside the snapshot or a transaction, and the
// split's checkpointed position (the last offset + 1) is where replication starts again:
// PostgreSQL sends again every transaction that commits at or after it. The slot's
// confirmed position moves (standby status updates) only to what a committed checkpoint
// covers (Committed), so the server keeps every change a restarted job reads again.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"rsql/connectors/options"
	"rsql/sql"
)

// SQLSTATEs of the connector's errors that package sql has no name for.
const (
	codeNotInState      = "55000" // object not in prerequisite state: wal_level, replica identity
	codeUndefinedObject = "42704" // a slot or publication missing
	codePrivilege       = "42501"
	codeConnect         = "08001"
)

// CDCStatusInterval is how often the reader sends a standby status update to the server
// (well within PostgreSQL's default wal_sender_timeout of 60s).
var CDCStatusInterval = 5 * time.Second

// PostgresCDCOptions are a postgres-cdc table's parsed WITH options.
type PostgresCDCOptions struct {
	URL         string
	Table       []string // [schema, name] (the schema defaults to public)
	Target      string   // schema.name as relation messages name it
	Slot        string
	Publication string
	CreateSlot  bool
	// TruncateDeletes: a TRUNCATE of the table deletes every row (on_truncate = 'delete',
	// the default); otherwise it stops the job.
	TruncateDeletes bool
}

// ParsePostgresCDCOptions parses the options of the postgres-cdc table named table (the
// rsql name: the default of table, and of slot and publication as rsql_<name>).
func ParsePostgresCDCOptions(table string, raw map[string]string) (PostgresCDCOptions, error) {
	o := PostgresCDCOptions{URL: strings.TrimSpace(raw["url"])}
	if o.URL == "" {
		return o, &OptionError{Reason: "the postgres-cdc connector needs a url option: WITH (connector = 'postgres-cdc', url = 'postgres://user@host:5432/db', table = 'public.orders')"}
	}
	if _, err := pgconn.ParseConfig(o.URL); err != nil {
		return o, &OptionError{Option: "url", Value: redactURL(o.URL), Reason: "not a PostgreSQL connection string: " + redactErr(err, o.URL)}
	}
	name, given := raw["table"]
	if !given {
		name = strings.ToLower(table)
	}
	parts, err := parseQualifiedName(name)
	if err != nil {
		return o, &OptionError{Option: "table", Value: name, Reason: err.Error()}
	}
	if len(parts) == 1 {
		parts = []string{"public", parts[0]}
	}
	o.Table, o.Target = parts, parts[0]+"."+parts[1]
	ident := func(key, def string) (string, error) {
		v, ok := raw[key]
		if !ok {
			v = def
		}
		v = strings.TrimSpace(v)
		if v == "" || len(v) > 63 {
			return "", &OptionError{Option: key, Value: v, Reason: "want a name of 1 to 63 lower-case letters, digits and _"}
		}
		for _, c := range v {
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				return "", &OptionError{Option: key, Value: v, Reason: "want a name of 1 to 63 lower-case letters, digits and _"}
			}
		}
		return v, nil
	}
	def := "rsql_" + strings.ToLower(table)
	if o.Slot, err = ident("slot", def); err != nil {
		return o, err
	}
	if o.Publication, err = ident("publication", def); err != nil {
		return o, err
	}
	if v, ok := raw["create_slot"]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return o, &OptionError{Option: "create_slot", Value: v, Reason: "want true or false"}
		}
		o.CreateSlot = b
	}
	if o.TruncateDeletes, err = options.TruncateDeletes(raw); err != nil {
		return o, err
	}
	if f := raw["format"]; f != "" && !strings.EqualFold(f, "json") {
		return o, &OptionError{Option: "format", Value: f, Reason: "a postgres-cdc table reads rows, not records: leave format out"}
	}
	return o, nil
}

var postgresCDCKind = Kind{
	Kind: options.Builtin("postgres-cdc"),
	OpenSource: func(_ context.Context, _ Deps, s Spec) (Source, error) {
		return OpenPostgresCDCSource(s)
	},
	CheckDeclared: func(ctx context.Context, _ Deps, s Spec) error {
		return CheckPostgresCDCTable(ctx, s)
	},
}

// DropPostgresCDCSlot drops the replication slot of the postgres-cdc table declared as
// table with options raw, when rsql created it (create_slot = true), for a job reading it
// that has ended for good: the slot would otherwise hold the server's WAL back for ever. A
// slot still active (the job's walsender not gone yet) is waited for until ctx ends; a
// slot made outside rsql is left alone. It reports whether it dropped one.
func DropPostgresCDCSlot(ctx context.Context, table string, raw map[string]string) (bool, error) {
	o, err := ParsePostgresCDCOptions(table, raw)
	if err != nil || !o.CreateSlot {
		return false, err
	}
	conn, err := cdcConnect(ctx, o.URL, false)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	for {
		rows, err := cdcQuery(ctx, conn, `SELECT active::text, CASE WHEN NOT active THEN pg_drop_replication_slot(slot_name)::text END
FROM pg_replication_slots WHERE slot_name = $1`, o.Slot)
		if err != nil {
			return false, fmt.Errorf("postgres-cdc %s: dropping replication slot %s: %s", o.Target, o.Slot, redactErr(err, o.URL))
		}
		if len(rows) == 0 {
			return false, nil
		}
		if rows[0][0] != nil && *rows[0][0] == "false" {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("postgres-cdc %s: replication slot %s is still in use", o.Target, o.Slot)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// cdcConfig is the connection configuration of the table's database: the session settings
// values are read with (UTC, ISO dates, shortest float text), and with replication set,
// a replication connection.
func cdcConfig(url string, replication bool) (*pgconn.Config, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, &OptionError{Option: "url", Value: redactURL(url), Reason: redactErr(err, url)}
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > 10*time.Second {
		cfg.ConnectTimeout = 10 * time.Second
	}
	rp := cfg.RuntimeParams
	rp["timezone"] = "UTC"
	rp["datestyle"] = "ISO, MDY"
	rp["intervalstyle"] = "postgres"
	rp["extra_float_digits"] = "1"
	if rp["application_name"] == "" {
		rp["application_name"] = "rsql cdc"
	}
	if replication {
		rp["replication"] = "database"
	}
	return cfg, nil
}

// cdcConnect opens a connection; failing to reach the server is ErrUnavailable.
func cdcConnect(ctx context.Context, url string, replication bool) (*pgconn.PgConn, error) {
	cfg, err := cdcConfig(url, replication)
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		err = sql.Errorf(codeConnect, "postgres-cdc: cannot connect to %s: %s", redactURL(url), redactErr(err, url))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && !retryablePG(err) {
			return nil, err
		}
		return nil, Unavailable(err)
	}
	return conn, nil
}

// query runs a query with text parameters and returns its rows as text (nil for NULL).
func cdcQuery(ctx context.Context, conn *pgconn.PgConn, q string, args ...string) ([][]*string, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(a)
	}
	res := conn.ExecParams(ctx, q, params, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	out := make([][]*string, len(res.Rows))
	for i, r := range res.Rows {
		out[i] = make([]*string, len(r))
		for j, v := range r {
			if v != nil {
				s := string(v)
				out[i][j] = &s
			}
		}
	}
	return out, nil
}

// CheckPostgresCDCTable checks a postgres-cdc table's declaration against its database
// when it is declared (docs/sql.md, "PostgreSQL change data capture"): wal_level logical,
// the replication privilege, the table with the declared columns (types that convert) and
// primary key, REPLICA IDENTITY FULL, the publication (created, or the table added to it,
// with create_slot) and the slot (its creation is left to the job, which needs its
// snapshot). Errors are *sql.Error with their SQLSTATE.
func CheckPostgresCDCTable(ctx context.Context, s Spec) error {
	o, err := ParsePostgresCDCOptions(s.Stream, s.Options.Raw)
	if err != nil {
		return sql.Errorf(sql.CodeInvalidValue, "table %s: %v", s.Stream, err)
	}
	conn, err := cdcConnect(ctx, o.URL, false)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	fail := func(code, format string, args ...any) error {
		return sql.Errorf(code, "table %s (postgres-cdc %s): %s", s.Stream, o.Target, fmt.Sprintf(format, args...))
	}
	dbErr := func(err error) error {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return fail(pe.Code, "%s", pe.Message)
		}
		return fail(codeConnect, "%s", redactErr(err, o.URL))
	}
	rows, err := cdcQuery(ctx, conn, `SELECT current_setting('wal_level'), (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)::text`)
	if err != nil {
		return dbErr(err)
	}
	if wl := *rows[0][0]; wl != "logical" {
		return fail(codeNotInState, "the database's wal_level is %s; change data capture needs wal_level = logical: run ALTER SYSTEM SET wal_level = logical (or set it in postgresql.conf) and restart PostgreSQL", wl)
	}
	if rows[0][1] == nil || *rows[0][1] != "true" {
		return fail(codePrivilege, "the user of the url may not replicate: ALTER ROLE <user> REPLICATION")
	}
	qname := pgx.Identifier(o.Table).Sanitize()
	rows, err = cdcQuery(ctx, conn, `SELECT c.oid::text, c.relreplident::text, c.relkind::text FROM pg_class c WHERE c.oid = to_regclass($1)`, qname)
	if err != nil {
		return dbErr(err)
	}
	if len(rows) == 0 {
		return fail(sql.CodeUnknownTable, "PostgreSQL has no table %s", qname)
	}
	oid, ident, relkind := *rows[0][0], *rows[0][1], *rows[0][2]
	if relkind != "r" && relkind != "p" {
		return fail(sql.CodeWrongObjectType, "%s is not a table (relkind %s)", qname, relkind)
	}
	cols, err := cdcQuery(ctx, conn, `SELECT a.attname::text, t.typname::text, format_type(a.atttypid, a.atttypmod), (SELECT a.attnum = ANY(i.indkey) FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary)::text
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return dbErr(err)
	}
	d := newCDCDecoder(o.Target, s.Schema)
	seen := make([]bool, len(s.Schema))
	var pgKey, extra []string
	for _, c := range cols {
		name, typname, typ := *c[0], *c[1], *c[2]
		if c[3] != nil && *c[3] == "true" {
			pgKey = append(pgKey, name)
		}
		j := d.column(name)
		if j < 0 {
			extra = append(extra, name)
			continue
		}
		seen[j] = true
		if !cdcTypeFits(s.Schema[j].Type, typname) {
			return fail(sql.CodeTypeMismatch, "column %s is declared %s but is %s in PostgreSQL, which does not convert to it exactly (VARCHAR takes any type)", s.Schema[j].Name, s.Schema[j].Type, typ)
		}
	}
	for j, c := range s.Schema {
		if c.Name != sql.ChangeColumn && !seen[j] {
			return fail(sql.CodeUnknownColumn, "PostgreSQL table %s has no column %s", qname, c.Name)
		}
	}
	if len(extra) > 0 {
		return fail(sql.CodeUnknownColumn, "PostgreSQL table %s has columns the declaration lacks: %s (declare every column of the table)", qname, strings.Join(extra, ", "))
	}
	if len(pgKey) == 0 {
		return fail(sql.CodeInvalidColumnReference, "PostgreSQL table %s has no primary key: a changelog needs one (ALTER TABLE %s ADD PRIMARY KEY (...))", qname, qname)
	}
	var declKey []string
	for _, k := range s.Key {
		declKey = append(declKey, s.Schema[k].Name)
	}
	if !sameNames(pgKey, declKey) {
		return fail(sql.CodeInvalidColumnReference, "the declared PRIMARY KEY (%s) is not the primary key of PostgreSQL table %s (%s)", strings.Join(declKey, ", "), qname, strings.Join(pgKey, ", "))
	}
	if ident != "f" {
		return fail(codeNotInState, "PostgreSQL table %s needs REPLICA IDENTITY FULL, so that updates and deletes carry the old row: ALTER TABLE %s REPLICA IDENTITY FULL", qname, qname)
	}
	pub, err := cdcQuery(ctx, conn, `SELECT (pubinsert AND pubupdate AND pubdelete)::text, EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = p.pubname AND t.schemaname = $2 AND t.tablename = $3)::text FROM pg_publication p WHERE pubname = $1`, o.Publication, o.Table[0], o.Table[1])
	if err != nil {
		return dbErr(err)
	}
	switch {
	case len(pub) == 0 && o.CreateSlot:
		if _, err := cdcQuery(ctx, conn, "CREATE PUBLICATION "+pgx.Identifier{o.Publication}.Sanitize()+" FOR TABLE "+qname); err != nil {
			return dbErr(err)
		}
	case len(pub) == 0:
		return fail(codeUndefinedObject, "publication %s does not exist: run CREATE PUBLICATION %s FOR TABLE %s (or declare the table with create_slot = true)", o.Publication, o.Publication, qname)
	case *pub[0][0] != "true":
		return fail(codeNotInState, "publication %s does not publish inserts, updates and deletes: ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')", o.Publication, o.Publication)
	case *pub[0][1] != "true" && o.CreateSlot:
		if _, err := cdcQuery(ctx, conn, "ALTER PUBLICATION "+pgx.Identifier{o.Publication}.Sanitize()+" ADD TABLE "+qname); err != nil {
			return dbErr(err)
		}
	case *pub[0][1] != "true":
		return fail(codeUndefinedObject, "publication %s does not publish %s: run ALTER PUBLICATION %s ADD TABLE %s", o.Publication, qname, o.Publication, qname)
	}
	slot, err := cdcQuery(ctx, conn, `SELECT plugin::text, database::text = current_database() FROM pg_replication_slots WHERE slot_name = $1`, o.Slot)
	if err != nil {
		return dbErr(err)
	}
	switch {
	case len(slot) == 0 && !o.CreateSlot:
		return fail(codeUndefinedObject, "replication slot %s does not exist: declare the table with create_slot = true (rsql creates it when the job starts and reads the table's snapshot with it), or run SELECT pg_create_logical_replication_slot('%s', 'pgoutput') to read only the changes from now on", o.Slot, o.Slot)
	case len(slot) > 0 && (slot[0][0] == nil || *slot[0][0] != "pgoutput"):
		return fail(sql.CodeWrongObjectType, "replication slot %s is not a logical slot of the pgoutput plugin", o.Slot)
	case len(slot) > 0 && (slot[0][1] == nil || *slot[0][1] != "true"):
		return fail(sql.CodeWrongObjectType, "replication slot %s belongs to another database", o.Slot)
	}
	return nil
}

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if x == y || strings.EqualFold(x, y) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// PostgresCDCSource reads a postgres-cdc table: one split, "0".
type PostgresCDCSource struct {
	spec Spec
	opts PostgresCDCOptions

	mu     sync.Mutex
	reader *cdcReader // the open reader, told of committed checkpoints
}

var (
	_ RowSource          = (*PostgresCDCSource)(nil)
	_ CheckpointListener = (*PostgresCDCSource)(nil)
)

// CheckpointListener is a Source that is told when a checkpoint that covers a position of
// one of its splits has committed (the job's checkpoint, docs/checkpoints.md): offset is the
// split's checkpointed position, the first offset not yet processed. A source whose
// upstream keeps data until it is acknowledged (a replication slot) acknowledges it then.
type CheckpointListener interface {
	Committed(split string, offset int64)
}

// OpenPostgresCDCSource makes the source of a postgres-cdc table; it connects when a split
// is opened.
func OpenPostgresCDCSource(s Spec) (*PostgresCDCSource, error) {
	o, err := ParsePostgresCDCOptions(s.Stream, s.Options.Raw)
	if err != nil {
		return nil, err
	}
	if s.Schema.Index(sql.ChangeColumn) != len(s.Schema)-1 {
		return nil, fmt.Errorf("postgres-cdc %s: the table's rows have no change column", s.Stream)
	}
	return &PostgresCDCSource{spec: s, opts: o}, nil
}

// Splits: the table is one split.
func (s *PostgresCDCSource) Splits(context.Context) ([]string, error) { return []string{"0"}, nil }

// Bounded: changes never end.
func (s *PostgresCDCSource) Bounded() bool { return false }

// Close closes the open reader.
func (s *PostgresCDCSource) Close() error {
	s.mu.Lock()
	r := s.reader
	s.mu.Unlock()
	if r != nil {
		return r.Close()
	}
	return nil
}

// Committed implements CheckpointListener: the slot may confirm what the checkpoint covers.
func (s *PostgresCDCSource) Committed(split string, offset int64) {
	s.mu.Lock()
	r := s.reader
	s.mu.Unlock()
	if r != nil && split == "0" && offset > 0 {
		r.committed(pglogrepl.LSN(offset - 1))
	}
}

// Open reads the split as messages: each row encoded as a table's JSON record (its change
// column "__op"), the records a TABLE over a topic reads.
func (s *PostgresCDCSource) Open(ctx context.Context, split string, offset int64) (SplitReader, error) {
	rr, err := s.OpenRows(ctx, split, offset)
	if err != nil {
		return nil, err
	}
	return &cdcMessageReader{rows: rr.(*cdcReader), format: newJSONFormat(s.spec.Schema)}, nil
}

// OpenRows connects, and on a fresh start (offset 0) creates the slot and reads the
// snapshot; then it starts replication after the offset.
func (s *PostgresCDCSource) OpenRows(ctx context.Context, split string, offset int64) (RowReader, error) {
	if split != "0" {
		return nil, fmt.Errorf("postgres-cdc %s: no split %q (the table is split 0)", s.spec.Stream, split)
	}
	r, err := openCDCReader(ctx, s.spec, s.opts, offset)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.reader = r
	s.mu.Unlock()
	return r, nil
}

// cdcTx is the rows of one transaction (or of the snapshot) with their offset.
type cdcTx struct {
	rows []sql.Row
	off  int64
}

// cdcReader reads the split: the snapshot, then a goroutine (receive) that reads the
// replication stream, hands each transaction with rows of the table to ReadRows and
// keeps the server informed of the position it may forget.
type cdcReader struct {
	spec    Spec
	opts    PostgresCDCOptions
	columns []int
	conn    *pgconn.PgConn
	oid     uint32 // the table's

	snapshot *cdcTx
	txs      chan cdcTx
	errc     chan error
	cancel   context.CancelFunc
	done     chan struct{}
	once     sync.Once

	// confirm is the position a committed checkpoint covers (the last transaction's end),
	// sent as the slot's flush position.
	confirm atomic.Uint64
}

// openCDCReader connects for replication and positions the reader (see OpenRows).
func openCDCReader(ctx context.Context, spec Spec, o PostgresCDCOptions, offset int64) (*cdcReader, error) {
	conn, err := cdcConnect(ctx, o.URL, true)
	if err != nil {
		return nil, err
	}
	r := &cdcReader{spec: spec, opts: o, conn: conn, columns: spec.Columns, txs: make(chan cdcTx, 4), errc: make(chan error, 1), done: make(chan struct{})}
	fail := func(err error) (*cdcReader, error) {
		conn.Close(context.Background())
		return nil, err
	}
	// A replication connection takes simple queries only: the slot is looked at on one
	// of its own.
	qconn, err := cdcConnect(ctx, o.URL, false)
	if err != nil {
		return fail(err)
	}
	slot, err := cdcQuery(ctx, qconn, `SELECT active::text, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, o.Slot)
	if err != nil {
		qconn.Close(context.Background())
		return fail(r.wrap("reading the replication slot", err))
	}
	// The table is followed by its oid: a relation message of it under another name is
	// a rename.
	oid, err := cdcQuery(ctx, qconn, `SELECT to_regclass($1)::oid::text`, pgx.Identifier(o.Table).Sanitize())
	qconn.Close(context.Background())
	if err != nil {
		return fail(r.wrap("looking the table up", err))
	}
	if len(oid) == 0 || oid[0][0] == nil {
		return fail(sql.Errorf(sql.CodeUnknownTable, "postgres-cdc %s: PostgreSQL has no table %s (dropped or renamed?)", o.Target, pgx.Identifier(o.Table).Sanitize()))
	}
	if n, err := strconv.ParseUint(*oid[0][0], 10, 32); err == nil {
		r.oid = uint32(n)
	}
	var start pglogrepl.LSN
	if offset <= 0 {
		if !o.CreateSlot {
			if len(slot) == 0 {
				return fail(sql.Errorf(codeUndefinedObject, "postgres-cdc %s: replication slot %s does not exist: declare the table with create_slot = true, or run SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", o.Target, o.Slot, o.Slot))
			}
			// A slot made outside rsql: its snapshot is gone, the job reads the changes
			// from its position on (docs/sql.md).
			if slot[0][1] != nil {
				start, _ = pglogrepl.ParseLSN(*slot[0][1])
			}
		} else {
			if len(slot) > 0 {
				// A slot of an earlier start of this table's job that committed no checkpoint:
				// made again, so that its snapshot can be read.
				if slot[0][0] != nil && *slot[0][0] == "true" {
					return fail(sql.Errorf(sql.CodeInUse, "postgres-cdc %s: replication slot %s is in use by another reader (a table's slot serves one job at a time)", o.Target, o.Slot))
				}
				if err := pglogrepl.DropReplicationSlot(ctx, conn, o.Slot, pglogrepl.DropReplicationSlotOptions{}); err != nil {
					return fail(r.wrap("dropping the replication slot to create it with a snapshot", err))
				}
			}
			res, err := pglogrepl.CreateReplicationSlot(ctx, conn, o.Slot, "pgoutput",
				pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
			if err != nil {
				return fail(r.wrap("creating replication slot "+o.Slot, err))
			}
			if start, err = pglogrepl.ParseLSN(res.ConsistentPoint); err != nil {
				return fail(fmt.Errorf("postgres-cdc %s: the slot's consistent point %q: %v", o.Target, res.ConsistentPoint, err))
			}
			rows, err := r.readSnapshot(ctx, res.SnapshotName)
			if err != nil {
				return fail(err)
			}
			r.snapshot = &cdcTx{rows: rows, off: int64(start)}
		}
	} else {
		if len(slot) == 0 {
			return fail(sql.Errorf(codeUndefinedObject, "postgres-cdc %s: replication slot %s no longer exists: the changes after the job's last checkpoint (LSN %s) are lost to it; start the job afresh", o.Target, o.Slot, pglogrepl.LSN(offset-1)))
		}
		if slot[0][0] != nil && *slot[0][0] == "true" {
			// The previous reader's connection may not have ended on the server yet.
			return fail(Unavailable(sql.Errorf(sql.CodeInUse, "postgres-cdc %s: replication slot %s is in use by another reader", o.Target, o.Slot)))
		}
		start = pglogrepl.LSN(offset - 1)
	}
	r.confirm.Store(uint64(start))
	err = pglogrepl.StartReplication(ctx, conn, o.Slot, start, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + o.Publication + "'"}})
	if err != nil {
		return fail(r.wrap("starting replication from slot "+o.Slot, err))
	}
	rctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.receive(rctx)
	return r, nil
}

// wrap names what failed; a connection failure is ErrUnavailable.
func (r *cdcReader) wrap(what string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		e := sql.Errorf(pe.Code, "postgres-cdc %s: %s: %s", r.opts.Target, what, pe.Message)
		if retryablePG(err) {
			return Unavailable(e)
		}
		return e
	}
	return Unavailable(fmt.Errorf("postgres-cdc %s: %s: %s", r.opts.Target, what, redactErr(err, r.opts.URL)))
}

// readSnapshot reads the table's rows on the slot's exported snapshot.
func (r *cdcReader) readSnapshot(ctx context.Context, snapshot string) ([]sql.Row, error) {
	conn, err := cdcConnect(ctx, r.opts.URL, false)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	if err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '"+strings.ReplaceAll(snapshot, "'", "''")+"'").Close(); err != nil {
		return nil, r.wrap("reading the snapshot", err)
	}
	schema := r.spec.Schema
	op := len(schema) - 1
	sel := make([]string, op)
	for i := 0; i < op; i++ {
		sel[i] = "t." + pgx.Identifier{schema[i].Name}.Sanitize() + "::text"
	}
	// The declared names match the table's exactly or else ignoring case: a name that
	// is not exact is found by the catalog's.
	names, err := cdcQuery(ctx, conn, `SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, pgx.Identifier(r.opts.Table).Sanitize())
	if err != nil {
		return nil, r.wrap("reading the table's columns", err)
	}
	d := newCDCDecoder(r.opts.Target, schema)
	for _, n := range names {
		if j := d.column(*n[0]); j >= 0 {
			sel[j] = "t." + pgx.Identifier{*n[0]}.Sanitize() + "::text"
		}
	}
	res := conn.ExecParams(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM "+pgx.Identifier(r.opts.Table).Sanitize()+" t", nil, nil, nil, nil)
	var rows []sql.Row
	for res.NextRow() {
		vals := res.Values()
		row := make(sql.Row, len(schema))
		for i, b := range vals {
			if b == nil {
				continue
			}
			v, verr := decodePGText(string(b), schema[i].Type)
			if verr != nil {
				res.Close()
				return nil, sql.Errorf(verr.Code, "postgres-cdc %s: column %s of a row of the snapshot: %s does not convert to %s: %s", r.opts.Target, schema[i].Name, quote(string(b)), schema[i].Type, verr.Message)
			}
			row[i] = v
		}
		rows = append(rows, row)
	}
	if _, err := res.Close(); err != nil {
		return nil, r.wrap("reading the snapshot", err)
	}
	conn.Exec(ctx, "COMMIT").Close()
	return rows, nil
}

// committed records that a checkpoint covering everything up to end committed.
func (r *cdcReader) committed(end pglogrepl.LSN) {
	for {
		cur := r.confirm.Load()
		if uint64(end) <= cur || r.confirm.CompareAndSwap(cur, uint64(end)) {
			return
		}
	}
}

// receive reads the replication stream until ctx ends or it fails: transactions with rows
// of the table go to txs, the error to errc. It sends a standby status update every
// CDCStatusInterval and when the server asks, with the flush position a committed
// checkpoint covers, or, while every transaction handed over is covered and none is open,
// the position the server has sent up to (nothing of the table lies before it).
func (r *cdcReader) receive(ctx context.Context) {
	defer close(r.done)
	d := newCDCDecoder(r.opts.Target, r.spec.Schema)
	d.oid, d.truncates = r.oid, r.opts.TruncateDeletes
	var handed, walEnd pglogrepl.LSN // the last transaction handed over; the server's position
	next := time.Now().Add(CDCStatusInterval)
	status := func() error {
		pos := pglogrepl.LSN(r.confirm.Load())
		if pos >= handed && !d.inTx && walEnd > pos {
			pos = walEnd
		}
		next = time.Now().Add(CDCStatusInterval)
		return pglogrepl.SendStandbyStatusUpdate(ctx, r.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos})
	}
	failed := func(err error) {
		if ctx.Err() != nil {
			return
		}
		select {
		case r.errc <- err:
		default:
		}
	}
	for {
		if time.Now().After(next) {
			if err := status(); err != nil {
				failed(r.wrap("sending the standby status", err))
				return
			}
		}
		rctx, cancel := context.WithDeadline(ctx, next)
		msg, err := r.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if pgconn.Timeout(err) {
				continue
			}
			failed(r.wrap("reading the replication stream", err))
			return
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					failed(fmt.Errorf("postgres-cdc %s: %v", r.opts.Target, err))
					return
				}
				if ka.ServerWALEnd > walEnd {
					walEnd = ka.ServerWALEnd
				}
				if ka.ReplyRequested {
					next = time.Now()
				}
			case pglogrepl.XLogDataByteID:
				x, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					failed(fmt.Errorf("postgres-cdc %s: %v", r.opts.Target, err))
					return
				}
				ev, err := d.decode(x.WALData, x.WALStart)
				if err != nil {
					failed(err)
					return
				}
				if !ev.commit {
					continue
				}
				if ev.end > walEnd {
					walEnd = ev.end
				}
				if len(d.rows) == 0 {
					continue
				}
				tx := cdcTx{rows: d.rows, off: int64(ev.end)}
				d.rows = nil
				handed = ev.end
				// Wait for the reader, keeping the server informed meanwhile.
				for sent := false; !sent; {
					t := time.NewTimer(time.Until(next))
					select {
					case r.txs <- tx:
						sent = true
					case <-t.C:
						if err := status(); err != nil {
							t.Stop()
							failed(r.wrap("sending the standby status", err))
							return
						}
					case <-ctx.Done():
						t.Stop()
						return
					}
					t.Stop()
				}
			}
		case *pgproto3.ErrorResponse:
			failed(r.wrap("replication", pgconn.ErrorResponseToPgError(msg)))
			return
		case *pgproto3.CopyDone:
			failed(Unavailable(fmt.Errorf("postgres-cdc %s: the server ended replication", r.opts.Target)))
			return
		}
	}
}

// ReadRows hands over the snapshot, then whole transactions: all of one transaction's rows
// in one call (however many), so that a checkpoint never divides one.
func (r *cdcReader) ReadRows(ctx context.Context, b *RowBatch, max int) error {
	if r.snapshot != nil {
		tx := *r.snapshot
		r.snapshot = nil
		r.append(b, tx)
		return nil
	}
	wait := time.NewTimer(100 * time.Millisecond)
	defer wait.Stop()
	select {
	case tx := <-r.txs:
		r.append(b, tx)
	case err := <-r.errc:
		return err
	case <-wait.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	for b.Len() < max {
		select {
		case tx := <-r.txs:
			r.append(b, tx)
		default:
			return nil
		}
	}
	return nil
}

func (r *cdcReader) append(b *RowBatch, tx cdcTx) {
	for _, row := range tx.rows {
		if r.columns == nil {
			b.Values = append(b.Values, row...)
		} else {
			for _, c := range r.columns {
				b.Values = append(b.Values, row[c])
			}
		}
		b.Offsets = append(b.Offsets, tx.off)
	}
}

// Close stops the receiver and closes the connection.
func (r *cdcReader) Close() error {
	r.once.Do(func() {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.conn.Close(ctx)
	})
	return nil
}

// cdcMessageReader reads the split as JSON records (PostgresCDCSource.Open).
type cdcMessageReader struct {
	rows   *cdcReader
	format *jsonFormat
	batch  RowBatch
}

func (m *cdcMessageReader) Read(ctx context.Context, buf []Message, max int) ([]Message, error) {
	m.rows.columns = nil
	m.batch.Width = len(m.rows.spec.Schema)
	m.batch.Values, m.batch.Offsets = m.batch.Values[:0], m.batch.Offsets[:0]
	err := m.rows.ReadRows(ctx, &m.batch, max)
	for i := 0; i < m.batch.Len(); i++ {
		body, eerr := m.format.Encode(nil, m.batch.Row(i))
		if eerr != nil {
			return buf, eerr
		}
		buf = append(buf, Message{Offset: m.batch.Offsets[i], Body: body, Split: "0"})
	}
	return buf, err
}

func (m *cdcMessageReader) Close() error { return m.rows.Close() }
