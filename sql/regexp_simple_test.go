package sql

import (
	"math/rand"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// simplePatterns are patterns of simpleRE's form (want true) and patterns outside it.
var simplePatterns = map[string]bool{
	`(&|^)channel_id=([^&]*)`: true, `(?:^|[?&])id=(\d+)`: true, `ab?c=(x*)`: true,
	`.{0,3}key=(.)`: false, `[a-c]{2}k=`: true, `(^)k=(.*)$`: true, `(a|bb|ccc)k=(\w+)`: true,
	`é?k=(.)`: true, `k=`: true, `(k)=(.)`: true, `x*k=(.)`: true, `(ab)?c`: true,
	`(a|ab)(c|bcd)(d*)`: true, `a(b|)c`: true, `^$`: true, `[0-9]+`: true, `x+$`: true,
	`(?:ab|b)+`: false, `(?i)K=(.)`: false, `\bk=(.)`: false, `(?m)^k=(.)`: false,
	`a*?b`: false, `a*a`: false, `[a-z]*[0-9a]`: false, `(ab)*`: false, `x?x`: false,
	`(a*)(b|a)`: false, "\uFFFD": false, `(?s).?k=(.)`: false, `a{2,}b`: true, `[^a]+a`: true,
	`((a|ab)(c|bcd))(d*)`: true, `(a|b)x?(c|cd)(e|)d?`: true, `(x(a|(b|(c|d)k)))=`: true, `(?:(?:(?:(?:(?:(?:(?:(?:(?:a|b)c|d)e|f)g|h)i|j)k|l)m|n)o|p)q|r`: false,
}

// The simple form finds what Go's regexp finds, offsets of every group included, on texts
// made of the patterns' own runes (so that matches, near misses and invalid bytes occur).
func TestSimpleRegexpMatchesRegexp(t *testing.T) {
	alphabet := []string{"a", "b", "c", "k", "=", "&", "?", "x", "1", "é", "\xff", "\n", "id", "channel_id=", "key", "bb", "ccc", "d", ""}
	r := rand.New(rand.NewSource(1))
	for p, want := range simplePatterns {
		x := newSimpleRE(p)
		if (x != nil) != want {
			t.Errorf("pattern %q: simple %v, want %v", p, x != nil, want)
		}
		if x == nil {
			continue
		}
		re := regexp.MustCompile(p)
		for n := 0; n < 3000; n++ {
			var s string
			for l := r.Intn(8); l > 0; l-- {
				s += alphabet[r.Intn(len(alphabet))]
			}
			want := re.FindStringSubmatchIndex(s)
			caps := make([]int, x.ncap)
			var got []int
			found, ok := x.find(s, 0, caps)
			if !ok {
				t.Fatalf("pattern %q text %q: over the step budget", p, s)
			}
			if found {
				got = caps
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pattern %q text %q: %v, want %v", p, s, got, want)
			}
		}
	}
}

// A search that would take time quadratic in the text (a repetition scanning far from
// every start) stops at its step budget, and REGEXP_EXTRACT answers through Go's regexp.
func TestSimpleRegexpStepBudget(t *testing.T) {
	x, _ := newRegexpExtractor(`x*(yz)`)
	if x.simple == nil {
		t.Fatal("x*(yz) is not of the simple form")
	}
	s := strings.Repeat("x", 5000) + "yyz"
	if _, ok := x.simple.find(s, 0, make([]int, x.simple.ncap)); ok {
		t.Fatal("a quadratic search finished within the budget")
	}
	if v := x.extract(s, 1); v.S != "yz" {
		t.Fatalf("extract = %v, want yz", v)
	}
	if _, ok := x.simple.find("xxyz", 0, make([]int, x.simple.ncap)); !ok {
		t.Fatal("a short search went over the budget")
	}
}

func FuzzSimpleRegexp(f *testing.F) {
	for p := range simplePatterns {
		f.Add(p, "q&channel_id=6&z")
	}
	f.Add(`(a|ab)(c|bcd)(d*)`, "abcd")
	f.Fuzz(func(t *testing.T, p, s string) {
		x := newSimpleRE(p)
		if x == nil {
			return
		}
		re, err := regexp.Compile(p)
		if err != nil {
			t.Fatalf("pattern %q: simple form of a pattern Go refuses: %v", p, err)
		}
		want := re.FindStringSubmatchIndex(s)
		caps := make([]int, x.ncap)
		var got []int
		found, ok := x.find(s, 0, caps)
		if !ok {
			return // over the step budget: Go's regexp answers
		}
		if found {
			got = caps
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pattern %q text %q: %v, want %v", p, s, got, want)
		}
	})
}

func BenchmarkRegexpExtractURL(b *testing.B) {
	s := "https://www.nexmark.com/abc/d_fg/hij/item.htm?query=1&channel_id=1234567"
	for _, c := range []struct {
		name   string
		simple bool
	}{{"simple", true}, {"regexp", false}} {
		b.Run(c.name, func(b *testing.B) {
			x, _ := newRegexpExtractor(`(&|^)channel_id=([^&]*)`)
			if !c.simple {
				x.simple = nil
			}
			for i := 0; i < b.N; i++ {
				if v := x.extract(s, 2); v.S != "1234567" {
					b.Fatal(v)
				}
			}
		})
	}
}
