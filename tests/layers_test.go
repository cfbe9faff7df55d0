package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// layers is the import rule of docs/architecture.md ("Import rules"): for each package of the
// module, the rsql packages it may import. A package missing from this table fails the test,
// so a new package is placed in the layering (and in docs/architecture.md) when it is made.
// "*" allows any package except those listed after it with a leading "!".
var layers = map[string][]string{
	"sql":                          {},
	"udf":                          {"sql"},
	"connectors/options":           {},
	"planner":                      {"sql", "connectors/options"},
	"state":                        {},
	"internal/listen":              {},
	"internal/durable":             {},
	"internal/durable/durabletest": {"internal/durable"},
	"internal/pgtest":              {},
	"internal/wat":                 {},
	"broker/remoting":              {},
	"broker/filter":                {},
	"broker/namesrv":               {"broker/remoting", "internal/durable", "internal/listen"},
	"broker":                       {"broker/remoting", "broker/filter", "broker/namesrv", "internal/durable", "internal/listen"},
	"connectors":                   {"sql", "connectors/options", "broker", "broker/remoting"},
	"exec":                         {"sql", "udf", "planner", "state", "connectors", "connectors/options"},
	"server/auth":                  {},
	"server/pgwire":                {"sql", "server/auth", "internal/listen"},
	"server":                       {"*", "!cmd/rsql", "!bench/nexmark", "!tests"},
	"bench/nexmark":                {"sql", "planner", "state", "exec", "connectors", "connectors/options", "broker"},
	"cmd/rsql":                     {"*", "!tests"},
	"tests":                        {"*"},
}

// serverRule is the rule of the packages under server/: the engine imports them and they never
// import it back (docs/architecture.md, "server/ packages").
func serverRule(pkg string) ([]string, bool) {
	if strings.HasPrefix(pkg, "server/") {
		return []string{"*", "!server", "!cmd/rsql", "!bench/nexmark", "!tests"}, true
	}
	return nil, false
}

func allowed(rule []string, imp string) bool {
	all := false
	for _, r := range rule {
		switch {
		case r == "*":
			all = true
		case strings.HasPrefix(r, "!") && r[1:] == imp:
			return false
		case r == imp:
			return true
		}
	}
	return all
}

// The layering holds: no package imports one above it, the planner reads options without the
// connectors' clients, the front ends under server/ never import the engine, and the broker
// never imports the engine's packages.
func TestImportLayers(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = repoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], "rsql/")
		rule, ok := layers[pkg]
		if !ok {
			rule, ok = serverRule(pkg)
		}
		if !ok {
			t.Errorf("package %s is not placed in the layering: add it to docs/architecture.md and to this test's table", pkg)
			continue
		}
		seen++
		if pkg != "tests" && !strings.Contains(string(doc), "`"+pkg+"`") {
			t.Errorf("package %s is not named in docs/architecture.md", pkg)
		}
		var bad []string
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, "rsql/") {
				continue
			}
			if imp = strings.TrimPrefix(imp, "rsql/"); !allowed(rule, imp) {
				bad = append(bad, imp)
			}
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			t.Errorf("%s imports %s, which the layering forbids (docs/architecture.md, Import rules)", pkg, strings.Join(bad, ", "))
		}
	}
	if seen < 15 {
		t.Fatalf("go list named only %d packages of the module", seen)
	}
	// The rule is able to refuse: an upward import is caught.
	if allowed(layers["planner"], "connectors") || allowed(layers["sql"], "planner") || !allowed(layers["server"], "exec") {
		t.Fatal("the layer table does not refuse what it should")
	}
}
