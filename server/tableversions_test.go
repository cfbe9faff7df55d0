package server

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"rsql/broker"
)

// A table read by a continuous query is its latest versions, not the stream of its records:
// a key's new version replaces the old one in every result (an aggregation counts each key
// once, a filter drops a key whose new version no longer passes), a delete removes the key,
// and the state survives a restart of the engine. The expected results are the records
// folded here, in Go, into each key's latest version.
func TestContinuousQueriesReadTablesLatestVersions(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec(`SET offset_reset = 'earliest'`)
	te.mustExec(`CREATE TABLE acct (id BIGINT PRIMARY KEY, tier VARCHAR, bal BIGINT) WITH (queues = 2)`)
	te.mustExec(`CREATE MATERIALIZED VIEW per_tier WITH (checkpoint_interval = '50ms') AS SELECT tier, COUNT(*) AS n, SUM(bal) AS s FROM acct GROUP BY tier`)
	te.mustExec(`CREATE MATERIALIZED VIEW rich WITH (checkpoint_interval = '50ms') AS SELECT id, tier FROM acct WHERE bal > 50`)
	te.mustExec(`CREATE MATERIALIZED VIEW total WITH (checkpoint_interval = '50ms') AS SELECT COUNT(*) AS n, SUM(bal) AS s FROM acct`)

	type version struct {
		tier string
		bal  int64
	}
	latest := map[int]version{}
	r := rand.New(rand.NewSource(7))
	// write appends n random records: versions of keys 0..24 and, now and then, a delete,
	// each key's records on one queue so that they stay in order.
	write := func(n int) {
		byQueue := map[int][]broker.Message{}
		for i := 0; i < n; i++ {
			id := r.Intn(25)
			var body string
			if _, ok := latest[id]; ok && r.Intn(5) == 0 {
				body = fmt.Sprintf(`{"id": %d, "__op": "delete"}`, id)
				delete(latest, id)
			} else {
				v := version{tier: string(rune('a' + r.Intn(4))), bal: int64(r.Intn(100))}
				body = fmt.Sprintf(`{"id": %d, "tier": %q, "bal": %d}`, id, v.tier, v.bal)
				latest[id] = v
			}
			byQueue[id%2] = append(byQueue[id%2], broker.Message{Key: fmt.Sprint(id), Body: []byte(body)})
		}
		for q, msgs := range byQueue {
			if _, err := te.b.Append("acct", q, msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
	// want folds latest into each view's rows.
	want := func() (perTier, rich, total string) {
		type agg struct{ n, s int64 }
		tiers := map[string]*agg{}
		var rows []string
		var n, s int64
		for id, v := range latest {
			a := tiers[v.tier]
			if a == nil {
				a = &agg{}
				tiers[v.tier] = a
			}
			a.n++
			a.s += v.bal
			n++
			s += v.bal
			if v.bal > 50 {
				rows = append(rows, fmt.Sprintf("%d|%s", id, v.tier))
			}
		}
		var pt []string
		for tier, a := range tiers {
			pt = append(pt, fmt.Sprintf("%s|%d|%d", tier, a.n, a.s))
		}
		sort.Strings(pt)
		sort.Strings(rows)
		return strings.Join(pt, " "), strings.Join(rows, " "), fmt.Sprintf("%d|%d", n, s)
	}
	view := func(q string) string { return sortedRows(te, q) }
	check := func(what string) {
		t.Helper()
		wt, wr, wtot := want()
		var gt, gr, gtot string
		ok := false
		for i := 0; i < 1500 && !ok; i++ {
			gt, gr, gtot = view(`SELECT tier, n, s FROM per_tier`), view(`SELECT id, tier FROM rich`), view(`SELECT n, s FROM total`)
			ok = gt == wt && gr == wr && gtot == wtot
			if !ok {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if !ok {
			t.Fatalf("%s:\nper_tier %s\n    want %s\nrich %s\nwant %s\ntotal %s, want %s", what, gt, wt, gr, wr, gtot, wtot)
		}
	}
	write(200)
	check("after 200 records")
	write(200)
	check("after 400 records")
	if err := te.e.Close(); err != nil {
		t.Fatal(err)
	}
	te.open()
	write(200)
	check("after a restart and 600 records")

	// A table whose rows change cannot be windowed or joined in time by its changelog.
	te.mustExec(`CREATE TABLE acct_t (id BIGINT PRIMARY KEY, bal BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (queues = 1)`)
	te.wantCode(`CREATE STREAM w AS SELECT window_start, COUNT(*) FROM TUMBLE(acct_t, ts, INTERVAL '10' SECOND) GROUP BY window_start, window_end`, "0A000", "rows change")
}

// Deduplication keeping the last row takes back the row it replaces: a view of it holds one
// row per key, and an aggregation over it counts each key once, in its latest row — as
// PostgreSQL's ROW_NUMBER() ... = 1 over the same rows. Expected results are folded in Go.
func TestDeduplicationKeepingTheLastRowTakesBackTheOld(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec(`SET offset_reset = 'earliest'`)
	te.mustExec(`CREATE STREAM ev (k BIGINT, v VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND) WITH (queues = 2)`)
	const dedup = `(SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM ev) x WHERE rn = 1`
	te.mustExec(`CREATE MATERIALIZED VIEW last_v WITH (checkpoint_interval = '50ms') AS SELECT k, v FROM ` + dedup)
	te.mustExec(`CREATE MATERIALIZED VIEW per_v WITH (checkpoint_interval = '50ms') AS SELECT v, COUNT(*) AS n FROM ` + dedup + ` GROUP BY v`)
	type row struct {
		v  string
		ts int
	}
	last := map[int]row{}
	r := rand.New(rand.NewSource(11))
	var vals []string
	for i := 0; i < 300; i++ {
		k := r.Intn(20)
		// Unique times, out of order within the watermark's delay.
		ts := i*10 - r.Intn(5)*3
		v := string(rune('a' + r.Intn(5)))
		if cur, ok := last[k]; !ok || ts > cur.ts {
			last[k] = row{v, ts}
		}
		vals = append(vals, fmt.Sprintf("(%d, '%s', TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '%d' SECOND)", k, v, ts))
	}
	te.mustExec(`INSERT INTO ev VALUES ` + strings.Join(vals, ", "))
	var wantLast, wantPer []string
	counts := map[string]int{}
	for k, x := range last {
		wantLast = append(wantLast, fmt.Sprintf("%d|%s", k, x.v))
		counts[x.v]++
	}
	for v, n := range counts {
		wantPer = append(wantPer, fmt.Sprintf("%s|%d", v, n))
	}
	sort.Strings(wantLast)
	sort.Strings(wantPer)
	view := func(q string) string { return sortedRows(te, q) }
	var gl, gp string
	for i := 0; i < 1500; i++ {
		gl, gp = view(`SELECT k, v FROM last_v`), view(`SELECT v, n FROM per_v`)
		if gl == strings.Join(wantLast, " ") && gp == strings.Join(wantPer, " ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("last_v %s\n  want %s\nper_v %s\n want %s", gl, strings.Join(wantLast, " "), gp, strings.Join(wantPer, " "))
}

// sortedRows runs a pull query and gives its rows, columns joined by "|", sorted and joined
// by spaces (or the error).
func sortedRows(te *testEngine, q string) string {
	_, rows, err := te.exec(q)
	if err != nil {
		return "error: " + err.Error()
	}
	var out []string
	for _, r := range rows[0] {
		out = append(out, strings.Join(r, "|"))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
