package main

import (
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kong"

	"rsql/broker/remoting"
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
	CredentialFlags
}

// CredentialFlags sign a RocketMQ client's requests for brokers with access control
// (docs/security.md, "Broker access control"). The environment variables keep the secret
// out of the process list; neither key is ever printed.
type CredentialFlags struct {
	AccessKey string `name:"access-key" env:"RSQL_ACCESS_KEY" placeholder:"KEY" help:"Access key of a broker ACL account: sign RocketMQ requests with it (with --secret-key)."`
	SecretKey string `name:"secret-key" env:"RSQL_SECRET_KEY" placeholder:"KEY" help:"Secret key of that account (prefer the environment variable)."`
}

// Credentials returns the configured credentials (zero: sign nothing), or an error when
// only one of the two keys is given.
func (f CredentialFlags) Credentials() (remoting.Credentials, error) {
	if (f.AccessKey == "") != (f.SecretKey == "") {
		return remoting.Credentials{}, &exitError{"--access-key and --secret-key (RSQL_ACCESS_KEY, RSQL_SECRET_KEY) go together: give both or neither"}
	}
	return remoting.Credentials{AccessKey: f.AccessKey, SecretKey: f.SecretKey}, nil
}

// BrokerACLFlags turn on the access control of a broker this process serves.
type BrokerACLFlags struct {
	ACLFile string `name:"acl-file" env:"RSQL_ACL_FILE" type:"existingfile" placeholder:"FILE" help:"RocketMQ plain_acl.yml: the broker serves only requests signed by its accounts, with their permissions; reloaded when it changes or on SIGHUP (docs/security.md)."`
}

// SecurityFlags are the protections of a process that serves the Postgres wire (rsql
// server, the embedded default); docs/security.md explains each.
type SecurityFlags struct {
	Auth          string   `name:"auth" env:"RSQL_AUTH" enum:"trust,scram-sha-256," default:"" placeholder:"METHOD" help:"Postgres-wire authentication: trust (no password; a loopback listen address only) or scram-sha-256. Default: trust on a loopback address without an admin password, scram-sha-256 otherwise."`
	AdminPassword string   `name:"admin-password" env:"RSQL_ADMIN_PASSWORD" help:"With scram-sha-256: the password of the admin user rsql (created or reset at start). Without it, a first admin gets a generated password, printed once."`
	TLSCert       string   `name:"tls-cert" env:"RSQL_TLS_CERT" type:"existingfile" help:"PEM certificate of the Postgres wire, with its key: clients may then use sslmode=require or verify-full."`
	TLSKey        string   `name:"tls-key" env:"RSQL_TLS_KEY" type:"existingfile" help:"PEM private key of the TLS certificate."`
	TLSSelfSigned bool     `name:"tls-self-signed" help:"Generate a self-signed certificate in the data directory (once; its path is printed) and serve TLS with it."`
	TLSRequire    bool     `name:"tls-require" help:"Refuse Postgres-wire clients that do not use TLS."`
	FileRoot      []string `name:"file-root" env:"RSQL_FILE_ROOT" placeholder:"DIR" help:"Directory the file connector may read and write under (repeatable; relative paths start at the first). Default: the data directory's files/ (and, for the shell and rsql -c/-f, the working directory). / allows every path."`
	LimitFlags
}

// LimitFlags bound what one client can make the server do (docs/security.md, "Limits").
type LimitFlags struct {
	MaxConnections    int           `name:"max-connections" env:"RSQL_MAX_CONNECTIONS" default:"200" help:"Postgres-wire connections served at once; one more is told 53300 (-1: no limit)."`
	StartupTimeout    time.Duration `name:"startup-timeout" default:"10s" help:"Time a Postgres-wire client has to connect and authenticate."`
	MessageTimeout    time.Duration `name:"message-timeout" default:"60s" help:"Time a Postgres-wire message that has begun to arrive has to arrive whole."`
	IdleTimeout       time.Duration `name:"idle-timeout" default:"0s" help:"Close a Postgres-wire session idle that long between statements (0: never)."`
	MaxMessageBytes   int           `name:"max-message-bytes" default:"4194304" help:"Largest Postgres-wire message (a query, a Bind with its parameters)."`
	MaxStatementBytes int           `name:"max-statement-bytes" default:"1048576" help:"Longest statement (and query text of one message); longer fails with 54001."`
	MaxExprDepth      int           `name:"max-expr-depth" default:"1000" help:"Deepest expression nesting of a statement; deeper fails with 54001."`
	MaxExprNodes      int           `name:"max-expr-nodes" default:"100000" help:"Most expression nodes of a statement; more fails with 54001."`
	MaxInsertRows     int           `name:"max-insert-rows" default:"10000" help:"Most rows of one INSERT ... VALUES; more fails with 54000."`
	MaxResultBytes    int64         `name:"max-result-bytes" default:"67108864" help:"Most bytes of rows one pull query collects; more fails with 54000."`
	MaxParams         int           `name:"max-params" default:"65535" help:"Most parameters of one prepared statement."`
}

// BrokerClientFlags say which broker a RocketMQ client command (produce, consume, bench
// broker) talks to.
type BrokerClientFlags struct {
	NamesrvAddr string `name:"namesrv-addr" env:"RSQL_NAMESRV_ADDR" default:"127.0.0.1:9876" help:"Name server of the bundled broker to talk to."`
	Namesrv     string `name:"namesrv" env:"RSQL_NAMESRV" help:"External RocketMQ name server to talk to instead (overrides --namesrv-addr)."`
	CredentialFlags
}

// CLI is the whole command line. Each subcommand's type lives in its own file; the hidden
// default command (the shell, or -c/-f) takes its flags without being named.
type CLI struct {
	Shell   ShellCmd   `cmd:"" default:"withargs" help:"The default command (the name may be left out): start the whole system here and open the shell; with -c/-f, run statements and exit."`
	Serve   ServerCmd  `cmd:"" name:"server" help:"Run broker, engine and Postgres-wire server until SIGINT/SIGTERM."`
	Broker  BrokerCmd  `cmd:"" help:"Run only the bundled broker (name server + broker, RocketMQ protocol), or a broker of a cluster (--namesrv)."`
	Namesrv NamesrvCmd `cmd:"" help:"Run only a name server, for brokers started with rsql broker --namesrv."`
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
