package exec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
	"rsql/state"
)

// testFormat is a tiny CSV-like format: fields separated by ',', empty = NULL, TIMESTAMP as
// epoch milliseconds. It is independent of the connectors package's formats.
type testFormat struct{ schema sql.Schema }

func newTestFormat(name string, schema sql.Schema) (connectors.Format, error) {
	if name != "json" && name != "test" {
		return nil, fmt.Errorf("unknown format %q", name)
	}
	return &testFormat{schema: schema}, nil
}

func (f *testFormat) Decode(body []byte, row sql.Row) (sql.Row, error) {
	parts := strings.Split(string(body), ",")
	if len(parts) != len(f.schema) {
		return row, &connectors.DecodeError{Reason: fmt.Sprintf("%d fields, want %d", len(parts), len(f.schema))}
	}
	row = row[:0]
	for i, p := range parts {
		c := f.schema[i]
		if p == "" {
			row = append(row, sql.Null)
			continue
		}
		switch c.Type.Kind {
		case sql.KindVarchar:
			row = append(row, sql.Varchar(p))
		case sql.KindBigInt, sql.KindTimestamp, sql.KindInt:
			n, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				return row, &connectors.DecodeError{Field: c.Name, Reason: "not an integer"}
			}
			row = append(row, sql.Value{K: c.Type.Kind, I: n})
		case sql.KindDouble:
			x, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return row, &connectors.DecodeError{Field: c.Name, Reason: "not a number"}
			}
			row = append(row, sql.Double(x))
		default:
			return row, &connectors.DecodeError{Field: c.Name, Reason: "unsupported type"}
		}
	}
	return row, nil
}

func (f *testFormat) Encode(dst []byte, row sql.Row) ([]byte, error) {
	for i, v := range row {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch v.K {
		case sql.KindNull:
		case sql.KindTimestamp:
			dst = strconv.AppendInt(dst, v.I, 10)
		default:
			dst = append(dst, v.String()...)
		}
	}
	return dst, nil
}

// memSource serves fixed messages per split. Bounded: ErrEndOfSplit at the end; unbounded:
// it then waits for more appended with feed.
type memSource struct {
	mu      sync.Mutex
	cond    *sync.Cond
	data    map[string][]connectors.Message
	names   []string
	bounded bool
	chunk   int
	hold    bool // bounded, but readers wait at the end until release
	// waitingOf, when set, is the lag (records known to wait) a split's reader reports.
	waitingOf func(split string) int64
}

func (s *memSource) release() {
	s.mu.Lock()
	s.hold = false
	s.mu.Unlock()
}

func newMemSource(bounded bool, chunk int, splits ...string) *memSource {
	s := &memSource{data: map[string][]connectors.Message{}, names: splits, bounded: bounded, chunk: chunk}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// feed appends bodies to split with offsets continuing from 1.
func (s *memSource) feed(split string, bodies ...string) {
	// The bodies share one buffer, as a broker's reads slice a segment: a million records
	// are then not a million objects for the garbage collector to scan in a benchmark.
	n := 0
	for _, b := range bodies {
		n += len(b)
	}
	buf := make([]byte, 0, n)
	s.mu.Lock()
	s.data[split] = slices.Grow(s.data[split], len(bodies))
	for _, b := range bodies {
		off := int64(len(s.data[split]) + 1)
		start := len(buf)
		buf = append(buf, b...)
		s.data[split] = append(s.data[split], connectors.Message{Offset: off, Body: buf[start:len(buf):len(buf)]})
	}
	s.mu.Unlock()
	s.cond.Broadcast()
}

func (s *memSource) Splits(context.Context) ([]string, error) { return s.names, nil }
func (s *memSource) Bounded() bool                            { return s.bounded }
func (s *memSource) Close() error                             { return nil }
func (s *memSource) Open(_ context.Context, split string, offset int64) (connectors.SplitReader, error) {
	pos := 0
	if offset > 0 {
		pos = int(offset - 1)
	}
	r := &memReader{s: s, split: split, pos: pos}
	if s.waitingOf != nil {
		return &lagReader{memReader: r}, nil
	}
	return r, nil
}

// lagReader is a memReader that reports its source's waitingOf as its lag.
type lagReader struct{ *memReader }

func (r *lagReader) Lag() int64 { return r.s.waitingOf(r.split) }

type memReader struct {
	s     *memSource
	split string
	pos   int
}

func (r *memReader) Read(ctx context.Context, buf []connectors.Message, max int) ([]connectors.Message, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	d := r.s.data[r.split]
	if r.pos >= len(d) {
		if r.s.bounded && !r.s.hold {
			return buf, connectors.ErrEndOfSplit
		}
		r.s.mu.Unlock()
		time.Sleep(time.Millisecond)
		r.s.mu.Lock()
		return buf, ctx.Err()
	}
	n := min(max, len(d)-r.pos)
	if r.s.chunk > 0 {
		n = min(n, r.s.chunk)
	}
	buf = append(buf, d[r.pos:r.pos+n]...)
	r.pos += n
	return buf, nil
}

func (r *memReader) Close() error { return nil }

// memSink records written messages by stream name.
type memSink struct {
	mu      sync.Mutex
	msgs    []connectors.Message
	flushes int
}

func (s *memSink) Write(_ context.Context, msgs []connectors.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.msgs = append(s.msgs, connectors.Message{Key: append([]byte(nil), m.Key...), Body: append([]byte(nil), m.Body...)})
	}
	return nil
}
func (s *memSink) Flush(context.Context) error { s.mu.Lock(); s.flushes++; s.mu.Unlock(); return nil }
func (s *memSink) Close() error                { return nil }

func (s *memSink) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.msgs))
	for i, m := range s.msgs {
		out[i] = string(m.Body)
	}
	return out
}

// sinks opens one memSink per stream name.
type sinks struct {
	mu sync.Mutex
	m  map[string]*memSink
}

func (s *sinks) open(spec planner.SinkSpec) (connectors.Sink, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*memSink{}
	}
	if s.m[spec.Stream] == nil {
		s.m[spec.Stream] = &memSink{}
	}
	return s.m[spec.Stream], nil
}

func (s *sinks) get(name string) *memSink {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || s.m[name] == nil {
		return &memSink{}
	}
	return s.m[name]
}

func testEnv(src connectors.Source, sk *sinks) Env {
	return Env{
		OpenSource:         func(planner.SourceSpec) (connectors.Source, error) { return src, nil },
		NewFormat:          newTestFormat,
		OpenSink:           sk.open,
		Tick:               5 * time.Millisecond,
		CheckpointInterval: -1,
	}
}

// Hand-built evaluators.
func col(i int) planner.Evaluator { return func(r sql.Row) sql.Value { return r[i] } }

// eventSchema: user VARCHAR, amount DOUBLE, ts TIMESTAMP, n BIGINT (nullable).
var eventSchema = sql.Schema{
	{Name: "user_id", Type: sql.TypeVarchar},
	{Name: "amount", Type: sql.TypeDouble},
	{Name: "ts", Type: sql.TypeTimestamp},
	{Name: "n", Type: sql.TypeBigInt},
}

type event4 struct {
	user   string
	amount float64
	ts     int64
	n      int64
	nNull  bool
}

func (e event4) body() string {
	n := strconv.FormatInt(e.n, 10)
	if e.nNull {
		n = ""
	}
	return e.user + "," + strconv.FormatFloat(e.amount, 'g', -1, 64) + "," + strconv.FormatInt(e.ts, 10) + "," + n
}

func sourceSpec(opts map[string]string, delay int64) planner.SourceSpec {
	if opts == nil {
		opts = map[string]string{}
	}
	if opts["format"] == "" {
		opts["format"] = "test"
	}
	return planner.SourceSpec{Stream: "events", Connector: "mem", Options: testOptions(opts), Schema: eventSchema,
		EventTime: 2, WatermarkDelay: delay, FromStage: -1}
}

func sinkSpec(schema sql.Schema) planner.SinkSpec {
	return planner.SinkSpec{Stream: "out", Connector: "mem", Options: testOptions(map[string]string{"format": "test"}), Schema: schema}
}

// testOptions parses the options of a test's stream as the planner does.
func testOptions(raw map[string]string) connectors.StreamOptions {
	o, err := connectors.StreamOptionsOf(raw)
	if err != nil {
		panic(err)
	}
	return o
}

// aggSchema builds an aggregate output schema (names only matter for encoding).
func aggSchema(nkeys int, windowed bool, aggs []planner.AggSpec) sql.Schema {
	var s sql.Schema
	for i := 0; i < nkeys; i++ {
		s = append(s, sql.Column{Name: "k" + strconv.Itoa(i), Type: sql.TypeVarchar})
	}
	if windowed {
		s = append(s, sql.Column{Name: "window_start", Type: sql.TypeTimestamp}, sql.Column{Name: "window_end", Type: sql.TypeTimestamp})
	}
	for i, a := range aggs {
		s = append(s, sql.Column{Name: "a" + strconv.Itoa(i), Type: a.Type})
	}
	return s
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}

func diff(got, want []string) string {
	g, w := sorted(got), sorted(want)
	gm := map[string]int{}
	for _, x := range g {
		gm[x]++
	}
	var missing, extra []string
	for _, x := range w {
		if gm[x] > 0 {
			gm[x]--
		} else {
			missing = append(missing, x)
		}
	}
	for x, n := range gm {
		for ; n > 0; n-- {
			extra = append(extra, x)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	sort.Strings(extra)
	if len(missing) > 5 {
		missing = missing[:5]
	}
	if len(extra) > 5 {
		extra = extra[:5]
	}
	return fmt.Sprintf("got %d rows, want %d; missing %v; extra %v", len(got), len(want), missing, extra)
}

func fmtF(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

var errTest = errors.New("test")

// opChain runs operators one after the other, the last one emitting into sink: the shape
// of a one-input stage, for tests and benchmarks of operators without the runtime.
type opChain struct {
	ops   []Operator
	emits []Emitter
}

type chainEmit struct {
	c *opChain
	i int
}

func (e *chainEmit) Emit(b *Batch) error { return e.c.ops[e.i].Process(0, b, e.c.emits[e.i]) }

func newOpChain(sink Emitter, ops ...Operator) *opChain {
	c := &opChain{ops: ops, emits: make([]Emitter, len(ops))}
	for i := range ops {
		if i == len(ops)-1 {
			c.emits[i] = sink
		} else {
			c.emits[i] = &chainEmit{c, i + 1}
		}
	}
	return c
}

func (c *opChain) Process(b *Batch) error { return c.ops[0].Process(0, b, c.emits[0]) }

func (c *opChain) Watermark(split string, wm int64) error {
	for i, op := range c.ops {
		if err := op.Watermark(split, wm, c.emits[i]); err != nil {
			return err
		}
	}
	return nil
}

func (c *opChain) Control(ctl *Control) error {
	for i, op := range c.ops {
		if err := op.Control(ctl, c.emits[i]); err != nil {
			return err
		}
	}
	return nil
}

// closedBy keeps the groups of the windows that end at or before wm.
func closedBy(groups map[wkey]*aggExpect, wm int64) map[wkey]*aggExpect {
	out := map[wkey]*aggExpect{}
	for k, v := range groups {
		if k.end <= wm {
			out[k] = v
		}
	}
	return out
}

func maxTs(evs []event4) int64 {
	m := MinWatermark
	for _, e := range evs {
		m = max(m, e.ts)
	}
	return m
}

// builtinAgg is the AggSpec of a built-in aggregate as the planner builds it: name is
// COUNT(*), COUNT(DISTINCT), or an aggregate's name; arg is nil for COUNT(*).
func builtinAgg(name string, arg planner.Evaluator, argType, result sql.Type) planner.AggSpec {
	call := sql.AggCall{Func: name, T: result}
	switch name {
	case "COUNT(*)":
		call.Func, call.Star = "COUNT", true
	case "COUNT(DISTINCT)":
		call.Func, call.Distinct = "COUNT", true
	}
	if arg != nil {
		call.Arg = &sql.ColumnRef{Name: "x", T: argType}
	}
	def, ok := sql.LookupAgg(call.Func)
	if !ok {
		panic("no aggregate " + call.Func)
	}
	f, err := def.New(call)
	if err != nil {
		panic(err)
	}
	s := planner.AggSpec{Func: f, Type: result, Text: name}
	if arg != nil {
		s.Args, s.ArgTypes = []planner.Evaluator{arg}, []sql.Type{argType}
	}
	return s
}

// planSQL parses, binds against cat and plans one SELECT as job, failing tb on any error.
func planSQL(tb testing.TB, query string, cat sql.Catalog, job string) *planner.Physical {
	tb.Helper()
	stmts, err := sql.Parse(query)
	if err != nil {
		tb.Fatal(err)
	}
	q, err := sql.Bind(stmts[0].(*sql.Select), cat)
	if err != nil {
		tb.Fatal(err)
	}
	_, plan, err := planner.Plan(q, planner.Options{Job: job})
	if err != nil {
		tb.Fatal(err)
	}
	return plan
}

// byWindows makes a hop aggregation compute by windows rather than by panes (to compare
// the two, or read state written by windows).
func (a *aggOp) byWindows() {
	a.paneW = 0
	a.mode = winMode{}
}

// testOptionsErr parses a test stream's options as the planner does, returning the error.
func testOptionsErr(raw map[string]string) (connectors.StreamOptions, error) {
	return connectors.StreamOptionsOf(raw)
}

// pressCounter stands for Job.press in an operator's tests (pressure.go): on is how many
// holds on the job's input are in force, times how many were taken.
type pressCounter struct{ on, times int }

func (c *pressCounter) press(on bool) {
	if on {
		c.on++
		c.times++
	} else {
		c.on--
	}
}

// rowCollector gathers the rows a job hands to Env.OnRow, each as its values' text joined
// by commas.
type rowCollector struct {
	mu   sync.Mutex
	rows []string
}

func (c *rowCollector) onRow(r sql.Row) error {
	parts := make([]string, len(r))
	for i, v := range r {
		parts[i] = v.String()
	}
	c.mu.Lock()
	c.rows = append(c.rows, strings.Join(parts, ","))
	c.mu.Unlock()
	return nil
}

func (c *rowCollector) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.rows...)
}

// set replaces the rows gathered so far (a client that kept what it had read before a
// checkpoint).
func (c *rowCollector) set(rows []string) {
	c.mu.Lock()
	c.rows = rows
	c.mu.Unlock()
}

// runRestarted runs plan over two splits of events partitioned by user: the first `first`
// of each split, a checkpoint, `more` further of each that no checkpoint saves, a stop;
// then every event again on a new job over the same store, which resumes from the
// checkpoint. rows ends with what a client kept: the rows up to the checkpoint, then the
// restarted job's. It returns the restarted job, running (the caller stops it).
func runRestarted(t *testing.T, name string, plan *planner.Physical, evs [2][]event4, batch, first, more int, rows *rowCollector) *Job {
	t.Helper()
	store := state.NewMemory()
	start := func(src *memSource) *Job {
		j, err := Start(context.Background(), name, plan, Env{OpenSource: func(planner.SourceSpec) (connectors.Source, error) { return src, nil },
			NewFormat: newTestFormat, OnRow: rows.onRow, Store: store, CheckpointInterval: -1, Tick: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	src := newMemSource(false, batch, "0", "1")
	j := start(src)
	feedAll(src, "0", evs[0][:first])
	feedAll(src, "1", evs[1][:first])
	waitFor(t, "first part", func() bool { return j.Stats().RecordsIn == int64(2*first) })
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	kept := rows.snapshot()
	feedAll(src, "0", evs[0][first:first+more])
	feedAll(src, "1", evs[1][first:first+more])
	waitFor(t, "more", func() bool { return j.Stats().RecordsIn == int64(2*(first+more)) })
	j.Stop()

	rows.set(kept)
	src2 := newMemSource(false, batch, "0", "1")
	feedAll(src2, "0", evs[0])
	feedAll(src2, "1", evs[1])
	return start(src2)
}

// splitEvents generates n events for each of two splits (from seed0 and seed1, users
// users), each split's users its own (suffixed "a" and "b"), as streams partitioned by
// user have them.
func splitEvents(seed0, seed1 int64, n, users int) [2][]event4 {
	evs := [2][]event4{genEvents(seed0, n, users, 0), genEvents(seed1, n, users, 0)}
	for sp := range evs {
		for i := range evs[sp] {
			evs[sp][i].user += []string{"a", "b"}[sp]
		}
	}
	return evs
}
