// Package server runs rsql as a service: sessions, the Executor every front end goes
// through, and the Postgres wire protocol front end (catalog persistence and the job
// manager live here too).
//
// Packages: users, roles and SCRAM-SHA-256 live in server/auth, the Postgres wire front end
// and the front-end contract (Session, Result, Executor) in server/pgwire (this package names
// their types as aliases), cluster membership, the shared catalog's sync and the units'
// assignment in server/cluster, the web console in server/console; server imports them,
// never the reverse.
// docs/architecture.md, "server/ packages", lists the split and its import rules.
//
// Job manager (jobs.go, jobretry.go): the engine plans and starts a job (Engine.startJob)
// and hands it to its jobManager, which keeps the jobs this process runs under a lock of
// its own, watches each until it ends and records how it ended in the catalog, starts again
// after a backoff those that failed for a while, stops them (TERMINATE, PAUSE, DROP,
// shutdown) and waits for them. It starts a recorded job again through the engine
// (restartAttempt); everything else that reaches the running jobs (SHOW JOBS, the console,
// the cluster, /metrics) goes through its get and list.
//
// Postgres wire: server/pgwire (its doc.go states the contract). PGServer, PGConfig,
// Session, Result, Executor and Describer are aliases of its names, so the engine's callers
// did not change; the engine implements Executor and Describer (describe.go).
//
// Web console: server/console (its doc.go states its contract). System serves it on the HTTP
// address beside /metrics and /healthz; it reaches the engine through consoleEngine
// (console_engine.go), an adapter that lists the catalog's jobs (with the state SHOW JOBS
// shows) and streams, the jobs running here and the cluster's members, and runs job control
// and statements through the engine.
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
// Several instances (cluster.go, cluster_units.go, cluster_show.go; membership, catalog sync
// and assignment in server/cluster): with a shared Postgres
// checkpoint store the instances share the catalog and a membership table, and divide every
// RUNNING job's units (stage, split) among the live members, each stage's evenly; a unit
// is committed and loaded under its own name, so it moves between instances with its state
// (handed over by a live owner, taken over after a dead one's lease expired), and only the
// moved units pause. SHOW UNITS, SHOW JOBS (units) and /metrics show the assignment; each
// move is logged with its duration. docs/guarantees.md, "Several instances", states what
// holds.
package server
