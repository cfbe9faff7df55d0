package main

import (
	"context"
	"errors"
	"io"
	"sort"
	"strings"
	"time"
	"unicode"

	"rsql/server"
)

// shellKeywords are the words the shell completes besides catalog names.
var shellKeywords = []string{
	"ALL", "AND", "AS", "ASC", "AVG", "BETWEEN", "BIGINT", "BOOLEAN", "BY", "CANCEL", "CASE", "CAST",
	"CHANGES", "COALESCE", "COUNT", "CREATE", "DECIMAL", "DESC", "DESCRIBE", "DISTINCT", "DOUBLE", "DROP",
	"ELSE", "EMIT", "END", "EXISTS", "EXPLAIN", "FALSE", "FINAL", "FROM", "GROUP", "HAVING", "HOP", "IF",
	"IN", "INSERT", "INT", "INTERVAL", "INTO", "IS", "JOB", "JOBS", "JOIN", "JSON", "LIKE", "LIMIT", "MAX",
	"MIN", "NOT", "NULL", "ON", "OR", "ORDER", "PAUSE", "RESUME", "SELECT", "SESSION", "SET", "SHOW",
	"STREAM", "STREAMS", "SUM", "TABLE", "THEN", "TIMESTAMP", "TRUE", "TUMBLE", "VALUES", "VARCHAR",
	"VIEW", "VIEWS", "WATERMARK", "WHEN", "WHERE", "WINDOW_END", "WINDOW_START", "WITH",
}

// completer is the shell's tab completion: SQL keywords and the names of the live catalog's
// streams, views and jobs. Keywords follow the case the user typed.
type completer struct {
	names func(ctx context.Context) []string
}

// Do implements readline.AutoCompleter: the candidates' remaining characters for the word
// that ends at pos.
func (c *completer) Do(line []rune, pos int) ([][]rune, int) {
	if pos > len(line) {
		pos = len(line)
	}
	start := pos
	for start > 0 && isWordRune(line[start-1]) {
		start--
	}
	word := string(line[start:pos])
	if word == "" {
		return nil, 0
	}
	lower := strings.ToLower(word)
	upper := strings.ToUpper(word) == word
	seen := map[string]bool{}
	var cands []string
	add := func(s string) {
		if strings.HasPrefix(strings.ToLower(s), lower) && len(s) > len(word) && !seen[s] {
			seen[s] = true
			cands = append(cands, s)
		}
	}
	if c.names != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		for _, n := range c.names(ctx) {
			add(n)
		}
		cancel()
	}
	for _, k := range shellKeywords {
		if !upper {
			k = strings.ToLower(k)
		}
		add(k)
	}
	sort.Strings(cands)
	out := make([][]rune, len(cands))
	n := len([]rune(word))
	for i, s := range cands {
		r := []rune(s)
		out[i] = append(r[n:], ' ')
		if len(cands) > 1 {
			out[i] = r[n:]
		}
	}
	return out, n
}

func isWordRune(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// firstColumn reads rows and returns their first column's non-null texts.
func firstColumn(ctx context.Context, rows server.Rows) []string {
	if rows == nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for {
		row, err := rows.Next(ctx)
		if errors.Is(err, io.EOF) || err != nil {
			return out
		}
		if len(row) > 0 && !row[0].IsNull() {
			out = append(out, row[0].String())
		}
	}
}
