package nexmark

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

//go:embed ddl.sql q*.sql s*.sql
var files embed.FS

// Query is one Nexmark query: its name (q0 ...) and SQL text.
type Query struct {
	Name string
	SQL  string
}

// Queries returns the embedded Nexmark queries in numeric order.
func Queries() []Query { return embedded("q") }

// StateQueries returns rsql's own queries over the Nexmark streams that hold state by key
// at scale (s1 ...): benchmarks of state, not part of the suite ("all").
func StateQueries() []Query { return embedded("s") }

// embedded returns the embedded queries whose names start with prefix, in numeric order.
func embedded(prefix string) []Query {
	names, err := files.ReadDir(".")
	if err != nil {
		panic(err) // the embedded directory is always readable
	}
	var out []Query
	for _, e := range names {
		n := e.Name()
		if !strings.HasPrefix(n, prefix) || !strings.HasSuffix(n, ".sql") {
			continue
		}
		b, err := files.ReadFile(n)
		if err != nil {
			panic(err)
		}
		out = append(out, Query{Name: strings.TrimSuffix(n, ".sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return queryNum(out[i].Name) < queryNum(out[j].Name) })
	return out
}

func queryNum(name string) int {
	n, err := strconv.Atoi(name[1:])
	if err != nil {
		return 1 << 30
	}
	return n
}

// Select returns the queries named in list ("q0,q1" or "all"; names may omit the q).
func Select(list string) ([]Query, error) {
	all := Queries()
	if strings.TrimSpace(list) == "" || strings.EqualFold(strings.TrimSpace(list), "all") {
		return all, nil
	}
	all = append(all, StateQueries()...)
	var out []Query
	for _, name := range strings.Split(list, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if !strings.HasPrefix(name, "q") && !strings.HasPrefix(name, "s") {
			name = "q" + name
		}
		found := false
		for _, q := range all {
			if q.Name == name {
				out = append(out, q)
				found = true
				break
			}
		}
		if !found {
			names := make([]string, len(all))
			for i, q := range all {
				names[i] = q.Name
			}
			return nil, fmt.Errorf("%w: no query %s (there are %s; the others are not expressible yet, see bench/nexmark/README.md)",
				ErrUnknownQuery, name, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// DDL returns the CREATE STREAM statements of the Nexmark streams with the run's options.
func DDL(cfg Config) string {
	b, err := files.ReadFile("ddl.sql")
	if err != nil {
		panic(err)
	}
	cfg.defaults()
	format := cfg.Format
	if format == "rows" {
		format = "nexmark" // the stream's format; the rows bypass it
	}
	opts := fmt.Sprintf("events = %d, splits = %d, seed = %d, event_rate = %d, format = '%s'",
		cfg.Events, cfg.Splits, cfg.Seed, cfg.EventRate, format)
	if cfg.BaseTime != 0 {
		opts += fmt.Sprintf(", base_time = %d", cfg.BaseTime)
	}
	if cfg.Rate > 0 {
		opts += fmt.Sprintf(", rate = %d", cfg.Rate)
	}
	path := cfg.SideInputPath
	if path == "" {
		path = SideInputFile // relative: no file unless a query reads it
	}
	ddl := strings.ReplaceAll(string(b), "{options}", opts)
	return strings.ReplaceAll(ddl, "{side_input_path}", strings.ReplaceAll(path, "'", "''"))
}

// SideInputRows is the number of rows of q13's side input: keys 0 to SideInputRows-1.
const SideInputRows = 10_000

// SideInputFile is the side input's file name in the directory WriteSideInput writes to.
const SideInputFile = "side_input.csv"

// WriteSideInput writes q13's side input into dir as CSV lines "key,value", each key from 0
// to SideInputRows-1 with its decimal text as the value (nexmark-flink's side_input.txt),
// and returns the file's path.
func WriteSideInput(dir string) (string, error) {
	var b []byte
	for k := 0; k < SideInputRows; k++ {
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, '\n')
	}
	path := filepath.Join(dir, SideInputFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("nexmark: side input: %w", err)
	}
	return path, nil
}
