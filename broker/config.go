package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"rsql/broker/remoting"
)

// FlushMode says when an append is acknowledged relative to fsync.
type FlushMode int

const (
	// FlushAsync acknowledges an append once it is in the page cache; a flusher fsyncs every
	// Config.FlushInterval. A machine crash loses at most that interval; a process crash
	// (kill -9) loses nothing, because the page cache survives the process.
	FlushAsync FlushMode = iota
	// FlushSync acknowledges an append only after the commit log has been fsynced past it.
	// Concurrent appends share one fsync (group commit).
	FlushSync
)

func (m FlushMode) String() string {
	if m == FlushSync {
		return "sync"
	}
	return "async"
}

// ParseFlushMode maps "async" and "sync" to a FlushMode.
func ParseFlushMode(s string) (FlushMode, error) {
	switch s {
	case "async", "":
		return FlushAsync, nil
	case "sync":
		return FlushSync, nil
	}
	return 0, fmt.Errorf("broker: flush mode %q: want async or sync", s)
}

// Role says whether a broker takes writes (master) or copies a master's commit log (slave).
type Role int

const (
	// RoleMaster stores what producers send (the default).
	RoleMaster Role = iota
	// RoleSlave replicates Config.MasterAddr's commit log, rebuilds its queues and index
	// from it, serves reads, and refuses writes.
	RoleSlave
)

func (r Role) String() string {
	if r == RoleSlave {
		return "slave"
	}
	return "master"
}

// ParseRole maps "master" and "slave" to a Role.
func ParseRole(s string) (Role, error) {
	switch s {
	case "master", "":
		return RoleMaster, nil
	case "slave":
		return RoleSlave, nil
	}
	return 0, fmt.Errorf("broker: role %q: want master or slave", s)
}

// ReplicationMode says when a master acknowledges a send relative to its slaves.
type ReplicationMode int

const (
	// ReplicationAsync acknowledges without waiting for a slave (the default).
	ReplicationAsync ReplicationMode = iota
	// ReplicationSync acknowledges a send only when a slave has it (RocketMQ's SYNC_MASTER):
	// with no slave connected the send is stored but answered SLAVE_NOT_AVAILABLE (11), and
	// FLUSH_SLAVE_TIMEOUT (12) when no slave confirms it within Config.ReplicationTimeout.
	ReplicationSync
)

// ParseReplicationMode maps "async" and "sync" to a ReplicationMode.
func ParseReplicationMode(s string) (ReplicationMode, error) {
	switch s {
	case "async", "":
		return ReplicationAsync, nil
	case "sync":
		return ReplicationSync, nil
	}
	return 0, fmt.Errorf("broker: replication mode %q: want async or sync", s)
}

// DefaultDelayLevels are RocketMQ's delay levels 1..18.
var DefaultDelayLevels = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// Config configures a Broker. The zero value of every field means its default; call
// EnsureDefaults then Validate (Open does both).
type Config struct {
	// Dir holds the store: commitlog/, consumequeue/, topics.json, offsets.json, offsets.log,
	// checkpoint.
	Dir string
	// SegmentSize is the size of one commit-log file (default 1 GiB).
	SegmentSize int64
	// QueueFileEntries is the number of 20-byte entries per consume-queue file (default 300000).
	QueueFileEntries int
	// FlushMode: FlushAsync (default) or FlushSync.
	FlushMode FlushMode
	// FlushInterval is the async flush period (default 500 ms).
	FlushInterval time.Duration
	// CheckpointInterval is how often consume queues and offsets are flushed and the recovery
	// checkpoint advanced (default 5 s).
	CheckpointInterval time.Duration
	// ReleaseInterval is how often the pages of the mapped store files that are complete and
	// not being written leave the process's resident set (default 100 ms; negative: never;
	// resident.go).
	ReleaseInterval time.Duration
	// RetentionAge deletes commit-log segments whose newest record is older (default 72 h;
	// negative = keep forever).
	RetentionAge time.Duration
	// RetentionBytes deletes the oldest segments while the commit log is larger (0 = no limit).
	RetentionBytes int64
	// RetentionCheckInterval is how often retention runs (default 1 min).
	RetentionCheckInterval time.Duration
	// MaxMessageSize caps one stored record (default 4 MiB).
	MaxMessageSize int
	// MaxFrameSize caps one protocol frame (default 16 MiB).
	MaxFrameSize int
	// DefaultQueues is the queue count of auto-created topics (default 4).
	DefaultQueues int
	// DisableAutoCreate refuses sends to unknown topics instead of creating them.
	DisableAutoCreate bool
	// BrokerName and ClusterName appear in routes (defaults broker-a, DefaultCluster).
	BrokerName  string
	ClusterName string
	// DelayLevels are the delays of levels 1..n (default DefaultDelayLevels).
	DelayLevels []time.Duration
	// MaxPullWait caps a long poll (default 20 s).
	MaxPullWait time.Duration
	// ClientExpiry drops a client that has not sent a heartbeat for this long, and closes
	// its connection; a connection silent that long is closed too (default 120 s).
	ClientExpiry time.Duration
	// LockExpiry frees an orderly consumer's queue lock that was not renewed (default 60 s).
	LockExpiry time.Duration
	// TransactionTimeout is how long a prepared message may stay open before its producer
	// group is asked about it (default 6 s; a message's CHECK_IMMUNITY_TIME_IN_SECONDS can
	// only lengthen it).
	TransactionTimeout time.Duration
	// TransactionCheckInterval is the time between two checks of one open transaction
	// (default 30 s).
	TransactionCheckInterval time.Duration
	// TransactionCheckMax is how many checks an open transaction gets before it is
	// discarded to TRANS_CHECK_MAX_TIME_TOPIC (default 15).
	TransactionCheckMax int
	// DisableIndex turns the key index off (QUERY_MESSAGE then finds nothing).
	DisableIndex bool
	// IndexSlots and IndexEntries are the hash slots and the entry capacity of one key
	// index file (defaults 500,000 and 2,000,000: a 42 MB sparse file).
	IndexSlots   int
	IndexEntries int
	// IndexSpan is the time one index file covers at most (default 1 h).
	IndexSpan time.Duration
	// Role is RoleMaster (default) or RoleSlave; a slave needs MasterAddr, the master's
	// broker address, and the master's SegmentSize.
	Role       Role
	MasterAddr string
	// Replication is a master's acknowledgement mode (default ReplicationAsync).
	Replication ReplicationMode
	// ReplicationTimeout bounds a sync-replicated send's wait for a slave (default 5 s).
	ReplicationTimeout time.Duration
	// NameServers are the name servers (host:port) a broker serving without a name-server
	// listener of its own registers with (register.go); empty: none.
	NameServers []string
	// RegisterInterval is the period of the registrations that keep the broker alive at
	// its name servers (default 30 s, RocketMQ's; name servers forget it after 120 s).
	RegisterInterval time.Duration
	// AdvertiseAddr is the broker address routes give clients (default: the bound address,
	// 127.0.0.1 for an unspecified host), for a broker reached through another name.
	AdvertiseAddr string
	// ACLFile turns access control on: RocketMQ's plain_acl.yml, checked against every
	// request from the network (acl.go; docs/security.md). "" (default): off.
	ACLFile string
	// ACLReloadInterval is how often the ACL file is looked at for changes (default 500 ms;
	// negative: only ReloadACL reloads it).
	ACLReloadInterval time.Duration
	// Credentials sign the requests this broker sends to another (a slave's to its master,
	// whose ACL must know the account; replication needs an admin account).
	Credentials remoting.Credentials
	// Logger receives operational messages (default: discard).
	Logger *slog.Logger
	// fs is the file-system seam of the mapped files (default: the real one; tests inject
	// failures, fsys.go).
	fs storeFS
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.SegmentSize == 0 {
		c.SegmentSize = 1 << 30
	}
	if c.QueueFileEntries == 0 {
		c.QueueFileEntries = 300000
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = 500 * time.Millisecond
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = 5 * time.Second
	}
	if c.ReleaseInterval == 0 {
		c.ReleaseInterval = 100 * time.Millisecond
	}
	if c.RetentionAge == 0 {
		c.RetentionAge = 72 * time.Hour
	}
	if c.RetentionCheckInterval == 0 {
		c.RetentionCheckInterval = time.Minute
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 4 << 20
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = 16 << 20
	}
	if c.DefaultQueues == 0 {
		c.DefaultQueues = 4
	}
	if c.BrokerName == "" {
		c.BrokerName = "broker-a"
	}
	if c.ClusterName == "" {
		c.ClusterName = "DefaultCluster"
	}
	if len(c.DelayLevels) == 0 {
		c.DelayLevels = DefaultDelayLevels
	}
	if c.MaxPullWait == 0 {
		c.MaxPullWait = 20 * time.Second
	}
	if c.ClientExpiry == 0 {
		c.ClientExpiry = 120 * time.Second
	}
	if c.LockExpiry == 0 {
		c.LockExpiry = 60 * time.Second
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = 6 * time.Second
	}
	if c.TransactionCheckInterval == 0 {
		c.TransactionCheckInterval = 30 * time.Second
	}
	if c.TransactionCheckMax == 0 {
		c.TransactionCheckMax = 15
	}
	if c.IndexSlots == 0 {
		c.IndexSlots = 500_000
	}
	if c.IndexEntries == 0 {
		c.IndexEntries = 2_000_000
	}
	if c.IndexSpan == 0 {
		c.IndexSpan = time.Hour
	}
	if c.ReplicationTimeout == 0 {
		c.ReplicationTimeout = 5 * time.Second
	}
	if c.RegisterInterval == 0 {
		c.RegisterInterval = 30 * time.Second
	}
	if c.ACLReloadInterval == 0 {
		c.ACLReloadInterval = 500 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.fs == nil {
		c.fs = osFS{}
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("broker: Config.Dir is empty"))
	}
	if c.SegmentSize < 64<<10 {
		errs = append(errs, fmt.Errorf("broker: Config.SegmentSize %d is below 64 KiB", c.SegmentSize))
	}
	if c.MaxMessageSize <= 0 || int64(c.MaxMessageSize)+recordFixedSize+blankSize > c.SegmentSize {
		errs = append(errs, fmt.Errorf("broker: Config.MaxMessageSize %d must be positive and fit in a segment of %d bytes", c.MaxMessageSize, c.SegmentSize))
	}
	if c.QueueFileEntries < 16 {
		errs = append(errs, fmt.Errorf("broker: Config.QueueFileEntries %d is below 16", c.QueueFileEntries))
	}
	if c.FlushInterval < 0 || c.CheckpointInterval < 0 || c.RetentionCheckInterval < 0 {
		errs = append(errs, errors.New("broker: intervals must not be negative"))
	}
	if c.DefaultQueues < 1 || c.DefaultQueues > 1024 {
		errs = append(errs, fmt.Errorf("broker: Config.DefaultQueues %d is outside 1..1024", c.DefaultQueues))
	}
	if c.FlushMode != FlushAsync && c.FlushMode != FlushSync {
		errs = append(errs, fmt.Errorf("broker: Config.FlushMode %d is unknown", c.FlushMode))
	}
	if c.TransactionTimeout < 0 || c.TransactionCheckInterval < 0 || c.TransactionCheckMax < 0 {
		errs = append(errs, errors.New("broker: transaction timeout, check interval and check maximum must not be negative"))
	}
	if c.IndexSlots < 1 || c.IndexSlots > 1<<26 || c.IndexEntries < 16 || c.IndexEntries > 1<<28 || c.IndexSpan < 0 {
		errs = append(errs, fmt.Errorf("broker: index geometry %d slots × %d entries (span %v) is out of range", c.IndexSlots, c.IndexEntries, c.IndexSpan))
	}
	if c.ClientExpiry < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("broker: Config.ClientExpiry %v is below 100 ms", c.ClientExpiry))
	}
	if c.Role == RoleSlave && c.MasterAddr == "" {
		errs = append(errs, errors.New("broker: a slave needs Config.MasterAddr"))
	}
	if c.Role == RoleSlave && c.Replication == ReplicationSync {
		errs = append(errs, errors.New("broker: sync replication is a master's setting"))
	}
	if c.Role != RoleMaster && c.Role != RoleSlave || c.Replication != ReplicationAsync && c.Replication != ReplicationSync {
		errs = append(errs, fmt.Errorf("broker: Config.Role %d or Config.Replication %d is unknown", c.Role, c.Replication))
	}
	if c.RegisterInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("broker: Config.RegisterInterval %v is below 10 ms", c.RegisterInterval))
	}
	if c.MaxFrameSize < 1024 {
		errs = append(errs, fmt.Errorf("broker: Config.MaxFrameSize %d is below 1 KiB", c.MaxFrameSize))
	}
	return errors.Join(errs...)
}
