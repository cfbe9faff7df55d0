package options

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The values of the delivery option.
const (
	DeliveryOutbox        = "outbox"
	DeliveryTransactional = "transactional"
)

// CommonOptions are the WITH options every connector accepts.
var CommonOptions = []string{"connector", "topic", "format", "queues", "key", "partitioned_by",
	"idle_timeout", "checkpoint_interval", "late_topic", "late_path", "dlq_topic", "dlq_path"}

// StreamOptions are a stream's WITH options, parsed once. The raw options stay the
// catalog's record; everything else reads them through ParseStream or Of.
type StreamOptions struct {
	Connector string // default "broker" ("file" when only a path is given)
	Topic     string // default: the stream's name
	Format    string // default "json"
	Queues    int    // 0: the topic's, or the broker's default
	Path      string // file
	// PartitionedBy are the columns the producer keys records by (partitioned_by, or key).
	PartitionedBy []string
	// IdleTimeout is the idle_timeout option; IdleSet says it was given.
	IdleTimeout time.Duration
	IdleSet     bool
	// CheckpointInterval is the checkpoint_interval option; CheckpointSet says it was given.
	CheckpointInterval time.Duration
	CheckpointSet      bool
	LateTopic          string
	LatePath           string
	DLQTopic           string
	DLQPath            string
	// Delivery is how a job's rows reach the topic exactly once: DeliveryOutbox ("": not
	// given) or DeliveryTransactional (docs/guarantees.md).
	Delivery string
	// Raw are the options as given (lower-case keys): the catalog's record, and what a
	// connector's own options (nexmark's, a lookup table's) are read from. Never written.
	Raw map[string]string
}

// TopicOf is the topic of a stream named stream.
func (o StreamOptions) TopicOf(stream string) string {
	if o.Topic != "" {
		return o.Topic
	}
	return stream
}

// Get returns the raw value of option key as given ("" when absent).
func (o StreamOptions) Get(key string) string { return o.Raw[key] }

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

// ParseStream checks and parses WITH options: every key must be a common option or one of
// the connector's, each value of its type. Errors are *OptionError.
func ParseStream(raw map[string]string) (StreamOptions, error) {
	return parse(raw, true)
}

// Of parses the options of a stream that was checked when it was declared (a plan's
// source or sink): keys it does not know are skipped (the engine adds some of its own), a
// known key with a bad value is still an error.
func Of(raw map[string]string) (StreamOptions, error) {
	return parse(raw, false)
}

func parse(raw map[string]string, strict bool) (StreamOptions, error) {
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
			if strict && !contains(RecordFormats, v) && !contains(kind.Formats, v) {
				return o, &OptionError{Option: k, Value: v, Reason: "unknown format (json, csv or debezium-json)"}
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
				o.CheckpointInterval, o.CheckpointSet = d, true
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
	if strict && kind.Check != nil {
		if err := kind.Check(raw); err != nil {
			return o, err
		}
	}
	if strict && kind.Lookupable {
		if _, err := ParseLookup(o.Connector, "", raw); err != nil {
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
