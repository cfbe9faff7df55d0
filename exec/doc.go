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
//	job.Checkpoint(ctx)         // barrier through every stage, commit, returns the epoch
//	job.AddSplit / RemoveSplit  // rebalancing: NewSplit / RemoveSplit control messages
//	job.Stop()                  // stop reading, flush and close sinks
//	err = job.Wait()            // nil when bounded input was exhausted, LIMIT reached or stopped
//
// # Contract
//
//   - Operators see batches of rows, watermarks and control messages (NewSplit, RemoveSplit,
//     Checkpoint) in one order per stage: one goroutine (the stage's task) owns a stage's
//     operators; split readers read and decode concurrently and hand batches to it.
//   - A bad record (undecodable, wrong type, missing event time) is counted, its error names
//     the stream, split and offset (line for files) and is kept in JobStats.BadErrors and
//     passed to Env.Logf; its raw body goes to the dead-letter output when the stream has
//     dlq_topic or dlq_path; the job goes on.
//   - Side outputs are opened with Env.OpenSink: dlq_topic/late_topic as a SinkSpec of the
//     stream's connector with Options{topic, format}, dlq_path/late_path as connector
//     "file" with Options{path, format}. Late rows are encoded with the stream's format
//     over the aggregation's input columns. A dead-letter SinkSpec's Options also hold
//     dlq_of, the stream whose bad records it takes, and each message written to it carries
//     the Offset and Split it was read at: Env.OpenSink can keep one copy of a bad record
//     however many jobs read the stream (the server does, with ids
//     "<stream>/<split>/<offset>").
//   - Watermark of a split = max event time - declared delay; of a stage = min over its live
//     splits. A split with no record for idle_timeout (stream option, default Env.IdleTimeout)
//     stops holding it back; when all are idle it advances with the wall clock from the last
//     record. When every split of a bounded source is exhausted it becomes +inf: every open
//     window fires, a final checkpoint is committed and the job ends. Without a declared
//     event-time column (SourceSpec.EventTime < 0) a split's event time is the wall clock
//     when its records are read.
//   - A window emits once when the watermark passes its end (default), or an updated row per
//     change with EMIT CHANGES (always for GROUP BY without window). A row whose every window
//     has fired is late: counted and written to late_topic/late_path when set, never applied.
//     For session windows a row older than the watermark is late (it could otherwise reopen
//     or bridge a session that has been emitted).
//   - Aggregation state lives in memory, per split, and is written through to Env.Store at
//     each checkpoint (changed groups only, deletions of fired windows) under keys
//     (job, operator, split, group key, window) — see state.Key. The checkpoint batch also
//     holds the source offsets and is committed in one atomic write (Env.Commit), off the
//     stage's goroutine: the stage goes on with the rows after the barrier while a committer
//     goroutine commits and then publishes the outbox; the stage's next checkpoint, split
//     changes and the stage's end wait for that commit, so commits land in epoch order. On
//     NewSplit an operator loads the split's state; on RemoveSplit it writes and drops it.
//     Checkpoints run every Env.CheckpointInterval (default 10s; the server's jobs: 1s), on Job.Checkpoint, and
//     when a bounded job finishes. A restarted job resumes each split from its committed
//     offset with its committed state, so each record affects committed state once.
//   - The checkpoint also holds each stage's watermark and each split's largest event time
//     (restored on start, so late rows stay late and idle windows keep closing).
//   - An ExchangeNode ends a stage. With Env.ShuffleTopics, behind a broker stream, the stage
//     writes the shuffle topic (SourceSpec of the next stage, connector "broker"): rows to
//     queue hash(keys) mod queues with deterministic (source split, offset, seq) ids,
//     watermark messages to every queue; the downstream stage drops ids it has applied and
//     commits its dedup marks in its own checkpoint (shuffle.go). Otherwise the in-process
//     exchange routes rows to the next stage's queues and carries watermarks and checkpoint
//     barriers in order with the rows; the downstream stage commits one checkpoint.
//   - Exactly-once output: a main sink implementing DedupSink (the broker and file sinks) gets rows
//     only after the checkpoint covering them commits; they wait in the checkpoint's outbox
//     and carry ids "<job>/<epoch>/<seq>"; on start, committed outbox entries are published
//     again, skipping ids the sink holds (outbox.go, docs/guarantees.md). Side outputs and
//     other sinks are at-least-once.
//   - Split readers stay within Env.AlignmentWindow of event time of the slowest live split.
//     A stage opens all its splits and restores their event times and its watermark before
//     any reader starts; a live split with no event time yet counts as being at the stage's
//     restored watermark (if any) until it delivers or goes idle.
//   - The package opens no sockets or files itself: everything goes through Env.
package exec
