package planner

// The planner reads connector metadata from package options; the connectors register the
// checks that need their client libraries there (the postgres url and table, parsed with
// pgx), as they do in every binary that runs plans.
import _ "rsql/connectors"
