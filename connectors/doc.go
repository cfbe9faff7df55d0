// Package connectors holds rsql's sources and sinks (file, broker topics, print, the nexmark
// generator) and record formats (JSON lines, CSV, Debezium change events).
//
// Contract: a Source is a set of splits, each read in offset order by a SplitReader; a Sink
// takes raw messages and makes them durable at Flush. Formats turn message bodies into typed
// rows of a schema and back; a body that does not fit the schema is an error that names the
// field, never a panic. Connectors know nothing about operators or plans.
//
//   - NewFormat("json"|"csv", schema) makes a Format bound to a schema; it reuses the row it
//     is given and is not safe for concurrent use. JSON keys match column names
//     case-insensitively, missing fields are NULL, extra fields are ignored, TIMESTAMP reads
//     epoch milliseconds or RFC 3339 and writes RFC 3339 UTC with milliseconds, JSON columns
//     keep the raw JSON text. CSV has no header, fields in schema order, RFC 4180 quoting; an
//     empty unquoted field is NULL. Encode then Decode gives back the same row.
//   - A schema whose last column is sql.ChangeColumn is a changelog's (an updating query's
//     rows, a table's records): JSON leaves the column out when NULL (an insert) and writes
//     "__op":"delete" for a delete; NewFormat("debezium-json", schema) writes and reads
//     Debezium change events ({"before","after","op"}), "d" being a delete (docs/sql.md,
//     "Changelogs").
//   - Every message a SplitReader returns carries its split (Message.Split).
//   - OpenFileSource(path) is a bounded source with one split "0"; a message is a non-empty
//     line and its Offset the 1-based line number. OpenFileSink(path) appends one body per
//     line (OpenFileSinkWith can empty the file first); Flush writes and fsyncs. As the only
//     writer of its file it is a de-duplicating sink (Position, IDsSince) that cuts the file
//     back instead of storing ids. NewPrintSink(w) prints bodies to w.
//   - Errors of the file connector name the path (and the line where there is one).
//   - FileRoots is the file connector's sandbox (fileroots.go): its OpenSource, OpenSink,
//     Rename, Remove and WriteFile take only paths under its roots whose symbolic links
//     stay under them, checked when the path is resolved and again by os.Root when the
//     file is opened; anything else is an error wrapping ErrOutsideFileRoots that names
//     the roots. A nil *FileRoots is no sandbox (OpenFileSource and OpenFileSink use it).
//   - Topics: BrokerSource/BrokerSink (the bundled broker in process) and
//     RocketMQSource/RocketMQSink (any name server, rocketmq-client-go) pass one conformance
//     test body. A missing topic is created with RocketMQConfig.CreateTopics on the master
//     brokers the name server's cluster info names (with a request of rsql's own, signed
//     and checked: rocketmq-client-go's admin client does neither). GroupOffsets reads and
//     commits a consumer group's offsets synchronously (rocketmq_admin.go, docs/broker.md
//     "Protocol notes"). RocketMQConfig.Credentials sign every request of these, clients
//     and admin calls alike, for brokers with access control (docs/security.md).
//   - Both topic sinks are TxSinks (tx.go): Transactional gives a TxWriter that prepares
//     messages invisibly, commits or rolls back a transaction (a key's messages in
//     prepare order), records what it prepared so that a later writer of the same
//     producer group can end it (EndRecord; decoding a bad record wraps ErrBadTxRecord),
//     and answers the broker's check-backs through a TxCheck (broker_tx.go in process,
//     rocketmq_tx.go over the protocol, with its own connection per broker for its
//     pipelined sends, END_TRANSACTION and CHECK_TRANSACTION_STATE).
//   - The kafka connector (kafka.go, kafka_tx.go; docs/sql.md "Kafka") reads and writes a
//     topic of an Apache Kafka cluster with franz-go: KafkaSource's splits are the
//     partitions, each SplitReader a client of its own fetching one partition
//     read_committed from the offset it is given (an offset beyond the end is an error; one
//     retention removed reads from the start); KafkaSink is an idempotent producer (at least
//     once, key partitioned by Kafka's murmur2). KafkaSink is a TxSink: each transaction has
//     a producer of its own whose transactional id ends with the epoch, Record keeps its
//     producer id and epoch, and EndRecord commits it with a bare EndTxn after a restart.
//     Option values are checked when a stream is declared (options.Kind.Check).
//   - OpenNexmarkSource(options, schema, columns) generates the Nexmark benchmark's events
//     (docs/nexmark.md): deterministic for its options, split by epochs of 50 events,
//     bounded when events > 0. It is a RowSource: OpenRows hands over typed rows of the
//     columns asked for, with no bytes in between. Its messages are 50-byte event
//     references that NewFormat("nexmark", schema) turns into rows (decode only), or JSON
//     objects with format 'json'. Option and schema errors wrap ErrNexmark and name the
//     option or column.
//   - Options and metadata live in the leaf package connectors/options (StreamOptions,
//     OptionError, LookupOptions, the option keys of each connector); the names here are
//     aliases of it. A Kind is options.Kind plus the openers; Register records the metadata
//     there too, so the planner checks options without importing this package.
//   - RowSource is optional: a runtime that reads rows type-asserts it; every source keeps
//     Open, so a runtime that reads message bodies works with all of them.
//   - Lookup tables (lookup.go): a Kind with OpenLookup is looked up by key by lookup joins;
//     one with OpenLookup only (postgres) is neither read as a stream nor written. The
//     postgres connector (postgres.go) asks for all of a batch's keys in one query through a
//     pgx pool, converts every value from its text form to the declared column type
//     (pgtext.go; a value that does not convert is an sql.ErrorValue naming the table,
//     column and value), checks the table's columns once, and reports failures as
//     *LookupError telling whether retrying may help. Options are parsed once, when the
//     join is planned (ParseLookup: ParsePostgresOptions for postgres, registered with the
//     kind), into LookupOptions, which LookupSpec carries to the opener; errors are
//     *OptionError naming the option, never showing a password.
//   - The file connector is a lookup table too (file_lookup.go): OpenFileLookup reads the
//     whole file (at most MaxLookupFileBytes) with the file source's line reader and the
//     json/csv formats into a map by key (the last line of a key wins; a JSON line with
//     __op delete removes its key); a missing or oversized file, a line that does not
//     decode or has a NULL key is a *LookupFileError naming the file and the line. Its
//     lookups never fail and it takes no cache options; it is a MemoryLookup (Get: one
//     key's rows by its sql.AppendKey encoding, at once).
package connectors
