package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The topic mode of the differential test (pgdiff_test.go): the fixed shapes as
// materialized views of a real `rsql server` over broker topics, the generated rows
// produced with `rsql produce` in three chunks, the server killed with SIGKILL at a random
// moment after each and started again on its data directory; at the end each view's rows
// (a pull query) must equal PostgreSQL's answer to the shape, or the view must have been
// refused with 0A000. A view refused for want of a state TTL (a regular join) is created
// again after SET state_ttl = '1 day' (the data spans minutes: nothing may be forgotten).
//
// Shapes with a window are left out here: their last window closes only when a later
// record comes, which would be a row PostgreSQL counts too (the windowed compositions over
// topics with kills are TestComposedJobsSurviveKill9's). So are ordered shapes (ORDER BY
// ... LIMIT in a view). RSQL_NOKILL=1 runs without the kills.

func pdTopicShapes() []pdQuery {
	var out []pdQuery
	for _, q := range pdShapes {
		if q.ordered || strings.Contains(q.rsql, "TUMBLE(") {
			continue
		}
		out = append(out, q)
	}
	// Aggregations that need no TTL, created with one: the TTL must not change the answer.
	return append(out,
		pdQuery{name: "global_aggs_ttl", ttl: true, rsql: `SELECT COUNT(*) AS c, SUM(qty) AS s FROM orders`},
		pdQuery{name: "per_user_ttl", ttl: true, rsql: `SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id`})
}

func (tb *pdTable) topicDDL() string {
	var cols []string
	for _, c := range tb.cols {
		cols = append(cols, c.name+" "+c.rsqlType)
	}
	// The orders come with disorder and pauses between chunks: with idleness on, a pause
	// would raise their watermark to the largest time read and make the disordered rows of
	// the next chunk late. The users come in order (nothing can be late) and end a minute
	// after the last order; their splits must go idle, or the one without the last user
	// would hold a join's watermark, and with it the reading of the orders, back.
	idle := "0s"
	if tb.name == "users" || tb.key != "" {
		idle = "1s"
	}
	if tb.key != "" {
		return fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (topic = '%s', queues = %d, idle_timeout = '%s')",
			tb.name, strings.Join(cols, ", "), tb.key, tb.name, pdTopicQueues(), idle)
	}
	return fmt.Sprintf("CREATE STREAM %s (%s, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (topic = '%s', queues = %d, idle_timeout = '%s')",
		tb.name, strings.Join(cols, ", "), tb.name, pdTopicQueues(), idle)
}

func pdProduce(ns, topic string, lines []string) error {
	cmd := exec.Command(buildPath, "produce", topic, "--key", "user_id", "--namesrv-addr", ns)
	cmd.Stdin = strings.NewReader(strings.Join(lines, ""))
	var errOut strings.Builder
	cmd.Stderr = &errOut
	err := cmd.Run()
	if err != nil || !strings.Contains(errOut.String(), fmt.Sprintf("produced %d records", len(lines))) {
		return fmt.Errorf("produce %s: %v\n%s", topic, err, errOut.String())
	}
	return nil
}

func pdConnect(t *testing.T, addr string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+addr+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func pdTopicsTest(t *testing.T, e *pdEnv) {
	shapes := pdTopicShapes()
	wants := make([][][]any, len(shapes))
	for i, q := range shapes {
		rows, err := e.pgQuery(q.pgText())
		if err != nil {
			t.Fatalf("%s: PostgreSQL rejects the query: %v", q.name, err)
		}
		wants[i] = rows
	}
	// Caches of a few keys: the aggregations' groups and the joins' keys leave memory and
	// come back from RocksDB all the time, through the kills too.
	s := newJobsServer(t, "--agg-cache-groups", "8", "--join-cache-keys", "8")
	ctx := context.Background()
	conn := pdConnect(t, s.pg)
	exec := func(q string) error {
		_, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol)
		return err
	}
	for _, tb := range e.tables {
		if err := exec(tb.topicDDL()); err != nil {
			t.Fatalf("%s: %v", tb.topicDDL(), err)
		}
	}
	out := make([]pdOutcome, len(shapes))
	created := make([]bool, len(shapes))
	for i, q := range shapes {
		create := "CREATE MATERIALIZED VIEW pd_" + q.name + " AS " + q.rsql
		var pe *pgconn.PgError
		err := errors.New("not created")
		if !q.ttl {
			err = exec(create)
		}
		if q.ttl || (errors.As(err, &pe) && pe.Code == "0A000" && strings.Contains(pe.Message, "state_ttl")) {
			out[i].ttl = true
			if err = exec("SET state_ttl = '1 day'"); err == nil {
				err = exec(create)
			}
			if rerr := exec("SET state_ttl = 0"); rerr != nil {
				t.Fatal(rerr)
			}
		}
		switch {
		case err == nil:
			created[i] = true
		case errors.As(err, &pe) && pe.Code == "0A000":
			out[i] = pdOutcome{kind: pdRefused, ttl: out[i].ttl, detail: "ERROR 0A000: " + pe.Message}
		default:
			out[i] = pdOutcome{kind: pdWrong, ttl: out[i].ttl, detail: fmt.Sprintf("CREATE MATERIALIZED VIEW failed (not 0A000): %v", err)}
		}
	}
	conn.Close(ctx)

	// The rows in three chunks, both tables at once, a kill after each.
	seed := pdSeed()
	r := rand.New(rand.NewSource(seed))
	for k := 0; k < 3; k++ {
		errs := make(chan error, len(e.tables))
		for _, tb := range e.tables {
			lines := tb.jsonLines()
			chunk := lines[k*len(lines)/3 : (k+1)*len(lines)/3]
			go func(name string) { errs <- pdProduce(s.ns, name, chunk) }(tb.name)
		}
		for range e.tables {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if os.Getenv("RSQL_NOKILL") != "" {
			continue
		}
		d := time.Duration(r.Intn(1500)) * time.Millisecond
		time.Sleep(d)
		t.Logf("kill -9 %v after chunk %d", d, k+1)
		s.p.Kill()
		s.start()
	}

	// Each view converges on PostgreSQL's answer; one that does not is wrong with what it
	// shows when the views have stopped changing for 20 s (or after 3 minutes).
	conn = pdConnect(t, s.pg)
	fed := time.Now()
	last := map[int]string{}
	done := make([]bool, len(shapes))
	changed := fed
	for pending := true; pending; {
		pending = false
		for i, q := range shapes {
			if !created[i] || done[i] {
				continue
			}
			var got [][]any
			var why string
			rows, err := conn.Query(ctx, "SELECT * FROM pd_"+q.name, pgx.QueryExecModeSimpleProtocol)
			if err == nil {
				got, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) { return row.Values() })
			}
			if err != nil {
				why = "pull query failed: " + err.Error()
			} else if why = pdCompare(wants[i], got, false); why == "" {
				out[i], done[i] = pdOutcome{kind: pdEqual, ttl: out[i].ttl}, true
				t.Logf("%s: equal %v after the feed", q.name, time.Since(fed).Round(time.Millisecond))
				continue
			}
			if shown := pdFingerprint(got) + err2s(err); shown != last[i] {
				last[i], changed = shown, time.Now()
			}
			out[i] = pdOutcome{kind: pdWrong, ttl: out[i].ttl, got: got, want: wants[i],
				detail: fmt.Sprintf("%s\nrsql view:  %s\nPostgreSQL: %s", why, pdShowRows(got), pdShowRows(wants[i]))}
			pending = true
		}
		if pending && (time.Since(changed) > 20*time.Second || time.Since(fed) > 3*time.Minute) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}

	var table strings.Builder
	for i, q := range shapes {
		o := out[i]
		t.Run(q.name, func(t *testing.T) {
			switch o.kind {
			case pdRefused:
				t.Logf("refused: %s", o.detail)
			case pdWrong:
				if why, ok := pdKnownWrongTopics[q.name]; ok && !pdStrict() {
					t.Skipf("known wrong (%s):\n%s\n%s", why, q.rsql, o.detail)
				}
				t.Errorf("wrong view of\n%s\n%s", q.rsql, o.detail)
			}
		})
		mark := o.kind.String()
		if o.ttl {
			mark += " (state_ttl)"
		}
		table.WriteString("  " + q.name + ": " + mark + "\n")
	}
	if t.Failed() {
		jobs, _ := conn.Query(ctx, "SHOW JOBS", pgx.QueryExecModeSimpleProtocol)
		if jobs != nil {
			all, _ := pgx.CollectRows(jobs, pgx.RowToMap)
			for _, j := range all {
				t.Logf("job %v", j)
			}
		}
		t.Logf("server stderr:\n%s", s.p.Stderr.String())
	}
	kills := 3
	if os.Getenv("RSQL_NOKILL") != "" {
		kills = 0
	}
	t.Logf("pgdiff topics (%d kills): %s\n%s", kills, pdSummary(out), table.String())
}

// pdKnownWrongTopics are the shapes whose views differ from PostgreSQL today (see
// pdKnownWrong).
var pdKnownWrongTopics = map[string]string{}

// pdTopicQueues is the number of queues of each input topic (RSQL_PGDIFF_QUEUES, default 2).
func pdTopicQueues() int {
	if n, err := strconv.Atoi(os.Getenv("RSQL_PGDIFF_QUEUES")); err == nil && n > 0 {
		return n
	}
	return 2
}

// pdFingerprint is a result as text independent of the rows' order.
func pdFingerprint(rows [][]any) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = pdRowOf(r).String()
	}
	sort.Strings(parts)
	return strings.Join(parts, "\n")
}

func err2s(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
