package planner

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"rsql/sql"
)

// A table of a changelog connector (postgres-cdc) is a retract changelog keyed by its
// primary key (docs/sql.md, "PostgreSQL change data capture"): aggregations retract,
// regular joins take it on either side, a projection keeps its key, and the operators that
// take append-only input only refuse it with 0A000.
func TestChangelogConnectorTable(t *testing.T) {
	cat := goldenCatalog()
	cat["cdc_orders"] = &sql.Relation{Name: "cdc_orders", IsTable: true, PrimaryKey: []int{0}, EventTime: -1,
		Schema: sql.Schema{{Name: "order_id", Type: sql.TypeBigInt}, {Name: "user_id", Type: sql.TypeVarchar},
			{Name: "amount", Type: sql.TypeDouble}, {Name: "ts", Type: sql.TypeTimestamp}, {Name: sql.ChangeColumn, Type: sql.TypeVarchar}},
		Options: map[string]string{"connector": "postgres-cdc", "url": "postgres://rsql@127.0.0.1:5432/shop", "table": "public.orders"}}
	cases := []struct {
		name, query string
		mode        ChangeMode
		key         string
		plan        string // a fragment of the logical plan
		refused     string
	}{
		{name: "scan", query: `SELECT * FROM cdc_orders`, mode: Retract, key: "[0]"},
		{name: "projection without the key", query: `SELECT user_id, amount FROM cdc_orders WHERE amount > 1`, mode: Retract, key: "[]"},
		{name: "aggregate", query: `SELECT user_id, COUNT(*), SUM(amount) FROM cdc_orders GROUP BY user_id`, mode: Upsert, key: "[0]", plan: "retracting"},
		{name: "join on the right", query: `SELECT p.order_id, o.user_id FROM payments_mq p JOIN cdc_orders o ON p.order_id = o.order_id`, mode: Retract, plan: "mode=regular"},
		{name: "join on the left", query: `SELECT p.order_id, o.user_id FROM cdc_orders o LEFT JOIN payments_mq p ON p.order_id = o.order_id`, mode: Retract, plan: "mode=regular"},
		{name: "windowed aggregate", query: `SELECT user_id, window_start, COUNT(*) FROM TUMBLE(cdc_orders, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end`, refused: "change"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := bindSQL(t, cat, c.query)
			if err != nil {
				t.Fatal(err)
			}
			l, _, err := Plan(q, Options{Job: "j"})
			if c.refused != "" {
				var se *sql.Error
				if !errors.As(err, &se) || se.Code != sql.CodeNotSupported || !strings.Contains(se.Message, c.refused) {
					t.Fatalf("got %v, want a 0A000 error saying %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sink := l.(*Sink)
			text := logicalText(l)
			if sink.Changes != c.mode {
				t.Fatalf("the query is %s, want %s:\n%s", sink.Changes, c.mode, text)
			}
			if c.key != "" && fmt.Sprint(sink.Key) != c.key {
				t.Fatalf("key %v, want %s:\n%s", sink.Key, c.key, text)
			}
			if !strings.Contains(strings.ToLower(text), c.plan) {
				t.Fatalf("want %q in the plan:\n%s", c.plan, text)
			}
		})
	}
}

// A postgres-cdc table whose TRUNCATE deletes its rows (on_truncate = 'delete', the
// default) is read through its latest versions kept in the source's stage, before any
// exchange, keyed by its primary key, which the scan keeps even when the query reads other
// columns only; with on_truncate = 'error' the scan's changes go on as they are.
func TestTruncatingTableVersionsAtSource(t *testing.T) {
	cat := goldenCatalog()
	table := func(name string, opts map[string]string) {
		o := map[string]string{"connector": "postgres-cdc", "url": "postgres://rsql@127.0.0.1:5432/shop", "table": "public.orders"}
		for k, v := range opts {
			o[k] = v
		}
		cat[name] = &sql.Relation{Name: name, IsTable: true, PrimaryKey: []int{0}, EventTime: -1,
			Schema: sql.Schema{{Name: "order_id", Type: sql.TypeBigInt}, {Name: "user_id", Type: sql.TypeVarchar},
				{Name: "amount", Type: sql.TypeDouble}, {Name: sql.ChangeColumn, Type: sql.TypeVarchar}},
			Options: o}
	}
	table("deleting", nil)
	table("stopping", map[string]string{"on_truncate": "error"})
	for _, c := range []struct {
		query  string
		atSrc  bool
		reads  string // the source stage's scanned columns
		stages int
	}{
		{`SELECT user_id, COUNT(*), SUM(amount) FROM deleting GROUP BY user_id`, true, "[0 1 2 3]", 2},
		{`SELECT COUNT(*) FROM deleting`, true, "[0 3]", 2},
		{`SELECT p.order_id, o.user_id FROM payments_mq p JOIN deleting o ON p.order_id = o.order_id`, true, "[0 1 3]", 3},
		{`SELECT user_id, COUNT(*), SUM(amount) FROM stopping GROUP BY user_id`, false, "[1 2 3]", 2},
		{`SELECT COUNT(*) FROM stopping`, false, "[3]", 2},
	} {
		q, err := bindSQL(t, cat, c.query)
		if err != nil {
			t.Fatal(err)
		}
		_, p, err := Plan(q, Options{Job: "j"})
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		if len(p.Stages) != c.stages {
			t.Errorf("%s: %d stages, want %d", c.query, len(p.Stages), c.stages)
		}
		var src *Stage
		for _, st := range p.Stages {
			if r := st.Source().Stream; r == "deleting" || r == "stopping" {
				src = st
			}
		}
		if src == nil {
			t.Fatalf("%s: no stage reads the table", c.query)
		}
		if got := fmt.Sprint(src.Source().Columns); got != c.reads {
			t.Errorf("%s: the scan reads columns %s, want %s", c.query, got, c.reads)
		}
		var versions []*TopNNode
		for _, st := range p.Stages {
			for _, n := range st.Nodes() {
				if tn, ok := n.(*TopNNode); ok && tn.Mode == TableVersions {
					versions = append(versions, tn)
				}
			}
		}
		switch {
		case !c.atSrc && len(versions) > 0:
			t.Errorf("%s: latest versions kept, want none", c.query)
		case c.atSrc && (len(src.Ops) == 0 || src.Ops[0].Node != Node(versionsOf(versions)) || !versionsOf(versions).AtSource):
			t.Errorf("%s: want the source stage's first operator to keep the latest versions at the source, got %v", c.query, src.Nodes())
		}
	}
}

func versionsOf(v []*TopNNode) *TopNNode {
	if len(v) != 1 {
		return nil
	}
	return v[0]
}
