package server

import (
	"context"
	"strings"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// Tables of a database that lookup joins read (connectors.Kind.OpenLookup; docs/sql.md,
// "Lookup joins").

// checkLookupTable checks a CREATE STREAM or CREATE TABLE of a connector that is a table of
// a database (looked up, maybe written, never read as a stream): it must be a table with a primary key (its rows are found by key) and no
// event time (the database has only its current rows).
func checkLookupTable(s *sql.CreateStream) error {
	kind, ok := connectors.Lookup(s.Options["connector"])
	if !ok || !kind.Lookupable || kind.Readable {
		return nil
	}
	if !s.Table {
		return sql.Errorf(sql.CodeNotSupported, "the %s connector is a table of a database, looked up by key: it is not a stream. Declare it with CREATE TABLE %s (k ... PRIMARY KEY, ...) WITH (connector = '%s', ...) and join it (FROM stream JOIN %s ON ...)", kind.Name, s.Name, kind.Name, s.Name)
	}
	if s.WatermarkColumn != "" {
		return sql.Errorf(sql.CodeNotSupported, "table %s is looked up in its database, which has only its current rows: it has no event time (drop WATERMARK FOR %s)", s.Name, s.WatermarkColumn)
	}
	return nil
}

// openLookup opens the lookup table of spec through the connector registry.
func (e *Engine) openLookup(spec connectors.LookupSpec) (connectors.LookupTable, error) {
	kind, ok := connectors.Lookup(spec.Options.Connector)
	if !ok || kind.OpenLookup == nil {
		return nil, sql.Errorf(sql.CodeNotSupported, "table %s: the %s connector cannot be looked up", spec.Table, spec.Options.Connector)
	}
	return kind.OpenLookup(context.Background(), e.deps(), spec)
}

// declaredKey is the declared primary key of the table named name (indexes into schema by
// column name), or nil.
func (e *Engine) declaredKey(name string, schema sql.Schema) []int {
	d, ok := e.cat.Stream(name)
	if !ok || !d.IsTable {
		return nil
	}
	var key []int
	for _, k := range d.PrimaryKey {
		for i, c := range schema {
			if strings.EqualFold(c.Name, k) {
				key = append(key, i)
				break
			}
		}
	}
	return key
}

// checkDatabaseSink checks, when a job starts writing a table of a database (connector
// postgres), that the database's table can take the rows (connectors.CheckPostgresSink):
// the errors name the table and carry a SQLSTATE.
func (e *Engine) checkDatabaseSink(target StreamDef, planned planner.SinkSpec) error {
	opts, err := connectors.StreamOptionsOf(target.Options)
	if err != nil || opts.Connector != "postgres" {
		return nil
	}
	var key []int
	for _, k := range target.PrimaryKey {
		for i, c := range planned.Schema {
			if strings.EqualFold(c.Name, k) {
				key = append(key, i)
				break
			}
		}
	}
	spec := connectors.Spec{Stream: target.Name, Options: opts, Schema: planned.Schema, Key: key}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return connectors.CheckPostgresSink(ctx, spec)
}
