// Package server runs rsql as a service: sessions, the Executor every front end goes
// through, and the Postgres wire protocol front end (catalog persistence and the job
// manager live here too).
//
// Packages: users, roles and SCRAM-SHA-256 live in server/auth, the Postgres wire front end
// and the front-end contract (Session, Result, Executor) in server/pgwire (this package names
// their types as aliases); server imports them, never the reverse. docs/architecture.md, "server/ packages", lists the split and its import rules.
//
// Postgres wire: server/pgwire (its doc.go states the contract). PGServer, PGConfig,
// Session, Result, Executor and Describer are aliases of its names, so the engine's callers
// did not change; the engine implements Executor and Describer (describe.go).
//
// Web console (console*.go, pages in console/ embedded): on the HTTP address, `/` serves
// the pages and /api/v1/ the JSON API they use (docs/operations.md, "Web console"). GET
// requests change nothing; POSTs (SQL, job actions) go through the engine like any
// statement and are refused when a browser says they come from another origin. Every
// request answers to the wire's authentication (console_auth.go: loopback only under
// trust, HTTP Basic against the users' SCRAM secrets otherwise) and runs with the user's
// role; /metrics and /healthz are outside it. One
// sampler goroutine keeps each running job's counters every 2 s for 15 minutes, from which
// rates are computed; it stops with the System.
//
// Engine (engine.go and neighbours): the catalog, statement execution and the jobs. Each
// statement is checked against the session's role first (users.go: admin, read_only;
// 42501); parsing applies Config.Limits; file paths go through the file sandbox
// (Config.FileRoots); a panic while executing fails the call (XX000), and a panic in a
// job's decoders or sources fails the record or the job (recover.go). SET
// accepts the settings of settings.go only; CREATE OR REPLACE replaces a definition and its
// job unless another job uses the stream (replace.go); a job's file sink follows the rule of
// fileout.go (a defining job replaces the file, an INSERT job appends, a restarted one
// continues exactly once, one writer per file); the jobs reading a stream share one
// dead-letter writer that keeps one copy per bad record (dlq.go). docs/sql.md is the user's
// side of all of these.
//
// Several instances (cluster.go, cluster_units.go, cluster_show.go): with a shared Postgres
// checkpoint store the instances share the catalog and a membership table, and divide every
// RUNNING job's units (stage, split) among the live members, each stage's evenly; a unit
// is committed and loaded under its own name, so it moves between instances with its state
// (handed over by a live owner, taken over after a dead one's lease expired), and only the
// moved units pause. SHOW UNITS, SHOW JOBS (units) and /metrics show the assignment; each
// move is logged with its duration. docs/guarantees.md, "Several instances", states what
// holds.
package server
