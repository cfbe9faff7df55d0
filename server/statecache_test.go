package server

import (
	"io"
	"testing"
)

// rsql server --agg-cache-groups and --join-cache-keys reach every job's environment.
func TestStateCachesReachJobs(t *testing.T) {
	e, err := Open(Config{DataDir: t.TempDir(), StateBackend: "memory", AggCacheGroups: 7, JoinCacheKeys: 9, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	env := e.env("job-1")
	if env.AggCacheGroups != 7 || env.JoinCacheKeys != 9 {
		t.Fatalf("a job's AggCacheGroups is %d, JoinCacheKeys %d, want 7 and 9", env.AggCacheGroups, env.JoinCacheKeys)
	}
}
