package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"rsql/broker"
	"rsql/broker/remoting"
	"rsql/connectors"
	"rsql/exec"
	"rsql/internal/listen"
	"rsql/server/cluster"
	"rsql/server/console"
	"rsql/sql"
	"rsql/state"
)

// SystemConfig configures the whole rsql system of one process: the bundled broker, the
// engine, the Postgres-wire server and HTTP. An empty listen address turns that listener off.
type SystemConfig struct {
	DataDir     string
	PgAddr      string
	NamesrvAddr string
	BrokerAddr  string
	HTTPAddr    string
	// StateBackend, AggCacheGroups, JoinCacheKeys: see Config.
	StateBackend   string
	AggCacheGroups int
	JoinCacheKeys  int
	Log            io.Writer
	Version        string
	// ExternalNamesrv, when set, is a RocketMQ name server (for example another rsql
	// server's bundled broker) that this process uses instead of running a broker; missing
	// topics are created on the master brokers of its cluster (connectors.RocketMQConfig).
	// NamesrvAddr and BrokerAddr, listen addresses of the bundled broker, are then unused.
	ExternalNamesrv string
	// Postgres, when set, is the URL of the checkpoint store, catalog and membership that
	// several instances share (cluster mode, cluster.go).
	Postgres string
	// BrokerACLFile turns the bundled broker's access control on (broker.Config.ACLFile;
	// docs/security.md): requests from the network must be signed by an account of the
	// file. The engine reaches the bundled broker in process, unchecked. Its log lines
	// (refusals, reloads) go to Log.
	BrokerACLFile string
	// BrokerCredentials sign the engine's requests to ExternalNamesrv's cluster, for
	// brokers with access control.
	BrokerCredentials remoting.Credentials

	// Security (docs/security.md).

	// Auth is the Postgres wire's authentication: "trust", "scram-sha-256", or "" for the
	// default: trust when PgAddr is a loopback address and no AdminPassword is given,
	// scram-sha-256 otherwise. trust with a PgAddr that is not loopback is refused.
	Auth string
	// AdminPassword, with scram-sha-256, is the password of the admin user "rsql" (created,
	// or reset, at start). Without it a first admin gets a generated password, printed
	// once to Log.
	AdminPassword string
	// TLSCert and TLSKey are PEM files of the Postgres wire's certificate and key;
	// TLSSelfSigned generates a pair in DataDir/tls instead (once; its path is printed).
	TLSCert, TLSKey string
	TLSSelfSigned   bool
	// TLSRequire refuses clients that do not negotiate TLS.
	TLSRequire bool
	// FileRoots: see Config.FileRoots.
	FileRoots []string
	// Limits, MaxResultBytes: see Config.
	Limits         sql.Limits
	MaxResultBytes int64
	// PG holds the Postgres wire's connection limits and timeouts (MaxConnections,
	// StartupTimeout, MessageTimeout, IdleTimeout, MaxMessageBytes); the fields this
	// config sets itself (version, auth, TLS, users, logger) are ignored there.
	PG PGConfig
	// Notices receives the lines meant for the operator once (a generated admin password,
	// the self-signed certificate's path); default Log.
	Notices io.Writer
}

// System is broker, engine and servers running together.
type System struct {
	Engine  *Engine
	Broker  *broker.Broker // nil with ExternalNamesrv
	pgStore *state.PostgresCheckpointStore
	pg      *PGServer
	pgLn    net.Listener
	http    *http.Server
	httpLn  net.Listener
	console *console.Console
	// Auth is the Postgres wire's authentication method in effect.
	Auth AuthMethod
	// TLSCertFile is the certificate the Postgres wire presents ("" without TLS).
	TLSCertFile string

	httpMu      sync.Mutex
	httpStopped error // why the HTTP listener stopped, if it did
}

// StartSystem opens the broker store and the engine in cfg.DataDir and starts the listeners.
func StartSystem(cfg SystemConfig) (*System, error) {
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "./rsql-data"
	}
	// The engine takes the data-directory lock first, so a second process fails cleanly
	// before touching the broker's files.
	if cfg.Notices == nil {
		cfg.Notices = cfg.Log
	}
	auth, err := chooseAuth(cfg)
	if err != nil {
		return nil, err
	}
	eng, err := Open(Config{DataDir: cfg.DataDir, StateBackend: cfg.StateBackend, AggCacheGroups: cfg.AggCacheGroups, JoinCacheKeys: cfg.JoinCacheKeys, Log: cfg.Log, deferJobs: true,
		FileRoots: cfg.FileRoots, Limits: cfg.Limits, MaxResultBytes: cfg.MaxResultBytes})
	if err != nil {
		return nil, err
	}
	s := &System{Engine: eng, Auth: auth}
	var b *broker.Broker
	if cfg.ExternalNamesrv != "" {
		// Missing topics (a job's sink or shuffle topic) are created on the cluster's masters,
		// which the name server names.
		eng.cfg.RocketMQ = &connectors.RocketMQConfig{NameServer: cfg.ExternalNamesrv, CreateTopics: true, Group: "rsql-server",
			Credentials: cfg.BrokerCredentials}
	} else {
		bcfg := broker.Config{Dir: filepath.Join(cfg.DataDir, "broker"), ACLFile: cfg.BrokerACLFile}
		if cfg.BrokerACLFile != "" {
			bcfg.Logger = slog.New(slog.NewTextHandler(cfg.Log, nil)).With("component", "broker")
		}
		b, err = broker.Open(bcfg)
		if err != nil {
			eng.Close()
			return nil, fmt.Errorf("open broker store: %w", err)
		}
		s.Broker = b
		eng.cfg.Broker = b
		if cfg.NamesrvAddr != "" || cfg.BrokerAddr != "" {
			if err := b.Serve(cfg.NamesrvAddr, cfg.BrokerAddr); err != nil {
				s.Close()
				return nil, fmt.Errorf("broker listeners: %w", err)
			}
		}
	}
	if cfg.Postgres != "" {
		if err := s.startCluster(cfg); err != nil {
			s.Close()
			return nil, err
		}
	} else {
		eng.startRecorded()
	}
	if cfg.PgAddr != "" {
		pgc, err := s.pgConfig(cfg)
		if err != nil {
			s.Close()
			return nil, err
		}
		ln, err := net.Listen("tcp", cfg.PgAddr)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("Postgres-wire listener on %s: %w", cfg.PgAddr, err)
		}
		s.pgLn = ln
		s.pg = NewPGServer(eng, pgc)
		go s.pg.Serve(ln)
	}
	if cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("HTTP listener on %s: %w", cfg.HTTPAddr, err)
		}
		s.httpLn = ln
		reg := prometheus.NewRegistry()
		reg.MustRegister(&engineCollector{e: eng}, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
		if b != nil {
			reg.MustRegister(&storeCollector{b: b, dataDir: cfg.DataDir})
		}
		mux := http.NewServeMux()
		// A metric that fails to collect is logged and left out; the others are still
		// served (docs/operations.md, "Metrics").
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
			ErrorLog: slog.NewLogLogger(slog.NewTextHandler(cfg.Log, nil).WithAttrs([]slog.Attr{slog.String("component", "metrics")}), slog.LevelError)}))
		mux.HandleFunc("/healthz", s.healthz)
		// The web console and its API (server/console), answering to the wire's
		// authentication.
		s.console = console.New(consoleEngine{eng}, b, s.Auth)
		mux.Handle("/", s.console)
		s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			ErrorLog: slog.NewLogLogger(slog.NewTextHandler(cfg.Log, nil).WithAttrs([]slog.Attr{slog.String("listener", "http")}), slog.LevelWarn)}
		go func() {
			// net/http retries temporary accept errors itself, with the same backoff.
			if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.httpMu.Lock()
				s.httpStopped = fmt.Errorf("HTTP listener %s stopped: %w", ln.Addr(), err)
				s.httpMu.Unlock()
			}
		}()
	}
	return s, nil
}

// healthz answers "ok" (200) while every listener accepts, 503 with the reasons otherwise.
func (s *System) healthz(w http.ResponseWriter, r *http.Request) {
	if err := s.Health(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ok\n")
}

// Health returns why the system is not healthy: a listener that stopped accepting. nil
// when every listener accepts.
func (s *System) Health() error {
	var errs []error
	if s.pg != nil {
		errs = append(errs, s.pg.Err())
	}
	if s.Broker != nil {
		errs = append(errs, s.Broker.ServeErr())
	}
	s.httpMu.Lock()
	errs = append(errs, s.httpStopped)
	s.httpMu.Unlock()
	return errors.Join(errs...)
}

// chooseAuth decides the Postgres wire's authentication (SystemConfig.Auth).
func chooseAuth(cfg SystemConfig) (AuthMethod, error) {
	loopback := listen.IsLoopback(cfg.PgAddr)
	switch AuthMethod(cfg.Auth) {
	case "":
		if loopback && cfg.AdminPassword == "" {
			return AuthTrust, nil
		}
		return AuthSCRAM, nil
	case AuthTrust:
		if cfg.PgAddr != "" && !loopback {
			return "", fmt.Errorf("--auth trust accepts clients without a password, so it is allowed only on a loopback --pg-addr (127.0.0.1, ::1, localhost), and %s is not one: use --auth scram-sha-256", cfg.PgAddr)
		}
		if cfg.AdminPassword != "" {
			return "", errors.New("--admin-password is for --auth scram-sha-256; with --auth trust no password is checked")
		}
		return AuthTrust, nil
	case AuthSCRAM:
		return AuthSCRAM, nil
	}
	return "", fmt.Errorf("unknown authentication method %q (trust or scram-sha-256)", cfg.Auth)
}

// pgConfig makes the Postgres wire's configuration: authentication (with the first admin
// when passwords are checked), TLS, limits.
func (s *System) pgConfig(cfg SystemConfig) (PGConfig, error) {
	pgc := cfg.PG
	pgc.ServerVersion = "15.0 (rsql " + cfg.Version + ")"
	pgc.Auth = s.Auth
	pgc.Users = s.Engine.cat
	pgc.Logger = slog.New(slog.NewTextHandler(cfg.Log, nil))
	if pgc.MaxStatementBytes == 0 {
		pgc.MaxStatementBytes = s.Engine.cfg.Limits.MaxStatementBytes
	}
	if s.Auth == AuthSCRAM {
		generated, err := s.Engine.cat.EnsureAdmin(cfg.AdminPassword)
		if err != nil {
			return pgc, fmt.Errorf("the first admin user: %w", err)
		}
		if generated != "" {
			fmt.Fprintf(cfg.Notices, "rsql: created the admin user %q with the password %s\n"+
				"rsql: it is shown only this once: keep it, or set your own with ALTER USER %s WITH PASSWORD '...' (or start with --admin-password)\n",
				AdminUser, generated, AdminUser)
		}
	} else {
		s.Engine.passwordsUnchecked.Store(true)
	}
	switch {
	case cfg.TLSCert != "" || cfg.TLSKey != "":
		if cfg.TLSCert == "" || cfg.TLSKey == "" {
			return pgc, errors.New("--tls-cert and --tls-key go together")
		}
		t, err := loadTLS(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return pgc, err
		}
		pgc.TLS, s.TLSCertFile = t, cfg.TLSCert
	case cfg.TLSSelfSigned:
		host, _, _ := net.SplitHostPort(cfg.PgAddr)
		cert, key, made, err := ensureSelfSigned(cfg.DataDir, host)
		if err != nil {
			return pgc, fmt.Errorf("self-signed certificate: %w", err)
		}
		if made {
			fmt.Fprintf(cfg.Notices, "rsql: generated a self-signed TLS certificate %s (key %s); clients: sslmode=require, or sslmode=verify-full sslrootcert=%s\n", cert, key, cert)
		}
		t, err := loadTLS(cert, key)
		if err != nil {
			return pgc, err
		}
		pgc.TLS, s.TLSCertFile = t, cert
	}
	if cfg.TLSRequire {
		if pgc.TLS == nil {
			return pgc, errors.New("--tls-require needs a certificate: --tls-cert and --tls-key, or --tls-self-signed")
		}
		pgc.RequireTLS = true
	}
	return pgc, nil
}

// PgAddr returns the Postgres-wire listen address ("" when off).
func (s *System) PgAddr() string {
	if s.pgLn == nil {
		return ""
	}
	return s.pgLn.Addr().String()
}

// Close stops the listeners, the jobs (checkpointing them), the broker, and releases the data
// directory.
func (s *System) Close() error {
	var errs []error
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if s.http.Shutdown(ctx) != nil {
			s.http.Close() // streams still open (a console push query) end here
		}
		cancel()
	}
	if s.console != nil {
		s.console.Close()
	}
	if s.pg != nil {
		s.pg.Close()
	}
	if s.Engine != nil {
		errs = append(errs, s.Engine.Close())
	}
	if s.Broker != nil {
		errs = append(errs, s.Broker.Close())
	}
	if s.pgStore != nil {
		errs = append(errs, s.pgStore.Close())
	}
	return errors.Join(errs...)
}

// engineCollector exports per-job counters from the engine's running jobs.
type engineCollector struct{ e *Engine }

// splitLabels are the labels of a split reader's metrics: a job's stage, the stream or
// shuffle topic it reads and the stage's split. They tell the readers of a job apart by
// construction: a stage's split reads each of the stage's inputs at most once, and
// different inputs read different streams or topics (exec.SplitStats.Reads). A split of
// an in-process edge reads no topic and has none of these metrics.
var splitLabels = []string{"job", "stage", "stream", "split"}

var (
	descIn        = prometheus.NewDesc("rsql_job_records_in_total", "Records read and decoded by a job.", []string{"job"}, nil)
	descOut       = prometheus.NewDesc("rsql_job_records_out_total", "Rows a job wrote to its sink.", []string{"job"}, nil)
	descLate      = prometheus.NewDesc("rsql_job_late_records_total", "Records that arrived after all their windows fired.", []string{"job"}, nil)
	descBad       = prometheus.NewDesc("rsql_job_bad_records_total", "Records that failed to decode.", []string{"job"}, nil)
	descWatermark = prometheus.NewDesc("rsql_job_watermark_delay_seconds", "Wall clock minus the job's watermark.", []string{"job"}, nil)
	descLag       = prometheus.NewDesc("rsql_job_split_lag_records", "Messages a split's reader is behind the end of what it reads.", splitLabels, nil)
	descEpoch     = prometheus.NewDesc("rsql_job_checkpoint_epoch", "The job's last committed checkpoint (0 before the first).", []string{"job"}, nil)
	descBytesIn   = prometheus.NewDesc("rsql_job_bytes_in_total", "Bytes of message bodies a job read from its sources.", []string{"job"}, nil)
	descBytesOut  = prometheus.NewDesc("rsql_job_bytes_out_total", "Bytes of message bodies a job wrote to its sinks.", []string{"job"}, nil)
	descCkptDur   = prometheus.NewDesc("rsql_job_checkpoint_duration_seconds", "How long the job's last checkpoint commit took.", []string{"job"}, nil)
	descCkptSize  = prometheus.NewDesc("rsql_job_checkpoint_size_bytes", "Size of the job's last checkpoint (state delta, offsets and held output).", []string{"job"}, nil)
	descCkptCount = prometheus.NewDesc("rsql_job_checkpoints_total", "Checkpoints the job committed since it started in this process.", []string{"job"}, nil)
	descOffset    = prometheus.NewDesc("rsql_job_split_offset", "Next offset a split's reader reads of a stream or shuffle topic.", splitLabels, nil)

	lookupLabels      = []string{"job", "table"}
	descLookupQueries = prometheus.NewDesc("rsql_lookup_queries_total", "Queries a lookup join sent to its database (one per batch with keys the cache lacks; every retry counts).", lookupLabels, nil)
	descLookupKeys    = prometheus.NewDesc("rsql_lookup_keys_total", "Keys a lookup join's successful queries asked for.", lookupLabels, nil)
	descLookupHits    = prometheus.NewDesc("rsql_lookup_cache_hits_total", "Rows of a lookup join whose key was in the cache.", lookupLabels, nil)
	descLookupMisses  = prometheus.NewDesc("rsql_lookup_cache_misses_total", "Rows of a lookup join whose key was not in the cache.", lookupLabels, nil)
	descLookupErrors  = prometheus.NewDesc("rsql_lookup_errors_total", "Lookup queries that failed.", lookupLabels, nil)
	descLookupRetries = prometheus.NewDesc("rsql_lookup_retries_total", "Failed lookup queries that were tried again.", lookupLabels, nil)
	descLookupEntries = prometheus.NewDesc("rsql_lookup_cache_entries", "Keys a lookup join's cache holds (found or absent).", lookupLabels, nil)
	descLookupLatency = prometheus.NewDesc("rsql_lookup_latency_seconds", "Time of a lookup query, failed ones included.", lookupLabels, nil)

	descAppended  = prometheus.NewDesc("rsql_broker_messages_appended_total", "Messages appended to a topic of the bundled broker and still addressable (the end offsets of its queues); rate() is the produce rate.", []string{"topic"}, nil)
	descRetained  = prometheus.NewDesc("rsql_broker_messages_retained", "Messages of a topic between its queues' minimum and end offsets.", []string{"topic"}, nil)
	descQueues    = prometheus.NewDesc("rsql_broker_topic_queues", "Queues of a topic.", []string{"topic"}, nil)
	descServed    = prometheus.NewDesc("rsql_broker_messages_consumed_total", "Messages the bundled broker handed out to pulls (jobs and RocketMQ consumers); rate() is the consume rate.", nil, nil)
	descStoreSize = prometheus.NewDesc("rsql_store_size_bytes", "Bytes on disk under the data directory, by part: broker (commit log and queues), state (RocksDB), catalog.", []string{"part"}, nil)
)

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIn, descOut, descLate, descBad, descWatermark, descLag, descEpoch, descOffset,
		descBytesIn, descBytesOut, descCkptDur, descCkptSize, descCkptCount,
		descLookupQueries, descLookupKeys, descLookupHits, descLookupMisses, descLookupErrors, descLookupRetries,
		descLookupEntries, descLookupLatency} {
		ch <- d
	}
	for _, d := range clusterDescs {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	jobs := c.e.jobs.list()
	if cl := c.e.cluster; cl != nil {
		cl.collect(ch)
	}
	now := time.Now().UnixMilli()
	for _, j := range jobs {
		st := j.job.Stats()
		id := j.def.ID
		ch <- prometheus.MustNewConstMetric(descIn, prometheus.CounterValue, float64(st.RecordsIn), id)
		ch <- prometheus.MustNewConstMetric(descOut, prometheus.CounterValue, float64(st.RecordsOut), id)
		ch <- prometheus.MustNewConstMetric(descLate, prometheus.CounterValue, float64(st.Late), id)
		ch <- prometheus.MustNewConstMetric(descBad, prometheus.CounterValue, float64(st.Bad), id)
		if st.Watermark > -1<<62 && st.Watermark < 1<<62 {
			ch <- prometheus.MustNewConstMetric(descWatermark, prometheus.GaugeValue, float64(now-st.Watermark)/1000, id)
		}
		ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(st.Epoch), id)
		ch <- prometheus.MustNewConstMetric(descBytesIn, prometheus.CounterValue, float64(st.BytesIn), id)
		ch <- prometheus.MustNewConstMetric(descBytesOut, prometheus.CounterValue, float64(st.BytesOut), id)
		if cps := j.checkpoints; cps != nil {
			ch <- prometheus.MustNewConstMetric(descCkptCount, prometheus.CounterValue, float64(cps.count.Load()), id)
			if cps.count.Load() > 0 {
				ch <- prometheus.MustNewConstMetric(descCkptDur, prometheus.GaugeValue, float64(cps.lastNanos.Load())/1e9, id)
				ch <- prometheus.MustNewConstMetric(descCkptSize, prometheus.GaugeValue, float64(cps.lastBytes.Load()), id)
			}
		}
		collectLookups(ch, id, st.Lookups)
		for _, sp := range st.Splits {
			stage := strconv.Itoa(sp.Stage)
			for _, rd := range sp.Reads {
				ch <- prometheus.MustNewConstMetric(descOffset, prometheus.GaugeValue, float64(rd.Offset), id, stage, rd.Stream, sp.Split)
				if rd.Lag >= 0 {
					ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(rd.Lag), id, stage, rd.Stream, sp.Split)
				}
			}
		}
	}
}

// storeCollector exports the bundled broker's per-topic offsets (their rate is the produce
// rate), the messages it served to pulls (the consume rate) and the data directory's size
// on disk.
type storeCollector struct {
	b       *broker.Broker
	dataDir string
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAppended, descRetained, descQueues, descStoreSize, descServed} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descServed, prometheus.CounterValue, float64(c.b.MessagesServed()))
	for _, t := range c.b.Topics() {
		var end, retained int64
		for q := 0; q < t.Queues; q++ {
			maxO, err := c.b.MaxOffset(t.Name, q)
			if err != nil {
				continue
			}
			minO, err := c.b.MinOffset(t.Name, q)
			if err != nil {
				minO = 0
			}
			end += maxO
			retained += max(0, maxO-minO)
		}
		ch <- prometheus.MustNewConstMetric(descAppended, prometheus.CounterValue, float64(end), t.Name)
		ch <- prometheus.MustNewConstMetric(descRetained, prometheus.GaugeValue, float64(retained), t.Name)
		ch <- prometheus.MustNewConstMetric(descQueues, prometheus.GaugeValue, float64(t.Queues), t.Name)
	}
	for _, part := range []struct{ name, path string }{{"broker", "broker"}, {"state", "state"}, {"catalog", "catalog.json"}} {
		ch <- prometheus.MustNewConstMetric(descStoreSize, prometheus.GaugeValue, float64(diskUsage(filepath.Join(c.dataDir, part.path))), part.name)
	}
}

// diskUsage is the total size of the regular files at or under path (0 when absent).
func diskUsage(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// startCluster opens the shared Postgres store, joins the members and starts the jobs this
// instance owns; then reconciles in the background.
func (s *System) startCluster(cfg SystemConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := state.OpenPostgres(ctx, cfg.Postgres, state.PostgresOptions{})
	if err != nil {
		return err
	}
	s.pgStore = cs
	name, err := cluster.InstanceName(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("instance name: %w", err)
	}
	c, err := startCluster(s.Engine, ClusterConfig{Checkpoints: cs, Name: name, Addr: cfg.PgAddr})
	if err != nil {
		return fmt.Errorf("join the instances sharing %s: %w", "the Postgres store", err)
	}
	s.Engine.cluster = c
	c.reconcile(ctx)
	go c.run()
	return nil
}

// collectLookups exports the counters of a job's lookup joins, labelled by the rsql table
// (a job joining one table twice adds their counters up).
func collectLookups(ch chan<- prometheus.Metric, job string, ls []exec.LookupStats) {
	byTable := map[string]*exec.LookupStats{}
	var order []string
	for _, l := range ls {
		t := byTable[l.Table]
		if t == nil {
			c := l
			c.LatencyCounts = append([]uint64(nil), l.LatencyCounts...)
			byTable[l.Table] = &c
			order = append(order, l.Table)
			continue
		}
		t.Queries += l.Queries
		t.Keys += l.Keys
		t.Hits += l.Hits
		t.Misses += l.Misses
		t.Errors += l.Errors
		t.Retries += l.Retries
		t.CacheEntries += l.CacheEntries
		t.LatencyCount += l.LatencyCount
		t.LatencySum += l.LatencySum
		for i := range t.LatencyCounts {
			t.LatencyCounts[i] += l.LatencyCounts[i]
		}
	}
	for _, name := range order {
		l := byTable[name]
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), job, name)
		}
		counter(descLookupQueries, l.Queries)
		counter(descLookupKeys, l.Keys)
		counter(descLookupHits, l.Hits)
		counter(descLookupMisses, l.Misses)
		counter(descLookupErrors, l.Errors)
		counter(descLookupRetries, l.Retries)
		ch <- prometheus.MustNewConstMetric(descLookupEntries, prometheus.GaugeValue, float64(l.CacheEntries), job, name)
		buckets := map[float64]uint64{}
		for i, b := range l.LatencyBuckets {
			buckets[b] = l.LatencyCounts[i]
		}
		ch <- prometheus.MustNewConstHistogram(descLookupLatency, l.LatencyCount, l.LatencySum, buckets, job, name)
	}
}
