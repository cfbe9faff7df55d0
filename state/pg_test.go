package state

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"rsql/internal/pgtest"
)

// A private PostgreSQL cluster shared by the package's tests (internal/pgtest): started on
// first use and stopped by its PID in TestMain. Each test gets its own schema, so tests stay
// independent.
var pgTest struct {
	once    sync.Once
	cluster *pgtest.Cluster
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pgTest.cluster != nil {
		pgTest.cluster.Stop()
	}
	os.Exit(code)
}

// testPostgresURL returns the URL of the shared cluster, starting it if needed.
func testPostgresURL(t testing.TB) string {
	t.Helper()
	pgTest.once.Do(func() { pgTest.cluster, pgTest.err = pgtest.Start() })
	if pgTest.err != nil {
		t.Fatalf("private PostgreSQL cluster: %v", pgTest.err)
	}
	return pgTest.cluster.URL
}

var pgSchemaSeq atomic.Int64

// newTestSchema returns a schema name no other test uses.
func newTestSchema() string {
	return fmt.Sprintf("ckpt_%d_%d", os.Getpid(), pgSchemaSeq.Add(1))
}

// openTestPostgres opens a client of schema on the shared cluster, closed at cleanup.
func openTestPostgres(t testing.TB, schema string) *PostgresCheckpointStore {
	t.Helper()
	s, err := OpenPostgres(context.Background(), testPostgresURL(t), PostgresOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// crashPostgresCommit makes s's next commit lose its server process after its writes and
// before COMMIT, as a crash of either side would.
func crashPostgresCommit(t testing.TB, s *PostgresCheckpointStore) {
	var once sync.Once
	s.beforeCommit = func(pid uint32) error {
		var err error
		once.Do(func() {
			conn, cerr := pgx.Connect(context.Background(), testPostgresURL(t))
			if cerr != nil {
				err = cerr
				return
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, int64(pid))
		})
		return err
	}
}

// TestPostgresSchemaRace opens several clients of a fresh schema at once: the advisory lock
// must make every one of them succeed, and the tables must then work.
func TestPostgresSchemaRace(t *testing.T) {
	url := testPostgresURL(t)
	schema := newTestSchema()
	const n = 6
	stores := make([]*PostgresCheckpointStore, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stores[i], errs[i] = OpenPostgres(context.Background(), url, PostgresOptions{Schema: schema, MaxConns: 2})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	ctx := context.Background()
	g1, err := stores[0].Acquire(ctx, "j", "s", "a")
	if err != nil {
		t.Fatal(err)
	}
	g2, err := stores[n-1].Acquire(ctx, "j", "s", "b")
	if err != nil {
		t.Fatal(err)
	}
	if g1 != 1 || g2 != 2 {
		t.Fatalf("generations across clients of one schema: %d, %d; want 1, 2", g1, g2)
	}
}

func TestPostgresOptions(t *testing.T) {
	for _, bad := range []string{"Rsql", "a-b", "x;drop", "1abc"} {
		if _, err := OpenPostgres(context.Background(), "postgres://127.0.0.1:1/x", PostgresOptions{Schema: bad}); err == nil {
			t.Errorf("schema %q accepted", bad)
		}
	}
	if _, err := OpenPostgres(context.Background(), "postgres://%zz", PostgresOptions{}); err == nil {
		t.Error("bad url accepted")
	}
}
