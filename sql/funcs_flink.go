package sql

// Functions of Flink SQL's dialect that the Nexmark queries use (docs/nexmark.md), for
// queries written for Flink to run unchanged.

import (
	"regexp"
	"regexp/syntax"
	"strings"
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
type regexpExtractor struct {
	re   *regexp.Regexp
	need []string
}

func newRegexpExtractor(pattern string) (*regexpExtractor, *Error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, Errorf(CodeInvalidRegex, "invalid regular expression: %v", err)
	}
	return &regexpExtractor{re: re, need: requiredLiterals(pattern)}, nil
}

func (x *regexpExtractor) extract(s string, group int64) Value {
	if group < 0 || group > int64(x.re.NumSubexp()) {
		return Null
	}
	for _, l := range x.need {
		if !strings.Contains(s, l) {
			return Null
		}
	}
	m := x.re.FindStringSubmatchIndex(s)
	if m == nil || m[2*group] < 0 {
		return Null
	}
	return Varchar(s[m[2*group]:m[2*group+1]])
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
	return strictN(args, func(vs []Value) Value {
		x := fixed
		if x == nil {
			if fixedErr.K != KindNull {
				return fixedErr
			}
			var err *Error
			if x, err = newRegexpExtractor(vs[1].S); err != nil {
				return errValue(err)
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
