#!/usr/bin/env bash
# Installs what rsql needs on a Debian machine, only what is missing, so it is safe to run
# again.
#
#   scripts/deps.sh build   the RocksDB headers (librocksdb-dev) and the Go modules: enough
#                           to build and run rsql (`make run`)
#   scripts/deps.sh test    the above, plus what the tests drive: PostgreSQL 15 and its
#                           client (a private server per test), tmux (the shell's terminal
#                           test), Node.js with npm and node-postgres (the `pg` package, for
#                           the node-postgres test), Chromium (the web console's browser
#                           test, headless)
#
# Each missing Debian package is installed on its own, so one that cannot be installed (a
# conflict with a Node.js installed another way, say) does not hold back the others. A
# package the mode cannot do without stops the script with what to run by hand; an
# optional one is reported and the tests that need it say so when they skip.
#
# For the script's own test: RSQL_DEPS_ROOT is prepended to the files it looks for, so a
# test can make every dependency look missing without touching the machine.
set -euo pipefail

mode="${1:-test}"
case "$mode" in
build | test) ;;
*)
  echo "usage: scripts/deps.sh [build|test]" >&2
  exit 2
  ;;
esac
root="${RSQL_DEPS_ROOT:-}"

have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_file() { compgen -G "$root$1" >/dev/null 2>&1; }

# required: the mode fails without them; optional: reported, tests skip without them.
required=()
optional=()
have_file /usr/include/rocksdb/c.h || required+=(librocksdb-dev)
if [ "$mode" = test ]; then
  have_cmd pg_ctl || have_file '/usr/lib/postgresql/*/bin/pg_ctl' || required+=(postgresql)
  have_cmd psql || required+=(postgresql-client)
  have_cmd tmux || optional+=(tmux)
  have_cmd node || optional+=(nodejs)
  # Debian's nodejs does not ship npm, a Node.js installed another way does (and Debian's
  # npm then conflicts with it): npm is asked for only when it is not on PATH.
  have_cmd npm || optional+=(npm)
  have_cmd chromium || have_cmd chromium-browser || optional+=(chromium)
fi

# as_root runs a command as root: directly when we are root, through sudo otherwise.
as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif have_cmd sudo; then
    sudo "$@"
  else
    echo "not root and no sudo: run as root: $*" >&2
    return 1
  fi
}

failed_required=()
failed_optional=()
if [ $((${#required[@]} + ${#optional[@]})) -gt 0 ]; then
  echo "installing: ${required[*]} ${optional[*]}" >&2
  if ! have_cmd apt-get; then
    echo "apt-get not found: this script installs Debian packages; install ${required[*]} ${optional[*]} with your system's package manager" >&2
    [ ${#required[@]} -eq 0 ] || exit 1
  else
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    # apt_get runs apt-get as root, its output kept in $log and shown only when it fails.
    apt_get() {
      if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get "$@" >"$log" 2>&1; then
        tail -n 5 "$log" >&2
        return 1
      fi
    }
    apt_get update -qq || echo "apt-get update failed; trying the install with the package lists as they are" >&2
    for p in ${required[@]+"${required[@]}"}; do
      apt_get install -y -qq --no-install-recommends "$p" || failed_required+=("$p")
    done
    for p in ${optional[@]+"${optional[@]}"}; do
      apt_get install -y -qq --no-install-recommends "$p" || failed_optional+=("$p")
    done
  fi
fi
if [ ${#failed_optional[@]} -gt 0 ]; then
  echo "could not install ${failed_optional[*]}: the tests that need them will skip and say so (install by hand: apt-get install ${failed_optional[*]})" >&2
fi
if [ ${#failed_required[@]} -gt 0 ]; then
  echo "could not install ${failed_required[*]} with apt-get: install by hand (Debian bookworm: apt-get install ${failed_required[*]}) and run this again" >&2
  exit 1
fi

if ! have_cmd go; then
  if [ -x /usr/local/go/bin/go ]; then export PATH=/usr/local/go/bin:$PATH; else
    echo "Go 1.26 or newer is needed: install it (https://go.dev/doc/install) and run this again" >&2
    exit 1
  fi
fi
cd "$(dirname "$0")/.."
if ! go mod download; then
  echo "could not download the Go modules: check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY))" >&2
  exit 1
fi

if [ "$mode" = test ] && [ ! -d tests/node/node_modules/pg ]; then
  if ! have_cmd npm; then
    echo "npm not found: the node-postgres test will skip (install Node.js with npm to run it)" >&2
  elif ! (cd tests/node && npm install --no-audit --no-fund --silent); then
    echo "could not install node-postgres (npm install in tests/node): check that the npm registry is reachable; the node-postgres test will skip" >&2
  fi
fi
