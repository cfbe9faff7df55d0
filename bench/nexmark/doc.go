// Package nexmark is the Nexmark benchmark of rsql: the queries as SQL files in rsql's
// dialect (q*.sql, embedded), the streams they read (ddl.sql, nexmark connector), and a
// runner that runs one query as a job in this process, from the nexmark source through the
// query's operators to a callback instead of a sink (rsql bench nexmark, docs/nexmark.md).
//
// Contract:
//   - Queries lists every embedded query in numeric order (q0, q1, q2, q10, ...). Each
//     file holds comments, optionally SET state_ttl = '...' (the job's state TTL, as a
//     server session's setting), and one SELECT over the streams of ddl.sql and its
//     side-input table (q13: a file table, {side_input_path} in ddl.sql).
//   - Run writes the side input (WriteSideInput: SideInputRows rows, each key's value its
//     decimal text) into a temporary directory removed at the end, unless
//     Config.SideInputPath names a file; writing it comes before Config.Started (not
//     timed), reading it is the job's (its lookup join opens it).
//   - Run starts the query over Config's events (bounded; the same event sequence for the
//     same Seed and EventRate, whatever Splits) and returns when every event is read and
//     every window has fired. OnRow sees every result row (valid only during the call);
//     the result also counts them. Nothing touches a network or the catalog of a server;
//     RocksDB state (Config.State "rocksdb") lives in a temporary directory removed at the
//     end.
//   - The README lists the Nexmark queries not here and why.
package nexmark
