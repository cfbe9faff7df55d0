package sql

import (
	"slices"
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
		{"REGEXP_EXTRACT('abc', '(b)', NULL)", "NULL"},
		{"REGEXP_EXTRACT(user_id, 'u(7)', 1)", "VARCHAR 7"},
		{"REGEXP_EXTRACT(user_id, '(x)?u', 1)", "NULL"},
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

// The lead skip finds what the expression finds on the whole text: patterns with and
// without an anchor, text starts, bounded and unbounded leads, over texts where the
// anchor comes early, late, twice or not at all.
func TestRegexpLeadSkipMatchesRegexp(t *testing.T) {
	patterns := []string{
		`(&|^)channel_id=([^&]*)`, `(?:^|[?&])id=(\d+)`, `ab?c=(x*)`, `.{0,3}key=(.)`,
		`(^)k=(.*)$`, `[a-c]{2}k=`, `(?i)K=(.)`, `x*k=(.)`, `\bk=(.)`, `(?m)^k=(.)`,
		`(a|bb|ccc)k=(\w+)`, `é?k=(.)`, `(?s).?k=(.)`, `k=`, `(k)=(.)`,
	}
	texts := []string{"", "k=1", "a&k=2", "xk=3&k=4", "channel_id=5", "q&channel_id=6&z",
		"zzzzzzzzzzzzzzzzchannel_id=7", "ab&channel_id=&channel_id=8", "?id=9&id=10", "abc=xx",
		"ac=", "ccck=z", "bbk=y", "ak=w", "éék=v", "\xffk=u", "\nk=t", "K=s", "xxxk=r", "1234key=q",
		"key=p", "k=\nk=o", "aak=n&bbk=m"}
	for _, p := range patterns {
		x, err := newRegexpExtractor(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range texts {
			want := x.re.FindStringSubmatchIndex(s)
			got, at := x.find(s, new([maxSimpleCaps]int))
			if got != nil {
				got = slices.Clone(got)
				for i := range got {
					if got[i] >= 0 {
						got[i] += at
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("pattern %q text %q: %v, want %v", p, s, got, want)
			}
		}
	}
	// The skip applies where it should (and so the test above exercises it).
	for p, skips := range map[string]bool{`(&|^)channel_id=([^&]*)`: true, `x*k=(.)`: false, `\bk=(.)`: false, `(?m)^k=(.)`: false, `.{0,3}key=(.)`: true} {
		x, _ := newRegexpExtractor(p)
		if (x.from != nil) != skips {
			t.Errorf("pattern %q: skip %v, want %v", p, x.from != nil, skips)
		}
	}
}

func FuzzRegexpLeadSkip(f *testing.F) {
	f.Add(`(&|^)channel_id=([^&]*)`, "a&channel_id=7")
	f.Add(`.{0,3}key=(.)`, "1234key=q")
	f.Fuzz(func(t *testing.T, p, s string) {
		x, err := newRegexpExtractor(p)
		if err != nil {
			return
		}
		want := x.re.FindStringSubmatchIndex(s)
		got, at := x.find(s, new([maxSimpleCaps]int))
		for i := range got {
			if got[i] >= 0 {
				got[i] += at
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pattern %q text %q: %v, want %v", p, s, got, want)
		}
	})
}

// A pattern from a column is compiled when it differs from the row before's, and each
// row is matched with its own: the compiled pattern kept for repeats is the last row's.
func TestRegexpExtractPatternPerRow(t *testing.T) {
	sts, err := Parse("SELECT REGEXP_EXTRACT('a1 b2 c', user_id, 1) FROM orders")
	if err != nil {
		t.Fatal(err)
	}
	q, err := Bind(sts[0].(*Select), newTestCatalog())
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(q.Select[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ pattern, want string }{
		{"a([0-9])", "VARCHAR 1"}, {"a([0-9])", "VARCHAR 1"}, {"b([0-9])", "VARCHAR 2"},
		{"(", "ERROR"}, {"b([0-9])", "VARCHAR 2"}, {"c([0-9])", "NULL"}, {"a([0-9])", "VARCHAR 1"},
	} {
		row := slices.Clone(evalRow)
		row[1] = Varchar(c.pattern)
		v := f(row)
		got := show(v)
		if _, _, isErr := v.Err(); isErr {
			got = "ERROR"
		}
		if got != c.want {
			t.Errorf("row %d, pattern %q: %s, want %s", i, c.pattern, got, c.want)
		}
	}
}
