// Package planner turns a bound query (*sql.Query) into a plan rsql can run, and explains it.
//
// Steps, each a public function:
//
//	Logical(q)          the logical plan: an immutable tree of LogicalNode values; per query
//	                    block FROM (Scan, a table's under a TopN of its latest versions
//	                    unless a join reads it | the block of a derived table or CTE | Union) →
//	                    [TableFunc ...] (JOIN LATERAL, JOIN UNNEST: stateless, no exchange) →
//	                    [WindowAssign] → [Filter] → [Aggregate → [Filter]] → Project →
//	                    [DISTINCT: Aggregate → Project] → [Sort] → [Limit], a derived table
//	                    with ROW_NUMBER() becoming a TopN, a block with aggregates OVER a
//	                    window of rows an Over between its Project and the one dropping
//	                    the window's hidden columns; a Sink on top
//	Optimize(l)         FoldConstants, PushDownPredicates, PruneColumns, MergeProjections
//	Changelog(l)        the change mode of every relation (append-only, upsert by a key,
//	                    retract; planner/changelog.go): updating relations' rows get the
//	                    change column last, and an operator over an updating input it
//	                    cannot compute exactly is refused with 0A000
//	BuildPhysical(l, o) stages of compiled operators (planner/physical.go): inputs → an
//	                    operator DAG → an exchange or the sink
//	Explain(l, p)       readable text of both plans (EXPLAIN)
//	Graph(p)            the physical plan as stages, nodes and edges (JSON for the web
//	                    console), described with EXPLAIN's texts
//	Plan(q, o)          all of the above but Explain, in order (Changelog after Optimize)
//
// Contract:
//   - The planner runs nothing and opens nothing; every expression is compiled once, here,
//     with sql.Compile (a filter and the projection right above it together, with
//     sql.CompileShared: FilterNode.Memo, ProjectNode.AfterFilter; an aggregation's
//     arguments together, with sql.CompileConds: AggregateNode.Conds). Logical nodes and
//     physical nodes are distinct types.
//   - Every rewrite keeps the rows a plan computes. Pruning remaps every ColumnRef so that it
//     indexes the narrowed row; SourceSpec.Columns says which stream columns a stage reads.
//     The stream's event-time column is always read (SourceSpec.EventTime >= 0 whenever the
//     stream declares one): watermarks come from it, and a record without it is bad.
//   - Errors are *sql.Error values with a SQLSTATE code (0A000 for what is not supported).
//
// Exchange rule. Records of a broker topic are spread over its queues by the producer's key,
// which the planner does not know in general. An operator that needs the rows of equal keys
// in one split — an aggregation (its group key), a TopN or an Over (its partition keys), a Sort (all
// rows) — therefore gets an exchange unless its input already arrives in one split or
// partitioned by (a subset of) its keys (tracked through projections and exchanges):
//   - a source is read as one split when its connector is "file" or "values", it is a view,
//     or its `queues` option is 1;
//   - a source is partitioned by columns when its `partitioned_by` (or `key`) option names
//     them (comma-separated); if every one of them is a plain column among the group keys,
//     equal group keys share a split and no exchange is needed;
//   - otherwise stage 0 is source → filters → projection of the columns the aggregate reads
//     (and the event-time column for a windowed aggregate) → ExchangeNode writing the shuffle
//     topic "<job>-0-shuffle" with queue = hash(keys) mod queues; stage 1 reads that topic
//     (SourceSpec.FromStage = 0, connector "broker") → aggregate → HAVING → projection → sink;
//   - a global aggregate (no keys) over more than one split is shuffled to one queue
//     (ExchangeNode.Queues = 1 and the shuffle source's `queues` option "1"), so exactly one
//     downstream split sees every row;
//   - a join's output stays split by its keys (Options.Layout LayoutJoinSplits): an inner
//     or left join's by the left key columns, a right join's by the right ones; an operator
//     keyed on them runs in the join's stage, and a join of that output on the same keys, in
//     the same order, takes it as one input without an exchange (the other side exchanged
//     into the stage: equal keys hash to the same queue). LayoutFirst, the layout of jobs
//     created before, exchanges every join's output;
//   - a Union whose inputs each read streams in a stage of their own (no exchange yet) is
//     one stage with one input per stream; otherwise every input is exchanged (on all its
//     columns) into a new stage holding the Union. Stages are numbered upstream first.
//
// Watermarks cross an exchange as records of the shuffle topic (exec/doc.go,
// docs/guarantees.md); the stage 1 SourceSpec.EventTime names the event-time column inside
// the shuffled row.
//
// Lookup joins (lookup.go). A join whose right side is a table of a connector that can only
// be looked up by key (postgres), or a file table joined in processing time (no AS OF, or
// AS OF a processing time: the file is read whole when the job starts), is JoinLookup: no
// exchange of either side; a LookupJoinNode at the end of the left side's stage, reading
// the table's pruned columns (LookupJoinNode.Columns, TableSchema the declared ones) by its
// primary key, with the table's options parsed once here (Join.Lookup, LookupJoinNode.Options:
// options.LookupOptions, which EXPLAIN shows and the opener takes). For postgres FOR SYSTEM_TIME AS OF must then be a processing time, not the
// left's event time (0A000); a file table AS OF the left's event time is a temporal join. A relation of a connector
// that cannot be read (a lookup table, a write-only connector) is refused as a source, and
// one that cannot be written as a sink, with 0A000 when the plan is built.
package planner
