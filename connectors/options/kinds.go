package options

import (
	"sort"
	"strings"
	"sync"
)

// Kind is what is known of a connector without opening it: its name, the options it
// reads, the formats it takes, and what can be done with it. Package connectors adds the
// openers (connectors.Kind) and registers every kind here.
type Kind struct {
	Name string
	// Doc is its line in docs/sql.md's connector table.
	Doc string
	// Options are the WITH options it reads beyond the common ones (CommonOptions).
	Options []string
	// Formats are the record formats it takes besides RecordFormats.
	Formats []string
	// Bounded says reading it ends (every split is finite).
	Bounded bool
	// Readable, Writable and Lookupable say it can be read as a stream, written, and
	// looked up by key by a lookup join.
	Readable, Writable, Lookupable bool
	// Changelog says a table of it reads as the changes of its rows, a retract changelog
	// (each change the delete of the old row, the insert of the new one; docs/sql.md,
	// "Changelogs") keyed by its primary key, rather than as versions: postgres-cdc.
	Changelog bool
	// ParseLookup parses and checks a lookup table's options (nil for a Lookupable kind:
	// the options common to lookup tables only, ParseLookupCommon).
	ParseLookup func(table string, raw map[string]string) (LookupOptions, error)
	// Check, when set, checks the values of its own options when a stream of it is
	// declared (ParseStream); its errors are *OptionError.
	Check func(raw map[string]string) error
}

// RecordFormats are the record formats every connector that reads or writes records takes
// (connectors.NewFormat; docs/sql.md, "WITH options" and "Changelogs").
var RecordFormats = []string{"json", "csv", "debezium-json"}

// NexmarkOptionKeys are the WITH option keys the nexmark connector reads.
var NexmarkOptionKeys = []string{"table", "events", "rate", "event_rate", "base_time", "seed", "splits"}

// PostgresOptionKeys are the WITH options the postgres connector reads.
var PostgresOptionKeys = append([]string{"url", "table", "transaction"}, LookupOptionKeys...)

// PostgresWholeEpochs reads a postgres sink's transaction option: true for 'epoch' (each
// checkpoint epoch's rows in one transaction), false for 'split' (the default: each
// split's rows of an epoch in a transaction of its own, in parallel).
func PostgresWholeEpochs(raw map[string]string) (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(raw["transaction"])); v {
	case "", "split":
		return false, nil
	case "epoch":
		return true, nil
	}
	return false, &OptionError{Option: "transaction", Value: raw["transaction"], Reason: "want 'split' (each split's rows of an epoch in a transaction of its own, in parallel) or 'epoch' (an epoch's rows in one transaction)"}
}

// PostgresCDCOptionKeys are the WITH options the postgres-cdc connector reads.
var PostgresCDCOptionKeys = []string{"url", "table", "slot", "publication", "create_slot", "on_truncate"}

// TruncateDeletes reads a postgres-cdc table's on_truncate option: true for 'delete' (the
// default: a TRUNCATE of the table deletes every row it held), false for 'error' (a
// TRUNCATE stops the job).
func TruncateDeletes(raw map[string]string) (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(raw["on_truncate"])); v {
	case "", "delete":
		return true, nil
	case "error":
		return false, nil
	}
	return false, &OptionError{Option: "on_truncate", Value: raw["on_truncate"], Reason: "want 'delete' (a TRUNCATE of the table deletes every row it held) or 'error' (a TRUNCATE stops the job)"}
}

// KafkaOptionKeys are the WITH options the kafka connector reads (docs/sql.md, "Kafka").
var KafkaOptionKeys = []string{"brokers", "group", "offset_reset", "delivery", "transaction_timeout",
	"sasl_mechanism", "sasl_username", "sasl_password", "tls", "tls_ca_file"}

// builtin are the connectors of package connectors.
var builtin = []Kind{
	{
		Name: "broker", Doc: "a topic of the bundled broker, or of the RocketMQ cluster given with --namesrv",
		Options: []string{"delivery"}, Readable: true, Writable: true,
	},
	{
		Name: "file", Doc: "a file of JSON lines or CSV records: read to its end, or written; a table of it is read into memory and looked up by key in processing-time joins",
		Options: []string{"path"}, Bounded: true, Readable: true, Writable: true, Lookupable: true,
		ParseLookup: func(_ string, raw map[string]string) (LookupOptions, error) { return ParseFileLookup(raw) },
	},
	{
		Name: "nexmark", Doc: "the Nexmark benchmark's generated events: person, auction or bid (docs/nexmark.md; read only)",
		Options: NexmarkOptionKeys, Formats: []string{"nexmark"}, Readable: true,
	},
	{
		Name: "postgres", Doc: "a table of a PostgreSQL database, looked up by primary key in lookup joins and written by INSERT INTO ... SELECT (CREATE TABLE only; not read as a stream)",
		Options: PostgresOptionKeys, Lookupable: true, Writable: true,
		Check: func(raw map[string]string) error { _, err := PostgresWholeEpochs(raw); return err },
	},
	{
		Name: "postgres-cdc", Doc: "a table of a PostgreSQL database read as its rows and then their changes, through logical replication (CREATE TABLE only; read only)",
		Options: PostgresCDCOptionKeys, Readable: true, Changelog: true,
	},
	{
		Name: "kafka", Doc: "a topic of an Apache Kafka cluster: its partitions read from offsets kept in checkpoints, written at least once or in Kafka transactions (delivery = 'transactional')",
		Options: KafkaOptionKeys, Readable: true, Writable: true,
	},
	{Name: "print", Doc: "standard output of the server (write only)", Writable: true},
}

var (
	kindsMu sync.RWMutex
	kinds   = func() map[string]Kind {
		m := map[string]Kind{}
		for _, k := range builtin {
			m[k.Name] = k
		}
		return m
	}()
)

// Builtin returns the metadata of a connector of package connectors by name.
func Builtin(name string) Kind {
	for _, k := range builtin {
		if k.Name == name {
			return k
		}
	}
	panic("options: no built-in connector " + name)
}

// Register adds a connector kind; a second kind of the same name replaces the first.
func Register(k Kind) {
	kindsMu.Lock()
	kinds[strings.ToLower(k.Name)] = k
	kindsMu.Unlock()
}

// Lookup returns the connector kind of a name (case-insensitive).
func Lookup(name string) (Kind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := kinds[strings.ToLower(name)]
	return k, ok
}

// Kinds lists the registered connectors by name.
func Kinds() []Kind {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// KindNames lists the registered connectors' names, sorted.
func KindNames() []string {
	var out []string
	for _, k := range Kinds() {
		out = append(out, k.Name)
	}
	return out
}
