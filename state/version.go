package state

// #cgo CXXFLAGS: -std=c++17
// int rsql_rocksdb_version();
import "C"

import "fmt"

// RocksDBVersion is the version of the RocksDB headers rsql was compiled against
// (e.g. "7.8.3" with Debian bookworm's librocksdb-dev).
func RocksDBVersion() string {
	v := int(C.rsql_rocksdb_version())
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
}
