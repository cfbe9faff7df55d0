package server

import (
	"errors"
	"io"
	"path/filepath"
	"syscall"
	"testing"

	"rsql/internal/durable/durabletest"
)

// A failed fsync of catalog.json fails the statement that changed the catalog; the engine
// does not serve what it could not store, and the catalog read back holds what it held
// before.
func TestCatalogSaveSyncFailsStatement(t *testing.T) {
	te := newTestEngine(t, false)
	te.mustExec("CREATE STREAM orders (id BIGINT) WITH (connector = 'file', path = '" + te.path("orders.jsonl") + "')")
	fs := &durabletest.FS{}
	te.e.cat.mu.Lock()
	te.e.cat.fs = fs
	te.e.cat.mu.Unlock()
	fs.Arm(durabletest.Sync, "catalog.json", 1, syscall.EIO)
	if _, _, err := te.exec("CREATE STREAM more (id BIGINT) WITH (connector = 'file', path = '" + te.path("more.jsonl") + "')"); err == nil {
		t.Fatal("CREATE STREAM whose catalog fsync failed succeeded")
	}
	if fs.Fired() != 1 {
		t.Fatalf("the fault fired %d times", fs.Fired())
	}
	if _, ok := te.e.cat.Stream("more"); ok {
		t.Fatal("the engine serves a stream its catalog could not store")
	}
	c, err := OpenCatalog(filepath.Join(te.dir, "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Stream("orders"); !ok {
		t.Fatal("orders lost from the catalog on disk")
	}
	if _, ok := c.Stream("more"); ok {
		t.Fatal("the failed stream is in the catalog on disk")
	}
}

// Every failing step of a catalog save fails the change, leaves it out of the catalog, and
// leaves the file as it was.
func TestCatalogSaveFaults(t *testing.T) {
	for _, tc := range []struct {
		kind string
		err  error
	}{
		{durabletest.Write, io.ErrShortWrite},
		{durabletest.Write, syscall.ENOSPC},
		{durabletest.Sync, syscall.EIO},
		{durabletest.Rename, syscall.ENOSPC},
		{durabletest.Create, syscall.EDQUOT},
	} {
		t.Run(tc.kind+"/"+tc.err.Error(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cat", "catalog.json")
			fs := &durabletest.FS{}
			c, err := OpenCatalogFS(fs, path)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.AddStream(StreamDef{Name: "a", Options: map[string]string{"queues": "1"}}); err != nil {
				t.Fatal(err)
			}
			fs.Arm(tc.kind, "catalog.json", 1, tc.err)
			if err := c.AddStream(StreamDef{Name: "b"}); !errors.Is(err, tc.err) {
				t.Fatalf("AddStream with a failing %s: %v, want %v", tc.kind, err, tc.err)
			}
			if _, ok := c.Stream("b"); ok {
				t.Fatal("the catalog holds a stream it could not store")
			}
			r, err := OpenCatalog(path)
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := r.Stream("a"); !ok || d.Options["queues"] != "1" {
				t.Fatalf("a after reload: %+v, %v", d, ok)
			}
			if _, ok := r.Stream("b"); ok {
				t.Fatal("b is in the catalog on disk")
			}
		})
	}
}

// A DROP or a job-state change whose save fails leaves the catalog in memory as it was, so
// the engine and the file agree.
func TestCatalogDropAndStateFaultsUndo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	fs := &durabletest.FS{}
	c, err := OpenCatalogFS(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddStream(StreamDef{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	fs.Arm(durabletest.Sync, "catalog.json", 1, syscall.EIO)
	if err := c.DropStream("a"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("DropStream with a failing fsync: %v", err)
	}
	if _, ok := c.Stream("a"); !ok {
		t.Fatal("a failed DROP removed the stream from memory")
	}
	id, err := c.AddStreamAndJob(nil, JobDef{Statement: "INSERT INTO a SELECT 1", Sink: "a", State: JobRunning})
	if err != nil {
		t.Fatal(err)
	}
	fs.Arm(durabletest.Sync, "catalog.json", 1, syscall.EIO)
	if err := c.SetJobState(id, JobFailed, "boom"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("SetJobState with a failing fsync: %v", err)
	}
	if j, _ := c.Job(id); j.State != JobRunning || j.Error != "" {
		t.Fatalf("a failed SetJobState changed the job in memory: %s %q", j.State, j.Error)
	}
	if err := c.DropStream("a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Stream("a"); ok {
		t.Fatal("DROP did not remove the stream")
	}
}
