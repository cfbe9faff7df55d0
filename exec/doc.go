// Package exec runs physical plans: it maps each planner node to a push-based operator and
// drives the operators of every stage from the stage's source splits to its sink.
//
// # Runtime API (what the server calls)
//
//	job, err := exec.Start(ctx, "job-7", plan, exec.Env{
//		OpenSource: ..., // planner.SourceSpec -> connectors.Source
//		NewFormat:  connectors.NewFormat,
//		OpenSink:   ..., // planner.SinkSpec -> connectors.Sink (also late/DLQ outputs)
//		OnRow:      ..., // push queries: rows of a stage whose SinkSpec.Stream is ""
//		Store:      store, // state.Store (RocksDB in the server, memory by default)
//	})
//	job.Stats()                 // records in/out, bad, late, watermark, per-split progress
//	job.StageStats()            // per stage: rows out of each input and operator, watermark
//	job.Plan()                  // the physical plan it runs
//	job.Checkpoint(ctx)         // barrier through every stage, commit, returns the epoch
//	job.AddSplit / RemoveSplit  // rebalancing: NewSplit / RemoveSplit control messages
//	job.Stop()                  // stop reading, flush and close sinks
//	err = job.Wait()            // nil when bounded input was exhausted, LIMIT reached or stopped
//
// # Contract
//
//   - A stage is inputs → a DAG of operators → one output (planner.Stage). One goroutine
//     (stage*.go) owns a stage's operators and its output; split readers (input.go) read and
//     decode concurrently and hand batches to it, so an operator sees batches, watermarks
//     and control messages (NewSplit, RemoveSplit, Checkpoint) in one order. An operator is
//     told which of its inputs a batch came from and emits through the Emitter it is handed
//     (operator.go); the runtime forwards watermarks and control messages, in topological
//     order, and aligns checkpoint barriers across in-process edges.
//   - Inputs are a stream's splits (input.go: sourceInput), an upstream stage's shuffle
//     topic (shuffleInput), or an in-process edge (the upstream's exchangeOut sends its
//     events). A source that is a connectors.RowSource hands typed rows straight into the
//     split's batches (no message bodies, no format); others are read as messages and
//     decoded with the stream's format. Each split reader and exchange recycles its batches
//     through a bounded pool (batchPool): it has at most splitBatches (exchangeBatches plus
//     two per queue) batches of at most Env.BatchSize rows in flight and waits for the
//     stage to release one rather than allocating more, so a fast reader costs no garbage
//     and no unbounded queue. Outputs are a sink (sinkOp, with the exactly-once outbox), the client
//     (callbackOp), an in-process exchange (output.go) or a shuffle topic (shuffle.go).
//   - A bad record (undecodable, wrong type, missing event time, or a body its source could
//     not read: connectors.Message.Err) is counted, its error names
//     the stream, split and offset (line for files) and is kept in JobStats.BadErrors and
//     passed to Env.Logf; its raw body goes to the dead-letter output when the stream has
//     dlq_topic or dlq_path; the job goes on.
//   - A row that fails inside the pipeline — an expression of a filter, projection or
//     aggregation that yields an error value (sql.ErrorValue: division by zero, overflow, a
//     cast that does not convert), or a value the sink's format cannot encode — is a bad
//     record too: dropped, counted, its RowError (stream, split, operator, SQLSTATE,
//     message, and the offset it was read at when the operator failed on it as read) kept
//     in BadErrors, and written to the dead-letter output of the stream the row was read
//     from (its operator's input port followed back through operators' first inputs and
//     upstream stages: stage.portRoot) as a JSON object {"error": {...}, "stream",
//     "split", "offset", "row": {...}} (rowerrors.go). Env.Logf gets bad records as they
//     happen, at most badLogBurst per badLogEvery per job.
//   - Side outputs are opened with Env.OpenSink: dlq_topic/late_topic as a SinkSpec of the
//     stream's connector with Options{topic, format}, dlq_path/late_path as connector
//     "file" with Options{path, format}. Late rows are encoded with the stream's format
//     over the aggregation's input columns; a join's go to the outputs of the input they
//     came from. A dead-letter SinkSpec's Options also hold
//     dlq_of, the stream whose bad records it takes, and each message written to it carries
//     the Offset and Split it was read at: Env.OpenSink can keep one copy of a bad record
//     however many jobs read the stream (the server does, with ids
//     "<stream>/<split>/<offset>").
//   - Watermarks are per split (docs/sql.md, "Time, watermarks and late rows"): a source
//     split's is its max event time - delay, pulled forward when it is idle; when every
//     split of a stage is idle the watermark goes to the largest event time read, and
//     beyond it with the wall clock only while the stream's event time tracks the wall
//     clock. An exhausted bounded split's is +inf. An edge split's is the minimum of what
//     its inputs report; through a shuffle topic producing splits report whether they are
//     idle too, and only the active ones count (shuffle.go: queueState.watermark). Operators keep state per split and act on each split's watermark;
//     the stage's output watermark is the minimum over its splits. Without a declared
//     event-time column (SourceSpec.EventTime < 0) a split's event time is the wall clock
//     when its records are read.
//   - A window emits once when its split's watermark passes its end (default), or an
//     updated row per change with EMIT CHANGES (a GROUP BY without window: once per input
//     batch for each group the batch changed, or once at the end of a bounded input with
//     EmitOnClose). A row whose every window has
//     fired is late: counted and written to late_topic/late_path when set, never applied.
//   - Counters (JobStats) count over the job's life: the commit group of the last stage
//     writes them with each checkpoint (CountersKey) and Start reads them back, unless
//     the job runs only part of its units (Env.OwnsUnit).
//   - State: every key of a job is laid out by keys.go (positions, watermarks, epochs,
//     outbox, de-duplication marks, operator state), per split where it moves with the
//     split; Units lists a plan's ownable (stage, split) units. Operator state lives in
//     memory, per split, and is written through to Env.Store at each checkpoint (changed
//     groups only, deletions of fired windows). A hop aggregation whose aggregates merge
//     exactly (sql.MergesExactly) and that emits on close keeps its groups per pane
//     (gcd of size and slide) and merges a window's panes when it closes (agg_pane.go);
//     its result is the same as computing each window row by row.
//   - Aggregation (aggOp, agg.go) computes each row's keys and arguments and keeps what
//     every kind of window shares: the groups and their accumulators (accrows.go,
//     keyrows.go, groupindex.go), late and bad rows, and the state's keys and codecs
//     (statecodec.go). What depends on the kind of window is an aggMode, called per row,
//     per watermark, at a checkpoint, at a restore and at close: unwindowedMode
//     (agg_unwindowed.go: GROUP BY without a window, state TTL; with state outside the
//     process, a bounded cache of its groups, agg_cache.go), winMode and givenMode
//     (agg_window.go: tumble, hop by windows, windows the rows carry), paneMode
//     (agg_pane.go: hop by panes) and sessionMode (agg_session.go). An aggregation without
//     window over an updating input is retractAggOp (agg_retract.go): signed row counts,
//     aggregates undone by sql.Retracter or rebuilt from value multisets, one change per
//     group and batch; a global one always has its row (emitted at NewSplit when the store
//     has none).
//   - Checkpoints: Job.Checkpoint injects a barrier at every root stage (those reading
//     streams or shuffle topics); stages behind in-process edges take it when aligned.
//     Stages joined by in-process edges form a commit group (commit.go) that commits each
//     epoch atomically (Env.Commit) once every stage of the group added its part: state
//     delta and split positions. Commits run off the stages' goroutines, one at a time in
//     epoch order; a stage waits for its last commit before its next barrier, a split
//     change and its end. Checkpoints run every Env.CheckpointInterval (default 10s), or,
//     with Env.MinCheckpointInterval, at an interval that adapts to what commits cost (the
//     server's jobs: ten times the median of the last five commits' durations, 10 ms to
//     1 s, from 2 ms after a checkpoint that wrote little, Env.LightCheckpointInterval; a
//     floor and a wait that many times longer when several processes share the job's commits,
//     Env.Runners; a watermark that
//     releases rows into an outbox brings the next one forward, at most
//     once per interval, cpearly.go), on Job.Checkpoint, and when a bounded job finishes.
//     Job.CheckpointTimes gives histograms of the phases (cptimes.go). A restarted job
//     resumes each split from its committed position with its committed state, so each
//     record affects committed state once.
//   - NewSplit loads a split's state and gives the operators its checkpointed watermark;
//     RemoveSplit first processes every batch the split's reader already sent (a split's
//     saved offset is that of the last record whose effect is in its saved state), then
//     writes and drops its state and commits it with its position.
//   - Shuffle topics (Env.ShuffleTopics, shuffle.go): rows carry deterministic (source
//     split, offset, seq) ids, watermark messages go to every queue; the downstream stage
//     drops ids it has applied and commits its dedup marks in its own commit group.
//   - Exactly-once output: a main sink implementing DedupSink (the broker and file sinks) gets rows
//     only after the checkpoint covering them commits; they wait in the checkpoint's outbox
//     and carry ids "<job>/<epoch>/<seq>"; on start, committed outbox entries are published
//     again, skipping ids the sink holds (outbox.go, docs/guarantees.md). A main sink
//     implementing connectors.EpochSink instead (a PostgreSQL table) gets each epoch's
//     entries in one call, applied in one database transaction with a progress record
//     that makes an epoch published again a no-op (docs/guarantees.md, "Exactly-once output
//     to a PostgreSQL table"). Side outputs and other sinks are at-least-once.
//   - Transactional output (the sink's option delivery = 'transactional', a
//     connectors.TxSink, sink_tx.go): rows are sent at once as prepared messages of their
//     epoch's transaction "<run>/<epoch>"; the transaction's record goes into the
//     checkpoint (TxKey) and it is committed after the checkpoint commits; on start,
//     recorded transactions are committed again before anything is read, and check-backs
//     about other runs' transactions are answered "rollback". A sink that cannot write
//     transactionally is a SinkError at Start.
//   - Split readers stay within Env.AlignmentWindow of event time of the slowest live split
//     of the job's root stages (idle and finished splits do not hold them back).
//   - Joins (join.go) judge a row late by its own input's watermark (inputWatermarker), keep
//     each side's rows per key and split until they can no longer match, and report the
//     rows they hold (JobStats.StateRows). A checkpoint writes a key's rows appended since
//     the last one as a new chunk; a key whose older rows changed is rewritten. Window
//     joins keep each side's rows per window, encoded; a window's rows that a committed
//     checkpoint holds leave memory and are read back from Env.Store when it closes (so
//     Env.Commit must write the checkpoint's state to Env.Store, as the default does). A
//     side the planner found dominated (planner.JoinDominance) keeps only rows at or past
//     their group's running MAX/MIN. A regular join without a state TTL is exact
//     (join_exact.go): rows are kept until deleted (a retract input's deletes, a table's
//     new version of its key), never by time; its output is a retract changelog unless it
//     is INNER over two append-only inputs.
//     A stage opens all its splits and restores their positions before any reader starts.
//   - Lookup joins (lookup.go): one query per batch for the distinct keys the operator's
//     cache lacks (Env.OpenLookup opens the table), rows out in input order; a lookup the
//     database cannot answer is retried with a capped exponential wait, holding the batch
//     (never dropping or reordering rows) until it succeeds or the job's context ends. The
//     cache (TTL, most-recently-used bound, absent keys too) is not checkpointed; a table
//     held in memory (connectors.MemoryLookup: a file) is asked for each row's key at
//     once, with no cache, no batching of keys and no retries. Counters
//     are in JobStats.Lookups.
//   - Changelogs (docs/sql.md, "Changelogs"): the rows of an updating relation end with
//     the change column (NULL: insert, "delete": delete), placed there by the planner
//     (planner.Changelog); stateless operators pass it along as a column. An aggregation
//     without window emits its groups' changes (AggregateNode.Changes: upsert, or retract
//     with the old row's delete first); an operator reading an updating input
//     (Retracting) takes a delete's row back. A sink of an updating query
//     (SinkSpec.Changes) folds the changes of each key (SinkSpec.KeyColumns) to its last:
//     per epoch in the outbox, whose stored entry is the folded one, else per batch.
//   - Row counts (stats.go): every port of a stage (an input, an operator's output) counts
//     the rows it emits, one atomic add per batch, so Job.StageStats gives the rows along
//     every edge of the plan (planner.Graph) while the job runs.
//   - The package opens no sockets or files itself: everything goes through Env.
//
// # Files
//
//   - runtime.go: Job, Start, Env; commit.go: commit groups; keys.go: the key layout.
//   - stage.go: the stage (its events, batch pool, run loop, handling of events, end);
//     stage_build.go: its operators built from the plan and its side outputs;
//     stage_watermark.go: split and output watermarks, idleness, reader alignment;
//     stage_checkpoint.go: barrier alignment, job requests, taking a checkpoint;
//     stage_splits.go: splits and their readers, opening them, NewSplit / RemoveSplit.
//   - input.go: inputs and split readers; output.go: in-process exchanges; shuffle.go:
//     shuffle topics (writing, reading, de-duplication marks, a stage's producers and
//     loading a split's marks); sink.go, outbox.go, sink_tx.go: sinks.
//   - operator.go: the operator contract; ops.go: filter, projection, window assignment,
//     limit, union; tablefunc.go: table functions; agg*.go: aggregation (see above);
//     join.go, join_window.go, join_exact.go, lookup*.go: joins; topn.go: Top-N, deduplication
//     and a table's latest versions;
//     topn_changes.go: Top-N over the whole stream, a changelog; table_rows.go: a
//     table's rows kept above the source of its changes, for its truncations;
//     sort.go: sort.
package exec
