package sql

import (
	"strings"
	"testing"
)

func TestFlinkFunctions(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"REGEXP_EXTRACT('a=1&channel_id=42&b', '(&|^)channel_id=([^&]*)', 2)", "VARCHAR 42"},
		{"REGEXP_EXTRACT('channel_id=7', '(&|^)channel_id=([^&]*)', 2)", "VARCHAR 7"},
		{"REGEXP_EXTRACT('x123y45', '[0-9]+')", "VARCHAR 123"},
		{"REGEXP_EXTRACT('x123y', '([a-z])([0-9]+)', 1)", "VARCHAR x"},
		{"REGEXP_EXTRACT('abc', '([0-9]+)', 1)", "NULL"},
		{"REGEXP_EXTRACT('abc', 'a|(z)', 1)", "NULL"},
		{"REGEXP_EXTRACT('abc', '(b)', qty)", "NULL"},
		{"REGEXP_EXTRACT('abc', '(b)', -1)", "NULL"},
		{"REGEXP_EXTRACT(user_id, '(')", "ERROR 2201B"},
		{"REGEXP_EXTRACT(user_id, user_id)", "VARCHAR u7"},
		{"REGEXP_EXTRACT(NULL, 'a')", "NULL"},
		{"SPLIT_INDEX('https://www.x.com/ab/cd/ef/item', '/', 3)", "VARCHAR ab"},
		{"SPLIT_INDEX('https://www.x.com/ab/cd/ef/item', '/', 0)", "VARCHAR https:"},
		{"SPLIT_INDEX('a//b', '/', 1)", "VARCHAR "},
		{"SPLIT_INDEX('a::b::c', '::', 2)", "VARCHAR c"},
		{"SPLIT_INDEX('a/b', '/', 2)", "NULL"},
		{"SPLIT_INDEX('a/b', '/', -1)", "NULL"},
		{"SPLIT_INDEX('a/b', '', 0)", "NULL"},
		{"LENGTH('cacbc') - LENGTH(REPLACE('cacbc', 'c', ''))", "INT 3"},
	}
	for _, c := range cases {
		if got := evalShow(t, c.expr); got != c.want {
			t.Errorf("%s = %s, want %s", c.expr, got, c.want)
		}
	}
}

// The literals REGEXP_EXTRACT tests before matching are in every match, and only those.
func TestRequiredLiterals(t *testing.T) {
	for _, c := range []struct{ pattern, want string }{
		{`(&|^)channel_id=([^&]*)`, "channel_id="},
		{`abc`, "abc"},
		{`(abc)x+def`, "abc,def"},
		{`a|b`, ""},
		{`(?i)abc`, ""},
		{`x?abc`, "abc"},
		{`[0-9]+`, ""},
	} {
		if got := strings.Join(requiredLiterals(c.pattern), ","); got != c.want {
			t.Errorf("requiredLiterals(%q) = %q, want %q", c.pattern, got, c.want)
		}
	}
}
