package sql

import (
	"testing"
	"time"
)

func TestParseStateTTL(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0": 0, "": 0, "90m": 90 * time.Minute, "1h30m": 90 * time.Minute, " 1 Hour ": time.Hour,
		"2 days": 48 * time.Hour, "1 minute": time.Minute, "500 milliseconds": 500 * time.Millisecond, "10 seconds": 10 * time.Second,
	} {
		if got, ok := ParseStateTTL(in); !ok || got != want {
			t.Errorf("ParseStateTTL(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"-1h", "1 fortnight", "one hour", "1", "1 2 hours", "-3 days"} {
		if got, ok := ParseStateTTL(in); ok {
			t.Errorf("ParseStateTTL(%q) = %v, accepted", in, got)
		}
	}
}
