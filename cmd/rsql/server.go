package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"rsql/server"
	"rsql/sql"
)

// ServerCmd is `rsql server`: broker, engine and servers until SIGINT/SIGTERM.
type ServerCmd struct {
	DataDirFlag
	ListenFlags
	ClusterFlags
	SecurityFlags
	BrokerACLFlags
	GoMemoryFlag
	StateBackend string `name:"state-backend" default:"rocksdb" enum:"rocksdb,memory" help:"Where operator state lives."`
	AggCache     int    `name:"agg-cache-groups" default:"0" help:"Groups an aggregation without a window (partitions of a Top-N or a window aggregate without one) keeps in memory with RocksDB state, the rest read back from the store (0: 16384, 16384/N, 16384/(n+1); negative: all)."`
	JoinCache    int    `name:"join-cache-keys" default:"0" help:"Join keys a regular join without a state TTL keeps in memory with RocksDB state, the rest read back from the store (0: 16384; negative: all)."`
	HeapProfile  string `name:"heap-profile" hidden:"" help:"On SIGUSR1, write a heap profile to this file (rsql bench memory)."`
}

func (c *ServerCmd) Run() error {
	if c.ACLFile != "" && c.Namesrv != "" {
		return &exitError{"--acl-file protects the bundled broker, which --namesrv replaces: set access control on that cluster's brokers"}
	}
	c.GoMemoryFlag.apply(c.StateBackend == "rocksdb")
	sys, err := startSystem(c.DataDir, c.ListenFlags, c.ClusterFlags, c.SecurityFlags, c.ACLFile, nil, c.StateBackend, c.AggCache, c.JoinCache)
	if err != nil {
		return err
	}
	banner(os.Stderr, c.DataDir, c.ListenFlags, c.ClusterFlags, sys)
	if c.HeapProfile != "" {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		go func() {
			for range usr1 {
				// The profile, and as text (with the runtime's memory statistics) beside it.
				for i, name := range []string{c.HeapProfile, c.HeapProfile + ".txt"} {
					if f, err := os.Create(name); err == nil {
						pprof.Lookup("heap").WriteTo(f, i)
						f.Close()
					}
				}
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if sys.Broker != nil && c.ACLFile != "" {
		reloadACLOnHangup(ctx, sys.Broker)
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "rsql: stopping (checkpointing jobs, flushing the broker)")
	if err := sys.Close(); err != nil {
		return &exitError{err.Error()}
	}
	return nil
}

// startSystem starts the whole system. fileRoots are the file roots when --file-root is
// not given (nil: the engine's default, the data directory's files/); aclFile turns the
// bundled broker's access control on.
func startSystem(dataDir string, l ListenFlags, cf ClusterFlags, sf SecurityFlags, aclFile string, fileRoots []string, backend string, aggCache, joinCache int) (*server.System, error) {
	if len(sf.FileRoot) > 0 {
		fileRoots = sf.FileRoot
	}
	creds, err := cf.Credentials()
	if err != nil {
		return nil, err
	}
	lf := sf.LimitFlags
	sys, err := server.StartSystem(server.SystemConfig{
		DataDir: dataDir, PgAddr: l.PgAddr, NamesrvAddr: l.NamesrvAddr, BrokerAddr: l.BrokerAddr,
		HTTPAddr: l.HTTPAddr, StateBackend: backend, AggCacheGroups: aggCache, JoinCacheKeys: joinCache, Version: version,
		ExternalNamesrv: cf.Namesrv, Postgres: cf.Postgres, BrokerACLFile: aclFile, BrokerCredentials: creds,
		Auth: sf.Auth, AdminPassword: sf.AdminPassword,
		TLSCert: sf.TLSCert, TLSKey: sf.TLSKey, TLSSelfSigned: sf.TLSSelfSigned, TLSRequire: sf.TLSRequire,
		FileRoots: fileRoots,
		Limits: sql.Limits{MaxStatementBytes: lf.MaxStatementBytes, MaxExprDepth: lf.MaxExprDepth,
			MaxExprNodes: lf.MaxExprNodes, MaxInsertRows: lf.MaxInsertRows},
		MaxResultBytes: lf.MaxResultBytes,
		PG: server.PGConfig{MaxConnections: lf.MaxConnections, StartupTimeout: lf.StartupTimeout,
			MessageTimeout: lf.MessageTimeout, IdleTimeout: lf.IdleTimeout, MaxMessageBytes: lf.MaxMessageBytes,
			MaxParams: lf.MaxParams},
	})
	if err != nil {
		if errors.Is(err, server.ErrDataDirLocked) {
			return nil, &exitError{err.Error()}
		}
		var ne *net.OpError
		if errors.As(err, &ne) && ne.Op == "listen" {
			return nil, &exitError{fmt.Sprintf("%v (is another rsql running? pass other addresses with --pg-addr, --namesrv-addr, --broker-addr, --http-addr)", err)}
		}
		return nil, &exitError{err.Error()}
	}
	return sys, nil
}

func banner(w *os.File, dataDir string, l ListenFlags, cf ClusterFlags, sys *server.System) {
	fmt.Fprintf(w, "rsql %s\n", version)
	fmt.Fprintf(w, "  data directory  %s\n", dataDir)
	fmt.Fprintf(w, "  Postgres wire   %s   (psql -h %s -U %s)\n", sys.PgAddr(), hostPort(sys.PgAddr()), server.AdminUser)
	if cf.Namesrv != "" {
		fmt.Fprintf(w, "  topics          on the RocketMQ cluster of name server %s (no bundled broker)\n", cf.Namesrv)
	} else {
		fmt.Fprintf(w, "  name server     %s   (RocketMQ clients: NameServer %s)\n", l.NamesrvAddr, l.NamesrvAddr)
		fmt.Fprintf(w, "  broker          %s\n", l.BrokerAddr)
	}
	if cf.Postgres != "" {
		fmt.Fprintf(w, "  checkpoints     Postgres, shared with the other instances (catalog, splits, membership)\n")
	}
	fmt.Fprintf(w, "  web console     http://%s/   (API /api/v1/, /metrics, /healthz)\n", l.HTTPAddr)
	switch sys.Auth {
	case server.AuthTrust:
		fmt.Fprintf(w, "  clients         trust: no password, from this machine only (docs/security.md)\n")
	default:
		fmt.Fprintf(w, "  clients         password (scram-sha-256); admin user %s\n", server.AdminUser)
	}
	if st := sys.Broker; st != nil && st.ACL().File != "" {
		fmt.Fprintf(w, "  broker ACL      %s (%d accounts; reloaded when it changes or on SIGHUP)\n", st.ACL().File, st.ACL().Accounts)
	}
	if sys.TLSCertFile != "" {
		fmt.Fprintf(w, "  TLS             %s\n", sys.TLSCertFile)
	}
	fmt.Fprintf(w, "  files           under %s\n", strings.Join(sys.Engine.FileRoots(), ", "))
}

func hostPort(addr string) string {
	h, p, ok := cutLast(addr, ":")
	if !ok {
		return addr
	}
	return h + " -p " + p
}
