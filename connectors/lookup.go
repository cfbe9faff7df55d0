package connectors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"rsql/sql"
)

// Lookup tables: a table of an external database that a lookup join reads by key
// (docs/sql.md, "Lookup joins"). A lookup connector is declared with CREATE TABLE ...
// PRIMARY KEY; it is never read as a stream nor written.

// LookupTable finds rows of an external table by key. It is used by one goroutine at a
// time (the stage that joins with it).
type LookupTable interface {
	// Lookup returns the rows of the table whose key columns equal one of keys. Each key
	// holds the values of LookupSpec.Key's columns, in that order and of those columns'
	// declared types, none NULL, no two equal. A returned row holds LookupSpec.Columns,
	// converted to their declared types; a value that does not convert is an
	// sql.ErrorValue in its place (naming the table, the column and the value), so the
	// rows joined with it can be routed to the bad-record path. Rows come in no particular
	// order; a key with no row has none. A failed lookup returns a *LookupError.
	Lookup(ctx context.Context, keys []sql.Row) ([]sql.Row, error)
	// Close releases the table's connections.
	Close() error
}

// MemoryLookup is a LookupTable held in memory (a file table): Get answers one key at once,
// without I/O and without failing, so a join asks it per row instead of gathering a
// batch's keys. key is the sql.AppendKey encoding of the key's values in LookupSpec.Key's
// order, each of its column's declared type; the rows returned (nil: none) are shared and
// must not be modified.
type MemoryLookup interface {
	LookupTable
	Get(key []byte) []sql.Row
}

// LookupSpec is a lookup table as a join opens it: the rsql table's name, its WITH
// options, the columns the join reads and which of them form the key.
type LookupSpec struct {
	Table   string
	Options map[string]string
	// Columns are the columns to fetch, named and typed as the rsql table declares them.
	Columns sql.Schema
	// Key are the indexes in Columns of the primary key's columns, in key order.
	Key []int
	// Schema is the table's declared columns, in order, without the hidden change column
	// (nil: Columns). A file table's csv lines hold them in this order.
	Schema sql.Schema
}

// LookupOptions are the parsed WITH options of a lookup table that the join itself uses.
type LookupOptions struct {
	// Target names the external table (EXPLAIN shows it).
	Target string
	// CacheTTL is how long a looked-up key (found or absent) is remembered; 0: no cache.
	CacheTTL time.Duration
	// CacheRows is the most keys the cache holds (the least recently used go first).
	CacheRows int
	// Timeout bounds one lookup query.
	Timeout time.Duration
	// MaxRetries is how many failed attempts in a row a lookup makes before the job fails
	// (0: it retries until the database answers or the job is stopped).
	MaxRetries int
	// BackoffMax caps the exponential wait between retries (it starts at 100ms).
	BackoffMax time.Duration
}

// Lookup option defaults.
const (
	DefaultCacheTTL      = 60 * time.Second
	DefaultCacheRows     = 100_000
	DefaultLookupTimeout = 10 * time.Second
	DefaultBackoffMax    = 5 * time.Second
	// LookupBackoffMin is the first wait after a failed lookup; each next one doubles.
	LookupBackoffMin = 100 * time.Millisecond
)

// LookupOptionKeys are the WITH options every lookup connector reads.
var LookupOptionKeys = []string{"cache_ttl", "cache_rows", "lookup_timeout", "max_retries", "retry_backoff_max"}

// parseLookupOptions reads the options of LookupOptionKeys (others are ignored) with
// their defaults; errors are *OptionError.
func parseLookupOptions(raw map[string]string) (LookupOptions, error) {
	o := LookupOptions{CacheTTL: DefaultCacheTTL, CacheRows: DefaultCacheRows, Timeout: DefaultLookupTimeout, BackoffMax: DefaultBackoffMax}
	dur := func(key string, min time.Duration, d *time.Duration) error {
		v, ok := raw[key]
		if !ok {
			return nil
		}
		x, err := time.ParseDuration(strings.TrimSpace(v))
		if err == nil && strings.TrimSpace(v) == "0" {
			x = 0
		}
		if err != nil || x < min {
			return &OptionError{Option: key, Value: v, Reason: fmt.Sprintf("want a duration of at least %v such as '60s' or '500ms'", min)}
		}
		*d = x
		return nil
	}
	num := func(key string, min, max int, n *int) error {
		v, ok := raw[key]
		if !ok {
			return nil
		}
		x, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || x < min || x > max {
			return &OptionError{Option: key, Value: v, Reason: fmt.Sprintf("want a whole number from %d to %d", min, max)}
		}
		*n = x
		return nil
	}
	for _, err := range []error{
		dur("cache_ttl", 0, &o.CacheTTL),
		num("cache_rows", 1, 100_000_000, &o.CacheRows),
		dur("lookup_timeout", time.Millisecond, &o.Timeout),
		num("max_retries", 0, 1_000_000, &o.MaxRetries),
		dur("retry_backoff_max", LookupBackoffMin, &o.BackoffMax),
	} {
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

// LookupError is a lookup that failed. Retry says asking again may succeed (the database
// is unreachable, restarting, shutting down, or the query timed out); other failures
// (a missing table or column, a type the declared column cannot take) will not go away
// by themselves.
type LookupError struct {
	Table string
	Retry bool
	Err   error
}

func (e *LookupError) Error() string { return fmt.Sprintf("lookup table %s: %v", e.Table, e.Err) }

func (e *LookupError) Unwrap() error { return e.Err }

// Retryable reports whether err is a *LookupError worth retrying.
func Retryable(err error) bool {
	var le *LookupError
	return errors.As(err, &le) && le.Retry
}

// ParseLookup parses and checks the options of a lookup table named table (the rsql
// table) for its connector, which must be a lookup connector.
func ParseLookup(connector, table string, raw map[string]string) (LookupOptions, error) {
	k, ok := Lookup(connector)
	if !ok || k.ParseLookup == nil {
		return LookupOptions{}, &OptionError{Option: "connector", Value: connector, Reason: "not a connector that can be looked up by key"}
	}
	return k.ParseLookup(table, raw)
}

// IsLookupOnly reports whether a connector is a lookup table only: it can be looked up by
// key but neither read as a stream nor written.
func (k Kind) IsLookupOnly() bool {
	return k.OpenLookup != nil && k.OpenSource == nil && k.OpenSink == nil
}
