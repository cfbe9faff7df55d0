package main

import (
	"fmt"
	"os"

	"github.com/alecthomas/kong"
)

// The flag groups below are embedded by the subcommands that take them, so each
// subcommand's --help lists exactly its own flags (docs/cli.md lists them per command).

// DataDirFlag is the data directory of a process that keeps local state.
type DataDirFlag struct {
	DataDir string `name:"data-dir" env:"RSQL_DATA_DIR" default:"./rsql-data" help:"All local state: broker store, RocksDB, catalog."`
}

// ListenFlags are the listen addresses of the whole system (rsql server, the embedded default).
type ListenFlags struct {
	PgAddr      string `name:"pg-addr" env:"RSQL_PG_ADDR" default:"127.0.0.1:5433" help:"Postgres-wire listen address."`
	NamesrvAddr string `name:"namesrv-addr" env:"RSQL_NAMESRV_ADDR" default:"127.0.0.1:9876" help:"Name-server listen address of the bundled broker."`
	BrokerAddr  string `name:"broker-addr" env:"RSQL_BROKER_ADDR" default:"127.0.0.1:10911" help:"Broker listen address of the bundled broker (not used with --namesrv)."`
	HTTPAddr    string `name:"http-addr" env:"RSQL_HTTP_ADDR" default:"127.0.0.1:8080" help:"HTTP listen address for the web console (/), its API (/api/v1/), /metrics and /healthz."`
}

// ClusterFlags select external services instead of the bundled ones.
type ClusterFlags struct {
	Namesrv  string `name:"namesrv" env:"RSQL_NAMESRV" help:"External RocketMQ name server to use instead of the bundled broker; topics are created on the master brokers of its cluster."`
	Postgres string `name:"postgres" env:"RSQL_POSTGRES" help:"Postgres URL: remote checkpoint store and shared catalog (several instances)."`
}

// BrokerClientFlags say which broker a RocketMQ client command (produce, consume, bench
// broker) talks to.
type BrokerClientFlags struct {
	NamesrvAddr string `name:"namesrv-addr" env:"RSQL_NAMESRV_ADDR" default:"127.0.0.1:9876" help:"Name server of the bundled broker to talk to."`
	Namesrv     string `name:"namesrv" env:"RSQL_NAMESRV" help:"External RocketMQ name server to talk to instead (overrides --namesrv-addr)."`
}

// CLI is the whole command line. Each subcommand's type lives in its own file; the hidden
// default command (the shell, or -c/-f) takes its flags without being named.
type CLI struct {
	Shell   ShellCmd   `cmd:"" default:"withargs" help:"The default command (the name may be left out): start the whole system here and open the shell; with -c/-f, run statements and exit."`
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

// kongOptions are the parser's name, description and error behaviour.
func kongOptions() []kong.Option {
	return []kong.Option{
		kong.Name("rsql"),
		kong.Description("rsql: a SQL streaming engine in one binary.\n\n" +
			"Without a command: `rsql` starts the whole system and opens the shell; `rsql -c SQL` or\n" +
			"`rsql -f FILE.sql` runs statements and exits (see rsql shell --help, and docs/cli.md)."),
		kong.UsageOnError(),
	}
}

func main() {
	var cli CLI
	ctx := kong.Parse(&cli, kongOptions()...)
	if err := ctx.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "rsql:", err)
		os.Exit(1)
	}
}
