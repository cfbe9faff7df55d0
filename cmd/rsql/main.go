package main

import (
	"fmt"
	"os"

	"github.com/alecthomas/kong"
)

// Common holds the flags every subcommand shares (CLI.md, "Common flags").
type Common struct {
	DataDir     string `name:"data-dir" env:"RSQL_DATA_DIR" default:"./rsql-data" help:"All local state: broker store, RocksDB, catalog."`
	PgAddr      string `name:"pg-addr" env:"RSQL_PG_ADDR" default:"127.0.0.1:5433" help:"Postgres-wire listen address."`
	NamesrvAddr string `name:"namesrv-addr" env:"RSQL_NAMESRV_ADDR" default:"127.0.0.1:9876" help:"Name-server listen address of the bundled broker."`
	BrokerAddr  string `name:"broker-addr" env:"RSQL_BROKER_ADDR" default:"127.0.0.1:10911" help:"Broker listen address of the bundled broker."`
	HTTPAddr    string `name:"http-addr" env:"RSQL_HTTP_ADDR" default:"127.0.0.1:8080" help:"HTTP listen address for /metrics and /healthz."`
	Namesrv     string `name:"namesrv" env:"RSQL_NAMESRV" help:"External RocketMQ name server to use instead of the bundled broker."`
	Postgres    string `name:"postgres" env:"RSQL_POSTGRES" help:"Postgres URL: remote checkpoint store and shared catalog."`
	Server      string `name:"server" env:"RSQL_SERVER" help:"Send statements to this rsql server over the Postgres wire."`
}

// CLI is the whole command line. Each subcommand's type lives in its own file.
type CLI struct {
	Common

	Command string `short:"c" name:"command" help:"Run these SQL statements and exit." xor:"input"`
	File    string `short:"f" name:"file" help:"Run the SQL statements in this file and exit." xor:"input" type:"existingfile"`
	Format  string `name:"format" enum:"table,json,csv," default:"" help:"Result format for -c/-f: table (default on a terminal) or json; for produce: json or csv input."`

	Shell   ShellCmd   `cmd:"" default:"1" hidden:"" help:"The embedded default: the whole system in this process, and the shell."`
	Serve   ServerCmd  `cmd:"" name:"server" help:"Run broker, engine and Postgres-wire server until SIGINT/SIGTERM."`
	Broker  BrokerCmd  `cmd:"" help:"Run only the bundled broker (name server + broker, RocketMQ protocol)."`
	Produce ProduceCmd `cmd:"" help:"Append records (JSON lines or CSV) to a topic."`
	Consume ConsumeCmd `cmd:"" help:"Print a topic's records as JSON lines."`
	Bench   BenchCmd   `cmd:"" help:"Benchmarks."`
	Version VersionCmd `cmd:"" help:"Print version information."`
}

// exitError is an error whose message is already user-facing; main prints it and exits 1.
type exitError struct{ msg string }

func (e *exitError) Error() string { return e.msg }

func main() {
	var cli CLI
	ctx := kong.Parse(&cli,
		kong.Name("rsql"),
		kong.Description("rsql: a SQL streaming engine in one binary."),
		kong.UsageOnError(),
		kong.Bind(&cli),
	)
	if err := ctx.Run(&cli.Common); err != nil {
		fmt.Fprintln(os.Stderr, "rsql:", err)
		os.Exit(1)
	}
}
