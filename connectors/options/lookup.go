package options

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// LookupOptions are a lookup table's WITH options, parsed once when a join with it is
// planned (ParseLookup): what the join uses (the cache, the timeout, the retries) and what
// its connector opens the table with. The planner carries them to the opener.
type LookupOptions struct {
	// Connector is the table's connector (a Lookupable kind).
	Connector string
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
	// Path and Format (json or csv) are a file table's file.
	Path, Format string
	// URL is a postgres table's connection string; Table its name in the database,
	// [schema, name] or [name].
	URL   string
	Table []string
	// Raw are the options as given: the catalog's record, and what a connector's own
	// options are read from when this struct has no field for them. Never written.
	Raw map[string]string
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

// ParseLookupCommon reads the options of LookupOptionKeys (others are ignored) with
// their defaults; errors are *OptionError.
func ParseLookupCommon(raw map[string]string) (LookupOptions, error) {
	o := LookupOptions{CacheTTL: DefaultCacheTTL, CacheRows: DefaultCacheRows, Timeout: DefaultLookupTimeout, BackoffMax: DefaultBackoffMax, Raw: raw}
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

// ParseLookup parses and checks the options of a lookup table named table (the rsql
// table) for its connector, which must be a lookup connector.
func ParseLookup(connector, table string, raw map[string]string) (LookupOptions, error) {
	k, ok := Lookup(connector)
	if !ok || !k.Lookupable {
		return LookupOptions{}, &OptionError{Option: "connector", Value: connector, Reason: "not a connector that can be looked up by key"}
	}
	parse := k.ParseLookup
	if parse == nil {
		parse = func(_ string, raw map[string]string) (LookupOptions, error) { return ParseLookupCommon(raw) }
	}
	o, err := parse(table, raw)
	o.Connector, o.Raw = k.Name, raw
	return o, err
}

// ParseFileLookup parses the options of a file table looked up by key. The file
// connector takes no lookup options of its own: the whole file is in memory, so there is
// no cache to tune and no query to time out. Errors are *OptionError.
func ParseFileLookup(raw map[string]string) (LookupOptions, error) {
	// No cache (CacheTTL 0): a lookup is a map access. The timeout only bounds the
	// runtime's wait, which a map access never reaches.
	o := LookupOptions{Connector: "file", Path: raw["path"], Format: strings.ToLower(strings.TrimSpace(raw["format"])),
		CacheRows: 1, Timeout: DefaultLookupTimeout, BackoffMax: DefaultBackoffMax, Raw: raw}
	if o.Format == "" {
		o.Format = "json"
	}
	if o.Path == "" {
		return o, &OptionError{Reason: "the file connector needs a path option: WITH (connector = 'file', path = 'side_input.csv', format = 'csv')"}
	}
	if o.Format != "json" && o.Format != "csv" {
		return o, &OptionError{Option: "format", Value: raw["format"], Reason: "unknown format (json or csv)"}
	}
	o.Target = o.Path
	return o, nil
}
