package main

import (
	"bytes"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// helpOf returns what `rsql <args> --help` prints.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var cli CLI
	var out bytes.Buffer
	exited := false
	p, err := kong.New(&cli, append(kongOptions(), kong.Writers(&out, &out), kong.Exit(func(int) { exited = true }))...)
	if err != nil {
		t.Fatal(err)
	}
	p.Parse(append(args, "--help"))
	if !exited {
		t.Fatalf("rsql %v --help did not exit", args)
	}
	return out.String()
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}

var flagRE = regexp.MustCompile(`(?m)^\s+(?:-[a-z], )?--([a-z][a-z-]*)`)

func flagsIn(help string) []string {
	var out []string
	for _, m := range flagRE.FindAllStringSubmatch(help, -1) {
		if m[1] != "help" {
			out = append(out, m[1])
		}
	}
	sort.Strings(out)
	return out
}

// Each subcommand's --help lists exactly the flags it uses, and flags with one name but
// different roles (-f, --format, --namesrv-addr) are described for that subcommand.
func TestSubcommandHelpShowsOwnFlags(t *testing.T) {
	want := map[string][]string{
		"shell":  sorted("broker-addr", "command", "data-dir", "file", "format", "http-addr", "namesrv", "namesrv-addr", "pg-addr", "postgres", "server", "access-key", "secret-key", "admin-password", "auth", "file-root", "idle-timeout", "max-connections", "max-expr-depth", "max-expr-nodes", "max-insert-rows", "max-message-bytes", "max-params", "max-result-bytes", "max-statement-bytes", "message-timeout", "startup-timeout", "tls-cert", "tls-key", "tls-require", "tls-self-signed"),
		"server": sorted("max-go-memory", "broker-addr", "data-dir", "http-addr", "namesrv", "namesrv-addr", "pg-addr", "postgres", "state-backend", "agg-cache-groups", "join-cache-keys", "access-key", "secret-key", "acl-file", "admin-password", "auth", "file-root", "idle-timeout", "max-connections", "max-expr-depth", "max-expr-nodes", "max-insert-rows", "max-message-bytes", "max-params", "max-result-bytes", "max-statement-bytes", "message-timeout", "startup-timeout", "tls-cert", "tls-key", "tls-require", "tls-self-signed"),
		"broker": {"access-key", "acl-file", "advertise-addr", "broker-addr", "broker-name", "client-expiry", "cluster", "data-dir", "flush", "flush-interval", "lock-expiry", "master", "namesrv", "namesrv-addr",
			"register-interval", "replication", "replication-timeout", "retention-age", "retention-bytes", "role", "secret-key", "segment-size",
			"transaction-check-interval", "transaction-check-max", "transaction-timeout"},
		"produce":        {"access-key", "file", "format", "key", "namesrv", "namesrv-addr", "rate", "secret-key"},
		"consume":        {"access-key", "format", "from-beginning", "group", "idle-exit", "key", "max", "msg-id", "namesrv", "namesrv-addr", "secret-key"},
		"version":        nil,
		"namesrv":        {"broker-expiry", "data-dir", "namesrv-addr"},
		"bench broker":   {"acl", "batch", "consumers", "flush", "messages", "namesrv", "producers", "queues", "sizes"},
		"bench pipeline": {"cpuprofile", "event-rate", "events", "keys", "only", "queues", "recovery-keys", "runs"},
	}
	for cmd, flags := range want {
		help := helpOf(t, strings.Fields(cmd)...)
		if got := flagsIn(help); !slices.Equal(got, flags) {
			t.Errorf("rsql %s --help lists flags %v, want %v\n%s", cmd, got, flags, help)
		}
	}
	described := []struct{ cmd, flag, text string }{
		{"produce", "-f, --file", "Read the records from this file"},
		{"shell", "-f, --file", "Run the SQL statements in this file"},
		{"produce", "--format", "Input format"},
		{"consume", "--format", "Output"},
		{"shell", "--namesrv-addr", "listen address"},
		{"produce", "--namesrv-addr", "to talk to"},
		{"broker", "--broker-addr", "Broker listen address"},
	}
	for _, d := range described {
		help := helpOf(t, d.cmd)
		i := strings.Index(help, d.flag)
		if i < 0 {
			t.Errorf("rsql %s --help has no %s", d.cmd, d.flag)
			continue
		}
		rest := help[i:]
		if j := strings.Index(rest[1:], "\n  -"); j >= 0 {
			rest = rest[:j+1]
		}
		if !strings.Contains(strings.Join(strings.Fields(rest), " "), d.text) {
			t.Errorf("rsql %s --help describes %s as %q, want it to say %q", d.cmd, d.flag, rest, d.text)
		}
	}
	// The top-level help names the default command and how -c/-f reach it.
	if top := helpOf(t); !strings.Contains(top, "rsql -c") || !strings.Contains(top, "shell [flags]") {
		t.Errorf("rsql --help does not explain the default command:\n%s", top)
	}
}
