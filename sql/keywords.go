package sql

import (
	"sort"
	"strings"
)

// Keywords as names (docs/sql.md, "Identifiers"). rsql's SQL is PostgreSQL's, but the
// grammar behind the pre-pass is MySQL's, which reserves words PostgreSQL lets a user
// name columns with (key, rows, range, groups, partition, ...). The pre-pass quotes such a
// word where it is a name, so that the tidb parser reads an identifier:
//
//   - after AS, any keyword (PostgreSQL's ColLabel: SELECT 1 AS order);
//   - elsewhere, a PostgreSQL unreserved or column-name keyword, or a word that is no
//     PostgreSQL keyword (rank, lead, div), that MySQL reserves, unless it stands where
//     the grammar rsql accepts uses it as a keyword (a call f(...), GROUP BY, PARTITION
//     BY, x BETWEEN a AND b, x DIV y, f(...) OVER (...), WITH RECURSIVE, DOUBLE
//     PRECISION, a window frame's ROWS BETWEEN and CURRENT ROW).
//
// A word that stays reserved gets a syntax error that says so and shows the quoted form.

// tidbReserved reports whether the tidb parser refuses w (lower case), a PostgreSQL or
// MySQL keyword, as a name somewhere: the words the pre-pass must quote to use as names
// (tidbReservedWords, which TestTidbReservedWords derives from the parser).
func tidbReserved(w string) bool { return tidbReservedWords[w] }

// nameKeyword reports whether w is a word PostgreSQL accepts as a column name (an
// unreserved or column-name keyword, or no keyword at all: rank, div) that the tidb parser
// reserves.
func nameKeyword(w string) bool {
	w = strings.ToLower(w)
	c, kw := pgKeywords[w]
	return (!kw || c == 'U' || c == 'C') && tidbReserved(w)
}

// isNameAt reports whether the bare word toks[i] is used as a name where it stands (see
// above); start is the first token of the statement part, prevName says the token before
// is a keyword used as a name.
func isNameAt(toks []token, start, i int, prevName bool) bool {
	t := toks[i]
	var prev token
	if i > start {
		prev = toks[i-1]
	}
	next := toks[i+1] // the tokens end with tokEOF
	w := strings.ToLower(t.Val)
	// prevEnds: the token before ends an operand (so a BETWEEN or OVER after it is one).
	prevEnds := i > start && (prevName || endsOperand(prev))
	if prev.is("AS") && !prevName {
		return tidbReserved(w)
	}
	if !nameKeyword(w) {
		return false
	}
	if prev.isP(".") || next.isP(".") {
		return true
	}
	if next.isP("(") {
		return false // a call, ROW(...), EXISTS (...), VALUES(...)
	}
	switch w {
	case "by":
		return !(prev.is("GROUP") || prev.is("ORDER") || prev.is("PARTITION"))
	case "partition":
		return !next.is("BY")
	case "between", "div", "mod", "xor", "regexp", "rlike":
		// An operator has operands on both sides: FROM s between, SELECT a between FROM
		// s name an alias.
		op := prevEnds || prev.is("NOT") && i-1 > start && endsOperand(toks[i-2])
		nextStarts := next.Kind != tokEOF && !next.isP(",") && !next.isP(")") && !next.isP(";") && !isClauseWord(next) && !next.is("FROM")
		return !(op && nextStarts)
	case "over":
		return !prev.isP(")")
	case "rows", "range", "groups":
		// A window frame: ROWS BETWEEN ..., ROWS UNBOUNDED PRECEDING, ROWS 3 PRECEDING.
		frame := next.is("BETWEEN") || next.is("UNBOUNDED") || next.is("CURRENT") ||
			next.Kind == tokNumber && (toks[i+2].is("PRECEDING") || toks[i+2].is("FOLLOWING"))
		return !(frame && (prevEnds || prev.is("ASC") || prev.is("DESC")))
	case "row":
		return !prev.is("CURRENT") // a window frame's CURRENT ROW
	case "recursive":
		return !prev.is("WITH")
	case "update":
		return !prev.is("FOR")
	case "of":
		return !prev.is("UPDATE")
	case "double":
		return !next.is("PRECISION")
	case "precision":
		return !prev.is("DOUBLE")
	case "varying", "set":
		return !(prev.is("CHARACTER") || prev.is("CHAR"))
	}
	return true
}

// quoteKeywordNames adds to edits the quoting of every keyword used as a name in
// toks[start:], except within text an edit already replaces.
func quoteKeywordNames(toks []token, start int, edits []edit) []edit {
	var spans [][2]int
	for _, e := range edits {
		if e.end > e.pos {
			spans = append(spans, [2]int{e.pos, e.end})
		}
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a][0] < spans[b][0] })
	// reach[k] is the furthest end of spans[:k+1], so one search finds a covering span.
	reach := make([]int, len(spans))
	for k, s := range spans {
		reach[k] = s[1]
		if k > 0 {
			reach[k] = max(reach[k], reach[k-1])
		}
	}
	covered := func(t token) bool {
		k := sort.Search(len(spans), func(k int) bool { return spans[k][0] > t.Pos }) - 1
		return k >= 0 && reach[k] >= t.End
	}
	prevName := false
	for i := start; i < len(toks) && toks[i].Kind != tokEOF; i++ {
		t := toks[i]
		name := t.Kind == tokIdent && isNameAt(toks, start, i, prevName) && !covered(t)
		if name {
			edits = append(edits, edit{t.Pos, t.End, `"` + t.Val + `"`, 0})
		}
		prevName = name
	}
	return edits
}

// reservedHint is the advice a syntax error at the bare word w adds when w is a keyword
// the parser reserves: how to write it as a name.
func reservedHint(w string) string {
	l := strings.ToLower(w)
	if !tidbReserved(l) {
		return ""
	}
	return ": " + strings.ToUpper(w) + " is a reserved word here; to use it as a name, quote it: \"" + l + "\""
}
