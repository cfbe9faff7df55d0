package sql

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewriteGolden = flag.Bool("rewrite", false, "rewrite the golden files in testdata/ with the current output")

// runGolden runs the cases of a golden file: each case is input text, a line "----", the
// expected output, and a line "====" before the next case.
func runGolden(t *testing.T, path string, run func(input string) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := strings.Split(string(data), "\n====\n")
	var out []string
	for i, c := range cases {
		c = strings.TrimSuffix(c, "\n====")
		if strings.TrimSpace(c) == "" {
			continue
		}
		input, want, ok := strings.Cut(c, "\n----\n")
		if !ok {
			input, want = strings.TrimSuffix(c, "\n----"), ""
		}
		got := strings.TrimRight(run(input), "\n")
		want = strings.TrimRight(want, "\n")
		if got != want && !*rewriteGolden {
			t.Errorf("%s case %d:\n%s\n--- got:\n%s\n--- want:\n%s", filepath.Base(path), i+1, input, got, want)
		}
		out = append(out, input+"\n----\n"+got)
	}
	if *rewriteGolden {
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n====\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseGolden(t *testing.T) {
	runGolden(t, "testdata/parse.txt", func(input string) string {
		sts, err := Parse(input)
		if err != nil {
			return dumpErr(err)
		}
		var b strings.Builder
		for _, st := range sts {
			b.WriteString(dumpStatement(st))
		}
		return b.String()
	})
}

func TestBindGolden(t *testing.T) {
	cat := newTestCatalog()
	runGolden(t, "testdata/bind.txt", func(input string) string {
		sts, err := Parse(input)
		if err != nil {
			return dumpErr(err)
		}
		if len(sts) != 1 {
			return "want one statement"
		}
		var sel *Select
		switch s := sts[0].(type) {
		case *Select:
			sel = s
		case *CreateStream:
			sel = s.As
		case *CreateView:
			sel = s.As
		case *Insert:
			sel = s.Query
		case *Explain:
			sel = s.Query
		}
		if sel == nil {
			return "not a query"
		}
		q, err := Bind(sel, cat)
		if err != nil {
			return dumpErr(err)
		}
		// Every bound expression must compile.
		for _, e := range append(append([]Expr{q.Where, q.Having}, q.Select...), q.GroupBy...) {
			if e == nil {
				continue
			}
			if _, err := Compile(e); err != nil {
				return "compile " + e.String() + ": " + dumpErr(err)
			}
		}
		return dumpQuery(q)
	})
}
