package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The windowed-query correctness test: rsql runs continuous queries over a file of events
// with bounded disorder and some late records; PostgreSQL computes the same results with
// ordinary GROUP BY over the on-time events; the two must agree row for row.

const (
	nEvents    = 100_000
	nUsers     = 200
	disorderMs = 3_000 // < the declared watermark delay of 5 s: no on-time event is late
	lateEvery  = 997   // every 997th record is a late copy far behind the watermark
	lateLagMs  = 300_000
)

var baseMs = time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC).UnixMilli()

type event struct {
	OrderID  int64
	UserID   string
	Amount   float64
	TsMs     int64
	Category string
	Qty      int
	Late     bool
}

// genEvents makes the input: timestamps advance 20 ms per event with up to disorderMs of
// jitter backwards; every lateEvery-th record is an extra late event lateLagMs behind.
func genEvents(seed int64) []event { return genEventsN(seed, nEvents) }

// genEventsN is genEvents with n on-time events (and their share of late ones).
func genEventsN(seed int64, n int) []event {
	r := rand.New(rand.NewSource(seed))
	out := make([]event, 0, n+n/lateEvery)
	var id int64
	for i := 0; i < n; i++ {
		id++
		ts := baseMs + int64(i)*20 - r.Int63n(disorderMs)
		e := event{OrderID: id, UserID: fmt.Sprintf("u%d", r.Intn(nUsers)),
			Amount: float64(r.Intn(20000)) / 100, TsMs: ts,
			Category: string(rune('a' + r.Intn(6))), Qty: r.Intn(10)}
		out = append(out, e)
		if i > 20_000 && i%lateEvery == 0 {
			id++
			out = append(out, event{OrderID: id, UserID: fmt.Sprintf("u%d", r.Intn(nUsers)),
				Amount: float64(r.Intn(20000)) / 100, TsMs: baseMs + int64(i)*20 - lateLagMs,
				Category: "z", Qty: 1, Late: true})
		}
	}
	return out
}

func writeEvents(t *testing.T, path string, evs []event) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i, e := range evs {
		// Half the timestamps as epoch milliseconds, half as RFC 3339 strings: both are valid.
		var ts any = e.TsMs
		if i%2 == 1 {
			ts = time.UnixMilli(e.TsMs).UTC().Format("2006-01-02T15:04:05.000Z")
		}
		b, _ := json.Marshal(map[string]any{"order_id": e.OrderID, "user_id": e.UserID, "amount": e.Amount,
			"ts": ts, "category": e.Category, "qty": e.Qty})
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// loadEvents copies the events into PostgreSQL table orders (with ts as epoch ms).
func loadEvents(t *testing.T, conn *pgx.Conn, evs []event) {
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (order_id bigint, user_id text, amount double precision,
		ts bigint, category text, qty int, late bool)`); err != nil {
		t.Fatal(err)
	}
	rows := make([][]any, len(evs))
	for i, e := range evs {
		rows[i] = []any{e.OrderID, e.UserID, e.Amount, e.TsMs, e.Category, e.Qty, e.Late}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"orders"},
		[]string{"order_id", "user_id", "amount", "ts", "category", "qty", "late"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
}

// windowCase is one continuous query and the PostgreSQL query that computes its result.
// Timestamp columns of the rsql output are compared as epoch milliseconds, which is what
// the PostgreSQL query returns for them.
type windowCase struct {
	name     string
	rsql     string // the SELECT of CREATE STREAM ... AS
	postgres string
	tsCols   []string
	// late reports whether a late input event reaches the window operator (passes WHERE);
	// nil for queries without windows.
	late func(e event) bool
}

var ordersDDL = `CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = 'orders.jsonl', format = 'json');
`

var windowCases = []windowCase{
	{
		name: "tumble_tvf",
		rsql: `SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
FROM TUMBLE(orders, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end`,
		postgres: `SELECT user_id, (ts/10000)*10000 AS window_start, (ts/10000)*10000+10000 AS window_end,
  COUNT(*) AS n, SUM(amount) AS total FROM orders WHERE NOT late GROUP BY 1, 2, 3`,
		tsCols: []string{"window_start", "window_end"},
		late:   func(event) bool { return true },
	},
	{
		name: "tumble_groupby_having",
		rsql: `SELECT category, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, TUMBLE_END(ts, INTERVAL '1' MINUTE) AS we,
  AVG(amount) AS avg_amount, MIN(amount) AS lo, MAX(amount) AS hi, COUNT(DISTINCT user_id) AS users
FROM orders WHERE qty > 2 GROUP BY category, TUMBLE(ts, INTERVAL '1' MINUTE) HAVING COUNT(*) > 100`,
		postgres: `SELECT category, (ts/60000)*60000 AS ws, (ts/60000)*60000+60000 AS we, AVG(amount) AS avg_amount,
  MIN(amount) AS lo, MAX(amount) AS hi, COUNT(DISTINCT user_id) AS users
FROM orders WHERE NOT late AND qty > 2 GROUP BY 1, 2, 3 HAVING COUNT(*) > 100`,
		tsCols: []string{"ws", "we"},
		late:   func(e event) bool { return e.Qty > 2 },
	},
	{
		name: "hop_tvf",
		rsql: `SELECT category, window_start, window_end, COUNT(*) AS n, SUM(qty) AS q
FROM HOP(orders, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) GROUP BY category, window_start, window_end`,
		postgres: `SELECT category, s AS window_start, s + 15000 AS window_end, COUNT(*) AS n, SUM(qty) AS q
FROM orders, LATERAL generate_series((ts/5000)*5000 - 10000, (ts/5000)*5000, 5000) AS s
WHERE NOT late AND s <= ts AND ts < s + 15000 GROUP BY 1, 2, 3`,
		tsCols: []string{"window_start", "window_end"},
		late:   func(event) bool { return true },
	},
	{
		name: "hop_groupby",
		rsql: `SELECT user_id, HOP_START(ts, INTERVAL '10' SECOND, INTERVAL '30' SECOND) AS ws,
  HOP_END(ts, INTERVAL '10' SECOND, INTERVAL '30' SECOND) AS we, MAX(qty) AS mq
FROM orders WHERE user_id IN ('u1', 'u2', 'u3') GROUP BY user_id, HOP(ts, INTERVAL '10' SECOND, INTERVAL '30' SECOND)`,
		postgres: `SELECT user_id, s AS ws, s + 30000 AS we, MAX(qty) AS mq
FROM orders, LATERAL generate_series((ts/10000)*10000 - 20000, (ts/10000)*10000, 10000) AS s
WHERE NOT late AND user_id IN ('u1', 'u2', 'u3') AND s <= ts AND ts < s + 30000 GROUP BY 1, 2, 3`,
		tsCols: []string{"ws", "we"},
		late:   func(e event) bool { return e.UserID == "u1" || e.UserID == "u2" || e.UserID == "u3" },
	},
	{
		name: "session_tvf",
		rsql: `SELECT user_id, window_start, window_end, COUNT(*) AS n, MAX(amount) AS biggest
FROM SESSION(orders, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end`,
		postgres: sessionSQL("10000", "COUNT(*) AS n, MAX(amount) AS biggest", "window_start", "window_end"),
		tsCols:   []string{"window_start", "window_end"},
		late:     func(event) bool { return true },
	},
	{
		name: "session_groupby",
		rsql: `SELECT user_id, SESSION_START(ts, INTERVAL '4' SECOND) AS s_start, SESSION_END(ts, INTERVAL '4' SECOND) AS s_end,
  SUM(qty) AS q FROM orders GROUP BY user_id, SESSION(ts, INTERVAL '4' SECOND)`,
		postgres: sessionSQL("4000", "SUM(qty) AS q", "s_start", "s_end"),
		tsCols:   []string{"s_start", "s_end"},
		late:     func(event) bool { return true },
	},
	{
		name: "filter_project",
		rsql: `SELECT order_id, UPPER(user_id) AS u, amount * 2 AS doubled,
  CASE WHEN amount >= 100 THEN 'big' ELSE 'small' END AS size, qty + 1 AS q1
FROM orders WHERE amount > 10 AND category IN ('a', 'b') AND user_id LIKE 'u1%'`,
		postgres: `SELECT order_id, UPPER(user_id) AS u, amount * 2 AS doubled,
  CASE WHEN amount >= 100 THEN 'big' ELSE 'small' END AS size, qty + 1 AS q1
FROM orders WHERE amount > 10 AND category IN ('a', 'b') AND user_id LIKE 'u1%'`,
	},
}

// sessionSQL computes per-user sessions with gaps-and-islands: a new session starts where
// the gap to the previous on-time event of the user is more than gap ms (sessions that touch
// are one: docs/sql.md, "Windows").
func sessionSQL(gap, aggs, startName, endName string) string {
	return fmt.Sprintf(`WITH o AS (SELECT * FROM orders WHERE NOT late),
m AS (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY user_id ORDER BY ts, order_id) <= %[1]s THEN 0 ELSE 1 END AS brk FROM o),
s AS (SELECT *, SUM(brk) OVER (PARTITION BY user_id ORDER BY ts, order_id) AS sid FROM m)
SELECT user_id, MIN(ts) AS %[3]s, MAX(ts) + %[1]s AS %[4]s, %[2]s FROM s GROUP BY user_id, sid`, gap, aggs, startName, endName)
}

// canon renders a row (column name → value) as comparable text: numbers rounded to 6
// significant decimals, timestamps as epoch ms.
func canon(t *testing.T, cols []string, row map[string]any, tsCols []string) string {
	var b strings.Builder
	for _, c := range cols {
		v, ok := row[c]
		if !ok {
			t.Fatalf("row %v has no column %q", row, c)
		}
		b.WriteString(c)
		b.WriteByte('=')
		isTs := false
		for _, tc := range tsCols {
			isTs = isTs || tc == c
		}
		switch x := v.(type) {
		case nil:
			b.WriteString("NULL")
		case string:
			if isTs {
				tm, err := time.Parse(time.RFC3339Nano, x)
				if err != nil {
					t.Fatalf("column %s: %q is not an RFC 3339 timestamp", c, x)
				}
				if !strings.HasSuffix(x, "Z") || len(x) != len("2026-11-30T05:00:10.000Z") {
					t.Fatalf("column %s: %q is not RFC 3339 UTC with milliseconds", c, x)
				}
				b.WriteString(strconv.FormatInt(tm.UnixMilli(), 10))
			} else {
				b.WriteString(x)
			}
		default:
			b.WriteString(canonNumber(x))
		}
		b.WriteByte(' ')
	}
	return b.String()
}

func canonNumber(v any) string {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int:
		return strconv.Itoa(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return strconv.FormatInt(i, 10)
		}
		f, _ = x.Float64()
	default:
		return fmt.Sprint(x)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', 6, 64)
}

// normalizePG turns PostgreSQL numeric results (SUM and AVG of integers) into float64.
func normalizePG(v any) any {
	if n, ok := v.(pgtype.Numeric); ok {
		f, err := n.Float64Value()
		if err != nil || !f.Valid {
			return nil
		}
		return f.Float64
	}
	return v
}

func readJSONLines(t *testing.T, path string) []map[string]any {
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open output: %v", err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s line %d: not a JSON object: %v: %s", path, line, err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func pgRows(t *testing.T, conn *pgx.Conn, query string) ([]string, []map[string]any) {
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("postgres: %v\n%s", err, query)
	}
	defer rows.Close()
	var cols []string
	for _, fd := range rows.FieldDescriptions() {
		cols = append(cols, fd.Name)
	}
	var out []map[string]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		for i, c := range cols {
			m[c] = normalizePG(vals[i])
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cols, out
}

// compareMultisets reports rows missing from got and rows got has in excess (duplicates
// count), up to a few of each.
func compareMultisets(t *testing.T, name string, want, got []string) {
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	var missing, extra []string
	for k, n := range count {
		for ; n > 0; n-- {
			missing = append(missing, k)
		}
		for ; n < 0; n++ {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		show := func(s []string) []string {
			if len(s) > 5 {
				return s[:5]
			}
			return s
		}
		t.Errorf("%s: %d rows expected, %d produced; %d missing, %d extra\nmissing e.g. %q\nextra e.g. %q",
			name, len(want), len(got), len(missing), len(extra), show(missing), show(extra))
	}
}

// lateSummary matches the line rsql prints when a job finishes, e.g.
// "job job-3 finished: in=100100 out=4810 late=80 bad=0".
var lateSummary = regexp.MustCompile(`(?m)^job job-(\d+) finished: .*\blate=(\d+)`)

func TestWindowedQueriesMatchPostgres(t *testing.T) {
	bin := buildRsql(t)
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	evs := genEvents(1)
	loadEvents(t, conn, evs)

	dir := t.TempDir()
	writeEvents(t, filepath.Join(dir, "orders.jsonl"), evs)
	var script strings.Builder
	script.WriteString(ordersDDL)
	for _, c := range windowCases {
		fmt.Fprintf(&script, "CREATE STREAM %s WITH (connector = 'file', path = '%s.jsonl', format = 'json') AS\n%s;\n", c.name, c.name, c.rsql)
	}
	if err := os.WriteFile(filepath.Join(dir, "pipeline.sql"), []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", "pipeline.sql", "--data-dir", "data", "--format", "json")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rsql -f pipeline.sql: %v\n%s", err, out)
	}

	// Every windowed job counts the late records of its input: they exist in the file but may
	// change no window.
	lates := lateSummary.FindAllStringSubmatch(string(out), -1)
	if len(lates) != len(windowCases) {
		t.Fatalf("want a finish summary per job (%d), got %d in:\n%s", len(windowCases), len(lates), out)
	}
	lateGot := map[int]int{}
	for _, m := range lates {
		n, _ := strconv.Atoi(m[1])
		lateGot[n-1], _ = strconv.Atoi(m[2]) // jobs are numbered from 1 in the order created
	}
	for i, c := range windowCases {
		lateWant := 0
		for _, e := range evs {
			if e.Late && c.late != nil && c.late(e) {
				lateWant++
			}
		}
		if got, ok := lateGot[i]; !ok || got != lateWant {
			t.Errorf("%s: late=%d, want %d", c.name, got, lateWant)
		}
	}

	for _, c := range windowCases {
		t.Run(c.name, func(t *testing.T) {
			compareFileCase(t, conn, dir, c)
		})
	}
}

// compareFileCase compares the JSON lines rsql -f wrote for case c (dir/<name>.jsonl) with
// PostgreSQL's result of the case, row for row as multisets.
func compareFileCase(t *testing.T, conn *pgx.Conn, dir string, c windowCase) {
	t.Helper()
	cols, want := pgRows(t, conn, c.postgres)
	got := readJSONLines(t, filepath.Join(dir, c.name+".jsonl"))
	if len(want) == 0 {
		t.Fatal("the PostgreSQL query returned no rows: the case tests nothing")
	}
	var ws, gs []string
	for _, r := range want {
		ws = append(ws, canon(t, cols, r, nil))
	}
	for _, r := range got {
		if len(r) != len(cols) {
			t.Fatalf("output row has %d keys, want %d (%v): %v", len(r), len(cols), cols, r)
		}
		gs = append(gs, canon(t, cols, r, c.tsCols))
	}
	compareMultisets(t, c.name, ws, gs)
}
