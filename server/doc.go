// Package server runs rsql as a service: sessions, the Executor every front end goes
// through, and the Postgres wire protocol front end (catalog persistence and the job
// manager live here too).
//
// Packages: users, roles and SCRAM-SHA-256 live in server/auth (this package names its
// types as aliases: UserDef, Role, AuthMethod, UserStore); server imports it, never the
// reverse. docs/architecture.md, "server/ packages", lists the split and its import rules.
//
// Postgres wire (pgwire*.go): PGServer speaks protocol v3 to any Postgres client (psql,
// pgx, JDBC). Contract:
//   - Startup (pgwire_startup.go): SSLRequest is answered 'S' and the connection goes on
//     over TLS when PGConfig.TLS is set, 'N' otherwise; GSSENCRequest 'N'. Authentication
//     is trust (only from loopback addresses; 28000 otherwise) or SCRAM-SHA-256 against
//     the catalog's users (server/auth; 28P01 for a wrong password or an unknown user); the
//     session takes the user's role. ParameterStatus reports server_version,
//     client_encoding UTF8, DateStyle ISO, integer_datetimes, standard_conforming_strings,
//     TimeZone UTC, session_authorization, is_superuser; then BackendKeyData for cancel
//     requests and ReadyForQuery. Everything before ReadyForQuery must finish within
//     StartupTimeout.
//   - Limits (docs/security.md): at most MaxConnections connections (53300 past it); a
//     message that has begun must arrive within MessageTimeout; IdleTimeout, when set,
//     ends an idle session (57P05); a query text over MaxStatementBytes fails with 54001.
//     Accept errors that are temporary are retried with backoff (internal/listen); Err
//     reports a listener that stopped. A panic in a connection's goroutine closes that
//     connection only.
//   - Every statement goes to the Executor with the connection's Session; the front end
//     answers nothing itself. A simple Query may hold several statements (one result
//     each). The extended protocol (Parse/Bind/Describe/Execute/Close/Sync/Flush) takes
//     one statement per Parse; it runs at the portal's first Describe or Execute;
//     Execute's row limit suspends the portal (PortalSuspended) until the next Execute
//     or Sync. An Executor that also implements Describer gives exact parameter types
//     and result columns to Describe of a prepared statement.
//   - Types: BOOLEAN bool(16), INT int4(23), BIGINT int8(20), DOUBLE float8(701),
//     DECIMAL numeric(1700), VARCHAR text(25), TIMESTAMP timestamp(1114, text
//     'YYYY-MM-DD HH:MM:SS.mmm'), JSON json(114); text and binary result formats and
//     parameters.
//   - Errors: an ErrorResponse carries a *sql.Error's Code as SQLSTATE and its position
//     (1-based, in characters) when known; other errors are XX000. The session stays
//     usable; in the extended protocol messages up to the next Sync are skipped.
//   - A CancelRequest (process id + secret key) cancels the running statement's context;
//     the statement ends with 57014. A push query's RowDescription is flushed at once; it
//     then streams DataRows as rows arrive, flushing each batch, until it ends, is
//     cancelled, or the client goes away.
//   - A Result's Notice goes out as a NoticeResponse before its CommandComplete (the job a
//     statement started, BEGIN/COMMIT/ROLLBACK's "no transactions").
//   - Concurrency: one goroutine per connection owns its state; a push query adds a
//     producer goroutine that reads rows ahead; Close cancels every statement and waits.
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
