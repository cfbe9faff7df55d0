package sql

import (
	"strconv"
	"strings"
	"time"
)

// ParseStateTTL reads the value of the state_ttl setting (docs/sql.md, "State TTL"): a Go
// duration ("90m", "1h30m") or "n unit" with unit one of millisecond(s), second(s),
// minute(s), hour(s), day(s); "0" or "" is no TTL. It reports false for anything else.
func ParseStateTTL(v string) (time.Duration, bool) {
	v = strings.TrimSpace(strings.ToLower(v))
	if v == "0" || v == "" {
		return 0, true
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, true
	}
	f := strings.Fields(v)
	if len(f) != 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	unit := map[string]time.Duration{"millisecond": time.Millisecond, "second": time.Second, "minute": time.Minute,
		"hour": time.Hour, "day": 24 * time.Hour}[strings.TrimSuffix(f[1], "s")]
	if unit == 0 {
		return 0, false
	}
	return time.Duration(n) * unit, true
}
