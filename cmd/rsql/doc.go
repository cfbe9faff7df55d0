// Command rsql is the single binary of rsql: the embedded default (broker, engine and
// Postgres-wire server in one process plus the shell), `rsql server`, `rsql -c/-f`,
// `rsql broker`, `rsql produce`, `rsql consume`, `rsql bench` (broker, pipeline, nexmark) and
// `rsql version`.
//
// This package holds flags, subcommands and the interactive shell only; engine logic lives in
// server/, planner/, exec/ and below. Flags are parsed with kong (see docs/architecture.md).
package main
