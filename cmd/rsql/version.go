package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"rsql/state"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// VersionCmd prints the version of rsql, Go and RocksDB.
type VersionCmd struct{}

func (c *VersionCmd) Run() error {
	rev, grocks := "", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " (" + s.Value[:12] + ")"
			}
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/linxGnu/grocksdb" {
				grocks = d.Version
			}
		}
	}
	fmt.Printf("rsql %s%s\n", version, rev)
	fmt.Printf("go %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("rocksdb %s (system librocksdb through grocksdb %s)\n", state.RocksDBVersion(), grocks)
	return nil
}
