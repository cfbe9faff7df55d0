package connectors

import (
	"context"

	"errors"
	"fmt"
	"io"
	"os"
	"rsql/sql"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"rsql/broker"
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
}

// Kind is one connector.
type Kind struct {
	Name string
	// Doc is its line in docs/sql.md's connector table.
	Doc string
	// Options are the WITH options it reads beyond the common ones (CommonOptions).
	Options []string
	// Formats are the record formats it takes besides json and csv.
	Formats []string
	// Bounded says reading it ends (every split is finite).
	Bounded bool
	// OpenSource opens it for reading (nil: it cannot be read).
	OpenSource func(ctx context.Context, deps Deps, s Spec) (Source, error)
	// OpenSink opens it for writing (nil: it cannot be written).
	OpenSink func(ctx context.Context, deps Deps, s Spec) (Sink, error)
	// OpenLookup opens it as a lookup table a join reads by key (nil: it cannot be looked
	// up); ParseLookup parses and checks its options then (lookup.go).
	OpenLookup  func(ctx context.Context, deps Deps, s LookupSpec) (LookupTable, error)
	ParseLookup func(table string, raw map[string]string) (LookupOptions, error)
}

// ErrNoBroker is returned when a topic is opened and the process reaches no broker.
var ErrNoBroker = errors.New("no broker")

var (
	kindsMu sync.RWMutex
	kinds   = func() map[string]Kind {
		m := map[string]Kind{}
		for _, k := range builtinKinds {
			m[k.Name] = k
		}
		return m
	}()
)

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

// builtinKinds are the connectors of this package.
var builtinKinds = []Kind{
	{
		Name: "broker", Doc: "a topic of the bundled broker, or of the RocketMQ cluster given with --namesrv",
		Options: []string{"delivery"},
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
		Name: "file", Doc: "a file of JSON lines or CSV records: read to its end, or written; a table of it is read into memory and looked up by key in processing-time joins", Options: []string{"path"}, Bounded: true,
		OpenSource: func(_ context.Context, d Deps, s Spec) (Source, error) { return d.Files.OpenSource(s.Options.Path) },
		OpenSink: func(_ context.Context, d Deps, s Spec) (Sink, error) {
			return d.Files.OpenSink(s.Options.Path, FileSinkOptions{})
		},
		ParseLookup: func(_ string, raw map[string]string) (LookupOptions, error) {
			o, err := ParseFileLookupOptions(raw)
			return o.LookupOptions, err
		},
		OpenLookup: func(_ context.Context, d Deps, s LookupSpec) (LookupTable, error) {
			return OpenFileLookup(d.Files, s)
		},
	},
	{
		Name: "nexmark", Doc: "the Nexmark benchmark's generated events: person, auction or bid (docs/nexmark.md; read only)",
		Options: NexmarkOptionKeys, Formats: []string{"nexmark"}, Bounded: false,
		OpenSource: func(_ context.Context, _ Deps, s Spec) (Source, error) {
			return OpenNexmarkSource(s.Options.Raw, s.Schema, s.Columns)
		},
	},
	postgresKind,
	{
		Name: "print", Doc: "standard output of the server (write only)",
		OpenSink: func(_ context.Context, d Deps, _ Spec) (Sink, error) {
			w := d.Stdout
			if w == nil {
				w = os.Stdout
			}
			return NewPrintSink(w), nil
		},
	},
}

// The values of the delivery option.
const (
	DeliveryOutbox        = "outbox"
	DeliveryTransactional = "transactional"
)

// CommonOptions are the WITH options every connector accepts.
var CommonOptions = []string{"connector", "topic", "format", "queues", "key", "partitioned_by",
	"idle_timeout", "checkpoint_interval", "late_topic", "late_path", "dlq_topic", "dlq_path"}

// StreamOptions are a stream's WITH options, parsed once. The raw options stay the
// catalog's record; everything else reads them through ParseStreamOptions.
type StreamOptions struct {
	Connector string // default "broker"
	Topic     string // default: the stream's name
	Format    string // default "json"
	Queues    int    // 0: the topic's, or the broker's default
	Path      string // file
	// PartitionedBy are the columns the producer keys records by (partitioned_by, or key).
	PartitionedBy []string
	// IdleTimeout is the idle_timeout option; IdleSet says it was given.
	IdleTimeout        time.Duration
	IdleSet            bool
	CheckpointInterval time.Duration // 0: not given
	LateTopic          string
	LatePath           string
	DLQTopic           string
	DLQPath            string
	// Delivery is how a job's rows reach the topic exactly once: DeliveryOutbox ("": not
	// given) or DeliveryTransactional (docs/guarantees.md).
	Delivery string
	// Raw are the options as given (lower-case keys).
	Raw map[string]string
}

// TopicOf is the topic of a stream named stream.
func (o StreamOptions) TopicOf(stream string) string {
	if o.Topic != "" {
		return o.Topic
	}
	return stream
}

// OptionError is a WITH option that cannot be used: Option names it, Reason says why.
type OptionError struct {
	Option, Value, Reason string
}

func (e *OptionError) Error() string {
	if e.Option == "" {
		return e.Reason
	}
	return fmt.Sprintf("%s = %q: %s", e.Option, e.Value, e.Reason)
}

// ParseStreamOptions checks and parses WITH options: every key must be a common option or
// one of the connector's, each value of its type. Errors are *OptionError.
func ParseStreamOptions(raw map[string]string) (StreamOptions, error) {
	return parseOptions(raw, true)
}

// StreamOptionsOf parses the options of a stream that was checked when it was declared (a
// plan's source or sink): keys it does not know are skipped (the engine adds some of its
// own), a known key with a bad value is still an error.
func StreamOptionsOf(raw map[string]string) (StreamOptions, error) {
	return parseOptions(raw, false)
}

func parseOptions(raw map[string]string, strict bool) (StreamOptions, error) {
	o := StreamOptions{Connector: "broker", Format: "json", Raw: raw}
	if c := raw["connector"]; c != "" {
		o.Connector = strings.ToLower(c)
	} else if raw["path"] != "" {
		o.Connector = "file"
	}
	kind, ok := Lookup(o.Connector)
	if !ok && strict {
		return o, &OptionError{Option: "connector", Value: raw["connector"], Reason: "unknown connector (known: " + strings.Join(KindNames(), ", ") + ")"}
	}
	known := append(append([]string(nil), CommonOptions...), kind.Options...)
	for k, v := range raw {
		if !contains(known, k) && !(k == "path" && !strict) {
			if !strict {
				continue
			}
			return o, &OptionError{Reason: fmt.Sprintf("unknown option %q in WITH (known: %s)", k, strings.Join(allOptions(), ", "))}
		}
		switch k {
		case "topic":
			o.Topic = v
		case "path":
			o.Path = v
		case "format":
			if strict && v != "json" && v != "csv" && !contains(kind.Formats, v) {
				return o, &OptionError{Option: k, Value: v, Reason: "unknown format (json or csv)"}
			}
			o.Format = v
		case "queues":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 1 || n > 1024 {
				return o, &OptionError{Option: k, Value: v, Reason: "want a whole number from 1 to 1024"}
			}
			o.Queues = n
		case "idle_timeout", "checkpoint_interval":
			d, err := time.ParseDuration(v)
			if err != nil {
				return o, &OptionError{Option: k, Value: v, Reason: "want a duration such as '2s' or '500ms'"}
			}
			if k == "idle_timeout" {
				o.IdleTimeout, o.IdleSet = d, true
			} else {
				o.CheckpointInterval = d
			}
		case "late_topic":
			o.LateTopic = v
		case "late_path":
			o.LatePath = v
		case "dlq_topic":
			o.DLQTopic = v
		case "dlq_path":
			o.DLQPath = v
		case "delivery":
			if v = strings.ToLower(strings.TrimSpace(v)); v != DeliveryOutbox && v != DeliveryTransactional {
				return o, &OptionError{Option: k, Value: raw[k], Reason: "want 'outbox' or 'transactional'"}
			}
			o.Delivery = v
		}
	}
	key := raw["partitioned_by"]
	if key == "" {
		key = raw["key"]
	}
	for _, c := range strings.Split(key, ",") {
		if c = strings.TrimSpace(c); c != "" {
			o.PartitionedBy = append(o.PartitionedBy, c)
		}
	}
	for _, opt := range kind.Options {
		if opt == "path" && o.Path == "" && strict {
			return o, &OptionError{Reason: fmt.Sprintf("the %s connector needs a path option: WITH (connector = '%s', path = 'events.jsonl')", o.Connector, o.Connector)}
		}
	}
	if strict && kind.ParseLookup != nil {
		if _, err := kind.ParseLookup("", raw); err != nil {
			return o, err
		}
	}
	return o, nil
}

// allOptions lists every option of every connector, common ones first.
func allOptions() []string {
	out := append([]string(nil), CommonOptions...)
	for _, k := range Kinds() {
		for _, o := range k.Options {
			if !contains(out, o) {
				out = append(out, o)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
