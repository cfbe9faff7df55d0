#!/usr/bin/env bash
# Runs a command and prints how its resident memory splits at its peak: the Go heap, the
# rest (the C allocator: RocksDB's memtables, cache and batch copies; shared libraries;
# thread stacks) and the executable's own mapped pages (text, read-only data).
#
#   scripts/rss-split.sh bin/rsql bench nexmark --json --query q16 --events 10000000 --state rocksdb
#
# The process's mappings (/proc/PID/smaps) are read every 0.2 s and the reading with the
# highest VmRSS is split. Go's heap arenas are the anonymous mappings below 0x7f0000000000:
# the Go runtime reserves them by address hint, while mmap places the C allocator's
# mappings, stacks and libraries at the top of the address space (Linux, x86-64). The
# command's output goes to standard error.
set -euo pipefail
if [ $# -eq 0 ]; then
	echo "usage: $0 command [args...]" >&2
	exit 2
fi
"$@" >&2 &
pid=$!
exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
best=0
peak=$(mktemp)
cur=$(mktemp)
trap 'rm -f "$peak" "$cur"' EXIT
while kill -0 "$pid" 2>/dev/null; do
	if cp "/proc/$pid/smaps" "$cur" 2>/dev/null; then
		rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
		if [ "${rss:-0}" -gt "$best" ]; then
			best=$rss
			cp "$cur" "$peak"
		fi
	fi
	sleep 0.2
done
wait "$pid" || status=$?
awk -v exe="$exe" -v peak="$best" '
	/^[0-9a-f]+-[0-9a-f]+ / { split($1, a, "-"); start = a[1]; path = $6 }
	/^Rss:/ {
		if (path != "" && path == exe) bin += $2
		else if (path == "" && (length(start) < 12 || length(start) == 12 && start < "7f0000000000")) go += $2
		else other += $2
	}
	END { printf "peak RSS %d MiB: Go heap %d MiB, other %d MiB, executable %d MiB\n", peak/1024, go/1024, other/1024, bin/1024 }
' "$peak"
exit "${status:-0}"
