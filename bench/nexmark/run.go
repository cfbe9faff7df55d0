package nexmark

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"rsql/connectors"
	"rsql/exec"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// Errors of the package.
var (
	// ErrUnknownQuery: a query name that is not one of the embedded queries.
	ErrUnknownQuery = errors.New("nexmark: unknown query")
	// ErrBadConfig: a run configuration out of range.
	ErrBadConfig = errors.New("nexmark: bad configuration")
)

// Config is one run of a query.
type Config struct {
	// Events is the number of events of the sequence, all types together (default 1,000,000).
	Events int64
	// Splits of every stream (default 1): the splits are read in parallel.
	Splits int
	// Seed of the generator.
	Seed uint64
	// EventRate is events per second of event time (default
	// connectors.DefaultNexmarkEventRate, the published suite's rate).
	EventRate int64
	// Rate paces the generation in events per wall-clock second (0: as fast as possible).
	Rate int64
	// BaseTime is the event time of the first event, epoch ms (0: the connector's default).
	BaseTime int64
	// Format is how the source hands events to the runtime: "rows" (default: typed rows,
	// through connectors.RowSource, nothing encoded or decoded), "nexmark" (message bodies
	// holding event numbers, which the format of that name turns into rows) or "json"
	// (generated rows written as JSON and parsed again).
	Format string
	// State is "memory" (default) or "rocksdb".
	State string
	// CheckpointInterval is how often the job checkpoints its state (default 1s, the
	// server's default; negative: only at the end).
	CheckpointInterval time.Duration
	// AggCacheGroups is exec.Env.AggCacheGroups: the groups an aggregation without a
	// window keeps in memory with RocksDB state (0: exec.DefaultAggCacheGroups).
	AggCacheGroups int
	// RocksLeveled opens the RocksDB state with leveled compaction
	// (state.RocksOptions.Leveled) instead of universal compaction.
	RocksLeveled bool
	// JoinCacheKeys is exec.Env.JoinCacheKeys: the join keys a regular join keeps in
	// memory with RocksDB state (0: exec.DefaultJoinCacheKeys).
	JoinCacheKeys int
	// OnRow, when set, sees every result row (valid only during the call), from one
	// goroutine. The rows of an updating query (the plan's sink has Changes, see
	// docs/sql.md "Changelogs") end with the change column: NULL for an insert, "delete"
	// for a delete.
	OnRow func(sql.Row) error
	// ThroughBroker puts the streams on topics of a bundled broker first and has the job
	// read them there (broker.go).
	ThroughBroker bool
	// SideInputPath is q13's side-input file (WriteSideInput); "": Run writes one into a
	// temporary directory, removed at the end.
	SideInputPath string
	// Started, when set, is called right before the job starts (after the topics are
	// written, with ThroughBroker), so a caller can time the job alone.
	Started func()
}

func (c *Config) defaults() {
	if c.Events <= 0 {
		c.Events = 1_000_000
	}
	if c.Splits <= 0 {
		c.Splits = 1
	}
	if c.EventRate <= 0 {
		c.EventRate = connectors.DefaultNexmarkEventRate
	}
	if c.State == "" {
		c.State = "memory"
	}
	if c.Format == "" {
		c.Format = "rows"
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = time.Second
	}
}

// Result is what a run did.
type Result struct {
	Query       string
	Events      int64 // events of the sequence (all types)
	RecordsIn   int64 // rows the job read (the events of the types it reads)
	RowsOut     int64 // result rows
	Late, Bad   int64
	Checkpoints int64
	// Rocks is the largest of each part of RocksDB's memory sampled during the run (every
	// 100 ms; zero with memory state).
	Rocks state.RocksMemory
	// RocksDisk is the largest size of RocksDB's table and blob files sampled during the
	// run (every 100 ms, as Rocks).
	RocksDisk state.RocksDisk
	// Batches counts the state batches the job wrote (checkpoints and split moves).
	Batches BatchStats
}

// BatchStats describes the state batches written to a store.
type BatchStats struct {
	Count                int64
	MaxOps, MaxBytes     int64 // of the largest batch by each measure
	TotalOps, TotalBytes int64
}

// countingStore is a store that counts the batches written through it.
type countingStore struct {
	state.Store
	mu    sync.Mutex
	stats BatchStats
}

func (c *countingStore) Write(b *state.Batch) error {
	c.mu.Lock()
	c.stats.Count++
	c.stats.MaxOps, c.stats.MaxBytes = max(c.stats.MaxOps, int64(b.Len())), max(c.stats.MaxBytes, int64(b.Size()))
	c.stats.TotalOps += int64(b.Len())
	c.stats.TotalBytes += int64(b.Size())
	c.mu.Unlock()
	return c.Store.Write(b)
}

// catalog is the streams of ddl.sql, as the binder sees them.
type catalog map[string]*sql.Relation

func (c catalog) Relation(name string) (*sql.Relation, bool) {
	r, ok := c[strings.ToLower(name)]
	return r, ok
}

func newCatalog(cfg Config) (catalog, error) {
	stmts, err := sql.Parse(DDL(cfg))
	if err != nil {
		return nil, fmt.Errorf("nexmark: ddl.sql: %w", err)
	}
	cat := catalog{}
	for _, st := range stmts {
		cs, ok := st.(*sql.CreateStream)
		if !ok {
			return nil, fmt.Errorf("nexmark: ddl.sql holds a statement that is not CREATE STREAM or CREATE TABLE")
		}
		if _, err := connectors.ParseStreamOptions(cs.Options); err != nil {
			return nil, fmt.Errorf("nexmark: ddl.sql: %s: %w", cs.Name, err)
		}
		et := -1
		if cs.WatermarkColumn != "" {
			et = cs.Columns.Index(cs.WatermarkColumn)
		}
		rel := &sql.Relation{Name: cs.Name, Schema: cs.Columns, Options: cs.Options,
			EventTime: et, WatermarkDelay: cs.WatermarkDelay}
		if cs.Table {
			// A side-input table (q13): as the server's catalog declares a file table.
			rel.IsTable = true
			for _, k := range cs.PrimaryKey {
				rel.PrimaryKey = append(rel.PrimaryKey, cs.Columns.Index(k))
			}
			rel.Schema = append(append(sql.Schema{}, cs.Columns...), sql.Column{Name: sql.ChangeColumn, Type: sql.TypeVarchar})
		} else if err := connectors.CheckNexmarkStream(cs.Options, cs.Columns); err != nil {
			return nil, fmt.Errorf("nexmark: ddl.sql: stream %s: %w", cs.Name, err)
		}
		cat[strings.ToLower(cs.Name)] = rel
	}
	return cat, nil
}

// Plan binds and plans a query over the Nexmark streams (rows to the client, no sink).
func Plan(q Query, cfg Config) (*planner.Physical, error) {
	cfg.defaults()
	cat, err := newCatalog(cfg)
	if err != nil {
		return nil, err
	}
	stmts, err := sql.Parse(q.SQL)
	if err != nil {
		return nil, fmt.Errorf("nexmark %s: %w", q.Name, err)
	}
	// SET state_ttl statements, then one SELECT.
	var ttl int64
	for len(stmts) > 1 {
		set, ok := stmts[0].(*sql.SetStmt)
		if !ok || set.Name != "state_ttl" {
			break
		}
		d, ok := sql.ParseStateTTL(set.Value)
		if !ok {
			return nil, fmt.Errorf("nexmark %s: SET state_ttl = %q: not a duration", q.Name, set.Value)
		}
		ttl = d.Milliseconds()
		stmts = stmts[1:]
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("nexmark %s: want SET state_ttl statements and one SELECT, have %d other statements", q.Name, len(stmts))
	}
	sel, ok := stmts[0].(*sql.Select)
	if !ok {
		return nil, fmt.Errorf("nexmark %s: the statement is not a SELECT", q.Name)
	}
	bound, err := sql.Bind(sel, cat)
	if err != nil {
		return nil, fmt.Errorf("nexmark %s: %w", q.Name, err)
	}
	_, plan, err := planner.Plan(bound, planner.Options{Job: "nexmark-" + q.Name, StateTTL: ttl})
	if err != nil {
		return nil, fmt.Errorf("nexmark %s: %w", q.Name, err)
	}
	return plan, nil
}

// Run runs q over cfg's events to the end and returns what it did.
func Run(ctx context.Context, q Query, cfg Config) (Result, error) {
	cfg.defaults()
	res := Result{Query: q.Name, Events: cfg.Events}
	if cfg.State != "memory" && cfg.State != "rocksdb" {
		return res, fmt.Errorf("%w: state %q (memory or rocksdb)", ErrBadConfig, cfg.State)
	}
	if cfg.Format != "rows" && cfg.Format != "nexmark" && cfg.Format != "json" {
		return res, fmt.Errorf("%w: format %q (rows, nexmark or json)", ErrBadConfig, cfg.Format)
	}
	if cfg.SideInputPath == "" {
		dir, err := os.MkdirTemp("", "rsql-nexmark-side-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
		if cfg.SideInputPath, err = WriteSideInput(dir); err != nil {
			return res, err
		}
	}
	plan, err := Plan(q, cfg)
	if err != nil {
		return res, err
	}
	var store state.Store = state.NewMemory()
	var counted *countingStore
	stopRocks := func() (state.RocksMemory, state.RocksDisk) { return state.RocksMemory{}, state.RocksDisk{} }
	if cfg.State == "rocksdb" {
		dir, err := os.MkdirTemp("", "rsql-nexmark-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
		rs, err := state.OpenRocks(dir, state.RocksOptions{Leveled: cfg.RocksLeveled})
		if err != nil {
			return res, err
		}
		defer rs.Close()
		// (Counted only over RocksDB: operators tell the in-memory store by its type.)
		counted = &countingStore{Store: rs}
		store = counted
		stopRocks = sampleRocks(rs)
		defer stopRocks() // before Close; a no-op after the run's own call
	}
	var topics *brokerStreams
	if cfg.ThroughBroker {
		if topics, err = openBrokerStreams(ctx, plan, cfg.Splits); err != nil {
			return res, err
		}
		defer topics.close()
	}
	onRow := cfg.OnRow
	if onRow == nil {
		onRow = func(sql.Row) error { return nil }
	}
	env := exec.Env{
		OpenSource: func(spec planner.SourceSpec) (connectors.Source, error) {
			if spec.Connector != "nexmark" {
				return nil, fmt.Errorf("nexmark %s: stream %s is not a nexmark stream", q.Name, spec.Stream)
			}
			if topics != nil {
				return topics.source(spec)
			}
			src, err := connectors.OpenNexmarkSource(spec.Options.Raw, spec.Schema, spec.Columns)
			if err != nil || cfg.Format == "rows" {
				return src, err
			}
			// Messages: hide the RowSource capability so the runtime reads message bodies.
			return struct{ connectors.Source }{src}, nil
		},
		OpenLookup: func(spec connectors.LookupSpec) (connectors.LookupTable, error) {
			kind, ok := connectors.Lookup(spec.Options.Connector)
			if !ok || kind.OpenLookup == nil {
				return nil, fmt.Errorf("nexmark %s: table %s cannot be looked up", q.Name, spec.Table)
			}
			return kind.OpenLookup(ctx, connectors.Deps{}, spec)
		},
		NewFormat:          connectors.NewFormat,
		OnRow:              onRow,
		Store:              store,
		CheckpointInterval: cfg.CheckpointInterval,
		AggCacheGroups:     cfg.AggCacheGroups,
		JoinCacheKeys:      cfg.JoinCacheKeys,
	}
	if cfg.Started != nil {
		cfg.Started()
	}
	job, err := exec.Start(ctx, "nexmark-"+q.Name, plan, env)
	if err != nil {
		return res, err
	}
	err = job.Wait()
	res.Rocks, res.RocksDisk = stopRocks()
	if counted != nil {
		counted.mu.Lock()
		res.Batches = counted.stats
		counted.mu.Unlock()
	}
	st := job.Stats()
	res.RecordsIn, res.RowsOut, res.Late, res.Bad, res.Checkpoints = st.RecordsIn, st.RecordsOut, st.Late, st.Bad, st.Epoch
	if err == nil && st.Bad > 0 {
		err = fmt.Errorf("nexmark %s: %d bad records: %v", q.Name, st.Bad, st.BadErrors)
	}
	return res, err
}

// sampleRocks reads rs's memory and the size of its files every 100 ms until the returned
// function is called, which takes a last reading and returns the largest of each part (the
// same on every call).
func sampleRocks(rs *state.Rocks) func() (state.RocksMemory, state.RocksDisk) {
	type peaks struct {
		mem  state.RocksMemory
		disk state.RocksDisk
	}
	done, stopped := make(chan struct{}), make(chan peaks)
	go func() {
		var p peaks
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			p.mem, p.disk = p.mem.Max(rs.Memory()), p.disk.Max(rs.Disk())
			select {
			case <-done:
				stopped <- peaks{p.mem.Max(rs.Memory()), p.disk.Max(rs.Disk())}
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	var p peaks
	return func() (state.RocksMemory, state.RocksDisk) {
		once.Do(func() { close(done); p = <-stopped })
		return p.mem, p.disk
	}
}
