#!/usr/bin/env bash
# Installs what building and testing rsql needs on a Debian machine: the RocksDB headers
# (librocksdb-dev), PostgreSQL 15 and its client (for the checkpoint-store tests), and the Go
# modules; tmux (the shell's terminal test), Node.js with npm and node-postgres (the `pg`
# package, for the node-postgres test). Safe to run again: it installs only what is missing.
set -euo pipefail

need=()
[ -f /usr/include/rocksdb/c.h ] || need+=(librocksdb-dev)
command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
command -v psql >/dev/null 2>&1 || need+=(postgresql-client)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)

if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing: ${need[*]}" >&2
  if ! { $sudo apt-get update -qq && $sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; }; then
    echo "could not install ${need[*]} with apt-get: install them by hand (Debian bookworm: apt-get install ${need[*]}) and run this again" >&2
    exit 1
  fi
fi

if ! command -v go >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then export PATH=/usr/local/go/bin:$PATH; else
    echo "Go 1.26 or newer is needed: install it (https://go.dev/doc/install) and run this again" >&2
    exit 1
  fi
fi
if ! go mod download; then
  echo "could not download the Go modules: check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY))" >&2
  exit 1
fi

cd "$(dirname "$0")/.."
if [ ! -d tests/node/node_modules/pg ]; then
  if ! (cd tests/node && npm install --no-audit --no-fund --silent); then
    echo "could not install node-postgres (npm install in tests/node): check that the npm registry is reachable" >&2
    exit 1
  fi
fi
