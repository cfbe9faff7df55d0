package tests

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPostgresHarness checks that the private cluster answers queries, since every
// comparison against PostgreSQL depends on it.
func TestPostgresHarness(t *testing.T) {
	pg := startPostgres(t)
	conn, err := pgx.Connect(context.Background(), pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT 6 * 7").Scan(&n); err != nil || n != 42 {
		t.Fatalf("SELECT 6*7 = %d, %v", n, err)
	}
}
