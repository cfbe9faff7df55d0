package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// What clients see, against PostgreSQL 15 over the same rows: result columns named as
// PostgreSQL names them (count, sum, max, ?column?), read by name through pgx, psql and
// `rsql -c --format json`; PostgreSQL's non-reserved keywords (key, rank, groups, range,
// rows) as unquoted column names and aliases; and the pull-query syntax PostgreSQL users
// write (OFFSET without LIMIT, NULLS FIRST/LAST, ORDER BY what is not selected, FETCH
// FIRST n ROWS ONLY), each result compared in order with PostgreSQL's.
func TestClientsSeePostgresNames(t *testing.T) {
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// 40 events over 12 keys; the keys k9..k11 have no rows value (NULL).
	type event struct {
		Key    string  `json:"key"`
		Rank   int     `json:"rank"`
		Groups int     `json:"groups"`
		Range  float64 `json:"range"`
		Rows   *int    `json:"rows,omitempty"`
	}
	var evs []event
	for i := 0; i < 40; i++ {
		e := event{Key: fmt.Sprintf("k%d", i%12), Rank: i * 7 % 13, Groups: i % 3, Range: float64(i) / 4}
		if i%12 < 9 {
			r := i * 5 % 17
			e.Rows = &r
		}
		evs = append(evs, e)
	}
	dir := t.TempDir()
	files := filepath.Join(dir, "data", "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if _, err := conn.Exec(ctx, "CREATE TABLE ev (key text, rank int, groups int, range float8, rows int)"); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
		rows := "NULL"
		if e.Rows != nil {
			rows = fmt.Sprint(*e.Rows)
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO ev VALUES ('%s', %d, %d, %v, %s)", e.Key, e.Rank, e.Groups, e.Range, rows)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(files, "ev.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The view's query names no column: its columns take PostgreSQL's names.
	viewQuery := "SELECT key, COUNT(*), SUM(rank), MAX(rows), MIN(range) FROM ev GROUP BY key"
	if _, err := conn.Exec(ctx, "CREATE TABLE per_key AS "+viewQuery); err != nil {
		t.Fatal(err)
	}

	srv, addr := startServerIn(t, filepath.Join(dir, "data"))
	defer srv.Stop()
	rc, err := pgx.Connect(ctx, "postgres://rsql@"+addr+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	for _, st := range []string{
		fmt.Sprintf(`CREATE STREAM ev (key VARCHAR, rank INT, groups INT, range DOUBLE, rows INT)
			WITH (connector = 'file', path = '%s', format = 'json')`, filepath.Join(files, "ev.jsonl")),
		"CREATE MATERIALIZED VIEW per_key AS " + viewQuery,
	} {
		if _, err := rc.Exec(ctx, st, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var total int64
		err := rc.QueryRow(ctx, "SELECT SUM(count) FROM per_key", pgx.QueryExecModeSimpleProtocol).Scan(&total)
		if err == nil && total == int64(len(evs)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view holds %d of %d events (err %v)", total, len(evs), err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Names and rows, in order, as PostgreSQL gives them.
	queries := []string{
		"SELECT * FROM per_key ORDER BY key",
		"SELECT key, count, sum, max, min FROM per_key ORDER BY key",
		"SELECT COUNT(*), SUM(count), MAX(max), 1 + 1, upper('a'), per_key.key FROM per_key GROUP BY per_key.key ORDER BY per_key.key",
		"SELECT key AS rows, count AS rank, sum AS groups, min AS range, max AS key FROM per_key ORDER BY rows",
		"SELECT CAST(sum AS VARCHAR), CAST(1 AS BIGINT), count::VARCHAR, CASE WHEN count > 3 THEN 1 ELSE 0 END FROM per_key ORDER BY 1",
		"SELECT COUNT(*), COUNT(max) FROM per_key",
		// OFFSET without LIMIT, OFFSET ... ROWS, FETCH FIRST.
		"SELECT key FROM per_key ORDER BY key OFFSET 7",
		"SELECT key FROM per_key ORDER BY key OFFSET 2 ROWS",
		"SELECT key FROM per_key ORDER BY key FETCH FIRST 3 ROWS ONLY",
		"SELECT key FROM per_key ORDER BY key OFFSET 2 ROWS FETCH NEXT 4 ROWS ONLY",
		"SELECT key FROM per_key ORDER BY key FETCH FIRST ROW ONLY",
		// NULLS FIRST / LAST.
		"SELECT key, max FROM per_key ORDER BY max NULLS FIRST, key",
		"SELECT key, max FROM per_key ORDER BY max DESC NULLS LAST, key",
		"SELECT key, max FROM per_key ORDER BY max DESC, key",
		"SELECT key, max FROM per_key ORDER BY max, key DESC",
		// ORDER BY a column or expression not in the select list.
		"SELECT key FROM per_key ORDER BY sum DESC, key",
		"SELECT key, count FROM per_key ORDER BY count * 100 - sum, key LIMIT 5",
		"SELECT key FROM per_key ORDER BY max NULLS FIRST, min DESC OFFSET 1",
		"SELECT max IS NULL AS none, COUNT(*) FROM per_key GROUP BY max IS NULL ORDER BY SUM(count) DESC",
		"SELECT count FROM per_key GROUP BY count ORDER BY MIN(key)",
	}
	for _, q := range queries {
		wantNames, want := namedRows(t, conn, q)
		gotNames, got := namedRows(t, rc, q)
		if len(want) == 0 {
			t.Errorf("%s: PostgreSQL returned no rows: the case tests nothing", q)
			continue
		}
		if gotNames != wantNames {
			t.Errorf("%s: rsql names the columns %s, PostgreSQL %s", q, gotNames, wantNames)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\nrsql (%d rows):\n%s\nPostgreSQL (%d rows):\n%s", q, len(got), strings.Join(first(got, 12), "\n"),
				len(want), strings.Join(first(want, 12), "\n"))
		}
	}

	// Client code reads the columns by name: a map per row, and a struct by its db tags.
	rows, err := rc.Query(ctx, "SELECT * FROM per_key WHERE key = 'k1'", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := pgx.CollectRows(rows, pgx.RowToMap)
	if err != nil || len(maps) != 1 {
		t.Fatalf("rows as maps: %v %v", maps, err)
	}
	if m := maps[0]; fmt.Sprintf("%v %v %v %v %v", m["key"], m["count"], m["sum"], m["max"], m["min"]) != "k1 4 25 15 0.25" {
		t.Errorf("row by name: %v", m)
	}
	type perKey struct {
		Key   string  `db:"key"`
		Count int64   `db:"count"`
		Sum   int64   `db:"sum"`
		Max   *int64  `db:"max"`
		Min   float64 `db:"min"`
	}
	rows, err = rc.Query(ctx, "SELECT key, count, sum, max, min FROM per_key ORDER BY key", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	structs, err := pgx.CollectRows(rows, pgx.RowToStructByName[perKey])
	if err != nil || len(structs) != 12 || structs[0].Key != "k0" || structs[0].Count != 4 || structs[11].Max != nil {
		t.Errorf("rows as structs by name: %+v %v", structs, err)
	}
	var rowsCol, rankCol string
	if err := rc.QueryRow(ctx, "SELECT key AS rows, key AS rank FROM per_key WHERE key = 'k2'", pgx.QueryExecModeSimpleProtocol).Scan(&rowsCol, &rankCol); err != nil || rowsCol != "k2" {
		t.Errorf("keywords as aliases: %q %v", rowsCol, err)
	}

	// Two columns of one name in a derived table are ambiguous by that name, as in
	// PostgreSQL; a view cannot have two.
	for _, c := range []struct{ sql, code string }{
		{"SELECT count FROM (SELECT COUNT(*), COUNT(max) FROM per_key) x", "42702"},
		{"CREATE MATERIALIZED VIEW dup AS SELECT key, COUNT(*), COUNT(rows) FROM ev GROUP BY key", "42701"},
	} {
		_, err := rc.Exec(ctx, c.sql, pgx.QueryExecModeSimpleProtocol)
		if err == nil || !strings.Contains(err.Error(), c.code) {
			t.Errorf("%s: %v, want SQLSTATE %s", c.sql, err, c.code)
		}
	}
	// A reserved word says so and shows its quoted form.
	_, err = rc.Exec(ctx, "SELECT key, order FROM per_key", pgx.QueryExecModeSimpleProtocol)
	if err == nil || !strings.Contains(err.Error(), `quote it: "order"`) {
		t.Errorf("a reserved word as a column: %v", err)
	}

	// EXPLAIN's output schema names the columns alike.
	var plan []string
	rows, err = rc.Query(ctx, "EXPLAIN SELECT key, COUNT(*), MAX(rows) FROM ev GROUP BY key", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if p := strings.Join(plan, "\n"); !strings.Contains(p, "columns=[key, count, max]") {
		t.Errorf("EXPLAIN does not name the output columns key, count, max:\n%s", p)
	}

	// psql prints the names in its header.
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("psql", "-h", host, "-p", port, "-U", "rsql", "-X", "-A", "-F", ",",
		"-c", "SELECT key, COUNT(*), SUM(count), 1 + 1, upper(key) FROM per_key WHERE key = 'k3' GROUP BY key").CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	if lines := strings.Split(string(out), "\n"); len(lines) < 2 || lines[0] != "key,count,sum,?column?,upper" || lines[1] != "k3,1,4,2,K3" {
		t.Errorf("psql printed:\n%s", out)
	}
	// rsql -c --format json keys each row's object by the same names.
	got, errOut, err := runRsql(t, "", "--server", addr, "--format", "json", "-c",
		"SELECT COUNT(*), MAX(key), SUM(count) FROM per_key")
	if err != nil || got != `{"count":12,"max":"k9","sum":40}`+"\n" {
		t.Errorf("rsql --format json: %v %q %s", err, got, errOut)
	}
}

// namedRows runs a query and gives its column names, comma-separated, and its rows in
// order, one line each.
func namedRows(t *testing.T, conn *pgx.Conn, q string) (string, []string) {
	t.Helper()
	rows, err := conn.Query(context.Background(), q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var names []string
	for _, f := range rows.FieldDescriptions() {
		names = append(names, f.Name)
	}
	rows.Close()
	return strings.Join(names, ","), orderedRows(t, conn, q)
}
