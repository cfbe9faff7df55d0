package exec

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rsql/connectors"
	"rsql/internal/pgtest"
	"rsql/planner"
	"rsql/sql"
)

// benchLookupNode joins benchRows' rows (user VARCHAR, amount, ts, n) with a table
// (user_id VARCHAR, tier VARCHAR, credit DOUBLE) on the user.
func benchLookupNode() *planner.LookupJoinNode {
	return &planner.LookupJoinNode{Kind: sql.JoinLeft, Table: "dim_users", Connector: "postgres",
		Options:    lookupOptions("dim_users", map[string]string{"connector": "postgres", "url": "postgres://127.0.0.1:1/none"}),
		Columns:    sql.Schema{{Name: "user_id", Type: sql.TypeVarchar}, {Name: "tier", Type: sql.TypeVarchar}, {Name: "credit", Type: sql.TypeDouble}},
		KeyColumns: []int{0}, LeftKeys: []planner.Evaluator{col(0)}, RightKeys: []planner.Evaluator{col(0)}, LeftWidth: 4}
}

// benchLookup pushes benchRows through a lookup join in batches of benchBatch rows, after
// one pass over every key (warm: the cache holds all of them when the timer starts).
func benchLookup(b *testing.B, table connectors.LookupTable, opts connectors.LookupOptions, keys int, warm bool) {
	rows := benchRows(1<<16, keys)
	op := newLookupOp(context.Background(), benchLookupNode(), table, opts, time.Now)
	sink := &discard{}
	batch := &Batch{Split: "0", Rows: make([]sql.Row, 0, benchBatch)}
	run := func(n int, from int) {
		for done := 0; done < n; {
			k := min(benchBatch, n-done)
			off := (from + done) % len(rows)
			if off+k > len(rows) {
				k = len(rows) - off
			}
			batch.Rows = append(batch.Rows[:0], rows[off:off+k]...)
			if err := op.Process(0, batch, sink); err != nil {
				b.Fatal(err)
			}
			done += k
		}
	}
	if warm {
		run(len(rows), 0)
	}
	q0 := op.stats.queries.Load()
	report := startRate(b)
	run(b.N, 0)
	report()
	b.ReportMetric(float64(op.stats.queries.Load()-q0)/float64(b.N)*benchBatch, "queries/batch")
	if warm && op.stats.queries.Load() != q0 {
		b.Fatalf("%d lookups with a warm cache", op.stats.queries.Load()-q0)
	}
}

// BenchmarkLookupJoinWarm: a lookup join whose cache holds every one of its 10,000 keys
// (the operator's own cost: key encoding, the cache, the joined rows).
func BenchmarkLookupJoinWarm(b *testing.B) {
	table := &fakeTable{rows: map[string][]sql.Row{}}
	for i := 0; i < 10_000; i++ {
		u := fmt.Sprintf("user-%05d", i)
		table.set(u, sql.Row{sql.Varchar(u), sql.Varchar("gold"), sql.Double(float64(i))})
	}
	benchLookup(b, table, connectors.LookupOptions{CacheTTL: time.Hour, CacheRows: 100_000, Timeout: time.Second}, 10_000, true)
}

// BenchmarkLookupJoinPostgres: the same join against a private PostgreSQL server, warm
// (every key cached: PostgreSQL is not asked) and without a cache (every batch of 1,024
// rows asks for its ~950 distinct keys in one query).
func BenchmarkLookupJoinPostgres(b *testing.B) {
	pg, err := pgtest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE users (user_id text PRIMARY KEY, tier text, credit float8);
INSERT INTO users SELECT 'user-' || lpad(i::text, 5, '0'), 'gold', i FROM generate_series(0, 99999) i; ANALYZE users`); err != nil {
		b.Fatal(err)
	}
	conn.Close(ctx)
	open := func(ttl string) (connectors.LookupTable, connectors.LookupOptions) {
		o, err := connectors.ParsePostgresOptions("dim_users", map[string]string{"url": pg.URL, "table": "users", "cache_ttl": ttl})
		if err != nil {
			b.Fatal(err)
		}
		spec := connectors.LookupSpec{Table: "dim_users", Options: o,
			Columns: benchLookupNode().Columns, Key: []int{0}}
		t, err := connectors.OpenPostgresLookup(spec)
		if err != nil {
			b.Fatal(err)
		}
		return t, o
	}
	b.Run("warm", func(b *testing.B) {
		t, o := open("1h")
		defer t.Close()
		benchLookup(b, t, o, 10_000, true)
	})
	b.Run("nocache", func(b *testing.B) {
		t, o := open("0")
		defer t.Close()
		benchLookup(b, t, o, 10_000, false)
	})
}
