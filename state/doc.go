// Package state is rsql's state storage: a small key-value Store interface with an in-memory
// implementation (tests, benchmarks, push queries) and a RocksDB implementation (grocksdb),
// and the checkpoint stores that make a job's state durable and movable between instances.
//
// Contract:
//   - Keys and values are byte strings; Scan and Export visit keys in ascending byte order.
//   - Slices passed in may be reused by the caller after the call returns; slices handed out
//     (Get results, Scan callbacks) are valid only as documented on each method.
//   - Write applies a Batch atomically: after a crash either all of it or none of it is visible.
//     A Batch may link others (Link) whose operations follow its own without being copied.
//     The RocksDB store writes a batch larger than a memtable as a table file it ingests
//     (rocks_ingest.go), a smaller one through the memtable: the outcome is the same.
//   - Operator state is keyed by (job, operator, split, key, window), built with Key and
//     SplitPrefix, so that one split's state can be listed (Scan), moved (Export/Import) and
//     dropped (DropPrefix) as a unit.
//   - Checkpoints become durable through a CheckpointStore (checkpoint.go): LocalCheckpointStore
//     writes them into the instance's own Store; PostgresCheckpointStore into a Postgres
//     database several instances share. Both fence a zombie owner of a split by generation
//     (ErrFenced) and commit a checkpoint atomically (docs/checkpoints.md).
//   - Every Store method is safe for concurrent use.
//   - The package knows nothing about SQL.
package state
