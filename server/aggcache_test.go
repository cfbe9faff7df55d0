package server

import (
	"io"
	"testing"
)

// rsql server --agg-cache-groups reaches every job's environment.
func TestAggCacheGroupsReachJobs(t *testing.T) {
	e, err := Open(Config{DataDir: t.TempDir(), StateBackend: "memory", AggCacheGroups: 7, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.env("job-1").AggCacheGroups; got != 7 {
		t.Fatalf("a job's AggCacheGroups is %d, want 7", got)
	}
}
