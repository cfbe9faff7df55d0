package connectors

import (
	"context"
	"errors"
	"fmt"

	"rsql/connectors/options"
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
// options (parsed when the join was planned: ParseLookup), the columns the join reads and
// which of them form the key.
type LookupSpec struct {
	Table   string
	Options LookupOptions
	// Columns are the columns to fetch, named and typed as the rsql table declares them.
	Columns sql.Schema
	// Key are the indexes in Columns of the primary key's columns, in key order.
	Key []int
	// Schema is the table's declared columns, in order, without the hidden change column
	// (nil: Columns). A file table's csv lines hold them in this order.
	Schema sql.Schema
	// Versioned: VersionTime is the index in Schema of the table's version time (its
	// WATERMARK column). A file's line of a key then replaces the key's row (or delete)
	// only when its version time is not older.
	Versioned   bool
	VersionTime int
}

// LookupOptions are a lookup table's parsed WITH options: what the join uses and what its
// connector opens the table with (options.LookupOptions).
type LookupOptions = options.LookupOptions

// Lookup option defaults (package options).
const (
	DefaultCacheTTL      = options.DefaultCacheTTL
	DefaultCacheRows     = options.DefaultCacheRows
	DefaultLookupTimeout = options.DefaultLookupTimeout
	DefaultBackoffMax    = options.DefaultBackoffMax
	LookupBackoffMin     = options.LookupBackoffMin
)

// LookupOptionKeys are the WITH options every lookup connector reads.
var LookupOptionKeys = options.LookupOptionKeys

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
// table) for its connector, which must be a lookup connector (options.ParseLookup).
func ParseLookup(connector, table string, raw map[string]string) (LookupOptions, error) {
	return options.ParseLookup(connector, table, raw)
}
