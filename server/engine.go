package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rsql/broker"
	"rsql/connectors"
	"rsql/exec"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
	"rsql/udf"
)

// Config configures an Engine.
type Config struct {
	// DataDir holds the catalog and the RocksDB state (default ./rsql-data).
	DataDir string
	// StateBackend is "rocksdb" (default) or "memory".
	StateBackend string
	// AggCacheGroups is exec.Env.AggCacheGroups of every job: the groups an aggregation
	// without a window keeps in memory with RocksDB state (0: the default).
	AggCacheGroups int
	// JoinCacheKeys is exec.Env.JoinCacheKeys of every job: the join keys a regular join
	// without a state TTL keeps in memory with RocksDB state (0: the default).
	JoinCacheKeys int
	// Log receives one line per job event (started, finished, failed); default stderr.
	Log io.Writer
	// Broker is the bundled broker that streams with connector 'broker' live on; nil when
	// this process runs none (then such streams cannot be read or written).
	Broker *broker.Broker
	// RocketMQ, when Broker is nil, is the RocketMQ cluster (for example another rsql
	// server's bundled broker) that streams with connector 'broker' live on.
	RocketMQ *connectors.RocketMQConfig
	// FileRoots are the directories file sources and sinks may use (the file sandbox,
	// connectors.FileRoots); relative paths start at the first. Default: the data
	// directory's files/ (created when missing). "/" allows every path.
	FileRoots []string
	// Limits bound what one statement may cost to parse and bind (sql.Limits; zero fields
	// take their defaults).
	Limits sql.Limits
	// MaxResultBytes bounds the rows one pull query collects (about their size in memory):
	// past it the query fails with 54000. Default 64 MiB; negative: no limit.
	MaxResultBytes int64
	// PushWaitNotice is how long a push query that starts at the end of its topics
	// (offset_reset = 'latest') waits without a row before it tells the client, once, that
	// it waits for new records and how to read from the beginning. Default 3 s.
	PushWaitNotice time.Duration
	// deferJobs leaves the jobs recorded as RUNNING stopped until Engine.startRecorded, so
	// a System can attach the broker first.
	deferJobs bool
}

// DefaultMaxResultBytes is Config.MaxResultBytes's default.
const DefaultMaxResultBytes = 64 << 20

func (c *Config) ensureDefaults() {
	if c.DataDir == "" {
		c.DataDir = "./rsql-data"
	}
	if c.StateBackend == "" {
		c.StateBackend = "rocksdb"
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.PushWaitNotice == 0 {
		c.PushWaitNotice = 3 * time.Second
	}
	c.Limits = c.Limits.WithDefaults()
}

// DefaultCheckpointInterval and DefaultMinCheckpointInterval bound how often a job
// checkpoints when its sink stream's WITH has no checkpoint_interval: the interval adapts to
// what checkpoints cost (exec.Env.MinCheckpointInterval), from every 10 ms for a job whose
// checkpoints are cheap (a filter) to every second for one with much state to write, and
// every 2 ms after a light checkpoint (DefaultLightCheckpointInterval,
// exec.LightCheckpointBytes: a filter at a low rate). Since rows reach a sink topic after
// the checkpoint that covers them (exactly-once output), this is also the latency of the
// output (docs/guarantees.md). A checkpoint_interval in the WITH fixes the interval.
const (
	DefaultCheckpointInterval    = time.Second
	DefaultMinCheckpointInterval = 10 * time.Millisecond
	// DefaultLightCheckpointInterval is the least adaptive interval after a light
	// checkpoint (exec.Env.LightCheckpointInterval); not in cluster mode.
	DefaultLightCheckpointInterval = 2 * time.Millisecond
	// ClusterMinCheckpointInterval is the least adaptive interval of a job in cluster mode,
	// where every instance's checkpoint of its units is a transaction on the shared
	// Postgres: each of the n instances running units of the job waits at least n times
	// this (within the job's interval), and n times as long as one instance would after a
	// commit of the same cost (exec.Env.Runners), so together they commit the job ten
	// times a second at most, as one instance would; more instances do not mean more
	// checkpoints, each a Postgres transaction with a fixed cost on every instance
	// (docs/benchmarks.md, "Scale-out").
	ClusterMinCheckpointInterval = 100 * time.Millisecond
)

// Engine is the SQL engine of one rsql process: the catalog, the state store and the
// running jobs (kept by its job manager, jobs.go). It implements Executor. mu guards views;
// the catalog has its own lock.
type Engine struct {
	cfg   Config
	lock  *dirLock
	cat   *Catalog
	store state.Store
	files *connectors.FileRoots // the file sandbox

	// jobs are the jobs this process runs: started by the engine (startJob), watched,
	// retried and stopped by the job manager (jobs.go).
	jobs *jobManager

	mu sync.Mutex
	// viewKeys is, per job of a materialized view, where it keeps its rows by key
	// (pointget.go); guarded by mu.
	viewKeys map[string]viewKeyInfo

	// dlq shares dead-letter outputs between the jobs reading a stream (dlq.go).
	dlq dlqWriters

	// udf compiles and runs user-defined functions (functions.go).
	udf *udf.Runtime
	// passwordsUnchecked is set while the Postgres wire accepts clients without a
	// password (trust), so that setting one warns that it is not checked.
	passwordsUnchecked atomic.Bool

	// cluster is set in cluster mode (several instances sharing a Postgres checkpoint
	// store, cluster.go); jobs.startMu then serializes starting and stopping jobs.
	cluster *clusterNode
}

// Open locks the data directory, loads the catalog and opens the state store. Jobs the
// catalog lists as RUNNING are started again.
func Open(cfg Config) (*Engine, error) {
	cfg.ensureDefaults()
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cat, err := OpenCatalog(filepath.Join(cfg.DataDir, "catalog.json"))
	if err != nil {
		lock.Close()
		return nil, err
	}
	roots := cfg.FileRoots
	if len(roots) == 0 {
		def := filepath.Join(cfg.DataDir, "files")
		if err := os.MkdirAll(def, 0o755); err != nil {
			lock.Close()
			return nil, fmt.Errorf("file root: %w", err)
		}
		roots = []string{def}
	}
	files, err := connectors.OpenFileRoots(roots...)
	if err != nil {
		lock.Close()
		return nil, err
	}
	var store state.Store
	switch cfg.StateBackend {
	case "memory":
		store = state.NewMemory()
	case "rocksdb":
		store, err = state.OpenRocks(filepath.Join(cfg.DataDir, "state"), state.RocksOptions{})
		if err != nil {
			files.Close()
			lock.Close()
			return nil, fmt.Errorf("open state store: %w", err)
		}
	default:
		files.Close()
		lock.Close()
		return nil, fmt.Errorf("unknown state backend %q (want rocksdb or memory)", cfg.StateBackend)
	}
	e := &Engine{cfg: cfg, lock: lock, cat: cat, store: store, files: files, udf: udf.NewRuntime()}
	e.jobs = newJobManager(cat, cfg.Log, e.restartAttempt, func() bool { return e.cluster != nil })
	if !cfg.deferJobs {
		e.startRecorded()
	}
	return e, nil
}

// Catalog returns the engine's catalog.
func (e *Engine) Catalog() *Catalog { return e.cat }

// Close stops every job and releases the state store and the data directory.
func (e *Engine) Close() error {
	if e.cluster != nil {
		e.cluster.close()
	}
	e.jobs.close()
	err := e.store.Close()
	e.udf.Close()
	e.files.Close()
	e.lock.Close()
	return err
}

// Running returns the number of jobs running in this process.
func (e *Engine) Running() int { return e.jobs.count() }

// WaitJobs blocks until no job runs in this process or ctx is done.
func (e *Engine) WaitJobs(ctx context.Context) error { return e.jobs.wait(ctx) }

// FileRoots returns the directories file sources and sinks may use.
func (e *Engine) FileRoots() []string { return e.files.Dirs() }

// checkFiles refuses (42501) the file paths of a stream's options (path, dlq_path,
// late_path) that the file sandbox does not allow.
func (e *Engine) checkFiles(opts map[string]string) error {
	for _, k := range []string{"path", "dlq_path", "late_path"} {
		if p := opts[k]; p != "" {
			if _, err := e.files.Check(p); err != nil {
				return fileError(err)
			}
		}
	}
	return nil
}

// fileError gives a path the sandbox refuses its SQLSTATE, 42501.
func fileError(err error) error {
	if errors.Is(err, connectors.ErrOutsideFileRoots) {
		return sql.Errorf(codeInsufficientPrivilege, "%v", err)
	}
	return err
}

// Execute implements Executor: it parses text and runs its statements in order. A panic
// while doing so is logged with the statement and fails this call only (XX000).
func (e *Engine) Execute(ctx context.Context, sess *Session, text string, params []sql.Value) (results []*Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(e.cfg.Log, "statement panicked (user %q): %v\nstatement: %s\n%s\n", sess.User, p, logStatement(text), debug.Stack())
			err = sql.Errorf(sql.CodeInternal, "internal error: %v", p)
		}
	}()
	if catalogQuery(text) {
		return nil, errNoSystemCatalogs
	}
	stmts, err := sql.ParseLimited(text, params, e.cfg.Limits)
	if err != nil {
		return nil, err
	}
	for _, st := range stmts {
		r, err := e.exec(ctx, sess, st)
		if err != nil {
			return results, err
		}
		results = append(results, r)
	}
	return results, nil
}

func (e *Engine) exec(ctx context.Context, sess *Session, st sql.Statement) (*Result, error) {
	if err := authorize(sess, st); err != nil {
		return nil, err
	}
	switch s := st.(type) {
	case *sql.CreateUser:
		return e.createUser(sess, s)
	case *sql.AlterUser:
		return e.alterUser(sess, s)
	case *sql.DropUser:
		return e.dropUser(sess, s)
	case *sql.CreateStream:
		if s.As != nil {
			return e.createDerived(s, sess)
		}
		return e.createStream(s)
	case *sql.CreateView:
		return e.createView(s, sess)
	case *sql.CreateFunction:
		return e.createFunction(s)
	case *sql.Insert:
		if s.Query != nil {
			return e.insertSelect(s, sess)
		}
		return e.insertValues(ctx, s)
	case *sql.Select:
		return e.query(ctx, sess, s)
	case *sql.Explain:
		return e.explain(s, sess)
	case *sql.ShowStmt:
		return e.show(s)
	case *sql.Describe:
		if s.Function {
			return e.describeFunction(s)
		}
		return e.describe(s)
	case *sql.Drop:
		if s.Kind == sql.DropFunction || s.Kind == sql.DropAggregate {
			return e.dropFunction(s)
		}
		return e.drop(s)
	case *sql.JobControl:
		return e.jobControl(s)
	case *sql.SetStmt:
		v, err := applySetting(s.Name, s.Value)
		if err != nil {
			return nil, err
		}
		sess.Settings[strings.ToLower(s.Name)] = v
		return &Result{Tag: "SET"}, nil
	case *sql.ShowVar:
		return e.showVar(sess, s)
	case *sql.Transaction:
		return transactionResult(s), nil
	}
	text, _ := st.Source()
	return nil, sql.Errorf(sql.CodeNotSupported, "statement not supported: %s", firstWords(text))
}

func firstWords(s string) string {
	f := strings.Fields(s)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

// checkOptions validates WITH options (connectors.ParseStreamOptions: every key known to
// the connector registry, each value of its type) so that a typo fails the statement
// instead of being ignored; topic names must be ones the broker takes.
func checkOptions(opts map[string]string) error {
	if _, err := connectors.ParseStreamOptions(opts); err != nil {
		return sql.Errorf(sql.CodeInvalidValue, "%v", err)
	}
	for _, k := range []string{"topic", "late_topic", "dlq_topic"} {
		if k == "topic" && strings.EqualFold(opts["connector"], "kafka") {
			continue // a Kafka topic: the connector checks Kafka's rule (docs/sql.md, "Kafka")
		}
		if v, ok := opts[k]; ok {
			if err := checkTopicName(k+" = '"+v+"'", v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *Engine) createStream(s *sql.CreateStream) (*Result, error) {
	if err := checkLookupTable(s); err != nil {
		return nil, err
	}
	if err := checkOptions(s.Options); err != nil {
		return nil, err
	}
	if err := e.checkFiles(s.Options); err != nil {
		return nil, err
	}
	if len(s.Columns) == 0 {
		return nil, sql.Errorf(sql.CodeSyntax, "CREATE STREAM %s needs a column list or AS SELECT", s.Name)
	}
	d := StreamDef{Name: s.Name, Columns: columnDefs(s.Columns), EventTime: s.WatermarkColumn,
		WatermarkDelay: s.WatermarkDelay, Options: withDefaults(s.Name, s.Options), Statement: s.Text,
		IsTable: s.Table, PrimaryKey: s.PrimaryKey}
	if old, exists := e.cat.Stream(s.Name); exists {
		if s.IfNotExists {
			return skipped("stream", old), nil
		}
		if !s.OrReplace {
			return nil, sql.Errorf(sql.CodeDuplicate, "stream or view %q already exists (CREATE OR REPLACE STREAM replaces it, IF NOT EXISTS keeps it)", s.Name)
		}
		if old.IsView {
			return nil, sql.Errorf(sql.CodeWrongObjectType, "%q is a materialized view: CREATE OR REPLACE STREAM replaces streams only (DROP VIEW %s first)", old.Name, old.Name)
		}
	}
	if err := checkStreamTopic(d); err != nil {
		return nil, err
	}
	if err := checkPartitionColumns(d); err != nil {
		return nil, err
	}
	opts, err := connectors.StreamOptionsOf(d.Options)
	if err != nil {
		return nil, sql.Errorf(sql.CodeInvalidValue, "stream %s: %v", d.Name, err)
	}
	if opts.Connector == "nexmark" {
		if err := connectors.CheckNexmarkStream(d.Options, d.Schema()); err != nil {
			return nil, sql.Errorf(sql.CodeInvalidValue, "stream %s: %v", d.Name, err)
		}
	}
	if kind, ok := connectors.Lookup(opts.Connector); ok && kind.CheckDeclared != nil {
		if kind.Changelog && (!s.Table || len(s.PrimaryKey) == 0) {
			return nil, sql.Errorf(sql.CodeNotSupported, "the %s connector reads a table's changes: declare it with CREATE TABLE %s (k ... PRIMARY KEY, ...) WITH (connector = '%s', ...)", kind.Name, s.Name, kind.Name)
		}
		rel := d.Relation()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := kind.CheckDeclared(ctx, e.deps(), connectors.Spec{Stream: d.Name, Options: opts, Schema: rel.Schema, Key: rel.PrimaryKey})
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if opts.Connector == "broker" && e.cfg.Broker == nil && e.cfg.RocketMQ != nil {
		src, err := connectors.OpenRocketMQSource(context.Background(), *e.cfg.RocketMQ, opts.TopicOf(d.Name), opts.Queues)
		if err != nil {
			return nil, err
		}
		src.Close()
	} else if opts.Connector == "broker" {
		b, err := e.needBroker(d.Name)
		if err != nil {
			return nil, err
		}
		if _, err := connectors.OpenBrokerSource(b, opts.TopicOf(d.Name), opts.Queues); err != nil {
			return nil, err
		}
	}
	if s.OrReplace {
		return e.replace(d, nil, nil, planner.SinkSpec{}, "CREATE STREAM")
	}
	if err := e.cat.AddStream(d); err != nil {
		return nil, err
	}
	return &Result{Tag: "CREATE STREAM"}, nil
}

// withDefaults fills in the options docs/sql.md ("WITH options") gives defaults for.
func withDefaults(name string, opts map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range opts {
		out[k] = v
	}
	if out["connector"] == "" {
		if out["path"] != "" {
			out["connector"] = "file"
		} else {
			out["connector"] = "broker"
		}
	}
	if out["format"] == "" {
		out["format"] = "json"
		if out["connector"] == "nexmark" {
			out["format"] = "nexmark" // the source's event numbers, generated by the format
		}
	}
	if out["connector"] == "broker" && out["topic"] == "" {
		out["topic"] = name
	}
	return out
}

// bind parses nothing: it binds a SELECT against the catalog.
func (e *Engine) bind(s *sql.Select) (*sql.Query, error) {
	return sql.Bind(s, e.stmtCatalog())
}

// bindContinuous binds the SELECT of a job, which must read a stream, and returns the
// user functions it calls (functions.go).
func (e *Engine) bindContinuous(s *sql.Select) (*sql.Query, []string, error) {
	cat := e.stmtCatalog()
	q, err := sql.Bind(s, cat)
	if err != nil {
		return nil, nil, err
	}
	if q.IsConstant() {
		return nil, nil, sql.Errorf(sql.CodeNotSupported, "a continuous query needs FROM a stream")
	}
	if err := viewInStreamQuery(q, "a continuous query"); err != nil {
		return nil, nil, err
	}
	return q, cat.usedFunctions(), nil
}

// uniqueColumns refuses, as PostgreSQL does, a stream or view whose query gives two
// columns one name (two unaliased COUNTs are both count: docs/sql.md, "Result column
// names"): a relation's columns are read by name.
func uniqueColumns(s sql.Schema, what, name string) error {
	seen := make(map[string]bool, len(s))
	for _, c := range s {
		l := strings.ToLower(c.Name)
		if seen[l] {
			return sql.Errorf(sql.CodeDuplicateColumn, "column %q specified more than once in %s %s: give the query's columns distinct names with AS", c.Name, what, name)
		}
		seen[l] = true
	}
	return nil
}

// viewInStreamQuery refuses a query over streams (a job's, a push query) that reads a
// materialized view too: a view's rows are read by pull queries, and a stream is not joined
// with them (docs/sql.md, "Pull queries").
func viewInStreamQuery(q *sql.Query, what string) error {
	for _, r := range q.Relations() {
		if !r.IsView {
			continue
		}
		for _, o := range q.Relations() {
			if !o.IsView && !o.IsTable {
				return sql.Errorf(sql.CodeNotSupported, "%s reads streams, and %s is a materialized view, which only pull queries read (SELECT ... FROM %s): to join stream %s with what %s computes, write %s's query to a stream (CREATE STREAM ... AS SELECT) and join that stream, or join %s's own input streams", what, r.Name, r.Name, o.Name, r.Name, r.Name, r.Name)
			}
		}
		return sql.Errorf(sql.CodeNotSupported, "%s reads streams: %s is a materialized view, which pull queries read (SELECT ... FROM %s)", what, r.Name, r.Name)
	}
	return nil
}

func (e *Engine) createDerived(s *sql.CreateStream, sess *Session) (*Result, error) {
	if err := checkOptions(s.Options); err != nil {
		return nil, err
	}
	if err := e.checkFiles(s.Options); err != nil {
		return nil, err
	}
	if old, exists := e.cat.Stream(s.Name); exists {
		if s.IfNotExists {
			return skipped("stream", old), nil
		}
		if !s.OrReplace {
			return nil, sql.Errorf(sql.CodeDuplicate, "stream or view %q already exists (CREATE OR REPLACE STREAM replaces it, IF NOT EXISTS keeps it)", s.Name)
		}
		if old.IsView {
			return nil, sql.Errorf(sql.CodeWrongObjectType, "%q is a materialized view: CREATE OR REPLACE STREAM replaces streams only (DROP VIEW %s first)", old.Name, old.Name)
		}
	}
	q, funcs, err := e.bindContinuous(s.As)
	if err != nil {
		return nil, err
	}
	if s.OrReplace && slices.Contains(relationNames(q), strings.ToLower(s.Name)) {
		return nil, sql.Errorf(sql.CodeNotSupported, "CREATE OR REPLACE STREAM %s cannot read %s itself", s.Name, s.Name)
	}
	if err := uniqueColumns(q.OutputSchema(), "stream", s.Name); err != nil {
		return nil, err
	}
	d := &StreamDef{Name: s.Name, Columns: columnDefs(q.OutputSchema()), Options: withDefaults(s.Name, s.Options), Statement: s.Text}
	if err := checkStreamTopic(*d); err != nil {
		return nil, err
	}
	if err := checkPartitionColumns(*d); err != nil {
		return nil, err
	}
	sink, err := planner.StreamSink(d.Name, d.Options, d.Schema())
	if err != nil {
		return nil, err
	}
	planned, err := plannedSink(q, sink, stateTTL(sess))
	if err != nil {
		return nil, err
	}
	if planned.Changes != planner.AppendOnly {
		// The query's rows change: the stream is its changelog, a table keyed by the
		// changelog's key, or, with no key (a global aggregate, one row), a stream whose
		// last column is the change column (docs/sql.md, "Changelogs").
		if len(planned.KeyColumns) > 0 {
			d.IsTable, d.Changelog = true, true
			for _, c := range planned.KeyColumns {
				d.PrimaryKey = append(d.PrimaryKey, planned.Schema[c].Name)
			}
		} else {
			d.Columns = append(d.Columns, ColumnDef{Name: sql.ChangeColumn, Kind: uint8(sql.KindVarchar)})
			if d.Options["connector"] == "broker" && d.Options["queues"] == "" {
				// Its changes have no message key to share a queue by: one queue keeps
				// them in order.
				d.Options["queues"] = "1"
			}
			if sink, err = planner.StreamSink(d.Name, d.Options, d.Schema()); err != nil {
				return nil, err
			}
		}
	}
	if d.Options["connector"] == "postgres" {
		// A table of a database made by its query: keyed by the query's changelog key, and
		// checked in the database now.
		if !s.Table {
			return nil, sql.Errorf(sql.CodeNotSupported, "the postgres connector is a table of a database: write it with CREATE TABLE %s WITH (connector = 'postgres', ...) AS SELECT ...", s.Name)
		}
		if len(d.PrimaryKey) == 0 && len(planned.KeyColumns) > 0 {
			// Rows that do not change but have a key (a GROUP BY over files, computed once).
			d.IsTable = true
			for _, c := range planned.KeyColumns {
				d.PrimaryKey = append(d.PrimaryKey, planned.Schema[c].Name)
			}
		}
		if len(d.PrimaryKey) == 0 {
			return nil, sql.Errorf(sql.CodeNotSupported, "CREATE TABLE %s AS SELECT into PostgreSQL needs a query whose rows have a key (a GROUP BY): declare the table with its PRIMARY KEY and INSERT INTO it instead", s.Name)
		}
		if err := e.checkDatabaseSink(*d, planned); err != nil {
			return nil, err
		}
	}
	if s.OrReplace {
		return e.replace(*d, &JobDef{Statement: s.Text, StateTTL: stateTTL(sess), Functions: funcs}, q, sink, "CREATE STREAM")
	}
	if err := e.checkFileWriter(*d, "CREATE STREAM "+d.Name); err != nil {
		return nil, err
	}
	id, err := e.startNewJob(s.Text, d, q, funcs, sink, stateTTL(sess))
	if err != nil {
		return nil, err
	}
	return &Result{Tag: "CREATE STREAM", Notice: e.startedNotice(id, d.Name)}, nil
}

// skipped is the result of CREATE ... IF NOT EXISTS for a name that exists, with
// PostgreSQL's notice.
func skipped(kind string, old StreamDef) *Result {
	tag, what := "CREATE STREAM", "stream"
	if kind == "view" {
		tag = "CREATE MATERIALIZED VIEW"
	}
	if old.IsView {
		what = "materialized view"
	}
	return &Result{Tag: tag, Notice: &Notice{Severity: "NOTICE", Code: "42P07",
		Message: fmt.Sprintf("%s %q already exists, skipping", what, old.Name)}}
}

// startedNotice tells the client which job a statement started, and whether it runs
// until stopped or finishes at the end of the files it reads.
func (e *Engine) startedNotice(job, sink string) *Notice {
	if e.JobBounded(job) {
		return &Notice{Severity: "NOTICE", Code: "00000",
			Message: fmt.Sprintf("started job %s, which writes %s from the files it reads and finishes at their end (SHOW JOBS shows it)", job, sink)}
	}
	return &Notice{Severity: "NOTICE", Code: "00000",
		Message: fmt.Sprintf("started job %s, which writes %s continuously (SHOW JOBS shows it; TERMINATE JOB %s stops it)", job, sink, job)}
}

// JobBounded reports whether job id ends by itself: every relation it reads is a stream
// of the file connector (a file source ends at the file's end). A job reading a topic, a
// view or a generator runs until it is stopped.
func (e *Engine) JobBounded(id string) bool {
	def, ok := e.cat.Job(id)
	if !ok || len(def.Sources) == 0 {
		return false
	}
	for _, name := range def.Sources {
		d, ok := e.cat.Stream(name)
		if !ok || d.IsView || d.StreamOptions().Connector != "file" {
			return false
		}
	}
	return true
}

func (e *Engine) insertSelect(s *sql.Insert, sess *Session) (*Result, error) {
	target, ok := e.cat.Stream(s.Target)
	if !ok {
		return nil, sql.Errorf(sql.CodeUnknownTable, "stream %q does not exist", s.Target)
	}
	if target.IsView {
		return nil, sql.Errorf(sql.CodeNotSupported, "cannot INSERT INTO materialized view %q", target.Name)
	}
	q, funcs, err := e.bindContinuous(s.Query)
	if err != nil {
		return nil, err
	}
	out := q.OutputSchema()
	ts := target.Schema()
	if len(s.Columns) > 0 || len(out) != len(ts) {
		return nil, sql.Errorf(sql.CodeNotSupported, "INSERT INTO %s SELECT must select exactly the %d columns of %s, in order", target.Name, len(ts), target.Name)
	}
	for i := range out {
		if _, ok := sql.Unify(out[i].Type, ts[i].Type); !ok {
			return nil, sql.Errorf(sql.CodeTypeMismatch, "column %d of the SELECT is %s but %s.%s is %s", i+1, out[i].Type, target.Name, ts[i].Name, ts[i].Type)
		}
	}
	if err := e.checkFileWriter(target, "INSERT INTO "+target.Name); err != nil {
		return nil, err
	}
	sink, err := planner.StreamSink(target.Name, target.Options, ts)
	if err != nil {
		return nil, err
	}
	planned, err := plannedSink(q, sink, stateTTL(sess))
	if err != nil {
		return nil, err
	}
	if err := checkChangelogTarget(target, planned); err != nil {
		return nil, err
	}
	if err := e.checkDatabaseSink(target, planned); err != nil {
		return nil, err
	}
	id, err := e.startNewJob(s.Text, nil, q, funcs, sink, stateTTL(sess))
	if err != nil {
		return nil, err
	}
	// The statement itself inserted no row: its job inserts them as they come. The tag stays
	// a valid INSERT tag for drivers; the notice says what happened.
	return &Result{Tag: "INSERT 0 0", Notice: e.startedNotice(id, target.Name)}, nil
}

// plannedSink plans q into sink and returns the sink as planned: for an updating query, its
// change mode and the changelog's key (planner.SinkSpec.Changes, KeyColumns).
func plannedSink(q *sql.Query, sink planner.SinkSpec, ttl int64) (planner.SinkSpec, error) {
	_, plan, err := planner.Plan(q, planner.Options{Job: "check", Sink: sink, StateTTL: ttl})
	if err != nil {
		return sink, err
	}
	return plan.Stages[len(plan.Stages)-1].Sink, nil
}

// checkChangelogTarget refuses (0A000) INSERT INTO target of an updating query unless target
// is a table whose primary key is the changelog's key: an append-only stream would read its
// deletes as rows, and a table keyed otherwise would keep rows the query took back.
func checkChangelogTarget(target StreamDef, planned planner.SinkSpec) error {
	if planned.Changes == planner.AppendOnly {
		return nil
	}
	key := make([]string, len(planned.KeyColumns))
	for i, c := range planned.KeyColumns {
		key[i] = planned.Schema[c].Name
	}
	if target.IsTable && len(target.PrimaryKey) == len(key) && len(key) > 0 {
		same := true
		for _, k := range key {
			found := false
			for _, p := range target.PrimaryKey {
				found = found || strings.EqualFold(p, k)
			}
			same = same && found
		}
		if same {
			return nil
		}
	}
	what := "stream " + target.Name + " is append-only"
	if target.IsTable {
		what = fmt.Sprintf("table %s is keyed by (%s)", target.Name, strings.Join(target.PrimaryKey, ", "))
	}
	if len(key) == 0 {
		return sql.Errorf(sql.CodeNotSupported, "the rows of this query change as input arrives (%s: a GROUP BY without a window), and %s: write it with CREATE STREAM ... AS SELECT, whose stream carries the change column", planned.Changes, what)
	}
	return sql.Errorf(sql.CodeNotSupported, "the rows of this query change as input arrives (%s: a GROUP BY without a window), and %s: declare a TABLE with PRIMARY KEY (%s) and insert into it, or use CREATE STREAM ... AS SELECT, which makes that table", planned.Changes, what, strings.Join(key, ", "))
}

// startNewJob plans q, records the job (and the derived stream d, if any) in the catalog,
// and starts it. Planning happens first so a bad query creates nothing. It returns the
// job's id.
func (e *Engine) startNewJob(text string, d *StreamDef, q *sql.Query, funcs []string, sink planner.SinkSpec, ttl int64) (string, error) {
	if _, _, err := planner.Plan(q, planner.Options{Job: "check", Sink: sink, StateTTL: ttl}); err != nil {
		return "", err
	}
	def := JobDef{Statement: text, State: JobRunning, Sink: sink.Stream, Sources: relationNames(q), StateTTL: ttl, Functions: funcs, Layout: newJobLayout}
	if e.cluster != nil {
		e.jobs.startMu.Lock()
		defer e.jobs.startMu.Unlock()
	}
	id, err := e.cat.AddStreamAndJob(d, def)
	if err != nil {
		return "", err
	}
	def.ID = id
	if err := e.startJob(def, q, sink, true, 0); err != nil {
		e.cat.SetJobState(id, JobFailed, err.Error())
		return id, err
	}
	return id, nil
}

// restartJob starts a job recorded in the catalog again, from its statement text.
func (e *Engine) restartJob(def JobDef) error { return e.restartAttempt(def, 0) }

// restartAttempt is restartJob for the attempt-th start after transient errors.
func (e *Engine) restartAttempt(def JobDef, attempt int) error {
	q, sink, err := e.jobQuery(def)
	if err != nil {
		return err
	}
	return e.startJob(def, q, sink, false, attempt)
}

// jobQuery binds a recorded job's statement again and names its sink.
func (e *Engine) jobQuery(def JobDef) (*sql.Query, planner.SinkSpec, error) {
	stmts, err := sql.Parse(def.Statement)
	if err != nil || len(stmts) != 1 {
		return nil, planner.SinkSpec{}, fmt.Errorf("cannot parse the job's statement again: %v", err)
	}
	var sel *sql.Select
	switch s := stmts[0].(type) {
	case *sql.CreateStream:
		sel = s.As
	case *sql.CreateView:
		sel = s.As
	case *sql.Insert:
		sel = s.Query
	}
	if sel == nil {
		return nil, planner.SinkSpec{}, fmt.Errorf("statement %q is not a continuous query", firstWords(def.Statement))
	}
	q, _, err := e.bindContinuous(sel)
	if err != nil {
		return nil, planner.SinkSpec{}, err
	}
	target, ok := e.cat.Stream(def.Sink)
	if !ok {
		return nil, planner.SinkSpec{}, fmt.Errorf("its sink %q no longer exists", def.Sink)
	}
	sink, err := planner.StreamSink(target.Name, target.Options, target.Schema())
	if err != nil {
		return nil, planner.SinkSpec{}, err
	}
	if target.IsView {
		sink = planner.SinkSpec{Stream: target.Name, Connector: "view", Schema: target.Schema()}
	}
	return q, sink, nil
}

// startJob plans and starts a job and watches it until it ends. fresh says the job is new
// (startNewJob) rather than started again from the catalog; attempt counts the starts
// after transient errors (jobretry.go).
func (e *Engine) startJob(def JobDef, q *sql.Query, sink planner.SinkSpec, fresh bool, attempt int) error {
	interval, minInterval := DefaultCheckpointInterval, DefaultMinCheckpointInterval
	if sink.Options.CheckpointSet {
		interval, minInterval = sink.Options.CheckpointInterval, 0
	}
	isView := sink.Connector == "view"
	// A view's rows are state of its job, committed with its checkpoints (exec/tableout.go):
	// across instances in the shared checkpoint store, where any instance reads them.
	_, plan, err := planner.Plan(q, def.planOptions(sink))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	env := e.env(def.ID)
	env.CheckpointInterval, env.MinCheckpointInterval = interval, minInterval
	if minInterval > 0 {
		env.LightCheckpointInterval = DefaultLightCheckpointInterval
	}
	var out *fileOutput
	if !isView {
		target, _ := e.cat.Stream(def.Sink)
		out = newFileOutput(e.files, def.ID, sink, target.Job == def.ID, readsFilesOnly(q))
	}
	if out != nil {
		open := env.OpenSink
		env.OpenSink = func(spec planner.SinkSpec) (connectors.Sink, error) {
			if out.isMain(spec, sink) {
				return out.open(fresh)
			}
			return open(spec)
		}
	}
	var units, owned []string
	whole := false
	if e.cluster != nil {
		var ok bool
		units, owned, whole, ok, err = e.cluster.prepare(ctx, def.ID, plan, &env)
		if err != nil || !ok {
			cancel() // nothing of the job is this instance's now (or it failed to take it)
			return err
		}
	}
	if e.cluster != nil && env.MinCheckpointInterval > 0 {
		// Checkpoints commit to the shared Postgres: no more often than ten a second per
		// job, however cheap each is and however many instances run it.
		env.MinCheckpointInterval = max(env.MinCheckpointInterval, ClusterMinCheckpointInterval)
		env.LightCheckpointInterval = 0
		c, job := e.cluster, def.ID
		env.Runners = func() int { return c.runners(job) }
	}
	cps := &checkpointStats{}
	env.Commit = cps.measure(env.Commit)
	job, err := exec.Start(ctx, def.ID, plan, env)
	if err != nil {
		cancel()
		return err
	}
	rj := &runningJob{def: def, job: job, cancel: cancel, done: make(chan struct{}), units: units, owned: owned, whole: whole,
		checkpoints: cps, out: out, attempt: attempt, started: time.Now()}
	go rj.rate.run(rj.done, job.RecordsIn)
	e.jobs.add(rj)
	return nil
}

// env is how a job reaches connectors and state.
func (e *Engine) env(job string) exec.Env {
	logf := func(format string, args ...any) {
		fmt.Fprintf(e.cfg.Log, "job %s: "+format+"\n", append([]any{job}, args...)...)
	}
	return exec.Env{
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			src, err := e.openSource(spec)
			if err != nil {
				return nil, err
			}
			return safeSource{Source: src, log: logf}, nil
		},
		OpenSink: func(spec planner.SinkSpec) (connectors.Sink, error) {
			if of := spec.DLQOf; of != "" {
				return e.dlq.open(spec, of, e.openSink)
			}
			return e.openSink(spec)
		},
		OpenLookup: e.openLookup,
		NewFormat: func(name string, schema sql.Schema) (connectors.Format, error) {
			f, err := connectors.NewFormat(name, schema)
			if err != nil {
				return nil, err
			}
			return safeFormat{f: f, log: logf}, nil
		},
		Store:          e.store,
		AggCacheGroups: e.cfg.AggCacheGroups,
		JoinCacheKeys:  e.cfg.JoinCacheKeys,
		ShuffleTopics:  e.cfg.Broker != nil || e.cfg.RocketMQ != nil,
		Commit:         e.commitCheckpoint,
		// Bad records (rate-limited by exec), checkpoint and sink notices, as they happen;
		// each line names its job.
		Logf: func(format string, args ...any) { fmt.Fprintf(e.cfg.Log, format+"\n", args...) },
	}
}

// openSource opens the source of spec's connector (connectors.Lookup); a file path the
// sandbox refuses is 42501.
func (e *Engine) openSource(spec planner.SourceSpec) (connectors.Source, error) {
	kind, opts, err := connectorOf(spec.Stream, spec.Connector, spec.Options)
	if err != nil {
		return nil, err
	}
	if kind.OpenSource == nil {
		return nil, sql.Errorf(sql.CodeNotSupported, "stream %s: the %s connector cannot be read", spec.Stream, kind.Name)
	}
	src, err := kind.OpenSource(context.Background(), e.deps(), connectors.Spec{Stream: spec.Stream, Options: opts, Schema: spec.Schema, Columns: spec.Columns})
	if errors.Is(err, connectors.ErrNoBroker) {
		_, err = e.needBroker(spec.Stream)
	}
	if err != nil {
		return nil, fileError(err)
	}
	return src, nil
}

// openSink opens the sink of spec's connector (connectors.Lookup).
func (e *Engine) openSink(spec planner.SinkSpec) (connectors.Sink, error) {
	kind, opts, err := connectorOf(spec.Stream, spec.Connector, spec.Options)
	if err != nil {
		return nil, err
	}
	if kind.OpenSink == nil {
		return nil, sql.Errorf(sql.CodeNotSupported, "stream %s: the %s connector cannot be written", spec.Stream, kind.Name)
	}
	sink, err := kind.OpenSink(context.Background(), e.deps(), connectors.Spec{Stream: spec.Stream, Options: opts,
		Schema: spec.Schema, Key: e.declaredKey(spec.Stream, spec.Schema)})
	if errors.Is(err, connectors.ErrNoBroker) {
		_, err = e.needBroker(spec.Stream)
	}
	if err != nil {
		return nil, fileError(err)
	}
	return sink, nil
}

// connectorOf finds a stream's connector and parses its options. Specs made inside the
// engine (shuffle topics, side outputs) carry options of their own besides the stream's,
// so only the options a connector reads are parsed here; the stream's were validated when
// it was declared.
func connectorOf(stream, connector string, opts connectors.StreamOptions) (connectors.Kind, connectors.StreamOptions, error) {
	if connector == "" {
		connector = opts.Get("connector")
	}
	if connector == "" {
		connector = "broker"
	}
	kind, ok := connectors.Lookup(connector)
	if !ok {
		return kind, connectors.StreamOptions{}, sql.Errorf(sql.CodeNotSupported, "stream %s: the %s connector is not available in this build (known: %s)", stream, connector, strings.Join(connectors.KindNames(), ", "))
	}
	opts.Connector = kind.Name
	return kind, opts, nil
}

func (e *Engine) deps() connectors.Deps {
	return connectors.Deps{Broker: e.cfg.Broker, RocketMQ: e.cfg.RocketMQ, Files: e.files}
}

func (e *Engine) needBroker(stream string) (*broker.Broker, error) {
	if e.cfg.Broker == nil {
		return nil, noBrokerError{err: sql.Errorf(sql.CodeNotSupported, "stream %s lives on a broker, and this rsql runs none (rsql -c/-f without --server runs an engine of its own, without a broker): send the statements to a running server with --server ADDR (or use connector = 'file')", stream)}
	}
	return e.cfg.Broker, nil
}

// noBrokerError is the SQL error of a statement or job that needs a broker this engine
// lacks; it is also connectors.ErrNoBroker, so a recorded job that meets it is left as it
// was (jobretry.go).
type noBrokerError struct{ err *sql.Error }

func (e noBrokerError) Error() string   { return e.err.Error() }
func (e noBrokerError) Unwrap() []error { return []error{e.err, connectors.ErrNoBroker} }

func topicOf(stream string, opts map[string]string) string {
	if t := opts["topic"]; t != "" {
		return t
	}
	return stream
}

func (e *Engine) jobControl(s *sql.JobControl) (*Result, error) {
	def, ok := e.cat.Job(s.ID)
	if !ok {
		return nil, sql.Errorf(sql.CodeUnknownTable, "job %q does not exist (SHOW JOBS lists them)", s.ID)
	}
	switch s.Action {
	case sql.JobTerminate:
		if err := e.jobs.stop(def.ID, JobTerminated); err != nil {
			return nil, err
		}
		e.dropJobState(def.ID)
		sink, _ := e.cat.Stream(def.Sink)
		e.releaseExternal(def, sink)
	case sql.JobPause:
		if def.State != JobRunning {
			return nil, sql.Errorf(sql.CodeInvalidValue, "job %s is %s, not RUNNING", def.ID, def.State)
		}
		if err := e.jobs.stop(def.ID, JobPaused); err != nil {
			return nil, err
		}
	case sql.JobResume:
		// A paused or failed job starts again from its last checkpoint; one waiting to
		// start again after a transient error starts now.
		waiting := def.State == JobRunning && e.jobs.cancelRetry(def.ID)
		if def.State != JobPaused && def.State != JobFailed && !waiting {
			return nil, sql.Errorf(sql.CodeInvalidValue, "job %s is %s: RESUME takes a PAUSED or FAILED job (or one RETRYING)", def.ID, def.State)
		}
		def.State, def.Error = JobRunning, ""
		if e.cluster != nil {
			e.jobs.startMu.Lock()
			defer e.jobs.startMu.Unlock()
		}
		if err := e.cat.SetJobState(def.ID, JobRunning, ""); err != nil {
			return nil, err
		}
		if err := e.restartJob(def); err != nil {
			if retryable(err) && e.jobs.scheduleRetry(def, 1, err) {
				return &Result{Tag: s.Action.String() + " JOB", Notice: &Notice{Message: fmt.Sprintf("job %s cannot start now (%v); it starts again with backoff (SHOW JOBS)", def.ID, err)}}, nil
			}
			e.cat.SetJobState(def.ID, JobFailed, err.Error())
			return nil, err
		}
	}
	return &Result{Tag: s.Action.String() + " JOB"}, nil
}

func (e *Engine) drop(s *sql.Drop) (*Result, error) {
	d, ok := e.cat.Stream(s.Name)
	if !ok {
		if s.IfExists {
			return &Result{Tag: "DROP " + s.Kind.String()}, nil
		}
		return nil, sql.Errorf(sql.CodeUnknownTable, "%s %q does not exist", strings.ToLower(s.Kind.String()), s.Name)
	}
	if kind := d.Kind(); s.Kind != kind && !(d.Changelog && s.Kind == sql.DropStream) {
		return nil, sql.Errorf(sql.CodeWrongObjectType, "%q is not a %s (use DROP %s)", d.Name, strings.ToLower(s.Kind.String()), kind)
	}
	if err := e.cat.DropStream(d.Name); err != nil {
		return nil, err
	}
	if d.Job != "" {
		e.jobs.cancelRetry(d.Job)
		if rj := e.jobs.get(d.Job); rj != nil {
			rj.stop()
		}
		e.dropJobState(d.Job)
		if def, ok := e.cat.Job(d.Job); ok {
			e.releaseExternal(def, d)
		}
	}
	return &Result{Tag: "DROP " + s.Kind.String()}, nil
}

func (e *Engine) explain(s *sql.Explain, sess *Session) (*Result, error) {
	q, err := e.bind(s.Query)
	if err != nil {
		return nil, err
	}
	// The plan of a statement that starts a job ends in that job's sink.
	var sink planner.SinkSpec
	switch st := s.Statement.(type) {
	case *sql.CreateStream:
		if sink, err = planner.StreamSink(st.Name, withDefaults(st.Name, st.Options), q.OutputSchema()); err != nil {
			return nil, err
		}
	case *sql.CreateView:
		sink = planner.SinkSpec{Stream: st.Name, Connector: "view", Schema: q.OutputSchema()}
	case *sql.Insert:
		if target, ok := e.cat.Stream(st.Target); ok {
			if sink, err = planner.StreamSink(target.Name, target.Options, target.Schema()); err != nil {
				return nil, err
			}
		}
	}
	_, isSelect := s.Statement.(*sql.Select)
	l, p, err := planner.Plan(q, planner.Options{Job: "explain", Sink: sink, StateTTL: stateTTL(sess), Pull: isSelect && isPull(q)})
	if err != nil {
		return nil, err
	}
	text := planner.Explain(l, p)
	if isSelect && isPull(q) {
		if pl := e.pointLookupOf(q); pl != nil {
			text = pl.explain() + "\n" + text
		}
	}
	return textResult("plan", text), nil
}

// textResult is a one-column result with a row per line of text.
func textResult(column, text string) *Result {
	var rows []sql.Row
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		rows = append(rows, sql.Row{sql.Varchar(line)})
	}
	return &Result{Columns: sql.Schema{{Name: column, Type: sql.TypeVarchar}}, Rows: &sliceRows{rows: rows}, Tag: "EXPLAIN"}
}

func (e *Engine) show(s *sql.ShowStmt) (*Result, error) {
	switch s.What {
	case sql.ShowStreams, sql.ShowViews:
		views := s.What == sql.ShowViews
		cols := sql.Schema{{Name: "name", Type: sql.TypeVarchar}, {Name: "connector", Type: sql.TypeVarchar},
			{Name: "target", Type: sql.TypeVarchar}, {Name: "format", Type: sql.TypeVarchar}, {Name: "job", Type: sql.TypeVarchar}}
		var rows []sql.Row
		for _, d := range e.cat.Streams() {
			if d.IsView != views {
				continue
			}
			o := d.StreamOptions()
			target := o.Topic
			if o.Connector == "file" {
				target = o.Path
			}
			if k, ok := connectors.Lookup(o.Connector); ok && k.ParseLookup != nil {
				if lo, err := k.ParseLookup(d.Name, o.Raw); err == nil {
					target = lo.Target // the database's table
				}
			}
			// The format as declared: a view has none.
			rows = append(rows, sql.Row{sql.Varchar(d.Name), sql.Varchar(o.Connector), sql.Varchar(target),
				sql.Varchar(o.Get("format")), nullable(d.Job)})
		}
		return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "SHOW"}, nil
	case sql.ShowJobs:
		return e.showJobs(), nil
	case sql.ShowUnits:
		return e.showUnits()
	case sql.ShowTopics:
		return e.showTopics()
	case sql.ShowFunctions:
		return e.showFunctions(), nil
	case sql.ShowUsers:
		return e.showUsers(), nil
	}
	return nil, sql.Errorf(sql.CodeNotSupported, "SHOW %s is not available in this build", s.What)
}

func nullable(s string) sql.Value {
	if s == "" {
		return sql.Null
	}
	return sql.Varchar(s)
}

func (e *Engine) describe(s *sql.Describe) (*Result, error) {
	d, ok := e.cat.Stream(s.Name)
	if !ok {
		return nil, sql.Errorf(sql.CodeUnknownTable, "stream or view %q does not exist", s.Name)
	}
	cols := sql.Schema{{Name: "column", Type: sql.TypeVarchar}, {Name: "type", Type: sql.TypeVarchar}, {Name: "extra", Type: sql.TypeVarchar}}
	var rows []sql.Row
	for _, c := range d.Schema() {
		extra := sql.Null
		if strings.EqualFold(c.Name, d.EventTime) {
			extra = sql.Varchar(fmt.Sprintf("WATERMARK %s - %s", c.Name, time.Duration(d.WatermarkDelay)*time.Millisecond))
		}
		rows = append(rows, sql.Row{sql.Varchar(c.Name), sql.Varchar(c.Type.String()), extra})
	}
	return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "DESCRIBE"}, nil
}

func (e *Engine) showVar(sess *Session, s *sql.ShowVar) (*Result, error) {
	cols := sql.Schema{{Name: "name", Type: sql.TypeVarchar}, {Name: "setting", Type: sql.TypeVarchar}}
	value := func(name string) string {
		if v, ok := sess.Settings[name]; ok {
			return v
		}
		return settings[name].def
	}
	if s.Name == "all" {
		var rows []sql.Row
		for _, k := range settingNames() {
			rows = append(rows, sql.Row{sql.Varchar(k), sql.Varchar(value(k))})
		}
		return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "SHOW"}, nil
	}
	if _, ok := settings[s.Name]; !ok {
		return nil, sql.Errorf(sql.CodeInvalidValue, "unrecognized setting %q: the settings are %s (SHOW ALL lists them with their values)", s.Name, strings.Join(settingNames(), ", "))
	}
	return &Result{Columns: sql.Schema{{Name: s.Name, Type: sql.TypeVarchar}}, Rows: &sliceRows{rows: []sql.Row{{sql.Varchar(value(s.Name))}}}, Tag: "SHOW"}, nil
}

// sliceRows is a finished result held in memory.
type sliceRows struct {
	rows []sql.Row
	i    int
}

func (r *sliceRows) Next(ctx context.Context) (sql.Row, error) {
	if r.i >= len(r.rows) {
		return nil, io.EOF
	}
	r.i++
	return r.rows[r.i-1], nil
}

func (r *sliceRows) Close() error { return nil }

// commitCheckpoint writes a job's checkpoint to the state store in one atomic batch; only
// then are its offsets committed to the broker as consumer group "rsql-<job>", so broker
// tools see the job's progress. The checkpoint, not the group offset, is what a restarted
// job resumes from.
func (e *Engine) commitCheckpoint(cp *exec.CheckpointInfo) error {
	return e.commitLocal(cp)
}

// commitLocal writes a checkpoint to the local state store and the broker's group offsets.
// In cluster mode it runs after the checkpoint committed to the shared store.
func (e *Engine) commitLocal(cp *exec.CheckpointInfo) error {
	if err := e.store.Write(cp.State); err != nil {
		return err
	}
	b := e.cfg.Broker
	if b == nil {
		return nil
	}
	for _, o := range cp.Offsets {
		topic := o.Stream
		if d, ok := e.cat.Stream(o.Stream); ok {
			o := d.StreamOptions()
			if o.Connector != "broker" {
				continue
			}
			topic = o.TopicOf(d.Name)
		}
		q, err := strconv.Atoi(o.Split)
		if err != nil {
			continue
		}
		if _, ok := b.Topic(topic); ok {
			b.CommitOffset("rsql-"+cp.Job, topic, q, o.Offset)
		}
	}
	return nil
}

// relationNames are the lower-case names of the streams, tables and views a query reads.
func relationNames(q *sql.Query) []string {
	var out []string
	for _, r := range q.Relations() {
		out = append(out, strings.ToLower(r.Name))
	}
	return out
}

// readsFilesOnly reports whether every relation a query reads is a file (its job ends).
func readsFilesOnly(q *sql.Query) bool {
	rels := q.Relations()
	for _, r := range rels {
		if r.Connector() != "file" {
			return false
		}
	}
	return len(rels) > 0
}

// dropJobState deletes the state of a (stopped) job that was terminated — by TERMINATE
// JOB, or by DROP or CREATE OR REPLACE of the stream or view it writes — from the local
// store: a terminated job never runs again (RESUME takes a paused or failed one), so its
// operator state, positions and a view's rows (exec/tableout.go) would only take disk. With
// several instances the job's state stays in the shared store and in each instance's copy
// (docs/operations.md, "Dropped jobs").
func (e *Engine) dropJobState(job string) {
	if e.cluster != nil || job == "" {
		return
	}
	if err := e.dropLocalState(job); err != nil {
		fmt.Fprintf(e.cfg.Log, "job %s: delete its state: %v\n", job, err)
	}
}

// dropLocalState deletes every key of job from the local store by one range.
func (e *Engine) dropLocalState(job string) error {
	b := &state.Batch{}
	b.DropPrefix(jobPrefix(job))
	return e.store.Write(b)
}

// releaseExternal releases, in the background, what a terminated job holds outside rsql:
// the rows it left in the progress table of the PostgreSQL database it wrote (sink, a
// postgres table), and the replication slots rsql created for the postgres-cdc tables it
// read. A failure (the database unreachable, no privilege) is logged with the statement
// to run.
func (e *Engine) releaseExternal(def JobDef, sink StreamDef) {
	var cdc []StreamDef
	for _, name := range def.Sources {
		if src, ok := e.cat.Stream(name); ok && strings.EqualFold(src.Options["connector"], "postgres-cdc") && !e.readByOtherJob(name, def.ID) {
			cdc = append(cdc, src)
		}
	}
	progress := strings.EqualFold(sink.Options["connector"], "postgres")
	if def.ID == "" || !progress && len(cdc) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if progress {
			if err := connectors.DeletePostgresProgress(ctx, sink.Name, sink.Options, def.ID); err != nil {
				fmt.Fprintf(e.cfg.Log, "job %s: %v (DELETE FROM %s WHERE job = '%s' removes them)\n", def.ID, err, connectors.PostgresProgressTable, def.ID)
			}
		}
		for _, src := range cdc {
			if _, err := connectors.DropPostgresCDCSlot(ctx, src.Name, src.Options); err != nil {
				fmt.Fprintf(e.cfg.Log, "job %s: %v (SELECT pg_drop_replication_slot('<slot>') drops it once no job reads it)\n", def.ID, err)
			}
		}
	}()
}

// readByOtherJob reports whether a job other than job that has not ended for good (a
// replacing one, a paused one) reads stream: its slot is that job's too.
func (e *Engine) readByOtherJob(stream, job string) bool {
	for _, j := range e.cat.Jobs() {
		if j.ID != job && j.State != JobTerminated && slices.Contains(j.Sources, stream) {
			return true
		}
	}
	return false
}

// errFound stops a scan at its first key.
var errFound = errors.New("found")

// startRecorded deletes the local state terminated jobs left and starts again the jobs the
// catalog lists as RUNNING (a single server; with several instances the cluster starts
// them).
func (e *Engine) startRecorded() {
	e.dropTerminatedState()
	e.jobs.startRecorded()
}

// dropTerminatedState deletes the local state left by terminated jobs (those terminated by
// a version that kept it, or when the process stopped before dropJobState ran).
func (e *Engine) dropTerminatedState() {
	for _, j := range e.cat.Jobs() {
		if j.State != JobTerminated {
			continue
		}
		if err := e.store.Scan(jobPrefix(j.ID), func(_, _ []byte) error { return errFound }); errors.Is(err, errFound) {
			e.dropJobState(j.ID)
		}
	}
}
