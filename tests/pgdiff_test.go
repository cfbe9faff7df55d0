package tests

// The query-level differential test against PostgreSQL: seeded tables with disorder
// (event times out of order within the watermark delay), duplicate keys, NULLs and BIGINT
// values near the limits are written as JSON-lines files for rsql's file streams and loaded
// into a private PostgreSQL (internal/pgtest). Each query runs with `rsql -c ... --format
// json` over the files (bounded: it answers once, with final rows) and in PostgreSQL; the
// multisets of rows must be equal (order-insensitive unless the query orders its result;
// floating-point and NUMERIC values compared with a relative tolerance of 1e-9; NULLs
// equal; a changelog, the rows of an updating query with their op column, folded to its
// final rows first), or rsql must refuse the query with SQLSTATE 0A000 (the CLI prints
// "ERROR 0A000: ..." on stderr and exits non-zero). Anything else is wrong.
//
// A query refused only because it needs a state TTL (a regular join, DISTINCT over a
// stream) is run again after SET state_ttl = '1 day': the data spans minutes, so the TTL
// never forgets a row and the answer must equal PostgreSQL's.
//
//	go test -count=1 -run TestPGDiff ./tests/ -v          # the fixed shapes and 30 random queries
//	RSQL_PGDIFF_N=500 go test -count=1 -run TestPGDiff/random ./tests/ -v   # or: make pgdiff
//	RSQL_PGDIFF_SEED=7 ...                             # another seed (data and queries)
//	RSQL_PGDIFF_STRICT=1 ...                           # known-wrong answers fail instead of skipping
//	RSQL_PGDIFF_LIST=1 ...                             # list every random query and its outcome
//	RSQL_PGDIFF_KEEP=dir ...                           # also write the data files to dir

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// ---- data ----

const (
	pdOrders     = 2000
	pdUsers      = 30   // orders name u0..u29 (and NULL); users are u5..u34
	pdDisorderMs = 3000 // < the watermark delay of 5 s: no row is late
	pdStepMs     = 100
)

var pdBase = time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)

// pdTable is a generated table: its columns (rsql type, PostgreSQL type) and rows (nil is
// NULL; int64, float64, string, time.Time).
type pdTable struct {
	name string
	cols []pdCol
	rows [][]any
	// key, when set, makes the table a TABLE keyed by that column: its rows are its
	// changelog (dels[i]: row i is a delete, "__op":"delete"), and PostgreSQL holds each
	// key's latest version (the greatest ts) unless it is a delete.
	key  string
	dels []bool
}

type pdCol struct{ name, rsqlType, pgType string }

func pdGenData(seed int64) []*pdTable {
	r := rand.New(rand.NewSource(seed))
	orders := &pdTable{name: "orders", cols: []pdCol{
		{"order_id", "BIGINT", "bigint"}, {"user_id", "VARCHAR", "text"}, {"category", "VARCHAR", "text"},
		{"amount", "DOUBLE", "double precision"}, {"qty", "INT", "integer"}, {"big", "BIGINT", "bigint"},
		{"ts", "TIMESTAMP", "timestamp"}}}
	maybeNull := func(p float64, v any) any {
		if r.Float64() < p {
			return nil
		}
		return v
	}
	var id int64
	for i := 0; i < pdOrders; i++ {
		if r.Intn(20) != 0 { // one order id in 20 repeats the previous one
			id++
		}
		ts := pdBase.Add(time.Duration(int64(i)*pdStepMs-r.Int63n(pdDisorderMs)) * time.Millisecond)
		var bigv int64
		switch k := r.Intn(100); {
		case k < 2:
			bigv = math.MaxInt64 - r.Int63n(1000)
		case k < 3:
			bigv = math.MinInt64 + r.Int63n(1000)
		default:
			bigv = r.Int63n(1_000_000) - 500_000
		}
		orders.rows = append(orders.rows, []any{
			id,
			maybeNull(0.05, fmt.Sprintf("u%d", r.Intn(pdUsers))),
			maybeNull(0.03, string(rune('a'+r.Intn(5)))),
			maybeNull(0.05, float64(r.Intn(20000))/100),
			maybeNull(0.05, int64(r.Intn(10))),
			maybeNull(0.02, bigv),
			ts,
		})
	}
	users := &pdTable{name: "users", cols: []pdCol{
		{"user_id", "VARCHAR", "text"}, {"tier", "INT", "integer"}, {"name", "VARCHAR", "text"},
		{"ts", "TIMESTAMP", "timestamp"}}}
	// The users' times span the orders' (so over topics neither stream's watermark holds the
	// other back).
	for i := 5; i < 35; i++ {
		n := 1
		if i%7 == 0 { // a few users twice: duplicate join keys
			n = 2
		}
		for k := 0; k < n; k++ {
			users.rows = append(users.rows, []any{fmt.Sprintf("u%d", i), maybeNull(0.1, int64(1+r.Intn(3))),
				fmt.Sprintf("n%d", r.Intn(8)),
				pdBase.Add(time.Duration(int64(len(users.rows))*pdOrders*pdStepMs/40-r.Int63n(pdDisorderMs)) * time.Millisecond)})
		}
	}
	// The last user is a minute after the last order: over topics the users' watermark then
	// passes every order (a join waits for the slower input).
	users.rows = append(users.rows, []any{nil, int64(1), "nobody", pdBase.Add((pdOrders*pdStepMs + 60_000) * time.Millisecond)})
	return []*pdTable{orders, users, pdGenProfiles(r)}
}

// pdGenProfiles is a TABLE's changelog: users u3..u42 (orders name u0..u29) with one to four
// versions each over the orders' time span, in version-time order within a key but for
// versions that come up to pdDisorderMs late and stale versions (older than the key's
// version before them: not its latest), a tenth of keys deleted (some then inserted again), and a last version a
// minute after the last order (its watermark then passes every order's time).
func pdGenProfiles(r *rand.Rand) *pdTable {
	t := &pdTable{name: "profiles", key: "user_id", cols: []pdCol{
		{"user_id", "VARCHAR", "text"}, {"tier", "INT", "integer"}, {"name", "VARCHAR", "text"},
		{"ts", "TIMESTAMP", "timestamp"}}}
	type ver struct {
		row []any
		del bool
	}
	var vs []ver
	span := int64(pdOrders * pdStepMs)
	for i := 3; i < 43; i++ {
		user := fmt.Sprintf("u%d", i)
		n := 1 + r.Intn(4)
		for k := 0; k < n; k++ {
			ts := span * int64(k*40+i) / int64(4*40+43)
			del := k > 0 && r.Intn(10) == 0
			row := []any{user, int64(1 + r.Intn(3)), fmt.Sprintf("n%d", r.Intn(8)), pdBase.Add(time.Duration(ts) * time.Millisecond)}
			if r.Intn(4) == 0 {
				row[1] = nil
			}
			if del {
				row[1], row[2] = nil, nil
			}
			vs = append(vs, ver{row, del})
		}
	}
	// Rows in version-time order, a few moved to come up to pdDisorderMs late.
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].row[3].(time.Time).Before(vs[j].row[3].(time.Time)) })
	for i := range vs {
		if j := i + 1 + r.Intn(3); r.Intn(8) == 0 && j < len(vs) &&
			vs[j].row[3].(time.Time).Sub(vs[i].row[3].(time.Time)) < pdDisorderMs*time.Millisecond {
			vs[i], vs[j] = vs[j], vs[i]
		}
	}
	// Now and then (after half the deletes) a stale version right after a key's version or
	// delete: up to 1.5 s older, so not its latest (nor late: within the watermark's delay).
	var all []ver
	for _, v := range vs {
		all = append(all, v)
		if r.Intn(6) == 0 || v.del && r.Intn(2) == 0 {
			stale := []any{v.row[0], int64(9), "stale", v.row[3].(time.Time).Add(-time.Duration(1+r.Intn(1500)) * time.Millisecond)}
			all = append(all, ver{row: stale})
		}
	}
	vs = append(all, ver{row: []any{"~end", int64(1), "end", pdBase.Add(time.Duration(span+60_000) * time.Millisecond)}})
	for _, v := range vs {
		t.rows, t.dels = append(t.rows, v.row), append(t.dels, v.del)
	}
	return t
}

// pgRows are the rows PostgreSQL holds of the table: for a TABLE each key's latest version
// (the greatest ts; of equal times, the one read last) unless it is a delete.
func (tb *pdTable) pgRows() [][]any {
	if tb.key == "" {
		return tb.rows
	}
	k, ts := -1, -1
	for i, c := range tb.cols {
		switch c.name {
		case tb.key:
			k = i
		case "ts":
			ts = i
		}
	}
	latest := map[any]int{}
	var order []any
	for i, row := range tb.rows {
		j, ok := latest[row[k]]
		if !ok {
			order = append(order, row[k])
		}
		if !ok || !row[ts].(time.Time).Before(tb.rows[j][ts].(time.Time)) {
			latest[row[k]] = i
		}
	}
	var out [][]any
	for _, key := range order {
		if i := latest[key]; !tb.dels[i] {
			out = append(out, tb.rows[i])
		}
	}
	return out
}

// rsqlDDL declares the table as a file stream in event time (a TABLE with its key).
func (tb *pdTable) rsqlDDL() string {
	var cols []string
	for _, c := range tb.cols {
		cols = append(cols, c.name+" "+c.rsqlType)
	}
	if tb.key != "" {
		return fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = '%s.jsonl', format = 'json');\n",
			tb.name, strings.Join(cols, ", "), tb.key, tb.name)
	}
	return fmt.Sprintf("CREATE STREAM %s (%s, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = '%s.jsonl', format = 'json');\n",
		tb.name, strings.Join(cols, ", "), tb.name)
}

// jsonLines are the rows as JSON objects, one a line; a NULL is null or a missing key.
func (tb *pdTable) jsonLines() []string {
	var out []string
	for i, row := range tb.rows {
		var parts []string
		for k, c := range tb.cols {
			var v string
			switch x := row[k].(type) {
			case nil:
				if (i+k)%2 == 0 {
					continue // a missing key is NULL too
				}
				v = "null"
			case time.Time:
				v = strconv.Quote(x.UTC().Format("2006-01-02T15:04:05.000Z"))
			case string:
				v = strconv.Quote(x)
			case float64:
				v = strconv.FormatFloat(x, 'f', -1, 64)
			default:
				v = fmt.Sprint(x)
			}
			parts = append(parts, strconv.Quote(c.name)+":"+v)
		}
		if tb.dels != nil && tb.dels[i] {
			parts = append(parts, `"__op":"delete"`)
		}
		out = append(out, "{"+strings.Join(parts, ",")+"}\n")
	}
	return out
}

func (tb *pdTable) writeJSONLines(t *testing.T, dir string) {
	if err := os.WriteFile(filepath.Join(dir, tb.name+".jsonl"), []byte(strings.Join(tb.jsonLines(), "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (tb *pdTable) loadPG(t *testing.T, conn *pgx.Conn) {
	ctx := context.Background()
	var cols, names []string
	for _, c := range tb.cols {
		cols = append(cols, c.name+" "+c.pgType)
		names = append(names, c.name)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", tb.name, strings.Join(cols, ", "))); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{tb.name}, names, pgx.CopyFromRows(tb.pgRows())); err != nil {
		t.Fatal(err)
	}
}

// ---- environment ----

type pdEnv struct {
	bin, dir string
	conn     *pgx.Conn
	ddl      string
	tables   []*pdTable
}

func pdSeed() int64 {
	if s := os.Getenv("RSQL_PGDIFF_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err == nil {
			return n
		}
	}
	return 1
}

func newPDEnv(t *testing.T) *pdEnv {
	t.Helper()
	start := time.Now()
	e := &pdEnv{bin: buildRsql(t), dir: t.TempDir()}
	built := time.Since(start)
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	e.conn = conn
	var ddl strings.Builder
	for _, tb := range pdGenData(pdSeed()) {
		tb.writeJSONLines(t, e.dir)
		if keep := os.Getenv("RSQL_PGDIFF_KEEP"); keep != "" {
			tb.writeJSONLines(t, keep)
		}
		tb.loadPG(t, conn)
		ddl.WriteString(tb.rsqlDDL())
		e.tables = append(e.tables, tb)
	}
	e.ddl = ddl.String()
	t.Logf("rsql built in %v, PostgreSQL started and loaded in %v", built.Round(time.Millisecond), (time.Since(start) - built).Round(time.Millisecond))
	return e
}

// ---- queries and outcomes ----

// pdQuery is one query in both dialects (pg empty: the same text).
type pdQuery struct {
	name    string
	rsql    string
	pg      string
	ordered bool           // the result's order is part of the answer
	ttl     bool           // topic mode: create the view with SET state_ttl = '1 day' at once
	alsoOK  *regexp.Regexp // SQLSTATEs other than 0A000 that are a right answer (an overflow error)
}

func (q pdQuery) pgText() string {
	if q.pg != "" {
		return q.pg
	}
	return q.rsql
}

type pdKind int

const (
	pdEqual pdKind = iota
	pdRefused
	pdWrong
)

func (k pdKind) String() string { return [...]string{"equal", "refused", "wrong"}[k] }

type pdOutcome struct {
	kind      pdKind
	ttl       bool   // equal only after SET state_ttl
	detail    string // refusal message, or both answers when wrong
	got, want [][]any
}

type pdResult struct {
	rows [][]any
	err  string // non-empty: rsql failed; sqlstate holds the code it printed, if any
	code string
}

var pdErrLine = regexp.MustCompile(`ERROR ([0-9A-Z]{5}): ([^\n]*)`)

// runRsql runs one query with rsql -c over the generated files, in a private data directory.
func (e *pdEnv) runRsql(query string, ttl bool) pdResult {
	text := e.ddl + query + ";"
	if ttl {
		text = "SET state_ttl = '1 day';\n" + text
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, "-c", text, "--format", "json")
	cmd.Dir = e.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		res := pdResult{err: strings.TrimSpace(stderr.String())}
		if res.err == "" {
			res.err = err.Error()
		}
		if m := pdErrLine.FindStringSubmatch(res.err); m != nil {
			res.code = m[1]
		}
		return res
	}
	rows, last, perr := pdDecodeLines(stdout.Bytes())
	if perr == nil && last == "op" {
		rows, perr = pdFold(rows)
	}
	if perr != nil {
		return pdResult{err: fmt.Sprintf("unreadable output: %v\n%s", perr, stdout.String())}
	}
	return pdResult{rows: rows}
}

// pdFold applies a changelog (rows whose last column is the push query's op, insert or
// delete) to a multiset and returns the rows left: the query's final rows.
func pdFold(rows [][]any) ([][]any, error) {
	held := map[string][][]any{}
	var order []string
	for _, r := range rows {
		vals, op := r[:len(r)-1], r[len(r)-1]
		k := pdRowOf(vals).String()
		switch op {
		case "insert":
			if _, ok := held[k]; !ok {
				order = append(order, k)
			}
			held[k] = append(held[k], vals)
		case "delete":
			if len(held[k]) == 0 {
				return nil, fmt.Errorf("a delete of %s, which is not there", k)
			}
			held[k] = held[k][1:]
		default:
			return nil, fmt.Errorf("op %v is neither insert nor delete", op)
		}
	}
	var out [][]any
	for _, k := range order {
		out = append(out, held[k]...)
	}
	return out, nil
}

// pdDecodeLines reads JSON lines as rows, the values in the order of the object's keys,
// and says what the last key is.
func pdDecodeLines(out []byte) (rows [][]any, lastKey string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, "", fmt.Errorf("not a JSON object: %s", line)
		}
		var row []any
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return nil, "", err
			}
			lastKey, _ = key.(string)
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, "", err
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return rows, lastKey, sc.Err()
}

// pgQuery runs the query in PostgreSQL and returns its rows.
func (e *pdEnv) pgQuery(query string) ([][]any, error) {
	rows, err := e.conn.Query(context.Background(), query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// judge runs q in rsql (again with a state TTL when refused for want of one) and compares
// with PostgreSQL's rows want.
func (e *pdEnv) judge(q pdQuery, want [][]any) pdOutcome {
	res := e.runRsql(q.rsql, false)
	ttl := false
	if res.code == "0A000" && strings.Contains(res.err, "state_ttl") {
		res, ttl = e.runRsql(q.rsql, true), true
	}
	switch {
	case res.err != "" && res.code == "0A000":
		return pdOutcome{kind: pdRefused, ttl: ttl, detail: pdFirstLine(res.err)}
	case res.err != "" && res.code != "" && q.alsoOK != nil && q.alsoOK.MatchString(res.code):
		return pdOutcome{kind: pdRefused, ttl: ttl, detail: pdFirstLine(res.err)}
	case res.err != "":
		return pdOutcome{kind: pdWrong, ttl: ttl, detail: fmt.Sprintf("rsql failed (not 0A000): %s\nPostgreSQL: %s", res.err, pdShowRows(want))}
	}
	if why := pdCompare(want, res.rows, q.ordered); why != "" {
		return pdOutcome{kind: pdWrong, ttl: ttl, got: res.rows, want: want, detail: fmt.Sprintf("%s\nrsql:       %s\nPostgreSQL: %s", why, pdShowRows(res.rows), pdShowRows(want))}
	}
	return pdOutcome{kind: pdEqual, ttl: ttl}
}

func pdFirstLine(s string) string {
	if m := pdErrLine.FindString(s); m != "" {
		return m
	}
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// ---- comparison ----

// pdCell is a value as both engines' rows are compared: NULL, a number (exact, or
// approximate when it came from a float), or text (strings, booleans, timestamps as
// RFC 3339 UTC with milliseconds, rsql's JSON form).
type pdCell struct {
	null   bool
	num    *big.Rat
	approx bool
	text   string
}

func pdCellOf(v any) pdCell {
	switch x := v.(type) {
	case nil:
		return pdCell{null: true}
	case json.Number:
		s := string(x)
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return pdCell{text: s}
		}
		return pdCell{num: r, approx: strings.ContainsAny(s, ".eE")}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return pdCell{text: strconv.FormatFloat(x, 'g', -1, 64)}
		}
		return pdCell{num: new(big.Rat).SetFloat64(x), approx: true}
	case float32:
		return pdCellOf(float64(x))
	case int64:
		return pdCell{num: new(big.Rat).SetInt64(x)}
	case int32:
		return pdCell{num: new(big.Rat).SetInt64(int64(x))}
	case int16:
		return pdCell{num: new(big.Rat).SetInt64(int64(x))}
	case int:
		return pdCell{num: new(big.Rat).SetInt64(int64(x))}
	case pgtype.Numeric:
		if !x.Valid {
			return pdCell{null: true}
		}
		if x.NaN || x.InfinityModifier != pgtype.Finite {
			return pdCell{text: fmt.Sprint(x)}
		}
		r := new(big.Rat).SetInt(x.Int)
		exp := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs32(x.Exp))), nil))
		if x.Exp >= 0 {
			r.Mul(r, exp)
		} else {
			r.Quo(r, exp)
		}
		return pdCell{num: r}
	case time.Time:
		return pdCell{text: x.UTC().Format("2006-01-02T15:04:05.000Z")}
	case bool:
		return pdCell{text: strconv.FormatBool(x)}
	case string:
		return pdCell{text: x}
	}
	return pdCell{text: fmt.Sprint(v)}
}

func abs32(x int32) int32 {
	if x < 0 {
		return -x
	}
	return x
}

func (c pdCell) String() string {
	switch {
	case c.null:
		return "NULL"
	case c.num != nil:
		if c.num.IsInt() {
			return c.num.Num().String()
		}
		f, _ := c.num.Float64()
		return strconv.FormatFloat(f, 'g', 12, 64)
	}
	return strconv.Quote(c.text)
}

// key is the cell rounded for bucketing: numbers to 6 significant digits.
func (c pdCell) key() string {
	if c.num != nil {
		f, _ := c.num.Float64()
		return "#" + strconv.FormatFloat(f, 'g', 6, 64)
	}
	return c.String()
}

func pdCellEq(a, b pdCell) bool {
	if a.null || b.null {
		return a.null == b.null
	}
	if a.num == nil && b.num == nil {
		return a.text == b.text
	}
	if a.num == nil || b.num == nil {
		return false
	}
	if a.num.Cmp(b.num) == 0 {
		return true
	}
	if !a.approx && !b.approx && a.num.IsInt() && b.num.IsInt() {
		return false // two exact integers differ
	}
	x, _ := a.num.Float64()
	y, _ := b.num.Float64()
	d := math.Abs(x - y)
	return d <= 1e-9*math.Max(math.Abs(x), math.Abs(y)) || d < 1e-12
}

type pdRow []pdCell

func pdRowOf(vals []any) pdRow {
	r := make(pdRow, len(vals))
	for i, v := range vals {
		r[i] = pdCellOf(v)
	}
	return r
}

func (r pdRow) key() string {
	var b strings.Builder
	for _, c := range r {
		b.WriteString(c.key())
		b.WriteByte('|')
	}
	return b.String()
}

func (r pdRow) String() string {
	parts := make([]string, len(r))
	for i, c := range r {
		parts[i] = c.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func pdRowEq(a, b pdRow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !pdCellEq(a[i], b[i]) {
			return false
		}
	}
	return true
}

// pdCompare says how got differs from want ("" when equal): as sequences when ordered,
// else as multisets (rows matched by rounded key first, then any leftovers by tolerance).
func pdCompare(want, got [][]any, ordered bool) string {
	w := make([]pdRow, len(want))
	for i, v := range want {
		w[i] = pdRowOf(v)
	}
	g := make([]pdRow, len(got))
	for i, v := range got {
		g[i] = pdRowOf(v)
	}
	if len(w) != len(g) {
		return fmt.Sprintf("%d rows, PostgreSQL %d", len(g), len(w))
	}
	if ordered {
		for i := range w {
			if !pdRowEq(w[i], g[i]) {
				return fmt.Sprintf("row %d differs: rsql %v, PostgreSQL %v", i+1, g[i], w[i])
			}
		}
		return ""
	}
	byKey := map[string][]int{}
	for i, r := range w {
		byKey[r.key()] = append(byKey[r.key()], i)
	}
	used := make([]bool, len(w))
	var left []pdRow
	for _, r := range g {
		matched := false
		k := r.key()
		for n, i := range byKey[k] {
			if pdRowEq(w[i], r) {
				used[i], matched = true, true
				byKey[k] = append(byKey[k][:n:n], byKey[k][n+1:]...)
				break
			}
		}
		if !matched {
			left = append(left, r)
		}
	}
	var missing []pdRow
	for _, r := range left {
		matched := false
		for i := range w {
			if !used[i] && pdRowEq(w[i], r) {
				used[i], matched = true, true
				break
			}
		}
		if !matched {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	var absent []pdRow
	for i := range w {
		if !used[i] {
			absent = append(absent, w[i])
		}
	}
	return fmt.Sprintf("%d rows differ: rsql has %s; PostgreSQL has %s instead", len(missing), pdShowSome(missing), pdShowSome(absent))
}

func pdShowSome(rs []pdRow) string {
	var parts []string
	for i, r := range rs {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(rs)-5))
			break
		}
		parts = append(parts, r.String())
	}
	return strings.Join(parts, " ")
}

func pdShowRows(rows [][]any) string {
	rs := make([]pdRow, len(rows))
	for i, v := range rows {
		rs[i] = pdRowOf(v)
	}
	if len(rs) == 0 {
		return "(no rows)"
	}
	if len(rs) > 8 {
		return fmt.Sprintf("%d rows: %s", len(rs), pdShowSome(rs))
	}
	return pdShowSome(rs)
}

// ---- running a list ----

// pdRun runs queries against PostgreSQL (one connection, in order) and rsql (two at a
// time), and returns each query's outcome. A query PostgreSQL rejects is reported in its
// outcome as wrong with the PostgreSQL error (a broken test query, not an rsql answer).
func (e *pdEnv) pdRun(qs []pdQuery) []pdOutcome {
	wants := make([][][]any, len(qs))
	out := make([]pdOutcome, len(qs))
	pgErr := make([]bool, len(qs))
	for i, q := range qs {
		rows, err := e.pgQuery(q.pgText())
		if err != nil {
			out[i] = pdOutcome{kind: pdWrong, detail: "PostgreSQL rejects the query: " + err.Error()}
			pgErr[i] = true
			continue
		}
		wants[i] = rows
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = e.judge(qs[i], wants[i])
			}
		}()
	}
	for i := range qs {
		if !pgErr[i] {
			next <- i
		}
	}
	close(next)
	wg.Wait()
	return out
}

func pdSummary(out []pdOutcome) string {
	var n [3]int
	ttl := 0
	for _, o := range out {
		n[o.kind]++
		if o.ttl && o.kind == pdEqual {
			ttl++
		}
	}
	return fmt.Sprintf("equal=%d (%d with state_ttl) refused=%d wrong=%d", n[pdEqual], ttl, n[pdRefused], n[pdWrong])
}

func pdStrict() bool { return os.Getenv("RSQL_PGDIFF_STRICT") != "" }
