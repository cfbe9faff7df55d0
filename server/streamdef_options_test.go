package server

import "testing"

// The engine reads a stream's connector, topic, path and format through
// StreamDef.StreamOptions: the defaults the catalog stores, a view's connector, and the
// values as given when a stored value does not parse.
func TestStreamDefStreamOptions(t *testing.T) {
	file := StreamDef{Name: "out", Options: withDefaults("out", map[string]string{"path": "out.csv", "format": "csv"})}
	if o := file.StreamOptions(); o.Connector != "file" || o.Path != "out.csv" || o.Format != "csv" {
		t.Errorf("file stream: %+v", o)
	}
	broker := StreamDef{Name: "orders", Options: withDefaults("orders", nil)}
	if o := broker.StreamOptions(); o.Connector != "broker" || o.TopicOf("orders") != "orders" || o.Format != "json" {
		t.Errorf("broker stream: %+v", o)
	}
	view := StreamDef{Name: "v", IsView: true, Options: map[string]string{"connector": "view"}}
	if o := view.StreamOptions(); o.Connector != "view" || o.Get("format") != "" {
		t.Errorf("view: %+v", o)
	}
	bad := StreamDef{Name: "s", Options: map[string]string{"connector": "broker", "topic": "t1", "format": "csv", "queues": "many"}}
	if o := bad.StreamOptions(); o.Connector != "broker" || o.Topic != "t1" || o.Format != "csv" {
		t.Errorf("stored value that does not parse: %+v", o)
	}
}
