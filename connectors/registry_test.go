package connectors

import (
	"errors"
	"os"
	"strings"
	"testing"

	"rsql/connectors/options"
)

// TestConnectorTableInDocs keeps docs/sql.md's connector table equal to the registry.
func TestConnectorTableInDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/sql.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Kinds() {
		line := "| `" + k.Name + "` | " + k.Doc + " |"
		if !strings.Contains(string(doc), line) {
			t.Errorf("docs/sql.md lacks the connector line %q", line)
		}
	}
}

func TestParseStreamOptions(t *testing.T) {
	o, err := ParseStreamOptions(map[string]string{"path": "e.jsonl", "idle_timeout": "2s", "partitioned_by": "a, b", "queues": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Connector != "file" || o.Path != "e.jsonl" || !o.IdleSet || o.IdleTimeout.Seconds() != 2 ||
		strings.Join(o.PartitionedBy, ",") != "a,b" || o.Queues != 3 || o.TopicOf("s") != "s" {
		t.Errorf("parsed %+v", o)
	}
	for raw, want := range map[string]map[string]string{
		"unknown option":              {"colour": "red"},
		"unknown connector":           {"connector": "kinesis"},
		"want a whole number":         {"queues": "0"},
		"want a duration":             {"idle_timeout": "soon"},
		"needs a path option":         {"connector": "file"},
		"unknown format":              {"format": "xml"},
		"path\" in WITH":              {"connector": "broker", "path": "x"},
		"'outbox' or 'transactional'": {"delivery": "twice"},
		"unknown option \"delivery\"": {"path": "x", "delivery": "transactional"},
	} {
		_, err := ParseStreamOptions(want)
		var oe *OptionError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), raw) {
			t.Errorf("%v: error %v, want one containing %q", want, err, raw)
		}
	}
	// delivery: a topic's only, case-insensitive.
	for v, want := range map[string]string{"transactional": DeliveryTransactional, " Outbox ": DeliveryOutbox} {
		o, err := ParseStreamOptions(map[string]string{"delivery": v})
		if err != nil || o.Delivery != want {
			t.Errorf("delivery = %q: %q, %v; want %q", v, o.Delivery, err, want)
		}
	}
	if o, err := ParseStreamOptions(map[string]string{}); err != nil || o.Delivery != "" {
		t.Errorf("no delivery option: %q, %v", o.Delivery, err)
	}
	// Options of a declared stream as a plan carries them: extra keys are skipped, bad
	// values still fail.
	if _, err := StreamOptionsOf(map[string]string{"format": "test", "dlq_of": "x", "queues": "2"}); err != nil {
		t.Errorf("lenient parse: %v", err)
	}
	if _, err := StreamOptionsOf(map[string]string{"idle_timeout": "soon"}); err == nil {
		t.Error("lenient parse accepted a bad idle_timeout")
	}
}

// The metadata package options holds of each connector says what its openers can do.
func TestKindMetadataMatchesOpeners(t *testing.T) {
	for _, k := range Kinds() {
		m, ok := options.Lookup(k.Name)
		if !ok {
			t.Errorf("%s: not in package options", k.Name)
			continue
		}
		if m.Readable != (k.OpenSource != nil) || m.Writable != (k.OpenSink != nil) || m.Lookupable != (k.OpenLookup != nil) {
			t.Errorf("%s: options say read=%v write=%v lookup=%v", k.Name, m.Readable, m.Writable, m.Lookupable)
		}
		if b := options.Builtin(k.Name); b.Readable != m.Readable || b.Writable != m.Writable || b.Lookupable != m.Lookupable {
			t.Errorf("%s: the built-in metadata differs from the registered kind", k.Name)
		}
	}
	if _, err := ParseLookup("postgres", "t", map[string]string{"url": "::not a url"}); err == nil {
		t.Error("the postgres url is checked once connectors registered its kind")
	}
}
