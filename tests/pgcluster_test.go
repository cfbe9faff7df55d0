package tests

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

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

// startPostgresConn starts a private cluster and connects to it; the connection is closed,
// then the cluster stopped, at test cleanup.
func startPostgresConn(t testing.TB) *pgx.Conn {
	t.Helper()
	pg := startPostgres(t)
	conn, err := pgx.Connect(context.Background(), pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
