package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"rsql/server"
)

// ServerCmd is `rsql server`: broker, engine and servers until SIGINT/SIGTERM.
type ServerCmd struct {
	StateBackend string `name:"state-backend" default:"rocksdb" enum:"rocksdb,memory" help:"Where operator state lives."`
}

func (c *ServerCmd) Run(cm *Common) error {
	sys, err := startSystem(cm, c.StateBackend)
	if err != nil {
		return err
	}
	banner(os.Stderr, cm, sys)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "rsql: stopping (checkpointing jobs, flushing the broker)")
	if err := sys.Close(); err != nil {
		return &exitError{err.Error()}
	}
	return nil
}

func startSystem(cm *Common, backend string) (*server.System, error) {
	sys, err := server.StartSystem(server.SystemConfig{
		DataDir: cm.DataDir, PgAddr: cm.PgAddr, NamesrvAddr: cm.NamesrvAddr, BrokerAddr: cm.BrokerAddr,
		HTTPAddr: cm.HTTPAddr, StateBackend: backend, Version: version,
		ExternalNamesrv: cm.Namesrv, Postgres: cm.Postgres,
	})
	if err != nil {
		if errors.Is(err, server.ErrDataDirLocked) {
			return nil, &exitError{err.Error()}
		}
		return nil, &exitError{fmt.Sprintf("%v (is another rsql running? pass other addresses with --pg-addr, --namesrv-addr, --broker-addr, --http-addr)", err)}
	}
	return sys, nil
}

func banner(w *os.File, cm *Common, sys *server.System) {
	fmt.Fprintf(w, "rsql %s\n", version)
	fmt.Fprintf(w, "  data directory  %s\n", cm.DataDir)
	fmt.Fprintf(w, "  Postgres wire   %s   (psql -h %s)\n", sys.PgAddr(), hostPort(sys.PgAddr()))
	if cm.Namesrv != "" {
		fmt.Fprintf(w, "  topics          on the RocketMQ cluster of name server %s (no bundled broker)\n", cm.Namesrv)
	} else {
		fmt.Fprintf(w, "  name server     %s   (RocketMQ clients: NameServer %s)\n", cm.NamesrvAddr, cm.NamesrvAddr)
		fmt.Fprintf(w, "  broker          %s\n", cm.BrokerAddr)
	}
	if cm.Postgres != "" {
		fmt.Fprintf(w, "  checkpoints     Postgres, shared with the other instances (catalog, splits, membership)\n")
	}
	fmt.Fprintf(w, "  HTTP            http://%s/metrics, /healthz\n", cm.HTTPAddr)
}

func hostPort(addr string) string {
	h, p, ok := cutLast(addr, ":")
	if !ok {
		return addr
	}
	return h + " -p " + p
}
