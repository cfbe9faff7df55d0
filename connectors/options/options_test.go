package options

import (
	"errors"
	"testing"
	"time"
)

func TestParseStreamDefaultsAndChecks(t *testing.T) {
	o, err := ParseStream(map[string]string{"topic": "t", "queues": " 4 ", "checkpoint_interval": "0s", "delivery": " Transactional"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Connector != "broker" || o.Format != "json" || o.TopicOf("s") != "t" || o.Queues != 4 ||
		!o.CheckpointSet || o.CheckpointInterval != 0 || o.Delivery != DeliveryTransactional || o.IdleSet {
		t.Errorf("parsed = %+v", o)
	}
	if o, _ := ParseStream(map[string]string{"path": "x.jsonl"}); o.Connector != "file" || o.Path != "x.jsonl" {
		t.Errorf("a path alone is a file stream: %+v", o)
	}
	var oe *OptionError
	if _, err := ParseStream(map[string]string{"colour": "red"}); !errors.As(err, &oe) {
		t.Errorf("unknown option: err = %v", err)
	}
	if _, err := ParseStream(map[string]string{"queues": "0"}); !errors.As(err, &oe) || oe.Option != "queues" {
		t.Errorf("queues = 0: err = %v", err)
	}
	// Of skips keys it does not know but still refuses a bad value of a known one.
	if o, err := Of(map[string]string{"colour": "red", "idle_timeout": "2s"}); err != nil || !o.IdleSet || o.IdleTimeout != 2*time.Second {
		t.Errorf("Of = %+v, %v", o, err)
	}
	if _, err := Of(map[string]string{"idle_timeout": "soon"}); !errors.As(err, &oe) || oe.Option != "idle_timeout" {
		t.Errorf("Of with a bad duration: err = %v", err)
	}
}

func TestLookupOptions(t *testing.T) {
	if _, err := ParseLookup("broker", "t", nil); err == nil {
		t.Error("broker is not a lookup connector")
	}
	o, err := ParseLookup("File", "t", map[string]string{"path": "side.csv", "format": "CSV"})
	if err != nil || o.Target != "side.csv" || o.CacheTTL != 0 || o.Connector != "file" || o.Path != "side.csv" || o.Format != "csv" || o.Raw["path"] != "side.csv" {
		t.Errorf("file lookup = %+v, %v", o, err)
	}
	if c, err := ParseLookupCommon(map[string]string{"cache_ttl": "0", "cache_rows": "5"}); err != nil || c.CacheTTL != 0 || c.CacheRows != 5 || c.Timeout != DefaultLookupTimeout {
		t.Errorf("common = %+v, %v", c, err)
	}
	k, ok := Lookup("POSTGRES")
	if !ok || !k.Lookupable || !k.Writable || k.Readable {
		t.Errorf("postgres = %+v, %v", k, ok)
	}
}
