package sql

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// noRelations is a catalog without streams, for constant queries.
type noRelations struct{}

func (noRelations) Relation(string) (*Relation, bool) { return nil, false }

func sumOfOnes(n int) string { return "SELECT 1" + strings.Repeat("+1", n-1) }

func wantCode(t *testing.T, what string, err error, code, msgPart string) {
	t.Helper()
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: got %v, want a %s *Error", what, err, code)
	}
	if se.Code != code || !strings.Contains(se.Message, msgPart) {
		t.Fatalf("%s: got %s %q, want %s containing %q", what, se.Code, se.Message, code, msgPart)
	}
}

// Each limit fails the statement with its SQLSTATE, and a statement just inside the limits
// parses and binds.
func TestLimitsRefuseBeforeBinding(t *testing.T) {
	// The 1 M-term sum (2 MB) is refused for its tokens, a 2 MB string for its bytes, both
	// by a scan that keeps no token.
	_, err := Parse(sumOfOnes(1_000_000))
	wantCode(t, "1 M terms", err, CodeTooComplex, "more than 200000 tokens (twice the limit of 100000 expression nodes)")
	_, err = Parse("SELECT 1; SELECT '" + strings.Repeat("x", 2<<20) + "'")
	wantCode(t, "a 2 MB string", err, CodeTooComplex, "longer than the limit of 1048576 bytes")
	if se := err.(*Error); se.Line != 1 || se.Column != 11 {
		t.Errorf("the error points at %d:%d, want the second statement at 1:11", se.Line, se.Column)
	}

	noSize := Limits{MaxStatementBytes: -1}
	_, err = ParseLimited(sumOfOnes(90_000), nil, noSize)
	wantCode(t, "90000 terms without a size limit", err, CodeTooComplex, "nest more than 1000 levels")

	_, err = Parse("SELECT " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000))
	wantCode(t, "5000 parentheses", err, CodeTooComplex, "nest more than 1000 levels")

	_, err = Parse("SELECT " + strings.Repeat("~", 3000) + "1")
	wantCode(t, "3000 unary operators", err, CodeTooComplex, "nest more than 1000 levels")

	in := make([]string, 100_001)
	for i := range in {
		in[i] = "1"
	}
	_, err = Parse("SELECT 1 IN (" + strings.Join(in, ",") + ")")
	wantCode(t, "an IN list of 100001", err, CodeTooComplex, "more than 200000 tokens (twice the limit of 100000 expression nodes)")
	_, err = Parse("SELECT " + strings.Join(in[:60_000], ","))
	wantCode(t, "60000 columns", err, CodeTooComplex, "more than 100000 expression nodes")

	// INSERT: too many rows, and a deep value.
	rows := strings.Repeat("(1),", 10_000) + "(1)"
	_, err = Parse("INSERT INTO s VALUES " + rows)
	wantCode(t, "10001 VALUES rows", err, CodeProgramLimit, "10001 VALUES rows")
	_, err = Parse("INSERT INTO s VALUES (1" + strings.Repeat("+1", 2000) + ")")
	wantCode(t, "a deep VALUES expression", err, CodeTooComplex, "nest more than 1000")

	// Inside EXPLAIN and CREATE STREAM ... AS the same limits hold.
	_, err = Parse("EXPLAIN " + sumOfOnes(2000))
	wantCode(t, "EXPLAIN", err, CodeTooComplex, "nest more than")
	_, err = Parse("CREATE STREAM o AS " + sumOfOnes(2000) + " FROM s")
	wantCode(t, "CREATE STREAM AS", err, CodeTooComplex, "nest more than")

	// The size limit is per statement: many small statements pass.
	many := strings.Repeat("SHOW STREAMS;", 100_000)
	if st, err := Parse(many); err != nil || len(st) != 100_000 {
		t.Fatalf("100000 small statements (%d bytes): %d statements, %v", len(many), len(st), err)
	}

	// Just inside: 990 terms bind to 990.
	stmts, err := Parse(sumOfOnes(990) + " AS n")
	if err != nil {
		t.Fatal(err)
	}
	q, err := Bind(stmts[0].(*Select), noRelations{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(q.Select[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := f(nil); got.I != 990 {
		t.Fatalf("990 ones add up to %v", got)
	}
	// Limits can be raised.
	if _, err := ParseLimited(sumOfOnes(5000), nil, Limits{MaxExprDepth: 10_000}); err != nil {
		t.Fatalf("5000 terms under a depth limit of 10000: %v", err)
	}
}

// Parsing and binding n-term sums with the tree limits off: the time per term stays flat
// as n grows (binding is linear in the expression size).
//
//	go test ./sql -run '^$' -bench ParseBindTerms -benchtime 3x
func BenchmarkParseBindTerms(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		text := sumOfOnes(n)
		// The binder recurses once per level: without the tree limit, only what the stack
		// holds can be measured.
		lim := Limits{MaxStatementBytes: -1, MaxExprDepth: -1, MaxExprNodes: -1}
		b.Run(fmt.Sprintf("terms=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				stmts, err := ParseLimited(text, nil, lim)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Bind(stmts[0].(*Select), noRelations{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/term")
		})
	}
}

// The refusal of a 1 M-term statement costs what reading its length costs.
//
//	go test ./sql -run '^$' -bench RefuseHugeStatement -benchmem
func BenchmarkRefuseHugeStatement(b *testing.B) {
	text := sumOfOnes(1_000_000)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(text); err == nil {
			b.Fatal("accepted")
		}
	}
}
