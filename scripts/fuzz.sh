#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time, so that a decoder that learned to
# crash or hang fails CI (`make test` runs this after the unit tests; `make fuzz` runs it
# longer). The checked-in corpus under each package's testdata/fuzz/ is the starting
# point; `go test ./...` has already run it as regression cases. A failing input is
# written to testdata/fuzz/<target>/ of its package by the fuzzer; commit it with the fix.
#
#   FUZZTIME   how long each target runs (default 2s; a Go duration, or Nx for N runs)
#   FUZZJOBS   how many targets run at once, one fuzzing worker each (default 2)
#
# Each package's test binary is built once with fuzzing instrumentation, then the targets
# run FUZZJOBS at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
fuzztime="${FUZZTIME:-2s}"
jobs="${FUZZJOBS:-2}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS

pkgs="$(grep -rl --include='*_test.go' --exclude-dir=node_modules --exclude-dir=testdata '^func Fuzz' . | xargs -n1 dirname | sort -u)"
: >"$tmp/targets"
for pkg in $pkgs; do
  bin="$tmp/$(echo "${pkg#./}" | tr '/' '_').test"
  if ! go test -c -o "$bin" -fuzz=. "$pkg" >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log" >&2
    echo "fuzz: building the fuzz tests of ${pkg#./} failed" >&2
    exit 1
  fi
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$pkg"/*_test.go | sed 's/^func //' | sort -u); do
    echo "$pkg $bin $target" >>"$tmp/targets"
  done
done
built=$((SECONDS - start))

# run_target PKG BIN TARGET: fuzz one target; print one line; fail with the fuzzer's output.
# A run that ends with the fuzzing engine's own "context deadline exceeded" and no failing
# input (the coordinator timing out on a worker of a busy machine as -fuzztime ends) is run
# once more; a real failure writes its input and fails at once.
run_target() {
  local pkg="$1" bin="$2" target="$3" log="$tmp/$3.log" try
  for try in 1 2; do
    if (cd "$pkg" && "$bin" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$fuzztime" \
      -test.parallel=1 -test.fuzzcachedir="$tmp/cache/$target") >"$log" 2>&1; then
      break
    fi
    if [ "$try" = 1 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
      echo "fuzz: ${pkg#./} $target: the fuzzing engine timed out on a busy machine; once more" >&2
      continue
    fi
    tail -n 40 "$log" >&2
    echo "fuzz: ${pkg#./} $target FAILED; the input is in ${pkg#./}/testdata/fuzz/$target/" >&2
    return 1
  done
  local execs
  execs="$(grep -o 'execs: [0-9]*' "$log" | tail -n 1)"
  echo "fuzz: ${pkg#./} $target ok (${execs:-the corpus; no time left for new inputs})"
}
export -f run_target
export tmp fuzztime
if ! xargs -P "$jobs" -L 1 bash -c 'run_target "$@"' _ <"$tmp/targets"; then
  exit 1
fi
echo "fuzz: $(wc -l <"$tmp/targets") targets, ${fuzztime} each, $jobs at a time: ${built}s building, $((SECONDS - start))s in all"
