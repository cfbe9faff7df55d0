package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"rsql/server"
)

// ServerCmd is `rsql server`: broker, engine and servers until SIGINT/SIGTERM.
type ServerCmd struct {
	DataDirFlag
	ListenFlags
	ClusterFlags
	StateBackend string `name:"state-backend" default:"rocksdb" enum:"rocksdb,memory" help:"Where operator state lives."`
	HeapProfile  string `name:"heap-profile" hidden:"" help:"On SIGUSR1, write a heap profile to this file (rsql bench memory)."`
}

func (c *ServerCmd) Run() error {
	sys, err := startSystem(c.DataDir, c.ListenFlags, c.ClusterFlags, c.StateBackend)
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
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "rsql: stopping (checkpointing jobs, flushing the broker)")
	if err := sys.Close(); err != nil {
		return &exitError{err.Error()}
	}
	return nil
}

func startSystem(dataDir string, l ListenFlags, cf ClusterFlags, backend string) (*server.System, error) {
	sys, err := server.StartSystem(server.SystemConfig{
		DataDir: dataDir, PgAddr: l.PgAddr, NamesrvAddr: l.NamesrvAddr, BrokerAddr: l.BrokerAddr,
		HTTPAddr: l.HTTPAddr, StateBackend: backend, Version: version,
		ExternalNamesrv: cf.Namesrv, Postgres: cf.Postgres,
	})
	if err != nil {
		if errors.Is(err, server.ErrDataDirLocked) {
			return nil, &exitError{err.Error()}
		}
		return nil, &exitError{fmt.Sprintf("%v (is another rsql running? pass other addresses with --pg-addr, --namesrv-addr, --broker-addr, --http-addr)", err)}
	}
	return sys, nil
}

func banner(w *os.File, dataDir string, l ListenFlags, cf ClusterFlags, sys *server.System) {
	fmt.Fprintf(w, "rsql %s\n", version)
	fmt.Fprintf(w, "  data directory  %s\n", dataDir)
	fmt.Fprintf(w, "  Postgres wire   %s   (psql -h %s)\n", sys.PgAddr(), hostPort(sys.PgAddr()))
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
}

func hostPort(addr string) string {
	h, p, ok := cutLast(addr, ":")
	if !ok {
		return addr
	}
	return h + " -p " + p
}
