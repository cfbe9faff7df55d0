package server

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// A file table joined in processing time is read whole when the job starts and looked up
// by key (docs/sql.md, "Lookup joins"): LEFT keeps a stream row whose key the file lacks
// with NULLs, INNER drops it, the last line of a duplicated key wins, a JSON line with
// __op = 'delete' removes its key, and a bad line or a missing file fails the query with
// an error naming the file (and the line).
func TestFileLookupJoin(t *testing.T) {
	te := newTestEngine(t, false)
	writeLines(t, te.path("orders.jsonl"),
		`{"id": 1, "user": 1}`,
		`{"id": 2, "user": 2}`,
		`{"id": 3, "user": 5}`,
		`{"id": 4}`,
		`{"id": 5, "user": 3}`,
		`{"id": 6, "user": 4}`)
	te.mustExec("CREATE STREAM orders (id BIGINT, user BIGINT) WITH (connector = 'file', path = '" + te.path("orders.jsonl") + "')")
	writeLines(t, te.path("tiers.csv"),
		`1,gold,10`,
		`2,silver,20`,
		``,
		`1,platinum,30`,
		`3,,40`)
	te.mustExec("CREATE TABLE tiers (user_id BIGINT PRIMARY KEY, tier VARCHAR, credit INT) WITH (connector = 'file', path = '" + te.path("tiers.csv") + "', format = 'csv')")

	query := func(text string) string {
		t.Helper()
		_, rows := te.mustExec(text)
		var out []string
		for _, r := range rows[0] {
			out = append(out, strings.Join(r, " "))
		}
		sortStrings(out)
		return strings.Join(out, "; ")
	}
	if got, want := query(`SELECT o.id, t.tier, t.credit FROM orders o LEFT JOIN tiers FOR SYSTEM_TIME AS OF PROCTIME() AS t ON o.user = t.user_id`),
		"1 platinum 30; 2 silver 20; 3 NULL NULL; 4 NULL NULL; 5 NULL 40; 6 NULL NULL"; got != want {
		t.Errorf("LEFT JOIN: %s\nwant %s", got, want)
	}
	// Without AS OF the join is in processing time too; the columns read may be any subset
	// in any order (the csv fields stay in declared order).
	if got, want := query(`SELECT o.id, t.credit FROM orders o JOIN tiers t ON o.user = t.user_id`),
		"1 30; 2 20; 5 40"; got != want {
		t.Errorf("INNER JOIN: %s\nwant %s", got, want)
	}
	// A key compared in another type: the DECIMAL 1.5 matches no BIGINT key, not the 2 it
	// would round to; 3.0 matches 3.
	if got, want := query(`SELECT o.id, t.credit FROM orders o LEFT JOIN tiers t ON o.user * 1.5 = t.user_id`),
		"1 NULL; 2 40; 3 NULL; 4 NULL; 5 NULL; 6 NULL"; got != want {
		t.Errorf("a DECIMAL key: %s\nwant %s", got, want)
	}
	_, plan := te.mustExec(`EXPLAIN SELECT o.id, t.tier FROM orders o JOIN tiers FOR SYSTEM_TIME AS OF PROCTIME() AS t ON o.user = t.user_id`)
	var text strings.Builder
	for _, r := range plan[0] {
		text.WriteString(r[0] + "\n")
	}
	if !strings.Contains(text.String(), "mode=lookup keys=[o.user = t.user_id] table="+te.path("tiers.csv")+" (read into memory at start)") {
		t.Errorf("EXPLAIN:\n%s", text.String())
	}

	// JSON lines: __op = 'delete' ends a key, a later line brings it back.
	writeLines(t, te.path("tiers.jsonl"),
		`{"user_id": 1, "tier": "gold"}`,
		`{"user_id": 2, "tier": "silver"}`,
		`{"user_id": 1, "__op": "delete"}`,
		`{"user_id": 3, "tier": "bronze"}`,
		`{"user_id": 3, "__op": "DELETE"}`,
		`{"user_id": 3, "tier": "iron"}`)
	te.mustExec("CREATE TABLE tiers_json (user_id BIGINT PRIMARY KEY, tier VARCHAR) WITH (connector = 'file', path = '" + te.path("tiers.jsonl") + "')")
	if got, want := query(`SELECT o.id, t.tier FROM orders o JOIN tiers_json t ON o.user = t.user_id`),
		"2 silver; 5 iron"; got != want {
		t.Errorf("JSON table with deletes: %s\nwant %s", got, want)
	}

	// A bad line and a missing file fail the query, naming the file and the line.
	failing := func(table, want1, want2 string) {
		t.Helper()
		err := runErr(te, `SELECT o.id, t.tier FROM orders o JOIN `+table+` t ON o.user = t.user_id`)
		if err == nil || !strings.Contains(err.Error(), want1) || !strings.Contains(err.Error(), want2) {
			t.Errorf("join with %s: error %v, want one naming %q and %q", table, err, want1, want2)
		}
	}
	writeLines(t, te.path("bad.csv"), `1,gold`, `2,silver`, `two,bronze`)
	te.mustExec("CREATE TABLE bad (user_id BIGINT PRIMARY KEY, tier VARCHAR) WITH (connector = 'file', path = '" + te.path("bad.csv") + "', format = 'csv')")
	failing("bad", te.path("bad.csv"), "line 3: field user_id")
	writeLines(t, te.path("nullkey.csv"), `1,gold`, `,silver`)
	te.mustExec("CREATE TABLE nullkey (user_id BIGINT PRIMARY KEY, tier VARCHAR) WITH (connector = 'file', path = '" + te.path("nullkey.csv") + "', format = 'csv')")
	failing("nullkey", te.path("nullkey.csv"), "line 2: the primary key column user_id is NULL")
	// The file is read when the job starts: it need not exist at CREATE TABLE.
	te.mustExec("CREATE TABLE later (user_id BIGINT PRIMARY KEY, tier VARCHAR) WITH (connector = 'file', path = '" + te.path("later.csv") + "', format = 'csv')")
	failing("later", te.path("later.csv"), "no such file")
	writeLines(t, te.path("later.csv"), `2,late`)
	if got, want := query(`SELECT o.id, t.tier FROM orders o JOIN later t ON o.user = t.user_id`), "2 late"; got != want {
		t.Errorf("a file written after CREATE TABLE: %s\nwant %s", got, want)
	}
	// Too large: a sparse file one byte over the limit is refused before it is read.
	f, err := os.Create(te.path("huge.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64<<20 + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	te.mustExec("CREATE TABLE huge (user_id BIGINT PRIMARY KEY, tier VARCHAR) WITH (connector = 'file', path = '" + te.path("huge.csv") + "', format = 'csv')")
	failing("huge", te.path("huge.csv"), "67108865 bytes, more than the 67108864")

	// Options are checked at CREATE TABLE as for any file stream.
	te.wantCode("CREATE TABLE t2 (k BIGINT PRIMARY KEY) WITH (connector = 'file', path = 'x.csv', cache_ttl = '1s')", "22023", "unknown option \"cache_ttl\"")
	te.wantCode("CREATE TABLE t2 (k BIGINT PRIMARY KEY) WITH (connector = 'file', format = 'csv')", "22023", "needs a path option")
	te.wantCode("CREATE TABLE t2 (k BIGINT PRIMARY KEY) WITH (connector = 'file', path = 'x.txt', format = 'tsv')", "22023", `format = "tsv"`)
	te.wantCode("CREATE TABLE t2 (k BIGINT PRIMARY KEY) WITH (connector = 'file', path = '/etc/hosts', format = 'csv')", "42501", "/etc/hosts")
}

// runErr runs a query to its end and returns its error, whether the statement or reading
// its rows gave it.
func runErr(te *testEngine, text string) error {
	res, err := te.e.Execute(context.Background(), te.sess, text, nil)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Rows == nil {
			continue
		}
		defer r.Rows.Close()
		for {
			row, err := r.Rows.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if row == nil {
				break
			}
		}
	}
	return nil
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
