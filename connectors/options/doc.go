// Package options owns a stream's WITH options: the typed StreamOptions, their parsing,
// checks and defaults (ParseStream for a statement that declares a stream, Of for a
// stream that was checked when declared), the options of lookup tables (LookupOptions,
// ParseLookup), and the connectors' metadata: their names, the options each accepts, the
// formats it takes, whether reading it ends and whether it can be read, written or looked
// up (Kind, Lookup, Kinds).
//
// It is a leaf: it imports nothing of rsql and no client library (no broker, RocketMQ
// client or pgx), so the planner can parse and check options without linking the
// connectors. The openers stay in package connectors, which registers its kinds here
// (Register) and re-exports these types. A check that needs a client library (the
// postgres connector's url, parsed by pgx) is a ParseLookup function the connectors
// package registers with its kind; until it is registered, ParseLookup checks only the
// options common to lookup tables.
//
// Options are parsed once, when a statement is planned; the raw map (StreamOptions.Raw)
// stays the catalog's record (SHOW CREATE, the catalog on disk) and is never written
// back. Errors are *OptionError naming the option and its value.
package options
