package connectors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"rsql/connectors/options"
	"rsql/sql"
)

// The postgres connector: a table of a PostgreSQL database that lookup joins read by
// primary key (docs/sql.md, "Lookup joins") and jobs write (postgres_sink.go). It is
// declared with CREATE TABLE ... PRIMARY KEY ... WITH (connector = 'postgres', url = '...',
// table = '...'); it is not a stream source.
//
// A lookup is one query whatever the number of keys: `WHERE k = ANY($1)` for one key
// column, a join with unnest($1, $2, ...) for several. Keys go as text arrays cast to the
// key columns' types in PostgreSQL, and every column comes back cast to text, so the
// conversion to the declared types is this package's (decodePGText) and does not depend on
// how pgx maps PostgreSQL types. The table's columns and their types are read from the
// catalog once (on the first lookup) and checked against the declared ones.

// PostgresOptionKeys are the WITH options the postgres connector reads.
var PostgresOptionKeys = options.PostgresOptionKeys

// PostgresOptions are a postgres table's parsed WITH options: URL, Table ([schema, name]
// or [name], searched on the search_path) and the common lookup options.
type PostgresOptions = LookupOptions

// ParsePostgresOptions parses the options of the postgres table named table (the rsql
// name: the default of the table option). Errors are *OptionError naming the option.
func ParsePostgresOptions(table string, raw map[string]string) (PostgresOptions, error) {
	lo, err := options.ParseLookupCommon(raw)
	if err != nil {
		return PostgresOptions{}, err
	}
	o := lo
	o.Connector, o.URL = "postgres", strings.TrimSpace(raw["url"])
	if o.URL == "" {
		return o, &OptionError{Reason: "the postgres connector needs a url option: WITH (connector = 'postgres', url = 'postgres://user@host:5432/db', table = 'users')"}
	}
	if _, err := pgxpool.ParseConfig(o.URL); err != nil {
		return o, &OptionError{Option: "url", Value: redactURL(o.URL), Reason: "not a PostgreSQL connection string: " + redactErr(err, o.URL)}
	}
	name, given := raw["table"]
	if !given {
		name = strings.ToLower(table)
		o.Table = []string{name}
	} else if o.Table, err = parseQualifiedName(name); err != nil {
		return o, &OptionError{Option: "table", Value: name, Reason: err.Error()}
	}
	o.Target = displayName(o.Table)
	return o, nil
}

// displayName renders a qualified name for messages and EXPLAIN: parts that are plain
// lower-case identifiers as they are, others double-quoted.
func displayName(parts []string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p
		for j := 0; j < len(p); j++ {
			c := p[j]
			if !(c == '_' || c >= 'a' && c <= 'z' || j > 0 && (c >= '0' && c <= '9' || c == '$')) {
				out[i] = pgx.Identifier{p}.Sanitize()
				break
			}
		}
		if p == "" {
			out[i] = `""`
		}
	}
	return strings.Join(out, ".")
}

// parseQualifiedName reads [schema.]name as PostgreSQL does: an unquoted part is folded to
// lower case and must be a plain identifier, a double-quoted one is taken as written ("" is
// a quote inside it).
func parseQualifiedName(s string) ([]string, error) {
	var parts []string
	i := 0
	s = strings.TrimSpace(s)
	for {
		var part string
		if i < len(s) && s[i] == '"' {
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(s) {
					return nil, errors.New("unterminated quoted name")
				}
				if s[j] == '"' {
					if j+1 < len(s) && s[j+1] == '"' {
						b.WriteByte('"')
						j += 2
						continue
					}
					j++
					break
				}
				b.WriteByte(s[j])
				j++
			}
			part, i = b.String(), j
			if part == "" {
				return nil, errors.New("an empty quoted name")
			}
		} else {
			j := i
			for j < len(s) && s[j] != '.' {
				c := s[j]
				if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > i && (c >= '0' && c <= '9' || c == '$')) {
					return nil, fmt.Errorf("want [schema.]table, each a name of letters, digits and _ (or double-quoted)")
				}
				j++
			}
			if j == i {
				return nil, fmt.Errorf("want [schema.]table, each a name of letters, digits and _ (or double-quoted)")
			}
			part, i = strings.ToLower(s[i:j]), j
		}
		parts = append(parts, part)
		if i == len(s) {
			break
		}
		if s[i] != '.' || len(parts) == 2 {
			return nil, fmt.Errorf("want [schema.]table: unexpected %q", s[i:])
		}
		i++
	}
	return parts, nil
}

// redactURL hides the password of a connection string: the one of a URL's user
// information (postgres://user:password@host), or a password=... pair.
func redactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		auth := rest
		if j := strings.IndexAny(rest, "/?"); j >= 0 {
			auth = rest[:j]
		}
		if at := strings.LastIndex(auth, "@"); at >= 0 {
			if c := strings.Index(auth[:at], ":"); c >= 0 {
				return s[:i+3] + auth[:c+1] + "xxxxx" + s[i+3+at:]
			}
		}
		return s
	}
	fields := strings.Fields(s)
	for i, f := range fields {
		if k, _, ok := strings.Cut(f, "="); ok && strings.TrimSpace(k) == "password" {
			fields[i] = "password=xxxxx"
			s = strings.Join(fields, " ")
		}
	}
	return s
}

func redactErr(err error, raw string) string {
	msg := err.Error()
	if r := redactURL(raw); r != raw {
		msg = strings.ReplaceAll(msg, raw, r)
	}
	return msg
}

var postgresKind = Kind{
	Kind: func() options.Kind {
		k := options.Builtin("postgres")
		k.ParseLookup = ParsePostgresOptions
		return k
	}(),
	OpenLookup: func(_ context.Context, _ Deps, s LookupSpec) (LookupTable, error) {
		return OpenPostgresLookup(s)
	},
	OpenSink: func(_ context.Context, _ Deps, s Spec) (Sink, error) {
		return OpenPostgresSink(s)
	},
}

// PostgresLookup is a LookupTable over a PostgreSQL table, through a small pgx pool. The
// pool connects on the first lookup, so opening does not need the database up.
type PostgresLookup struct {
	spec LookupSpec
	opts PostgresOptions
	pool *pgxpool.Pool

	// Set by describe, on the first lookup that reaches the database.
	described bool
	query     string
	pgCols    []string // the table's name of each of spec.Columns
}

// OpenPostgresLookup opens the table of spec (its options parsed with
// ParsePostgresOptions, or ParseLookup).
func OpenPostgresLookup(spec LookupSpec) (*PostgresLookup, error) {
	o := spec.Options
	if o.URL == "" || len(o.Table) == 0 {
		return nil, &OptionError{Reason: "the postgres connector needs a url option: WITH (connector = 'postgres', url = 'postgres://user@host:5432/db', table = 'users')"}
	}
	if len(spec.Key) == 0 {
		return nil, fmt.Errorf("lookup table %s: no key columns", spec.Table)
	}
	// One goroutine looks up at a time; a second connection lets a new one be made while
	// a broken one is being closed.
	cfg, err := poolConfig(o.URL, o.Timeout, "rsql lookup "+spec.Table)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("lookup table %s: %s", spec.Table, redactErr(err, o.URL))
	}
	return &PostgresLookup{spec: spec, opts: o, pool: pool}, nil
}

// poolConfig is the pool configuration of a PostgreSQL table's connections (lookups, the
// sink): two connections at most, the connect timeout, and the session settings rsql reads
// and writes values with (UTC, ISO dates, shortest float text).
func poolConfig(url string, timeout time.Duration, app string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &OptionError{Option: "url", Value: redactURL(url), Reason: redactErr(err, url)}
	}
	cfg.MaxConns = 2
	cfg.MinConns = 0
	cfg.ConnConfig.ConnectTimeout = timeout
	rp := cfg.ConnConfig.RuntimeParams
	rp["timezone"] = "UTC"
	rp["datestyle"] = "ISO, MDY"
	rp["extra_float_digits"] = "1"
	if rp["application_name"] == "" {
		rp["application_name"] = app
	}
	return cfg, nil
}

// Close closes the pool.
func (p *PostgresLookup) Close() error {
	p.pool.Close()
	return nil
}

// Target is the PostgreSQL table's quoted name.
func (p *PostgresLookup) Target() string { return p.opts.Target }

// errorf is a lookup error that retrying will not cure.
func (p *PostgresLookup) errorf(format string, args ...any) error {
	return &LookupError{Table: p.spec.Table, Err: fmt.Errorf(format, args...)}
}

// wrap classifies a database error.
func (p *PostgresLookup) wrap(ctx context.Context, err error) error {
	var le *LookupError
	if errors.As(err, &le) {
		return err
	}
	if ctx.Err() != nil {
		return &LookupError{Table: p.spec.Table, Retry: true, Err: fmt.Errorf("%s: %w", p.opts.Target, ctx.Err())}
	}
	return &LookupError{Table: p.spec.Table, Retry: retryablePG(err), Err: fmt.Errorf("%s: %s", p.opts.Target, redactErr(err, p.opts.URL))}
}

// retryablePG reports whether a failed query may succeed when tried again: the server
// could not be reached or went away (connection errors, class 08), is starting or
// shutting down (57P0x), ran out of resources (53), was cancelled or hit a timeout (57014),
// or a transaction conflict (40). An error the server gave for the statement itself
// (a missing table, a bad value) is not.
func retryablePG(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"), strings.HasPrefix(pe.Code, "57"),
			strings.HasPrefix(pe.Code, "40"), strings.HasPrefix(pe.Code, "58"):
			return true
		}
		return false
	}
	// Errors that did not come from the server are about reaching it: connecting failed,
	// the connection broke or timed out (pgx reports those in several forms: ConnectError,
	// net.Error, io.EOF, a closed connection). None of them says the query is wrong.
	return true
}

// pgColumn is one column of the PostgreSQL table as its catalog describes it.
type pgColumn struct {
	name, typ, category, typname string
}

// describe reads the table's columns, matches the declared ones to them (by name, exactly
// or else ignoring case), checks their types and builds the lookup query.
func (p *PostgresLookup) describe(ctx context.Context) error {
	rows, err := p.pool.Query(ctx, `SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), t.typcategory::text, t.typname::text
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, pgx.Identifier(p.opts.Table).Sanitize())
	if err != nil {
		return p.describeErr(ctx, err)
	}
	var cols []pgColumn
	for rows.Next() {
		var c pgColumn
		if err := rows.Scan(&c.name, &c.typ, &c.category, &c.typname); err != nil {
			rows.Close()
			return p.wrap(ctx, err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return p.describeErr(ctx, err)
	}
	if len(cols) == 0 {
		return p.errorf("PostgreSQL table %s has no columns", p.opts.Target)
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	matched := make([]pgColumn, len(p.spec.Columns))
	for i, dc := range p.spec.Columns {
		found := -1
		for j, c := range cols {
			if c.name == dc.Name {
				found = j
				break
			}
		}
		if found < 0 {
			for j, c := range cols {
				if strings.EqualFold(c.name, dc.Name) {
					if found >= 0 {
						return p.errorf("column %s matches both %q and %q of PostgreSQL table %s: name it exactly", dc.Name, cols[found].name, c.name, p.opts.Target)
					}
					found = j
				}
			}
		}
		if found < 0 {
			return p.errorf("PostgreSQL table %s has no column %s (its columns: %s)", p.opts.Target, dc.Name, strings.Join(names, ", "))
		}
		c := cols[found]
		if !pgTypeFits(dc.Type, c) {
			return p.errorf("column %s is declared %s but is %s in PostgreSQL table %s", dc.Name, dc.Type, c.typ, p.opts.Target)
		}
		matched[i] = c
	}
	p.pgCols = make([]string, len(matched))
	sel := make([]string, len(matched))
	for i, c := range matched {
		p.pgCols[i] = c.name
		sel[i] = "t." + pgx.Identifier{c.name}.Sanitize() + "::text"
	}
	var q strings.Builder
	q.WriteString("SELECT " + strings.Join(sel, ", ") + " FROM " + pgx.Identifier(p.opts.Table).Sanitize() + " t ")
	if len(p.spec.Key) == 1 {
		c := matched[p.spec.Key[0]]
		fmt.Fprintf(&q, "WHERE t.%s = ANY($1::text[]::%s[])", pgx.Identifier{c.name}.Sanitize(), c.typ)
	} else {
		params := make([]string, len(p.spec.Key))
		ks := make([]string, len(p.spec.Key))
		conds := make([]string, len(p.spec.Key))
		for i, k := range p.spec.Key {
			c := matched[k]
			params[i] = fmt.Sprintf("$%d::text[]", i+1)
			ks[i] = fmt.Sprintf("k%d", i)
			conds[i] = fmt.Sprintf("t.%s = k.k%d::%s", pgx.Identifier{c.name}.Sanitize(), i, c.typ)
		}
		fmt.Fprintf(&q, "JOIN unnest(%s) AS k(%s) ON %s", strings.Join(params, ", "), strings.Join(ks, ", "), strings.Join(conds, " AND "))
	}
	p.query = q.String()
	p.described = true
	return nil
}

func (p *PostgresLookup) describeErr(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") {
		return p.errorf("PostgreSQL has no table %s (table = %q): %s", p.opts.Target, strings.Join(p.opts.Table, "."), pe.Message)
	}
	return p.wrap(ctx, err)
}

// pgTypeFits reports whether a PostgreSQL column's values convert to the declared type:
// VARCHAR takes anything (every value has a text form), numbers take numeric columns,
// BOOLEAN boolean ones, TIMESTAMP date and timestamp columns, JSON json, jsonb and text.
func pgTypeFits(t sql.Type, c pgColumn) bool {
	switch t.Kind {
	case sql.KindVarchar:
		return true
	case sql.KindInt, sql.KindBigInt, sql.KindDouble, sql.KindDecimal:
		return c.category == "N"
	case sql.KindBool:
		return c.category == "B"
	case sql.KindTimestamp:
		return c.typname == "date" || c.typname == "timestamp" || c.typname == "timestamptz"
	case sql.KindJSON:
		return c.typname == "json" || c.typname == "jsonb" || c.category == "S"
	}
	return false
}

// Lookup implements LookupTable: one query for all keys. When the query fails because a
// key is not a value of its column's PostgreSQL type (a data exception, class 22: text
// that is not a uuid, a number out of the column's range), no row can have that key:
// the keys are then asked one query each and those the database refuses have no rows.
func (p *PostgresLookup) Lookup(ctx context.Context, keys []sql.Row) ([]sql.Row, error) {
	if !p.described {
		if err := p.describe(ctx); err != nil {
			return nil, err
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	out, err := p.lookup(ctx, keys, nil)
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, "22") {
		if err != nil {
			return nil, p.wrap(ctx, err)
		}
		return out, nil
	}
	out = out[:0]
	for _, k := range keys {
		var kerr error
		out, kerr = p.lookup(ctx, []sql.Row{k}, out)
		if kerr != nil {
			if errors.As(kerr, &pe) && strings.HasPrefix(pe.Code, "22") {
				continue
			}
			return nil, p.wrap(ctx, kerr)
		}
	}
	return out, nil
}

// lookup runs the query for keys and appends the rows to out.
func (p *PostgresLookup) lookup(ctx context.Context, keys []sql.Row, out []sql.Row) ([]sql.Row, error) {
	params := make([]any, len(p.spec.Key))
	var buf []byte
	for i := range p.spec.Key {
		texts := make([]string, len(keys))
		for j, k := range keys {
			buf = sql.AppendText(buf[:0], k[i])
			texts[j] = string(buf)
		}
		params[i] = texts
	}
	rows, err := p.pool.Query(ctx, p.query, params...)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != len(p.spec.Columns) {
			return out, p.errorf("the lookup query returned %d columns, want %d", len(raw), len(p.spec.Columns))
		}
		row := make(sql.Row, len(raw))
		for i, b := range raw {
			if b == nil {
				continue
			}
			col := p.spec.Columns[i]
			v, verr := decodePGText(string(b), col.Type)
			if verr != nil {
				v = sql.ErrorValue(verr.Code, fmt.Sprintf("lookup table %s: column %s (%s.%s): %s does not convert to %s: %s",
					p.spec.Table, col.Name, p.opts.Target, displayName(p.pgCols[i:i+1]), quote(string(b)), col.Type, verr.Message))
			}
			row[i] = v
		}
		out = append(out, row)
	}
	return out, rows.Err()
}
