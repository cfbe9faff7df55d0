package server

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"rsql/sql"
)

// setting is one session setting SET accepts: its values (nil: any text) and how a given
// value is stored (canonical spelling).
type setting struct {
	name   string
	values []string // allowed values, lower case; nil accepts anything check allows
	check  func(v string) (string, bool)
	def    string // the value SHOW gives before any SET
	doc    string
}

// settings are the session settings, by lower-case name (docs/sql.md, "Settings").
// offset_reset is rsql's own; the others are PostgreSQL session parameters that clients
// and drivers set on connect, accepted so they work (they change nothing: rsql speaks
// UTF-8, UTC and ISO dates only).
var settings = func() map[string]setting {
	m := map[string]setting{}
	for _, s := range []setting{
		{name: "offset_reset", values: []string{"earliest", "latest"}, def: "latest",
			doc: "where a push query over a topic starts: earliest (the retained history) or latest (new records)"},
		{name: "state_ttl", check: ttlValue, def: "0",
			doc: "how long state without a natural end (SELECT DISTINCT, deduplication over a stream; a regular join's rows, which makes it approximate) is kept behind the watermark, e.g. '1 hour', '30m'; 0: not at all (such queries are refused; a regular join keeps its rows and is exact)"},
		{name: "application_name", check: anyText, def: "", doc: "the client's name"},
		{name: "client_encoding", check: utf8Name, def: "UTF8", doc: "UTF8 only"},
		{name: "datestyle", check: dateStyle, def: "ISO, MDY", doc: "ISO only"},
		{name: "timezone", check: utcName, def: "UTC", doc: "UTC only"},
		{name: "extra_float_digits", check: intIn(-15, 3), def: "1", doc: "a whole number from -15 to 3"},
		{name: "search_path", check: anyText, def: "public", doc: "accepted and ignored"},
		{name: "statement_timeout", check: intIn(0, 1<<31-1), def: "0", doc: "a whole number of milliseconds; accepted and ignored"},
		{name: "client_min_messages", values: []string{"debug5", "debug4", "debug3", "debug2", "debug1", "log", "notice", "warning", "error"},
			def: "notice", doc: "accepted and ignored"},
	} {
		m[s.name] = s
	}
	return m
}()

func anyText(v string) (string, bool) { return v, true }

func utf8Name(v string) (string, bool) {
	switch strings.ToLower(strings.ReplaceAll(v, "-", "")) {
	case "utf8", "unicode":
		return "UTF8", true
	}
	return "", false
}

func utcName(v string) (string, bool) {
	switch strings.ToLower(v) {
	case "utc", "etc/utc", "gmt", "z", "zulu", "+00:00", "0":
		return "UTC", true
	}
	return "", false
}

func dateStyle(v string) (string, bool) {
	for _, part := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(part)) {
		case "iso", "mdy", "dmy", "ymd":
		default:
			return "", false
		}
	}
	return v, true
}

func intIn(lo, hi int) func(string) (string, bool) {
	return func(v string) (string, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return "", false
		}
		return strconv.Itoa(n), true
	}
}

// settingNames lists the known settings, sorted.
func settingNames() []string {
	names := make([]string, 0, len(settings))
	for n := range settings {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// applySetting validates SET name = value and returns the value to store. Names and the
// values of settings with a fixed list are case-insensitive. An unknown name or value is a
// 22023 error naming what is allowed.
func applySetting(name, value string) (string, error) {
	s, ok := settings[strings.ToLower(name)]
	if !ok {
		return "", sql.Errorf(sql.CodeInvalidValue, "unrecognized setting %q: the settings are %s", name, strings.Join(settingNames(), ", "))
	}
	if s.values != nil {
		v := strings.ToLower(strings.TrimSpace(value))
		for _, a := range s.values {
			if v == a {
				if s.check != nil {
					v, _ = s.check(v)
				}
				return v, nil
			}
		}
		if s.check != nil {
			if v, ok := s.check(value); ok {
				return v, nil
			}
		}
		return "", sql.Errorf(sql.CodeInvalidValue, "invalid value %q for setting %s: want %s", value, s.name, strings.Join(s.values, " or "))
	}
	if v, ok := s.check(value); ok {
		return v, nil
	}
	return "", sql.Errorf(sql.CodeInvalidValue, "invalid value %q for setting %s: %s", value, s.name, s.doc)
}

// ttlValue accepts a state TTL: a Go duration ("90m", "1h30m") or "n unit" with unit one of
// millisecond(s), second(s), minute(s), hour(s), day(s); "0" turns it off. It is stored as a
// Go duration.
func ttlValue(v string) (string, bool) {
	d, ok := parseTTL(v)
	if !ok {
		return "", false
	}
	return d.String(), true
}

// parseTTL reads a state TTL (sql.ParseStateTTL).
func parseTTL(v string) (time.Duration, bool) { return sql.ParseStateTTL(v) }

// stateTTL is the session's state_ttl in milliseconds.
func stateTTL(sess *Session) int64 {
	if sess == nil {
		return 0
	}
	d, _ := parseTTL(sess.Settings["state_ttl"])
	return d.Milliseconds()
}
