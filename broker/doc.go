// Package broker is rsql's bundled message broker: a durable commit log with consume
// queues, consumer-group offsets, long-poll pull, retention and delayed delivery, served
// in-process to the engine and over the RocketMQ remoting protocol to any RocketMQ client.
// It knows nothing about SQL.
//
// # In-process API
//
//	b, err := broker.Open(broker.Config{Dir: dir})        // recovers the store
//	err = b.CreateTopic("orders", 8)                        // durable; widening is allowed
//	first, err := b.Append("orders", q, []broker.Message{{Key: "k", Body: body}})
//	msgs, next, err := b.Pull(ctx, "orders", q, offset, 100, time.Second)
//	err = b.CommitOffset("group", "orders", q, next); off, ok := b.QueryOffset(...)
//	b.MinOffset / b.MaxOffset / b.OffsetByTimestamp / b.Topics / b.Topic / b.Flush
//	b.DeleteTopic / b.EnforceRetention / broker.IsSystemTopic(name)
//	b.QueryMessages / b.ViewMessage                         // key index, by offset
//	b.ConsumeStats / b.GroupOffsets / b.ConsumerGroups / b.SubscriptionGroups
//	b.EndTransaction / b.OpenTransactions
//	msgs, err := b.Peek("orders", q, offset, 20)           // inspection: not counted as consumed
//	b.TopicGroupOffsets("orders")                          // committed offsets per group
//	err = b.Serve("127.0.0.1:9876", "127.0.0.1:10911")     // name server + broker listeners
//	b.ACL() / b.ReloadACL()                                 // access control (Config.ACLFile)
//	err = b.Close()
//
// Append writes one batch to one queue with dense, consecutive queue offsets and returns the
// first. With Config.FlushMode FlushSync it returns only after the commit log is fsynced
// (appends in flight share one fsync); with FlushAsync (default) the loss on a machine crash
// is bounded by Config.FlushInterval and a process crash loses nothing. Pull returns
// messages from offset on (an offset below the retained minimum starts at the minimum;
// beyond the end is ErrOffsetOutOfRange) and waits up to wait for new data. Offsets are
// "next offset to consume", persisted at every checkpoint and on Close. Topics() includes
// the broker's own topics (delay schedule, %RETRY%, %DLQ%); filter with IsSystemTopic.
// Close flushes and releases the directory; it may be called more than once.
//
// # Storage
//
// Dir/commitlog holds fixed-size segments named by their first byte's offset (20 digits);
// every record is in RocketMQ's stored format, so a pull reply is a copy of log bytes.
// Dir/consumequeue/<topic>/<queue> holds 20-byte entries (commit-log offset, size, tag hash).
// These files are mapped; every Config.ReleaseInterval the pages that are complete and not
// being written leave the process's resident set (madvise, resident.go): the commit log
// keeps only its last few MiB mapped, and a pull far behind the head releases the pages it
// read as soon as it is done, so the broker's resident memory grows neither with the data it
// holds nor with how fast consumers catch up. The mappings the writer appends to read no
// ahead (MADV_RANDOM; the commit log only while a segment is written), so a write never
// waits for the kernel to fill a read-ahead window.
// topics.json, offsets.json (a snapshot), subscriptionGroups.json and checkpoint are replaced
// atomically and durably with internal/durable (temporary file, fsync, rename, fsync of the
// directory); what a new file supersedes (an offsets journal) is dropped only after the
// replacement returned. Every file operation of the store goes through the storeFS seam
// (fsys.go) — the store's LOCK, the ACL file and recovery's zeroing of a torn tail included;
// only mmap and munmap are direct — which tests replace to fail a chosen operation
// (faultfs_test.go, faultconfig_test.go). Every offset
// commit is appended to the journal offsets.log before it is visible, so a process crash
// loses none. On Open, records from the checkpoint on are validated (magic, lengths, body
// CRC, physical offset), a torn tail is truncated, and missing consume-queue entries are
// rebuilt. Retention deletes whole segments by age or total size and moves queue minimums.
//
// # Transactions
//
// A message with TRAN_MSG=true is stored as a half message (RMQ_SYS_TRANS_HALF_TOPIC) and
// reaches its topic only when EndTransaction commits it; rollback and the check-backs are
// op records (RMQ_SYS_TRANS_OP_HALF_TOPIC), so open transactions survive a restart.
// OpenTransactions counts them. transaction.go describes the records. In process
// (txn_local.go), Prepare stores a batch of half messages of a producer group in one
// append, EndTransactions decides them in chunks of 1,024 (skipping any already decided),
// and SetTransactionChecker registers a group's check-back function: it decides the
// group's open messages at once, then on the same schedule as a network producer's.
//
// # Key index
//
// Appends index their messages into Dir/index as they write them (index.go); after a
// start an indexer goroutine first catches up from the checkpoint (rebuilding lost or
// damaged files). QueryMessages finds a topic's messages by a KEYS entry or UNIQ_KEY,
// ViewMessage one by commit-log offset.
//
// # Filters
//
// Pulls are filtered by tag hash on the consume queue, or by a SQL92 selector (package
// broker/filter) evaluated on each record's properties; a selector that does not compile
// is refused with code 23.
//
// # Replication
//
// With Config.Role RoleSlave the broker copies Config.MasterAddr's commit log (replication.go)
// and rebuilds everything from it; it refuses writes. A master with ReplicationSync
// acknowledges appends only once a slave has them. Replication reports the state.
//
// # Network
//
// Serve speaks the name-server and broker request codes the rocketmq-client-go producer,
// push/pull consumers and admin client use (docs/broker.md lists them). Each request on a
// connection is handled concurrently (up to 1,024 at once), except sends and offset
// commits, which are applied in arrival order on the connection's reader; malformed or
// oversize frames, and connections silent for longer than the client expiry, are closed. A
// reply that cannot be written does not end a connection: what the peer sent before it
// closed is still read and handled.
//
// # Clusters
//
// Serve with an empty name-server address and Config.NameServers set runs a broker of a
// cluster: it registers with those name servers (package broker/namesrv, or Apache
// RocketMQ's) at start, every Config.RegisterInterval and whenever its topic table changes,
// and unregisters on Close (register.go). Routes then come from the name servers, which
// merge the queues of every broker of a topic.
// # Access control
//
// With Config.ACLFile (RocketMQ's plain_acl.yml), every request from the network is
// checked before it is handled, as RocketMQ's plain ACL checks it (acl.go): a signed
// AccessKey of the file, its signature (HMAC-SHA1, remoting.Credentials), and the topic and
// group permissions the request code needs; refused requests get NO_PERMISSION (16) with
// RocketMQ's message. The name server's requests on the name-server listener and the
// in-process API are not checked. The file is reloaded when it changes
// (Config.ACLReloadInterval) and by ReloadACL; one that does not parse leaves the rules in
// force. A slave signs its requests with Config.Credentials. docs/security.md has the rules.
//
// # Concurrency
//
// All methods are safe for concurrent use. One writer (Broker.wmu) appends; readers never
// block it. Long polls wait on a per-queue channel closed at every publish.
package broker
