package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// SHOW JOBS reports a running job's input rate, per-split lag and counters.
func TestShowJobsReportsRateAndLag(t *testing.T) {
	_, addr := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://rsql@"+addr+"/rsql?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		"CREATE STREAM clicks (id BIGINT, page VARCHAR) WITH (queues = 2)",
		"CREATE STREAM home WITH (queues = 1) AS SELECT id FROM clicks WHERE page = 'home'",
	} {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var values []string
	for i := 0; i < 100; i++ {
		values = append(values, fmt.Sprintf("(%d, 'home')", i))
	}
	insert := "INSERT INTO clicks VALUES " + strings.Join(values, ", ")
	sent := 0
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := conn.Exec(ctx, insert, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
		sent += 100
		time.Sleep(100 * time.Millisecond)
		rows, err := conn.Query(ctx, "SHOW JOBS", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		m, err := pgx.CollectOneRow(rows, pgx.RowToMap)
		if err != nil {
			t.Fatal(err)
		}
		rate, _ := m["input_rate"].(float64)
		in, _ := m["records_in"].(int64)
		perSplit, _ := m["lag_per_split"].(string)
		if m["state"] != "RUNNING" {
			t.Fatalf("job state %v", m["state"])
		}
		if in > int64(sent) {
			t.Fatalf("records_in %d exceeds the %d records sent", in, sent)
		}
		if rate > 0 && in > 0 && m["lag"] != nil && strings.Contains(perSplit, "clicks/0:") && strings.Contains(perSplit, "clicks/1:") {
			return
		}
	}
	t.Fatal("SHOW JOBS never showed a positive input rate with per-split lag")
}
