// The RocksDB version rsql is compiled against, from RocksDB's C++ version header.
#include <rocksdb/version.h>

extern "C" int rsql_rocksdb_version() {
  return ROCKSDB_MAJOR * 10000 + ROCKSDB_MINOR * 100 + ROCKSDB_PATCH;
}
