package tests

import (
	"testing"

	"rsql/internal/pgtest"
)

// pgCluster is a private PostgreSQL server started for a test.
type pgCluster = pgtest.Cluster

// startPostgres starts a private cluster; it is stopped by its PID at test cleanup.
func startPostgres(t testing.TB) *pgCluster {
	t.Helper()
	c, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}
