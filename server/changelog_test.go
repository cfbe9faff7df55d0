package server

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"rsql/sql"
)

// CREATE STREAM ... AS SELECT of an updating query makes a table keyed by the changelog's
// key: a pull query over it gives the latest row of each key, and a key the query takes
// back (here: its count reached 3) is gone. INSERT INTO takes an updating query only into
// a table keyed the same way.
func TestDerivedChangelogIsATable(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec(`CREATE STREAM orders (user_id VARCHAR, amount DOUBLE) WITH (topic = 'orders', queues = 2)`)
	te.mustExec(`SET offset_reset = 'earliest'`)
	te.mustExec(`CREATE STREAM small_counts WITH (checkpoint_interval = '50ms') AS
  SELECT * FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) x WHERE n < 3`)
	d, ok := te.e.cat.Stream("small_counts")
	if !ok || !d.IsTable || !d.Changelog || strings.Join(d.PrimaryKey, ",") != "user_id" {
		t.Fatalf("small_counts is %+v, want a table keyed by user_id", d)
	}
	te.mustExec(`INSERT INTO orders VALUES ('u1', 1), ('u1', 2), ('u2', 1), ('u3', 1), ('u3', 2)`)
	pull := func() string {
		_, rows := te.mustExec(`SELECT user_id, n FROM small_counts`)
		var got []string
		for _, r := range rows[0] {
			got = append(got, strings.Join(r, "="))
		}
		sort.Strings(got)
		return strings.Join(got, " ")
	}
	waitFor(t, "the pull query over small_counts to give u1=2 u2=1 u3=2", func() bool { return pull() == "u1=2 u2=1 u3=2" })
	// u1's third order takes it out of the result. (Sent apart: the rows read together
	// that change a group make one change, so with the others u1 could reach 3 at once
	// and never be in the result.)
	te.mustExec(`INSERT INTO orders VALUES ('u1', 3)`)
	waitFor(t, "the pull query over small_counts to give u2=1 u3=2", func() bool { return pull() == "u2=1 u3=2" })
	deletes := 0
	for _, m := range te.topicMessages("small_counts") {
		if strings.Contains(string(m.Body), `"__op":"delete"`) {
			deletes++
			if m.Key != "u1" || string(m.Body) != `{"user_id":"u1","n":2,"__op":"delete"}` {
				t.Errorf("delete %q %s, want u1's row with its change", m.Key, m.Body)
			}
		}
	}
	if deletes == 0 {
		t.Error("no delete in the changelog: u1 left the result")
	}

	// A later query reads it as a table: a join looks its rows up by key (in processing
	// time; without FOR SYSTEM_TIME the join is of its latest rows and its own rows change,
	// which a stream without a key cannot take).
	te.mustExec(`CREATE STREAM enriched AS SELECT o.user_id, s.n FROM orders o LEFT JOIN small_counts FOR SYSTEM_TIME AS OF PROCTIME() AS s ON o.user_id = s.user_id`)
	te.wantCode(`CREATE STREAM enriched2 AS SELECT o.user_id, s.n FROM orders o LEFT JOIN small_counts s ON o.user_id = s.user_id`, "0A000", "no key")
	te.mustExec(`TERMINATE JOB job-2`)

	// INSERT INTO of an updating query.
	te.mustExec(`CREATE STREAM counts (user_id VARCHAR, n BIGINT) WITH (topic = 'counts')`)
	te.wantCode(`INSERT INTO counts SELECT user_id, COUNT(*) FROM orders GROUP BY user_id`, "0A000",
		"append-only", "PRIMARY KEY (user_id)")
	te.mustExec(`CREATE TABLE by_n (user_id VARCHAR, n BIGINT, PRIMARY KEY (n)) WITH (topic = 'by_n')`)
	te.wantCode(`INSERT INTO by_n SELECT user_id, COUNT(*) FROM orders GROUP BY user_id`, "0A000",
		"keyed by (n)", "PRIMARY KEY (user_id)")
	te.mustExec(`CREATE TABLE latest (user_id VARCHAR PRIMARY KEY, n BIGINT) WITH (topic = 'latest')`)
	te.mustExec(`INSERT INTO latest SELECT user_id, COUNT(*) FROM orders GROUP BY user_id`)
	// An append-only query into a stream is as before.
	te.mustExec(`INSERT INTO counts SELECT user_id, CAST(amount AS BIGINT) FROM orders`)

	// A global aggregate has no key: its stream carries the change column.
	te.mustExec(`CREATE STREAM total AS SELECT COUNT(*) AS n FROM orders`)
	if d, _ := te.e.cat.Stream("total"); d.IsTable || len(d.Columns) != 2 || d.Columns[1].Name != sql.ChangeColumn {
		t.Errorf("total is %+v, want a stream of n and %s", d, sql.ChangeColumn)
	} else if d.Options["queues"] != "1" {
		t.Errorf("total has options %v, want one queue (its changes have no key)", d.Options)
	}

	// The changelog table is dropped as a stream or as a table.
	te.mustExec(`DROP STREAM enriched`)
	te.mustExec(`DROP STREAM small_counts`)
	if _, ok := te.e.cat.Stream("small_counts"); ok {
		t.Error("DROP STREAM small_counts left it in the catalog")
	}
}

// A view of an append-only query without a key (a filter and projection of a stream) holds
// every row, not one: its rows have no key to replace one another by.
func TestViewOfAppendOnlyRowsHoldsEvery(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (a BIGINT, b VARCHAR) WITH (queues = 1)")
	te.mustExec("CREATE MATERIALIZED VIEW big AS SELECT a, b FROM ev WHERE a > 1")
	te.mustExec("INSERT INTO ev VALUES (1, 'x'), (2, 'y'), (3, 'z'), (3, 'z')")
	var got []string
	waitFor(t, "the view's rows", func() bool {
		_, rows, err := te.exec("SELECT a, b FROM big ORDER BY a")
		if err != nil || len(rows) == 0 {
			return false
		}
		got = got[:0]
		for _, r := range rows[0] {
			got = append(got, strings.Join(r, "|"))
		}
		return len(got) == 3
	})
	if w := "2|y 3|z 3|z"; strings.Join(got, " ") != w {
		t.Fatalf("view rows %q, want %q", strings.Join(got, " "), w)
	}
}

// A view of a retract changelog without a key (a global Top-N over an aggregate) holds
// the multiset of its rows: each change's delete takes one equal row back.
func TestViewOfKeylessChangelog(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (u VARCHAR, x BIGINT) WITH (queues = 1)")
	te.mustExec(`CREATE MATERIALIZED VIEW top AS SELECT u, n, rn FROM (SELECT u, n, ROW_NUMBER() OVER (ORDER BY n DESC) AS rn
		FROM (SELECT u, COUNT(*) AS n FROM ev GROUP BY u) a) b WHERE rn <= 2`)
	te.mustExec("INSERT INTO ev VALUES ('a', 1), ('a', 2), ('b', 3), ('c', 4), ('c', 5), ('c', 6)")
	var got string
	waitFor(t, "the view's rows", func() bool {
		_, rows, err := te.exec("SELECT u, n, rn FROM top ORDER BY rn")
		if err != nil || len(rows) == 0 {
			return false
		}
		var parts []string
		for _, r := range rows[0] {
			parts = append(parts, strings.Join(r, "|"))
		}
		got = strings.Join(parts, " ")
		return got == "c|3|1 a|2|2"
	})
}

// A view of UNION ALL of two aggregates over a stream of two queues: the union's stage
// receives each input's changelog routed by the rows' values, so a row's delete follows its
// insert, and the view holds one row per group.
func TestViewOfUnionOfAggregates(t *testing.T) {
	te := newTestEngine(t, true)
	te.mustExec("CREATE STREAM ev (u VARCHAR, c VARCHAR) WITH (queues = 2)")
	te.mustExec(`CREATE MATERIALIZED VIEW uv AS SELECT 'cat' AS kind, c AS k, COUNT(*) AS n FROM ev GROUP BY c
		UNION ALL SELECT 'user' AS kind, u AS k, COUNT(*) AS n FROM ev GROUP BY u`)
	var vals []string
	for i := 0; i < 200; i++ {
		vals = append(vals, fmt.Sprintf("('u%d', 'c%d')", i%7, i%3))
	}
	te.mustExec("INSERT INTO ev VALUES " + strings.Join(vals, ", "))
	want := "cat|c0|67 cat|c1|67 cat|c2|66 user|u0|29 user|u1|29 user|u2|29 user|u3|29 user|u4|28 user|u5|28 user|u6|28"
	var got string
	waitFor(t, "the union view's rows", func() bool {
		_, rows, err := te.exec("SELECT kind, k, n FROM uv ORDER BY kind, k")
		if err != nil || len(rows) == 0 {
			return false
		}
		var parts []string
		for _, r := range rows[0] {
			parts = append(parts, strings.Join(r, "|"))
		}
		got = strings.Join(parts, " ")
		return got == want
	})
}
