package connectors

import (
	"context"
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"rsql/broker"
	"rsql/connectors/options"
	"rsql/sql"
)

// The connector registry: one entry per connector, with the options it reads, whether
// reading it ends, how to open it for reading and writing, and its docs line. The engine
// finds connectors here (and validates WITH options against it) instead of in switches.

// Deps are what connectors need from the process that opens them.
type Deps struct {
	// Broker is the bundled broker (nil when the engine runs on an external RocketMQ
	// cluster or on none).
	Broker *broker.Broker
	// RocketMQ, when set, is the external RocketMQ cluster topics live on.
	RocketMQ *RocketMQConfig
	// Stdout is where the print sink writes (default os.Stdout).
	Stdout io.Writer
	// Files is the file connector's sandbox (fileroots.go); nil: paths as given.
	Files *FileRoots
}

// Spec is a stream as a connector opens it: its name, parsed options, its schema and the
// columns (indexes into it) the reader needs (nil: all).
type Spec struct {
	Stream  string
	Options StreamOptions
	Schema  sql.Schema
	Columns []int
	// Key are the declared primary key's columns (indexes into Schema) of a table written
	// by a sink that needs them (postgres).
	Key []int
}

// Kind is one connector: its metadata (options.Kind: name, options, formats, what it
// can do) and its openers.
type Kind struct {
	options.Kind
	// OpenSource opens it for reading (nil: it cannot be read).
	OpenSource func(ctx context.Context, deps Deps, s Spec) (Source, error)
	// OpenSink opens it for writing (nil: it cannot be written).
	OpenSink func(ctx context.Context, deps Deps, s Spec) (Sink, error)
	// OpenLookup opens it as a lookup table a join reads by key (nil: it cannot be looked
	// up); ParseLookup (options.Kind) parses and checks its options then (lookup.go).
	OpenLookup func(ctx context.Context, deps Deps, s LookupSpec) (LookupTable, error)
	// CheckDeclared, when set, checks a declaration of it against the system it reads
	// (CREATE TABLE fails with its error, an *sql.Error naming the SQLSTATE).
	CheckDeclared func(ctx context.Context, deps Deps, s Spec) error
}

// ErrNoBroker is returned when a topic is opened and the process reaches no broker.
var ErrNoBroker = errors.New("no broker")

var (
	kindsMu sync.RWMutex
	kinds   = func() map[string]Kind {
		m := map[string]Kind{}
		for _, k := range builtinKinds {
			k = k.withFlags()
			options.Register(k.Kind)
			m[k.Name] = k
		}
		return m
	}()
)

// Register adds a connector kind (and its metadata to package options); a second kind of
// the same name replaces the first.
func Register(k Kind) {
	k = k.withFlags()
	options.Register(k.Kind)
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
func KindNames() []string { return options.KindNames() }

// withFlags sets what the kind can do from its openers.
func (k Kind) withFlags() Kind {
	k.Readable, k.Writable, k.Lookupable = k.OpenSource != nil, k.OpenSink != nil, k.OpenLookup != nil
	return k
}

// builtinKinds are the connectors of this package.
var builtinKinds = []Kind{
	{
		Kind: options.Builtin("broker"),
		OpenSource: func(ctx context.Context, d Deps, s Spec) (Source, error) {
			if d.Broker == nil && d.RocketMQ != nil {
				return OpenRocketMQSource(ctx, *d.RocketMQ, s.Options.TopicOf(s.Stream), s.Options.Queues)
			}
			if d.Broker == nil {
				return nil, ErrNoBroker
			}
			return OpenBrokerSource(d.Broker, s.Options.TopicOf(s.Stream), s.Options.Queues)
		},
		OpenSink: func(ctx context.Context, d Deps, s Spec) (Sink, error) {
			if d.Broker == nil && d.RocketMQ != nil {
				return OpenRocketMQSink(ctx, *d.RocketMQ, s.Options.TopicOf(s.Stream), s.Options.Queues)
			}
			if d.Broker == nil {
				return nil, ErrNoBroker
			}
			return OpenBrokerSink(d.Broker, s.Options.TopicOf(s.Stream), s.Options.Queues)
		},
	},
	{
		Kind:       options.Builtin("file"),
		OpenSource: func(_ context.Context, d Deps, s Spec) (Source, error) { return d.Files.OpenSource(s.Options.Path) },
		OpenSink: func(_ context.Context, d Deps, s Spec) (Sink, error) {
			return d.Files.OpenSink(s.Options.Path, FileSinkOptions{})
		},
		OpenLookup: func(_ context.Context, d Deps, s LookupSpec) (LookupTable, error) {
			return OpenFileLookup(d.Files, s)
		},
	},
	{
		Kind: options.Builtin("nexmark"),
		OpenSource: func(_ context.Context, _ Deps, s Spec) (Source, error) {
			return OpenNexmarkSource(s.Options.Raw, s.Schema, s.Columns)
		},
	},
	postgresKind,
	postgresCDCKind,
	kafkaKind,
	{
		Kind: options.Builtin("print"),
		OpenSink: func(_ context.Context, d Deps, _ Spec) (Sink, error) {
			w := d.Stdout
			if w == nil {
				w = os.Stdout
			}
			return NewPrintSink(w), nil
		},
	},
}

// The stream options live in package options (a leaf the planner uses without linking
// the connectors); these names keep them where the connectors' users look.
const (
	DeliveryOutbox        = options.DeliveryOutbox
	DeliveryTransactional = options.DeliveryTransactional
)

// CommonOptions are the WITH options every connector accepts.
var CommonOptions = options.CommonOptions

type (
	// StreamOptions are a stream's WITH options, parsed once (options.StreamOptions).
	StreamOptions = options.StreamOptions
	// OptionError is a WITH option that cannot be used (options.OptionError).
	OptionError = options.OptionError
)

// ParseStreamOptions checks and parses WITH options (options.ParseStream).
func ParseStreamOptions(raw map[string]string) (StreamOptions, error) {
	return options.ParseStream(raw)
}

// StreamOptionsOf parses the options of a stream that was checked when it was declared
// (options.Of).
func StreamOptionsOf(raw map[string]string) (StreamOptions, error) {
	return options.Of(raw)
}
