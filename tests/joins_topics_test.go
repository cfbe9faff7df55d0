package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Joins over topics, through real processes (`rsql server`, `rsql produce`, `rsql consume`),
// the server killed with SIGKILL three times while the orders and payments flow: each join
// restores both sides' state per split and the consumed results are exactly PostgreSQL's.

const joinTopicsDDL = `CREATE STREAM orders (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'orders', queues = 4, idle_timeout = '3s');
CREATE STREAM payments (order_id BIGINT, user_id VARCHAR, amount DOUBLE, ts TIMESTAMP,
  category VARCHAR, qty INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'payments', queues = 2, idle_timeout = '3s');
CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (topic = 'users', queues = 2, idle_timeout = '3s');
SET state_ttl = '1 day';
`

// joinTopicCases are the join cases run over topics (by name).
var joinTopicCases = []string{"interval_inner", "interval_left_strict", "interval_full_residual", "window_join", "temporal_left", "regular_ttl"}

func TestJoinsOverTopicsSurviveKill9(t *testing.T) {
	pg := startPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	orders := genEvents(41)[:30_000]
	payments := joinPayments(42, orders)
	users := joinUsers(43, orders)
	loadTable(t, conn, "orders", orders)
	loadTable(t, conn, "payments", payments)
	loadUsers(t, conn, users)
	lastEnd := int64(0)
	for _, e := range append(append([]event(nil), orders...), payments...) {
		lastEnd = max(lastEnd, e.TsMs-e.TsMs%60_000+60_000)
	}

	cases := map[string]windowCase{}
	for _, c := range joinCases {
		cases[c.name] = c
	}
	// A lookup join into PostgreSQL too: a dimension table of each user's latest tier. It
	// keeps no state but its cache; its rows must come out exactly once through the kills.
	if _, err := conn.Exec(ctx, `CREATE TABLE users_latest AS SELECT DISTINCT ON (user_id) user_id, tier
  FROM users ORDER BY user_id, ts DESC; ALTER TABLE users_latest ADD PRIMARY KEY (user_id)`); err != nil {
		t.Fatal(err)
	}
	cases["lookup_left"] = windowCase{name: "lookup_left",
		rsql: `SELECT o.order_id, u.tier FROM orders o LEFT JOIN dim_users FOR SYSTEM_TIME AS OF PROCTIME() AS u
  ON o.user_id = u.user_id`,
		postgres: `SELECT o.order_id, u.tier FROM orders o LEFT JOIN users_latest u ON o.user_id = u.user_id`}
	topicCases := append(append([]string(nil), joinTopicCases...), "lookup_left")
	s := newJobsServer(t)
	var ddl strings.Builder
	ddl.WriteString(joinTopicsDDL)
	fmt.Fprintf(&ddl, "CREATE TABLE dim_users (user_id VARCHAR PRIMARY KEY, tier VARCHAR) WITH (connector = 'postgres', url = '%s', table = 'users_latest');\n", pg.URL)
	for _, name := range topicCases {
		fmt.Fprintf(&ddl, "CREATE STREAM %s WITH (queues = 2) AS %s;\n", name, cases[name].rsql)
	}
	s.sql(ddl.String())

	// The table first, whole: its versions, then one past the end of the input for every
	// queue, so that once read its watermark holds no join back. The closing records are a
	// minute past the last window's end: an interval join hands on a watermark held back by
	// its interval (docs/sql.md "Joins"), which must still pass lastEnd.
	closeAt := lastEnd + 60_000
	var closingUsers []userVersion
	for i := 0; i < 64; i++ {
		closingUsers = append(closingUsers, userVersion{UserID: fmt.Sprintf("~close-%d", i), Tier: "none", TsMs: closeAt})
	}
	if err := produceLines(s.ns, "users", "user_id", userLines(append(append([]userVersion(nil), users...), closingUsers...))); err != nil {
		t.Fatal(err)
	}

	produceWithKills(t, s, orders, payments)
	closeInput(t, s, closeAt)
	waitAllJobs(t, s, lastEnd)

	checkTopicCases(t, s, conn, cases, topicCases)
}

// closingRow reports whether a result row comes from the records that close the input.
func closingRow(m map[string]any) bool {
	if u, _ := m["user_id"].(string); strings.HasPrefix(u, "~close") {
		return true
	}
	for _, c := range []string{"order_id", "oid", "pid"} {
		if n, ok := m[c].(json.Number); ok && strings.HasPrefix(n.String(), "-") {
			return true
		}
	}
	return false
}

// userLines are the versions as JSON lines, the way writeUsers writes them.
func userLines(vs []userVersion) string {
	var b bytes.Buffer
	for _, v := range vs {
		m := map[string]any{"user_id": v.UserID, "tier": v.Tier, "ts": v.TsMs}
		if v.Delete {
			m["__op"] = "delete"
		}
		j, _ := json.Marshal(m)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// produceLines appends JSON lines to a topic with `rsql produce`, keyed by a field.
func produceLines(ns, topic, key, text string) error {
	n := strings.Count(text, "\n")
	cmd := exec.Command(buildPath, "produce", topic, "--key", key, "--namesrv-addr", ns)
	cmd.Stdin = strings.NewReader(text)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	err := cmd.Run()
	if err != nil || !strings.Contains(errOut.String(), fmt.Sprintf("produced %d records", n)) {
		return fmt.Errorf("produce %s: %v\n%s", topic, err, errOut.String())
	}
	return nil
}
