package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"rsql/broker"
)

// BrokerFlags configure the bundled broker's store (used by `rsql broker`; other commands
// that embed the broker may reuse them).
type BrokerFlags struct {
	SegmentSize    string        `name:"segment-size" default:"1GiB" help:"Commit-log segment size (e.g. 1GiB, 64MiB)."`
	Flush          string        `name:"flush" enum:"async,sync" default:"async" help:"async: fsync every --flush-interval; sync: acknowledge a send only after fsync."`
	FlushInterval  time.Duration `name:"flush-interval" default:"500ms" help:"Asynchronous flush period."`
	RetentionAge   time.Duration `name:"retention-age" default:"72h" help:"Delete commit-log segments older than this (negative: never)."`
	RetentionBytes string        `name:"retention-bytes" default:"0" help:"Delete the oldest segments while the log is larger (0: no limit)."`
	LockExpiry     time.Duration `name:"lock-expiry" default:"60s" help:"Free an orderly consumer's queue lock not renewed for this long."`
	ClientExpiry   time.Duration `name:"client-expiry" default:"120s" help:"Drop a client without a heartbeat for this long (its consumers leave their groups) and close idle connections."`
	Role           string        `name:"role" enum:"master,slave" default:"master" help:"master: take writes; slave: copy --master's commit log and serve reads."`
	Master         string        `name:"master" help:"The master's broker address (host:port) a slave copies."`
	Replication    string        `name:"replication" enum:"async,sync" default:"async" help:"A master's acknowledgement: sync waits until a slave has the message."`
	ReplTimeout    time.Duration `name:"replication-timeout" default:"5s" help:"How long a sync-replicated send waits for a slave."`
	TxnTimeout     time.Duration `name:"transaction-timeout" default:"6s" help:"Ask the producer group about a prepared message still open this long after it was sent."`
	TxnInterval    time.Duration `name:"transaction-check-interval" default:"30s" help:"Time between two checks of one open transaction."`
	TxnCheckMax    int           `name:"transaction-check-max" default:"15" help:"Discard an open transaction (to TRANS_CHECK_MAX_TIME_TOPIC) after this many checks."`
}

// Config maps the flags onto a broker.Config rooted in dataDir/broker.
func (f *BrokerFlags) Config(dataDir string) (broker.Config, error) {
	seg, err := parseBytes(f.SegmentSize)
	if err != nil {
		return broker.Config{}, fmt.Errorf("--segment-size: %w", err)
	}
	ret, err := parseBytes(f.RetentionBytes)
	if err != nil {
		return broker.Config{}, fmt.Errorf("--retention-bytes: %w", err)
	}
	mode, err := broker.ParseFlushMode(f.Flush)
	if err != nil {
		return broker.Config{}, err
	}
	role, err := broker.ParseRole(f.Role)
	if err != nil {
		return broker.Config{}, err
	}
	repl, err := broker.ParseReplicationMode(f.Replication)
	if err != nil {
		return broker.Config{}, err
	}
	if role == broker.RoleSlave && f.Master == "" {
		return broker.Config{}, fmt.Errorf("--role slave needs --master host:port (the master's broker address)")
	}
	if role == broker.RoleMaster && f.Master != "" {
		return broker.Config{}, fmt.Errorf("--master is for --role slave")
	}
	if role == broker.RoleSlave && repl == broker.ReplicationSync {
		return broker.Config{}, fmt.Errorf("--replication sync is set on the master")
	}
	cfg := broker.Config{Dir: filepath.Join(dataDir, "broker"), SegmentSize: seg, FlushMode: mode,
		FlushInterval: f.FlushInterval, RetentionAge: f.RetentionAge, RetentionBytes: ret,
		LockExpiry: f.LockExpiry, ClientExpiry: f.ClientExpiry, TransactionTimeout: f.TxnTimeout, TransactionCheckInterval: f.TxnInterval,
		TransactionCheckMax: f.TxnCheckMax, Role: role, MasterAddr: f.Master, Replication: repl,
		ReplicationTimeout: f.ReplTimeout}
	if f.TxnCheckMax < 1 {
		return broker.Config{}, fmt.Errorf("--transaction-check-max %d: want at least 1", f.TxnCheckMax)
	}
	if cfg.MaxMessageSize == 0 && seg > 0 && seg < 8<<20 {
		cfg.MaxMessageSize = int(seg / 4)
	}
	return cfg, nil
}

// parseBytes reads sizes such as 1048576, 64KiB, 64MiB, 1GiB (KB/MB/GB are taken as powers of two).
func parseBytes(s string) (int64, error) {
	var n int64
	var unit string
	if _, err := fmt.Sscanf(s, "%d%s", &n, &unit); err != nil {
		if _, err2 := fmt.Sscanf(s, "%d", &n); err2 != nil {
			return 0, fmt.Errorf("%q is not a size (e.g. 64MiB)", s)
		}
		unit = ""
	}
	mult := map[string]int64{"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
		"MiB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GiB": 1 << 30}[unit]
	if mult == 0 || n < 0 {
		return 0, fmt.Errorf("%q is not a size (e.g. 64MiB)", s)
	}
	return n * mult, nil
}

// reloadACLOnHangup reloads b's ACL file on every SIGHUP until ctx ends (the broker logs
// the outcome; a file that does not parse leaves the rules in force).
func reloadACLOnHangup(ctx context.Context, b *broker.Broker) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				b.ReloadACL()
			}
		}
	}()
}

// BrokerCmd runs only the bundled broker: with its own name server (the default), or
// registered with the name servers of a cluster (--namesrv).
type BrokerCmd struct {
	DataDirFlag
	NamesrvAddr string        `name:"namesrv-addr" env:"RSQL_NAMESRV_ADDR" default:"127.0.0.1:9876" help:"Name-server listen address (none when the broker registers with name servers)."`
	BrokerAddr  string        `name:"broker-addr" env:"RSQL_BROKER_ADDR" default:"127.0.0.1:10911" help:"Broker listen address."`
	Namesrv     string        `name:"namesrv" env:"RSQL_NAMESRV" placeholder:"HOST:PORT[;HOST:PORT]" help:"Register with these name servers (rsql namesrv, or Apache RocketMQ's) instead of running one: the broker joins their cluster."`
	BrokerName  string        `name:"broker-name" default:"broker-a" help:"The broker's name in routes (unique in the cluster; a slave takes its master's)."`
	Cluster     string        `name:"cluster" default:"DefaultCluster" help:"The cluster the broker registers in."`
	Advertise   string        `name:"advertise-addr" help:"Broker address given to clients in routes (default: --broker-addr; set it when clients reach the broker by another name)."`
	RegisterInt time.Duration `name:"register-interval" default:"30s" help:"With --namesrv: how often the broker registers again (its heartbeat; name servers forget a broker silent for their expiry)."`
	BrokerFlags `embed:""`
	BrokerACLFlags
	// A slave signs its requests to the master with these (replication needs an admin
	// account of the master's ACL).
	CredentialFlags
}

// nameServers splits a RocketMQ name-server list ("a:9876;b:9876", commas allowed too).
func nameServers(list string) []string {
	var out []string
	for _, a := range strings.FieldsFunc(list, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		out = append(out, a)
	}
	return out
}

func (c *BrokerCmd) Run() error {
	cfg, err := c.Config(c.DataDir)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Logger = log
	cfg.BrokerName, cfg.ClusterName, cfg.AdvertiseAddr = c.BrokerName, c.Cluster, c.Advertise
	nsListen := c.NamesrvAddr
	if c.Namesrv != "" {
		cfg.NameServers = nameServers(c.Namesrv)
		cfg.RegisterInterval = c.RegisterInt
		if len(cfg.NameServers) == 0 {
			return &exitError{fmt.Sprintf("--namesrv %q names no name server (want host:port[;host:port])", c.Namesrv)}
		}
		if c.RegisterInt < 100*time.Millisecond {
			return &exitError{fmt.Sprintf("--register-interval %v: want at least 100ms", c.RegisterInt)}
		}
		nsListen = ""
	}
	cfg.ACLFile = c.ACLFile
	if cfg.Credentials, err = c.Credentials(); err != nil {
		return err
	}
	b, err := broker.Open(cfg)
	if err != nil {
		return &exitError{fmt.Sprintf("cannot open the broker store in %s: %v", cfg.Dir, err)}
	}
	if err := b.Serve(nsListen, c.BrokerAddr); err != nil {
		b.Close()
		return &exitError{fmt.Sprintf("%v (is another rsql running? pick free ports with --namesrv-addr and --broker-addr)", err)}
	}
	ns, ba := b.Addrs()
	if ns == "" {
		ns = "registers with " + strings.Join(cfg.NameServers, ";")
	}
	log.Info("broker ready", "namesrv", ns, "broker", ba, "name", cfg.BrokerName, "cluster", cfg.ClusterName,
		"dir", cfg.Dir, "flush", cfg.FlushMode.String(), "role", cfg.Role.String(), "master", cfg.MasterAddr)
	if acl := b.ACL(); acl.File != "" {
		log.Info("access control on", "acl_file", acl.File, "accounts", acl.Accounts)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if c.ACLFile != "" {
		reloadACLOnHangup(ctx, b)
	}
	<-ctx.Done()
	log.Info("stopping broker")
	if err := b.Close(); err != nil {
		return fmt.Errorf("closing the broker: %w", err)
	}
	return nil
}
