package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"rsql/connectors"
	"rsql/planner"
	"rsql/sql"
)

func TestLookupCacheTTL(t *testing.T) {
	c := newLookupCache(10*time.Second, 100)
	t0 := time.Unix(1000, 0)
	rows := []sql.Row{{sql.Varchar("u1"), sql.Varchar("gold")}}
	c.put("u1", rows, t0)
	c.put("absent", nil, t0)
	if got, ok := c.get([]byte("u1"), t0.Add(9999*time.Millisecond)); !ok || len(got) != 1 || got[0][1].S != "gold" {
		t.Fatalf("before the TTL: %v %v", got, ok)
	}
	if got, ok := c.get([]byte("absent"), t0.Add(5*time.Second)); !ok || got != nil {
		t.Fatalf("a negative entry: %v %v", got, ok)
	}
	if _, ok := c.get([]byte("u1"), t0.Add(10*time.Second)); ok {
		t.Fatal("the entry outlived its TTL")
	}
	if c.len() != 1 {
		t.Fatalf("the expired entry is still held: %d entries", c.len())
	}
	// Storing a key again restarts its TTL.
	c.put("absent", rows, t0.Add(8*time.Second))
	if got, ok := c.get([]byte("absent"), t0.Add(17*time.Second)); !ok || len(got) != 1 {
		t.Fatalf("a refreshed entry: %v %v", got, ok)
	}
	// A TTL of 0 keeps nothing.
	off := newLookupCache(0, 100)
	off.put("u1", rows, t0)
	if _, ok := off.get([]byte("u1"), t0); ok || off.len() != 0 {
		t.Fatal("a cache with cache_ttl = 0 kept an entry")
	}
	if _, ok := c.get([]byte("never"), t0); ok {
		t.Fatal("found a key never stored")
	}
}

func TestLookupCacheEviction(t *testing.T) {
	c := newLookupCache(time.Hour, 3)
	now := time.Unix(1000, 0)
	for _, k := range []string{"a", "b", "c"} {
		c.put(k, nil, now)
	}
	c.get([]byte("a"), now) // a is now the most recently used; b the least
	c.put("d", nil, now)
	if c.len() != 3 {
		t.Fatalf("%d entries, want at most 3", c.len())
	}
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := c.get([]byte(k), now); ok != want {
			t.Errorf("key %s held: %v, want %v", k, ok, want)
		}
	}
	// Replacing an entry does not grow the cache.
	c.put("c", []sql.Row{{sql.Int(1)}}, now)
	if c.len() != 3 {
		t.Fatalf("%d entries after replacing one", c.len())
	}
	for i := 0; i < 100; i++ {
		c.put(fmt.Sprint("k", i), nil, now)
	}
	if c.len() != 3 {
		t.Fatalf("%d entries after 100 more", c.len())
	}
	for _, k := range []string{"k97", "k98", "k99"} {
		if _, ok := c.get([]byte(k), now); !ok {
			t.Errorf("the newest key %s was evicted", k)
		}
	}
}

// fakeTable is a LookupTable over a map from key text to rows. It records every call and
// can fail.
type fakeTable struct {
	mu    sync.Mutex
	rows  map[string][]sql.Row // key values' text joined by "|"
	calls [][]string
	// failures are returned (in order) before answering.
	failures []error
	// block makes Lookup wait for its context.
	block  bool
	closed bool
}

func keyText(k sql.Row) string {
	var parts []string
	for _, v := range k {
		parts = append(parts, sql.Text(v))
	}
	return strings.Join(parts, "|")
}

func (f *fakeTable) Lookup(ctx context.Context, keys []sql.Row) ([]sql.Row, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var call []string
	for _, k := range keys {
		call = append(call, keyText(k))
	}
	f.calls = append(f.calls, call)
	if f.block {
		f.mu.Unlock()
		<-ctx.Done()
		f.mu.Lock()
		return nil, &connectors.LookupError{Table: "t", Retry: true, Err: ctx.Err()}
	}
	if len(f.failures) > 0 {
		err := f.failures[0]
		f.failures = f.failures[1:]
		return nil, err
	}
	var out []sql.Row
	for _, k := range keys {
		out = append(out, f.rows[keyText(k)]...)
	}
	return out, nil
}

func (f *fakeTable) Close() error { f.closed = true; return nil }

func (f *fakeTable) set(key string, rows ...sql.Row) {
	f.mu.Lock()
	f.rows[key] = rows
	f.mu.Unlock()
}

func (f *fakeTable) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// collect is an Emitter that keeps copies of the rows it gets, as text.
type collect struct {
	rows []string
	offs []int64
}

func (c *collect) Emit(b *Batch) error {
	for i, r := range b.Rows {
		var parts []string
		for _, v := range r {
			if v.IsNull() {
				parts = append(parts, "NULL")
			} else {
				parts = append(parts, sql.Text(v))
			}
		}
		c.rows = append(c.rows, strings.Join(parts, ","))
		if b.Offsets != nil {
			c.offs = append(c.offs, b.Offsets[i])
		}
	}
	return nil
}

// lookupOptions parses the options of lookup table table as the planner does.
func lookupOptions(table string, raw map[string]string) connectors.LookupOptions {
	o, err := connectors.ParseLookup(raw["connector"], table, raw)
	if err != nil {
		panic(err)
	}
	return o
}

// usersNode joins (order_id BIGINT, user_id VARCHAR) with a table (user_id VARCHAR, tier
// VARCHAR) on user_id.
func usersNode(kind sql.JoinKind) *planner.LookupJoinNode {
	return &planner.LookupJoinNode{Kind: kind, Table: "dim_users", Connector: "postgres",
		Options:    lookupOptions("dim_users", map[string]string{"connector": "postgres", "url": "postgres://127.0.0.1:1/none"}),
		Columns:    sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "tier", Type: sql.TypeVarchar}},
		KeyColumns: []int{0}, LeftKeys: []planner.Evaluator{col(1)}, RightKeys: []planner.Evaluator{col(0)}, LeftWidth: 2,
		Schema: sql.Schema{{Name: "order_id", Type: sql.TypeBigInt}, {Name: "user_id", Type: sql.TypeVarchar},
			{Name: "user_id", Type: sql.TypeVarchar}, {Name: "tier", Type: sql.TypeVarchar}}}
}

func userTable() *fakeTable {
	f := &fakeTable{rows: map[string][]sql.Row{}}
	f.set("u1", sql.Row{sql.Varchar("u1"), sql.Varchar("gold")})
	f.set("u2", sql.Row{sql.Varchar("u2"), sql.Varchar("silver")})
	return f
}

func orderBatch(users ...string) *Batch {
	b := &Batch{Split: "0"}
	for i, u := range users {
		v := sql.Varchar(u)
		if u == "" {
			v = sql.Null
		}
		b.Rows = append(b.Rows, sql.Row{sql.BigInt(int64(i + 1)), v})
		b.Offsets = append(b.Offsets, int64(100+i))
	}
	return b
}

type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func newTestLookup(n *planner.LookupJoinNode, table connectors.LookupTable, opts connectors.LookupOptions, clock *testClock) (*lookupOp, *[]time.Duration) {
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	if opts.BackoffMax == 0 {
		opts.BackoffMax = connectors.DefaultBackoffMax
	}
	op := newLookupOp(context.Background(), n, table, opts, clock.now)
	var slept []time.Duration
	op.sleep = func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		return ctx.Err()
	}
	return op, &slept
}

// TestLookupJoinBatches: a batch asks the table once for its distinct keys the cache lacks
// (not for NULL keys); rows come out in input order, INNER without the unmatched, LEFT
// with NULLs; the next batch of the same keys is answered by the cache, absent keys too.
func TestLookupJoinBatches(t *testing.T) {
	for _, kind := range []sql.JoinKind{sql.JoinInner, sql.JoinLeft} {
		t.Run(kind.String(), func(t *testing.T) {
			table := userTable()
			clock := &testClock{time.Unix(1000, 0)}
			op, _ := newTestLookup(usersNode(kind), table, connectors.LookupOptions{CacheTTL: time.Minute, CacheRows: 100}, clock)
			var out collect
			if err := op.Process(0, orderBatch("u1", "u3", "u2", "", "u1", "u3", "u2"), &out); err != nil {
				t.Fatal(err)
			}
			if table.callCount() != 1 || strings.Join(table.calls[0], ",") != "u1,u3,u2" {
				t.Fatalf("lookups %v, want one of u1,u3,u2", table.calls)
			}
			want := []string{"1,u1,u1,gold", "2,u3,NULL,NULL", "3,u2,u2,silver", "4,NULL,NULL,NULL", "5,u1,u1,gold", "6,u3,NULL,NULL", "7,u2,u2,silver"}
			wantOffs := []int64{100, 101, 102, 103, 104, 105, 106}
			if kind == sql.JoinInner {
				want = []string{"1,u1,u1,gold", "3,u2,u2,silver", "5,u1,u1,gold", "7,u2,u2,silver"}
				wantOffs = []int64{100, 102, 104, 106}
			}
			if strings.Join(out.rows, " ") != strings.Join(want, " ") || fmt.Sprint(out.offs) != fmt.Sprint(wantOffs) {
				t.Fatalf("rows %v offsets %v\nwant %v %v", out.rows, out.offs, want, wantOffs)
			}
			out = collect{}
			if err := op.Process(0, orderBatch("u3", "u2", "u1"), &out); err != nil {
				t.Fatal(err)
			}
			if table.callCount() != 1 {
				t.Fatalf("a batch of cached keys (absent ones included) asked the table: %v", table.calls)
			}
			s := op.stats.snapshot(0)
			if s.Queries != 1 || s.Keys != 3 || s.Hits != 3 || s.Misses != 6 || s.CacheEntries != 3 || s.LatencyCount != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestLookupJoinTTL: once a key's entry expires, the next batch asks for it again and sees
// the table's new rows; a key that appeared meanwhile is found after its negative entry
// expires.
func TestLookupJoinTTL(t *testing.T) {
	table := userTable()
	clock := &testClock{time.Unix(1000, 0)}
	op, _ := newTestLookup(usersNode(sql.JoinLeft), table, connectors.LookupOptions{CacheTTL: 10 * time.Second, CacheRows: 100}, clock)
	var out collect
	run := func(users ...string) {
		t.Helper()
		out = collect{}
		if err := op.Process(0, orderBatch(users...), &out); err != nil {
			t.Fatal(err)
		}
	}
	run("u1", "u9")
	table.set("u1", sql.Row{sql.Varchar("u1"), sql.Varchar("platinum")})
	table.set("u9", sql.Row{sql.Varchar("u9"), sql.Varchar("new")})
	clock.t = clock.t.Add(9 * time.Second)
	run("u1", "u9")
	if got := strings.Join(out.rows, " "); got != "1,u1,u1,gold 2,u9,NULL,NULL" || table.callCount() != 1 {
		t.Fatalf("within the TTL: %s (%d lookups)", got, table.callCount())
	}
	clock.t = clock.t.Add(time.Second)
	run("u1", "u9")
	if got := strings.Join(out.rows, " "); got != "1,u1,u1,platinum 2,u9,u9,new" || table.callCount() != 2 {
		t.Fatalf("after the TTL: %s (%d lookups)", got, table.callCount())
	}
	// Without a cache every batch asks, still once per batch.
	off, _ := newTestLookup(usersNode(sql.JoinLeft), table, connectors.LookupOptions{CacheTTL: 0, CacheRows: 100}, clock)
	for i := 0; i < 3; i++ {
		if err := off.Process(0, orderBatch("u1", "u1", "u2"), &collect{}); err != nil {
			t.Fatal(err)
		}
	}
	if table.callCount() != 5 {
		t.Fatalf("%d lookups, want 2 + 3 (one per batch without a cache)", table.callCount())
	}
}

// TestLookupJoinRetries: a lookup the database cannot answer is tried again after waits
// that double up to retry_backoff_max; the batch then comes out whole and in order.
func TestLookupJoinRetries(t *testing.T) {
	table := userTable()
	down := &connectors.LookupError{Table: "dim_users", Retry: true, Err: errors.New("connection refused")}
	for i := 0; i < 7; i++ {
		table.failures = append(table.failures, down)
	}
	op, slept := newTestLookup(usersNode(sql.JoinInner), table,
		connectors.LookupOptions{CacheTTL: time.Minute, CacheRows: 10, BackoffMax: time.Second}, &testClock{time.Unix(1000, 0)})
	var out collect
	if err := op.Process(0, orderBatch("u2", "u1"), &out); err != nil {
		t.Fatal(err)
	}
	if strings.Join(out.rows, " ") != "1,u2,u2,silver 2,u1,u1,gold" {
		t.Fatalf("rows %v", out.rows)
	}
	if fmt.Sprint(*slept) != "[100ms 200ms 400ms 800ms 1s 1s 1s]" {
		t.Errorf("waits %v", *slept)
	}
	s := op.stats.snapshot(0)
	if s.Queries != 8 || s.Errors != 7 || s.Retries != 7 || s.Keys != 2 || s.LatencyCount != 8 {
		t.Errorf("stats %+v", s)
	}
}

// TestLookupJoinGivesUp: with max_retries the job fails after that many retries; an error
// retrying cannot cure fails it at once. Either names the table.
func TestLookupJoinGivesUp(t *testing.T) {
	table := userTable()
	down := &connectors.LookupError{Table: "dim_users", Retry: true, Err: errors.New("connection refused")}
	table.failures = []error{down, down, down, down}
	op, slept := newTestLookup(usersNode(sql.JoinInner), table, connectors.LookupOptions{CacheTTL: time.Minute, CacheRows: 10, MaxRetries: 2}, &testClock{time.Unix(1000, 0)})
	err := op.Process(0, orderBatch("u1"), &collect{})
	if !errors.Is(err, down) || !strings.Contains(err.Error(), "max_retries = 2") || len(*slept) != 2 || table.callCount() != 3 {
		t.Fatalf("error %v after %d waits, %d lookups", err, len(*slept), table.callCount())
	}
	table = userTable()
	fatal := &connectors.LookupError{Table: "dim_users", Err: errors.New(`PostgreSQL has no table crm.users`)}
	table.failures = []error{fatal}
	op, slept = newTestLookup(usersNode(sql.JoinInner), table, connectors.LookupOptions{CacheTTL: time.Minute, CacheRows: 10}, &testClock{time.Unix(1000, 0)})
	err = op.Process(0, orderBatch("u1"), &collect{})
	if !errors.Is(err, fatal) || !strings.Contains(err.Error(), "lookup table dim_users") || len(*slept) != 0 {
		t.Fatalf("error %v after %d waits", err, len(*slept))
	}
}

// TestLookupJoinStopWhileRetrying: stopping the job (its context) ends a lookup that is
// waiting for the database, whether in the query or between retries.
func TestLookupJoinStopWhileRetrying(t *testing.T) {
	for _, block := range []bool{true, false} {
		table := userTable()
		table.block = block
		if !block {
			for i := 0; i < 1000; i++ {
				table.failures = append(table.failures, &connectors.LookupError{Table: "dim_users", Retry: true, Err: errors.New("refused")})
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		op := newLookupOp(ctx, usersNode(sql.JoinInner), table, connectors.LookupOptions{CacheTTL: time.Minute, CacheRows: 10,
			Timeout: time.Hour, BackoffMax: time.Hour}, time.Now)
		done := make(chan error, 1)
		go func() { done <- op.Process(0, orderBatch("u1"), &collect{}) }()
		time.Sleep(300 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("block=%v: %v, want context.Canceled", block, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("block=%v: the lookup did not stop with its context", block)
		}
	}
}

// TestLookupJoinKeysAndResidual: a key that does not convert to the key column's type is
// absent without asking; several rows of one key all join; the residual condition filters
// the matches (a LEFT row without any gets NULLs).
func TestLookupJoinKeysAndResidual(t *testing.T) {
	// orders (order_id BIGINT, shop BIGINT) joined with prices (shop INT, sku, price) on
	// CAST(shop AS BIGINT), residual price > 2.
	n := &planner.LookupJoinNode{Kind: sql.JoinLeft, Table: "prices", Connector: "postgres",
		Options:    lookupOptions("prices", map[string]string{"connector": "postgres", "url": "postgres://127.0.0.1:1/none"}),
		Columns:    sql.Schema{{Name: "shop", Type: sql.TypeInt}, {Name: "sku", Type: sql.TypeVarchar}, {Name: "price", Type: sql.TypeDouble}},
		KeyColumns: []int{0}, LeftKeys: []planner.Evaluator{col(1)},
		RightKeys: []planner.Evaluator{func(r sql.Row) sql.Value { return sql.BigInt(r[0].I) }},
		Residual:  func(r sql.Row) sql.Value { return sql.Bool(r[4].F() > 2) }, LeftWidth: 2}
	table := &fakeTable{rows: map[string][]sql.Row{}}
	table.set("1", sql.Row{sql.Int(1), sql.Varchar("a"), sql.Double(1.5)}, sql.Row{sql.Int(1), sql.Varchar("b"), sql.Double(2.5)},
		sql.Row{sql.Int(1), sql.Varchar("c"), sql.Double(3.5)})
	table.set("2", sql.Row{sql.Int(2), sql.Varchar("a"), sql.Double(0.5)})
	op, _ := newTestLookup(n, table, connectors.LookupOptions{CacheTTL: time.Minute, CacheRows: 10}, &testClock{time.Unix(1000, 0)})
	b := &Batch{Split: "0", Rows: []sql.Row{{sql.BigInt(1), sql.BigInt(1)}, {sql.BigInt(2), sql.BigInt(1 << 40)}, {sql.BigInt(3), sql.BigInt(2)}}}
	var out collect
	if err := op.Process(0, b, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(out.rows, " "); got != "1,1,1,b,2.5 1,1,1,c,3.5 2,1099511627776,NULL,NULL,NULL 3,2,NULL,NULL,NULL" {
		t.Fatalf("rows %s", got)
	}
	if strings.Join(table.calls[0], ",") != "1,2" {
		t.Fatalf("asked %v: a key beyond INT must not be asked", table.calls)
	}
	// A key that cannot be computed is the row's error (a bad record), not a NULL key.
	n.LeftKeys = []planner.Evaluator{func(r sql.Row) sql.Value {
		if r[0].I == 2 {
			return sql.ErrorValue(sql.CodeDivisionByZero, "division by zero")
		}
		return r[1]
	}}
	out = collect{}
	err := op.Process(0, b, &out)
	var re *RowError
	if !errors.As(err, &re) || re.Operator != "lookup join" || re.Err.Code != sql.CodeDivisionByZero {
		t.Fatalf("a key that fails: %v", err)
	}
}

// TestLookupJoinInJob: a job reads events, joins them with a table through Env.OpenLookup
// and writes the rows; a value of the table that does not convert makes the rows joined
// with it bad records (counted, named); Stats reports the lookups.
func TestLookupJoinInJob(t *testing.T) {
	src := newMemSource(true, 50, "0")
	var bodies []string
	for i := 0; i < 1000; i++ {
		bodies = append(bodies, fmt.Sprintf("u%d,%d,%d,%d", i%7, i, 1000+i, i))
	}
	src.feed("0", bodies...)
	table := &fakeTable{rows: map[string][]sql.Row{}}
	for u := 0; u < 5; u++ {
		table.set(fmt.Sprint("u", u), sql.Row{sql.Varchar(fmt.Sprint("u", u)), sql.BigInt(int64(u * 10))})
	}
	table.set("u5", sql.Row{sql.Varchar("u5"), sql.ErrorValue(sql.CodeNumericOutOfRange, `lookup table dim: column level (crm.users.level): "1e20" does not convert to BIGINT`)})
	n := &planner.LookupJoinNode{Kind: sql.JoinInner, Table: "dim", Connector: "postgres",
		Options:    lookupOptions("dim", map[string]string{"connector": "postgres", "url": "postgres://127.0.0.1:1/none", "cache_rows": "100"}),
		Columns:    sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "level", Type: sql.TypeBigInt}},
		KeyColumns: []int{0}, LeftKeys: []planner.Evaluator{col(0)}, RightKeys: []planner.Evaluator{col(0)}, LeftWidth: 4,
		Schema: append(append(sql.Schema{}, eventSchema...), sql.Column{Name: "uid", Type: sql.TypeVarchar}, sql.Column{Name: "level", Type: sql.TypeBigInt})}
	outSchema := sql.Schema{{Name: "n", Type: sql.TypeBigInt}, {Name: "level", Type: sql.TypeBigInt}}
	proj := &planner.ProjectNode{Exprs: []planner.Evaluator{col(3), col(5)}, Schema: outSchema}
	plan := &planner.Physical{Stages: []*planner.Stage{planner.Chain(0, sourceSpec(nil, 0), sinkSpec(outSchema), n, proj)}}
	var sk sinks
	env := testEnv(src, &sk)
	var spec connectors.LookupSpec
	env.OpenLookup = func(s connectors.LookupSpec) (connectors.LookupTable, error) { spec = s; return table, nil }
	j := runJob(t, "lookup", plan, env)
	var want []string
	for i := 0; i < 1000; i++ {
		if u := i % 7; u < 5 {
			want = append(want, fmt.Sprintf("%d,%d", i, u*10))
		}
	}
	if d := diff(sk.get("out").bodies(), want); d != "" {
		t.Fatal(d)
	}
	if spec.Table != "dim" || fmt.Sprint(spec.Key) != "[0]" || len(spec.Columns) != 2 || !table.closed {
		t.Errorf("opened %+v; closed %v", spec, table.closed)
	}
	st := j.Stats()
	bad := 0
	for i := 0; i < 1000; i++ {
		if i%7 == 5 {
			bad++
		}
	}
	if st.Bad != int64(bad) || len(st.BadErrors) == 0 || !strings.Contains(st.BadErrors[0], "lookup join: ERROR 22003: lookup table dim: column level") {
		t.Errorf("bad %d %v, want %d", st.Bad, st.BadErrors, bad)
	}
	if len(st.Lookups) != 1 {
		t.Fatalf("lookups %+v", st.Lookups)
	}
	l := st.Lookups[0]
	// 20 batches of 50 rows: the first asks for its 7 keys (its rows are misses), then
	// every key is cached.
	if l.Table != "dim" || l.Queries != 1 || l.Keys != 7 || l.Hits != 950 || l.Misses != 50 || l.CacheEntries != 7 {
		t.Errorf("lookup stats %+v", l)
	}
}
