package filter

import (
	"errors"
	"strings"
	"testing"
)

func props(kv ...string) Getter {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// evalCase: a selector, the message's properties, and the result RocketMQ gives
// ("error": the evaluation fails, so the message does not match).
type evalCase struct {
	expr  string
	props []string
	want  string // TRUE, FALSE, NULL or error
}

var evalCases = []evalCase{
	{"a > 5 AND b = 'x'", []string{"a", "6", "b", "x"}, "TRUE"},
	{"a > 5 AND b = 'x'", []string{"a", "5", "b", "x"}, "FALSE"},
	{"a > 5 AND b = 'x'", []string{"b", "x"}, "NULL"},
	{"a > 5 AND b = 'x'", []string{"a", "1", "b", "y"}, "FALSE"},
	{"a > 5 AND b = 'x'", []string{"a", "7"}, "NULL"}, // b missing: TRUE AND NULL
	{"a > 5 OR b = 'x'", []string{"b", "x"}, "TRUE"},
	{"a > 5 OR b = 'x'", []string{"b", "y"}, "NULL"},
	{"a > 5", []string{"a", "abc"}, "error"},
	{"a > 5", []string{"a", "5.5"}, "error"}, // an int literal converts the property to int
	{"a > 5.0", []string{"a", "5.5"}, "TRUE"},
	{"a > 5.0", []string{"a", " 5.5 "}, "TRUE"}, // Double.valueOf trims
	{"a > 3000000000", []string{"a", "3000000001"}, "TRUE"},
	{"a > 5", []string{"a", "3000000001"}, "error"}, // beyond the int range
	{"a = 5", []string{"a", "05"}, "TRUE"},
	{"a = '5'", []string{"a", "05"}, "FALSE"},
	{"a <> 'x'", []string{"a", "y"}, "TRUE"},
	{"a <> 'x'", []string{}, "NULL"},
	{"a IS NULL", []string{}, "TRUE"},
	{"a IS NULL", []string{"a", ""}, "FALSE"},
	{"a IS NOT NULL", []string{"a", "1"}, "TRUE"},
	{"a BETWEEN 10 AND 20", []string{"a", "10"}, "TRUE"},
	{"a BETWEEN 10 AND 20", []string{"a", "21"}, "FALSE"},
	{"a NOT BETWEEN 10 AND 20", []string{"a", "21"}, "TRUE"},
	{"a NOT BETWEEN 10 AND 20", []string{"a", "15"}, "FALSE"},
	{"a BETWEEN -5 AND 5", []string{"a", "-5"}, "TRUE"},
	{"TAGS IN ('A', 'C')", []string{"TAGS", "C"}, "TRUE"},
	{"TAGS IN ('A', 'C')", []string{"TAGS", "B"}, "FALSE"},
	{"TAGS NOT IN ('A', 'C')", []string{"TAGS", "B"}, "TRUE"},
	{"TAGS NOT IN ('A', 'C')", []string{}, "NULL"},
	{"NOT (a = 1)", []string{"a", "1"}, "FALSE"},
	{"NOT (a = 1)", []string{}, "NULL"},
	{"NOT a = 1", []string{"a", "1"}, "FALSE"}, // (NOT a) = 1: a boolean is "less" than a number
	{"a", []string{"a", "true"}, "FALSE"},      // a property is a string, never a boolean
	{"a", []string{}, "NULL"},
	{"TRUE", nil, "TRUE"},
	{"NULL", nil, "NULL"},
	{"a = TRUE", []string{"a", "TRUE"}, "TRUE"}, // string converted to boolean
	{"a = TRUE", []string{"a", "yes"}, "FALSE"},
	{"b CONTAINS 'ell'", []string{"b", "hello"}, "TRUE"},
	{"b NOT CONTAINS 'ell'", []string{"b", "hello"}, "FALSE"},
	{"b CONTAINS 'x'", []string{}, "FALSE"},     // FALSE, not NULL
	{"b NOT CONTAINS 'x'", []string{}, "FALSE"}, // both FALSE on a missing property
	{"b STARTSWITH 'he' AND b ENDSWITH 'lo'", []string{"b", "hello"}, "TRUE"},
	{"b NOT STARTSWITH 'x'", []string{"b", "hello"}, "TRUE"},
	{"b CONTAINS ''", []string{"b", "hello"}, "FALSE"},
	{"a < b", []string{"a", "2", "b", "10"}, "TRUE"}, // two strings compare as numbers
	{"a < b", []string{"a", "x", "b", "10"}, "error"},
	{"a = b", []string{"a", "x", "b", "x"}, "TRUE"},
	{"-a > 0", []string{"a", "1"}, "NULL"}, // negating a string is NULL
	{"a > -1", []string{"a", "0"}, "TRUE"},
	{"a > - - 1", []string{"a", "0"}, "FALSE"},
	{"a = 1.0", []string{"a", "1"}, "TRUE"},
	{"a = 1", []string{"a", "1.0"}, "error"},
	{"a > 1E2", []string{"a", "101"}, "TRUE"},
	{"a > .5", []string{"a", "0.6"}, "TRUE"},
	{"a > 5L", []string{"a", "6"}, "TRUE"},
	{"a = 5 OR b = 'x'", []string{"a", "abc", "b", "x"}, "error"}, // RocketMQ: the error wins
	{"b = 'x' OR a = 5", []string{"a", "abc", "b", "x"}, "TRUE"},  // short-circuit
	{"b = 'x' AND a = 5", []string{"a", "abc", "b", "y"}, "FALSE"},
	{"a = 'it''s'", []string{"a", "it's"}, "TRUE"},
	{"a = 'x' -- trailing comment", []string{"a", "x"}, "TRUE"},
	{"/* lead */ a = 'x'", []string{"a", "x"}, "TRUE"},
	{"a > 1 and b = 'x' Or c is null", []string{"a", "0", "b", "x"}, "TRUE"},
	{"$x_1 = 'v'", []string{"$x_1", "v"}, "TRUE"},
	{"a = NaNx", []string{"a", "1", "NaNx", "1"}, "TRUE"},
	{"a > 1.0", []string{"a", "NaN"}, "TRUE"}, // Double.compare puts NaN above everything
	{"a > 1.0", []string{"a", "nan"}, "error"},
	{"a > 1.0", []string{"a", "2d"}, "TRUE"},
	{"a = 0.0", []string{"a", "-0.0"}, "FALSE"}, // Double.compare: -0.0 < 0.0
	{"(a = 1) = (b = 1)", []string{"a", "1", "b", "2"}, "FALSE"},
	{"(a = 1) = 'true'", []string{"a", "1"}, "error"}, // Boolean vs String fails in RocketMQ
	{"1 = TRUE", nil, "FALSE"},
}

func TestEvaluate(t *testing.T) {
	for _, c := range evalCases {
		e, err := Parse(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		res, err := e.Evaluate(props(c.props...))
		got := map[Result]string{True: "TRUE", False: "FALSE", Unknown: "NULL"}[res]
		if err != nil {
			if !errors.Is(err, errEval) {
				t.Fatalf("%s: error %v is not an evaluation error", c.expr, err)
			}
			got = "error"
		}
		if got != c.want {
			t.Errorf("%s with %v: got %s, want %s", c.expr, c.props, got, c.want)
		}
		if e.Match(props(c.props...)) != (c.want == "TRUE") {
			t.Errorf("%s with %v: Match disagrees with %s", c.expr, c.props, c.want)
		}
	}
}

// TestSyntaxErrors: what RocketMQ refuses when it compiles a selector, with where.
func TestSyntaxErrors(t *testing.T) {
	cases := []struct {
		expr string
		pos  int // 1-based character in the message
		msg  string
	}{
		{"", 1, "unexpected end of input"},
		{"a >", 4, "unexpected end of input"},
		{"a > 'x'", 5, "cannot be compared"},
		{"a > TRUE", 5, "cannot be compared"},
		{"a > (b = 1)", 5, "cannot be compared"},
		{"a = NULL", 5, "use IS NULL"},
		{"NULL = a", 1, "use IS NULL"},
		{"TRUE = 1", 1, "cannot be compared with"},
		{"5", 1, "will not result in a boolean value"},
		{"'x'", 1, "will not result in a boolean value"},
		{"a AND 5", 7, "will not result in a boolean value"},
		{"NOT 5", 5, "will not result in a boolean value"},
		{"a IN ()", 7, "expected a string literal"},
		{"a IN (1)", 7, "expected a string literal"},
		{"5 IN ('x')", 1, "IN needs a property"},
		{"a BETWEEN 5 AND 1", 11, "lower bound is above"},
		{"a BETWEEN NULL AND 1", 11, "must not be NULL"},
		{"a BETWEEN 1 OR 2", 13, "expected AND"},
		{"a == 1", 4, "unexpected"},
		{"a != 1", 3, "unexpected character"},
		{"a = 'x", 5, "unterminated string"},
		{"a = 007", 5, "leading zeros"},
		{"a = 1x", 6, "malformed number"},
		{"a = 99999999999999999999", 5, "out of the long range"},
		{"a = 1e999", 5, "out of the double range"},
		{"a LIKE 'x'", 3, "unexpected"},
		{"a IS 5", 6, "expected NULL"},
		{"a NOT b", 3, "unexpected"},
		{"(a = 1", 7, `expected ")"`},
		{"a = 1)", 6, "unexpected"},
		{"/* open", 1, "unterminated /* comment"},
		{"a = \x01", 5, "unexpected byte 0x01"},
		{"a = 'x' CONTAINS 5", 18, "expected a string literal"},
		{strings.Repeat("(", 200) + "a" + strings.Repeat(")", 200), 101, "nested more than"},
	}
	for _, c := range cases {
		_, err := Parse(c.expr)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("%q: got %v, want a syntax error", c.expr, err)
		}
		if se.Pos+1 != c.pos || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%q: got %v, want character %d and %q", c.expr, err, c.pos, c.msg)
		}
	}
}

// TestStringRoundTrip: the canonical form parses back to itself and evaluates the same.
func TestStringRoundTrip(t *testing.T) {
	for _, c := range evalCases {
		e, err := Parse(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := Parse(e.String())
		if err != nil {
			t.Fatalf("%s -> %s: %v", c.expr, e, err)
		}
		if e2.String() != e.String() {
			t.Fatalf("%s -> %s -> %s", c.expr, e, e2)
		}
		r1, err1 := e.Evaluate(props(c.props...))
		r2, err2 := e2.Evaluate(props(c.props...))
		if r1 != r2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("%s and %s evaluate differently", e, e2)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, c := range evalCases {
		f.Add(c.expr)
	}
	f.Add("a BETWEEN 1 AND 2 OR NOT (b IN ('x','y')) AND c IS NOT NULL")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pos < 0 || se.Pos > len(s) {
				t.Fatalf("%q: error %v is not a syntax error within the input", s, err)
			}
			return
		}
		// The canonical form is a fixed point, and evaluation never panics.
		e2, err := Parse(e.String())
		if err != nil || e2.String() != e.String() {
			t.Fatalf("%q -> %q does not parse back the same: %v", s, e.String(), err)
		}
		for _, p := range []Getter{props(), props("a", "1", "b", "x", "c", "-2.5", "TAGS", "A"), props("a", "abc", "b", "")} {
			r, err := e.Evaluate(p)
			if err != nil && !errors.Is(err, errEval) {
				t.Fatalf("%q: evaluation error %v is not errEval", s, err)
			}
			if e.Match(p) != (err == nil && r == True) {
				t.Fatalf("%q: Match and Evaluate disagree", s)
			}
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	e, err := Parse("a > 5 AND b = 'x' OR TAGS IN ('A', 'C')")
	if err != nil {
		b.Fatal(err)
	}
	get := props("a", "17", "b", "y", "TAGS", "C")
	for i := 0; i < b.N; i++ {
		if !e.Match(get) {
			b.Fatal("no match")
		}
	}
}
