package tests

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rsql/state"
)

// TestTerminatedJobLeavesSharedStore: two `rsql server --postgres` instances run two
// materialized views' jobs, their units spread over both. DROP VIEW of one terminates its
// job: its rows leave the shared store's state and splits tables once no instance holds
// its units, and each instance's local store; the other view's job keeps its rows and
// still answers with every key.
func TestTerminatedJobLeavesSharedStore(t *testing.T) {
	pgc := startPostgres(t)
	br := startBroker(t)
	evs := onTimeEvents(genEventsN(31, 3000))
	srv, _ := externalInstances(t, 2, br.NS, pgc.URL)
	a, b := srv[0], srv[1]
	a.start()
	b.start()
	ddl := viewsClusterDDL + `
CREATE MATERIALIZED VIEW dropped AS SELECT category, COUNT(*) AS n FROM orders GROUP BY category;`
	if out, errOut, err := runRsql(t, "", "--server", a.pg, "-c", ddl); err != nil {
		t.Fatalf("DDL: %v\n%s\n%s", err, out, errOut)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgc.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	produceEvents(t, br.NS, evs)
	waitView(t, a.name, pdConnect(t, a.pg), viewAnswer(evs))
	rowsOf := func(table, job string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM rsql.`+table+` WHERE job = $1`, job).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(60 * time.Second); rowsOf("state", "job-2") == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("job-2 committed no state to the shared store")
		}
	}

	if out, errOut, err := runRsql(t, "", "--server", a.pg, "-c", "DROP VIEW dropped"); err != nil {
		t.Fatalf("DROP VIEW: %v\n%s\n%s", err, out, errOut)
	}
	for deadline := time.Now().Add(60 * time.Second); rowsOf("state", "job-2")+rowsOf("splits", "job-2") > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d state and %d split rows of the dropped view's job are left", rowsOf("state", "job-2"), rowsOf("splits", "job-2"))
		}
	}
	if rowsOf("state", "job-1") == 0 || rowsOf("splits", "job-1") == 0 {
		t.Fatal("the running view's job lost its shared state")
	}
	waitView(t, b.name, pdConnect(t, b.pg), viewAnswer(evs))

	// The local copies: the running job's keys stay, the dropped one's are gone once each
	// instance says so.
	for _, s := range srv {
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.stderr(), "job job-2: terminated; its state deleted"); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not delete the dropped view's state", s.name)
			}
		}
	}
	prefix := func(job string) []byte { return append(binary.AppendUvarint(nil, uint64(len(job))), job...) }
	for _, s := range srv {
		s.p.Kill()
		st, err := state.OpenRocks(filepath.Join(s.dir, "state"), state.RocksOptions{})
		if err != nil {
			t.Fatal(err)
		}
		count := func(job string) int {
			n := 0
			if err := st.Scan(prefix(job), func(_, _ []byte) error { n++; return nil }); err != nil && !errors.Is(err, state.ErrClosed) {
				t.Fatal(err)
			}
			return n
		}
		left, kept := count("job-2"), count("job-1")
		st.Close()
		if left != 0 || kept == 0 {
			t.Fatalf("%s's local store: %d keys of the dropped view's job, %d of the running one's", s.name, left, kept)
		}
	}
}
