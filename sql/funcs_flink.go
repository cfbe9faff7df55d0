package sql

// Functions of Flink SQL's dialect that the Nexmark queries use (docs/nexmark.md), for
// queries written for Flink to run unchanged.

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

func init() {
	register(
		textFn("REGEXP_EXTRACT", "REGEXP_EXTRACT(s, pattern [, group])", "the text of capture group `group` (default 0: the whole match) of the first match of `pattern` (Go RE2 syntax; a bad pattern is 2201B); NULL when nothing matches, or the group does not exist or took no part (Flink's function)", nil, 2, 3, buildRegexpExtract, TypeVarchar, 's', 's', 'i'),
		textFn("SPLIT_INDEX", "SPLIT_INDEX(s, delimiter, i)", "the `i`-th (from 0) of the parts of s between the delimiters; NULL when there are not that many, i < 0 or the delimiter is '' (Flink's function; `SPLIT_PART` counts from 1)", nil, 3, 3, buildSplitIndex, TypeVarchar, 's', 's', 'i'),
	)
}

// regexpExtractor is a compiled REGEXP_EXTRACT pattern with the literals every match
// contains: an input without one of them cannot match, which strings.Contains finds for a
// fraction of the cost of running the expression.
//
// When the pattern is a concatenation whose first required literal (anchor) follows a
// part that matches at most lead bytes, no match can start before the anchor's first
// occurrence minus lead: the expression runs from there (from, which sees no text start
// there) instead of trying every earlier position — for the URL patterns of Nexmark q21,
// one or two positions instead of dozens.
type regexpExtractor struct {
	re   *regexp.Regexp
	need []string
	// anchor, lead and from: see above; from is nil when the skip does not apply.
	anchor string
	lead   int
	from   *regexp.Regexp
	// simple, when the pattern is of its form, finds matches without Go's engines.
	simple *simpleRE
}

func newRegexpExtractor(pattern string) (*regexpExtractor, *Error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, Errorf(CodeInvalidRegex, "invalid regular expression: %v", err)
	}
	x := &regexpExtractor{re: re, need: requiredLiterals(pattern), simple: newSimpleRE(pattern)}
	x.anchor, x.lead, x.from = leadSkip(pattern, re.NumSubexp())
	if x.from != nil {
		// start looks for the anchor: the other literals are left to check.
		if i := slices.Index(x.need, x.anchor); i >= 0 {
			x.need = slices.Delete(x.need, i, i+1)
		}
	}
	return x, nil
}

func (x *regexpExtractor) extract(s string, group int64) Value {
	if group < 0 || group > int64(x.re.NumSubexp()) {
		return Null
	}
	var buf [maxSimpleCaps]int
	m, at := x.find(s, &buf)
	if m == nil || m[2*group] < 0 {
		return Null
	}
	return Varchar(s[at+m[2*group] : at+m[2*group+1]])
}

// start is the byte of s from which a match is searched for: 0, or (with the lead skip)
// the anchor's first occurrence minus the lead; !ok when the anchor does not occur.
func (x *regexpExtractor) start(s string) (at int, ok bool) {
	if x.from == nil {
		return 0, true
	}
	i := strings.Index(s, x.anchor)
	return max(i-x.lead, 0), i >= 0
}

// find is FindStringSubmatchIndex(s) of the pattern, its offsets relative to s[at:]; the
// simple form writes them into buf.
func (x *regexpExtractor) find(s string, buf *[maxSimpleCaps]int) (m []int, at int) {
	at, ok := x.start(s)
	if !ok {
		return nil, 0
	}
	for _, l := range x.need {
		if !strings.Contains(s, l) {
			return nil, 0
		}
	}
	if x.simple != nil {
		m = buf[:x.simple.ncap]
		if found, ok := x.simple.find(s, at, m); ok {
			if !found {
				return nil, 0
			}
			return m, 0
		}
	}
	return x.goFind(s, at)
}

// goFind is find through Go's regexp, from byte at.
func (x *regexpExtractor) goFind(s string, at int) (m []int, _ int) {
	if at > 0 {
		return x.from.FindStringSubmatchIndex(s[at:]), at
	}
	return x.re.FindStringSubmatchIndex(s), 0
}

// leadSkip finds, for a pattern whose top level is a concatenation, its first
// case-sensitive literal (anchor) and the most bytes the parts before it can match (lead),
// and compiles the pattern with its text-start assertions made impossible (from: matching
// s[k:] with k > 0, where no position is the start of the text). It gives up (from nil)
// when the lead is unbounded or the pattern has assertions that look at the byte before a
// position (line starts, word boundaries), which s[k:] would not show.
func leadSkip(pattern string, subexps int) (anchor string, lead int, from *regexp.Regexp) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", 0, nil
	}
	re = re.Simplify()
	if lookBehind(re) {
		return "", 0, nil
	}
	top := re
	for top.Op == syntax.OpCapture {
		top = top.Sub[0]
	}
	if top.Op != syntax.OpConcat {
		return "", 0, nil
	}
	for i, sub := range top.Sub {
		lit := sub
		for lit.Op == syntax.OpCapture {
			lit = lit.Sub[0]
		}
		if lit.Op != syntax.OpLiteral || lit.Flags&syntax.FoldCase != 0 {
			continue
		}
		for _, p := range top.Sub[:i] {
			w, ok := maxWidth(p)
			if !ok {
				return "", 0, nil
			}
			lead += w
		}
		noTextStart(re)
		from, err := regexp.Compile(re.String())
		if err != nil || from.NumSubexp() != subexps {
			return "", 0, nil
		}
		return string(lit.Rune), lead, from
	}
	return "", 0, nil
}

// lookBehind reports whether the expression has an assertion that depends on the byte
// before a position other than the start of the text.
func lookBehind(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	for _, sub := range re.Sub {
		if lookBehind(sub) {
			return true
		}
	}
	return false
}

// noTextStart replaces the text-start assertions of re with a match of nothing.
func noTextStart(re *syntax.Regexp) {
	if re.Op == syntax.OpBeginText {
		*re = syntax.Regexp{Op: syntax.OpNoMatch}
		return
	}
	for _, sub := range re.Sub {
		noTextStart(sub)
	}
}

// maxWidth is the most bytes re can match, if bounded.
func maxWidth(re *syntax.Regexp) (int, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpNoMatch, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpBeginLine, syntax.OpEndLine, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 0, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return utf8.UTFMax * len(re.Rune), true // a folded rune may be wider
		}
		n := 0
		for _, r := range re.Rune {
			n += utf8.RuneLen(r)
		}
		return n, true
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax, true // (an invalid byte matches as U+FFFD: one byte)
	case syntax.OpCapture, syntax.OpQuest:
		return maxWidth(re.Sub[0])
	case syntax.OpRepeat:
		if re.Max < 0 {
			return 0, false
		}
		w, ok := maxWidth(re.Sub[0])
		return w * re.Max, ok
	case syntax.OpConcat, syntax.OpAlternate:
		total := 0
		for _, sub := range re.Sub {
			w, ok := maxWidth(sub)
			if !ok {
				return 0, false
			}
			if re.Op == syntax.OpConcat {
				total += w
			} else {
				total = max(total, w)
			}
		}
		return total, true
	}
	return 0, false // star, plus
}

func buildRegexpExtract(c *Call, args []Evaluator) (Evaluator, error) {
	var fixed *regexpExtractor
	var fixedErr Value
	if IsConstant(c.Args[1]) {
		if p := args[1](nil); p.K != KindNull {
			var err *Error
			if fixed, err = newRegexpExtractor(p.S); err != nil {
				fixedErr = errValue(err)
			}
		}
	}
	if fixed != nil && (len(args) == 2 || IsConstant(c.Args[2])) {
		// The usual form: only the text varies, evaluated alone.
		group := int64(0)
		if len(args) == 3 {
			g := args[2](nil)
			if g.K == KindNull {
				return func(Row) Value { return g }, nil
			}
			group = g.I
		}
		return strict1(args[0], func(v Value) Value { return fixed.extract(v.S, group) }), nil
	}
	// A pattern from a column: the last one compiled is kept, for rows that repeat it.
	var last lastResult[string, *regexpExtractor]
	return strictN(args, func(vs []Value) Value {
		x := fixed
		if x == nil {
			if fixedErr.K != KindNull {
				return fixedErr
			}
			var ok bool
			if x, ok = last.get(vs[1].S); !ok {
				var err *Error
				if x, err = newRegexpExtractor(vs[1].S); err != nil {
					return errValue(err)
				}
				last.put(vs[1].S, x)
			}
		}
		group := int64(0)
		if len(vs) == 3 {
			group = vs[2].I
		}
		return x.extract(vs[0].S, group)
	}), nil
}

func buildSplitIndex(c *Call, args []Evaluator) (Evaluator, error) {
	return strictN(args, func(vs []Value) Value {
		s, sep, i := vs[0].S, vs[1].S, vs[2].I
		if sep == "" || i < 0 {
			return Null
		}
		for ; i > 0; i-- {
			k := strings.Index(s, sep)
			if k < 0 {
				return Null
			}
			s = s[k+len(sep):]
		}
		if k := strings.Index(s, sep); k >= 0 {
			s = s[:k]
		}
		return Varchar(s)
	}), nil
}

// requiredLiterals are strings every match of the regular expression contains: the
// case-sensitive literals of its top-level concatenation (through capture groups).
func requiredLiterals(pattern string) []string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	var out []string
	add := func(r *syntax.Regexp) {
		for r.Op == syntax.OpCapture {
			r = r.Sub[0]
		}
		if r.Op == syntax.OpLiteral && r.Flags&syntax.FoldCase == 0 {
			out = append(out, string(r.Rune))
		}
	}
	if re.Op == syntax.OpConcat {
		for _, sub := range re.Sub {
			add(sub)
		}
	} else {
		add(re)
	}
	return out
}
