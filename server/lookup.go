package server

import (
	"context"

	"rsql/connectors"
	"rsql/sql"
)

// Tables of a database that lookup joins read (connectors.Kind.OpenLookup; docs/sql.md,
// "Lookup joins").

// checkLookupTable checks a CREATE STREAM or CREATE TABLE of a connector that can only be
// looked up: it must be a table with a primary key (its rows are found by key) and no
// event time (the database has only its current rows).
func checkLookupTable(s *sql.CreateStream) error {
	kind, ok := connectors.Lookup(s.Options["connector"])
	if !ok || !kind.IsLookupOnly() {
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
