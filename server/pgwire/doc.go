// Package pgwire is rsql's Postgres wire protocol front end: Server speaks protocol v3 to
// any Postgres client (psql, pgx, JDBC). Contract:
//   - Startup (startup.go): SSLRequest is answered 'S' and the connection goes on
//     over TLS when Config.TLS is set, 'N' otherwise; GSSENCRequest 'N'. Authentication
//     is trust (only from loopback addresses; 28000 otherwise) or SCRAM-SHA-256 against
//     the Config.Users store (server/auth; 28P01 for a wrong password or an unknown
//     user); the session takes the user's role. ParameterStatus reports server_version,
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
// Session, Result, Rows, Notice and Executor (session.go) are the contract of every front
// end with the engine; they live here so this package needs nothing of the engine.
//
// Imports: rsql/sql, rsql/server/auth, rsql/internal/listen and pgproto3. It never imports
// the engine (package server); the engine imports it and passes itself as the Executor and
// its catalog as the auth.UserStore.
package pgwire
