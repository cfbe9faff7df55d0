package exec

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

// lookupOp is a lookup join (planner.LookupJoinNode, docs/sql.md "Lookup joins"): each
// input row is joined with the rows of an external table whose key equals the row's,
// looked up when the row is processed. Per batch it gathers the distinct keys the cache
// does not hold and asks the table for all of them in one lookup, stores the answers in
// the cache (keys without rows too), then emits the joined rows in input order: INNER drops
// a row without match, LEFT gives it NULLs. A row whose key has a NULL matches nothing. A
// table held in memory (connectors.MemoryLookup, a file) is asked for each row's key
// directly instead (processMemory): it cannot fail, so nothing is cached or retried.
//
// A lookup that fails because the database cannot be reached (a restart, a lost
// connection, a timeout) is tried again after a wait that doubles from 100ms up to
// retry_backoff_max, for ever or max_retries times; the batch waits meanwhile, so no row is
// dropped or reordered. The stage's goroutine is the one waiting: a checkpoint barrier
// queues behind the batch and is taken once the lookup succeeds, and stopping the job
// cancels the wait at once (the batch is read again from the last checkpoint when the
// job resumes). Any other failure (the table or a column missing, a column of the wrong
// type) fails the job with an error naming the table.
//
// A value of the table that does not convert to its declared column type makes each row
// joined with it a bad record (rowerrors.go), with the error naming the table, the column
// and the value.
//
// The cache is not state: it is not checkpointed, and a restarted job starts with an
// empty one. A lookup join is not deterministic when the table changes: a row sees the
// table as it was when its key was looked up (or cached).
type lookupOp struct {
	stateless
	node  *planner.LookupJoinNode
	table connectors.LookupTable
	opts  connectors.LookupOptions
	cache *lookupCache
	stats *lookupCounters
	ctx   context.Context
	now   func() time.Time
	logf  func(format string, args ...any)
	// sleep waits d or until ctx is done (tests replace it).
	sleep func(ctx context.Context, d time.Duration) error
	// bad and schema: the stage's bad-record path and the operator's input row.
	bad    *badRows
	schema sql.Schema

	// Scratch, reused across batches.
	keyBuf   []byte
	kinds    []byte      // per input row: rowNoKey, rowFound, rowPending, rowBad
	found    [][]sql.Row // per input row (rowFound): the matching rows
	pendKey  []string    // per input row (rowPending): its key
	pending  map[string]struct{}
	asked    []sql.Row // keys to ask, in the declared column types
	askedKey map[string]int
	answers  map[string][]sql.Row
	keyVals  []sql.Value
	out      rowArena
	offs     []int64
	nulls    sql.Row
}

const (
	rowNoKey byte = iota
	rowFound
	rowPending
	rowBad // reported as a bad record: not emitted
)

func newLookupOp(ctx context.Context, n *planner.LookupJoinNode, table connectors.LookupTable, opts connectors.LookupOptions, now func() time.Time) *lookupOp {
	return &lookupOp{node: n, table: table, opts: opts, cache: newLookupCache(opts.CacheTTL, opts.CacheRows),
		stats: newLookupCounters(n.Table, opts.Target), ctx: ctx, now: now, logf: func(string, ...any) {}, sleep: sleepCtx,
		pending: map[string]struct{}{}, askedKey: map[string]int{}, answers: map[string][]sql.Row{},
		nulls: make(sql.Row, len(n.Columns))}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// keyOf encodes the key of input row r into o.keyBuf. It returns rowFound when the key
// has a value, rowNoKey when a key value is NULL (the row matches nothing), rowBad when
// one could not be computed (an error value: the row is reported as a bad record).
func (o *lookupOp) keyOf(r sql.Row, split string) (byte, error) {
	o.keyBuf = o.keyBuf[:0]
	for _, k := range o.node.LeftKeys {
		v := k(r)
		if v.IsNull() {
			if v.IsError() {
				return rowBad, o.bad.report(o.ctx, "lookup join", split, r, o.schema, v.AsError())
			}
			return rowNoKey, nil
		}
		o.keyBuf = sql.AppendKey(o.keyBuf, v)
	}
	return rowFound, nil
}

// ask adds the key of input row r to the keys to look up, as values of the key columns'
// declared types; it reports false when a value does not convert (a number out of the
// column's range: no row can have that key).
func (o *lookupOp) ask(r sql.Row) bool {
	o.keyVals = o.keyVals[:0]
	enc := o.keyBuf[len(o.keyBuf):]
	for i, k := range o.node.LeftKeys {
		t := o.node.Columns[o.node.KeyColumns[i]].Type
		v, err := sql.CastValue(k(r), t)
		if err != nil || v.IsNull() {
			return false
		}
		if v.S != "" {
			v.S = string([]byte(v.S)) // the input row's strings are borrowed
		}
		o.keyVals = append(o.keyVals, v)
		enc = sql.AppendKey(enc, v)
	}
	if _, ok := o.askedKey[string(enc)]; !ok {
		o.askedKey[string(enc)] = len(o.asked)
		o.asked = append(o.asked, append(sql.Row(nil), o.keyVals...))
	}
	return true
}

func (o *lookupOp) Process(_ int, b *Batch, out Emitter) error {
	n := len(b.Rows)
	if cap(o.kinds) < n {
		o.kinds, o.found, o.pendKey = make([]byte, n), make([][]sql.Row, n), make([]string, n)
	}
	o.kinds, o.found, o.pendKey = o.kinds[:n], o.found[:n], o.pendKey[:n]
	if mem, ok := o.table.(connectors.MemoryLookup); ok {
		return o.processMemory(mem, b, out)
	}
	clear(o.pending)
	clear(o.askedKey)
	o.asked = o.asked[:0]
	now := o.now()
	var hits, misses int64
	for i, r := range b.Rows {
		o.found[i] = nil
		kind, err := o.keyOf(r, b.Split)
		if err != nil {
			return err
		}
		if kind != rowFound {
			o.kinds[i] = kind
			continue
		}
		if rows, ok := o.cache.get(o.keyBuf, now); ok {
			o.kinds[i], o.found[i] = rowFound, rows
			hits++
			continue
		}
		misses++
		if _, ok := o.pending[string(o.keyBuf)]; ok {
			o.kinds[i], o.pendKey[i] = rowPending, string(o.keyBuf)
			continue
		}
		key := string(o.keyBuf)
		if !o.ask(r) {
			o.cache.put(key, nil, now)
			o.kinds[i] = rowFound
			continue
		}
		o.pending[key] = struct{}{}
		o.kinds[i], o.pendKey[i] = rowPending, key
	}
	o.stats.hits.Add(hits)
	o.stats.misses.Add(misses)
	if len(o.asked) > 0 {
		rows, err := o.lookup(o.asked)
		if err != nil {
			return err
		}
		clear(o.answers)
		for _, row := range rows {
			o.keyBuf = o.keyBuf[:0]
			null := false
			for _, k := range o.node.RightKeys {
				v := k(row)
				null = null || v.IsNull()
				o.keyBuf = sql.AppendKey(o.keyBuf, v)
			}
			if null {
				continue
			}
			if _, ok := o.pending[string(o.keyBuf)]; ok {
				o.answers[string(o.keyBuf)] = append(o.answers[string(o.keyBuf)], row)
			}
		}
		now = o.now()
		for key := range o.pending {
			o.cache.put(key, o.answers[key], now)
		}
	}
	o.stats.entries.Store(int64(o.cache.len()))
	return o.emit(b, out)
}

// processMemory joins a batch with a table held in memory: each row's key, in the key
// columns' declared types, is looked up at once (no cache, no batching of keys, no
// retries: the table answers without I/O). NULL keys, keys that cannot be computed and
// keys that do not convert to the column's type are handled as in Process.
func (o *lookupOp) processMemory(mem connectors.MemoryLookup, b *Batch, out Emitter) error {
	var hits int64
	for i, r := range b.Rows {
		o.found[i], o.kinds[i] = nil, rowFound
		o.keyBuf = o.keyBuf[:0]
		cast := false
		for j, k := range o.node.LeftKeys {
			v := k(r)
			if v.IsNull() {
				if v.IsError() {
					o.kinds[i] = rowBad
					if err := o.bad.reportAt(o.ctx, "lookup join", b.Split, rowOffset(b, i), r, o.schema, v.AsError()); err != nil {
						return err
					}
				} else {
					o.kinds[i] = rowNoKey
				}
				break
			}
			t := o.node.Columns[o.node.KeyColumns[j]].Type
			if v.K != t.Kind || t.Kind == sql.KindDecimal {
				c, err := sql.CastValue(v, t)
				if err != nil || c.IsNull() {
					o.kinds[i] = rowNoKey // no row can have a key its column cannot hold
					break
				}
				v, cast = c, true
			}
			o.keyBuf = sql.AppendKey(o.keyBuf, v)
		}
		if o.kinds[i] != rowFound {
			continue
		}
		hits++
		rows := mem.Get(o.keyBuf)
		if cast && len(rows) > 0 {
			// The cast may have rounded (2.5 to the BIGINT 3): a row matches only if its key,
			// in the join's key type, equals the row's.
			rows = o.sameKey(r, rows)
		}
		o.found[i] = rows
	}
	o.stats.hits.Add(hits)
	return o.emit(b, out)
}

// sameKey returns those of rows whose RightKeys equal input row r's LeftKeys.
func (o *lookupOp) sameKey(r sql.Row, rows []sql.Row) []sql.Row {
	o.keyBuf = o.keyBuf[:0]
	for _, k := range o.node.LeftKeys {
		o.keyBuf = sql.AppendKey(o.keyBuf, k(r))
	}
	n := len(o.keyBuf)
	var out []sql.Row
	for _, row := range rows {
		o.keyBuf = o.keyBuf[:n]
		for _, k := range o.node.RightKeys {
			o.keyBuf = sql.AppendKey(o.keyBuf, k(row))
		}
		if string(o.keyBuf[:n]) == string(o.keyBuf[n:]) {
			out = append(out, row)
		}
	}
	return out
}

// lookup asks the table for keys, retrying while it cannot be reached.
func (o *lookupOp) lookup(keys []sql.Row) ([]sql.Row, error) {
	wait := connectors.LookupBackoffMin
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(o.ctx, o.opts.Timeout)
		start := time.Now()
		rows, err := o.table.Lookup(ctx, keys)
		cancel()
		o.stats.observe(time.Since(start))
		o.stats.queries.Add(1)
		if err == nil {
			o.stats.keys.Add(int64(len(keys)))
			return rows, nil
		}
		if o.ctx.Err() != nil {
			return nil, o.ctx.Err()
		}
		o.stats.errors.Add(1)
		if !connectors.Retryable(err) {
			return nil, err
		}
		if o.opts.MaxRetries > 0 && attempt > o.opts.MaxRetries {
			return nil, fmt.Errorf("%w (gave up after %d attempts: max_retries = %d)", err, attempt, o.opts.MaxRetries)
		}
		o.stats.retries.Add(1)
		o.logf("%v; trying again in %v", err, wait)
		if err := o.sleep(o.ctx, wait); err != nil {
			return nil, err
		}
		wait = min(wait*2, max(o.opts.BackoffMax, connectors.LookupBackoffMin))
	}
}

// emit writes the joined rows of the batch, in input order.
func (o *lookupOp) emit(b *Batch, out Emitter) error {
	o.out.reset()
	o.offs = o.offs[:0]
	lw := o.node.LeftWidth
	for i, r := range b.Rows {
		var matches []sql.Row
		switch o.kinds[i] {
		case rowBad:
			continue
		case rowFound:
			matches = o.found[i]
		case rowPending:
			matches = o.answers[o.pendKey[i]]
		}
		emitted := false
		for _, m := range matches {
			if cause := sql.RowError(m); cause != nil {
				if err := o.bad.reportAt(o.ctx, "lookup join", b.Split, rowOffset(b, i), r, o.schema, cause); err != nil {
					return err
				}
				emitted = true // the row is accounted for: not emitted with NULLs
				break
			}
			// The joined row is built in place in the arena, and taken back if the
			// residual condition does not hold.
			start := len(o.out.vals)
			o.out.vals = append(append(o.out.vals, r[:lw]...), m...)
			if o.node.Residual != nil {
				v := o.node.Residual(o.out.vals[start:])
				if v.IsError() {
					o.out.vals = o.out.vals[:start]
					if err := o.bad.reportAt(o.ctx, "lookup join", b.Split, rowOffset(b, i), r, o.schema, v.AsError()); err != nil {
						return err
					}
					emitted = true
					break
				}
				if !v.Truth() {
					o.out.vals = o.out.vals[:start]
					continue
				}
			}
			o.out.endRow()
			if b.Offsets != nil {
				o.offs = append(o.offs, b.Offsets[i])
			}
			emitted = true
		}
		if !emitted && o.node.Kind == sql.JoinLeft {
			o.out.vals = append(o.out.vals, r[:lw]...)
			o.out.vals = append(o.out.vals, o.nulls...)
			o.out.endRow()
			if b.Offsets != nil {
				o.offs = append(o.offs, b.Offsets[i])
			}
		}
	}
	if o.out.len() == 0 {
		return nil
	}
	nb := o.out.build(b.Split)
	if b.Offsets != nil {
		nb.Offsets = o.offs
	}
	o.out.reset()
	return out.Emit(nb)
}

func (o *lookupOp) Close() error {
	if o.table == nil {
		return nil
	}
	return o.table.Close()
}

// lookupLatencyBuckets are the upper bounds, in seconds, of the lookup latency histogram.
var lookupLatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// lookupCounters are a lookup join's counters, written by its stage goroutine and read by
// Job.Stats from any goroutine (atomics).
type lookupCounters struct {
	table, target                                string
	queries, keys, hits, misses, errors, retries atomic.Int64
	entries                                      atomic.Int64
	latency                                      [16]atomic.Int64 // per bucket, then +Inf
	latencySumNanos                              atomic.Int64
}

func newLookupCounters(table, target string) *lookupCounters {
	return &lookupCounters{table: table, target: target}
}

func (c *lookupCounters) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(lookupLatencyBuckets) && s > lookupLatencyBuckets[i] {
		i++
	}
	c.latency[i].Add(1)
	c.latencySumNanos.Add(int64(d))
}

// LookupStats are the counters of one lookup join of a job (docs/operations.md).
type LookupStats struct {
	Stage int
	// Table is the rsql table, Target the external table.
	Table, Target string
	// Queries are the lookups sent to the database (each retry counts); Keys the keys
	// the successful ones asked for.
	Queries, Keys int64
	// Hits and Misses count input rows (with a non-NULL key) whose key the cache held or
	// did not hold.
	Hits, Misses int64
	// Errors are failed lookups; Retries those tried again.
	Errors, Retries int64
	// CacheEntries is the number of keys cached.
	CacheEntries int64
	// LatencyBuckets are the histogram's upper bounds (seconds) and LatencyCounts the
	// cumulative count of lookups at or under each; LatencyCount and LatencySum (seconds)
	// cover every lookup.
	LatencyBuckets []float64
	LatencyCounts  []uint64
	LatencyCount   uint64
	LatencySum     float64
}

func (c *lookupCounters) snapshot(stage int) LookupStats {
	s := LookupStats{Stage: stage, Table: c.table, Target: c.target,
		Queries: c.queries.Load(), Keys: c.keys.Load(), Hits: c.hits.Load(), Misses: c.misses.Load(),
		Errors: c.errors.Load(), Retries: c.retries.Load(), CacheEntries: c.entries.Load(),
		LatencyBuckets: lookupLatencyBuckets, LatencyCounts: make([]uint64, len(lookupLatencyBuckets)),
		LatencySum: float64(c.latencySumNanos.Load()) / 1e9}
	var cum uint64
	for i := range lookupLatencyBuckets {
		cum += uint64(c.latency[i].Load())
		s.LatencyCounts[i] = cum
	}
	s.LatencyCount = cum + uint64(c.latency[len(lookupLatencyBuckets)].Load())
	return s
}

// openLookup opens the table of a lookup join through Env.OpenLookup and makes its
// operator.
func (st *stage) openLookup(ctx context.Context, n *planner.LookupJoinNode, port planner.Port, in sql.Schema) (Operator, error) {
	env := &st.job.env
	opts := n.Options // parsed when the join was planned
	if opts.Connector == "" {
		return nil, fmt.Errorf("%w: stage %d: lookup table %s: its options were not parsed", ErrBadPlan, st.plan.ID, n.Table)
	}
	if env.OpenLookup == nil {
		return nil, fmt.Errorf("%w: lookup table %s needs Env.OpenLookup", ErrMissingEnv, n.Table)
	}
	table, err := env.OpenLookup(connectors.LookupSpec{Table: n.Table, Options: opts, Columns: n.Columns, Key: n.KeyColumns, Schema: n.TableSchema,
		Versioned: n.VersionTime >= 0, VersionTime: n.VersionTime})
	if err != nil {
		return nil, fmt.Errorf("lookup table %s: %w", n.Table, err)
	}
	op := newLookupOp(ctx, n, table, opts, env.Now)
	op.bad, op.schema = st.bad(port), in
	op.logf = func(format string, args ...any) { env.Logf("job %s: "+format, append([]any{st.job.name}, args...)...) }
	st.job.addLookup(st.plan.ID, op.stats)
	return op, nil
}
