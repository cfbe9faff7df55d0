package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"rsql/broker/namesrv"
)

// NamesrvCmd runs a name server alone: brokers started with `rsql broker --namesrv` register
// with it, and clients (the engine, rsql produce/consume, any RocketMQ client) ask it for
// routes.
type NamesrvCmd struct {
	DataDirFlag
	NamesrvAddr  string        `name:"namesrv-addr" env:"RSQL_NAMESRV_ADDR" default:"127.0.0.1:9876" help:"Name-server listen address."`
	BrokerExpiry time.Duration `name:"broker-expiry" default:"120s" help:"Forget a broker that has not registered for this long (its queues leave the routes)."`
}

func (c *NamesrvCmd) Run() error {
	if c.BrokerExpiry < 100*time.Millisecond {
		return &exitError{fmt.Sprintf("--broker-expiry %v: want at least 100ms", c.BrokerExpiry)}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dir := filepath.Join(c.DataDir, "namesrv")
	s := namesrv.New(namesrv.Config{Dir: dir, BrokerExpiry: c.BrokerExpiry, Logger: log})
	if err := s.Serve(c.NamesrvAddr); err != nil {
		return &exitError{fmt.Sprintf("%v (is another name server running? pick a free port with --namesrv-addr)", err)}
	}
	log.Info("name server ready", "addr", s.Addr(), "dir", dir, "broker-expiry", c.BrokerExpiry)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	log.Info("stopping name server")
	return s.Close()
}
