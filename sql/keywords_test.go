package sql

import (
	"bufio"
	"fmt"
	"go/format"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
)

type pgKeyword struct {
	word      string
	cat       byte
	bareLabel bool
}

// readPGKeywords reads testdata/pg_keywords.txt, PostgreSQL 15's pg_get_keywords().
func readPGKeywords(t *testing.T) []pgKeyword {
	t.Helper()
	f, err := os.Open("testdata/pg_keywords.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []pgKeyword
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 {
			t.Fatalf("bad line %q", line)
		}
		out = append(out, pgKeyword{fs[0], fs[1][0], fs[2] == "t"})
	}
	if len(out) < 400 {
		t.Fatalf("only %d keywords", len(out))
	}
	return out
}

// bindOne parses and binds one query over a stream s(a BIGINT, <col> BIGINT).
func bindOne(text, col string) (*Query, error) {
	cat := testCatalog{"s": &Relation{Name: "s", EventTime: -1, Schema: Schema{{"a", TypeBigInt}, {col, TypeBigInt}}}}
	sts, err := Parse(text)
	if err != nil {
		return nil, err
	}
	sel, ok := sts[0].(*Select)
	if !ok {
		return nil, fmt.Errorf("not a query: %T", sts[0])
	}
	return Bind(sel, cat)
}

// TestKeywordsAsNames: every word PostgreSQL 15 accepts as a column name (its unreserved
// and column-name keywords) works unquoted as a column name, qualifier and alias, and
// every keyword works as an alias after AS, as in PostgreSQL.
func TestKeywordsAsNames(t *testing.T) {
	kws := readPGKeywords(t)
	if len(kws) != len(pgKeywords) {
		t.Fatalf("pgkeywords.go has %d words, testdata/pg_keywords.txt %d", len(pgKeywords), len(kws))
	}
	for _, k := range kws {
		if pgKeywords[k.word] != k.cat {
			t.Fatalf("pgkeywords.go: %s is %q, testdata says %q", k.word, pgKeywords[k.word], k.cat)
		}
	}
	// Words the MySQL grammar reserves that are no PostgreSQL keyword (rank, lead, div)
	// are names in PostgreSQL like any other.
	for _, k := range parser.Keywords {
		w := strings.ToLower(k.Word)
		if _, ok := pgKeywords[w]; !ok && isIdentStart(w[0]) {
			kws = append(kws, pgKeyword{word: w, cat: 'U'})
		}
	}
	for _, k := range kws {
		w := k.word
		// As an alias after AS: every keyword (PostgreSQL's ColLabel).
		q, err := bindOne("SELECT a AS "+w+" FROM s", "b")
		if err != nil {
			t.Errorf("SELECT a AS %s FROM s: %v", w, err)
		} else if q.Names[0] != w {
			t.Errorf("SELECT a AS %s FROM s: column named %q", w, q.Names[0])
		}
		if k.cat != 'U' && k.cat != 'C' {
			continue
		}
		// A stream's column.
		sts, err := Parse("CREATE STREAM s (a BIGINT, " + w + " BIGINT) WITH (connector = 'file')")
		if err != nil {
			t.Errorf("CREATE STREAM with column %s: %v", w, err)
		} else if cs := sts[0].(*CreateStream); cs.Columns[1].Name != w {
			t.Errorf("CREATE STREAM with column %s: named %q", w, cs.Columns[1].Name)
		}
		shapes := []struct{ text, name string }{
			{"SELECT @ FROM s", "@"},
			{"SELECT s.@ FROM s", "@"},
			{"SELECT @.a FROM s @", "a"},
			{"SELECT @.@ FROM s AS @", "@"},
			{"SELECT a FROM s WHERE @ = 1", "a"},
			{"SELECT a FROM s WHERE @ BETWEEN 1 AND 2", "a"},
			{"SELECT @, COUNT(*) FROM s GROUP BY @ ORDER BY @", "@"},
			{"SELECT @ + 1 AS x FROM s", "x"},
			{"SELECT x.@ FROM (SELECT @ FROM s) x", "@"},
			{"SELECT @ FROM (SELECT a AS @ FROM s) AS x", "@"},
			{"SELECT MAX(@) AS m FROM s", "m"},
			{"SELECT SUM(@), COUNT(@), AVG(@), MIN(@), COUNT(DISTINCT @) FROM s", "sum"},
			{"SELECT UPPER(CAST(@ AS VARCHAR)), -@, (@), CASE WHEN @ > 1 THEN @ ELSE @ END FROM s", "upper"},
			{"SELECT a FROM s WHERE @ IN (1, 2) AND @ IS NOT NULL GROUP BY a, @ HAVING MAX(@) > 1", "a"},
			{"SELECT x.@ FROM s JOIN s AS x ON s.@ = x.@", "@"},
			{"SELECT CAST(@ AS VARCHAR) FROM s", "@"},
			{"SELECT @::VARCHAR FROM s", "@"},
		}
		if k.bareLabel {
			shapes = append(shapes, struct{ text, name string }{"SELECT a @ FROM s", "@"})
		}
		for _, sh := range shapes {
			text := strings.ReplaceAll(sh.text, "@", w)
			q, err := bindOne(text, w)
			if err != nil {
				t.Errorf("%s: %v", text, err)
				continue
			}
			if want := strings.ReplaceAll(sh.name, "@", w); q.Names[0] != want {
				t.Errorf("%s: column named %q, want %q", text, q.Names[0], want)
			}
		}
		sts, err = Parse("INSERT INTO s (a, " + w + ") VALUES (1, 2)")
		if err != nil {
			t.Errorf("INSERT with column %s: %v", w, err)
		} else if ins := sts[0].(*Insert); len(ins.Columns) != 2 || ins.Columns[1] != w {
			t.Errorf("INSERT with column %s: columns %v", w, ins.Columns)
		}
	}
}

// TestReservedWordError: a word that stays reserved gives a syntax error that says so and
// shows the quoted form, which works.
func TestReservedWordError(t *testing.T) {
	for _, w := range []string{"order", "select", "where", "group", "limit"} {
		_, err := bindOne("SELECT a, "+w+" FROM s", w)
		if err == nil {
			t.Errorf("SELECT a, %s FROM s: no error", w)
			continue
		}
		e := err.(*Error)
		if e.Code != CodeSyntax || !strings.Contains(e.Message, "reserved word") || !strings.Contains(e.Message, `"`+w+`"`) {
			t.Errorf("SELECT a, %s FROM s: %v", w, err)
		}
		if q, err := bindOne(`SELECT a, "`+w+`" FROM s`, w); err != nil || q.Names[1] != w {
			t.Errorf(`SELECT a, "%s" FROM s: %v`, w, err)
		}
	}
}

// reservedProbes are statements in which @ stands for a name: a word the tidb parser
// refuses in one of them must be quoted to be a name.
var reservedProbes = []string{
	"SELECT 1 AS @",
	"SELECT @ FROM t",
	"SELECT SUM(@), COUNT(@), MAX(@), MIN(@), AVG(@), COUNT(DISTINCT @) FROM t",
	"SELECT UPPER(@), @ + 1, -@, (@), CASE WHEN @ THEN @ ELSE @ END FROM t",
	"SELECT a FROM t WHERE @ = 1 AND @ IN (1) GROUP BY @ HAVING @ > 1 ORDER BY @",
	"SELECT @.a FROM t @ JOIN u ON @.a = u.a",
}

// TestTidbReservedWords: tidbreserved.go lists exactly the PostgreSQL and MySQL keywords the
// tidb parser refuses as a name in one of reservedProbes (run with -rewrite to regenerate
// it after an upgrade of the parser).
func TestTidbReservedWords(t *testing.T) {
	tp := parser.New()
	words := map[string]bool{}
	for k := range pgKeywords {
		words[k] = true
	}
	for _, k := range parser.Keywords {
		if w := strings.ToLower(k.Word); isIdentStart(w[0]) {
			words[w] = true
		}
	}
	var reserved []string
	for w := range words {
		for _, p := range reservedProbes {
			if _, _, err := tp.Parse(strings.ReplaceAll(p, "@", w), "", ""); err != nil {
				reserved = append(reserved, w)
				break
			}
		}
	}
	sort.Strings(reserved)
	var b strings.Builder
	b.WriteString("// Code generated by TestTidbReservedWords (go test -run TestTidbReservedWords -rewrite); DO NOT EDIT.\n\npackage sql\n\n")
	b.WriteString("// tidbReservedWords are the PostgreSQL and MySQL keywords the tidb parser refuses as a\n// name in some place (keywords.go).\nvar tidbReservedWords = map[string]bool{\n")
	for _, w := range reserved {
		fmt.Fprintf(&b, "\t%q: true,\n", w)
	}
	b.WriteString("}\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if *rewriteGolden {
		if err := os.WriteFile("tidbreserved.go", src, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if len(reserved) != len(tidbReservedWords) {
		t.Fatalf("the parser reserves %d words, tidbreserved.go lists %d: run go test -run TestTidbReservedWords -rewrite", len(reserved), len(tidbReservedWords))
	}
	for _, w := range reserved {
		if !tidbReservedWords[w] {
			t.Fatalf("the parser reserves %s, tidbreserved.go does not list it: run go test -run TestTidbReservedWords -rewrite", w)
		}
	}
}
